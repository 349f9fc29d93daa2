"""Result tables: Markdown for reading, CSV for computing, written side by side."""
import csv
import io
import os

import numpy as np

import nlp_utils

# The model_sha256 of a row carried from a table written before tables named their weights.
NOT_RECORDED = 'not recorded'
MODEL_SHA256_NOTE = ('model_sha256: the first 12 hex digits of the sha256 of the row\'s weights '
                     'taken parameter by parameter in name order (the same weights always give '
                     'the same digest); a row carried from an earlier table may hold the sha256 of '
                     'its weights file instead (results/README.md).')


def markdown_table(rows, columns):
    show = lambda value: markdown_cell('not run' if value is None else str(value))
    lines = ['| ' + ' | '.join(map(markdown_cell, columns)) + ' |', '|' + ' --- |' * len(columns)]
    lines += ['| ' + ' | '.join(show(row[c]) for c in columns) + ' |' for row in rows]
    return '\n'.join(lines) + '\n'


def markdown_cell(text):
    """`text` as one Markdown table cell: a '|' (a token, a file name) escaped, so it
    does not split the row; line breaks become spaces, so it does not end it."""
    return ' '.join(text.replace('|', '\\|').splitlines())


def csv_text(rows, columns):
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, columns, lineterminator='\n')
    writer.writeheader()
    writer.writerows({c: row[c] for c in columns} for row in rows)
    return buffer.getvalue()


def table_writes(path_stem, rows, columns, header):
    """(path, write, mode) of PATH_STEM.md (header, then the Markdown table) and
    PATH_STEM.csv, for nlp_utils.atomic_write_files (renamed with a command's other
    outputs, or none of them)."""
    texts = {'.md': header + '\n' + markdown_table(rows, columns), '.csv': csv_text(rows, columns)}
    return [(path_stem + suffix, lambda f, text=text: f.write(text), 'w')
            for suffix, text in texts.items()]


def write_table(path_stem, rows, columns, header):
    """PATH_STEM.md and PATH_STEM.csv (table_writes), renamed into place together."""
    nlp_utils.atomic_write_files(table_writes(path_stem, rows, columns, header))


def previous_rows(previous_csv):
    """(line number, row) of each data row of a table's earlier CSV, rows as dicts of
    strings; [] without that file. Tables that gather result folders keep from it the
    rows of runs this checkout does not have (trained elsewhere)."""
    if not os.path.exists(previous_csv):
        return []
    with open(previous_csv, newline='', encoding='utf-8') as f:
        return list(enumerate(csv.DictReader(f), start=2))


def carried_note(carried, table, results_dir):
    """The header lines naming the rows kept from TABLE's previous CSV and those of them
    without a recorded model hash; '' when none were kept."""
    if not carried:
        return ''
    runs = sorted({row['run'] for row in carried})
    unhashed = sorted({row['run'] for row in carried if row['model_sha256'] == NOT_RECORDED})
    note = '{} kept from the previous {} (no result folder under {} to measure): {}.\n'.format(
        nlp_utils.count(len(runs), 'run'), table, results_dir, ', '.join(runs))
    if unhashed:
        note += ('{} of them {} tabled before tables named their weights (model_sha256 '
                 '"{}"); rerunning its training command records it.\n'.format(
                     len(unhashed), 'was' if len(unhashed) == 1 else 'were', NOT_RECORDED))
    return note


# ---------------------------------------------------------------- interval cells and verdicts
def number(value, digits=3):
    """'0.123'; '' for None or NaN."""
    return '' if value is None or np.isnan(value) else '{:.{}f}'.format(value, digits)


def interval_text(interval, digits=3):
    """'0.123 [0.100, 0.150]'; '' for an interval without sentences."""
    if interval.n == 0:
        return ''
    return '{} [{}, {}]'.format(*(number(v, digits) for v in
                                  (interval.mean, interval.low, interval.high)))


def signed_interval(mean, low, high):
    """'+0.012 [-0.003, +0.020]': a difference and its interval."""
    return '{:+.3f} [{:+.3f}, {:+.3f}]'.format(mean, low, high)


def verdict(differences, higher_is_better, better_word='more faithful'):
    """'more faithful on 2, less on 1, inside the spread on 1' for {measure: (mean,
    low, high)} of one method minus another, by whether each interval excludes 0 and
    on which side (higher_is_better: measure -> whether a higher value is better)."""
    counts = {better_word: 0, 'less': 0, 'inside the spread': 0}
    for measure, (_, low, high) in differences.items():
        if low > 0 or high < 0:
            better = (low > 0) == higher_is_better[measure]
            counts[better_word if better else 'less'] += 1
        else:
            counts['inside the spread'] += 1
    return ', '.join('{} on {}'.format(name, n) for name, n in counts.items() if n)
