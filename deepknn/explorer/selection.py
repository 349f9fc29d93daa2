"""The explorer's download of a selection: dataset rows as CSV that a spreadsheet opens safely.

Every field is quoted (csv.QUOTE_ALL), and a text cell that a spreadsheet would read as
a formula (one starting with =, +, -, @, a tab or a carriage return) gets a leading
apostrophe, as OWASP's advice on CSV injection says; the index is an integer, the other
numbers have 6 decimals.
explorer.js builds the static export's CSV by the same rules (a browser test compares).
"""
import csv
import io

COLUMNS = ('index', 'text', 'gold', 'softmax_prediction', 'softmax_probability',
           'dknn_prediction', 'credibility')
FORMULA_STARTS = ('=', '+', '-', '@', '\t', '\r')


def safe_cell(value):
    """A cell as text: None empty, a float with 6 decimals, text starting like a
    formula behind an apostrophe."""
    if value is None:
        return ''
    if isinstance(value, str):
        return "'" + value if value.startswith(FORMULA_STARTS) else value
    return '{:.6f}'.format(value)


def csv_text(rows):
    """The CSV (header and one line per row, '\\r\\n' line ends) of dataset-view rows."""
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL)
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([str(row['index'])] + [safe_cell(row[name]) for name in COLUMNS[1:]])
    return out.getvalue()
