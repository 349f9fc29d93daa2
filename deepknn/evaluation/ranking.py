"""Ranking measures of scores against a binary truth, each defined once for every study.

Scores are (n,) floats, higher = more likely positive; `positive` is (n,) bool. Equal
scores enter a ranking together (a threshold never splits a tie), as scikit-learn's
curves treat them, so a constant score gives the base rate, not an order of rows.

  average_precision   step sum over thresholds of (recall gain) x precision (AUPR)
  auroc               area under the ROC curve (ties count half)
  fpr_at_tpr          false-positive rate at the first threshold reaching a TPR
  precision_recall_at_k   precision and recall of the k first rows of a ranking
"""
import math

import numpy as np

NONE_POSITIVE = ('nan', 'error')   # what average_precision does without a positive


def _checked(scores, positive):
    scores = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    if scores.ndim != 1 or scores.shape != positive.shape:
        raise ValueError('scores and positive must be (n,) arrays of one length, got {} '
                         'and {}'.format(scores.shape, positive.shape))
    if not np.all(np.isfinite(scores)):
        raise ValueError('scores must be finite')
    return scores, positive


def _threshold_counts(scores, positive):
    """(true positives, false positives) above each distinct threshold, highest first:
    the last row of each group of equal scores closes a threshold."""
    order = np.argsort(-scores, kind='stable')
    ends = np.flatnonzero(np.diff(scores[order], append=-np.inf) != 0)
    true_positives = np.cumsum(positive[order])[ends]
    return true_positives, ends + 1 - true_positives


def average_precision(scores, positive, if_none='nan'):
    """Area under the precision-recall curve, sum over thresholds of (R_t - R_t-1) P_t.
    Without a positive row: NaN (if_none='nan') or a ValueError ('error')."""
    if if_none not in NONE_POSITIVE:
        raise ValueError('if_none must be one of {}, got {!r}'.format(NONE_POSITIVE, if_none))
    scores, positive = _checked(scores, positive)
    if not positive.any():
        if if_none == 'error':
            raise ValueError('no positive row to find')
        return math.nan
    true_positives, false_positives = _threshold_counts(scores, positive)
    precision = true_positives / (true_positives + false_positives)
    recall = true_positives / positive.sum()
    return float(np.sum(np.diff(recall, prepend=0.0) * precision))


def auroc(scores, positive):
    """Area under the ROC curve: the chance that a positive row outscores a negative one,
    ties counting half (the trapezoids between thresholds). NaN with one class only."""
    scores, positive = _checked(scores, positive)
    n_positive, n_negative = positive.sum(), (~positive).sum()
    if n_positive == 0 or n_negative == 0:
        return math.nan
    true_positives, false_positives = _threshold_counts(scores, positive)
    tpr = np.r_[0.0, true_positives / n_positive]
    fpr = np.r_[0.0, false_positives / n_negative]
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))


def fpr_at_tpr(scores, positive, tpr=0.95):
    """The false-positive rate at the highest threshold whose true-positive rate reaches
    `tpr` (OOD detection's FPR at 95% TPR). NaN with one class only."""
    scores, positive = _checked(scores, positive)
    n_positive, n_negative = positive.sum(), (~positive).sum()
    if n_positive == 0 or n_negative == 0:
        return math.nan
    true_positives, false_positives = _threshold_counts(scores, positive)
    first = int(np.argmax(true_positives / n_positive >= tpr - 1e-12))
    return float(false_positives[first] / n_negative)


def precision_recall_at_k(ranking, positive, k):
    """(precision, recall) of the first k row indices of `ranking` against `positive`
    (n,) bool."""
    positive = np.asarray(positive, dtype=bool)
    hits = int(positive[np.asarray(ranking)[:k]].sum())
    return hits / k, hits / int(positive.sum())
