"""A BERT-architecture encoder in Chainer, and a text classifier on top of it.

The pretrained checkpoint (folder, config, weights, tokenizer) comes from
pretrained.py. `TransformerClassifier` has the interface of `nets.TextClassifier`: it
reads the project's word ids (ending with '<eos>', or (premise, hypothesis) pairs),
turns every word into its word pieces, and its DkNN layers are the [CLS] state of
every transformer layer, the pooler output and the logits. Outputs never depend on
batch mates: padded keys are masked in attention.

Shapes: B inputs in a batch, T word pieces (padded), H hidden units, C classes.
"""
import math
import os

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np

from deepknn.models.pretrained import WordPieces, load_weights
from nets import BatchedInference, inference_mode, to_numpy
from nlp_utils import UserError

# Added to the attention scores of padded keys: exp() of it is exactly 0 in float32/64.
MASK_VALUE = -1e4


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
        """h: (B*T, H); mask_bias: (B*heads, 1, T), MASK_VALUE at padded keys -> (B*T, H)."""
        attended = self.attention_output(self.attend(h, mask_bias))
        h = self.attention_norm(h + F.dropout(attended, self.dropout))
        inner = gelu(self.intermediate(h))
        return self.output_norm(h + F.dropout(self.output(inner), self.dropout))

    def attend(self, h, mask_bias):
        """Multi-head scaled dot-product attention, (B*T, H) -> (B*T, H)."""
        batch, length = mask_bias.shape[0] // self.n_heads, mask_bias.shape[2]
        head_size = h.shape[1] // self.n_heads
        split = self._split_heads
        q = split(self.query(h) * (1.0 / math.sqrt(head_size)), batch, length)
        # + broadcasts the bias over the query axis: (B*heads, T, T) + (B*heads, 1, T).
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
        """(B, T) mask -> (B*heads, 1, T) constant added to every query's attention
        scores (one row per input and head, in the order of BertLayer._split_heads)."""
        xp = self.xp
        bias = xp.where(xp.asarray(mask) != 0, 0, MASK_VALUE).astype(dtype)
        return xp.repeat(bias, self.config.num_attention_heads, axis=0)[:, None, :]


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


def _mask(rows):
    """list of lists -> (B, T) float32, 1 at the entries of each row, 0 in the padding."""
    lengths = np.array([len(r) for r in rows])
    return (np.arange(lengths.max())[None, :] < lengths[:, None]).astype(np.float32)


class TransformerClassifier(chainer.Chain, BatchedInference):
    """BERT encoder -> dropout(pooled [CLS]) -> Linear (logits), with the interface of
    nets.TextClassifier.

    Inputs are int32 arrays of word ids of `words` (ending with '<eos>'), or with
    pair=True (premise_ids, hypothesis_ids) tuples, encoded as [CLS] w.. [SEP] or
    [CLS] premise [SEP] hypothesis [SEP] (token types 0, then 1 from the hypothesis
    on) and truncated to `max_length` word pieces. The DkNN layers are the [CLS]
    state of layers 1..N, the pooler output and the logits.
    """

    # Padded word pieces per inference batch: attention costs grow with the square of the
    # padded length, so a chunk of leave-one-out rows is cut into length-sorted batches.
    max_batch_units = 2048

    def __init__(self, config, wordpieces, words, n_class, pair=False, max_length=128):
        super().__init__()
        self._check(config, wordpieces, pair, max_length)
        self.config, self.wordpieces = config, wordpieces
        self.pair, self.max_length, self.n_class = pair, max_length, n_class
        self.dropout = config.hidden_dropout_prob
        self.words, self._word_pieces, self._piece_counts = [], [], []
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
            self._piece_counts.append(len(self._word_pieces[-1]))

    # ---------------------------------------------------------- word pieces
    def _word_ids(self, ids):
        """Word ids (n,) as a list of ints; ValueError for an id the classifier lacks."""
        ids = chainer.backend.CpuDevice().send(ids).tolist()
        if ids and not (min(ids) >= 0 and max(ids) < len(self.words)):
            unknown = next(i for i in ids if not 0 <= i < len(self.words))
            raise ValueError('word id {} is not in the classifier\'s {} words; add new '
                             'words with add_words'.format(unknown, len(self.words)))
        return ids

    def _pieces_of(self, ids):
        """Word ids (n,) -> (piece ids, index in `ids` of the word of each piece)."""
        pieces, owners = [], []
        for position, word_id in enumerate(self._word_ids(ids)):
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
        """Word pieces of an input before truncation, special tokens not counted."""
        parts = x if self.pair else (x,)
        return sum(sum(map(self._piece_counts.__getitem__, self._word_ids(part)))
                   for part in parts)

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
        mask = _mask([s[0] for s in sequences])
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
    def input_length(self, x):
        return self._n_pieces(x)

    def _send(self, x):
        return x    # word ids are mapped to pieces on the host (encode_batch)

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
    (sentence-transformers truncates it to 256 pieces; never past the model's positions)."""
    max_length = min(max_length, encoder.config.max_position_embeddings)
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
    mask = _mask(rows)
    send = encoder.device.send
    states, _ = encoder(send(pieces), send(np.zeros_like(pieces)), send(mask))
    last = to_numpy(states[-1]).astype(np.float64)
    return (last * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
