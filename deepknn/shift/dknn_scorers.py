"""Trust scorers read off the project's DkNN (deepknn.neighbors.dknn.DkNN): credibility and
confidence over all layers, over L2-normalised layers, over one layer, and over a
subset of layers chosen on the calibration split (registered in SCORERS).

Each builds DkNN(C, backend, k) (kdtree: exact search; k = 75 as the DkNN's default),
fits it on the training layers and labels, calibrates it on the calibration split and
scores a batch with predict_from_activations()['credibility'] (or 'confidence'):

  credibility  the largest conformal p-value, i.e. the p-value of the DkNN's OWN
               prediction (p_j = fraction of calibration nonconformity scores >= that of
               class j); confidence = 1 - the second largest p-value.

So these scorers score trust in the DkNN prediction, which may differ from the softmax
prediction; `dknn_result` gives that prediction, and the study measures the scores
against the correctness of both.
"""
import itertools
import math

import numpy as np

from deepknn.neighbors.dknn import DkNN
from deepknn.evaluation.ranking import auroc
from deepknn.shift.base import Scorer, checked_count, checked_layer, l2_normalized


class DkNNScorer(Scorer):
    """A DkNN over `searched(outputs)` (every layer by default); scores are `reads` of
    predict_from_activations."""
    reads = 'credibility'

    def __init__(self, k=75, backend='kdtree', index_options=None):
        self.k = checked_count(k, 'k')
        self.backend, self.index_options = backend, dict(index_options or {})
        self.dknn = None

    def searched(self, outputs):
        """The layers of `outputs` the DkNN searches: list of (n, D_l) arrays."""
        return outputs.layers

    def new_dknn(self):
        return DkNN(self.n_class, self.backend, self.k, index_options=self.index_options)

    def _fit(self, train, train_labels, calib, calib_labels):
        self.dknn = self.new_dknn().fit(self.searched(train), train_labels)
        self.dknn.calibrate(self.searched(calib), calib_labels)

    def dknn_result(self, batch):
        """The DkNN's predict_from_activations on the batch: prediction (n,),
        credibility (n,), confidence (n,), p_values (n, C), ... (see DkNN)."""
        batch = self.checked_batch(batch)       # first: it says when fit has not run
        return self.dknn.predict_from_activations(self.searched(batch))

    def _score(self, batch):
        return self.dknn.predict_from_activations(self.searched(batch))[self.reads]


class DkNNCredibility(DkNNScorer):
    """DkNN credibility over every layer, as run_dknn.py computes it."""
    name = 'dknn-credibility'
    description = 'DkNN credibility over all layers: the p-value of the DkNN prediction'


class DkNNConfidence(DkNNScorer):
    """DkNN confidence over every layer: 1 - the second largest p-value."""
    name = 'dknn-confidence'
    description = 'DkNN confidence over all layers: 1 - the second largest p-value'
    reads = 'confidence'


class DkNNNormalized(DkNNScorer):
    """DkNN credibility over every layer with each activation row divided by its
    Euclidean norm (so neighbours are by angle, as for knn-sun)."""
    name = 'dknn-normalized'
    description = 'DkNN credibility over all layers, each row L2-normalised'

    def searched(self, outputs):
        return [l2_normalized(layer).astype(np.float32) for layer in outputs.layers]


class DkNNLayer(DkNNScorer):
    """DkNN credibility over the one layer layers[layer], for per-layer tables."""
    name = 'dknn-layer'
    description = 'DkNN credibility over one layer (`layer`, default -2)'

    def __init__(self, layer=-2, k=75, backend='kdtree', index_options=None):
        super().__init__(k, backend, index_options)
        self.layer = layer
        self.layer_index = None

    def _fit(self, train, train_labels, calib, calib_labels):
        self.layer_index = checked_layer(self.layer, len(train.layers))
        super()._fit(train, train_labels, calib, calib_labels)

    def searched(self, outputs):
        return [outputs.layers[self.layer_index]]


