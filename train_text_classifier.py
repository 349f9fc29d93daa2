"""Train a text classifier: CNN / BiLSTM / RNN / BOW, a pretrained transformer, or SNLI pairs.

    python train_text_classifier.py --dataset stsa.binary --model cnn \
        --word_vectors ../shared/data/glove/glove.6B.50d.txt.gz --data-dir ../shared/data
    python train_text_classifier.py --dataset stsa.binary --model minilm --data-dir ../shared/data

Writes results/<dataset>_<model>/: best_model.npz (best dev accuracy), vocab.json,
args.json, calib.json, log (per-epoch JSON), train.log and train_result.json. The
training itself is deepknn/models/training.py; this file maps flags to its RunConfig.
"""
import os

import nets
import text_datasets
from deepknn import cli
from deepknn.data import sources
from deepknn.models import model_setup
from deepknn.storage import run_config
from deepknn.models import training
from nlp_utils import UserError

# Defaults that depend on the model: (Chainer models, pretrained transformers).
MODEL_DEFAULTS = {'epoch': (30, 3), 'batchsize': (64, 32), 'lr': (None, 3e-5)}


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    parser.add_argument('--dataset', '-data', default='stsa.binary',
                        choices=sorted(text_datasets.DATASETS), help='dataset name')
    parser.add_argument('--model', '-model', default='cnn',
                        choices=nets.MODELS + model_setup.TRANSFORMER_MODELS,
                        help='encoder: cnn (Kim 2014), bilstm, rnn or bow; minilm (the packaged '
                             'pretrained all-MiniLM-L6-v2, fine-tuned) or transformer (a BERT '
                             'checkpoint folder of yours, --pretrained)')
    parser.add_argument('--pretrained', type=os.path.abspath, default=None,
                        help='--model transformer: a folder with config.json, '
                             'model.safetensors and tokenizer.json of a BERT-architecture model')
    parser.add_argument('--max-length', type=cli.positive_int, default=128,
                        help='transformers: word pieces per input; longer inputs are '
                             'truncated (and counted)')
    parser.add_argument('--lr', type=cli.positive_number, default=None,
                        help='peak learning rate (default: Adam 0.001 for the Chainer models, '
                             '3e-5 with warm-up and linear decay for transformers)')
    parser.add_argument('--warmup', type=cli.fraction, default=0.1,
                        help='transformers: fraction of the steps over which the rate rises')
    parser.add_argument('--word_vectors', '--word-vectors', default=None,
                        help='GloVe/word2vec text file (.txt, .gz or .zip)')
    parser.add_argument('--embed-dim', type=cli.positive_int, default=300,
                        help='embedding size without --word_vectors (with them, their size)')
    cli.add_batchsize(parser, None, 'examples per training batch (default: 64, transformers 32)')
    cli.add_epoch(parser, None, 'epochs; the model with the best dev accuracy is kept (default: '
                  '30, transformers 3)')
    parser.add_argument('--unit', '-u', type=cli.positive_int, default=300,
                        help='size of filters (CNN: unit // 3 per width), LSTMs and FC layers')
    # --layer is the activation layer elsewhere: here it stays a hidden alias.
    parser.add_argument('--lstm-layers', '-l', dest='layer', type=cli.positive_int,
                        default=3, help='recurrent layers')
    cli.add_hidden_alias(parser, '--layer', 'layer', type=cli.positive_int)
    parser.add_argument('--dropout', '-d', type=cli.fraction, default=0.4,
                        help='dropout rate, in [0, 1)')
    cli.add_result_folder(parser, 'result folder (default results/<dataset>_<model>)')
    parser.add_argument('--char-based', action='store_true', help='characters as tokens')
    cli.add_seed(parser, 777, 'seeds data splits, initialisation and batch order')
    cli.add_device(parser)
    parser.add_argument('--train-file', default=None,
                        help='training data in place of the dataset\'s (custom: required)')
    parser.add_argument('--dev-file', default=None,
                        help='dev data (default: the official dev split, else a seeded part of train)')
    parser.add_argument('--test-file', default=None,
                        help='test data in place of the dataset\'s (custom: required)')
    parser.add_argument('--n-calib', type=cli.non_negative_int, default=None,
                        help='held-out training examples for DkNN calibration (default: 1000, '
                             'or 10%% of small training sets, said so)')
    parser.add_argument('--dev-fraction', type=cli.fraction, default=0.1,
                        help='part of train used as dev where there is no official dev split')
    parser.add_argument('--min-freq', type=cli.positive_int, default=2,
                        help='rarer words become <unk> unless they have a pretrained vector')
    parser.add_argument('--vocab', choices=('pretrained', 'train'), default='pretrained',
                        help='pretrained: training words plus every word of the data that has '
                             'a pretrained vector (Kim 2014; labels unused); train: training '
                             'words only (the original code)')
    parser.add_argument('--max-vocab', type=cli.positive_int, default=None,
                        help='largest vocabulary, <eos> and <unk> included')
    parser.add_argument('--select-on-test', action='store_true',
                        help='pick the best epoch on the test set, as the original code did')
    parser.add_argument('--dev-average', choices=run_config.DEV_AVERAGES, default='examples',
                        help="how the dev accuracy that picks the epoch averages: 'examples' "
                             "(each alike) or 'batches' (Chainer's Evaluator, a mean of batch "
                             "means: the original code, and our runs trained before "
                             "2026-11-26, which it retrains as they were)")
    cli.add_skip_bad_lines(parser)
    parser.add_argument('--allow-unseen-labels', action='store_true',
                        help='custom data: accept dev/test labels that the training file lacks')
    parser.add_argument('--snli-majority', action='store_true',
                        help="keep SNLI pairs with gold label '-' using the annotator majority")
    parser.add_argument('--exclude-train', type=os.path.abspath, default=None,
                        help='JSON list of training-split indices to drop (removal experiment)')
    parser.add_argument('--label-noise', type=cli.fraction, default=0.0,
                        help='fraction of training labels to flip, in [0, 1)')
    parser.add_argument('--label-noise-seed', type=cli.seed, default=0,
                        help='seed choosing the flipped examples and their new labels')
    parser.add_argument('--keep-epochs', action='store_true',
                        help="keep every epoch's model (model_epoch<N>.npz): the checkpoints "
                             'TracIn sums over (docs/attribution.md)')
    existing = parser.add_mutually_exclusive_group()
    cli.add_force(existing)
    existing.add_argument('--resume', action='store_true',
                          help='continue the run in --out from its last snapshot (e.g. with a '
                               'larger --epoch); never deletes anything')
    return parser.parse_args(argv)


