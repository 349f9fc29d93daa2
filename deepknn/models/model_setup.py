"""The one way to get a trained model and its data back from a result folder's args.json.

train_text_classifier.py writes args.json, vocab.json, calib.json and best_model.npz;
every other script calls `load_setup(path)` and gets the same model, vocabulary and
splits (train / dev / calibration / test) that training used.
"""
import dataclasses
import functools
import os
import re
import sys
import threading

import chainer

import nets
import nlp_utils
import text_datasets
from deepknn.data import text_readers
from deepknn.storage.run_config import RunConfig, read_config, write_config  # noqa: F401 (API)
from deepknn.data.splits import Splits, change_train, make_splits
from nlp_utils import UserError


@dataclasses.dataclass
class Setup:
    """A trained model with its data. Token-level splits hold (tokens, label);
    id-level splits hold (ids, label) ready for the model."""
    config: RunConfig
    result_dir: str
    vocab: dict
    model: nets.TextClassifier
    dataset: text_datasets.Dataset
    splits: Splits
    device: chainer.backend.Device

    def encode(self, examples):
        """[(tokens, label)] -> [(ids, label)]; ids are int32 arrays ending in '<eos>'."""
        return nlp_utils.encode_examples(examples, self.vocab)

    @functools.cached_property
    def _known_words(self):
        return frozenset(word.lower() for word in dict.keys(self.vocab))

    def tokenize(self, text):
        """Tokens of one text from outside the run's data files (a user's sentence, a
        line of an evaluation file), the one way every command splits new text for this
        run: text_readers.tokenize_new_text in the run's data format, then each word the
        vocabulary lacks lower-cased where it has that."""
        raw_style = text_datasets.raw_text_format(self.config.dataset, self.config.train_file)
        tokens = text_readers.tokenize_new_text(text, self.config.char_based, raw_style,
                                                self._known_words)
        return nlp_utils.fold_case(tokens, self.vocab)

    def retokenize(self, tokens):
        """`tokens` (or a pair) read from a data file, split again as `tokenize` splits
        new text; the same tokens for text already split so."""
        if isinstance(tokens, tuple):
            return tuple(self.retokenize(part) for part in tokens)
        return list(tokens) if self.config.char_based else self.tokenize(' '.join(tokens))

    def new_inputs(self, path):
        """[(line number, tokens)] of a user's file of unlabelled sentences (premise TAB
        hypothesis for a pair model), tokenized by `tokenize`."""
        return text_datasets.read_new_inputs(path, self.config.pair, self.tokenize)

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

    def evaluation_examples(self, split='test', eval_file=None, skip_bad_lines=False):
        """(name, token-level examples) to evaluate: a split of the training data, or
        `eval_file` read in the model's data format with its labels (the dataset's own,
        '1', or the readable names the reports show, 'positive'); malformed lines are
        skipped when `skip_bad_lines` (or the run was trained so). The name (the split, or
        'file-<file name>') goes into output file names, so results on one split or file
        never overwrite another's."""
        if eval_file is None:
            return split, getattr(self.splits, split)
        examples = [(self.retokenize(tokens), label)
                    for tokens, label in text_datasets.read_eval_file(
                        eval_file, self.config.dataset, self.dataset.label_names,
                        self.config.char_based, self.config.skip_bad_lines or skip_bad_lines,
                        self.dataset.display_names)]
        if os.path.abspath(eval_file) == os.path.abspath(self.config.train_file or ''):
            print('warning: evaluation file {} is the training file of this model; its numbers '
                  'measure fit, not generalisation'.format(eval_file), file=sys.stderr)
        stem, extension = os.path.splitext(os.path.basename(eval_file))
        if extension not in ('.txt', '.tsv', '.jsonl'):   # stsa.binary.dev keeps its '.dev'
            stem += extension
        return 'file-' + re.sub(r'[^A-Za-z0-9_.-]+', '_', stem), examples


