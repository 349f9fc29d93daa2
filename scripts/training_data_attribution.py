"""Which training examples does a prediction rest on? kNN neighbours against representer
points, TracIn and TRAK, by the identical-class test, the linear datamodeling score and
noisy-label detection (docs/attribution.md).

    python scripts/training_data_attribution.py --model-setup results/sst2_cnn_attr \
        results/sst2_cnn_attr_seed1 results/sst2_cnn_attr_seed2 \
        --noisy-setup results/sst2_cnn_attr_noisy --name sst2_cnn

Per run (--model-setup, one per training seed, all on one training split): every
method variant explains a seeded sample of --n-test test inputs (their prediction for
the identical-class test, their gold label for the LDS). The LDS reads the halves of
scripts/lds_retrains.py (--lds-runs, default the first run's folder with _lds appended,
used where it exists). --noisy-setup runs (trained with --label-noise) give noisy-label
detection by self-influence. The all-parameter (projected) variants cost a backward pass
per input and checkpoint: they run on the first --projected-runs runs of each list.
Writes NAME.md, NAME.csv (per run), NAME_seeds.md/.csv (mean [min, max] over runs),
NAME_measures.png, NAME_examples.md and, with --noisy-setup, NAME_noisy.md/.csv under
--out (default results/attribution).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import cli  # noqa: E402
from deepknn.attribution import datamodels, gradients  # noqa: E402
from deepknn.attribution import study as study_lib  # noqa: E402
from deepknn.models import model_setup  # noqa: E402
from deepknn.reports import attribution_report as report  # noqa: E402
from deepknn.reports import plots  # noqa: E402
from deepknn.reports.saliency_report import example_text  # noqa: E402
from deepknn.reports.tables import csv_text, markdown_table  # noqa: E402
import nlp_utils  # noqa: E402
from nlp_utils import UserError  # noqa: E402

SUFFIXES = ('.md', '.csv', '_seeds.md', '_seeds.csv', '_measures.png', '_examples.md')
NOISY_SUFFIXES = ('_noisy.md', '_noisy.csv')   # with --noisy-setup


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser, nargs='+', help='args.json (or folders) of runs of one recipe '
                                                'and training split, one per seed')
    parser.add_argument('--noisy-setup', nargs='+', default=[], type=cli.model_setup_path,
                        help='runs of the recipe trained with --label-noise (noisy-label '
                             'detection)')
    parser.add_argument('--lds-runs', metavar='DIR', default=None,
                        help="halves of scripts/lds_retrains.py (default: the first run's "
                             'folder with _lds appended, where it exists)')
    parser.add_argument('--n-test', type=cli.positive_int, default=500,
                        help='test inputs sampled per run (default 500)')
    parser.add_argument('--subclasses', metavar='FILE', default=None,
                        help='subclasses.json of scripts/merged_classes.py: the runs were '
                             'trained on merged classes (the identical-subclass test)')
    cli.add_k(parser, help='neighbours per layer of the kNN votes (default the DkNN\'s, 75)')
    cli.add_seed(parser, help='seed drawing the test sample and the projection')
    parser.add_argument('--projected-runs', type=cli.non_negative_int, default=1,
                        help='runs of each list (first ones) that also get the all-parameter '
                             'projected variants (default 1; 0: none)')
    cli.add_data_dir(parser)
    cli.add_outputs(parser, cli.ATTRIBUTION, 'the first run')
    return parser.parse_args(argv)


def lds_folder(args):
    """The halves' folder: --lds-runs (which must exist), else the first run's folder with
    _lds appended where it exists; None without halves."""
    if args.lds_runs is not None:
        if not os.path.isfile(os.path.join(args.lds_runs, datamodels.SUBSETS)):
            raise UserError('--lds-runs {} holds no {}; train the halves with `python '
                            'scripts/lds_retrains.py --out {}`'.format(
                                args.lds_runs, datamodels.SUBSETS, args.lds_runs))
        return args.lds_runs
    default = os.path.dirname(os.path.abspath(args.model_setup[0])) + '_lds'
    return default if os.path.isfile(os.path.join(default, datamodels.SUBSETS)) else None


def lds_truth(folder, study):
    """The halves' masks and margins on the study's test sample, or None without halves."""
    if folder is None:
        return None
    saved = nlp_utils.read_json(os.path.join(folder, datamodels.SUBSETS), 'subset file', dict)
    n_train = len(study.train_labels)
    masks = datamodels.subset_masks(folder, n_train, saved['m'], saved['seed'])
    examples = [study.setup.splits.test[i] for i in study.test_indices]
    margins = datamodels.subset_margins(folder, masks, examples, study.gold)
    return study_lib.LdsTruth(masks, margins)


def run_name(setup):
    return os.path.basename(os.path.normpath(setup.result_dir))


def read_subclasses(path):
    """{'train': [...], 'test': [...]} of --subclasses, or None."""
    if path is None:
        return None
    subclasses = nlp_utils.read_json(path, '--subclasses file', dict)
    if not all(isinstance(subclasses.get(role), list) for role in ('train', 'test')):
        raise UserError('--subclasses {} must hold lists "train" and "test"; make it with '
                        'scripts/merged_classes.py'.format(path))
    return subclasses


def study_runs(args, halves, subclasses):
    """(long rows, Markdown rows, description lines, (first run's rows, its study))."""
    long, table, lines, first = [], [], [], None
    for position, path in enumerate(args.model_setup):
        setup = model_setup.load_setup(path, data_dir=args.data_dir)
        settings = study_lib.StudySettings(args.n_test, args.seed, args.k,
                                           projected=position < args.projected_runs)
        study = study_lib.RunStudy(setup, settings, gradients.GaussianProjection(seed=args.seed),
                                   subclasses)
        truth = lds_truth(halves, study)
        rows = report.with_intervals(study.measure(truth))
        name = run_name(setup)
        long += report.long_rows(name, rows, study.forward_seconds)
        table += report.run_table(name, rows, study.forward_seconds)
        lines.append('{}: {}; {} test inputs, checkpoints of epochs {}; LDS: {}; the arrays '
                     '(layers{} of {} training and the test inputs) took {:.0f} s.'.format(
                         name, model_setup.run_description(setup), len(study.gold),
                         study.arrays.epochs,
                         '{} halves'.format(len(truth.masks)) if truth else 'no halves',
                         ', projected gradients' if settings.projected else '',
                         len(study.train_labels), study.arrays_seconds))
        first = first or (rows, study)
    return long, table, lines, first


def flipped_labels(path):
    """The training indices whose label --label-noise flipped in run `path` (its
    train_changes.json); a UserError where it flipped none."""
    changes = os.path.join(os.path.dirname(os.path.abspath(path)), 'train_changes.json')
    flipped = nlp_utils.read_json(changes, 'training changes', dict).get('flipped_indices')
    if not flipped:
        raise UserError('--noisy-setup {} was trained without --label-noise: no flipped '
                        'label to detect'.format(path))
    return flipped


def noisy_runs(args, flipped):
    long = []
    for position, (path, indices) in enumerate(zip(args.noisy_setup, flipped)):
        setup = model_setup.load_setup(path, data_dir=args.data_dir)
        settings = study_lib.StudySettings(k=args.k, projected=position < args.projected_runs)
        rows = study_lib.noisy_label_rows(setup, indices, settings,
                                          gradients.GaussianProjection(seed=args.seed))
        long += report.noisy_long_rows(run_name(setup), rows)
    return long


def examples_page(first, header):
    rows, study = first
    setup = study.setup
    texts = [example_text(setup.splits.test[i][0], setup.vocab) for i in study.test_indices]
    train_texts = [example_text(tokens, setup.vocab) for tokens, _ in setup.splits.train]
    return report.examples_page(rows, texts, study.gold, study.predictions, train_texts,
                                study.train_labels, setup.dataset.readable_label_names, header)


def main(argv=None):
    args = parse_args(argv)
    first_name = os.path.basename(os.path.dirname(os.path.abspath(args.model_setup[0])))
    stem = cli.output_stem(args, cli.ATTRIBUTION, first_name)
    suffixes = SUFFIXES + (NOISY_SUFFIXES if args.noisy_setup else ())
    cli.check_table_outputs(args.out, args.overwrite, [stem + s for s in suffixes])
    flipped = [flipped_labels(path) for path in args.noisy_setup]
    halves = lds_folder(args)
    subclasses = read_subclasses(args.subclasses)
    long, table, lines, first = study_runs(args, halves, subclasses)
    noisy = noisy_runs(args, flipped)
    provenance = cli.provenance()
    header = ('# Which training examples does a prediction rest on? {}\n\n{}\n\nCells: mean '
              '[95% bootstrap interval over test inputs]; lds_minus_reference: paired '
              'difference with {} (docs/attribution.md).\n\n{}\n'.format(
                  first_name, '\n'.join(lines), report.REFERENCE, provenance))
    seeds = report.seed_table(long, report.SEED_COLUMNS,
                              ('identical_class', 'identical_subclass', 'lds'))
    noisy_seeds = report.seed_table(noisy, report.NOISY_SEED_COLUMNS,
                                    ('average_precision', 'auroc', 'precision_at_k'))
    spread = '# {} over runs: mean [min, max]\n\n{}\n\n'.format(first_name, provenance)
    writes = [(stem + '.md', lambda f: f.write(header + '\n' + markdown_table(
                  table, report.RUN_COLUMNS)), 'w'),
              (stem + '.csv', lambda f: f.write(csv_text(long, report.CSV_COLUMNS)), 'w'),
              (stem + '_seeds.md', lambda f: f.write(spread + markdown_table(
                  seeds, report.SEED_COLUMNS)), 'w'),
              (stem + '_seeds.csv', lambda f: f.write(csv_text(seeds, report.SEED_COLUMNS)), 'w'),
              plots.figure_write(report.measures_figure(first[0], 'Training-data attribution: '
                                                        + first_name), stem + '_measures.png'),
              (stem + '_examples.md', lambda f: f.write(examples_page(
                  first, '# Where the methods disagree: {}\n\n{}\n'.format(
                      first_name, provenance))), 'w')]
    if noisy:
        writes += [(stem + '_noisy.md', lambda f: f.write(spread + markdown_table(
                       noisy_seeds, report.NOISY_SEED_COLUMNS) + '\n' + markdown_table(
                       report.noisy_table(noisy), report.NOISY_COLUMNS)), 'w'),
                   (stem + '_noisy.csv', lambda f: f.write(csv_text(
                       noisy, report.NOISY_COLUMNS)), 'w')]
    nlp_utils.atomic_write_files(writes)
    print(header + '\n' + markdown_table(table, report.RUN_COLUMNS))


if __name__ == '__main__':
    cli.run_cli(main)
