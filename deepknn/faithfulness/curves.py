"""Statistics over faithfulness measures (faithfulness/measures.py): the areas and mean of
deletion/insertion curves and Kendall agreement between two methods' importance scores
(the bootstrap intervals every study shares are in evaluation/statistics.py). Plain
arrays in, small dataclasses out; nothing here calls a model.
"""
import dataclasses
import math

import numpy as np
from scipy import stats

from nlp_utils import UserError

# The fractions of words on which mean curves are drawn (mean_curve).
DEFAULT_GRID = np.linspace(0.0, 1.0, 101)


@dataclasses.dataclass
class Agreement:
    """Kendall tau between two methods' scores: per_sentence (S,) with NaN where tau is
    undefined (one word, constant scores, NaN scores); mean over the n_used others."""
    mean: float
    n_used: int
    per_sentence: np.ndarray


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
