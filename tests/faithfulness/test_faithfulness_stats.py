"""deepknn.faithfulness.curves: known answers for curve interpolation and areas, Kendall
agreement (hand-counted pairs, undefined sentences) and bootstrap intervals (against
the normal approximation)."""
import warnings

import numpy as np
import pytest

from deepknn.faithfulness import curves as fs
from deepknn.evaluation import statistics
from nlp_utils import UserError


# ---------------------------------------------------------------- curves
def test_mean_curve_interpolates_curves_of_different_lengths():
    # y = 1 - x sampled at 2 and at 5 points, and a constant: all exact under interpolation.
    curves = [np.array([1.0, 0.0]), np.linspace(1, 0, 5), np.full(4, 0.4)]
    grid = np.array([0.0, 0.3, 0.5, 1.0])
    np.testing.assert_allclose(fs.interpolate_curves(curves, grid)[1], [1, 0.7, 0.5, 0])
    np.testing.assert_allclose(fs.mean_curve(curves, grid),
                               [(2 + 0.4) / 3, (1.4 + 0.4) / 3, (1 + 0.4) / 3, 0.4 / 3])
    assert fs.curve_area([1.0, 0.0]) == pytest.approx(0.5)
    assert fs.curve_fractions(np.zeros(5)).tolist() == [0, 0.25, 0.5, 0.75, 1]


# ---------------------------------------------------------------- agreement
def test_kendall_agreement_known_values_and_undefined_sentences():
    a = [np.array([0.1, 0.5, 0.3, 0.9]), np.array([1.0, 2.0, 3.0]), np.array([0.7]),
         np.array([0.2, 0.2, 0.2])]
    same = fs.kendall_agreement(a, a)
    assert same.mean == pytest.approx(1.0) and same.n_used == 2
    assert np.isnan(same.per_sentence[2]) and np.isnan(same.per_sentence[3])
    reverse = fs.kendall_agreement(a, [-x for x in a])
    assert reverse.mean == pytest.approx(-1.0) and reverse.n_used == 2
    # One swapped pair of 3 in a 3-word sentence: tau = (2 - 1) / 3.
    mixed = fs.kendall_agreement([np.array([1.0, 2.0, 3.0])], [np.array([2.0, 1.0, 3.0])])
    assert mixed.mean == pytest.approx(1 / 3) and mixed.n_used == 1
    with warnings.catch_warnings():
        warnings.simplefilter('error')   # undefined sentences are skipped, not warned about
        fs.kendall_agreement(a, a)
    nothing = fs.kendall_agreement([np.array([1.0])], [np.array([2.0])])
    assert np.isnan(nothing.mean) and nothing.n_used == 0
    with pytest.raises(UserError, match='scores_a'):
        fs.kendall_agreement(a, a[:2])


# ---------------------------------------------------------------- bootstrap
def test_bootstrap_interval_contains_the_mean_and_narrows_with_more_sentences():
    rng = np.random.default_rng(0)
    few, many = rng.normal(0.3, 0.2, size=20), rng.normal(0.3, 0.2, size=500)
    small, large = statistics.bootstrap_ci(few), statistics.bootstrap_ci(many)
    for interval, values in ((small, few), (large, many)):
        assert interval.mean == pytest.approx(values.mean())
        assert interval.low < interval.mean < interval.high
    assert large.high - large.low < (small.high - small.low) / 2
    # 500 normal values: the 95% interval is close to mean +- 1.96 standard errors.
    half_width = 1.96 * many.std() / np.sqrt(len(many))
    assert (large.high - large.low) / 2 == pytest.approx(half_width, rel=0.15)
    assert statistics.bootstrap_ci(few, seed=1) == statistics.bootstrap_ci(few, seed=1)
    assert small.n == 20 and statistics.bootstrap_ci(np.r_[few, np.nan]).n == 20
    assert statistics.bootstrap_ci(np.array([np.nan])).n == 0
