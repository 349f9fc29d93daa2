"""The shift study in one table: per encoder-dataset pair, set and AUROC measure, max
softmax, DkNN credibility and the best scorer over the training seeds.

    python scripts/shift_summary.py --seeds results/shift/sst2_cnn_seeds.csv \
        results/shift/snli_cnn_seeds.csv --name summary

Reads the _seeds.csv tables of scripts/trust_under_shift.py (the pair is the file name
before _seeds) and writes NAME.md and NAME.csv under --out (default results/shift).
"""
import csv
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import cli  # noqa: E402
from deepknn.reports import shift_report  # noqa: E402
from deepknn.reports.tables import markdown_table, write_table  # noqa: E402
from nlp_utils import UserError  # noqa: E402

SUFFIX = '_seeds.csv'


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    parser.add_argument('--seeds', nargs='+', required=True,
                        help='_seeds.csv tables of scripts/trust_under_shift.py')
    cli.add_outputs(parser, cli.SHIFT, 'summary')
    return parser.parse_args(argv)


def read_seeds(path):
    """The rows of one _seeds.csv; a UserError naming the file where it is not one."""
    if not path.endswith(SUFFIX) or not os.path.isfile(path):
        raise UserError('--seeds {} is no {} file of scripts/trust_under_shift.py'.format(
            path, SUFFIX))
    with open(path, newline='', encoding='utf-8') as f:
        rows = list(csv.DictReader(f))
    if not rows or set(shift_report.SEED_COLUMNS) - set(rows[0]):
        raise UserError('--seeds {} lacks the columns {}; make it with '
                        'scripts/trust_under_shift.py'.format(
                            path, ', '.join(shift_report.SEED_COLUMNS)))
    return rows


def main(argv=None):
    args = parse_args(argv)
    pairs = {os.path.basename(path)[:-len(SUFFIX)]: read_seeds(path) for path in args.seeds}
    stem = cli.output_stem(args, cli.SHIFT, 'summary')
    cli.check_table_outputs(args.out, args.overwrite, [stem + '.md', stem + '.csv'])
    rows = shift_report.summary_rows(pairs)
    header = ('# Trust under shift, every pair: AUROC mean [min, max] over training seeds\n\n'
              'auroc: right vs wrong softmax predictions; ood_auroc: the in-distribution test '
              'set vs another task. "vs msp": runs where the interval lies wholly above / '
              'below max softmax\'s / overlaps it (docs/shift.md).\n{}\n'.format(
                  cli.provenance()))
    write_table(stem, rows, shift_report.SUMMARY_COLUMNS, header)
    print(markdown_table(rows, shift_report.SUMMARY_COLUMNS))


if __name__ == '__main__':
    cli.run_cli(main)
