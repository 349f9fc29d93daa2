"""Result tables: Markdown for reading, CSV for computing, written side by side."""
import csv
import io

import nlp_utils


def markdown_table(rows, columns):
    show = lambda value: 'not run' if value is None else str(value)
    lines = ['| ' + ' | '.join(columns) + ' |', '|' + ' --- |' * len(columns)]
    lines += ['| ' + ' | '.join(show(row[c]) for c in columns) + ' |' for row in rows]
    return '\n'.join(lines) + '\n'


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
