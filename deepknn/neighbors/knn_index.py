"""Nearest-neighbour search over layer activations, behind one interface.

Every backend answers a whole batch of queries at once:

    index = make_index('faiss', kind='hnsw').build(vectors)   # vectors: (N, D) floats
    distances, indices = index.search(queries, k)              # queries: (M, D)
    # distances: (M, k) float32, Euclidean (not squared), each row increasing
    # indices:   (M, k) int64 rows of `vectors`; -1 (distance inf) pads a row
    #            when an approximate backend found fewer than k neighbours
    index.n_short_queries   # how many queries so far came back with padding

Backends: 'kdtree' (exact, sklearn KDTree), 'lsh' (nearpy random binary
projections + exact re-ranking, as in the original DkNN code) and 'faiss'
(kind='flat' exact, 'hnsw' or 'ivf' approximate).

The neighbour rule (deepknn/neighbors/neighbor_rule.py), the same for every backend, engine and thread
count: a training row's rank for a query is its Euclidean distance recomputed in float64
from the stored float32 activations, then its row index. A backend only proposes
candidates; an exact one proposes more until no row it left out could rank in the k.
"""
import inspect
import math
import os

import numpy as np

from deepknn.neighbors import neighbor_rule
from nlp_utils import UserError

BACKENDS = ('kdtree', 'lsh', 'faiss')
_CHECK_CHUNK = 1 << 22          # elements per chunk when scanning for NaN/inf


