"""TRAK on hand cases (orthonormal Phi), its two ways of averaging over models, the
margin's gradient, and the general formula phi^T (Phi^T Phi)^-1 Phi^T Q."""
import numpy as np
import pytest

from tests.attribution.attribution_cases import random_representations
from deepknn.attribution.methods import METHODS, Checkpoint, Representations
from deepknn.attribution import last_layer
from deepknn.evaluation.calibration import softmax
from nlp_utils import UserError

ORTHONORMAL = np.array([[1.0, 0], [0, 1], [0, 0], [0, 0]])      # (N=4, P=2)


def model(phi, p_label, features_dim=1):
    """A Checkpoint of 4 rows labelled 0 whose margin gradients are `phi` and whose
    probability of the label is `p_label` (so Q = 1 - p_label)."""
    p_label = np.asarray(p_label, dtype=np.float64)
    probabilities = np.stack([p_label, 1 - p_label], axis=1)
    return Checkpoint(np.zeros((len(phi), features_dim)), probabilities,
                      margin_gradients=phi)


def sides(train_models, test_phis):
    train = Representations(np.zeros(4, int), train_models[0], checkpoints=train_models)
    tests = [Checkpoint(np.zeros((1, 1)), [[0.5, 0.5]], margin_gradients=[phi])
             for phi in test_phis]
    return train, Representations([0], tests[0], checkpoints=tests)


def test_orthonormal_phi_and_identity_q_give_the_gradient_products():
    train, test = sides([model(ORTHONORMAL, [0, 0, 0, 0])], [[2.0, 3.0]])
    scores = METHODS['trak'](ridge=0).fit(train).scores(test)
    np.testing.assert_allclose(scores, [[2, 3, 0, 0]], rtol=1e-14)


def test_q_weights_each_training_row_by_one_minus_its_probability():
    train, test = sides([model(ORTHONORMAL, [0.5, 0.75, 0, 0])], [[2.0, 3.0]])
    scores = METHODS['trak'](ridge=0).fit(train).scores(test)
    np.testing.assert_allclose(scores, [[1, 0.75, 0, 0]], rtol=1e-14)


@pytest.mark.parametrize('average,expected', [
    # mean kernel [1, 1.5, 1, 1.5] times mean Q [0.75, 0.625, 0.75, 0.75] (Algorithm 1)
    ('separate', [0.75, 0.9375, 0.75, 1.125]),
    # mean of per-model scores: ([1, 0.75, 0, 0] + [0, 0, 1, 1.5]) / 2
    ('scores', [0.5, 0.375, 0.5, 0.75])])
def test_two_models_average_as_chosen(average, expected):
    second = np.array([[0.0, 0], [0, 0], [1, 0], [0, 1]])
    train, test = sides([model(ORTHONORMAL, [0.5, 0.75, 0, 0]), model(second, [0, 0, 0.5, 0.5])],
                        [[2.0, 3.0], [2.0, 3.0]])
    scores = METHODS['trak'](ridge=0, average=average).fit(train).scores(test)
    np.testing.assert_allclose(scores, [expected], rtol=1e-14)


def test_general_phi_follows_the_kernel_regression_formula():
    train, test = random_representations(20, seed=1), random_representations(3, seed=2)
    method = METHODS['trak'](ridge=0, average='scores').fit(train)
    expected = 0
    for train_m, test_m in zip(train.checkpoints, test.checkpoints):
        phi, q = train_m.margin_gradients, 1 - train_m.probabilities[np.arange(20), train.labels]
        expected = expected + test_m.margin_gradients @ np.linalg.solve(phi.T @ phi, phi.T) * q
    np.testing.assert_allclose(method.scores(test), expected / 2, rtol=1e-9, atol=1e-12)
    # The default ridge (1e-6 of the mean eigenvalue) barely moves the scores.
    ridged = METHODS['trak'](average='scores').fit(train).scores(test)
    np.testing.assert_allclose(ridged, method.scores(test), rtol=1e-4, atol=1e-8)
    # Self-influence is the diagonal of the scores of the training set against itself.
    np.testing.assert_allclose(method.self_influence(), np.diag(method.scores(train)),
                               rtol=1e-9, atol=1e-12)


def test_margin_residual_is_the_derivative_of_log_p_over_one_minus_p():
    logits = np.array([[0.3, -1.2, 2.0], [5.0, 0.1, -0.4]])
    labels = np.array([2, 0])
    analytic = last_layer.residuals(softmax(logits), labels, 'margin')

    def margin(z, y):
        p = softmax(z[None])[0, y]
        return np.log(p / (1 - p))
    for row, (z, y) in enumerate(zip(logits, labels)):
        numeric = [(margin(z + h, y) - margin(z - h, y)) / 2e-6 for h in 1e-6 * np.eye(3)]
        np.testing.assert_allclose(analytic[row], numeric, rtol=1e-7, atol=1e-9)
    # = -(p - onehot) / (1 - p_y), and exact where 1 - p_y rounds to 0.
    p = softmax(logits)
    np.testing.assert_allclose(analytic, -last_layer.residuals(p, labels) /
                               (1 - p[[0, 1], labels])[:, None], rtol=1e-12)
    sure = last_layer.residuals(softmax([[40.0, 0.0, 1.0]]), [0], 'margin')
    np.testing.assert_allclose(sure, [[1, -1 / (1 + np.e), -np.e / (1 + np.e)]], rtol=1e-12)


def test_last_layer_trak_equals_trak_on_the_explicit_gradients():
    train, test = random_representations(20, seed=3), random_representations(3, seed=4)

    def explicit(side):
        models = [Checkpoint(m.features, m.probabilities, margin_gradients=last_layer.gradients(
            m.features, m.probabilities, side.labels, 'margin')) for m in side.checkpoints]
        return Representations(side.labels, side.final, checkpoints=models)
    last = METHODS['trak'](gradients='last-layer', ridge=1e-3).fit(train).scores(test)
    projected = METHODS['trak'](ridge=1e-3).fit(explicit(train)).scores(explicit(test))
    np.testing.assert_allclose(last, projected, rtol=1e-12)


def test_a_singular_kernel_without_ridge_names_ridge():
    train, _ = sides([model(np.array([[1.0, 1], [1, 1], [0, 0], [0, 0]]), [0] * 4)],
                     [[1.0, 0.0]])
    with pytest.raises(UserError) as error:
        METHODS['trak'](ridge=0).fit(train)
    assert error.value.parameter == 'ridge'
    METHODS['trak']().fit(train)           # the default ridge makes it solvable
