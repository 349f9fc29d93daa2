"""knn_index: every backend against hand-made and brute-force neighbours."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))

from deepknn.neighbors import knn_index  # noqa: E402
from deepknn.neighbors.knn_index import BACKENDS, FaissIndex, KDTreeIndex, NeighborIndex, make_index  # noqa: E402
from nlp_utils import UserError  # noqa: E402

# backends (with options) that must be exact on tiny data; ivf on < 39 points has one list
EXACT_ON_TINY = [('kdtree', {}), ('faiss', {'kind': 'flat'}), ('faiss', {'kind': 'hnsw'}),
                 ('faiss', {'kind': 'ivf'}), ('lsh', {'n_bits': 1, 'n_tables': 40})]
ALL = [('kdtree', {}), ('lsh', {}), ('faiss', {'kind': 'flat'}),
       ('faiss', {'kind': 'hnsw'}), ('faiss', {'kind': 'ivf'})]


def clustered(n, dim, seed, n_clusters=20, latent=8):
    """Gaussian mixture in a `latent`-dim subspace plus small noise: activation-like."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 3, (n_clusters, latent))
    z = centres[rng.integers(n_clusters, size=n)] + rng.normal(0, 1, (n, latent))
    mix = rng.normal(0, 1, (latent, dim)) / np.sqrt(latent)
    return (z @ mix + rng.normal(0, 0.1, (n, dim))).astype(np.float32)


def brute_force(x, q, k):
    d = np.linalg.norm(q[:, None, :].astype(np.float64) - x[None, :, :], axis=2)
    order = np.argsort(d, axis=1, kind='stable')[:, :k]
    return np.take_along_axis(d, order, axis=1), order


def recall(found, exact):
    return np.mean([len(set(f[f >= 0]) & set(e)) / len(e) for f, e in zip(found, exact)])


def label(param):
    backend, options = param
    return backend + ''.join('-{}{}'.format(k, v) for k, v in options.items())


@pytest.fixture(scope='module')
def data():
    x = clustered(3000, 32, seed=1)
    q = clustered(60, 32, seed=2)
    return x, q, brute_force(x, q, 10)


# ------------------------------------------------------------------ hand-made points
@pytest.mark.parametrize('param', EXACT_ON_TINY, ids=label)
def test_points_on_a_line(param):
    backend, options = param
    x = np.array([[i, 0.0] for i in range(10)])            # 0, 1, ..., 9 on the x axis
    index = make_index(backend, **options)
    assert index.build(x) is index
    d, i = index.search(np.array([[0.2, 0.0], [8.6, 1.0]]), 3)
    assert d.dtype == np.float32 and d.shape == (2, 3)
    assert i.dtype == np.int64 and i.shape == (2, 3)
    assert i.tolist() == [[0, 1, 2], [9, 8, 7]]
    np.testing.assert_allclose(d[0], [0.2, 0.8, 1.8], rtol=1e-6)
    np.testing.assert_allclose(d[1], np.sqrt([0.16 + 1, 0.36 + 1, 2.56 + 1]), rtol=1e-6)
    assert index.n_short_queries == 0


@pytest.mark.parametrize('backend', BACKENDS)
def test_distances_are_euclidean_not_squared(backend):
    x = np.array([[0.0, 0.0], [3.0, 4.0], [-6.0, 8.0]])   # |.| = 0, 5, 10
    index = make_index(backend, **({'n_bits': 1, 'n_tables': 30} if backend == 'lsh' else {}))
    d, i = index.build(x).search(np.zeros((1, 2)), 3)
    assert i.tolist() == [[0, 1, 2]]
    np.testing.assert_allclose(d, [[0.0, 5.0, 10.0]], rtol=1e-6)


# ------------------------------------------------------------------ exact backends agree
def test_kdtree_and_faiss_flat_agree_with_numpy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2000, 24)).astype(np.float32)    # continuous: no ties
    q = rng.normal(size=(50, 24)).astype(np.float32)
    d_kd, i_kd = make_index('kdtree').build(x).search(q, 15)
    d_ff, i_ff = make_index('faiss', kind='flat').build(x).search(q, 15)
    d_np, i_np = brute_force(x, q, 15)
    np.testing.assert_array_equal(i_kd, i_np)
    np.testing.assert_array_equal(i_ff, i_np)
    np.testing.assert_allclose(d_kd, d_np, rtol=1e-4)
    np.testing.assert_allclose(d_ff, d_kd, rtol=1e-4)


