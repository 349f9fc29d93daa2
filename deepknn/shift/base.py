"""The trust scorers' shared interface: the model outputs they read (`Outputs`), the
`Scorer` base class and the SCORERS registry every scorer registers in.

One interface, in the style of OpenOOD / pytorch-ood detectors:

    scorer = SCORERS['mahalanobis'](layer=-2)
    scorer.fit(train, train_labels, calib, calib_labels)   # Outputs, labels (N,), (M,)
    trust = scorer.score(batch)                            # (n,) float64

Higher scores mean more trustworthy / more in-distribution. A scorer is fitted on the
training split (activations, labels) and, where it needs one, the held-out calibration
split; it never sees the data it scores. Import deepknn.shift.scorers to have every
scorer registered.

Layers are the DkNN layers of the project's models, in the order the DkNN uses them. In
both nets.TextClassifier and transformer.TransformerClassifier the LAST layer is the
logits, so layers[-2] is the penultimate representation, the input of the output layer
(the hidden FC layer, or BERT's pooler output).
"""
import dataclasses

import numpy as np

from deepknn.registry import Registry
from nlp_utils import UserError

SCORERS = Registry('trust scorer')


@dataclasses.dataclass
class Outputs:
    """A model's outputs on n inputs: logits (n, C) floats, and `layers`, a list of L
    (n, D_l) float arrays, the DkNN layers (layers[-1] is the logits in this project)."""
    logits: np.ndarray
    layers: list

    def __post_init__(self):
        self.logits = _finite(self.logits, '`logits`', 'logits')
        if self.logits.shape[1] < 2:
            raise UserError('`logits` need at least 2 classes, got {}'.format(
                self.logits.shape[1]), parameter='logits')
        if isinstance(self.layers, np.ndarray) or not len(self.layers):
            raise UserError('`layers` must be a non-empty list of (n, D) arrays',
                            parameter='layers')
        self.layers = [_finite(layer, '`layers`[{}]'.format(i), 'layers')
                       for i, layer in enumerate(self.layers)]
        rows = {len(layer) for layer in self.layers}
        if rows != {len(self.logits)}:
            raise UserError('`layers` must have one row per row of `logits` ({}), got {}'
                            .format(len(self.logits), [len(l) for l in self.layers]),
                            parameter='layers')

    @classmethod
    def from_layers(cls, layers):
        """Outputs of this project's models, whose last DkNN layer is the logits."""
        return cls(layers[-1], list(layers))

    def __len__(self):
        return len(self.logits)

    @property
    def widths(self):
        """D_l of every layer, then C."""
        return [layer.shape[1] for layer in self.layers] + [self.logits.shape[1]]


def _finite(array, name, parameter):
    """A finite, non-empty, real 2-D array (no copy when it is one), or a UserError
    calling it `name`."""
    array = np.asarray(array)
    if array.ndim != 2 or 0 in array.shape or not (
            np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise UserError('{} must be a non-empty real (n, D) array, got shape {} of {}'.format(
            name, array.shape, array.dtype), parameter=parameter)
    if not np.all(np.isfinite(array)):
        raise UserError('{} contain NaN or inf'.format(name), parameter=parameter)
    return array


def checked_layer(layer, n_layers):
    """`layer` (an index into the L layers, negative from the end) as an index in
    [0, L), or a UserError."""
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) \
            or not -n_layers <= layer < n_layers:
        raise UserError('`layer` must index one of the {} layers ({}..{}), got {!r}'.format(
            n_layers, -n_layers, n_layers - 1, layer), parameter='layer')
    return int(layer) % n_layers


def checked_count(value, name, minimum=1):
    """An integer option >= minimum (k, say), or a UserError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise UserError('`{}` must be an integer >= {}, got {!r}'.format(name, minimum, value),
                        parameter=name)
    return int(value)


def l2_normalized(x):
    """Rows of x (n, D) divided by their Euclidean norm, float64; an all-zero row (a
    dead ReLU layer) stays zero instead of becoming NaN."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0)


class Scorer(SCORERS.Registered):
    """How much to trust each prediction (see the module docstring). Subclasses set
    `name` and a one-line `description`, and implement _fit and _score; fit and score
    check the arguments first."""
    n_class = None       # C, from the training logits
    widths = None        # the layer widths (and C) fit saw; score wants the same

    def fit(self, train, train_labels, calib, calib_labels):
        """Fit on the training Outputs and labels (N,) and the calibration Outputs and
        labels (M,), ints in [0, C); returns self."""
        for name, outputs in (('train', train), ('calib', calib)):
            if not isinstance(outputs, Outputs):
                raise UserError('`{}` must be an Outputs, got {}'.format(
                    name, type(outputs).__name__), parameter=name)
        if calib.widths != train.widths:
            raise UserError('`calib` has layer widths {}, `train` {}; pass one model\'s '
                            'outputs'.format(calib.widths, train.widths), parameter='calib')
        self.n_class = train.logits.shape[1]
        train_labels = self._labels(train_labels, len(train), 'train_labels')
        calib_labels = self._labels(calib_labels, len(calib), 'calib_labels')
        self.widths = train.widths
        self._fit(train, train_labels, calib, calib_labels)
        return self

    def score(self, batch):
        """Trust in each of the batch's n predictions, (n,) float64, higher = more."""
        return np.asarray(self._score(self.checked_batch(batch)), dtype=np.float64)

    def checked_batch(self, batch):
        """`batch` after checking that fit ran and that it has fit's layer widths."""
        if self.widths is None:
            raise UserError('the {} scorer is not fitted; call fit() before score()'.format(
                self.name))
        if not isinstance(batch, Outputs):
            raise UserError('`batch` must be an Outputs, got {}'.format(
                type(batch).__name__), parameter='batch')
        if batch.widths != self.widths:
            raise UserError('`batch` has layer widths {}, but the scorer was fitted on {}'
                            .format(batch.widths, self.widths), parameter='batch')
        return batch

    def _labels(self, labels, n_rows, name):
        """labels as int64 (n_rows,) in [0, C), or a UserError naming `name`."""
        labels = np.asarray(labels)
        if labels.shape != (n_rows,) or not (np.issubdtype(labels.dtype, np.integer)
                                             or labels.dtype == np.bool_):
            raise UserError('`{}` must be {} integer class ids, got shape {} of {}'.format(
                name, n_rows, labels.shape, labels.dtype), parameter=name)
        if labels.min() < 0 or labels.max() >= self.n_class:
            raise UserError('`{}` must lie in [0, {}), got [{}, {}]'.format(
                name, self.n_class, labels.min(), labels.max()), parameter=name)
        return labels.astype(np.int64)

    def _fit(self, train, train_labels, calib, calib_labels):
        """Nothing to fit by default (scorers of the logits alone)."""

    def _score(self, batch):
        raise NotImplementedError
