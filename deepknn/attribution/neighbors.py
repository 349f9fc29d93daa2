"""Attribution by nearness in the model's layers (knn, dknn-vote) and the random floor.

  knn        score = -Euclidean distance (metric 'l2') or cosine similarity ('cosine')
             between the test input's and the training row's activations in one layer
             (`layer`, an index into Representations.layers; default -2, the
             penultimate layer). Distances follow the project's neighbour rule
             (deepknn/neighbor_rule.py): float64 differences of the stored activations,
             summed along a row, so top(test, k) with 'l2' returns the rows a DkNN
             index search returns, ties by the smaller training index. A zero vector
             has cosine 0 with everything (ReLU layers can be all zero).
  dknn-vote  score = in how many of the DkNN layers (`layers`, default all) the training
             row is among the k nearest neighbours (k default 75, the DkNN's) of the
             test input: an integer in [0, L]. Neighbours come from the brute-force rule
             above, or from deepknn.neighbors.knn_index (`backend`, `index_options`), which keeps
             the same rule. signed=True counts a neighbour whose label is the class
             explained +1 and any other -1 (its vote for or against that class in the
             DkNN's nonconformity), an integer in [-L, L]: the neighbours as evidence for
             the prediction, which a datamodel (LDS) can use; unsigned they say only "near".
             Self-influence (noisy-label detection): how many of the row's k nearest other
             training rows, over the layers, carry another label than its own (the kNN
             noisy-label rule; the row itself is left out of its neighbours).
  random     seeded uniform [0, 1) scores, the floor: the score of (test row t,
             training row i) is drawn from a generator keyed (seed, t, i // 4096), so it
             does not depend on blocks or on how many test rows are scored together
             (only on t's position).
"""
import numpy as np

from deepknn.attribution.base import Attribution, require
from deepknn.neighbors.knn_index import make_index

# Float64 differences held at once by the distance computation: (queries x rows x D).
_DIFFERENCE_ELEMENTS = 1 << 22
_RANDOM_COLUMNS = 4096
_RANDOM_TAG = 1          # keys (seed, 1, t, chunk) for scores, (seed, 2) for self-influence


