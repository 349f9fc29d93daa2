"""Representer points: alpha by hand, the scores' formula, and the representer theorem
W = sum_i alpha_i f_i^T at the stationary last layer."""
import numpy as np
import pytest

from tests.attribution.attribution_cases import random_representations
from deepknn.attribution.methods import METHODS, Checkpoint, Representations
from deepknn.evaluation.calibration import softmax
from deepknn.attribution.representer import (DEFAULT_LAMBDA, fit_last_layer_stationary,
                                             representer_alphas)


def test_alpha_by_hand():
    # alpha = -(p - onehot(y)) / (2 lam n), lam = 0.5, n = 2.
    alphas = representer_alphas([[0.2, 0.8], [0.6, 0.4]], [1, 1], 0.5)
    np.testing.assert_allclose(alphas, [[-0.1, 0.1], [-0.3, 0.3]])


def test_scores_are_alpha_at_the_explained_class_times_feature_products():
    features = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    train = Representations([0, 1, 1], Checkpoint(features, [[0.5, 0.5], [0.25, 0.75],
                                                             [0.9, 0.1]]))
    test = Representations([1], Checkpoint([[3.0, 1.0]], [[0.2, 0.8]]))
    method = METHODS['representer'](lam=0.5).fit(train)
    # 2 lam n = 3; alpha[:, 1] = -(p[:, 1] - y) / 3 = [-1/6, 1/12, 0.3]; <f_i, f_t> = 3, 2, 4.
    np.testing.assert_allclose(method.scores(test), [[-0.5, 1 / 6, 1.2]])
    np.testing.assert_allclose(method.self_influence(), [1 / 6, 1 / 12, 0.3])


def test_default_lambda_matches_the_projects_weight_decay():
    # WeightDecay(1e-4) adds 1e-4 * W to the gradient: that of lam |W|^2 for lam = 5e-5.
    assert DEFAULT_LAMBDA == 5e-5
    assert METHODS['representer']().lam == 5e-5


@pytest.mark.parametrize('lam,fit_bias', [(0.01, True), (0.01, False), (DEFAULT_LAMBDA, True)])
def test_representer_theorem_holds_at_the_stationary_last_layer(lam, fit_bias):
    rng = np.random.default_rng(0)
    features = np.maximum(rng.normal(size=(40, 5)), 0)
    labels = rng.integers(3, size=40)
    weight, bias = fit_last_layer_stationary(features, labels, lam, 3, fit_bias=fit_bias)
    alphas = representer_alphas(softmax(features @ weight.T + bias), labels, lam)
    np.testing.assert_allclose(alphas.T @ features, weight, rtol=0, atol=1e-10)
    assert np.abs(weight).max() > 0.1                    # not the trivial solution
    if fit_bias:       # a free bias's gradient (1/n) sum (p - y) vanishes too
        np.testing.assert_allclose(alphas.sum(axis=0), 0, atol=1e-10)
    else:
        np.testing.assert_array_equal(bias, 0)


def test_stationary_scores_sum_to_the_logit_less_the_bias():
    train, test = random_representations(30, seed=1), random_representations(4, seed=2)
    method = METHODS['representer'](lam=0.02, stationary=True).fit(train)
    total = method.scores(test).sum(axis=1)
    f_t = test.final.features.astype(np.float64)
    logits = f_t @ method.weight.T
    np.testing.assert_allclose(total, logits[np.arange(4), test.labels], rtol=1e-10, atol=1e-12)


def test_the_projects_models_are_not_stationary_without_fitting():
    # With the probabilities as given (not from a stationary layer) the theorem fails.
    train = random_representations(30, seed=3)
    alphas = representer_alphas(train.final.probabilities, train.labels, 0.02)
    weight, _ = fit_last_layer_stationary(train.final.features, train.labels, 0.02, 3)
    assert np.abs(alphas.T @ train.final.features - weight).max() > 0.1
