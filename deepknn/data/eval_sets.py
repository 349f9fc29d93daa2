"""Evaluation-only NLI sets: the ANLI dev rounds and HANS, read with their groups.

ANLI (Nie et al. 2020): CSV files with a header naming `context` (premise), `statement`
(hypothesis) and `gold_label` (e / n / c), as the official annotated dev sets
(anlizinganli/anli_annot_v0.2/ANLI_analysis_r{1,2,3}_dev.csv); the round is read from
the file name (`r1` .. `r3`). HANS (McCoy et al. 2019): the official tab-separated
`heuristics_evaluation_set.txt` (or its .gz) with `gold_label` (entailment /
non-entailment), `sentence1`, `sentence2`, `heuristic` and `subcase`. The texts are
tokenized as SNLI's (text_readers), so an SNLI-style pair model reads them as its own
data. Results on the seeded copy made with the HANS generator are 'HANS-like'.
"""
import csv
import dataclasses
import gzip
import io
import os
import re

from deepknn.data import sources
from deepknn.data import text_readers
from nlp_utils import UserError

ANLI_LABELS = {'e': 'entailment', 'n': 'neutral', 'c': 'contradiction'}
HANS_LABELS = ('entailment', 'non-entailment')
HEURISTICS = ('lexical_overlap', 'subsequence', 'constituent')
ANLI_URL = ('https://raw.githubusercontent.com/facebookresearch/anli/main/anlizinganli/'
            'anli_annot_v0.2/')
HANS_URL = 'https://raw.githubusercontent.com/tommccoy1/hans/master/'
ANLI_FILES = tuple('ANLI_analysis_r{}_dev.csv'.format(r) for r in (1, 2, 3))
HANS_FILE = 'heuristics_evaluation_set.txt'
HANS_LIKE_FILE = 'heuristics_evaluation_set.seed20190715.txt.gz'

# name -> where its files live (the data_files spec layout) and how they read.
SPECS = {
    'anli': {'format': 'anli_csv', 'folder': 'anli', 'files': ANLI_FILES, 'archive': None,
             'urls': {f: ANLI_URL + f for f in ANLI_FILES}},
    'hans': {'format': 'hans_tsv', 'folder': 'hans', 'files': (HANS_FILE,), 'archive': None,
             'urls': {HANS_FILE: HANS_URL + HANS_FILE, HANS_FILE + '.gz': HANS_URL + HANS_FILE}},
    'hans-like': {'format': 'hans_tsv', 'folder': 'hans-like', 'files': (HANS_LIKE_FILE,),
                  'archive': None, 'urls': {HANS_LIKE_FILE: 'the HANS generator (templates.py '
                                            '+ corpus_generator.py of {}, random.seed(20190715))'
                                            .format(HANS_URL)}},
}


@dataclasses.dataclass
class EvalSet:
    """One evaluation set; every list has one entry per pair, in file order."""
    name: str          # 'anli', 'hans', 'hans-like' or the file name
    records: list      # [((premise tokens, hypothesis tokens), gold label name)]
    groups: list       # the ANLI round ('R1'..) or the HANS heuristic of each pair
    subcases: list     # the HANS subcase of each pair ('' for ANLI)
    binary: bool       # True for HANS: gold labels are entailment / non-entailment
    paths: list
    n_bad_lines: int = 0   # malformed rows skipped (skip_bad_lines)

    @property
    def label_names(self):
        return list(HANS_LABELS) if self.binary else list(ANLI_LABELS.values())

    def subset(self, rows, name):
        """The pairs at `rows` (in that order) as an EvalSet called `name`."""
        pick = lambda values: [values[i] for i in rows]
        return dataclasses.replace(self, name=name, records=pick(self.records),
                                   groups=pick(self.groups), subcases=pick(self.subcases))


