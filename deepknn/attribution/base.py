"""The attribution interface: the arrays a method reads (`Representations`, `Checkpoint`),
the registry METHODS, and the `Attribution` base class, whose `top` streams over blocks
of training rows so that the (n_test, n_train) matrix is never held for a large N.

    method = METHODS['tracin-last']().fit(train)        # train: Representations
    scores = method.scores(test)                         # (n_test, n_train) float64
    indices, values = method.top(test, m)                # (n_test, m) each

A score is higher where the training row supports the test prediction more (a
proponent). `top` ranks by score, ties by the smaller training index.

The same Representations class describes both sides. For a training set `labels` are
the training labels; for test inputs they are the class being explained (usually the
model's prediction): TracIn, grad-cos and TRAK take the test gradient at that class,
the representer scores read that class's alpha.
"""
import dataclasses
import math

import numpy as np

from deepknn.evaluation.calibration import softmax
from deepknn.registry import Registry
from nlp_utils import UserError

METHODS = Registry('attribution method')

# Scores held at once by scores() and top(): (n_test x block) float64, 32 MB.
BLOCK_ELEMENTS = 1 << 22


def as_rows(array, name, n=None, ndim=2):
    """`array` as a finite real ndarray of `ndim` dims (and n rows where given), its dtype
    kept (float32 activations stay float32); a UserError naming `name` otherwise."""
    array = np.asarray(array)
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.number):
        raise UserError('`{}` must be a real number array, got dtype {}'.format(name, array.dtype),
                        name)
    if array.ndim != ndim or (n is not None and len(array) != n):
        raise UserError('`{}` must be a {}-D array{}, got shape {}'.format(
            name, ndim, '' if n is None else ' with {} rows'.format(n), array.shape), name)
    if not np.all(np.isfinite(array)):
        raise UserError('`{}` contains NaN or inf'.format(name), name)
    return array


@dataclasses.dataclass
class Checkpoint:
    """One model state, as the checkpoint methods need it, for N inputs.

    features:         (N, D) penultimate representation f(x), the input of the last Linear
    probabilities:    (N, C) softmax outputs
    learning_rate:    TracIn's eta_k, the step size of the training stretch this
                      checkpoint stands for (unused by TRAK)
    loss_gradients:   (N, P) or None: projected all-parameter gradients of the
                      cross-entropy at each row's label (gradients.per_example_gradients)
    margin_gradients: (N, P) or None: the same for the margin log(p / (1 - p)) (TRAK)
    """
    features: np.ndarray
    probabilities: np.ndarray
    learning_rate: float = 1.0
    loss_gradients: np.ndarray = None
    margin_gradients: np.ndarray = None

    def __post_init__(self):
        self.features = as_rows(self.features, 'features')
        n = len(self.features)
        self.probabilities = as_rows(self.probabilities, 'probabilities', n)
        rate = self.learning_rate
        if isinstance(rate, bool) or not isinstance(rate, (int, float, np.number)) \
                or not math.isfinite(rate) or rate <= 0:
            raise UserError('`learning_rate` must be a positive number, got {!r}'.format(rate),
                            'learning_rate')
        for name in ('loss_gradients', 'margin_gradients'):
            if getattr(self, name) is not None:
                setattr(self, name, as_rows(getattr(self, name), name, n))

    @property
    def n_class(self):
        return self.probabilities.shape[1]


@dataclasses.dataclass
class Representations:
    """What the methods read of N inputs (a training set, or test inputs to explain).

    labels:      (N,) int: training labels, or for test inputs the class explained
    final:       Checkpoint of the model being explained (representer, grad-cos)
    layers:      list of (N, D_l) DkNN layer activations of that model (knn, dknn-vote)
    checkpoints: list of Checkpoint: for TracIn the saved states of one training run,
                 each with its learning rate; for TRAK the members of the ensemble
                 (checkpoints of one run or independently trained models)
    """
    labels: np.ndarray
    final: Checkpoint
    layers: list = ()
    checkpoints: list = ()

    def __post_init__(self):
        if not isinstance(self.final, Checkpoint):
            raise UserError('`final` must be a Checkpoint, got {}'.format(
                type(self.final).__name__), 'final')
        n, n_class = len(self.final.features), self.final.n_class
        self.labels = _labels(self.labels, n, n_class)
        self.layers = [as_rows(layer, 'layers') for layer in self.layers]
        if any(len(layer) != n for layer in self.layers):
            raise UserError('`layers` must each have {} rows, got {}'.format(
                n, [len(layer) for layer in self.layers]), 'layers')
        self.checkpoints = list(self.checkpoints)
        for checkpoint in self.checkpoints:
            if not isinstance(checkpoint, Checkpoint) or len(checkpoint.features) != n \
                    or checkpoint.n_class != n_class:
                raise UserError('`checkpoints` must be Checkpoints of {} rows and {} classes'
                                .format(n, n_class), 'checkpoints')

    @classmethod
    def from_layers(cls, layers, labels=None, checkpoints=(), **final):
        """From DkNN layer activations (list of (N, D_l), the last one the logits): the
        final model's features are layers[-2], its probabilities softmax(layers[-1]).
        labels=None -> the model's prediction (for test inputs). `final` keywords
        (loss_gradients, margin_gradients) go to the final Checkpoint."""
        if len(layers) < 2:
            raise UserError('`layers` needs the penultimate layer and the logits, got {} '
                            'layer(s)'.format(len(layers)), 'layers')
        probabilities = softmax(as_rows(layers[-1], 'layers'))
        if labels is None:
            labels = probabilities.argmax(axis=1)
        return cls(labels, Checkpoint(layers[-2], probabilities, **final), layers, checkpoints)

    def __len__(self):
        return len(self.labels)

    @property
    def n_class(self):
        return self.final.n_class


