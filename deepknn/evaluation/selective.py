"""Selective prediction measures: the risk-coverage curve, its area (AURC) and the
accuracy at a chosen coverage, of a trust score against whether each prediction is right.

Scores are (n,) floats, higher = more trusted; `correct` is (n,) bool (the prediction
the score is about is right). A selective classifier answers the rows whose score is at
least a threshold and abstains on the rest. Equal scores are kept or dropped together (a
threshold never splits a tie), as in deepknn.evaluation.ranking, so the measures do not
depend on the order of tied rows and a constant score gives the plain error rate.

  risk_coverage        coverage and risk (error rate of the kept rows) at every
                       distinct threshold, highest first
  aurc                 area under that curve (Geifman et al. 2019), lower is better
  optimal_aurc         the AURC of a perfect ranking with the same errors
  excess_aurc          aurc - optimal_aurc (Geifman et al.'s E-AURC)
  selective_accuracy   accuracy of the smallest tie-closed top set covering a fraction
"""
import math

import numpy as np

from nlp_utils import UserError


def _checked(scores, correct):
    """(float64 scores (n,), bool correct (n,)), or a UserError naming the argument."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1 or scores.size == 0:
        raise UserError('`scores` must be a non-empty (n,) array, got shape {}'.format(
            scores.shape), parameter='scores')
    if not np.all(np.isfinite(scores)):
        raise UserError('`scores` must be finite', parameter='scores')
    correct = _checked_correct(correct)
    if correct.shape != scores.shape:
        raise UserError('`correct` must have the shape of `scores` {}, got {}'.format(
            scores.shape, correct.shape), parameter='correct')
    return scores, correct


def _checked_correct(correct):
    """`correct` as a non-empty bool (n,) array, or a UserError."""
    correct = np.asarray(correct)
    if correct.ndim != 1 or correct.size == 0:
        raise UserError('`correct` must be a non-empty (n,) array, got shape {}'.format(
            correct.shape), parameter='correct')
    if correct.dtype != np.bool_ and not np.isin(correct, (0, 1)).all():
        raise UserError('`correct` must be bool (or 0/1)', parameter='correct')
    return correct.astype(bool)


def _kept_and_errors(scores, correct):
    """(rows kept (m,), errors among them (m,)) at each distinct threshold, highest
    first: the last row of each group of equal scores closes a threshold."""
    order = np.argsort(-scores, kind='stable')
    ends = np.flatnonzero(np.diff(scores[order], append=-np.inf) != 0)
    return ends + 1, np.cumsum(~correct[order])[ends]


def risk_coverage(scores, correct):
    """The risk-coverage curve: (coverage (m,), risk (m,)) at the m distinct thresholds,
    highest first. coverage = fraction of rows kept (score >= threshold); risk = the
    fraction of the kept rows whose prediction is wrong. The last point keeps every row:
    coverage 1, risk = the error rate."""
    scores, correct = _checked(scores, correct)
    kept, errors = _kept_and_errors(scores, correct)
    return kept / len(scores), errors / kept


def aurc(scores, correct):
    """Area under the risk-coverage curve (Geifman, Uziel and El-Yaniv 2019, "Bias-reduced
    uncertainty estimation for deep neural classifiers"): the mean over the coverage
    levels i/n, i = 1..n, of the risk of the i most trusted rows.

    Ties: the rows of a group of equal scores enter together, so every coverage level
    inside the group takes the group's risk, the risk once the whole group is kept:
    AURC = sum over groups of (group size / n) * risk after the group. With distinct
    scores this is exactly Geifman et al.'s (1/n) sum_i risk_i; a constant score gives
    the error rate. Lower is better; 0 when nothing is wrong."""
    coverage, risk = risk_coverage(scores, correct)
    return float(np.sum(np.diff(coverage, prepend=0.0) * risk))


def optimal_aurc(correct):
    """The AURC of a perfect ranking (every right row scored above every wrong one,
    distinct scores) of `correct` (n,) bool: with e wrong rows,
    (1/n) sum_{i=n-e+1}^{n} (i - (n - e)) / i, which tends to r + (1 - r) ln(1 - r) for
    an error rate r = e/n as n grows (Geifman et al. 2019)."""
    correct = _checked_correct(correct)
    n, n_right = len(correct), int(correct.sum())
    levels = np.arange(n_right + 1, n + 1)       # coverage levels that keep a wrong row
    return float(np.sum((levels - n_right) / levels) / n)


def excess_aurc(scores, correct):
    """aurc - optimal_aurc (Geifman et al.'s E-AURC): 0 for a perfect ranking, so that
    scorers of models with different error rates can be compared."""
    return aurc(scores, correct) - optimal_aurc(correct)


def selective_accuracy(scores, correct, coverage):
    """(accuracy, achieved coverage) of the smallest tie-closed top set of rows whose
    coverage is at least `coverage` in (0, 1]: the rows are kept from the most trusted
    down, a whole group of equal scores at a time, until that fraction is reached, so
    the achieved coverage may exceed the one asked for."""
    scores, correct = _checked(scores, correct)
    if isinstance(coverage, bool) or not isinstance(coverage, (int, float, np.number)) \
            or not 0 < coverage <= 1:
        raise UserError('`coverage` must lie in (0, 1], got {!r}'.format(coverage),
                        parameter='coverage')
    kept, errors = _kept_and_errors(scores, correct)
    # Rounded first: 0.07 * 100 is 7.000000000000001, which must ask for 7 rows, not 8.
    wanted = max(1, math.ceil(round(coverage * len(scores), 9)))
    group = int(np.argmax(kept >= wanted))
    return float(1 - errors[group] / kept[group]), float(kept[group] / len(scores))
