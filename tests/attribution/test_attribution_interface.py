"""The shared interface of the attribution methods: registry, streaming top, errors,
and the random floor's reproducibility."""
import numpy as np
import pytest

from tests.attribution.attribution_cases import random_representations
from deepknn.attribution.methods import METHODS, Checkpoint, Representations
from nlp_utils import UserError

N_TRAIN, N_TEST = 17, 5

# Each method with options that fit the small random arrays.
OPTIONS = {'dknn-vote': {'k': 4}, 'representer': {'lam': 0.01}, 'trak': {'ridge': 1e-3},
           'grad-cos': {'gradients': 'projected'}}


@pytest.fixture(scope='module')
def train():
    return random_representations(N_TRAIN, seed=1)


@pytest.fixture(scope='module')
def test():
    return random_representations(N_TEST, seed=2)


def make(name, **extra):
    return METHODS[name](**{**OPTIONS.get(name, {}), **extra})


def test_every_method_is_registered_with_a_one_line_description():
    assert list(METHODS) == ['knn', 'dknn-vote', 'random', 'representer', 'tracin-last',
                             'tracin-projected', 'grad-cos', 'trak']
    assert METHODS.kind == 'attribution method'
    assert all('\n' not in cls.description for cls in METHODS.values())


@pytest.mark.parametrize('name', list(METHODS))
def test_top_streams_to_the_brute_force_ranking(name, train, test):
    whole = make(name).fit(train)
    scores = whole.scores(test)
    assert scores.shape == (N_TEST, N_TRAIN) and scores.dtype == np.float64
    streamed = make(name).fit(train)
    streamed.block_rows = 3                       # six blocks, the last one short
    np.testing.assert_allclose(streamed.scores(test), scores, rtol=1e-12, atol=1e-12)
    ids, values = streamed.top(test, 6)
    for t in range(N_TEST):
        expected = sorted(range(N_TRAIN), key=lambda i: (-scores[t, i], i))[:6]
        assert ids[t].tolist() == expected
        np.testing.assert_allclose(values[t], scores[t, expected], rtol=1e-12, atol=1e-12)


def test_top_breaks_ties_by_the_smaller_training_index(train, test):
    method = make('dknn-vote', k=1, layers=[0])    # one neighbour: most rows tie at 0
    method.fit(train).block_rows = 4
    ids, values = method.top(test, 5)
    for t in range(N_TEST):
        winner = int(ids[t, 0])
        assert values[t, 0] == 1 and np.all(values[t, 1:] == 0)
        assert ids[t, 1:].tolist() == [i for i in range(N_TRAIN) if i != winner][:4]


def test_random_is_reproducible_by_seed_and_blocks(train, test):
    first = make('random', seed=7).fit(train).scores(test)
    again = make('random', seed=7).fit(train)
    again.block_rows = 5
    np.testing.assert_array_equal(again.scores(test), first)
    assert np.all((first >= 0) & (first < 1))
    assert not np.allclose(make('random', seed=8).fit(train).scores(test), first)
    np.testing.assert_array_equal(make('random', seed=7).fit(train).self_influence(),
                                  make('random', seed=7).fit(train).self_influence())


def test_self_influence_is_defined_where_documented(train):
    for name in ('random', 'representer', 'tracin-last', 'tracin-projected', 'trak'):
        assert make(name).fit(train).self_influence().shape == (N_TRAIN,)
    with pytest.raises(UserError, match='defines no self-influence'):
        make('knn').fit(train).self_influence()


def test_bad_arguments_name_their_parameter(train, test):
    cases = [(lambda: METHODS['knn'](metric='manhattan'), 'metric'),
             (lambda: METHODS['knn'](layer=9).fit(train), 'layer'),
             (lambda: METHODS['dknn-vote'](k=N_TRAIN + 1).fit(train), 'k'),
             (lambda: METHODS['random'](seed=-1), 'seed'),
             (lambda: METHODS['trak'](average='median'), 'average'),
             (lambda: METHODS['grad-cos'](gradients='all'), 'gradients'),
             (lambda: make('knn').fit(train).top(test, N_TRAIN + 1), 'm'),
             (lambda: Checkpoint(np.ones((3, 2)), np.ones((2, 3))), 'probabilities'),
             (lambda: Checkpoint(np.ones((3, 2)), np.ones((3, 3)), learning_rate=0),
              'learning_rate'),
             (lambda: Representations([0, 1, 5], Checkpoint(np.ones((3, 2)),
                                                            np.ones((3, 3)) / 3)), 'labels')]
    for make_error, parameter in cases:
        with pytest.raises(UserError) as error:
            make_error()
        assert error.value.parameter == parameter
        assert '`{}`'.format(parameter) in str(error.value)
    bare = Representations([0, 1], Checkpoint(np.ones((2, 2)), np.ones((2, 3)) / 3))
    with pytest.raises(UserError) as error:
        make('tracin-last').fit(bare)
    assert error.value.parameter == 'train' and 'no checkpoints' in str(error.value)
    with pytest.raises(UserError, match='not fitted'):
        make('knn').scores(test)


def test_representations_from_layers_explain_the_prediction_by_default():
    logits = np.array([[0.0, 2.0, 1.0], [3.0, 0.0, 0.0]], np.float32)
    features = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    test = Representations.from_layers([features, logits])
    assert test.labels.tolist() == [1, 0]
    np.testing.assert_array_equal(test.final.features, features)
    np.testing.assert_allclose(test.final.probabilities.sum(axis=1), 1)
    np.testing.assert_allclose(test.final.probabilities[1], np.exp([3, 0, 0]) / (np.e ** 3 + 2))
