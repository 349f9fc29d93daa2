"""The one way to get a trained model and its data back from a result folder's args.json.

train_text_classifier.py writes args.json, vocab.json, calib.json and best_model.npz;
every other script calls `load_setup(path)` and gets the same model, vocabulary and
splits (train / dev / calibration / test) that training used.
"""
import dataclasses
import os
import re
import sys

import chainer

import nets
import nlp_utils
import text_datasets
from nlp_utils import UserError

ARGS_FIELDS = ('dataset', 'model', 'unit', 'layer', 'dropout', 'embed_dim', 'n_class', 'seed',
               'n_calib', 'char_based', 'pair', 'vocab_path', 'model_path')


@dataclasses.dataclass
class Setup:
    """A trained model with its data. Token-level splits hold (tokens, label);
    id-level splits hold (ids, label) ready for the model."""
    config: dict
    result_dir: str
    vocab: dict
    model: nets.TextClassifier
    dataset: text_datasets.Dataset
    splits: text_datasets.Splits
    device: chainer.backend.Device

    def encode(self, examples):
        """[(tokens, label)] -> [(ids, label)]; ids are int32 arrays ending in '<eos>'."""
        return nlp_utils.encode_examples(examples, self.vocab)

    @property
    def train(self):
        return self.encode(self.splits.train)

    @property
    def calib(self):
        return self.encode(self.splits.calib)

    @property
    def dev(self):
        return self.encode(self.splits.dev)

    @property
    def test(self):
        return self.encode(self.splits.test)

    @property
    def label_names(self):
        """Readable names of the label ids ('positive', not '1'), for reports."""
        return self.dataset.readable_label_names

    def evaluation_examples(self, split='test', eval_file=None):
        """(name, token-level examples) to evaluate: a split of the training data, or
        `eval_file` read in the model's data format with its labels. The name (the split,
        or 'file-<file name>') goes into output file names, so results on one split or
        file never overwrite another's."""
        if eval_file is None:
            return split, getattr(self.splits, split)
        # The file's labels are the dataset's own ('1'), not the readable names ('positive').
        examples = text_datasets.read_eval_file(
            eval_file, self.config['dataset'], self.dataset.label_names,
            self.config['char_based'], self.config.get('skip_bad_lines', False))
        stem, extension = os.path.splitext(os.path.basename(eval_file))
        if extension not in ('.txt', '.tsv', '.jsonl'):   # stsa.binary.dev keeps its '.dev'
            stem += extension
        return 'file-' + re.sub(r'[^A-Za-z0-9_.-]+', '_', stem), examples


def get_device(gpu):
    """Chainer device for --gpu: negative is the CPU; cupy is only imported for a GPU."""
    if gpu < 0:
        return chainer.get_device('@numpy')
    try:
        return chainer.get_device('@cupy:{}'.format(gpu))
    except (RuntimeError, ImportError, ValueError) as e:
        raise UserError('--gpu {} is not usable here ({}); install cupy for your CUDA or use '
                        '--gpu -1'.format(gpu, str(e).splitlines()[0]))


def load_data(config):
    """(Dataset, Splits) for a config dict as stored in args.json."""
    dataset = text_datasets.load_dataset(
        config['dataset'], data_dir=config.get('data_dir'),
        train_file=config.get('train_file'), dev_file=config.get('dev_file'),
        test_file=config.get('test_file'), char_based=config['char_based'],
        seed=config['seed'], skip_bad_lines=config.get('skip_bad_lines', False),
        snli_majority=config.get('snli_majority', False),
        allow_unseen_labels=config.get('allow_unseen_labels', False))
    splits = text_datasets.make_splits(
        dataset, seed=config['seed'], dev_fraction=config.get('dev_fraction', 0.1),
        n_calib=config['n_calib'], select_on_test=config.get('select_on_test', False))
    exclude = read_exclusions(config.get('exclude_train'))
    if exclude or config.get('label_noise'):
        splits = text_datasets.change_train(
            splits, len(dataset.label_names), exclude, config.get('label_noise') or 0.0,
            config.get('label_noise_seed', 0))
    return dataset, splits


# The type every args.json field must have (bool is checked before int: True is an int).
FIELD_TYPES = {'dataset': str, 'model': str, 'unit': int, 'layer': int, 'dropout': (int, float),
               'embed_dim': int, 'n_class': int, 'seed': int, 'n_calib': int, 'char_based': bool,
               'pair': bool, 'vocab_path': str, 'model_path': str}


