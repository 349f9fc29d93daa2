"""Selective prediction measures (deepknn/evaluation/selective.py) against hand-computed
answers, closed forms and scikit-learn's ROC counts, ties included."""
import math

import numpy as np
import pytest
from sklearn import metrics

from deepknn.evaluation import selective
from nlp_utils import UserError

# Groups by score: {0.9} 1 right; {0.8, 0.8} 1 right 1 wrong; {0.5} right; {0.1} wrong.
SCORES = [0.9, 0.8, 0.8, 0.5, 0.1]
CORRECT = [True, True, False, True, False]


def test_hand_example_risk_coverage_and_aurc():
    coverage, risk = selective.risk_coverage(SCORES, CORRECT)
    np.testing.assert_allclose(coverage, [0.2, 0.6, 0.8, 1.0])
    np.testing.assert_allclose(risk, [0, 1 / 3, 1 / 4, 2 / 5])
    # Every coverage level inside the tie takes the tie's risk, 1/3.
    assert selective.aurc(SCORES, CORRECT) == pytest.approx(
        0.2 * 0 + 0.4 * (1 / 3) + 0.2 * (1 / 4) + 0.2 * (2 / 5))


def test_hand_example_selective_accuracy_never_splits_a_tie():
    assert selective.selective_accuracy(SCORES, CORRECT, 0.2) == (1.0, 0.2)
    # 2 rows wanted, but the second row ties with the third: 3 are kept.
    assert selective.selective_accuracy(SCORES, CORRECT, 0.4) == pytest.approx((2 / 3, 0.6))
    assert selective.selective_accuracy(SCORES, CORRECT, 0.8) == pytest.approx((0.75, 0.8))
    assert selective.selective_accuracy(SCORES, CORRECT, 1) == pytest.approx((0.6, 1.0))
    # 0.07 * 100 is 7.000000000000001 in floating point; 7 rows, not 8, are wanted.
    scores = np.arange(100.0)[::-1]
    assert selective.selective_accuracy(scores, np.ones(100, bool), 0.07)[1] == 0.07


def test_perfect_ranking_reaches_the_closed_form():
    n, errors = 10, 3
    correct = np.arange(n) < n - errors            # right rows first
    scores = -np.arange(n, dtype=float)            # distinct, decreasing
    expected = (1 / 8 + 2 / 9 + 3 / 10) / 10      # risk at coverage 8/10, 9/10, 10/10
    assert selective.aurc(scores, correct) == pytest.approx(expected)
    assert selective.optimal_aurc(correct) == pytest.approx(expected)
    assert selective.excess_aurc(scores, correct) == pytest.approx(0, abs=1e-15)
    # Harmonic-number form: e/n - (n-e)/n (H_n - H_{n-e}).
    harmonic = sum(1 / i for i in range(n - errors + 1, n + 1))
    assert expected == pytest.approx(errors / n - (n - errors) / n * harmonic)
    # Large n: Geifman et al.'s r + (1 - r) ln(1 - r).
    r, big = 0.2, 100_000
    correct = np.arange(big) < big * (1 - r)
    assert selective.optimal_aurc(correct) == pytest.approx(r + (1 - r) * math.log(1 - r),
                                                            abs=1e-4)


def test_constant_score_gives_the_error_rate_and_reversed_order_the_worst():
    correct = np.array([True, False, True, True, False, True])
    assert selective.aurc(np.ones(6), correct) == pytest.approx(2 / 6)
    assert selective.selective_accuracy(np.ones(6), correct, 0.1) == pytest.approx((4 / 6, 1))
    good, bad = correct.astype(float), 1 - correct.astype(float)
    assert selective.aurc(bad, correct) > selective.aurc(np.ones(6), correct) \
        > selective.aurc(good, correct)


@pytest.mark.parametrize('levels', [3, 1000])
def test_risk_coverage_matches_scikit_learns_roc_counts(levels):
    rng = np.random.RandomState(1)
    scores = rng.randint(0, levels, 300).astype(float)
    correct = rng.rand(300) < 0.7
    fpr, tpr, thresholds = metrics.roc_curve(correct, scores, drop_intermediate=False)
    kept = tpr[1:] * correct.sum() + fpr[1:] * (~correct).sum()
    coverage, risk = selective.risk_coverage(scores, correct)
    np.testing.assert_allclose(coverage, kept / 300)
    np.testing.assert_allclose(risk, fpr[1:] * (~correct).sum() / kept)
    # Row order does not matter, even inside ties.
    order = rng.permutation(300)
    assert selective.aurc(scores[order], correct[order]) == pytest.approx(
        selective.aurc(scores, correct), abs=1e-15)


def test_errors_name_the_parameter():
    with pytest.raises(UserError, match=r'`coverage` must lie in \(0, 1\], got 2'):
        selective.selective_accuracy(SCORES, CORRECT, 2)
    with pytest.raises(UserError, match='`coverage`'):
        selective.selective_accuracy(SCORES, CORRECT, 0)
    with pytest.raises(UserError, match='`correct` must have the shape'):
        selective.aurc(SCORES, CORRECT[:3])
    with pytest.raises(UserError, match='`scores` must be finite'):
        selective.aurc([1, np.nan], [True, False])
    with pytest.raises(UserError, match='`correct` must be bool'):
        selective.risk_coverage([1, 2], [0, 2])
