"""Deep k-Nearest Neighbors (Papernot & McDaniel 2018) over a trained text classifier.

    python run_dknn.py --model-setup results/stsa.binary_cnn/args.json [--split dev]
    python run_dknn.py --model-setup results/stsa.binary_cnn/args.json --eval-file hard.txt
    python run_dknn.py --activations DIR    # activations computed by any framework

Caches every DkNN layer's activations of the training data (minus the calibration
split), indexes them, calibrates on the calibration split, and reports accuracy with
the softmax and with DkNN, plus credibility and confidence, on the chosen split or file;
writes dknn_<split>_<backend>.json and dknn_predictions_<split>_<backend>.npz, their names
tagged by any setting that differs from the defaults (dknn_test_faiss_k16.json), so
reports of other settings never replace each other. --trust adds the shift study's trust
scorers (docs/shift.md): each one's score per example (trust_<name> in the npz) and its
AUROC of right vs wrong softmax predictions beside credibility's and max softmax's.
"""
import os
import sys

from deepknn import cli
from deepknn.neighbors import dknn as dknn_lib
from deepknn.neighbors import dknn_evaluation
from deepknn.models import model_setup
from deepknn.evaluation.ranking import auroc
from deepknn.shift import trust as trust_lib
from deepknn.shift.scorers import SCORERS
import nlp_utils
from deepknn.storage import result_folder
from nlp_utils import UserError


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    cli.add_model_setup(source, required=False)
    source.add_argument('--activations', metavar='DIR',
                        help='a folder with train.npz, calib.npz and test.npz (arrays layer_0, '
                             'layer_1, ..., labels, optionally logits) from any framework')
    evaluated = parser.add_mutually_exclusive_group()
    cli.add_split(evaluated, help='split to evaluate (with --activations: DIR/<split>.npz)')
    evaluated.add_argument('--eval-file', default=None,
                           help="evaluate this file instead, in the training data's format")
    cli.add_out(parser, 'folder for the report (default: the result folder, or DIR)')
    cli.add_backend(parser, help='nearest-neighbour search: faiss (exact by default, the '
                    "fastest), kdtree (the paper's; same neighbours), lsh (approximate)")
    parser.add_argument('--lsh', dest='backend', action='store_const', const='lsh',
                        help='alias of --backend lsh (the original flag)')
    cli.add_k(parser)
    cli.add_batchsize(parser)
    cli.add_device(parser)
    cli.add_skip_bad_lines(parser)
    cli.add_engine(parser)
    parser.add_argument('--neighbor-labels', choices=('gold', 'predicted'), default='gold',
                        help="training labels (gold, like the original code) or the model's "
                             "predictions (as the paper's text says)")
    parser.add_argument('--last-layer-only', action='store_true',
                        help="only the last layer's neighbours count (the original KD-tree path)")
    cli.add_index_options(parser)
    cli.add_trust(parser, SCORERS)
    parser.add_argument('--no-cache', action='store_true', help='recompute train activations')
    args = parser.parse_args(argv)
    if args.activations and args.eval_file:
        parser.error('--eval-file needs --model-setup; with --activations use --split')
    if args.activations and args.engine != 'local':
        parser.error('--engine ray needs --model-setup (it runs the model on the cluster)')
    if args.activations and args.trust:
        parser.error('--trust needs --model-setup (its scorers are fitted on the run\'s splits)')
    return args


def warn_about_split(split):
    if split == 'train':
        print('warning: on the training split every example is its own nearest neighbour, '
              'so DkNN accuracy is optimistic', file=sys.stderr)
    elif split == 'calib':
        print('warning: the calibration split calibrated the p-values, so credibility on it '
              'is optimistic', file=sys.stderr)