class OpenVocabulary(dict):
    """The vocabulary of a word-piece model, which knows every word.

    Holds the run's vocab.json (word -> id): iteration, len, items and digest are the
    trained run's. A word the run never saw is not '<unk>': on its first look-up it gets
    the next free id and the model (`add_words`) its word pieces, so new text, evaluation
    files and every method fed through `nlp_utils.to_ids` reach the tokenizer with the
    words themselves. Only word-vector models have a closed vocabulary."""

    def __init__(self, vocab, add_words):
        super().__init__(vocab)
        self._added = {}
        self._add_words = add_words
        self._lock = threading.Lock()   # an app may look words up from several threads

    def __contains__(self, word):
        return isinstance(word, str)

    def __missing__(self, word):
        return self._new_id(word)

    def get(self, word, default=None):
        return dict.get(self, word) if dict.__contains__(self, word) else self._new_id(word)

    def _new_id(self, word):
        with self._lock:
            if word not in self._added:
                self._add_words([word])
                self._added[word] = len(self) + len(self._added)
            return self._added[word]


def open_vocabulary(config, vocab, model):
    """`vocab` itself for a word-vector model; for a transformer (whose word list
    build_model made from `vocab` in id order) an OpenVocabulary feeding `model`."""
    return OpenVocabulary(vocab, model.add_words) if is_transformer(config) else vocab


def get_device(gpu):
    """Chainer device for --gpu: negative is the CPU; cupy is only imported for a GPU."""
    if gpu < 0:
        return chainer.get_device('@numpy')
    try:
        return chainer.get_device('@cupy:{}'.format(gpu))
    except (RuntimeError, ImportError, ValueError) as e:
        raise UserError('`gpu` {} is not usable here ({}); install cupy for your CUDA or use '
                        '`gpu` -1'.format(gpu, str(e).splitlines()[0]))


def load_data(config):
    """(Dataset, Splits) for a RunConfig. A new run's n_calib of None becomes
    default_calibration_size of its data (and is recorded in the config)."""
    dataset = text_datasets.load_dataset(
        config.dataset, data_dir=config.data_dir,
        train_file=config.train_file, dev_file=config.dev_file,
        test_file=config.test_file, char_based=config.char_based,
        seed=config.seed, skip_bad_lines=config.skip_bad_lines,
        snli_majority=config.snli_majority,
        allow_unseen_labels=config.allow_unseen_labels)
    if config.n_calib is None:
        config.n_calib = default_calibration_size(dataset, config.dev_fraction)
    splits = make_splits(
        dataset, seed=config.seed, dev_fraction=config.dev_fraction,
        n_calib=config.n_calib, select_on_test=config.select_on_test)
    exclude = read_exclusions(config.exclude_train)
    if exclude or config.label_noise:
        splits = change_train(
            splits, len(dataset.label_names), exclude, config.label_noise or 0.0,
            config.label_noise_seed)
    return dataset, splits


DEFAULT_CALIBRATION = 1000


def default_calibration_size(dataset, dev_fraction):
    """1000 held-out calibration examples, or 10% of the training pool (said so) when
    1000 would leave the model fewer than half of the pool to train on."""
    pool = len(dataset.train_pool)
    n_dev = int(pool * dev_fraction) if dataset.dev is None else 0
    if pool - n_dev - DEFAULT_CALIBRATION >= pool / 2:
        return DEFAULT_CALIBRATION
    n_calib = pool // 10
    print('calibration split: {} examples (10% of the {} training examples; {} would leave '
          'too few to train on; n_calib sets another size)'.format(
              n_calib, pool, DEFAULT_CALIBRATION))
    return n_calib


def read_exclusions(path):
    """The --exclude-train file: a JSON list of indices into the training split."""
    if not path:
        return []
    indices = nlp_utils.read_json(path, '`exclude_train` file')
    if not isinstance(indices, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in indices):
        raise UserError('`exclude_train` file {} must hold a JSON list of integer indices into '
                        'the training split'.format(path))
    return indices


