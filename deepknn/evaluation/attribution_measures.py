"""Measures of training-data attribution as plain functions of arrays: the identical
class and subclass tests (Hanawa et al., ICLR 2021, "Evaluation of similarity-based
explanations"), the linear datamodeling score with its random-halves subsets (Park et
al. 2023, "TRAK"), and noisy-label detection from self-influence.

  identical_class      share of test inputs whose top-1 training row has the test
                       prediction as its label
  identical_subclass   the same for subclasses (e.g. the source dataset of a merged class)
  random_halves        (M, N) masks, each exactly floor(N / 2) training rows
  lds                  per test input, the Spearman correlation over M subsets between
                       the summed attribution of the subset and the margin of the model
                       trained on it; NaN where either is constant over the subsets
  lds_interval         its mean and bootstrap interval (statistics.bootstrap_ci, NaN
                       left out)
  noisy_label_detection  AUPRC, AUROC and precision/recall at k of a self-influence
                       ranking (ranking.py's measures; highest self-influence first)
"""
import numpy as np
import scipy.stats

from deepknn.evaluation.ranking import auroc, average_precision, precision_recall_at_k
from deepknn.evaluation.statistics import bootstrap_ci
from nlp_utils import UserError


def _pair(a, b, name_a, name_b):
    """Two (n,) arrays of one length n >= 1; a UserError naming the first otherwise."""
    a, b = np.asarray(a), np.asarray(b)
    if a.ndim != 1 or a.shape != b.shape or len(a) == 0:
        raise UserError('`{}` and `{}` must be non-empty 1-D arrays of one length, got shapes '
                        '{} and {}'.format(name_a, name_b, a.shape, b.shape), name_a)
    return a, b


def identical_class(top1_train_labels, test_predictions):
    """Share (float) of test inputs whose most supportive training row's label equals
    the test prediction. top1_train_labels, test_predictions: (n,)."""
    labels, predictions = _pair(top1_train_labels, test_predictions, 'top1_train_labels',
                                'test_predictions')
    return float(np.mean(labels == predictions))


def identical_subclass(top1_train_subclasses, test_subclasses):
    """Share (float) of test inputs whose most supportive training row is of the test
    input's subclass. Both (n,)."""
    train, test = _pair(top1_train_subclasses, test_subclasses, 'top1_train_subclasses',
                        'test_subclasses')
    return float(np.mean(train == test))


def random_halves(n_train, m, seed=0):
    """(m, n_train) bool: m random subsets of exactly floor(n_train / 2) training rows,
    reproducible from `seed`."""
    for name, value, least in (('n_train', n_train, 2), ('m', m, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
            raise UserError('`{}` must be an integer of at least {}, got {!r}'.format(
                name, least, value), name)
    rng = np.random.default_rng(seed)
    masks = np.zeros((m, n_train), dtype=bool)
    for row in masks:
        row[rng.permutation(n_train)[:n_train // 2]] = True
    return masks


def _column_correlations(x, y):
    """Pearson correlation of each column of x with that of y, (M, n) -> (n,); NaN
    where a column is constant."""
    x = x - x.mean(axis=0)
    y = y - y.mean(axis=0)
    scale = np.sqrt(np.sum(x * x, axis=0) * np.sum(y * y, axis=0))
    # Rank columns hold exact halves and integers: a constant one centres to exactly 0.
    return np.divide(np.sum(x * y, axis=0), scale, out=np.full(scale.shape, np.nan),
                     where=scale > 0)


def lds(attributions, subset_masks, margins):
    """Linear datamodeling score per test input (n_test,): the Spearman correlation,
    over the M subsets, of the attribution summed over each subset
    (subset_masks @ attributions[t]) with the margin of the model trained on that subset.

    attributions (n_test, n_train) float; subset_masks (M, n_train) bool;
    margins (M, n_test) float. Ties get average ranks. NaN where the summed attributions
    or the margins are constant over the subsets (no ranking to correlate)."""
    attributions = np.asarray(attributions, dtype=np.float64)
    masks = np.asarray(subset_masks)
    margins = np.asarray(margins, dtype=np.float64)
    if attributions.ndim != 2 or not np.all(np.isfinite(attributions)):
        raise UserError('`attributions` must be a finite (n_test, n_train) array, got shape {}'
                        .format(attributions.shape), 'attributions')
    if masks.dtype != np.bool_ or masks.ndim != 2 or masks.shape[1] != attributions.shape[1] \
            or len(masks) < 2:
        raise UserError('`subset_masks` must be a bool (M, {}) array with M >= 2, got {} {}'
                        .format(attributions.shape[1], masks.dtype, masks.shape), 'subset_masks')
    if margins.shape != (len(masks), len(attributions)) or not np.all(np.isfinite(margins)):
        raise UserError('`margins` must be a finite ({}, {}) array, got shape {}'.format(
            len(masks), len(attributions), margins.shape), 'margins')
    predicted = masks.astype(np.float64) @ attributions.T          # (M, n_test)
    return _column_correlations(scipy.stats.rankdata(predicted, axis=0),
                                scipy.stats.rankdata(margins, axis=0))


def lds_interval(values, n_resamples=1000, confidence=0.95, seed=0):
    """Mean LDS over test inputs with its percentile bootstrap Interval (NaN left out)."""
    return bootstrap_ci(values, n_resamples, confidence, seed)


def noisy_label_detection(self_influence, noisy, k):
    """How well ranking training rows by self-influence (N,), highest first, finds the
    rows whose label was flipped (`noisy`, (N,) bool). Returns a dict: average_precision
    (AUPRC, ties entering together), auroc, and precision_at_k, recall_at_k of the first
    k rows (ties by the smaller index)."""
    scores = np.asarray(self_influence, dtype=np.float64)
    noisy = np.asarray(noisy, dtype=bool)
    if scores.ndim != 1 or scores.shape != noisy.shape:
        raise UserError('`self_influence` and `noisy` must be (N,) arrays of one length, got '
                        'shapes {} and {}'.format(scores.shape, noisy.shape), 'self_influence')
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= len(scores):
        raise UserError('`k` must be an integer between 1 and {}, got {!r}'.format(
            len(scores), k), 'k')
    if not noisy.any():
        raise UserError('`noisy` marks no row: nothing to detect', 'noisy')
    ranking = np.lexsort((np.arange(len(scores)), -scores))
    precision, recall = precision_recall_at_k(ranking, noisy, k)
    return {'average_precision': average_precision(scores, noisy),
            'auroc': auroc(scores, noisy), 'precision_at_k': precision, 'recall_at_k': recall}
