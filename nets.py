"""Text classifiers of the paper (CNN, BiLSTM, SNLI pair model) plus BOW/RNN baselines.

Every model is a `TextClassifier`: an encoder that maps embedded token sequences to
a list of per-layer representations, followed by fully connected layers whose last
one outputs the logits. The DkNN layers of a model are `model.dknn_layers(...)`:

  CNN     pooled convolution output, FC1, FC2, FC3 (= logits)
  BiLSTM  final states of the 3 recurrent layers, FC1, FC2 (= logits)
  SNLI    FC1, FC2 (= logits) on top of [u; v; u*v; |u-v|]

Inputs are int32 id arrays (one per sentence, '<eos>' appended), or for pair
models (premise_ids, hypothesis_ids) tuples. In exact arithmetic outputs never depend
on which other sentences share a batch (the CNN masks padded windows, the RNNs take
ragged input); in floats they do, in the last bit: a BLAS product's rows change with
the matrix's row count and thread count. Inference therefore runs in canonical blocks
(`BatchedInference`), so that every path computes a row the same way.
"""
import contextlib

import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
import threadpoolctl
import tqdm

from deepknn.models.ragged_lstm import ragged_lstm


MODELS = ('cnn', 'bilstm', 'rnn', 'bow')
MODEL_NAMES = {'cnn': 'CNN', 'bilstm': 'BiLSTM', 'rnn': 'RNN', 'bow': 'BOW'}   # in tables


@contextlib.contextmanager
def inference_mode():
    """Test-mode behaviour (no dropout) without building a backward graph."""
    with chainer.using_config('train', False), chainer.using_config('enable_backprop', False):
        yield


_THREADS = threadpoolctl.ThreadpoolController()


@contextlib.contextmanager
def one_blas_thread():
    """BLAS limited to one thread: a product's rows then do not depend on how many
    threads the machine, a Ray worker or OMP_NUM_THREADS gives (measured in
    benchmarks/bench_canonical_blocks.py)."""
    with _THREADS.limit(limits=1, user_api='blas'):
        yield