def write_train_changes(result_dir, splits):
    """train_changes.json: the excluded and the label-flipped training indices (empty lists
    for an unchanged training split), so experiments can score against them."""
    nlp_utils.atomic_write_json(os.path.join(result_dir, 'train_changes.json'), {
        'excluded_indices': list(map(int, splits.excluded_indices)),
        'flipped_indices': list(map(int, splits.flipped_indices))})


def read_vocab(result_dir, config):
    """vocab.json, checked: word -> distinct ids 0 .. n-1, and the one the model was
    trained with (its digest in args.json), not another of the same size."""
    path = os.path.join(result_dir, config.vocab_path)
    vocab = nlp_utils.read_json(path, 'vocabulary', dict)
    ids = list(vocab.values())
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids) \
            or sorted(ids) != list(range(len(ids))):
        raise UserError('vocabulary {} must map words to the distinct ids 0 .. n-1; restore it '
                        'or re-train'.format(path))
    if config.vocab_digest not in (None, nlp_utils.vocab_digest(vocab)):
        raise UserError('vocabulary {} is not the one this model was trained with (its digest '
                        'differs from args.json); restore it or re-train'.format(path))
    return vocab



def check_calibration(result_dir, splits):
    """The calibration split recomputed from the seed must be the one saved at training."""
    saved = nlp_utils.read_json(os.path.join(result_dir, 'calib.json'), 'calibration split', dict)
    if saved.get('calib_indices') != list(splits.calib_indices):
        raise UserError('{}/calib.json does not match the calibration split recomputed from '
                        'args.json: the data changed since training; re-train'.format(result_dir))


TRANSFORMER_MODELS = ('minilm', 'transformer')   # the packaged MiniLM; any BERT folder
# How tables name every model.
MODEL_NAMES = dict(nets.MODEL_NAMES, minilm='MiniLM', transformer='BERT (own checkpoint)')


def is_transformer(config):
    return config.model in TRANSFORMER_MODELS


def pretrained_checkpoint(config):
    """The transformer checkpoint of a config (its folder, or the packaged MiniLM);
    imported here because tokenizers and safetensors are needed only for these."""
    from deepknn.models import pretrained
    return pretrained.checkpoint(config.pretrained)


def describe_transformer(config):
    """Fill the architecture fields of a new transformer run from its checkpoint:
    units, layers and dropout are the checkpoint's, and its weights' hash is kept."""
    checkpoint = pretrained_checkpoint(config)
    bert = checkpoint.config
    config.unit = config.embed_dim = bert.hidden_size
    config.layer = bert.num_hidden_layers
    config.dropout = bert.hidden_dropout_prob
    config.weights_sha256 = checkpoint.weights_sha256
    config.pretrained_sha256 = dict(checkpoint.file_sha256)


def check_checkpoint_files(config, checkpoint):
    """UserError when a checkpoint file a run depends on beyond its initial weights
    (its tokenizer, its config) changed since the run was trained: word pieces and
    dropout would change its predictions. Changed pretrained weights only warn: the
    fine-tuned weights are the run's own."""
    recorded = dict(config.pretrained_sha256 or {})
    if config.weights_sha256 is not None:
        recorded.setdefault('model.safetensors', config.weights_sha256)
    changed = [name for name in sorted(recorded)
               if name != 'model.safetensors' and checkpoint.file_sha256.get(name) != recorded[name]]
    if changed:
        name = changed[0]
        raise UserError('{} of the pretrained model {} changed since this run was trained '
                        '(sha256 {} then, {} now); its predictions would change: restore '
                        'the file or re-train'.format(
                            name, checkpoint.folder, recorded[name][:12],
                            (checkpoint.file_sha256.get(name) or 'missing')[:12]))
    if recorded.get('model.safetensors') not in (None, checkpoint.weights_sha256):
        print('warning: the pretrained weights in {} changed since this model was trained; '
              'only their tokenizer and config are used here'.format(checkpoint.folder),
              file=sys.stderr)
    if config.pretrained is not None and config.pretrained_sha256 is None:
        print('warning: this run predates recorded checkpoint digests; whether {} still '
              'holds the tokenizer and config it was trained with cannot be checked'.format(
                  checkpoint.folder), file=sys.stderr)


