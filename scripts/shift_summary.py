"""The shift study in one table: per encoder-dataset pair, set and AUROC measure, max
softmax, DkNN credibility and the best scorer over the training seeds.

    python scripts/shift_summary.py --seeds results/shift/sst2_cnn_seeds.csv \
        results/shift/snli_cnn_seeds.csv --name summary

Reads the _seeds.csv tables of scripts/trust_under_shift.py (the pair is the file name
before _seeds) and, beside each, the long PAIR.csv of every run, and writes NAME.md and
NAME.csv (AUROCs) and NAME_conformal.md and NAME_conformal.csv (conformal coverage and set
size over the runs) under --out (default results/shift).
"""
import csv
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import cli  # noqa: E402
from deepknn.reports import shift_report  # noqa: E402
from deepknn.reports.tables import markdown_table, table_writes  # noqa: E402
import nlp_utils  # noqa: E402
from nlp_utils import UserError  # noqa: E402

SUFFIX = '_seeds.csv'


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    parser.add_argument('--seeds', nargs='+', required=True,
                        help='_seeds.csv tables of scripts/trust_under_shift.py')
    cli.add_outputs(parser, cli.SHIFT, 'summary')
    return parser.parse_args(argv)


def read_table(path, columns):
    """The rows of one table of scripts/trust_under_shift.py; a UserError naming the file
    where it is not one."""
    if not os.path.isfile(path):
        raise UserError('--seeds: {} does not exist; make it with '
                        'scripts/trust_under_shift.py'.format(path))
    with open(path, newline='', encoding='utf-8') as f:
        rows = list(csv.DictReader(f))
    if not rows or set(columns) - set(rows[0]):
        raise UserError('--seeds: {} lacks the columns {}; make it with '
                        'scripts/trust_under_shift.py'.format(path, ', '.join(columns)))
    return rows


def read_pair(path):
    """(pair, its _seeds rows, its long rows) of one _seeds.csv path."""
    if not path.endswith(SUFFIX):
        raise UserError('--seeds {} is no {} file of scripts/trust_under_shift.py'.format(
            path, SUFFIX))
    return (os.path.basename(path)[:-len(SUFFIX)], read_table(path, shift_report.SEED_COLUMNS),
            read_table(path[:-len(SUFFIX)] + '.csv', shift_report.CSV_COLUMNS))


def main(argv=None):
    args = parse_args(argv)
    pairs = [read_pair(path) for path in args.seeds]
    stem = cli.output_stem(args, cli.SHIFT, 'summary')
    cli.check_table_outputs(args.out, args.overwrite, [stem + suffix for suffix in (
        '.md', '.csv', '_conformal.md', '_conformal.csv')])
    rows = shift_report.summary_rows({pair: seeds for pair, seeds, _ in pairs})
    conformal = shift_report.conformal_summary_rows({pair: long for pair, _, long in pairs})
    header = ('# Trust under shift, every pair: AUROC mean [min, max] over training seeds\n\n'
              'auroc: right vs wrong softmax predictions; ood_auroc: the in-distribution test '
              'set vs another task. "vs msp": runs where the interval lies wholly above / '
              'below max softmax\'s / overlaps it (docs/shift.md).\n{}\n'.format(
                  cli.provenance()))
    conformal_header = ('# Trust under shift, every pair: DkNN conformal sets, mean [min, max] '
                        'over training seeds\n\nTarget coverage 1 - alpha; standard: the '
                        'paper\'s p-values; weighted: Tibshirani et al. 2019; recalibrated: on '
                        '20% of the set (docs/shift.md).\n{}\n'.format(cli.provenance()))
    nlp_utils.atomic_write_files(
        table_writes(stem, rows, shift_report.SUMMARY_COLUMNS, header)
        + table_writes(stem + '_conformal', conformal, shift_report.CONFORMAL_COLUMNS,
                       conformal_header))
    print(markdown_table(rows, shift_report.SUMMARY_COLUMNS))


if __name__ == '__main__':
    cli.run_cli(main)
