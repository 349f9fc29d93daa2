"""Deep k-Nearest Neighbors (Papernot & McDaniel 2018): the library behind run_dknn.py.

`DkNN` works on plain per-layer activation arrays from any model (one method per stage:
build the indexes, calibrate, predict). The rest connects it to a trained model of this
project: `dknn_from_setup(setup, settings)` with a dknn_settings.DkNNSettings, over the
run's caches (activation_cache.py; evaluation and reports: dknn_evaluation.py). Nothing
here parses flags or writes files other than those caches.
"""
import contextlib
import json
import time
import zipfile
import zlib

import numpy as np
import tqdm

from deepknn.neighbors import knn_index
from deepknn.neighbors.activation_cache import (
    IndexCache, activation_key, checked_activations, train_activations)
import nlp_utils
from nlp_utils import UserError


class DkNN:
    """kNN classification over every layer's representation, with conformal calibration.

    Works on plain arrays from any model:

        dknn = DkNN(n_class=2, backend='faiss', k=75)
        dknn.fit(train_layers, train_labels)       # list of (N, D_l) arrays, labels (N,)
        dknn.calibrate(calib_layers, calib_labels)  # held-out examples, never trained on
        result = dknn.predict_from_activations(test_layers)
        dknn.save('dknn.npz'); dknn = DkNN.load('dknn.npz')   # npz, no pickle

    For an input with neighbour labels over L layers and k neighbours each:
      nonconformity(j) = number of the L*k neighbours whose label is not j
      p_value(j)       = fraction of calibration nonconformity scores >= nonconformity(j),
                         the calibration scores taken at each example's TRUE label
      prediction       = argmax_j p_value(j); ties go to the larger conformity, then the
                         smaller class id
      credibility      = the largest p-value; confidence = 1 - the second largest
      conformity(j)    = fraction of the L*k neighbours with label j (the paper's
                         uncalibrated score, a probability-like vector over classes)
    A neighbour slot an approximate index could not fill (index -1) counts as disagreeing
    with every class. Every call must pass as many layers as `fit` got (with
    last_layer_only, only the last of them is searched).
    """

    def __init__(self, n_class, backend='faiss', k=75, last_layer_only=False,
                 index_options=None):
        for name, value, minimum in (('n_class', n_class, 2), ('k', k, 1)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                    or value < minimum:
                raise UserError('{} must be an integer >= {}, got {!r}'.format(
                    name, minimum, value))
        self.n_class = n_class
        self.backend = backend
        self.k = k
        self.last_layer_only = last_layer_only
        self.index_options = index_options or {}
        self.indexes = []
        self.n_layers = None          # layers passed to fit (all of them are searched
        self.train_activations = None  # unless last_layer_only)
        self.layer_widths = None       # D_l of every layer
        self.train_labels = None
        self.calibration_scores = None

    # ------------------------------------------------------------ fitting
    def fit(self, train_activations, train_labels, progress=False, index_states=None):
        """train_activations: list of (N, D_l) arrays, one per layer; train_labels (N,)
        ints in [0, n_class). index_states: per searched layer, a saved_state() of an
        index built on the same activations with the same options, restored instead of
        rebuilt."""
        train_activations = checked_layers(train_activations, 'train_activations')
        train_labels = self.checked_labels(train_labels, len(train_activations[0]),
                                           'train_labels')
        n_train = len(train_labels)
        if self.k > n_train:
            raise UserError('k={} is larger than the {} training examples; choose a smaller `k`'
                            .format(self.k, n_train), parameter='k')
        self.n_layers = len(train_activations)
        self.train_activations = list(train_activations)
        searched = self._searched(train_activations, 'training')
        if index_states is not None:
            self.indexes = [knn_index.make_index(self.backend, **self.index_options)
                            .restore(state, layer) for state, layer in zip(index_states, searched)]
        else:
            layers = tqdm.tqdm(searched, desc='indexing', unit='layer', disable=not progress)
            self.indexes = [knn_index.make_index(self.backend, **self.index_options).build(layer)
                            for layer in layers]
        self.train_labels = train_labels
        self.layer_widths = [layer.shape[1] for layer in train_activations]
        return self

    def fit_indexes(self, indexes, train_labels, layer_widths):
        """Fit on indexes built elsewhere, one per searched layer (sharded over a Ray
        cluster, say): the training activations stay with them. layer_widths: D_l of
        every layer, searched or not."""
        self.n_layers, self.layer_widths = len(layer_widths), list(layer_widths)
        self.indexes = list(indexes)
        self.train_labels = self.checked_labels(train_labels, indexes[0].n, 'train_labels')
        return self

    def calibrate(self, calib_activations, calib_labels):
        """Nonconformity of each calibration example at its true label, shape (N_calib,)."""
        if len(calib_labels) == 0:
            raise UserError('the calibration split is empty; re-train with `n_calib` > 0')
        calib_activations = self._checked_query(calib_activations, 'calib_activations')
        calib_labels = self.checked_labels(calib_labels, len(calib_activations[0]),
                                           'calib_labels')
        if len(np.unique(calib_labels)) < 2:
            raise UserError('the calibration split holds only class {}; re-train with a larger '
                            '`n_calib` or another `seed`'.format(calib_labels[0]))
        nonconformity = self.nonconformity(self.neighbor_labels(calib_activations))
        self.calibration_scores = np.sort(nonconformity[np.arange(len(calib_labels)), calib_labels])
        return self

    def checked_labels(self, labels, n_rows, name):
        """`labels` as int64 (N,), or a UserError naming `name`: one integer label in
        [0, n_class) per activation row."""
        array = np.asarray(labels)
        if array.ndim != 1 or len(array) != n_rows:
            raise UserError('{} must hold one label per activation row ({}), got shape {}'
                            .format(name, n_rows, array.shape))
        if len(array) and not (np.issubdtype(array.dtype, np.integer)
                               or np.issubdtype(array.dtype, np.bool_)):
            raise UserError('{} must be integer class ids, got {} values'.format(
                name, array.dtype))
        if len(array) and (array.min() < 0 or array.max() >= self.n_class):
            raise UserError('{} must lie in [0, {}) (the classes the DkNN was made for), got '
                            '[{}, {}]'.format(name, self.n_class, array.min(), array.max()))
        return array.astype(np.int64)

    def _checked_query(self, activations, name):
        """Query layers checked like the training layers, with their widths against fit."""
        activations = checked_layers(activations, name)
        if self.layer_widths is not None and len(activations) == self.n_layers:
            for i, (query, width) in enumerate(zip(activations, self.layer_widths)):
                if query.shape[1] != width:
                    raise UserError('{} layer {} has width {}, but the DkNN was fitted on '
                                    'width {}; pass the same model\'s layers'.format(
                                        name, i, query.shape[1], width))
        return activations

    # ------------------------------------------------------------ inference
    def _searched(self, activations, what):
        """The layers that are searched, after checking the layer count against fit."""
        if self.n_layers is not None and len(activations) != self.n_layers:
            raise UserError('{} activations have {} layers, but the DkNN was fitted on {}'
                            .format(what, len(activations), self.n_layers))
        return activations[-1:] if self.last_layer_only else activations

    def neighbors(self, activations):
        """Activations (list of (M, D_l)) -> (distances float32 (M, L, k), training
        indices int64 (M, L, k)) in each searched layer, nearest first; -1 / inf where
        an approximate index found fewer than k."""
        found = [index.search(layer, self.k)
                 for index, layer in zip(self.indexes, self._searched(activations, 'query'))]
        return (np.stack([d for d, _ in found], axis=1),
                np.stack([i for _, i in found], axis=1))

    def neighbor_labels(self, activations, indices=None):
        """Labels of the k nearest training examples in each searched layer, int64
        (M, L, k), -1 where a neighbour is missing. `indices`: from neighbors(), if known."""
        if indices is None:
            _, indices = self.neighbors(activations)
        return np.where(indices >= 0, self.train_labels[indices], -1)

    def nonconformity(self, neighbor_labels):
        """(M, L, k) labels -> (M, C) count of neighbours whose label is not each class."""
        flat = neighbor_labels.reshape(len(neighbor_labels), -1)
        agree = np.stack([(flat == j).sum(axis=1) for j in range(self.n_class)], axis=1)
        return flat.shape[1] - agree

    def p_values(self, nonconformity):
        """(M, C) -> (M, C): fraction of calibration scores >= each nonconformity."""
        scores = self.calibration_scores
        n_below = np.searchsorted(scores, nonconformity, side='left')
        return (len(scores) - n_below) / len(scores)

    def predict_from_activations(self, activations):
        """Activations (list of (M, D_l)) -> dict of arrays over the M inputs:
        prediction (M,), credibility (M,), confidence (M,), p_values (M, C),
        conformity (M, C), neighbor_labels, neighbors (training indices) and
        neighbor_distances, each (M, L, k)."""
        if self.calibration_scores is None:
            raise UserError('the DkNN is not calibrated; call calibrate() before predicting')
        activations = self._checked_query(activations, 'activations')
        distances, indices = self.neighbors(activations)
        neighbor_labels = self.neighbor_labels(activations, indices)
        nonconformity = self.nonconformity(neighbor_labels)
        p_values = self.p_values(nonconformity)
        conformity = 1 - nonconformity / neighbor_labels[0].size
        # lexsort's last key is primary: p-value, then conformity, then the smaller class id.
        order = np.lexsort((np.arange(self.n_class)[None, :].repeat(len(p_values), 0),
                            -conformity, -p_values), axis=1)
        prediction = order[:, 0]
        sorted_p = np.sort(p_values, axis=1)
        second = sorted_p[:, -2] if self.n_class > 1 else np.zeros(len(p_values))
        return {'prediction': prediction, 'credibility': sorted_p[:, -1],
                'confidence': 1 - second, 'p_values': p_values, 'conformity': conformity,
                'neighbor_labels': neighbor_labels, 'neighbors': indices,
                'neighbor_distances': distances}

    @property
    def n_short_queries(self):
        return sum(index.n_short_queries for index in self.indexes)

    # ------------------------------------------------------------ files
    def save(self, path):
        """Everything needed to predict again, as one npz without pickle: the settings,
        the training activations and labels, the calibration scores, and the built
        indexes where the backend can serialise them (faiss); others are rebuilt on load."""
        if self.calibration_scores is None:
            raise RuntimeError('call fit() and calibrate() before save()')
        if self.train_activations is None:
            raise UserError('a DkNN over sharded indexes lives in its storage folder; it '
                            'cannot be saved as one npz')
        settings = {'n_class': self.n_class, 'backend': self.backend, 'k': self.k,
                    'last_layer_only': self.last_layer_only,
                    'index_options': self.index_options, 'n_layers': self.n_layers}
        arrays = {'layer_{}'.format(i): a for i, a in enumerate(self.train_activations)}
        arrays.update(knn_index.index_state_arrays(self.indexes) or {})
        nlp_utils.atomic_savez(path, settings=np.array(json.dumps(settings)),
                               train_labels=self.train_labels,
                               calibration_scores=self.calibration_scores, **arrays)

    @classmethod
    def load(cls, path):
        """The DkNN that save() wrote to `path`."""
        nlp_utils.check_npz(path, 'DkNN file', 'save it again')   # not 'pickled data'
        try:
            with np.load(path, allow_pickle=False) as saved:
                settings = json.loads(str(saved['settings']))
                layers = [saved['layer_{}'.format(i)] for i in range(settings['n_layers'])]
                states = knn_index.index_states_from(saved)
                labels, scores = saved['train_labels'], saved['calibration_scores']
        except (OSError, EOFError, KeyError, ValueError, zipfile.BadZipFile, zlib.error) as error:
            raise UserError('{} is not a DkNN saved by DkNN.save ({}); save it again'.format(
                path, error))
        dknn = cls(settings['n_class'], settings['backend'], settings['k'],
                   settings['last_layer_only'], settings['index_options'])
        dknn.fit(layers, labels, index_states=states or None)
        dknn.calibration_scores = scores
        return dknn


# ---------------------------------------------------------------- model + cache
def checked_layers(activations, name):
    """A non-empty list of 2-D finite float arrays with one row count, or a UserError
    naming `name` and the layer."""
    if isinstance(activations, np.ndarray) and activations.ndim == 2:
        activations = [activations]
    layers = [np.asarray(layer) for layer in activations]
    if not layers:
        raise UserError('{} holds no layer; pass a list of (N, D) arrays'.format(name))
    for i, layer in enumerate(layers):
        if layer.ndim != 2 or not np.issubdtype(layer.dtype, np.number):
            raise UserError('{} layer {} must be a numeric (N, D) array, got shape {} of {}'
                            .format(name, i, layer.shape, layer.dtype))
        if len(layer) != len(layers[0]):
            raise UserError('{} layers must have one row per input each, got {}'.format(
                name, [len(l) for l in layers]))
        if not np.all(np.isfinite(layer)):
            raise UserError('{} layer {} contains NaN or inf'.format(name, i))
    if len(layers[0]) == 0:
        raise UserError('{} has no rows'.format(name))
    return layers


class PhaseTimer:
    """Wall time of named phases, in seconds: `with timer('index'): ...`."""

    def __init__(self):
        self.seconds = {}

    @contextlib.contextmanager
    def __call__(self, name):
        start = time.perf_counter()
        yield
        self.seconds[name] = round(time.perf_counter() - start, 3)


def fitted_dknn_from_setup(setup, settings, use_cache=True, timer=None):
    """A DkNN fitted on the training split of a loaded model setup, not yet calibrated,
    for a caller that calibrates it on examples of its own choosing. settings: a
    dknn_settings.DkNNSettings (its engine, when set, extracts and indexes on Ray)."""
    timer = timer or PhaseTimer()
    if settings.k > len(setup.splits.train):   # checked before the slow caching
        raise UserError('k={} is larger than the {} training examples; choose a smaller `k`'
                        .format(settings.k, len(setup.splits.train)), parameter='k')
    dknn = DkNN(setup.config.n_class, settings.backend, settings.k, settings.last_layer_only,
                settings.index_options)
    if settings.engine is not None:
        from deepknn.distributed import ray_dknn
        return ray_dknn.fitted(dknn, setup, settings, activation_key(setup, settings.batchsize),
                              timer)
    with timer('cache'):
        key = activation_key(setup, settings.batchsize)
        activations, labels = train_activations(setup, settings.neighbor_labels,
                                                settings.batchsize, use_cache, key)
    with timer('index'):
        if not use_cache:
            return dknn.fit(activations, labels, progress=True)
        return IndexCache(setup.result_dir, key, dknn).fit(activations, labels)


def dknn_from_setup(setup, settings, use_cache=True, timer=None):
    """Build and calibrate a DkNN for a loaded model setup (see model_setup.load_setup)
    with dknn_settings.DkNNSettings `settings`; see fitted_dknn_from_setup."""
    timer = timer or PhaseTimer()
    # Checked before the slow caching, which would only fail after it.
    if not setup.splits.calib:
        raise UserError('the calibration split is empty; re-train with `n_calib` > 0')
    dknn = fitted_dknn_from_setup(setup, settings, use_cache, timer)
    with timer('calibrate'):
        return calibrated_on_split(dknn, setup, settings)


def split_activations(setup, split, settings, progress=None):
    """(list of (N, D_l) float32, gold labels (N,)) of a whole split of the setup: through
    the Ray Data pipeline when settings.engine is set, else in this process."""
    if settings.engine is not None:
        from deepknn.distributed import ray_dknn
        return ray_dknn.split_activations(settings.engine, setup, split,
                                          activation_key(setup, settings.batchsize),
                                          settings.batchsize)
    examples = getattr(setup, split)
    return checked_activations(setup.model.layer_activations(
        [x for x, _ in examples], settings.batchsize, progress=progress or split), split), \
        [y for _, y in examples]


def training_split_activations(setup, settings):
    """(list of (N, D_l) float32, gold labels (N,)) of the training split: from the Ray
    Data pipeline's storage when settings.engine is set, else from the run's activation
    cache (train_activations)."""
    if settings.engine is not None:
        return split_activations(setup, 'train', settings)
    return train_activations(setup, 'gold', settings.batchsize)


def calibrated_on_split(dknn, setup, settings):
    """`dknn` (fitted) calibrated on the setup's calibration split."""
    return dknn.calibrate(*split_activations(setup, 'calib', settings, 'calibration'))