@pytest.mark.parametrize('param', ALL, ids=label)
def test_rows_sorted_and_distances_match_indices(param, data):
    x, q, _ = data
    d, i = make_index(param[0], **param[1]).build(x).search(q, 10)
    valid = i >= 0
    assert ((i < len(x)) & (i >= -1)).all()
    assert (np.diff(d, axis=1) >= 0).all()                 # inf padding sorts last too
    true = np.linalg.norm(x[np.where(valid, i, 0)] - q[:, None, :], axis=2)
    np.testing.assert_allclose(d[valid], true[valid], rtol=1e-4, atol=1e-5)
    assert np.isinf(d[~valid]).all()


def test_float64_and_integer_inputs_are_accepted():
    x = np.arange(20, dtype=np.int64).reshape(10, 2)
    d, i = make_index('faiss').build(x).search(np.array([[0.0, 1.0]]), 2)
    assert i.tolist() == [[0, 1]]
    np.testing.assert_allclose(d, [[0.0, np.sqrt(8)]], rtol=1e-6)


# ------------------------------------------------------------------ approximate faiss
@pytest.mark.parametrize('kind', ['hnsw', 'ivf'])
def test_faiss_approximate_recall(kind, data):
    x, q, (_, exact) = data
    index = make_index('faiss', kind=kind).build(x)
    _, found = index.search(q, 10)
    assert recall(found, exact) >= 0.9
    assert index.n_short_queries == 0


def test_faiss_missing_results_become_inf_and_are_counted():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.normal(0, 1, (100, 4)), rng.normal(50, 1, (100, 4))])
    index = make_index('faiss', kind='ivf', nlist=2, nprobe=1).build(x)
    d, i = index.search(x[[0, 150]], 150)              # one list holds only ~100 points
    assert (i[:, :100] >= 0).all() and (i[:, -1] == -1).all()
    assert np.isinf(d[i == -1]).all() and np.isfinite(d[i >= 0]).all()
    assert index.n_short_queries == 2
    index.search(x[:3], 5)
    assert index.n_short_queries == 2
    index.search(x[:3], 120)
    assert index.n_short_queries == 5


# ------------------------------------------------------------------ LSH
def test_lsh_pads_and_counts_short_queries(data):
    x, q, _ = data
    index = make_index('lsh', n_bits=14, n_tables=2).build(x[:500])   # mostly tiny buckets
    d, i = index.search(q, 20)
    n_real = (i >= 0).sum(axis=1)
    assert (n_real < 20).any()
    for row in range(len(q)):                              # real ones first, then padding
        assert (i[row, :n_real[row]] >= 0).all() and (i[row, n_real[row]:] == -1).all()
        assert np.isinf(d[row, n_real[row]:]).all() and np.isfinite(d[row, :n_real[row]]).all()
    short = int((n_real < 20).sum())
    assert index.n_short_queries == short
    index.search(q, 20)
    assert index.n_short_queries == 2 * short


def test_lsh_returns_exact_top_k_of_nearpy_candidates(data):
    """Candidates = union of nearpy's own buckets for the query (hash_vector), re-ranked exactly."""
    x, q, _ = data
    index = make_index('lsh', n_bits=8, n_tables=3, seed=5).build(x)
    d, i = index.search(q, 10)
    engine = index.engine
    for row in range(len(q)):
        centred = q[row].astype(np.float64) - index._mean
        cand = sorted({data for h in engine.lshashes
                       for _, data in engine.storage.get_bucket(h.hash_name,
                                                                h.hash_vector(centred)[0])})
        cand = np.array(cand, dtype=np.int64)
        true = np.linalg.norm(x[cand] - q[row], axis=1)
        expected = cand[np.argsort(true, kind='stable')[:10]]
        got = i[row][i[row] >= 0]
        assert got.tolist() == expected.tolist()


def test_lsh_is_seeded(data):
    x, q, _ = data
    a = make_index('lsh', n_bits=10, n_tables=2, seed=7).build(x).search(q, 10)[1]
    b = make_index('lsh', n_bits=10, n_tables=2, seed=7).build(x).search(q, 10)[1]
    c = make_index('lsh', n_bits=10, n_tables=2, seed=8).build(x).search(q, 10)[1]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_lsh_generous_settings_recover_exact_neighbours(data):
    x, q, (_, exact) = data
    index = make_index('lsh', n_bits=4, n_tables=40).build(x)
    _, found = index.search(q, 10)
    assert recall(found, exact) >= 0.95                    # 0.995 when written
    assert index.n_short_queries == 0