def _as_matrix(array, what):
    """(N, D) finite float32 C-contiguous view or copy of `array`; UserError otherwise.

    `what` names the array in messages ('activations', 'queries')."""
    array = np.asarray(array)
    if array.dtype == np.bool_ or not (np.issubdtype(array.dtype, np.integer)
                                       or np.issubdtype(array.dtype, np.floating)):
        raise UserError('{} must be a real number array, got dtype {}'.format(what, array.dtype))
    if array.ndim != 2:
        raise UserError('{} must be a 2-D (count, dims) array, got shape {}'.format(
            what, array.shape))
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise UserError('{} are empty (shape {})'.format(what, array.shape))
    array = np.ascontiguousarray(array, dtype=np.float32)
    flat = array.reshape(-1)
    for start in range(0, flat.size, _CHECK_CHUNK):   # chunked: no full-size bool temporary
        chunk = flat[start:start + _CHECK_CHUNK]
        if not np.isfinite(chunk).all():
            bad = 'NaN' if np.isnan(chunk).any() else 'inf'
            raise UserError('{} contain {} (row {})'.format(
                what, bad, (start + int(np.argmin(np.isfinite(chunk)))) // array.shape[1]))
    return array


class CorruptIndex(UserError):
    """A saved index that cannot be restored: rebuild it from the vectors."""


class NeighborIndex:
    """Base class: `build(vectors)` then `search(queries, k)`; see the module docstring.

    exact: `_search(queries, m)` returns the m nearest rows under the backend's own
    arithmetic, whose squared distances are off by at most `roundoff` * (D + 4) *
    (|q| + max |x|)^2 (a dot product's rounding bound); approximate backends may miss
    rows, and their candidates are only re-ranked."""
    exact = True
    roundoff = 2.0 ** -24          # float32 arithmetic

    def __init__(self):
        self.n = 0                 # number of indexed vectors
        self.dim = None            # their dimension
        self.n_short_queries = 0   # cumulative count of queries padded with -1/inf

    def build(self, vectors):
        """Index `vectors` (N, D); returns self. Rebuilding resets `n_short_queries`."""
        vectors = _as_matrix(vectors, 'activations')
        self.n, self.dim = vectors.shape
        self.n_short_queries = 0
        self._build(vectors)
        return self.hold(vectors)

    def hold(self, vectors):
        """Keep the indexed vectors (N, D), checked finite by the caller, as float32 (a
        reference where they are already) for the neighbour rule's exact distances;
        returns self."""
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.max_norm = neighbor_rule.max_row_norm(self.vectors)
        return self

    def search(self, queries, k):
        """k nearest indexed vectors of each row of `queries` (M, D).

        Returns (distances (M, k) float32 Euclidean, indices (M, k) int64), rows sorted
        by increasing distance; missing neighbours are index -1 with distance inf."""
        if self.dim is None:
            raise UserError('the neighbour index is empty: call build() before search()')
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise UserError('k must be a positive integer, got {!r}'.format(k))
        k = int(k)
        if k > self.n:
            raise UserError('k={} is larger than the number of indexed vectors N={}'.format(
                k, self.n))
        queries = _as_matrix(queries, 'queries')
        if queries.shape[1] != self.dim:
            raise UserError('queries have {} dims but the index holds {}-dim vectors'.format(
                queries.shape[1], self.dim))
        distances, indices = self._ranked(queries, k)
        missing = indices < 0
        distances = np.where(missing, np.inf, distances).astype(np.float32)
        self.n_short_queries += int(missing.any(axis=1).sum())
        return distances, indices.astype(np.int64)

    def _ranked(self, queries, k):
        """(distances, indices) of the k neighbours the neighbour rule gives, from this
        backend's candidates and the held vectors."""
        return neighbor_rule.ranked(self._search, self.vectors, queries, k, self.exact,
                                    self.roundoff, self.max_norm)

    def saved_state(self):
        """The built index as {name: array} for np.savez (no pickle), or None where the
        backend cannot be saved that way and is rebuilt from the vectors instead."""
        return None

    def restore(self, state, vectors):
        """Load what saved_state() returned for the index of `vectors`; returns self."""
        raise NotImplementedError

    def _build(self, vectors):
        raise NotImplementedError

    def _search(self, queries, k):
        raise NotImplementedError


class KDTreeIndex(NeighborIndex):
    """Exact search with sklearn's KDTree (holds a float64 copy: 8*N*D bytes).

    The whole batch goes to one `KDTree.query` call (single-threaded)."""
    roundoff = 2.0 ** -53          # float64 arithmetic

    def __init__(self, leaf_size=40):
        super().__init__()
        self.leaf_size = int(leaf_size)

    def _build(self, vectors):
        from sklearn.neighbors import KDTree
        self._tree = KDTree(vectors, leaf_size=self.leaf_size, metric='euclidean')

    def _search(self, queries, k):
        distances, indices = self._tree.query(queries, k=k, return_distance=True,
                                              sort_results=True)
        return distances, indices


class LSHIndex(NeighborIndex):
    """Approximate search: nearpy random binary projections, exact Euclidean re-ranking.

    Each of `n_tables` tables is a nearpy `RandomBinaryProjections` hash with `n_bits`
    hyperplanes (seeded from `seed`), held by a nearpy `Engine` whose storage keeps the
    row id as the data. A query's candidates are the union of its buckets; they are
    re-ranked by exact Euclidean distance against our one float32 copy of the vectors.

    - n_bits=None picks round(log2(N / bucket_size)), i.e. about `bucket_size` vectors
      per bucket on average.
    - candidates=None re-ranks every candidate; an int keeps only that many, those that
      collided with the query in the most tables (ties: lower id).
    - Vectors are centred on their mean before hashing (hyperplanes pass through the
      origin, and activations are often far from it); distances are unaffected.

    For speed and memory, vectors are hashed in batches with each hash's own normals
    (the same sign test as `RandomBinaryProjections.hash_vector`, same '0101' keys) and
    stored with `engine.storage.store_vector(hash_name, key, None, row_id)`, rather
    than through `Engine.store_vector`, which would keep a normalised copy of every
    vector. Queries are hashed the same way. Fewer than k candidates -> padded row.
    """
    exact = False

    def __init__(self, n_bits=None, n_tables=10, seed=0, candidates=None, bucket_size=64):
        super().__init__()
        if n_bits is not None and not 1 <= int(n_bits) <= 64:
            raise UserError('n_bits must be between 1 and 64, got {}'.format(n_bits))
        if int(n_tables) < 1:
            raise UserError('n_tables must be at least 1, got {}'.format(n_tables))
        if candidates is not None and int(candidates) < 1:
            raise UserError('candidates must be at least 1 or None, got {}'.format(candidates))
        self.n_bits = None if n_bits is None else int(n_bits)
        self.n_tables = int(n_tables)
        self.seed = int(seed)
        self.candidates = None if candidates is None else int(candidates)
        self.bucket_size = float(bucket_size)

    def _build(self, vectors):
        from nearpy import Engine
        from nearpy.filters import UniqueFilter
        from nearpy.hashes import RandomBinaryProjections
        from nearpy.storage import MemoryStorage
        bits = self.n_bits or int(min(24, max(1, round(math.log2(max(self.n / self.bucket_size, 2))))))
        self.bits_used = bits
        seeds = np.random.SeedSequence(self.seed).generate_state(self.n_tables)
        hashes = [RandomBinaryProjections('table{}'.format(t), bits, rand_seed=int(seeds[t]))
                  for t in range(self.n_tables)]
        self.engine = Engine(self.dim, lshashes=hashes, vector_filters=[],
                             fetch_vector_filters=[UniqueFilter()], storage=MemoryStorage())
        self._normals = np.stack([h.normals for h in hashes])      # (T, bits, D) float64
        self._vectors = vectors
        self._mean = vectors.mean(axis=0, dtype=np.float64)
        store = self.engine.storage.store_vector
        for start, keys in self._hash_batches(vectors):
            ids = range(start, start + len(keys[0]))
            for t, h in enumerate(hashes):
                for i, key in zip(ids, keys[t]):
                    store(h.hash_name, key, None, i)

    def _hash_batches(self, x, rows=8192):
        """Yield (first row, keys[t][row] as nearpy '0101' strings) for chunks of `x`."""
        n_bits = self._normals.shape[1]
        flat_normals = self._normals.reshape(-1, self.dim)
        for start in range(0, len(x), rows):
            proj = (x[start:start + rows] - self._mean) @ flat_normals.T
            chars = np.where(proj > 0.0, ord('1'), ord('0')).astype(np.uint8)
            chars = chars.reshape(len(proj), self.n_tables, n_bits).transpose(1, 0, 2)
            keys = np.ascontiguousarray(chars).view('S{}'.format(n_bits))[..., 0]
            yield start, [[key.decode() for key in table] for table in keys]

    def _search(self, queries, k):
        distances = np.full((len(queries), k), np.inf, dtype=np.float32)
        indices = np.full((len(queries), k), -1, dtype=np.int64)
        get_bucket = self.engine.storage.get_bucket
        names = [h.hash_name for h in self.engine.lshashes]
        for start, keys in self._hash_batches(queries, rows=1024):
            for row in range(len(keys[0])):
                q = start + row
                ids = np.fromiter((data for t, name in enumerate(names)
                                   for _, data in get_bucket(name, keys[t][row])), dtype=np.int64)
                ids, hits = np.unique(ids, return_counts=True)
                if self.candidates is not None and len(ids) > self.candidates:
                    ids = ids[np.argsort(-hits, kind='stable')[:self.candidates]]
                if len(ids) == 0:
                    continue
                diff = self._vectors[ids] - queries[q]
                dist = np.sqrt(np.einsum('ij,ij->i', diff, diff))
                top = np.lexsort((ids, dist))[:k]          # by distance, then by id
                distances[q, :len(top)] = dist[top]
                indices[q, :len(top)] = ids[top]
        return distances, indices


def _limit_faiss_threads(faiss, n_threads=None):
    """Cap faiss's OpenMP threads (a process-wide setting) at the CPUs this process may use."""
    available = len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count()
    wanted = min(int(n_threads or available), available or 1)
    if faiss.omp_get_max_threads() > wanted or n_threads:
        faiss.omp_set_num_threads(max(1, wanted))


class FaissIndex(NeighborIndex):
    """faiss search in float32: kind='flat' (exact IndexFlatL2), 'hnsw' (IndexHNSWFlat),
    'ivf' (IndexIVFFlat, k-means trained on the indexed vectors, seeded) or 'ivfpq'
    (IndexIVFPQ: the same lists holding product-quantised codes of `pq_m` bytes per
    vector instead of the vectors, for tens of millions of vectors per layer; distances
    are then approximate too). pq_m=None -> the largest divisor of the dimension up to 64.

    nlist=None -> about 4*sqrt(N) lists (fewer when N is small, so that each list gets
    at least 39 training points, faiss's own minimum); the k-means sample is at most
    `train_per_list` * nlist points. faiss's process-wide OpenMP thread count is capped
    at the CPUs available (or set to `n_threads`). HNSW graphs built with several
    threads can differ slightly from run to run.
    """
    KINDS = ('flat', 'hnsw', 'ivf', 'ivfpq')

    def __init__(self, kind='flat', hnsw_m=32, ef_construction=80, ef_search=128,
                 nlist=None, nprobe=16, seed=0, train_per_list=64, n_threads=None, pq_m=None):
        super().__init__()
        if kind not in self.KINDS:
            raise UserError('unknown faiss kind {!r}; choose from {}'.format(
                kind, ', '.join(self.KINDS)))
        self.kind, self.hnsw_m, self.ef_construction = kind, int(hnsw_m), int(ef_construction)
        self.ef_search, self.nlist, self.nprobe = int(ef_search), nlist, int(nprobe)
        self.seed, self.train_per_list, self.n_threads = int(seed), int(train_per_list), n_threads
        self.pq_m = pq_m

    @property
    def exact(self):
        return self.kind == 'flat'

    def _build(self, vectors):
        self._index = self.trained_empty(vectors, self.n)
        self._index.add(vectors)

    def trained_empty(self, sample, n_total):
        """An empty faiss index of this kind sized for `n_total` vectors, trained (IVF
        kinds) on `sample` (M, D) float32: the coarse quantizer and PQ codebook that
        shards of one layer share (deepknn/distributed/search.py)."""
        import faiss
        _limit_faiss_threads(faiss, self.n_threads)
        self.n, self.dim = int(n_total), int(sample.shape[1])
        if self.kind == 'flat':
            return faiss.IndexFlatL2(self.dim)
        if self.kind == 'hnsw':
            index = faiss.IndexHNSWFlat(self.dim, self.hnsw_m)
            index.hnsw.efConstruction = self.ef_construction
            return index
        self.nlist_used = self.list_count(self.n)
        self._quantizer = faiss.IndexFlatL2(self.dim)    # must outlive the IVF index
        if self.kind == 'ivf':
            index = faiss.IndexIVFFlat(self._quantizer, self.dim, self.nlist_used)
        else:
            index = faiss.IndexIVFPQ(self._quantizer, self.dim, self.nlist_used,
                                     self._pq_bytes(), self._pq_bits())
            index.pq.cp.seed = self.seed
        index.cp.seed = self.seed
        index.cp.max_points_per_centroid = self.train_per_list
        index.train(sample)
        return index

    def list_count(self, n_total):
        """Inverted lists for `n_total` vectors: nlist, or about 4*sqrt(N) (fewer when N
        is small, so that each list gets at least 39 training points)."""
        return int(self.nlist or max(1, min(int(round(4 * math.sqrt(n_total))), n_total // 39)))

    def _pq_bytes(self):
        """Sub-quantisers (one byte each): pq_m, which must divide the dimension."""
        if self.pq_m is None:
            return max(m for m in range(1, min(64, self.dim) + 1) if self.dim % m == 0)
        if self.dim % self.pq_m:
            raise UserError('pq_m {} must divide the dimension {}'.format(self.pq_m, self.dim),
                            'pq_m')
        return int(self.pq_m)

    def _pq_bits(self):
        """Bits per code: 8 (256 centroids per sub-quantiser) when there are enough
        vectors to train them, fewer for small indexes."""
        return int(max(1, min(8, math.floor(math.log2(max(2, self.n // 39))))))

    def saved_state(self):
        import faiss
        return {'faiss_index': faiss.serialize_index(self._index)}

    def restore(self, state, vectors):
        import faiss
        _limit_faiss_threads(faiss, self.n_threads)
        try:
            self._index = faiss.deserialize_index(np.asarray(state['faiss_index']))
        except RuntimeError as problem:    # faiss's own check of the bytes
            raise CorruptIndex('a saved faiss index is corrupt ({})'.format(
                str(problem).rsplit(': ', 1)[-1]))
        if (self._index.ntotal, self._index.d) != vectors.shape:
            raise CorruptIndex('a saved faiss index holds {} vectors of {} dims, its '
                               'activations {} of {}'.format(self._index.ntotal, self._index.d,
                                                             *vectors.shape))
        self.n, self.dim, self.n_short_queries = self._index.ntotal, self._index.d, 0
        if self.kind in ('ivf', 'ivfpq'):
            self.nlist_used = self._index.nlist
        return self.hold(vectors)

    def _search(self, queries, k):
        if self.kind == 'hnsw':
            self._index.hnsw.efSearch = max(self.ef_search, k)
        elif self.kind in ('ivf', 'ivfpq'):
            self._index.nprobe = min(self.nprobe, self.nlist_used)
        squared, indices = self._index.search(queries, k)
        return np.sqrt(np.maximum(squared, 0.0)), indices


_CLASSES = {'kdtree': KDTreeIndex, 'lsh': LSHIndex, 'faiss': FaissIndex}


def make_index(backend, **options):
    """A new, unbuilt NeighborIndex for `backend` (one of BACKENDS) with its options."""
    if backend not in _CLASSES:
        raise UserError('unknown nearest-neighbour backend {!r}; choose from {}'.format(
            backend, ', '.join(BACKENDS)))
    cls = _CLASSES[backend]
    allowed = list(inspect.signature(cls.__init__).parameters)[1:]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise UserError('unknown option(s) {} for backend {!r}; it takes {}'.format(
            ', '.join(unknown), backend, ', '.join(allowed)))
    return cls(**options)


def index_state_arrays(indexes):
    """{index_<layer>_<field>: array} of the indexes' saved states, or None when a
    backend cannot save its index without pickle (KD-tree, LSH)."""
    states = [index.saved_state() for index in indexes]
    if any(state is None for state in states):
        return None
    return {'index_{}_{}'.format(i, field): value
            for i, state in enumerate(states) for field, value in state.items()}


def index_states_from(arrays):
    """Per-index saved states from arrays named index_<layer>_<field> (a dict or an open
    npz) -> list of dicts."""
    states = {}
    for name in arrays:
        if name.startswith('index_'):
            _, layer, field = name.split('_', 2)
            states.setdefault(int(layer), {})[field] = arrays[name]
    return [states[layer] for layer in sorted(states)]