def absolute(path):
    return os.path.abspath(path) if path else None


def make_config(args):
    """The RunConfig of the flags: everything load_setup needs to rebuild model and data.
    Data paths are absolute; paths inside the result folder are relative, so the folder
    can be moved. Class count and the like are filled in from the data by training."""
    flags = {k: v for k, v in vars(args).items() if k not in ('force', 'resume', 'gpu', 'out')}
    transformer = flags['model'] in model_setup.TRANSFORMER_MODELS
    for name, defaults in MODEL_DEFAULTS.items():
        if flags[name] is None:
            flags[name] = defaults[transformer]
    if flags['model'] == 'transformer' and not args.pretrained:
        raise UserError('--model transformer needs --pretrained DIR (a BERT checkpoint folder); '
                        'for the packaged MiniLM use --model minilm')
    if args.pretrained and flags['model'] != 'transformer':
        raise UserError('--pretrained goes with --model transformer, not --model {}'.format(
            flags['model']))
    if transformer and args.word_vectors:
        raise UserError('--word_vectors is for the Chainer models; a transformer has its own '
                        'word-piece embeddings')
    flags.update(data_dir=absolute(sources.resolve_data_dir(args.data_dir)),
                 word_vectors=absolute(args.word_vectors), train_file=absolute(args.train_file),
                 dev_file=absolute(args.dev_file), test_file=absolute(args.test_file),
                 vocab_path='vocab.json', model_path='best_model.npz', n_class=0, pair=False)
    return model_setup.RunConfig(**flags)


def main(argv=None):
    args = parse_args(argv)
    out = args.out or os.path.join(cli.RESULTS, '{}_{}'.format(args.dataset, args.model))
    if args.resume:
        training.continue_training(out, args.epoch, args.gpu)
    else:
        training.train(make_config(args), out, args.gpu, args.force,
                       created_by=cli.command_name(__file__))


if __name__ == '__main__':
    cli.run_cli(main)
