"""Per-example gradients of tiny nets.TextClassifier models: exact ones against the
batch gradient, projected ones against exact inner products (Johnson-Lindenstrauss),
and the projection's reproducibility."""
import types

import chainer
import chainer.functions as F
import numpy as np
import pytest

import nets
from deepknn.attribution.methods import METHODS
from deepknn.evaluation.calibration import softmax
from deepknn.attribution.gradients import (GaussianProjection, checkpoint_of,
                                           named_parameters, per_example_gradients,
                                           representations_of)
from nlp_utils import UserError

N_VOCAB, N_CLASS = 30, 3


def tiny_model(name='cnn', pair=False, seed=0):
    """A small model with dropout 0.3 (which the gradients must switch off)."""
    np.random.seed(seed)
    config = types.SimpleNamespace(model=name, unit=12, layer=2, dropout=0.3, embed_dim=6)
    model = nets.build_model(config, N_VOCAB, N_CLASS, pair)
    model.to_device('@numpy')
    return model


def inputs(n, pair=False, seed=1):
    rng = np.random.RandomState(seed)
    sentence = lambda: rng.randint(0, N_VOCAB, size=rng.randint(1, 8)).astype(np.int32)
    return [(sentence(), sentence()) if pair else sentence() for _ in range(n)]


def batch_gradient(model, xs, labels):
    """Gradient of the summed cross-entropy of a batch (dropout off): (D,) float64."""
    params = [p for _, p in named_parameters(model)]
    with chainer.using_config('train', False):
        loss = F.sum(F.softmax_cross_entropy(model.forward(xs), np.asarray(labels, np.int32),
                                             reduce='no'))
        grads = chainer.grad([loss], params)
    return np.concatenate([np.zeros(p.size) if g is None else g.array.ravel()
                           for p, g in zip(params, grads)])


@pytest.mark.parametrize('name,pair', [('cnn', False), ('bilstm', False), ('bow', True)])
def test_exact_per_example_gradients_add_up_to_the_batch_gradient(name, pair):
    model = tiny_model(name, pair)
    xs, labels = inputs(5, pair), [0, 2, 1, 1, 0]
    before = [None if p.grad is None else p.grad.copy() for _, p in named_parameters(model)]
    exact = per_example_gradients(model, xs, labels)
    assert exact.shape == (5, sum(p.size for _, p in named_parameters(model)))
    np.testing.assert_allclose(exact.sum(axis=0), batch_gradient(model, xs, labels),
                               rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(per_example_gradients(model, xs, labels), exact)
    for grad, (_, p) in zip(before, named_parameters(model)):              # left untouched
        np.testing.assert_array_equal(p.grad, grad)


def test_margin_gradient_is_the_loss_gradient_over_minus_one_minus_p():
    model = tiny_model()
    xs, labels = inputs(4), np.array([0, 1, 2, 0])
    loss = per_example_gradients(model, xs, labels)
    margin = per_example_gradients(model, xs, labels, output='margin')
    p = model.predict_proba(xs)[np.arange(4), labels].astype(np.float64)
    np.testing.assert_allclose(margin, -loss / (1 - p)[:, None], rtol=1e-4, atol=1e-6)


def test_projected_inner_products_approximate_the_exact_ones():
    model = tiny_model()
    xs, labels = inputs(6), [0, 1, 2, 0, 1, 2]
    exact = per_example_gradients(model, xs, labels)
    dim = 4096
    projected = per_example_gradients(model, xs, labels, GaussianProjection(dim, seed=3))
    truth, estimate = exact @ exact.T, projected @ projected.T
    norms = np.sum(exact ** 2, axis=1)
    # Var <R^T g, R^T h> / P = (|g|^2 |h|^2 + <g, h>^2) / P: within 6 standard deviations.
    spread = np.sqrt((np.outer(norms, norms) + truth ** 2) / dim)
    assert np.all(np.abs(estimate - truth) <= 6 * spread)
    assert np.corrcoef(truth.ravel(), estimate.ravel())[0, 1] > 0.95
    # The same projection applied to the exact gradients, R generated row by row.
    rows = np.concatenate([np.concatenate([projection_rows(name, p, dim, 3)])
                           for name, p in named_parameters(model)])
    np.testing.assert_allclose(projected, exact @ rows / np.sqrt(dim), rtol=1e-4, atol=1e-6)


def projection_rows(name, param, dim, seed):
    """R's rows for parameter `name`, in flattening order: (param.size, dim)."""
    shape0 = param.shape[0] if param.ndim else 1
    projection = GaussianProjection(dim, seed)
    return np.concatenate([projection.rows(name, r, param.size // shape0)
                           for r in range(shape0)]).astype(np.float64)


def test_the_same_seed_gives_the_same_projection_whatever_the_chunks():
    model = tiny_model()
    xs, labels = inputs(7), [0, 1, 2, 0, 1, 2, 0]
    first = per_example_gradients(model, xs, labels, GaussianProjection(64, seed=5), chunk=3)
    again = per_example_gradients(model, xs, labels, GaussianProjection(64, 5, cache_bytes=0),
                                  chunk=1)
    np.testing.assert_allclose(again, first, rtol=1e-5, atol=1e-8)
    alone = per_example_gradients(model, xs[4:5], labels[4:5], GaussianProjection(64, seed=5))
    np.testing.assert_allclose(alone[0], first[4], rtol=1e-5, atol=1e-8)
    other = per_example_gradients(model, xs, labels, GaussianProjection(64, seed=6), chunk=3)
    assert np.abs(other - first).max() > 0.1 * np.abs(first).max()
    with pytest.raises(UserError) as error:
        GaussianProjection(64, seed=2 ** 32)
    assert error.value.parameter == 'seed'


def test_a_model_gives_representations_and_checkpoints_the_methods_read():
    model = tiny_model()
    train_xs, test_xs = inputs(9, seed=2), inputs(3, seed=3)
    train_labels = np.arange(9) % N_CLASS
    projection = GaussianProjection(32, seed=0)
    train = representations_of(model, train_xs, train_labels, checkpoints=[
        checkpoint_of(model, train_xs, train_labels, 0.1, projection)])
    layers = model.layer_activations(test_xs)
    explained = softmax(layers[-1]).argmax(axis=1)
    test = representations_of(model, test_xs, checkpoints=[
        checkpoint_of(model, test_xs, explained, 0.1, projection)])
    np.testing.assert_array_equal(test.labels, explained)
    np.testing.assert_array_equal(test.final.features, layers[-2])
    assert train.checkpoints[0].loss_gradients.shape == (9, 32)
    assert train.checkpoints[0].margin_gradients.shape == (9, 32)
    # The projected TracIn estimates the last-layer one plus the other layers' terms;
    # on the last layer's own rows alone it is the closed form (checked in tracin tests).
    for name in ('tracin-projected', 'tracin-last', 'trak', 'grad-cos', 'representer'):
        assert METHODS[name]().fit(train).scores(test).shape == (3, 9)


def test_bad_gradient_arguments_name_their_parameter():
    model, xs = tiny_model(), inputs(2)
    for kwargs, parameter in [({'labels': [0, 3]}, 'labels'), ({'labels': [0]}, 'labels'),
                              ({'output': 'logit'}, 'output'), ({'chunk': 0}, 'chunk')]:
        with pytest.raises(UserError) as error:
            per_example_gradients(model, xs, **{'labels': [0, 1], **kwargs})
        assert error.value.parameter == parameter
