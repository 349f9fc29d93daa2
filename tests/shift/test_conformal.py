"""Conformal prediction measures (deepknn/evaluation/conformal.py): hand-computed sets and
p-values, the standard and the DkNN p-value, coverage near 1 - alpha on exchangeable
data, and weighted p-values restoring it under covariate shift."""
import numpy as np
import pytest

from deepknn.neighbors.dknn import DkNN
from deepknn.evaluation import conformal
from nlp_utils import UserError

ALPHA = 0.1


def test_sets_coverage_and_size_by_hand():
    p_values = np.array([[0.5, 0.05, 0.3], [0.1, 0.2, 0.0], [0.02, 0.01, 0.0]])
    sets = conformal.prediction_sets(p_values, ALPHA)
    # p = alpha is not enough: the set needs p > alpha.
    np.testing.assert_array_equal(sets, [[1, 0, 1], [0, 1, 0], [0, 0, 0]])
    assert conformal.set_coverage(sets, [2, 0, 0]) == pytest.approx(1 / 3)
    assert conformal.mean_set_size(sets) == pytest.approx(1.0)


def test_unit_weights_give_the_standard_p_value_just_above_the_dknns():
    rng = np.random.default_rng(0)
    calibration = rng.integers(0, 10, 50).astype(float)      # many ties, as the DkNN's
    test = rng.integers(0, 12, (20, 3)).astype(float)
    p = conformal.weighted_p_values(calibration, np.ones(50), test, np.ones(20))
    count = (calibration[None, None, :] >= test[:, :, None]).sum(axis=2)
    np.testing.assert_allclose(p, (count + 1) / 51)
    dknn = DkNN(n_class=3, k=1)
    dknn.calibration_scores = np.sort(calibration)
    dknn_p = dknn.p_values(test)                              # count / m
    np.testing.assert_allclose(dknn_p, count / 50)
    np.testing.assert_allclose(p - dknn_p, (1 - dknn_p) / 51)
    assert np.all(p >= dknn_p)


def test_weighted_p_values_by_hand():
    # Calibration weights sum to 10; the test input weighs 2: denominators 12.
    p = conformal.weighted_p_values([1, 2, 3, 4], [1, 2, 3, 4], [[2.5, 0.5, 4, 3, 9]], [2])
    # >= 2.5: {3, 4} (7); >= 0.5: all (10); >= 4: {4}; >= 3: {3, 4} (a tie counts); none.
    np.testing.assert_allclose(p, [[9 / 12, 12 / 12, 6 / 12, 9 / 12, 2 / 12]])


def test_coverage_near_one_minus_alpha_on_exchangeable_data():
    rng = np.random.default_rng(3)
    m, n, n_class = 2000, 5000, 3
    logits = rng.normal(0, 2, (m + n, n_class))
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    labels = (rng.random(m + n)[:, None] > probabilities.cumsum(axis=1)).sum(axis=1)
    nonconformity = 1 - probabilities                          # (m + n, C)
    calibration = nonconformity[np.arange(m), labels[:m]]
    p = conformal.weighted_p_values(calibration, np.ones(m), nonconformity[m:], np.ones(n))
    sets = conformal.prediction_sets(p, ALPHA)
    # Exchangeable: coverage in [1 - alpha, 1 - alpha + 1/(m+1)] in expectation; 0.015
    # is about 3.5 standard errors of a mean over 5000 test inputs.
    assert conformal.set_coverage(sets, labels[m:]) == pytest.approx(1 - ALPHA, abs=0.015)
    assert 1 < conformal.mean_set_size(sets) < n_class


def test_dknn_p_values_cover_on_exchangeable_data():
    rng = np.random.default_rng(4)
    centres = np.array([[0, 0], [2, 0], [1, 1.5]])
    labels = rng.integers(0, 3, 1600)
    layer = (centres[labels] + rng.normal(0, 0.8, (1600, 2))).astype(np.float32)
    dknn = DkNN(3, backend='kdtree', k=10).fit([layer[:800]], labels[:800])
    dknn.calibrate([layer[800:1200]], labels[800:1200])
    p = dknn.predict_from_activations([layer[1200:]])['p_values']
    coverage = conformal.set_coverage(conformal.prediction_sets(p, ALPHA), labels[1200:])
    # Ties of the integer nonconformity only add coverage; 400 test inputs: sd ~ 0.015.
    assert coverage >= 1 - ALPHA - 0.04