class DkNNSelected(DkNNScorer):
    """DkNN credibility over a subset of layers chosen on the calibration split alone.

    A seeded permutation splits the calibration examples into halves A (the first
    floor(M/2) of it) and B. Each candidate subset of layers is calibrated on A and
    scored by the AUROC of its credibility for right vs wrong DkNN predictions on B, so
    no example's score is used both to calibrate and to judge. Candidates: every
    non-empty subset when L <= exhaustive_up_to, else greedy forward selection (add the
    best layer while that strictly raises the AUROC). The best AUROC wins; ties go to
    fewer layers, then to the earlier layers (lexicographically); an undefined AUROC (B's
    predictions all right or all wrong) ranks last, and when no subset has one every
    layer is kept. The chosen subset is then calibrated on the whole calibration split.

    After fit: chosen_layers (tuple of indices in [0, L)), layer_aurocs (L,) (each single
    layer's AUROC on B), subset_aurocs {subset: AUROC} of every candidate tried, halves
    (A, B) row indices. Neighbours are searched once per layer and shared by the subsets.
    """
    name = 'dknn-selected'
    description = ('DkNN credibility over the layers whose credibility best separates right '
                   'from wrong on half the calibration split')

    def __init__(self, k=75, backend='kdtree', index_options=None, seed=0,
                 exhaustive_up_to=6):
        super().__init__(k, backend, index_options)
        self.seed = seed
        self.exhaustive_up_to = checked_count(exhaustive_up_to, 'exhaustive_up_to', 0)
        self.chosen_layers = None

    def searched(self, outputs):
        return [outputs.layers[layer] for layer in self.chosen_layers]

    def _fit(self, train, train_labels, calib, calib_labels):
        full = self.new_dknn().fit(train.layers, train_labels)
        distances, indices = full.neighbors(calib.layers)      # (M, L, k), searched once
        order = np.random.default_rng(self.seed).permutation(len(calib_labels))
        self.halves = (np.sort(order[:len(order) // 2]), np.sort(order[len(order) // 2:]))
        self.subset_aurocs = {}

        def evaluate(subset):
            if subset not in self.subset_aurocs:
                self.subset_aurocs[subset] = self._half_auroc(
                    subset, distances, indices, train_labels, calib_labels)
            return self.subset_aurocs[subset]
        n_layers = len(train.layers)
        if n_layers <= self.exhaustive_up_to:
            for size in range(1, n_layers + 1):
                for subset in itertools.combinations(range(n_layers), size):
                    evaluate(subset)
        else:
            _greedy_forward(n_layers, evaluate)
        self.layer_aurocs = np.array([evaluate((layer,)) for layer in range(n_layers)])
        best = min(self.subset_aurocs, key=lambda s: _rank(s, self.subset_aurocs[s]))
        self.chosen_layers = best if not math.isnan(self.subset_aurocs[best]) \
            else tuple(range(n_layers))
        self.dknn = self.new_dknn().fit_indexes(
            [full.indexes[layer] for layer in self.chosen_layers], train_labels,
            [train.layers[layer].shape[1] for layer in self.chosen_layers])
        self.dknn.calibrate(self.searched(calib), calib_labels)

    def _half_auroc(self, subset, distances, indices, train_labels, calib_labels):
        """AUROC on half B of the credibility of a DkNN over `subset` calibrated on A,
        right vs wrong DkNN predictions, from the neighbours found once (M, L, k)."""
        found = [_FoundNeighbors(distances[:, layer], indices[:, layer], len(train_labels))
                 for layer in subset]
        dknn = DkNN(self.n_class, self.backend, self.k).fit_indexes(
            found, train_labels, [1] * len(subset))
        a, b = self.halves
        dknn.calibrate([a[:, None].astype(np.float64)] * len(subset), calib_labels[a])
        result = dknn.predict_from_activations([b[:, None].astype(np.float64)] * len(subset))
        return auroc(result['credibility'], result['prediction'] == calib_labels[b])


def _rank(subset, area):
    """Sort key of a candidate: best AUROC first (undefined last), then fewer layers,
    then earlier layers."""
    return (math.inf if math.isnan(area) else -area, len(subset), subset)


def _greedy_forward(n_layers, evaluate):
    """Forward selection: from no layer, add the layer whose subset scores best while
    that strictly raises the score; `evaluate(subset)` -> AUROC records each candidate."""
    chosen, best = (), -math.inf
    while len(chosen) < n_layers:
        candidates = [tuple(sorted(chosen + (layer,)))
                      for layer in range(n_layers) if layer not in chosen]
        step = min(candidates, key=lambda s: _rank(s, evaluate(s)))
        if not evaluate(step) > best:       # NaN or no gain: stop
            return
        chosen, best = step, evaluate(step)


class _FoundNeighbors:
    """A stand-in neighbour index answering from neighbours already found, so that layer
    subsets share one search: a query is a (n, 1) column of row numbers into
    distances and indices (M, k) of one layer, which it returns for those rows."""
    n_short_queries = 0

    def __init__(self, distances, indices, n_train):
        self.distances, self.indices, self.n = distances, indices, n_train

    def search(self, queries, k):
        rows = np.asarray(queries)[:, 0].astype(np.int64)
        return self.distances[rows, :k], self.indices[rows, :k]
