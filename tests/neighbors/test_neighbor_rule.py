"""The neighbour rule (deepknn/neighbors/neighbor_rule.py): a training row's rank is its float64
distance, then its row index, whichever backend or thread count searched. Hand-made
activations plant exact ties (duplicated rows, as duplicate sentences and ReLU layers
give) and near-ties (rows 1e-6 apart, closer than a float32 search can order)."""
import numpy as np
import pytest

from deepknn.neighbors import knn_index
from deepknn.neighbors import neighbor_rule
from deepknn.neighbors.dknn import DkNN

K = 10


def tied_activations(seed=0, dim=24):
    """(training rows (360, dim) float32, labels (360,) over 3 classes, queries (50, dim)):
    300 rows copied from 40 distinct ReLU rows, 60 rows 1e-6 away from one of them."""
    rng = np.random.RandomState(seed)
    distinct = np.maximum(rng.normal(size=(40, dim)), 0).astype(np.float32) * 3
    copies = distinct[rng.randint(0, 40, 300)]
    near = distinct[rng.randint(0, 40, 60)] + rng.normal(0, 1e-6, (60, dim)).astype(np.float32)
    rows = np.concatenate([copies, near])[rng.permutation(360)]
    queries = distinct[rng.randint(0, 40, 50)] + rng.normal(0, 1e-3, (50, dim)).astype(np.float32)
    return rows, rng.randint(0, 3, 360), queries


def brute_force_rule(rows, queries, k):
    """The rule written out: float64 distances to every row, sorted by (distance, id)."""
    diff = queries[:, None, :].astype(np.float64) - rows[None].astype(np.float64)
    distances = np.sqrt(np.sum(diff * diff, axis=2))
    ids = np.broadcast_to(np.arange(len(rows)), distances.shape)
    order = np.lexsort((ids, distances), axis=1)[:, :k]
    return np.take_along_axis(distances, order, axis=1), order


EXACT = [('kdtree', {}), ('faiss', {'kind': 'flat', 'n_threads': 1}),
         ('faiss', {'kind': 'flat', 'n_threads': 2})]


@pytest.mark.parametrize('backend,options', EXACT)
def test_every_exact_backend_returns_the_rule_s_neighbours(backend, options):
    rows, _, queries = tied_activations()
    expected_distances, expected_ids = brute_force_rule(rows, queries, K)
    distances, ids = knn_index.make_index(backend, **options).build(rows).search(queries, K)
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_array_equal(distances, expected_distances.astype(np.float32))


@pytest.mark.parametrize('backend,options', [('faiss', {'kind': 'hnsw'}), ('lsh', {})])
def test_an_approximate_backend_s_candidates_are_ranked_by_the_rule(backend, options):
    rows, _, queries = tied_activations()
    distances, ids = knn_index.make_index(backend, **options).build(rows).search(queries, K)
    exact, _ = brute_force_rule(rows, queries, len(rows))
    for query, found in enumerate(ids):
        found = found[found >= 0]
        diff = rows[found].astype(np.float64) - queries[query].astype(np.float64)
        recomputed = np.sqrt(np.sum(diff * diff, axis=1))
        assert list(found) == sorted(found, key=lambda i: (recomputed[list(found).index(i)], i))
        assert recomputed[0] == exact[query, 0] or backend == 'lsh'


def test_the_fetch_grows_until_no_left_out_row_can_rank():
    rows, _, queries = tied_activations(seed=1)
    rows[np.arange(5, 360, 6)] = queries[0] + 0.5    # 60 copies, all tied for query 0
    expected = brute_force_rule(rows, queries, K)
    rng = np.random.RandomState(0)
    # A backend whose float32 distances are off by up to the bound the rule allows for:
    # its first candidates for query 0 are 26 of the 60 tied copies, not the ten with the
    # smallest ids; the rule asks for more until it holds all 60.
    fetched = []

    def noisy_exact_search(batch, m):
        fetched.append(m)
        diff = batch[:, None, :].astype(np.float64) - rows[None].astype(np.float64)
        squared = np.sum(diff * diff, axis=2)
        squared += rng.uniform(-1, 1, squared.shape) * 2.0 ** -24 * 28 * (
            np.linalg.norm(batch, axis=1)[:, None] + neighbor_rule.max_row_norm(rows)) ** 2
        order = np.argsort(squared, axis=1)[:, :m]
        return np.sqrt(np.maximum(np.take_along_axis(squared, order, axis=1), 0)), order
    found = neighbor_rule.ranked(noisy_exact_search, rows, queries, K, True, 2.0 ** -24,
                                    neighbor_rule.max_row_norm(rows))
    np.testing.assert_array_equal(found[1], expected[1])
    np.testing.assert_array_equal(found[0], expected[0])
    assert fetched[0] == K + 16 and max(fetched) > K + 16     # max(2k, k + 16) first


def dknn_outputs(backend, options, rows, labels, queries):
    dknn = DkNN(3, backend, K, index_options=options)
    dknn.fit([rows, rows[:, :8] * 2], labels).calibrate([queries[:25], queries[:25, :8] * 2],
                                                        labels[:25])
    return dknn.calibration_scores, dknn.predict_from_activations(
        [queries[25:], queries[25:, :8] * 2])


def test_dknn_outputs_are_the_same_bits_on_every_exact_backend_and_thread_count():
    rows, labels, queries = tied_activations(seed=2)
    scores, reference = dknn_outputs('kdtree', {}, rows, labels, queries)
    for backend, options in EXACT[1:]:
        other_scores, other = dknn_outputs(backend, options, rows, labels, queries)
        np.testing.assert_array_equal(other_scores, scores)
        for key in ('prediction', 'credibility', 'confidence', 'p_values', 'neighbors'):
            np.testing.assert_array_equal(other[key], reference[key], err_msg=key)