def _labels(labels, n, n_class):
    """(n,) int64 labels in [0, n_class); a UserError naming `labels` otherwise."""
    labels = np.asarray(labels)
    if labels.shape != (n,) or not np.issubdtype(labels.dtype, np.integer) \
            or (n and (labels.min() < 0 or labels.max() >= n_class)):
        raise UserError('`labels` must be {} integer classes in [0, {}), got shape {} dtype {}'
                        .format(n, n_class, labels.shape, labels.dtype), 'labels')
    return labels.astype(np.int64)


def require(condition, parameter, message):
    """A UserError naming `parameter` (in backticks, first) unless `condition`."""
    if not condition:
        raise UserError('`{}` {}'.format(parameter, message), parameter)


class Attribution(METHODS.Registered):
    """Base of the attribution methods (module docstring). A subclass sets `name` and a
    one-line `description` (it then registers itself in METHODS) and implements

        _fit(train)                 keep what it needs of the training set
        _prepare(test) -> state     per-test work done once (test gradients, neighbours)
        _block(state, start, stop)  -> (n_test, stop - start) float64 scores of the
                                    training rows [start, stop)
        _self_influence()           (optional) -> (n_train,) float64

    `block_rows` (None: BLOCK_ELEMENTS // n_test) sets the training rows per block."""
    block_rows = None

    def fit(self, train):
        """Keep what the method needs of `train` (Representations); returns self."""
        if not isinstance(train, Representations):
            raise UserError('`train` must be Representations, got {}'.format(
                type(train).__name__), 'train')
        require(len(train) > 0, 'train', 'has no rows')
        self.train = train
        self._fit(train)
        return self

    def scores(self, test):
        """(n_test, n_train) float64, higher = more supportive of the test prediction."""
        state = self._start(test)
        return np.concatenate([self._block(state, start, stop)
                               for start, stop in self._blocks(len(test))], axis=1)

    def top(self, test, m):
        """The m highest-scoring training rows per test row, ties by the smaller index:
        (indices (n_test, m) int64, scores (n_test, m) float64), best first. Holds one
        block of scores at a time."""
        self._check_fitted()
        require(not isinstance(m, bool) and isinstance(m, (int, np.integer))
                and 1 <= m <= len(self.train), 'm', 'must be an integer between 1 and the {} '
                'training rows, got {!r}'.format(len(self.train), m))
        state = self._start(test)
        best = np.empty((len(test), 0))
        best_ids = np.empty((len(test), 0), dtype=np.int64)
        for start, stop in self._blocks(len(test)):
            values = np.concatenate([best, self._block(state, start, stop)], axis=1)
            ids = np.concatenate([best_ids, np.broadcast_to(np.arange(start, stop),
                                                            (len(test), stop - start))], axis=1)
            order = np.lexsort((ids, -values), axis=1)[:, :m]
            best = np.take_along_axis(values, order, axis=1)
            best_ids = np.take_along_axis(ids, order, axis=1)
        return best_ids, best

    def self_influence(self):
        """(n_train,) how much each training row supports its own label (noisy-label
        detection ranks rows by it, highest first); only some methods define it."""
        self._check_fitted()
        return self._self_influence()

    def _self_influence(self):
        raise UserError('attribution method {!r} defines no self-influence'.format(self.name))

    def _check_fitted(self):
        if not hasattr(self, 'train'):
            raise UserError('the attribution method is not fitted: call fit(train) first')

    def _start(self, test):
        self._check_fitted()
        if not isinstance(test, Representations):
            raise UserError('`test` must be Representations, got {}'.format(
                type(test).__name__), 'test')
        require(test.n_class == self.train.n_class, 'test',
                'has {} classes, the training set {}'.format(test.n_class, self.train.n_class))
        return self._prepare(test)

    def _blocks(self, n_test):
        """(start, stop) blocks of training rows."""
        rows = self.block_rows or max(1, BLOCK_ELEMENTS // max(1, n_test))
        n = len(self.train)
        return [(start, min(n, start + rows)) for start in range(0, n, rows)]

    def _fit(self, train):
        pass

    def _prepare(self, test):
        return test

    def _block(self, state, start, stop):
        raise NotImplementedError


def checkpoints_of(representations, side, what=None):
    """The checkpoints of `representations` (Representations), each holding the array
    attribute `what` where given; a UserError naming `side` ('train', 'test') if none."""
    checkpoints = representations.checkpoints
    require(len(checkpoints) > 0, side, 'has no checkpoints')
    if what is not None:
        require(all(getattr(c, what) is not None for c in checkpoints), side,
                'needs `{}` in every checkpoint'.format(what))
    return checkpoints