def report_variant(settings):
    """The part of the report's name that tells its DkNNSettings from the defaults: ''
    for k 75, gold neighbour labels, every layer and an exact index; else e.g. '_k16',
    '_predicted-labels_last-layer', '_ivfpq-m8-nprobe16'. A k or index sweep keeps
    every report."""
    parts = [] if settings.k == cli.DEFAULT_K else ['k{}'.format(settings.k)]
    parts += ['predicted-labels'] if settings.neighbor_labels == 'predicted' else []
    parts += ['last-layer'] if settings.last_layer_only else []
    options = settings.index_options
    if settings.backend == 'faiss' and options['kind'] != 'flat':
        shown = {'hnsw': ('ef_search',), 'ivf': ('nprobe',), 'ivfpq': ('pq_m', 'nprobe')}
        parts.append('-'.join([options['kind']] + ['{}{}'.format(
            name.replace('pq_m', 'm').replace('ef_search', 'ef'), options[name])
            for name in shown[options['kind']] if options.get(name) is not None]))
    elif settings.backend == 'lsh' and options:
        parts.append('-'.join('{}{}'.format(name.replace('n_', ''), value)
                              for name, value in sorted(options.items())))
    return ''.join('_' + part for part in parts)


def write_report(folder, split, report, evaluation, variant):
    """dknn_<split>_<backend><variant>.json and its per-example npz, as one group."""
    # A Ray run's files are named apart, so they never replace the one-process report.
    backend = report['backend'] + ('_ray' if report.get('engine', 'local') != 'local' else '')
    report_name, predictions_name = dknn_evaluation.output_names(split, backend, variant)
    arrays = {key: value for key, value in evaluation.items()
              if key in dknn_evaluation.PREDICTION_KEYS or key.startswith(TRUST_PREFIX)}
    nlp_utils.atomic_write_files([
        nlp_utils.json_write(os.path.join(folder, report_name), report),
        nlp_utils.savez_write(os.path.join(folder, predictions_name), arrays)])
    return os.path.join(folder, report_name)


TRUST_PREFIX = 'trust_'


def add_trust_scores(setup, settings, names, examples, evaluation):
    """Each trust scorer's score per example into `evaluation` (trust_<name>), and the
    report's 'trust': {name: AUROC of right vs wrong softmax predictions}, with
    credibility's and max softmax's for comparison (the shift study's measure)."""
    fitted = trust_lib.fitted_trust(setup, settings, names)
    layers = setup.model.layer_activations([x for x, _ in setup.encode(examples)],
                                           settings.batchsize, progress='trust scores')
    scores = trust_lib.trust_scores(fitted, layers)
    probabilities = evaluation['softmax_probability']
    right = probabilities.argmax(axis=1) == evaluation['label']
    compared = dict({'credibility': evaluation['credibility'],
                     'max softmax': probabilities.max(axis=1)},
                    **{name: values for name, values in scores.items()})
    evaluation.update({TRUST_PREFIX + name: values for name, values in scores.items()})
    return {name: {'auroc_right_vs_wrong': auroc(values, right)}
            for name, values in compared.items()}


def report_settings(settings, dknn, split, eval_file):
    """The report's record of the DkNNSettings it was made with."""
    return dict(backend=settings.backend, k=settings.k, split=split, eval_file=eval_file,
                last_layer_only=settings.last_layer_only, index_options=settings.index_options,
                n_short_queries=dknn.n_short_queries)


def evaluate_model(args):
    """DkNN of a trained model of this project on a split or file -> (report, path)."""
    setup = model_setup.load_setup(args.model_setup, args.gpu, args.data_dir)
    split, examples = setup.evaluation_examples(args.split, args.eval_file, args.skip_bad_lines)
    if not examples:
        raise UserError('the {} split of {} is empty; choose another --split'.format(
            split, setup.result_dir))
    warn_about_split(split)
    settings = cli.dknn_settings(args, setup.result_dir)
    # The report goes into the run folder by default: held while it is made, and the
    # DkNN build inside writes the folder's caches under this same (process's) lock.
    with result_folder.lock(setup.result_dir, 'run_dknn.py'):
        timer = dknn_lib.PhaseTimer()
        dknn = dknn_lib.dknn_from_setup(setup, settings, not args.no_cache, timer)
        with timer('evaluate'):
            evaluation = dknn_evaluation.evaluate_split(
                setup, dknn, split if args.eval_file is None else None, examples, settings)
        if args.trust:
            trusted = add_trust_scores(setup, settings, args.trust, examples, evaluation)
        report = dknn_evaluation.summary(evaluation)
        if args.trust:
            report['trust'] = trusted
        report.update(report_settings(settings, dknn, split, args.eval_file),
                      neighbor_labels=settings.neighbor_labels, seconds=timer.seconds,
                      dataset=setup.config.dataset, model=setup.config.model,
                      engine=settings.engine.description() if settings.engine else 'local')
        return report, write_report(args.out or setup.result_dir, split, report, evaluation,
                                    report_variant(settings))