def euclidean(queries, vectors):
    """(M, n) float64 Euclidean distances between queries (M, D) and vectors (n, D), as
    the neighbour rule computes them (differences in float64, summed along a row)."""
    out = np.empty((len(queries), len(vectors)))
    width = max(1, vectors.shape[1])
    columns = max(1, _DIFFERENCE_ELEMENTS // width)
    for first in range(0, len(vectors), columns):
        part = vectors[first:first + columns].astype(np.float64)
        rows = max(1, _DIFFERENCE_ELEMENTS // (len(part) * width))
        for start in range(0, len(queries), rows):
            diff = part[None, :, :] - queries[start:start + rows, None, :].astype(np.float64)
            out[start:start + rows, first:first + columns] = np.sqrt(np.sum(diff * diff, axis=2))
    return out


def cosine(queries, vectors):
    """(M, n) float64 cosine similarities; 0 where either vector is zero."""
    q = np.asarray(queries, dtype=np.float64)
    v = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(q, axis=1)[:, None] * np.linalg.norm(v, axis=1)[None, :]
    return np.divide(q @ v.T, norms, out=np.zeros(norms.shape), where=norms > 0)


def _layer_index(layer, n_layers, parameter='layer'):
    require(not isinstance(layer, bool) and isinstance(layer, (int, np.integer))
            and -n_layers <= layer < n_layers, parameter,
            'must index one of the {} layers, got {!r}'.format(n_layers, layer))
    return int(layer) % n_layers


class NearestNeighbors(Attribution):
    name = 'knn'
    description = 'nearness in one layer: -L2 distance or cosine similarity'
    METRICS = ('l2', 'cosine')

    def __init__(self, layer=-2, metric='l2'):
        require(metric in self.METRICS, 'metric',
                'must be one of {}, got {!r}'.format(self.METRICS, metric))
        self.layer, self.metric = layer, metric

    def _fit(self, train):
        require(len(train.layers) > 0, 'train', 'has no layers')
        self.layer_index = _layer_index(self.layer, len(train.layers))
        self.vectors = train.layers[self.layer_index]

    def _prepare(self, test):
        require(len(test.layers) == len(self.train.layers), 'test',
                'has {} layers, the training set {}'.format(len(test.layers),
                                                            len(self.train.layers)))
        queries = test.layers[self.layer_index]
        require(queries.shape[1] == self.vectors.shape[1], 'test',
                'layer {} has {} dims, the training set\'s {}'.format(
                    self.layer, queries.shape[1], self.vectors.shape[1]))
        return queries

    def _block(self, queries, start, stop):
        if self.metric == 'cosine':
            return cosine(queries, self.vectors[start:stop])
        return -euclidean(queries, self.vectors[start:stop])


class DkNNVote(Attribution):
    name = 'dknn-vote'
    description = 'in how many DkNN layers the training row is among the k nearest neighbours'

    def __init__(self, k=75, layers=None, backend=None, index_options=None, signed=False):
        require(not isinstance(k, bool) and isinstance(k, (int, np.integer)) and k >= 1, 'k',
                'must be a positive integer, got {!r}'.format(k))
        self.k, self.layers, self.backend, self.signed = int(k), layers, backend, bool(signed)
        self.index_options = dict(index_options or {})

    def _fit(self, train):
        require(len(train.layers) > 0, 'train', 'has no layers')
        require(self.k <= len(train), 'k', 'must be at most the {} training rows, got {}'
                .format(len(train), self.k))
        chosen = range(len(train.layers)) if self.layers is None else self.layers
        require(len(chosen) > 0, 'layers', 'names no layer')
        self.layer_indices = [_layer_index(layer, len(train.layers), 'layers')
                              for layer in chosen]
        if self.backend is None:
            self.searchers = [NearestNeighbors(layer, 'l2').fit(train)
                              for layer in self.layer_indices]
        else:
            self.searchers = [make_index(self.backend, **self.index_options).build(
                train.layers[layer]) for layer in self.layer_indices]

    def _neighbor_ids(self, test, k):
        """(n_test, L * k) neighbour ids over the chosen layers."""
        ids = []
        for layer, searcher in zip(self.layer_indices, self.searchers):
            if self.backend is None:
                ids.append(searcher.top(test, k)[0])
            else:
                ids.append(searcher.search(test.layers[layer], k)[1])
        return np.concatenate(ids, axis=1)

    def _prepare(self, test):
        return self._neighbor_ids(test, self.k), test.labels

    def _block(self, state, start, stop):
        ids, classes = state
        counts = np.zeros((len(ids), stop - start))
        rows, columns = np.nonzero((ids >= start) & (ids < stop))
        np.add.at(counts, (rows, ids[rows, columns] - start), 1)
        if self.signed:
            agree = self.train.labels[None, start:stop] == classes[:, None]
            counts *= np.where(agree, 1.0, -1.0)
        return counts

    def _self_influence(self):
        require(self.k < len(self.train), 'k', 'must be below the {} training rows for '
                'self-influence'.format(len(self.train)))
        n_layers = len(self.layer_indices)
        ids = self._neighbor_ids(self.train, self.k + 1).reshape(len(self.train), n_layers, -1)
        own = ids == np.arange(len(self.train))[:, None, None]
        # The row itself leaves its list; where a tie kept it out, the farthest one leaves.
        own[:, :, -1] |= ~own.any(axis=2)
        others = ids[~own].reshape(len(self.train), -1)
        return np.sum(self.train.labels[others] != self.train.labels[:, None], axis=1) \
            .astype(np.float64)


class RandomScores(Attribution):
    name = 'random'
    description = 'seeded uniform random scores, the floor'

    def __init__(self, seed=0):
        # SeedSequence keys must keep a fixed width: a seed of one 32-bit word.
        require(not isinstance(seed, bool) and isinstance(seed, (int, np.integer))
                and 0 <= seed < 2 ** 32, 'seed',
                'must be an integer in [0, 2**32), got {!r}'.format(seed))
        self.seed = int(seed)

    def _block(self, test, start, stop):
        first, last = start // _RANDOM_COLUMNS, (stop - 1) // _RANDOM_COLUMNS
        out = np.empty((len(test), stop - start))
        for t in range(len(test)):
            row = np.concatenate([
                np.random.default_rng([self.seed, _RANDOM_TAG, t, chunk]).random(_RANDOM_COLUMNS)
                for chunk in range(first, last + 1)])
            offset = start - first * _RANDOM_COLUMNS
            out[t] = row[offset:offset + stop - start]
        return out

    def _self_influence(self):
        """(n_train,) seeded uniform values: the floor of noisy-label detection."""
        return np.random.default_rng([self.seed, _RANDOM_TAG + 1]).random(len(self.train))
