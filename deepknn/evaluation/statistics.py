"""Statistics every study shares, each defined once: percentile bootstrap intervals of a
per-example mean, of a paired difference (the same examples resampled for both) and of
any statistic of examples (an AUROC), and the per-measure summaries of the studies.
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


def bootstrap_statistic_ci(statistic, arrays, n_resamples=1000, confidence=0.95, seed=0):
    """Percentile bootstrap interval of `statistic(*arrays)` (a float of arrays of one
    length n, e.g. ranking.auroc(scores, positive)): the examples are resampled together,
    the statistic computed on each resample; resamples where it is NaN (one class only)
    are left out. The interval's mean is the statistic on all examples."""
    arrays = [np.asarray(a) for a in arrays]
    n = len(arrays[0])
    if any(len(a) != n for a in arrays):
        raise UserError('arrays must have one length, got {}'.format([len(a) for a in arrays]))
    _check_resampling(n_resamples, confidence)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, confidence)
    rng = np.random.default_rng(seed)
    values = np.array([statistic(*(a[rows] for a in arrays)) for rows in (
        rng.integers(0, n, size=n) for _ in range(int(n_resamples)))], dtype=np.float64)
    values = values[~np.isnan(values)]
    point = float(statistic(*arrays))
    if not len(values):
        return Interval(point, math.nan, math.nan, n, confidence)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return Interval(point, float(low), float(high), n, confidence)


def _check_resampling(n_resamples, confidence):
    if int(n_resamples) < 1:
        raise UserError('n_resamples must be at least 1, got {}'.format(n_resamples))
    if not 0 < confidence < 1:
        raise UserError('confidence must be in (0, 1), got {}'.format(confidence))


def _interval(values, n_resamples, confidence, seed):
    _check_resampling(n_resamples, confidence)
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


# ---------------------------------------------------------------- one summary for every study
@dataclasses.dataclass
class Summary:
    """A bootstrap interval of the mean of one measure of one method over examples.
    `baseline` is set for the paired difference measure(method) - measure(baseline);
    `classifier` where a study measures several classifiers of one run (faithfulness)."""
    method: str
    measure: str
    interval: Interval
    baseline: str = None
    classifier: str = None


def summarize_measures(values, n_resamples=1000, confidence=0.95, seed=0, classifier=None):
    """values {method: {measure: (S,)}} -> [Summary], a bootstrap interval of each
    measure's mean, in the dicts' order."""
    return [Summary(method, measure, bootstrap_ci(per_example, n_resamples, confidence, seed),
                    classifier=classifier)
            for method, measures in values.items()
            for measure, per_example in measures.items()]


def paired_measure_differences(values, pairs, measures=None, n_resamples=1000, confidence=0.95,
                       seed=0, classifier=None):
    """[Summary] of measure(method) - measure(baseline), the same examples resampled for
    both, for each (method, baseline) of `pairs` with both in `values` ({method:
    {measure: (S,)}}), and each measure of the method (those of `measures`, in that
    order, when given)."""
    rows = []
    for method, baseline in pairs:
        if method not in values or baseline not in values:
            continue
        names = values[method] if measures is None else [
            name for name in measures if name in values[method]]
        rows += [Summary(method, name, paired_bootstrap_ci(
            values[method][name], values[baseline][name], n_resamples, confidence, seed),
            baseline, classifier) for name in names]
    return rows
