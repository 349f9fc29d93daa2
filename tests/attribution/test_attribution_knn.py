"""kNN attribution against brute force and the project's neighbour search; the DkNN
vote against counting by hand."""
import numpy as np
import pytest

from tests.attribution.attribution_cases import random_representations
from deepknn.attribution.methods import METHODS, Checkpoint, Representations
from deepknn.neighbors.knn_index import make_index


def with_layers(layers):
    """Representations holding `layers` (the last two also serve as features/logits)."""
    return Representations.from_layers([np.asarray(a, np.float32) for a in layers])


def test_knn_l2_equals_brute_force_and_the_dknn_neighbour_search():
    train, test = random_representations(40, seed=3), random_representations(6, seed=4)
    method = METHODS['knn'](layer=0).fit(train)
    method.block_rows = 7
    ids, scores = method.top(test, 10)
    x, q = train.layers[0].astype(np.float64), test.layers[0].astype(np.float64)
    brute = np.array([[np.linalg.norm(q[t] - x[i]) for i in range(40)] for t in range(6)])
    np.testing.assert_array_equal(ids, np.argsort(brute, axis=1, kind='stable')[:, :10])
    np.testing.assert_allclose(-scores, np.sort(brute, axis=1)[:, :10], rtol=1e-12)
    distances, index_ids = make_index('kdtree').build(train.layers[0]).search(test.layers[0], 10)
    np.testing.assert_array_equal(ids, index_ids)
    np.testing.assert_allclose(-scores, distances, rtol=1e-6)


def test_knn_ties_go_to_the_smaller_index_as_in_the_neighbour_search():
    a, b = [1.0, 2.0], [4.0, 0.0]
    train = with_layers([[b, a, b, a, a], [[0, 1]] * 5])
    test = with_layers([[a], [[0, 1]]])
    method = METHODS['knn'](layer=0).fit(train)
    ids, scores = method.top(test, 5)
    assert ids.tolist() == [[1, 3, 4, 0, 2]]
    np.testing.assert_allclose(scores, [[0, 0, 0, -np.sqrt(13), -np.sqrt(13)]])
    _, index_ids = make_index('kdtree').build(train.layers[0]).search(test.layers[0], 5)
    np.testing.assert_array_equal(ids, index_ids)


def test_knn_cosine_known_values_and_zero_vectors():
    train = with_layers([[[1, 0], [0, 2], [-3, 0], [0, 0], [1, 1]], [[0, 1]] * 5])
    test = with_layers([[[2, 0]], [[0, 1]]])
    scores = METHODS['knn'](layer=0, metric='cosine').fit(train).scores(test)
    np.testing.assert_allclose(scores, [[1, 0, -1, 0, np.sqrt(0.5)]], atol=1e-15)


def test_knn_defaults_to_the_penultimate_layer():
    train, test = random_representations(12, seed=5), random_representations(3, seed=6)
    default = METHODS['knn']().fit(train).scores(test)
    np.testing.assert_array_equal(default, METHODS['knn'](layer=1).fit(train).scores(test))


def brute_force_votes(train, test, k, layers):
    """(n_test, n_train): in how many of `layers` each training row is among the k
    nearest (by float64 distance, then index) of each test row."""
    votes = np.zeros((len(test), len(train)))
    for layer in layers:
        x = train.layers[layer].astype(np.float64)
        for t, q in enumerate(test.layers[layer].astype(np.float64)):
            distances = np.sqrt(((x - q) ** 2).sum(axis=1))
            votes[t, np.lexsort((np.arange(len(x)), distances))[:k]] += 1
    return votes


@pytest.mark.parametrize('layers', [None, [0, -1]])
def test_dknn_vote_counts_the_layers_a_row_is_a_neighbour_in(layers):
    train, test = random_representations(30, seed=7), random_representations(4, seed=8)
    method = METHODS['dknn-vote'](k=5, layers=layers).fit(train)
    method.block_rows = 8
    votes = method.scores(test)
    chosen = range(3) if layers is None else [0, 2]
    np.testing.assert_array_equal(votes, brute_force_votes(train, test, 5, chosen))
    assert np.all(votes.sum(axis=1) == 5 * len(chosen))
    indexed = METHODS['dknn-vote'](k=5, layers=layers, backend='kdtree').fit(train)
    np.testing.assert_array_equal(indexed.scores(test), votes)


def test_dknn_vote_default_k_is_the_dknn_k():
    assert METHODS['dknn-vote']().k == 75
    train = Representations.from_layers([np.eye(80, 3), np.ones((80, 2))])
    test = Representations.from_layers([np.zeros((1, 3)), np.ones((1, 2))])
    votes = METHODS['dknn-vote']().fit(train).scores(test)
    assert votes.sum() == 2 * 75 and set(np.unique(votes)) == {0.0, 1.0, 2.0}
    assert isinstance(train.final, Checkpoint)


def test_the_signed_vote_counts_a_neighbour_of_the_class_explained_plus_one_and_others_minus():
    train, test = random_representations(30, seed=7), random_representations(4, seed=8)
    votes = brute_force_votes(train, test, 5, range(3))
    signed = METHODS['dknn-vote'](k=5, signed=True).fit(train).scores(test)
    agree = train.labels[None, :] == test.labels[:, None]
    np.testing.assert_array_equal(signed, np.where(agree, votes, -votes))
    assert np.any(signed < 0) and np.any(signed > 0)


def test_the_votes_self_influence_counts_the_other_labels_among_a_rows_neighbours():
    # On a line: rows 0-3 at 0, 1, 2, 3 labelled 0, row 4 at 2.5 labelled 1 (a flipped
    # label amid class 0), rows 5-7 far away at 10, 11, 12 labelled 1.
    points = np.array([[0.0], [1.0], [2.0], [3.0], [2.5], [10.0], [11.0], [12.0]])
    layers = [points, np.zeros((8, 2))]
    labels = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    train = Representations.from_layers(layers, labels)
    influence = METHODS['dknn-vote'](k=2, layers=[0]).fit(train).self_influence()
    # neighbours (itself left out): 0 -> 1, 2; 1 -> 0, 2; 2 -> 4 (0.5), 1 or 3 (1.0: 1 by
    # index); 3 -> 4, 2; 4 -> 2, 3; 5 -> 6, 7; 6 -> 5, 7; 7 -> 6, 5
    assert influence.tolist() == [0, 0, 1, 1, 2, 0, 0, 0]