def _csv_rows(path, reading, delimiter, quoting):
    """(first line number, row) of a CSV/TSV file (gzip when it ends in .gz), header
    included; a quoted ANLI context may span several lines."""
    if path.endswith('.gz'):
        try:
            with gzip.open(path, 'rt', encoding='utf-8', newline='') as f:
                lines = [(n, line.rstrip('\r\n')) for n, line in enumerate(f, 1)]
        except (OSError, EOFError, UnicodeDecodeError) as error:
            raise UserError('{} is not gzipped UTF-8 text ({}); pass the file as '
                            'published or unpacked'.format(path, error))
    else:
        lines = list(text_readers._text_lines(path, reading))   # encodings, control chars
    rows = csv.reader((text for _, text in lines), delimiter=delimiter, quoting=quoting)
    start = 1
    for row in rows:
        yield start, row
        start = rows.line_num + 1


def _header_columns(header, names, path):
    missing = [name for name in names if name not in header]
    if missing:
        raise UserError('{} line 1: the header lacks the column(s) {}; expected {}'.format(
            path, ', '.join(missing), ', '.join(names)))
    return [header.index(name) for name in names]


def _pairs(path, reading, spec):
    """(line, premise, hypothesis, label name, group, subcase) of every well-formed row.
    spec: (delimiter, quoting, column names: premise, hypothesis, label[, group, subcase],
    label map or None, the group of a file without a group column)."""
    delimiter, quoting, names, label_map, file_group = spec
    rows = _csv_rows(path, reading, delimiter, quoting)
    _, header = next(rows, (1, []))
    columns = _header_columns(header, names, path)
    for line, row in rows:
        if not any(value.strip() for value in row):
            continue
        where = 'line {}'.format(line)
        if len(row) <= max(columns):
            reading.bad(path, where, 'expected {} fields, got {}'.format(len(header), len(row)))
            continue
        values = [row[c].strip() for c in columns]
        label = (label_map or {}).get(values[2], values[2])
        if not (values[0] and values[1]):
            reading.bad(path, where, 'empty {} or {}'.format(names[0], names[1]))
        elif len(values) > 3 and not all(values[3:]):    # HANS: a pair needs its slice
            reading.bad(path, where, 'empty {} or {}'.format(*names[3:]))
        elif label not in (label_map.values() if label_map else HANS_LABELS):
            reading.bad(path, where, '{} {!r} is not one of {}'.format(
                names[2], values[2], ', '.join(label_map or HANS_LABELS)))
        else:
            yield line, values[0], values[1], label, *(values[3:] or (file_group, ''))


def files_name(paths):
    """What a set of the user's files is called: the file's name, or what the names of
    several (one per ANLI round) share: 'heldout' for heldout_r1.csv .. heldout_r3.csv."""
    names = [os.path.basename(path) for path in paths]
    shared = re.sub(r'[_-]?(r|round)?$', '', os.path.commonprefix(names).rstrip('_-. '),
                    flags=re.IGNORECASE)
    return shared if len(names) > 1 and shared else names[0]


def anli_round(path):
    """'R1'.. from an ANLI file name (r1, R2, round3), else the file name itself."""
    match = re.search(r'(?:^|[^a-z])(?:r|round)([1-9])(?:[^0-9]|$)', os.path.basename(path).lower())
    return 'R' + match.group(1) if match else os.path.basename(path)


def read_pairs(path, reading, file_format):
    """Records, groups and subcases of one ANLI CSV ('anli_csv') or HANS ('hans_tsv') file."""
    if file_format == 'anli_csv':
        spec = (',', csv.QUOTE_MINIMAL, ('context', 'statement', 'gold_label'), ANLI_LABELS,
                anli_round(path))
    else:
        spec = ('\t', csv.QUOTE_NONE, ('sentence1', 'sentence2', 'gold_label', 'heuristic',
                                       'subcase'), None, '')
    records, groups, subcases = [], [], []
    for _, premise, hypothesis, label, group, subcase in _pairs(path, reading, spec):
        records.append((tuple(text_readers._tokenize_raw(text, reading.char_based)
                              for text in (premise, hypothesis)), label))
        groups.append(group)
        subcases.append(subcase)
    if not records:
        raise UserError('{} has no usable pairs; check the file'.format(path))
    return records, groups, subcases