def build_model(config, vocab, embeddings=None):
    """The model a config describes, for vocabulary `vocab` (word -> id): a nets
    encoder (with pretrained `embeddings` rows, or None), or a pretrained transformer
    whose word pieces come from the checkpoint's tokenizer."""
    if not is_transformer(config):
        return nets.build_model(config, len(vocab), config.n_class, config.pair, embeddings)
    from deepknn.models import transformer
    checkpoint = pretrained_checkpoint(config)
    check_checkpoint_files(config, checkpoint)
    words = sorted(vocab, key=vocab.get)
    return transformer.build_classifier(checkpoint, words, config.n_class, config.pair,
                                        config.max_length)


def load_model(config, result_dir, vocab, device):
    model = build_model(config, vocab)
    nlp_utils.load_npz_safely(os.path.join(result_dir, config.model_path), model)
    model.to_device(device)
    return model


def run_description(setup):
    """'<run folder> (parameters sha256 0123456789ab)': the folder and the weights a
    table read, so a number can be traced to the model that made it."""
    return _description(setup.result_dir, setup.config.model_path)


def folder_description(result_dir):
    """run_description of a finished result folder, read from its args.json."""
    config = read_config(os.path.join(result_dir, 'args.json'))
    return _description(result_dir, config.model_path)


def models_line(descriptions):
    """'Models: a (parameters sha256 ..); b (...).', the line a table over several runs carries."""
    return 'Models: {}.'.format('; '.join(descriptions))


def _description(result_dir, model_path):
    return '{} (parameters sha256 {})'.format(os.path.relpath(result_dir),
                                              model_digest(result_dir, model_path))


def model_digest(result_dir, model_path):
    """The first 12 hex digits of nlp_utils.parameters_digest of a result folder's
    weights: the same for the same weights whatever the file's member order, enough to
    tell two models apart in a table, short enough to read."""
    path = os.path.join(result_dir, model_path)
    if not os.path.exists(path):
        raise UserError('{} does not exist: {} lacks its weights; re-train that run or move '
                        'it out of {}'.format(path, result_dir, os.path.dirname(result_dir)))
    return nlp_utils.npz_parameters_digest(path)[:12]

def load_setup(args_path, gpu=-1, data_dir=None):
    """Rebuild model, vocabulary and splits from a result folder's args.json.

    `data_dir` overrides the data directory stored at training time (e.g. after
    moving to another machine); otherwise DKNN_DATA_DIR, then the stored one.
    """
    if os.path.isdir(args_path):
        args_path = os.path.join(args_path, 'args.json')
    config = read_config(args_path)
    if config.model not in nets.MODELS + TRANSFORMER_MODELS:
        raise UserError("model setup {}: field 'model' is {!r}, expected one of {}; restore the "
                        "file or re-train".format(args_path, config.model,
                                                  ', '.join(nets.MODELS + TRANSFORMER_MODELS)))
    result_dir = os.path.dirname(os.path.abspath(args_path))
    config.data_dir = data_dir or os.environ.get('DKNN_DATA_DIR') or config.data_dir
    vocab = read_vocab(result_dir, config)
    dataset, splits = load_data(config)
    check_calibration(result_dir, splits)
    if config.data_digest not in (None, nlp_utils.examples_digest(
            splits.train, splits.dev, splits.calib, splits.test)):
        print('warning: the data of {} changed since training (same split sizes, other '
              'examples); its DkNN caches are rebuilt'.format(result_dir), file=sys.stderr)
    device = get_device(gpu)
    model = load_model(config, result_dir, vocab, device)
    return Setup(config, result_dir, open_vocabulary(config, vocab, model), model, dataset,
                 splits, device)