def shifted_regression(seed, m=8000, n=8000, shift=1.0):
    """x ~ N(0, 1) for calibration, N(shift, 1) for test; y = x + (0.2 + |x|) noise, so
    that the nonconformity |y - x| grows with |x| and the shift makes it larger."""
    rng = np.random.default_rng(seed)
    x_source, x_target = rng.normal(0, 1, m), rng.normal(shift, 1, n)

    def residual(x):
        return np.abs(rng.normal(0, 1, len(x)) * (0.2 + np.abs(x)))
    return x_source, residual(x_source), x_target, residual(x_target)


def test_weighted_coverage_is_restored_under_covariate_shift():
    x_source, v_source, x_target, v_target = shifted_regression(0)
    weights_source, weights_target = conformal.domain_classifier_weights(
        x_source[:, None], x_target[:, None], seed=0)
    coverages = []
    for w_source, w_target in ((np.ones(len(x_source)), np.ones(len(x_target))),
                               (weights_source, weights_target)):
        p = conformal.weighted_p_values(v_source, w_source, v_target[:, None], w_target)
        coverages.append(float(np.mean(p[:, 0] > ALPHA)))
    unweighted, weighted = coverages
    assert unweighted < 1 - ALPHA - 0.05           # the shift breaks the promise (0.82)
    assert weighted == pytest.approx(1 - ALPHA, abs=0.02)
    assert abs(weighted - (1 - ALPHA)) < abs(unweighted - (1 - ALPHA)) - 0.05


def test_domain_classifier_weights_estimate_the_likelihood_ratio():
    rng = np.random.default_rng(5)
    same_a, same_b = rng.normal(0, 1, (3000, 2)), rng.normal(0, 1, (3000, 2))
    weights = np.concatenate(conformal.domain_classifier_weights(same_a, same_b, seed=0))
    assert 0.75 < weights.min() and weights.max() < 1.33
    # N(0, 1) vs N(1, 1): the true ratio is exp(x - 1/2), increasing in x.
    source, target = rng.normal(0, 1, 4000), rng.normal(1, 1, 2000)
    w_source, w_target = conformal.domain_classifier_weights(source[:, None],
                                                            target[:, None], seed=0)
    order = np.argsort(source)
    assert np.all(np.diff(w_source[order]) > 0)
    assert np.all(np.diff(w_target[np.argsort(target)]) > 0)
    bulk = np.abs(source) < 2
    np.testing.assert_allclose(w_source[bulk], np.exp(source[bulk] - 0.5), rtol=0.2)
    # Both sets get the same function: equal inputs, equal weights.
    w_both = conformal.domain_classifier_weights(np.r_[source, 0.3][:, None],
                                                 np.r_[target, 0.3][:, None], seed=0)
    assert w_both[0][-1] == pytest.approx(w_both[1][-1])


def test_errors_name_the_parameter():
    with pytest.raises(UserError, match=r'`alpha` must lie in \(0, 1\), got 2'):
        conformal.prediction_sets([[0.5, 0.2]], 2)
    with pytest.raises(UserError, match='`p_values` must lie in'):
        conformal.prediction_sets([[1.5, 0.2]], 0.1)
    with pytest.raises(UserError, match='`calibration_weights` must be finite and >= 0'):
        conformal.weighted_p_values([1, 2], [1, -1], [[1]], [1])
    with pytest.raises(UserError, match='`test_weights` must be a non-empty'):
        conformal.weighted_p_values([1, 2], [1, 1], [[1], [2]], [1])
    with pytest.raises(UserError, match='`calibration_weights` and `test_weights` are all 0'):
        conformal.weighted_p_values([1, 2], [0, 0], [[1]], [0])
    with pytest.raises(UserError, match='`target_features` must have 2 columns'):
        conformal.domain_classifier_weights(np.zeros((3, 2)), np.zeros((3, 1)))
    with pytest.raises(UserError, match='`labels` must be'):
        conformal.set_coverage(np.ones((2, 2), bool), [0, 2])
    with pytest.raises(UserError, match='`sets` must be'):
        conformal.mean_set_size(np.ones((2, 2)))


def test_weighted_p_values_stay_at_most_one_whatever_the_rounding():
    rng = np.random.default_rng(0)    # a case where the suffix sum exceeds the total
    weights = rng.random(997) * 1e3
    p = conformal.weighted_p_values(np.zeros(997), weights, np.zeros((50, 2)), rng.random(50))
    assert p.max() <= 1.0 and np.allclose(p, 1.0)