def activation_classes(folder, split, *splits):
    """The class count of --activations: the logits' width where a split has logits
    (all alike), else one more than the largest training label; every split's labels
    are then checked against it by the DkNN."""
    names = ('train', 'calib', split)
    widths = {name: logits.shape[1] for name, (_, _, logits) in zip(names, splits)
              if logits is not None}
    if len(set(widths.values())) > 1:
        raise UserError('--activations {}: the logits have different widths {}; every split '
                        'must come from the same model'.format(folder, widths))
    if widths:
        return next(iter(widths.values()))
    return 1 + int(splits[0][1].max())


def evaluate_activations(args):
    """DkNN over activations in --activations DIR -> (report, path)."""
    folder = args.activations
    if not os.path.isdir(folder):
        raise UserError('--activations {} is not a folder'.format(folder))
    train, calib, evaluated = (dknn_evaluation.read_activations(os.path.join(folder, name + '.npz'))
                               for name in ('train', 'calib', args.split))
    n_class = activation_classes(folder, args.split, train, calib, evaluated)
    warn_about_split(args.split)
    settings = cli.dknn_settings(args, folder)
    dknn = dknn_lib.DkNN(n_class, settings.backend, settings.k, settings.last_layer_only,
                         settings.index_options)
    for name, (layers, labels, _) in (('train', train), ('calib', calib), (args.split, evaluated)):
        # Every split is checked before the slow indexing: labels, layer count and widths.
        dknn.checked_labels(labels, len(labels), '{}.npz labels'.format(name))
        widths = [layer.shape[1] for layer in layers]
        if widths != [layer.shape[1] for layer in train[0]]:
            raise UserError('--activations {}: {}.npz has layer widths {}, train.npz {}; every '
                            'split must come from the same model'.format(
                                folder, name, widths, [l.shape[1] for l in train[0]]))
    dknn.fit(train[0], train[1], progress=True).calibrate(calib[0], calib[1])
    evaluation = dknn_evaluation.evaluate_activations(dknn, evaluated[0], evaluated[1], evaluated[2])
    report = dknn_evaluation.summary(evaluation)
    report.update(report_settings(settings, dknn, args.split, None),
                  activations=os.path.abspath(folder),
                  n_class=n_class, n_train=len(train[1]), n_calib=len(calib[1]))
    return report, write_report(args.out or folder, args.split, report, evaluation,
                                report_variant(settings))


def main(argv=None):
    args = parse_args(argv)
    cli.check_output_folder(args.out, '--out')
    report, path = (evaluate_activations if args.activations else evaluate_model)(args)
    softmax = report['softmax_accuracy']
    print('softmax accuracy {}  dknn accuracy {:.4f}  ({} {} examples, {}, k={}); wrote {}'
          .format('n/a' if softmax is None else '{:.4f}'.format(softmax),
                  report['dknn_accuracy'], report['n_examples'], report['split'],
                  report['backend'], report['k'], path))
    if report.get('engine', 'local') != 'local':
        print('engine: {}'.format(report['engine']))
    for name, measures in report.get('trust', {}).items():
        print('AUROC of right vs wrong softmax predictions, {}: {:.4f}'.format(
            name, measures['auroc_right_vs_wrong']))


if __name__ == '__main__':
    cli.run_cli(main)