def test_lsh_candidate_cap(data):
    x, q, _ = data
    index = make_index('lsh', n_bits=2, n_tables=4, candidates=5).build(x)
    d, i = index.search(q, 8)
    assert ((i >= 0).sum(axis=1) == 5).all()
    assert index.n_short_queries == len(q)


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize('backend', BACKENDS)
def test_k_larger_than_n(backend):
    index = make_index(backend).build(np.eye(10))
    with pytest.raises(UserError, match=r'k=11.*N=10'):
        index.search(np.eye(10)[:2], 11)
    with pytest.raises(UserError, match='positive integer'):
        index.search(np.eye(10)[:2], 0)


@pytest.mark.parametrize('backend', BACKENDS)
def test_nan_inf_and_shape_errors(backend):
    x = np.eye(6)
    bad = x.copy()
    bad[3, 2] = np.nan
    with pytest.raises(UserError, match='activations contain NaN'):
        make_index(backend).build(bad)
    index = make_index(backend).build(x)
    q = x[:2].copy()
    q[1, 0] = np.inf
    with pytest.raises(UserError, match='queries contain inf'):
        index.search(q, 2)
    with pytest.raises(UserError, match='5 dims.*6-dim'):
        index.search(np.zeros((1, 5)), 2)
    with pytest.raises(UserError, match='empty'):
        make_index(backend).build(np.zeros((0, 6)))
    with pytest.raises(UserError, match='2-D'):
        index.search(np.zeros(6), 2)
    with pytest.raises(UserError, match='build'):
        make_index(backend).search(x, 2)


def test_unknown_backend_option_and_kind():
    with pytest.raises(UserError, match='kdtree, lsh, faiss'):
        make_index('annoy')
    with pytest.raises(UserError, match='n_bitz'):
        make_index('lsh', n_bitz=3)
    with pytest.raises(UserError, match='flat, hnsw, ivf'):
        make_index('faiss', kind='pq')
    assert isinstance(make_index('kdtree', leaf_size=5), NeighborIndex)
    assert knn_index.BACKENDS == ('kdtree', 'lsh', 'faiss')


@pytest.mark.parametrize('kind', ['flat', 'ivf', 'hnsw'])
def test_faiss_index_survives_a_save_without_pickle(tmp_path, kind):
    rng = np.random.RandomState(0)
    vectors = rng.normal(size=(400, 6)).astype(np.float32)
    queries = rng.normal(size=(20, 6)).astype(np.float32)
    built = FaissIndex(kind=kind).build(vectors)
    np.savez(str(tmp_path / 'index.npz'), **built.saved_state())
    with np.load(str(tmp_path / 'index.npz'), allow_pickle=False) as saved:
        restored = FaissIndex(kind=kind).restore(dict(saved), vectors)
    assert (restored.n, restored.dim) == (400, 6)
    for a, b in zip(built.search(queries, 7), restored.search(queries, 7)):
        np.testing.assert_array_equal(a, b)
    assert KDTreeIndex().build(vectors).saved_state() is None


def test_ivfpq_compresses_and_still_finds_the_cluster_neighbours(tmp_path):
    rng = np.random.RandomState(0)
    centers = rng.normal(0, 10, (8, 32)).astype(np.float32)
    labels = rng.randint(0, 8, 4000)
    vectors = centers[labels] + rng.normal(0, 0.5, (4000, 32)).astype(np.float32)
    index = knn_index.make_index('faiss', kind='ivfpq', nprobe=8).build(vectors)
    assert index._index.pq.M == 32 and index._index.pq.nbits == 6   # 4000 // 39 -> 6 bits
    queries = centers + rng.normal(0, 0.5, (8, 32)).astype(np.float32)
    _, found = index.search(queries, 10)
    assert (labels[found] == np.arange(8)[:, None]).mean() > 0.95
    restored = knn_index.make_index('faiss', kind='ivfpq', nprobe=8).restore(
        index.saved_state(), vectors)
    np.testing.assert_array_equal(restored.search(queries, 10)[1], found)
    with pytest.raises(UserError, match='^pq_m 5 must divide the dimension 32$'):
        knn_index.make_index('faiss', kind='ivfpq', pq_m=5).build(vectors)
