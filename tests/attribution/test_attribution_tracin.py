"""TracIn and grad-cos on a softmax-regression model trained by SGD, where the last layer
is the whole model: the closed form against explicit and numerical gradients."""
import chainer
import chainer.links as L
import numpy as np
import pytest

from tests.attribution.attribution_cases import (N_CLASS, cross_entropy, numerical_gradient,
                               sgd_softmax_regression)
from deepknn.attribution.methods import METHODS, Checkpoint, Representations
from deepknn.attribution import last_layer
from deepknn.evaluation.calibration import softmax
from deepknn.attribution.gradients import per_example_gradients

N_TRAIN, N_TEST, DIM = 12, 4, 3
RATES = (0.5, 0.2, 0.05)


@pytest.fixture(scope='module')
def run():
    """Inputs, labels and the SGD checkpoints [(W, b, eta)] of a softmax regression."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N_TRAIN + N_TEST, DIM))
    labels = rng.integers(N_CLASS, size=N_TRAIN + N_TEST)
    checkpoints = sgd_softmax_regression(x[:N_TRAIN], labels[:N_TRAIN], RATES)
    return x, labels, checkpoints


def representations(x, labels, checkpoints, gradients=False):
    """Representations of inputs x under each checkpoint; gradients=True also stores the
    explicit last-layer loss gradients as the 'projected' ones."""
    states = []
    for weight, bias, rate in checkpoints:
        p = softmax(x @ weight.T + bias)
        g = last_layer.gradients(x, p, labels) if gradients else None
        states.append(Checkpoint(x, p, rate, loss_gradients=g))
    return Representations(labels, states[-1], checkpoints=states)


def explicit_tracin(x, labels, checkpoints, test_x, explained):
    """sum_k eta_k <grad, grad> with numerically differentiated gradients."""
    out = np.zeros((len(test_x), len(x)))
    for weight, bias, rate in checkpoints:
        train_g = np.array([numerical_gradient(weight, bias, xi, y) for xi, y in zip(x, labels)])
        test_g = np.array([numerical_gradient(weight, bias, xt, c)
                           for xt, c in zip(test_x, explained)])
        out += rate * test_g @ train_g.T
    return out


def test_tracin_last_equals_the_sum_of_numerical_gradient_products(run):
    x, labels, checkpoints = run
    explained = (labels[N_TRAIN:] + 1) % N_CLASS          # not the label: any class works
    train = representations(x[:N_TRAIN], labels[:N_TRAIN], checkpoints)
    test = representations(x[N_TRAIN:], explained, checkpoints)
    method = METHODS['tracin-last']().fit(train)
    expected = explicit_tracin(x[:N_TRAIN], labels[:N_TRAIN], checkpoints, x[N_TRAIN:], explained)
    np.testing.assert_allclose(method.scores(test), expected, rtol=1e-6, atol=1e-8)
    self_expected = sum(rate * np.sum(np.array([numerical_gradient(w, b, xi, y) for xi, y in
                                                zip(x[:N_TRAIN], labels[:N_TRAIN])]) ** 2, axis=1)
                        for w, b, rate in checkpoints)
    np.testing.assert_allclose(method.self_influence(), self_expected, rtol=1e-6)


def test_tracin_projected_with_exact_gradients_equals_the_closed_form(run):
    x, labels, checkpoints = run
    train = representations(x[:N_TRAIN], labels[:N_TRAIN], checkpoints, gradients=True)
    test = representations(x[N_TRAIN:], labels[N_TRAIN:], checkpoints, gradients=True)
    closed = METHODS['tracin-last']().fit(train)
    explicit = METHODS['tracin-projected']().fit(train)
    np.testing.assert_allclose(explicit.scores(test), closed.scores(test), rtol=1e-12)
    np.testing.assert_allclose(explicit.self_influence(), closed.self_influence(), rtol=1e-12)


class Linear(chainer.Chain):
    """logits = W x + b on (D,) float32 inputs, a model per_example_gradients takes."""

    def __init__(self, weight, bias):
        super().__init__()
        self.n_class = len(weight)
        with self.init_scope():
            self.fc = L.Linear(weight.shape[1], weight.shape[0],
                               initialW=weight.astype(np.float32),
                               initial_bias=bias.astype(np.float32))

    def forward(self, xs):
        return self.fc(self.xp.stack(xs))


def test_closed_form_gradients_equal_chainers(run):
    x, labels, checkpoints = run
    weight, bias, _ = checkpoints[-1]
    model = Linear(weight, bias)
    xs = list(x.astype(np.float32))
    exact = per_example_gradients(model, xs, labels)              # projection None
    closed = last_layer.gradients(x, softmax(x @ weight.T + bias), labels)
    np.testing.assert_allclose(exact, closed, rtol=1e-4, atol=1e-6)
    margin = per_example_gradients(model, xs, labels, output='margin')
    closed = last_layer.gradients(x, softmax(x @ weight.T + bias), labels, 'margin')
    np.testing.assert_allclose(margin, closed, rtol=1e-4, atol=1e-6)


def test_one_small_sgd_step_changes_the_test_loss_by_eta_times_the_product(run):
    # TracIn's first-order reading: a step on z_i lowers the loss at z_t by about
    # eta <g_i, g_t> (the error is O(eta^2)).
    x, labels, checkpoints = run
    weight, bias, _ = checkpoints[-1]
    train = representations(x[:N_TRAIN], labels[:N_TRAIN], [(weight, bias, 1.0)])
    test = representations(x[N_TRAIN:], labels[N_TRAIN:], [(weight, bias, 1.0)])
    products = METHODS['tracin-last']().fit(train).scores(test)
    eta = 1e-5
    for i in range(N_TRAIN):
        g = last_layer.gradients(x[i:i + 1], softmax(x[i:i + 1] @ weight.T + bias),
                                 labels[i:i + 1])[0]
        stepped_w = weight - eta * g[:weight.size].reshape(weight.shape)
        stepped_b = bias - eta * g[weight.size:]
        for t in range(N_TEST):
            xt, yt = x[N_TRAIN + t], labels[N_TRAIN + t]
            drop = cross_entropy(weight, bias, xt, yt) - cross_entropy(stepped_w, stepped_b,
                                                                      xt, yt)
            assert drop == pytest.approx(eta * products[t, i], rel=1e-3, abs=1e-9)


def test_grad_cos_is_the_cosine_of_the_final_gradients(run):
    x, labels, checkpoints = run
    train = representations(x[:N_TRAIN], labels[:N_TRAIN], checkpoints, gradients=True)
    test = representations(x[N_TRAIN:], labels[N_TRAIN:], checkpoints, gradients=True)
    g_train = train.final.loss_gradients
    g_test = test.final.loss_gradients
    expected = (g_test @ g_train.T) / np.outer(np.linalg.norm(g_test, axis=1),
                                               np.linalg.norm(g_train, axis=1))
    for gradients in ('last-layer', 'projected'):
        scores = METHODS['grad-cos'](gradients=gradients).fit(train).scores(test)
        np.testing.assert_allclose(scores, expected, rtol=1e-10)
    # A training row with a zero gradient (p = onehot(label)) has cosine 0.
    p = np.eye(N_CLASS)[labels[:2]]
    certain = Representations(labels[:2], Checkpoint(x[:2], p))
    scores = METHODS['grad-cos']().fit(certain).scores(test)
    np.testing.assert_array_equal(scores, 0)
