"""The one way to get a trained model and its data back from a result folder's args.json.

train_text_classifier.py writes args.json, vocab.json, calib.json and best_model.npz;
every other script calls `load_setup(path)` and gets the same model, vocabulary and
splits (train / dev / calibration / test) that training used.
"""
import dataclasses
import os

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
        return self.dataset.label_names


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
        snli_majority=config.get('snli_majority', False))
    splits = text_datasets.make_splits(
        dataset, seed=config['seed'], dev_fraction=config.get('dev_fraction', 0.1),
        n_calib=config['n_calib'], select_on_test=config.get('select_on_test', False))
    exclude = read_exclusions(config.get('exclude_train'))
    if exclude or config.get('label_noise'):
        splits = text_datasets.change_train(
            splits, len(dataset.label_names), exclude, config.get('label_noise') or 0.0,
            config.get('label_noise_seed', 0))
    return dataset, splits


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
    config = nlp_utils.read_json(args_path, 'model setup')
    missing = [f for f in ARGS_FIELDS if f not in config] if isinstance(config, dict) else ['all']
    if missing:
        raise UserError('model setup {} lacks fields {}; re-train with train_text_classifier.py'
                        .format(args_path, missing))
    return config


def check_calibration(result_dir, splits):
    """The calibration split recomputed from the seed must be the one saved at training."""
    saved = nlp_utils.read_json(os.path.join(result_dir, 'calib.json'), 'calibration split')
    if saved.get('calib_indices') != list(splits.calib_indices):
        raise UserError('{}/calib.json does not match the calibration split recomputed from '
                        'args.json: the data changed since training; re-train'.format(result_dir))


def load_model(config, result_dir, vocab, device):
    model = nets.build_model(config, len(vocab), config['n_class'], config['pair'])
    nlp_utils.load_npz_safely(os.path.join(result_dir, config['model_path']), model)
    model.to_device(device)
    return model


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
    vocab = nlp_utils.read_json(os.path.join(result_dir, config['vocab_path']), 'vocabulary')
    dataset, splits = load_data(config)
    check_calibration(result_dir, splits)
    device = get_device(gpu)
    model = load_model(config, result_dir, vocab, device)
    return Setup(config, result_dir, vocab, model, dataset, splits, device)
