"""Fine-tune a trained model with entropy regularisation on reduced inputs (Feng et al. 2018).

    python finetune_entropy.py --model-setup results/stsa.binary_cnn/args.json \
        [--lambda 1] [--lr 1e-4] [--epoch 3] [--reduce-limit N] [--out DIR] [--force]

Reduces the training split with input reduction (gradient importance, beam 5; cached
as JSON in the parent folder, and resumed from its last step when interrupted), fine-tunes on NLL of regular batches alternating with
-lambda * entropy of reduced batches, and writes a result folder (default
results/<run>_entropy) that load_setup and every other script read like any other.
An existing --out is replaced only with --force (and only a result folder of this tool,
never the parent run); its lock is held from the start, so a second fine-tune into the
same folder is refused at once.
"""
import os

from deepknn import cli
from deepknn.feng import entropy_regularization as er
from deepknn.feng import input_reduction
from deepknn.models import model_setup
import nlp_utils
from deepknn.storage import result_folder
from deepknn.interpret import saliency


# The importances that need neither a DkNN nor temperature.json (the registry decides).
TRAINING_IMPORTANCES = tuple(name for name, method in saliency.REGISTRY.items()
                             if not method.needs_dknn and not method.needs_temperature)


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser, help='args.json of the parent run (or its folder)')
    parser.add_argument('--lambda', dest='lam', type=float, default=er.DEFAULT_LAMBDA,
                        help='weight of the entropy on reduced inputs (>= 0)')
    parser.add_argument('--lr', type=float, default=er.DEFAULT_LR, help='Adam learning rate')
    cli.add_epoch(parser, er.DEFAULT_EPOCHS, 'fine-tuning epochs')
    cli.add_batchsize(parser, help='examples per batch (regular and reduced alike)')
    cli.add_methods(parser, saliency, ('gradient',), 'the importance that reduces the training '
                    'set, one of {}'.format(', '.join(TRAINING_IMPORTANCES)),
                    old_flag='--importance')
    parser.add_argument('--beam', type=int, default=input_reduction.DEFAULT_BEAM,
                        help='maximum beam size k (beam max(1, min(k, L - 3)))')
    parser.add_argument('--reduce-limit', type=cli.positive_int, default=None,
                        help='reduce only the first N training examples (CPU time)')
    cli.add_seed(parser, None, "default: the parent's seed")
    cli.add_result_folder(parser, 'the fine-tuned result folder (default results/<run>_entropy)')
    cli.add_force(parser)
    cli.add_device(parser)
    return parser.parse_args(argv)


def check_args(args):
    if len(args.methods) != 1 or args.methods[0] not in TRAINING_IMPORTANCES:
        raise nlp_utils.UserError('--methods {}: the training set is reduced with one of {} '
                                  '(no DkNN or temperature while the model changes)'.format(
                                      ','.join(args.methods), ', '.join(TRAINING_IMPORTANCES)))
    er.check_lambda(args.lam)
    input_reduction.check_beam(args.beam)
    if not 0 < args.lr < float('inf'):
        raise nlp_utils.UserError('--lr must be a finite number > 0, got {}'.format(args.lr))


def main(argv=None):
    args = parse_args(argv)
    check_args(args)
    setup = model_setup.load_setup(args.model_setup, args.gpu, args.data_dir)
    out = os.path.abspath(args.out or os.path.join(
        os.path.dirname(setup.result_dir), os.path.basename(setup.result_dir) + '_entropy'))
    result_folder.check_not_nested(out, setup.result_dir)
    with result_folder.lock(out, 'finetune_entropy.py'):   # from the start: no twin run
        result_folder.sweep_stale(out)
        result_folder.check_new_out(out, args.force)     # before the slow reduction
        finetune_into(out, args, setup)


def finetune_into(out, args, setup):
    importance, = args.methods
    reduced = er.reduced_training_set(setup, importance, args.beam, args.reduce_limit)
    print('reduced training set: {} inputs from {} training examples'.format(
        len(reduced), args.reduce_limit or len(setup.splits.train)))
    seed = setup.config.seed if args.seed is None else args.seed
    history = er.finetune(setup.model, setup.train,
                          [nlp_utils.example_to_ids(x, setup.vocab) for x in reduced],
                          args.lam, args.lr, args.epoch, args.batchsize, seed)
    for row in history:
        print('epoch {epoch}: nll {nll:.4f}  entropy on reduced {entropy:.4f}'.format(**row))
    settings = {'entropy_lambda': args.lam, 'finetune_lr': args.lr,
                'finetune_epochs': args.epoch, 'finetune_seed': seed,
                'reduction_importance': importance, 'reduction_beam': args.beam,
                'reduction_limit': args.reduce_limit, 'n_reduced_inputs': len(reduced)}
    print('wrote', er.write_finetuned_folder(out, setup, setup.model, settings, history,
                                             cli.command_name(__file__)))


if __name__ == '__main__':
    cli.run_cli(main)
