"""deepknn.models.ragged_lstm against Chainer's own L.NStepBiLSTM / L.NStepLSTM links."""
import types
import chainer
import chainer.functions as F
import chainer.links as L
import numpy as np
import pytest

import nets
import nlp_utils
from deepknn.models.ragged_lstm import ragged_lstm

LENGTHS = [3, 1, 6, 6, 2, 4, 1]   # ragged, with ties and one-token sequences
IN_SIZE, UNITS, LAYERS = 5, 7, 3


def random_link(bidirectional, dropout=0.0, seed=0):
    """An NStep(Bi)LSTM link with random weights and biases in [-1, 1]."""
    rng = np.random.RandomState(seed)
    link = (L.NStepBiLSTM if bidirectional else L.NStepLSTM)(LAYERS, IN_SIZE, UNITS, dropout)
    for param in link.params():
        param.array[...] = rng.uniform(-1, 1, param.shape)
    return link


def random_sequences(seed=1):
    rng = np.random.RandomState(seed)
    return [chainer.Variable(rng.randn(n, IN_SIZE).astype(np.float32)) for n in LENGTHS]


def link_final_states(link, xs):
    """The reference: the link's own forward pass, (layers * directions, B, N)."""
    final_states, _, _ = link(None, None, xs)
    return final_states


def ours_final_states(link, xs):
    return F.stack(ragged_lstm(link.ws, link.bs, xs, link.direction, link.dropout))


def gradients(link, xs, compute, weights):
    """Input and parameter gradients of sum(weights * final states)."""
    link.cleargrads()
    for x in xs:
        x.grad = None
    F.sum(compute(link, xs) * weights).backward()
    return [x.grad.copy() for x in xs], {name: p.grad.copy() for name, p in link.namedparams()}


@pytest.mark.parametrize('bidirectional', [True, False])
def test_ragged_lstm_equals_nstep_link(bidirectional):
    link, xs = random_link(bidirectional, dropout=0.3), random_sequences()
    with chainer.using_config('train', False):
        expected = link_final_states(link, xs)
        actual = ours_final_states(link, xs)
        assert actual.shape == (LAYERS * link.direction, len(LENGTHS), UNITS)
        np.testing.assert_allclose(actual.array, expected.array, rtol=0, atol=1e-5)

        weights = np.random.RandomState(2).randn(*expected.shape).astype(np.float32)
        input_grads, param_grads = gradients(link, xs, link_final_states, weights)
        our_input_grads, our_param_grads = gradients(link, xs, ours_final_states, weights)
    for ours, reference in zip(our_input_grads, input_grads):
        np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-5)
    assert sorted(our_param_grads) == sorted(param_grads)
    for name, reference in param_grads.items():
        assert np.abs(reference).max() > 0, name   # every parameter takes part
        np.testing.assert_allclose(our_param_grads[name], reference, rtol=0, atol=1e-5,
                                   err_msg=name)


@pytest.mark.parametrize('bidirectional', [True, False])
def test_dropout_only_between_layers_as_nstep_link(bidirectional):
    """With a dropout ratio of almost 1 every dropped input is zero: the first layer
    (whose input NStepLSTM leaves alone) must be unchanged, and the deeper layers must
    equal the link's, which then run on all-zero inputs too."""
    link, xs = random_link(bidirectional, dropout=1 - 1e-12), random_sequences()
    with chainer.using_config('train', False):
        no_dropout = ours_final_states(link, xs).array
    with chainer.using_config('train', True):
        expected = link_final_states(link, xs).array
        actual = ours_final_states(link, xs).array
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-5)
    first = link.direction   # cells of the first layer
    np.testing.assert_allclose(actual[:first], no_dropout[:first], rtol=0, atol=1e-6)
    assert not np.allclose(actual[first:], no_dropout[first:], atol=1e-3)


class LinkEncoder(chainer.Chain):
    """The BiLSTM encoder as it was before ragged_lstm: it calls the link."""

    def __init__(self, embed_dim, n_layers, n_units, dropout):
        super().__init__()
        self.n_layers, self.dropout, self.out_size = n_layers, dropout, 2 * n_units
        with self.init_scope():
            self.rnn = L.NStepBiLSTM(n_layers, embed_dim, n_units, dropout)

    def forward(self, embedded):
        embedded = [F.dropout(e, self.dropout) for e in embedded]
        final_states, _, _ = self.rnn(None, None, embedded)
        return [F.concat([final_states[2 * i], final_states[2 * i + 1]], axis=1)
                for i in range(self.n_layers)]


def test_model_saved_with_the_link_encoder_loads_unchanged(tmp_path):
    n_vocab, n_class, embed_dim, units = 20, 3, 6, 8
    np.random.seed(0)
    old = nets.TextClassifier(LinkEncoder(embed_dim, 2, units, 0.3), n_vocab, embed_dim,
                              units, n_class, 1, 0.3)
    chainer.serializers.save_npz(str(tmp_path / 'model.npz'), old)
    np.random.seed(1)   # different initial weights, so the load must overwrite them all
    new = nets.build_model(types.SimpleNamespace(model='bilstm', unit=units, layer=2, dropout=0.3,
                                embed_dim=embed_dim), n_vocab, n_class, pair=False)
    nlp_utils.load_npz_safely(str(tmp_path / 'model.npz'), new)
    rng = np.random.RandomState(3)
    xs = [rng.randint(0, n_vocab, size=n).astype(np.int32) for n in LENGTHS]
    for ours, reference in zip(new.layer_activations(xs), old.layer_activations(xs)):
        np.testing.assert_allclose(ours, reference, rtol=0, atol=1e-5)
