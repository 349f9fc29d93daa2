"""Statistics every study shares, each defined once: percentile bootstrap intervals of a
per-example mean and of a paired difference (the same examples resampled for both).
Plain arrays in, a small dataclass out.
"""
import dataclasses
import math

import numpy as np

from nlp_utils import UserError

# Bootstrap resamples are drawn in blocks of about this many indices, bounding memory.
_BOOTSTRAP_BLOCK = 1_000_000


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
