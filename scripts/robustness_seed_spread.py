"""Tables 4-6 over training seeds: the mean and spread of kNN backoff's tables.

    python scripts/robustness_seed_spread.py --table \
        results/rajani/knn_robustness_glove_seeds_split0_groups.csv \
        results/rajani/knn_robustness_glove_seeds_split1_groups.csv \
        results/rajani/knn_robustness_glove_seeds_split2_groups.csv \
        --out results/mine --name glove_seeds_groups

Reads tables of scripts/knn_robustness.py (its _table4, _groups or _table6 CSVs, one per
split seed) over runs trained at several seeds (RUN, RUN_seed1, RUN_seed2: `make
rajani-robustness-seeds`), and writes one row per model, set and slice: the model's and
kNN backoff's accuracy and their difference as mean [min, max] over every (training
seed, split seed) pair, and whether the difference keeps one sign in all of them. The
tables' Models lines (each run's parameters digest) are carried into the header.
"""
import csv
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
sys.path.insert(0, ROOT)
from deepknn import cli  # noqa: E402
from deepknn.reports import robustness_tables  # noqa: E402
from deepknn.reports.tables import markdown_table, write_table  # noqa: E402
import nlp_utils  # noqa: E402
from nlp_utils import UserError  # noqa: E402

NEEDED = ('run', 'trained on', 'encoder', 'evaluated on', 'model', 'kNN-model')


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    parser.add_argument('--table', nargs='+', required=True,
                        help='_table4, _groups or _table6 CSVs of scripts/knn_robustness.py, '
                             'one per split seed')
    cli.add_outputs(parser, cli.RAJANI, 'knn_robustness_seed_spread')
    return parser.parse_args(argv)


def read_table(path):
    """The rows of one knn_robustness CSV, without the paper's rows; a UserError naming
    the file and line where it is not one."""
    if not os.path.isfile(path):
        raise UserError('--table {} does not exist; make it with scripts/knn_robustness.py'
                        .format(path))
    with open(path, newline='', encoding='utf-8') as f:
        rows = list(csv.DictReader(f))
    missing = [name for name in NEEDED if rows and name not in rows[0]]
    if not rows or missing:
        raise UserError('--table {} is not a table of scripts/knn_robustness.py (no {}); '
                        'pass its _table4, _groups or _table6 CSV'.format(
                            path, ', '.join(missing) or 'rows'))
    for line, row in enumerate(rows, start=2):
        for name in ('model', 'kNN-model'):
            if row['run'] != 'paper' and not nlp_utils.is_number(row[name]):
                raise UserError('--table {} line {}: {} is {!r}, not a number'.format(
                    path, line, name, row[name]))
    # _table4 has one row per set: its slice is the whole set.
    return [dict({'slice': 'all'}, **row) for row in rows if row['run'] != 'paper']


def models_lines(paths):
    """The distinct 'Models: ...' lines of the tables' Markdown siblings."""
    lines = []
    for path in paths:
        markdown = os.path.splitext(path)[0] + '.md'
        if os.path.exists(markdown):
            with open(markdown, encoding='utf-8') as f:
                lines += [line.strip() for line in f if line.startswith('Models: ')]
    return list(dict.fromkeys(lines))


def main(argv=None):
    args = parse_args(argv)
    stem = cli.output_stem(args, cli.RAJANI, 'knn_robustness_seed_spread')
    tables = [read_table(path) for path in args.table]     # the inputs before the outputs
    cli.check_new_outputs([stem + '.md', stem + '.csv'], args.overwrite)
    rows = robustness_tables.seed_spread_rows(tables)
    header = ('# kNN backoff over training seeds and split seeds: accuracy (%), mean [min, '
              'max]\n\nFrom {}. A conclusion holds across seeds where the sign column is + '
              'or -.\n{}\n{}\n'.format(', '.join(args.table), '\n'.join(models_lines(args.table)),
                                       cli.provenance()))
    write_table(stem, rows, robustness_tables.SEED_SPREAD_COLUMNS, header)
    print(markdown_table(rows, robustness_tables.SEED_SPREAD_COLUMNS))


if __name__ == '__main__':
    cli.run_cli(main)