def read_exclusions(path):
    """The --exclude-train file: a JSON list of indices into the training split."""
    if not path:
        return []
    indices = nlp_utils.read_json(path, '--exclude-train file')
    if not isinstance(indices, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in indices):
        raise UserError('--exclude-train file {} must hold a JSON list of integer indices into '
                        'the training split'.format(path))
    return indices


def write_train_changes(result_dir, splits):
    """train_changes.json: the excluded and the label-flipped training indices (empty lists
    for an unchanged training split), so experiments can score against them."""
    nlp_utils.atomic_write_json(os.path.join(result_dir, 'train_changes.json'), {
        'excluded_indices': list(map(int, splits.excluded_indices)),
        'flipped_indices': list(map(int, splits.flipped_indices))})


def read_config(args_path):
    config = nlp_utils.read_json(args_path, 'model setup', dict)
    missing = [f for f in ARGS_FIELDS if f not in config]
    if missing:
        raise UserError('model setup {} lacks fields {}; re-train with train_text_classifier.py'
                        .format(args_path, missing))
    for name, kind in FIELD_TYPES.items():
        value = config[name]
        if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
            raise UserError('model setup {}: field {!r} is {!r}, expected {}; restore the file '
                            'or re-train'.format(args_path, name, value,
                                                 getattr(kind, '__name__', 'a number')))
    return config


def read_vocab(result_dir, config):
    """vocab.json, checked: word -> distinct ids 0 .. n-1, and the one the model was
    trained with (its digest in args.json), not another of the same size."""
    path = os.path.join(result_dir, config['vocab_path'])
    vocab = nlp_utils.read_json(path, 'vocabulary', dict)
    ids = list(vocab.values())
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids) \
            or sorted(ids) != list(range(len(ids))):
        raise UserError('vocabulary {} must map words to the distinct ids 0 .. n-1; restore it '
                        'or re-train'.format(path))
    if config.get('vocab_digest') not in (None, nlp_utils.vocab_digest(vocab)):
        raise UserError('vocabulary {} is not the one this model was trained with (its digest '
                        'differs from args.json); restore it or re-train'.format(path))
    return vocab



def check_calibration(result_dir, splits):
    """The calibration split recomputed from the seed must be the one saved at training."""
    saved = nlp_utils.read_json(os.path.join(result_dir, 'calib.json'), 'calibration split', dict)
    if saved.get('calib_indices') != list(splits.calib_indices):
        raise UserError('{}/calib.json does not match the calibration split recomputed from '
                        'args.json: the data changed since training; re-train'.format(result_dir))


def load_model(config, result_dir, vocab, device):
    model = nets.build_model(config, len(vocab), config['n_class'], config['pair'])
    nlp_utils.load_npz_safely(os.path.join(result_dir, config['model_path']), model)
    model.to_device(device)
    return model


def run_description(setup):
    """'<run folder> (model sha256 0123456789ab)': the folder and the weights a table
    read, so a number can be traced to the model that made it."""
    digest = nlp_utils.file_digest(os.path.join(setup.result_dir, setup.config['model_path']),
                                   'sha256')
    return '{} (model sha256 {})'.format(os.path.relpath(setup.result_dir), digest[:12])


def load_setup(args_path, gpu=-1, data_dir=None):
    """Rebuild model, vocabulary and splits from a result folder's args.json.

    `data_dir` overrides the data directory stored at training time (e.g. after
    moving to another machine); otherwise DKNN_DATA_DIR, then the stored one.
    """
    if os.path.isdir(args_path):
        args_path = os.path.join(args_path, 'args.json')
    config = read_config(args_path)
    result_dir = os.path.dirname(os.path.abspath(args_path))
    config['data_dir'] = data_dir or os.environ.get('DKNN_DATA_DIR') or config.get('data_dir')
    vocab = read_vocab(result_dir, config)
    dataset, splits = load_data(config)
    check_calibration(result_dir, splits)
    if config.get('data_digest') not in (None, nlp_utils.examples_digest(
            splits.train, splits.dev, splits.calib, splits.test)):
        print('warning: the data of {} changed since training (same split sizes, other '
              'examples); its DkNN caches are rebuilt'.format(result_dir), file=sys.stderr)
    device = get_device(gpu)
    model = load_model(config, result_dir, vocab, device)
    return Setup(config, result_dir, vocab, model, dataset, splits, device)
