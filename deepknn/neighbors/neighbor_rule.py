"""The neighbour rule, the same for every backend, engine and thread count: a training
row's rank for a query is its Euclidean distance recomputed in float64 from the stored
float32 activations, then its row index. A backend (knn_index.py, a Ray shard) only
proposes candidates; `ranked` re-ranks them, and asks an exact backend for more until no
row it left out could rank among the k.
"""
import numpy as np

# A first fetch of 2k candidates (at least k + 16) leaves room for the rows a float32
# search ranks in the wrong order near the k-th; the rule doubles it where that is not
# enough (ranked). Query chunks keep the float64 re-ranking under 32 MB.
_FETCH_EXTRA = 16
_RERANK_ELEMENTS = 1 << 22


def max_row_norm(vectors):
    """The largest Euclidean norm of a row of `vectors` (N, D), in float64."""
    return float(np.sqrt(max(np.einsum('ij,ij->i', chunk, chunk, dtype=np.float64).max()
                             for chunk in np.array_split(vectors, max(1, len(vectors) // 65536)))))


def ranked(candidates, vectors, queries, k, exact, roundoff, max_norm):
    """The k neighbours of each query under the neighbour rule (module docstring).

    candidates(queries (M, D), m) -> (backend distances (M, m), row ids (M, m), -1 for
    none): a backend's search. vectors: the indexed float32 rows (N, D). exact: the
    backend's m candidates are its m nearest, with squared distances off by at most
    roundoff * (D + 4) * (|q| + max_norm)^2. Then a row left out is provably farther than
    the k-th re-ranked candidate once the m-th backend distance, less that bound,
    exceeds it; a query where this fails asks for twice as many candidates (at most N,
    which is trivially complete). -> (distances float64 (M, k), ids int64 (M, k)),
    nearest first, ties by the smaller id; -1 / inf where fewer than k were proposed."""
    n, dim = vectors.shape
    fetch = min(n, max(2 * k, k + _FETCH_EXTRA))
    slack = 2 * roundoff * (dim + 4) * (np.linalg.norm(queries.astype(np.float64), axis=1)
                                        + max_norm) ** 2
    distances = np.full((len(queries), k), np.inf)
    ids = np.full((len(queries), k), -1, dtype=np.int64)
    todo = np.arange(len(queries))
    while len(todo):
        proposed, proposed_ids = candidates(queries[todo], fetch)
        top, top_ids = _exact_top_k(vectors, queries[todo], np.asarray(proposed_ids), k)
        settled = np.ones(len(todo), bool)
        if exact and fetch < n:
            edge = np.asarray(proposed, np.float64)[:, -1] ** 2 - slack[todo]
            settled = edge > top[:, -1] ** 2
        distances[todo[settled]], ids[todo[settled]] = top[settled], top_ids[settled]
        todo, fetch = todo[~settled], min(n, 2 * fetch)
    return distances, ids


def _exact_top_k(vectors, queries, candidate_ids, k):
    """Candidates (M, m) re-ranked by float64 distance, then id -> their first k."""
    m = candidate_ids.shape[1]
    distances = np.full(candidate_ids.shape, np.inf)
    chunk = max(1, _RERANK_ELEMENTS // max(1, m * vectors.shape[1]))
    for start in range(0, len(queries), chunk):
        rows = candidate_ids[start:start + chunk]
        diff = (vectors[np.maximum(rows, 0)].astype(np.float64)
                - queries[start:start + chunk, None, :].astype(np.float64))
        # numpy's pairwise sum along a row: the same order on every machine.
        distances[start:start + chunk] = np.where(
            rows >= 0, np.sqrt(np.sum(diff * diff, axis=2)), np.inf)
    order = np.lexsort((np.where(candidate_ids < 0, len(vectors), candidate_ids),
                        distances), axis=1)[:, :k]
    top_ids = np.take_along_axis(candidate_ids, order, axis=1)
    if top_ids.shape[1] < k:        # fewer candidates than k: pad
        pad = k - top_ids.shape[1]
        return (np.pad(np.take_along_axis(distances, order, axis=1), ((0, 0), (0, pad)),
                       constant_values=np.inf),
                np.pad(top_ids, ((0, 0), (0, pad)), constant_values=-1))
    return np.take_along_axis(distances, order, axis=1), top_ids