def block_rows(start, stop, n_rows):
    """The rows [first, last) of the canonical blocks that cover rows [start, stop) of a
    list of `n_rows` inputs: compute those, then keep [start - first, stop - first)."""
    return start - start % CANONICAL_ROWS, min(n_rows, -(-stop // CANONICAL_ROWS) * CANONICAL_ROWS)


def canonical_chunks(n_rows):
    """(start, stop) chunks of a list of `n_rows` inputs, whole canonical blocks each:
    for a caller that computes a long list piece by piece."""
    return [(start, min(n_rows, start + CANONICAL_ROWS)) for start in range(0, n_rows, CANONICAL_ROWS)]


def _n_ids(x):
    """Length of an input: ids, or the longer part of a (premise, hypothesis) pair."""
    return max(len(part) for part in x) if isinstance(x, tuple) else len(x)


def to_numpy(variable):
    return chainer.backend.CpuDevice().send(variable.array)


class CNNEncoder(chainer.Chain):
    """Kim (2014): filters of widths 3, 4, 5 (n_units // 3 each), ReLU, max over time."""
    widths = (3, 4, 5)

    def __init__(self, embed_dim, n_units, dropout):
        super().__init__()
        n_filters = max(1, n_units // len(self.widths))
        self.dropout = dropout
        self.out_size = n_filters * len(self.widths)
        with self.init_scope():
            self.convs = chainer.ChainList(
                *[L.Convolution1D(embed_dim, n_filters, w) for w in self.widths])

    def forward(self, embedded):
        """embedded: list of (len_i, E) -> [pooled (B, out_size)]."""
        # Each sentence is padded to at least the widest filter on its own account, and
        # windows beyond that are masked, so a sentence's output ignores its batch mates.
        lengths = np.array([max(len(e), max(self.widths)) for e in embedded])
        padded = F.pad_sequence(embedded, length=int(lengths.max()), padding=0)
        h = F.dropout(F.transpose(padded, (0, 2, 1)), self.dropout)
        pooled = []
        for width, conv in zip(self.widths, self.convs):
            feature_maps = F.relu(conv(h))  # (B, n_filters, T - width + 1)
            positions = np.arange(feature_maps.shape[2])
            valid = (positions[None, :] < (lengths - width + 1)[:, None])
            valid = self.xp.asarray(valid[:, None, :].astype(feature_maps.dtype))
            # ReLU outputs are >= 0 and every sentence has a valid window, so zeroing
            # the invalid ones leaves the maximum over the valid ones.
            pooled.append(F.max(feature_maps * valid, axis=2))
        return [F.concat(pooled, axis=1)]


class RNNEncoder(chainer.Chain):
    """Stacked (Bi)LSTM; each layer is represented by its final hidden state(s).

    The backward direction really reads the sentence right to left (the original
    code ran both of its LSTMs forward).
    """

    def __init__(self, embed_dim, n_layers, n_units, dropout, bidirectional):
        super().__init__()
        self.n_directions = 2 if bidirectional else 1
        self.n_layers = n_layers
        self.dropout = dropout
        self.out_size = n_units * self.n_directions
        rnn_class = L.NStepBiLSTM if bidirectional else L.NStepLSTM
        with self.init_scope():
            # The link holds the parameters (names and initialisation as before, so
            # saved models load); ragged_lstm computes its forward pass faster.
            self.rnn = rnn_class(n_layers, embed_dim, n_units, dropout)

    def forward(self, embedded):
        """embedded: list of (len_i, E) -> n_layers arrays (B, out_size)."""
        embedded = [F.dropout(e, self.dropout) for e in embedded]
        final_states = ragged_lstm(self.rnn.ws, self.rnn.bs, embedded, self.n_directions,
                                   self.dropout)
        d = self.n_directions
        return [F.concat(final_states[layer * d:(layer + 1) * d], axis=1)
                for layer in range(self.n_layers)]


class BOWEncoder(chainer.Chain):
    """Mean of the word embeddings."""

    def __init__(self, embed_dim, dropout):
        super().__init__()
        self.dropout = dropout
        self.out_size = embed_dim

    def forward(self, embedded):
        return [F.dropout(F.stack([F.mean(e, axis=0) for e in embedded]), self.dropout)]


# Rows per canonical block: enough that grouping by length inside a block pads about as
# little as grouping the whole split (benchmarks/bench_canonical_blocks.py).
CANONICAL_ROWS = 1024


class BatchedInference:
    """Numpy inference in canonical blocks for a Chain with `dknn_layers(xs)` (the last
    layer is the logits), `forward(xs)`, `n_class` and `input_length(x)`.

    The canonical rule, which makes a row's outputs the same bytes in every path (one
    process, Ray parts, caches, the explorer): the inputs are cut into consecutive blocks
    of CANONICAL_ROWS rows, rows [0, R), [R, 2R), ... of the list; inside a block inputs
    are grouped by length, shortest first, into batches of at most `batchsize` (and,
    where `max_batch_units` is set, a transformer's, at most that many padded
    positions), and computed with one BLAS thread. A batch depends on its block alone,
    so row r of a list is computed the same way whoever asks for it with the same
    batchsize; `block_rows` gives the rows to compute for a slice of a longer list (a Ray
    part), and a caller that cuts a list into chunks cuts at multiples of CANONICAL_ROWS.
    """
    max_batch_units = None

    def _batches(self, xs, batchsize, progress):
        """Yield (positions in xs, the inputs at those positions, on the model's device)."""
        groups = [start + group for start in range(0, len(xs), CANONICAL_ROWS)
                  for group in self._length_groups(xs[start:start + CANONICAL_ROWS], batchsize)]
        if progress:
            groups = tqdm.tqdm(groups, desc=progress, unit='batch', leave=False)
        with one_blas_thread():    # for the caller's forward pass, between the yields
            for positions in groups:
                yield positions, [self._send(xs[i]) for i in positions]

    def _length_groups(self, block, batchsize):
        """Positions in `block` grouped by length, shortest first: at most `batchsize`
        each, and at most max_batch_units padded positions where that is set."""
        lengths = [self.input_length(x) for x in block]
        order = np.argsort(lengths, kind='stable')
        groups, start = [], 0
        while start < len(order):
            end = start + 1
            while end < len(order) and end - start < batchsize and (
                    self.max_batch_units is None
                    or (end - start + 1) * lengths[order[end]] <= self.max_batch_units):
                end += 1
            groups.append(order[start:end])
            start = end
        return groups

    def _send(self, x):
        if isinstance(x, tuple):
            return tuple(self.device.send(part) for part in x)
        return self.device.send(x)

    def layer_activations(self, xs, batchsize=64, progress=None):
        """Every DkNN layer for every input: list of float32 arrays (N, D_l).

        `progress`: a description to show a progress bar with, or None.
        """
        layers = None
        with inference_mode():
            for positions, batch in self._batches(xs, batchsize, progress):
                outputs = [to_numpy(v) for v in self.dknn_layers(batch)]
                if layers is None:
                    layers = [np.empty((len(xs), o.shape[1]), np.float32) for o in outputs]
                for layer, output in zip(layers, outputs):
                    layer[positions] = output
        return layers if layers is not None else []   # no inputs: no layer arrays

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


class TextClassifier(chainer.Chain, BatchedInference):
    """Embedding -> encoder -> hidden FC layers -> output FC layer (logits).

    pair=True encodes premise u and hypothesis v with the same encoder and feeds
    [u; v; u*v; |u-v|] to the FC layers; only the FC layers are DkNN layers then.
    """

    def __init__(self, encoder, n_vocab, embed_dim, n_units, n_class, n_hidden_fc,
                 dropout, pair=False, initial_embeddings=None):
        super().__init__()
        self.pair = pair
        self.n_class = n_class
        self.dropout = dropout
        fc_in = encoder.out_size * (4 if pair else 1)
        sizes = [fc_in] + [n_units] * n_hidden_fc + [n_class]
        with self.init_scope():
            self.embed = L.EmbedID(n_vocab, embed_dim, initialW=initial_embeddings)
            self.encoder = encoder
            self.fcs = chainer.ChainList(
                *[L.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])])

    input_length = staticmethod(_n_ids)

    # ---------------------------------------------------------- graph building
    def embed_sequences(self, xs):
        """list of id arrays -> list of (len_i, E) Variables (one EmbedID call)."""
        lengths = np.array([len(x) for x in xs])
        embedded = self.embed(self.xp.concatenate(xs))
        return list(F.split_axis(embedded, np.cumsum(lengths)[:-1], axis=0))

    def embed_inputs(self, xs):
        """Inputs -> embedded inputs (a list, or a (premises, hypotheses) pair of lists)."""
        if self.pair:
            return (self.embed_sequences([p for p, _ in xs]),
                    self.embed_sequences([h for _, h in xs]))
        return self.embed_sequences(xs)

    def layers_from_embedded(self, embedded):
        """Embedded inputs -> every layer's output; the last one is the logits (B, C)."""
        if self.pair:
            u = self.encoder(embedded[0])[-1]
            v = self.encoder(embedded[1])[-1]
            encoder_layers = []
            h = F.concat([u, v, u * v, F.absolute(u - v)], axis=1)
        else:
            encoder_layers = self.encoder(embedded)
            h = encoder_layers[-1]
        fc_layers = []
        for i, fc in enumerate(self.fcs):
            h = fc(h)
            if i < len(self.fcs) - 1:
                h = F.dropout(F.relu(h), self.dropout)
            fc_layers.append(h)
        return encoder_layers + fc_layers

    def dknn_layers(self, xs):
        """The layers the DkNN searches, as Variables (B, D_l)."""
        return self.layers_from_embedded(self.embed_inputs(xs))

    def forward(self, xs):
        """Logits (B, C); the training loss of L.Classifier is computed on these."""
        return self.dknn_layers(xs)[-1]

    def input_gradients(self, xs, labels, batchsize=64):
        """Per-token (dL/de_t) . e_t, with L the cross-entropy at `labels` and e_t the
        embedding of token t (dropout off). Returns a list of float32 arrays
        (len_i,), one per input: for pairs, over the hypothesis tokens.
        """
        results = [None] * len(xs)
        labels = np.asarray(labels, dtype=np.int32)
        with chainer.using_config('train', False):   # no dropout
            for positions, batch in self._batches(xs, batchsize, None):
                embedded = self.embed_inputs(batch)
                logits = self.layers_from_embedded(embedded)[-1]
                targets = self.xp.asarray(labels[positions])
                # Summed, not averaged, so each example gets its own loss's gradient.
                loss = F.sum(F.softmax_cross_entropy(logits, targets, reduce='no'))
                scored = embedded[1] if self.pair else embedded
                grads = chainer.grad([loss], scored)
                for position, g, e in zip(positions, grads, scored):
                    results[position] = to_numpy(F.sum(g * e, axis=1))
        return results


def accuracy(model, examples, batchsize=64):
    """Fraction of [(ids, label)] examples whose argmax logit is the label (NaN for none)."""
    if not examples:
        return float('nan')
    logits = model.predict_logits([x for x, _ in examples], batchsize)
    return float(np.mean(logits.argmax(axis=1) == np.array([y for _, y in examples])))


def build_model(config, n_vocab, n_class, pair, initial_embeddings=None):
    """The model described by `config`, anything with the attributes model, unit,
    layer, dropout and embed_dim (a result folder's RunConfig)."""
    name, units, dropout = config.model, config.unit, config.dropout
    embed_dim = config.embed_dim
    if name == 'cnn':
        encoder, n_hidden_fc = CNNEncoder(embed_dim, units, dropout), 2
    elif name in ('bilstm', 'rnn'):
        encoder = RNNEncoder(embed_dim, config.layer, units, dropout,
                             bidirectional=(name == 'bilstm'))
        n_hidden_fc = 1
    elif name == 'bow':
        encoder, n_hidden_fc = BOWEncoder(embed_dim, dropout), 1
    else:
        raise ValueError('unknown model {!r}; choose from {}'.format(name, MODELS))
    if pair:
        n_hidden_fc = 1  # the SNLI classifier: two FC layers on [u; v; u*v; |u-v|]
    return TextClassifier(encoder, n_vocab, embed_dim, units, n_class, n_hidden_fc,
                          dropout, pair=pair, initial_embeddings=initial_embeddings)
