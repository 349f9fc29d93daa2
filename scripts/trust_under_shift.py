"""When to trust a prediction: DkNN credibility and the detectors people use instead, in
and out of distribution (docs/shift.md).

    python scripts/trust_under_shift.py --model-setup results/stsa.binary_cnn/args.json \
        results/stsa.binary_cnn_seed1/args.json results/stsa.binary_cnn_seed2/args.json \
        --data-dir ../shared/data --name sst2_cnn

For each run (the seeds of one recipe): the model's outputs on its test split and the
shifted sets of its task (deepknn/shift/sets.py; cached in the run folder, so a stopped
study resumes), every scorer fitted on the training and calibration splits, and every
measure with a 95% bootstrap interval. Writes, under --out (default results/shift):
NAME.md (the first run's tables), NAME.csv (every run's rows), NAME_seeds.md/.csv (the
spread over the runs), and NAME_risk_coverage.png, NAME_auroc.png, NAME_coverage.png
(the first run's figures).
"""
import os
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
sys.path.insert(0, ROOT)
from deepknn import cli  # noqa: E402
from deepknn.models import model_setup, pretrained  # noqa: E402
from deepknn.reports import plots, shift_report  # noqa: E402
from deepknn.reports.tables import csv_text, markdown_table  # noqa: E402
from deepknn.shift import measured, sets as sets_lib, study as study_lib  # noqa: E402
import nlp_utils  # noqa: E402
from nlp_utils import UserError  # noqa: E402

ALPHA_GRID = np.round(np.linspace(0.01, 0.3, 30), 3)


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser, nargs='+', help='args.json of trained runs (the training '
                        'seeds of one recipe; the first one gets the page and figures)')
    parser.add_argument('--eval-file', nargs='*', default=[],
                        help='more labelled sets, any format the readers know')
    parser.add_argument('--unlabelled-file', nargs='*', default=[],
                        help='more sets without labels, one input per line (premise TAB '
                             'hypothesis for a pair model): out-of-distribution rows only')
    cli.add_limit(parser, 3000, 'examples per set; a larger set keeps a seeded sample of '
                                'this many (default: %(default)s)')
    parser.add_argument('--n-resamples', type=cli.positive_int, default=1000,
                        help='bootstrap resamples of every interval')
    cli.add_dknn(parser)
    cli.add_batchsize(parser)
    cli.add_data_dir(parser)
    cli.add_outputs(parser, cli.SHIFT, 'the name of the first run')
    return parser.parse_args(argv)


def run_rows(path, args):
    """(rows, study, header line) of one run."""
    setup = model_setup.load_setup(path, data_dir=args.data_dir)
    settings = cli.dknn_settings(args, setup.result_dir)
    shift_sets = sets_lib.study_sets(setup, args.data_dir, args.limit, args.eval_file,
                                     args.unlabelled_file)
    study = study_lib.run_study(setup, shift_sets, settings)
    name = os.path.basename(os.path.normpath(setup.result_dir))
    rows = [dict(row, run=name) for row in measured.all_rows(study, args.n_resamples)]
    sizes = ', '.join('{} {} ({})'.format(r.shift_set.name, len(r.softmax_prediction),
                                          r.shift_set.role) for r in study.sets)
    caveat = ' ' + pretrained.NLI_CAVEAT + '.' if setup.config.pair and \
        model_setup.is_transformer(setup.config) else ''
    return rows, study, '{}: {}; sets: {}.{}'.format(
        name, model_setup.run_description(setup), sizes, caveat)


def check_files(args):
    """Every named input file exists, before any model loads."""
    for flag, paths in (('--eval-file', args.eval_file),
                        ('--unlabelled-file', args.unlabelled_file)):
        for path in paths:
            if not os.path.isfile(path):
                raise UserError('{} {} is not a file; name a file of inputs'.format(flag, path))


def main(argv=None):
    args = parse_args(argv)
    check_files(args)
    first = os.path.basename(os.path.dirname(os.path.abspath(args.model_setup[0])))
    stem = cli.output_stem(args, cli.SHIFT, first)
    outputs = [stem + suffix for suffix in ('.md', '.csv', '_seeds.md', '_seeds.csv',
                                            '_risk_coverage.png', '_auroc.png', '_coverage.png')]
    cli.check_table_outputs(args.out, args.overwrite, outputs)
    results = [run_rows(path, args) for path in args.model_setup]
    rows = [row for run, _, _ in results for row in run]
    study = results[0][1]
    scorers = shift_report.headline(study.labels)
    header = ('# When to trust a prediction: {}\n\n{}\nScores rank trust; right and wrong '
              'are the softmax prediction\'s (docs/shift.md). Cells: value [95% bootstrap '
              'interval, {} resamples].\n{}\n'.format(
                  first, '\n'.join(line for _, _, line in results), args.n_resamples,
                  cli.provenance()))
    page = shift_report.markdown_text([r for r in rows if r['run'] == rows[0]['run']], header,
                                      study.labels, len(study.layer_aurocs), study.layer_aurocs,
                                      study.selected_layers)
    spread = shift_report.seed_rows(rows, scorers)
    spread_header = '# {} over {} runs: mean [min, max]\n\n{}\n'.format(
        first, len(results), cli.provenance())
    title = 'Trust under shift: ' + first
    writes = [(stem + '.md', lambda f: f.write(page), 'w'),
              (stem + '.csv', lambda f: f.write(csv_text(rows, shift_report.CSV_COLUMNS)), 'w'),
              (stem + '_seeds.md', lambda f: f.write(spread_header + '\n' + markdown_table(
                  spread, shift_report.SEED_COLUMNS)), 'w'),
              (stem + '_seeds.csv', lambda f: f.write(csv_text(
                  spread, shift_report.SEED_COLUMNS)), 'w'),
              plots.figure_write(shift_report.risk_coverage_figure(
                  measured.risk_coverage_curves(study, shift_report.CURVE_SCORERS), title),
                  stem + '_risk_coverage.png'),
              plots.figure_write(shift_report.auroc_figure(
                  [r for r in rows if r['run'] == rows[0]['run']], scorers, title),
                  stem + '_auroc.png'),
              plots.figure_write(shift_report.coverage_figure(
                  measured.coverage_curves(study, ALPHA_GRID), ALPHA_GRID, title),
                  stem + '_coverage.png')]
    nlp_utils.atomic_write_files(writes)
    print(page)


if __name__ == '__main__':
    cli.run_cli(main)
