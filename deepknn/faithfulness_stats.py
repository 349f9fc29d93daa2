"""Statistics over faithfulness measures (faithfulness.py): the areas and mean of
deletion/insertion curves, Kendall agreement between two methods' importance scores,
and percentile bootstrap intervals of a per-sentence mean or of a paired difference.
Plain arrays in, small dataclasses out; nothing here calls a model.
"""
import dataclasses
import math

import numpy as np
from scipy import stats

from nlp_utils import UserError

# The fractions of words on which mean curves are drawn (mean_curve).
DEFAULT_GRID = np.linspace(0.0, 1.0, 101)
# Bootstrap resamples are drawn in blocks of about this many indices, bounding memory.
_BOOTSTRAP_BLOCK = 1_000_000


@dataclasses.dataclass
class Agreement:
    """Kendall tau between two methods' scores: per_sentence (S,) with NaN where tau is
    undefined (one word, constant scores, NaN scores); mean over the n_used others."""
    mean: float
    n_used: int
    per_sentence: np.ndarray


@dataclasses.dataclass
class Interval:
    """A bootstrap percentile interval of a mean over n sentences."""
    mean: float
    low: float
    high: float
    n: int
    confidence: float

    @property
    def excludes_zero(self):
        """True when the whole interval lies on one side of 0 (for a paired difference:
        one method beats the other beyond the spread of the sentences)."""
        return bool(self.low > 0 or self.high < 0)


# ---------------------------------------------------------------- curves
def curve_fractions(curve):
    """The x axis of a deletion/insertion curve of n+1 points: j / n, (n+1,)."""
    n = len(curve) - 1
    return np.arange(n + 1) / n


def curve_area(curve):
    """Trapezoid area under a curve (n+1,) over x = 0, 1/n, ..., 1."""
    curve = np.asarray(curve, dtype=np.float64)
    if curve.ndim != 1 or len(curve) < 2:
        raise UserError('curve must have at least 2 points, got shape {}'.format(curve.shape))
    # Mean of the segments' midpoints = sum of trapezoids of width 1/n.
    return float(np.mean((curve[:-1] + curve[1:]) / 2))


def interpolate_curves(curves, grid=DEFAULT_GRID):
    """Each curve (n_i+1,) linearly interpolated onto the fractions grid (G,): (S, G)."""
    grid = np.asarray(grid, dtype=np.float64)
    if grid.ndim != 1 or np.any((grid < 0) | (grid > 1)):
        raise UserError('grid must be a 1-D array of fractions in [0, 1]')
    return np.array([np.interp(grid, curve_fractions(c), c) for c in curves]).reshape(
        len(curves), len(grid))


def mean_curve(curves, grid=DEFAULT_GRID):
    """The mean of the curves on the fractions grid: (G,), for drawing one line per
    method over sentences of different lengths."""
    if len(curves) == 0:
        raise UserError('curves must hold at least one curve')
    return interpolate_curves(curves, grid).mean(axis=0)


# ---------------------------------------------------------------- agreement
def kendall_agreement(scores_a, scores_b):
    """Kendall tau-b between two methods' importance scores, sentence by sentence.
    scores_a, scores_b: S arrays (n_i,). A sentence of one word, with constant scores
    or with NaN scores has no tau (NaN) and is left out of the mean. Returns Agreement."""
    if len(scores_a) != len(scores_b):
        raise UserError('scores_a and scores_b must cover the same sentences, got {} and {}'
                        .format(len(scores_a), len(scores_b)))
    taus = np.array([_sentence_tau(i, a, b) for i, (a, b) in enumerate(zip(scores_a, scores_b))],
                    dtype=np.float64)
    used = ~np.isnan(taus)
    mean = float(taus[used].mean()) if used.any() else math.nan
    return Agreement(mean=mean, n_used=int(used.sum()), per_sentence=taus)


def _sentence_tau(i, a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise UserError('scores_a[{0}] and scores_b[{0}] must be 1-D of the same length, '
                        'got shapes {1} and {2}'.format(i, a.shape, b.shape))
    # Undefined cases are decided here, so scipy never warns about them.
    if len(a) < 2 or np.isnan(a).any() or np.isnan(b).any() or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    return float(stats.kendalltau(a, b).statistic)


# ---------------------------------------------------------------- bootstrap
def bootstrap_ci(values, n_resamples=1000, confidence=0.95, seed=0):
    """Percentile bootstrap interval of the mean of a per-sentence measure (S,).
    NaN values are left out; with none left the interval is NaN (n=0)."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1:
        raise UserError('values must be 1-D (one value per sentence), got shape {}'
                        .format(values.shape))
    return _interval(values[~np.isnan(values)], n_resamples, confidence, seed)


def paired_bootstrap_ci(values_a, values_b, n_resamples=1000, confidence=0.95, seed=0):
    """Percentile bootstrap interval of mean(values_a - values_b), (S,) each, the same
    sentences resampled for both methods. Sentences where either is NaN are left out.
    excludes_zero on the result says whether A and B differ beyond the spread."""
    a = np.asarray(values_a, dtype=np.float64)
    b = np.asarray(values_b, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise UserError('values_a and values_b must be 1-D of the same length, got shapes '
                        '{} and {}'.format(a.shape, b.shape))
    difference = a - b
    return _interval(difference[~np.isnan(difference)], n_resamples, confidence, seed)


def _interval(values, n_resamples, confidence, seed):
    if int(n_resamples) < 1:
        raise UserError('n_resamples must be at least 1, got {}'.format(n_resamples))
    if not 0 < confidence < 1:
        raise UserError('confidence must be in (0, 1), got {}'.format(confidence))
    n = len(values)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, confidence)
    means = _resampled_means(values, int(n_resamples), seed)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(float(values.mean()), float(low), float(high), n, confidence)


def _resampled_means(values, n_resamples, seed):
    """Means of n_resamples resamples with replacement: (n_resamples,)."""
    rng = np.random.default_rng(seed)
    n = len(values)
    block = max(1, _BOOTSTRAP_BLOCK // n)
    means = []
    for start in range(0, n_resamples, block):
        count = min(block, n_resamples - start)
        means.append(values[rng.integers(0, n, size=(count, n))].mean(axis=1))
    return np.concatenate(means)
