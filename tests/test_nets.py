import types

import chainer
import numpy as np
import pytest

import nets

N_VOCAB, N_CLASS = 30, 3


def make_model(name, pair=False, unit=12, layer=2, seed=0):
    np.random.seed(seed)
    config = types.SimpleNamespace(model=name, unit=unit, layer=layer, dropout=0.3, embed_dim=6)
    model = nets.build_model(config, N_VOCAB, N_CLASS, pair)
    model.to_device('@numpy')
    return model


def random_inputs(n, pair, seed=1):
    rng = np.random.RandomState(seed)
    sentence = lambda: rng.randint(0, N_VOCAB, size=rng.randint(1, 10)).astype(np.int32)
    return [(sentence(), sentence()) if pair else sentence() for _ in range(n)]


EXPECTED_SHAPES = {
    # unit=12, layer=2, embed_dim=6: CNN filters 4 per width -> 12 pooled features.
    ('cnn', False): [12, 12, 12, N_CLASS],
    ('bilstm', False): [24, 24, 12, N_CLASS],
    ('rnn', False): [12, 12, 12, N_CLASS],
    ('bow', False): [6, 12, N_CLASS],
    ('cnn', True): [12, N_CLASS],
    ('bilstm', True): [12, N_CLASS],
}


@pytest.mark.parametrize('name,pair', sorted(EXPECTED_SHAPES))
def test_layer_activation_shapes_and_batch_invariance(name, pair):
    model = make_model(name, pair)
    inputs = random_inputs(7, pair)
    layers = model.layer_activations(inputs, batchsize=3)
    assert [a.shape for a in layers] == [(7, d) for d in EXPECTED_SHAPES[name, pair]]
    assert all(a.dtype == np.float32 for a in layers)
    # Each example alone gives what it gave inside a batch of longer/shorter sentences.
    alone = np.concatenate([model.layer_activations([x])[0] for x in inputs])
    np.testing.assert_allclose(alone, layers[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.predict_logits(inputs), layers[-1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.predict_proba(inputs).sum(axis=1), 1, rtol=1e-6)


def test_inference_has_no_dropout():
    model = make_model('cnn')
    inputs = random_inputs(5, False)
    np.testing.assert_array_equal(model.predict_logits(inputs), model.predict_logits(inputs))


def loss_at(model, x, label, embedding_override):
    """Cross-entropy of one input whose embedded tokens are replaced by `embedding_override`."""
    with chainer.using_config('train', False), chainer.no_backprop_mode():
        logits = model.layers_from_embedded([chainer.Variable(embedding_override)])[-1]
        return float(chainer.functions.softmax_cross_entropy(
            logits, np.array([label], np.int32)).array)


@pytest.mark.parametrize('name', ['cnn', 'bilstm', 'bow'])
def test_input_gradient_matches_finite_difference(name):
    """(dL/de_t).e_t is the derivative of L(e with e_t scaled by (1 + a)) at a = 0."""
    model = make_model(name)
    model.embed.W.array = model.embed.W.array.astype(np.float64)
    for link in model.links():
        for param in link.params(include_uninit=False):
            param.array = param.array.astype(np.float64)
    x = random_inputs(1, False, seed=4)[0]
    label = 2
    gradient = model.input_gradients([x], [label])[0]
    embedded = model.embed.W.array[x].copy()
    eps = 1e-6
    for t in range(len(x)):
        plus, minus = embedded.copy(), embedded.copy()
        plus[t] *= 1 + eps
        minus[t] *= 1 - eps
        estimate = (loss_at(model, x, label, plus) - loss_at(model, x, label, minus)) / (2 * eps)
        assert gradient[t] == pytest.approx(estimate, rel=1e-4, abs=1e-8)
    assert gradient.shape == (len(x),)


def test_pair_gradients_cover_the_hypothesis():
    model = make_model('cnn', pair=True)
    inputs = random_inputs(4, True)
    gradients = model.input_gradients(inputs, [0, 1, 2, 0], batchsize=3)
    assert [g.shape for g in gradients] == [(len(h),) for _, h in inputs]


def test_bilstm_backward_direction_reads_right_to_left():
    """With the backward LSTM given the forward one's weights, its final state on x
    must equal the forward final state on reversed x (running both LSTMs forward,
    as the original code did, would give the forward state on x instead)."""
    model = make_model('bilstm', layer=1)
    forward, backward = model.encoder.rnn[0], model.encoder.rnn[1]
    for name, param in forward.namedparams():
        dict(backward.namedparams())[name].array[...] = param.array
    x = random_inputs(1, False, seed=3)[0]
    with chainer.using_config('train', False):
        state = model.encoder(model.embed_sequences([x]))[0].array[0]
        state_reversed = model.encoder(model.embed_sequences([x[::-1].copy()]))[0].array[0]
    units = state.shape[0] // 2
    np.testing.assert_allclose(state[units:], state_reversed[:units], rtol=1e-5)
    assert not np.allclose(state[units:], state[:units])


def test_unknown_model_name():
    with pytest.raises(ValueError, match='unknown model'):
        nets.build_model(types.SimpleNamespace(model='gru', unit=4, layer=1, dropout=0, embed_dim=2), 5, 2, False)