def file_format(path):
    """'anli_csv' for a .csv file, 'hans_tsv' for a file (gzip when .gz) whose tab-separated
    header names HANS's heuristic and subcase columns, else None."""
    if path.lower().endswith('.csv'):
        return 'anli_csv'
    try:
        opener = gzip.open if path.endswith('.gz') else open
        with opener(path, 'rt', encoding='utf-8', errors='replace') as f:
            header = f.readline().rstrip('\r\n').split('\t')
    except (OSError, EOFError):
        return None
    return 'hans_tsv' if {'heuristic', 'subcase'} <= set(header) else None


def _find(name, data_dir):
    """Paths of the files of eval set `name` under data_dir (the official HANS file
    also as .gz), or in the download cache."""
    spec = SPECS[name]
    if data_dir is None:
        if name == 'hans-like':
            raise UserError('hans-like is not downloadable: pass a `data_dir` with its '
                            'hans-like/{} or the official HANS with `dataset` hans'.format(
                                HANS_LIKE_FILE))
        return [sources.find_in_cache(name, dict(spec, md5={}), f) for f in spec['files']]
    if name == 'hans' and not any(os.path.exists(os.path.join(d, HANS_FILE))
                                  for d in (data_dir, os.path.join(data_dir, 'hans'))):
        return [sources.find_in_data_dir(name, spec, HANS_FILE + '.gz', data_dir)]
    return [sources.find_in_data_dir(name, spec, f, data_dir) for f in spec['files']]


def load_eval_set(name=None, files=None, data_dir=None, char_based=False, skip_bad_lines=False):
    """The EvalSet `name` (a key of SPECS) from data_dir (or $DKNN_DATA_DIR, or the
    download cache), or the user's `files` (all ANLI CSVs, or one HANS file)."""
    if (name is None) == (not files):
        raise ValueError('give exactly one of name and files')
    if name is not None and name not in SPECS:
        raise UserError('unknown evaluation set {!r}; choose one of {}'.format(
            name, ', '.join(SPECS)))
    paths = list(files) if files else _find(name, sources.resolve_data_dir(data_dir))
    for path in paths:
        if not os.path.isfile(path):
            raise UserError('eval file {} is not a file'.format(path))
    formats = {file_format(path) for path in paths}
    if None in formats or len(formats) > 1 or ('hans_tsv' in formats and len(paths) > 1):
        raise UserError('eval files {}: pass ANLI .csv files or one HANS file (tab-separated, '
                        'with heuristic and subcase columns)'.format(', '.join(paths)))
    reading = text_readers.Reading(char_based=char_based, skip_bad_lines=skip_bad_lines,
                                   snli_majority=False, integer_labels=False, label_names=None)
    the_format = formats.pop()
    parts = [read_pairs(path, reading, the_format) for path in paths]
    return EvalSet(name=name or files_name(paths),
                   records=[r for part in parts for r in part[0]],
                   groups=[g for part in parts for g in part[1]],
                   subcases=[s for part in parts for s in part[2]],
                   binary=the_format == 'hans_tsv', paths=paths, n_bad_lines=reading.n_bad_lines)


def anli_csv(records):
    """Pairs `records` of ANLI as ANLI's CSV text (context, statement, gold_label e/n/c),
    so a part of ANLI is an evaluation file again (name it with its round, e.g. `_r1`)."""
    letter = {name: short for short, name in ANLI_LABELS.items()}
    text = io.StringIO()
    writer = csv.writer(text, lineterminator='\n')
    writer.writerow(('context', 'statement', 'gold_label'))
    writer.writerows((' '.join(premise), ' '.join(hypothesis), letter[label])
                     for (premise, hypothesis), label in records)
    return text.getvalue()
