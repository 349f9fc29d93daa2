"""Sharded faiss indexes per layer, built in parallel on Ray, searched by shard actors.

    indexes = sharded_indexes(engine, parts, searched_layers, model_dir)
    distances, ids = indexes[0].search(queries, k)     # the NeighborIndex interface

Each layer's rows are split into `engine.shards` contiguous shards (whole activation
parts). Each shard answers by the neighbour rule (deepknn/neighbors/neighbor_rule.py: float64
distances from its rows, then row ids), so flat shards' merged top-k is the one-process
answer to the bit, whatever the shard count; IVF and IVF-PQ
shards all copy one index trained once on a sample of the layer (coarse quantizer and PQ
codebook), so every shard assigns a vector to the same list as one big index would. Shard
files use faiss's own format (write_index/read_index), checked against the manifest's
sha256 when an actor loads them. One actor per shard holds its shards of every layer.
"""
import os
import sys

import numpy as np
import tqdm

import nlp_utils
from deepknn.neighbors import knn_index
from deepknn.neighbors import neighbor_rule
from deepknn.distributed import engine as engine_lib
from deepknn.distributed import shards
from nlp_utils import UserError

TRAIN_PER_LIST = 64       # k-means sample per inverted list, as FaissIndex's default


def layer_template(engine, parts, layer, seed=0):
    """A trained, empty faiss index for `layer` (None for flat shards): IVF lists (and PQ
    codebook) trained on a sample of about TRAIN_PER_LIST rows per list, drawn evenly
    from every part so the driver never holds the whole layer."""
    if engine.kind == 'flat':
        return None
    n_rows = parts.plan['n_rows']
    options = knn_index.FaissIndex(kind=engine.kind, nlist=engine.nlist, pq_m=engine.pq_m,
                                   seed=seed, train_per_list=TRAIN_PER_LIST)
    fraction = min(1.0, TRAIN_PER_LIST * options.list_count(n_rows) / n_rows)
    rng = np.random.RandomState(seed)
    name = 'layer_{}'.format(layer)
    sample = []
    for part in range(len(parts.ranges)):
        rows = parts.read(part, [name])[name]
        sample.append(rows[rng.rand(len(rows)) < fraction])
    return options.trained_empty(np.ascontiguousarray(np.concatenate(sample)), n_rows)


def build_shard(parts_settings, part_ids, layer, template_path, out_path):
    """Ray task: the shard of `layer` over `part_ids` -> [sha256 of its file, rows].
    Rows keep their split row ids (add_with_ids), so merged results need no offsets."""
    import faiss
    faiss.omp_set_num_threads(1)          # one CPU per task, as Ray reserved
    parts = shards.ActivationParts(*parts_settings)
    name = 'layer_{}'.format(layer)
    vectors = np.ascontiguousarray(parts.column(name, part_ids))
    ids = np.concatenate([np.arange(*parts.ranges[p], dtype=np.int64) for p in part_ids])
    if template_path is None:
        index = faiss.IndexIDMap(faiss.IndexFlatL2(vectors.shape[1]))
    else:
        index = faiss.read_index(template_path)
    index.add_with_ids(vectors, ids)
    return [shards.write_faiss(index, out_path), int(index.ntotal)]


def build_shards(engine, parts, searched_layers, folder, settings, progress=True):
    """Build every (layer, shard) file in parallel Ray tasks; write manifest.json last."""
    import ray
    task = ray.remote(num_cpus=1, scheduling_strategy='SPREAD')(build_shard)
    groups = shards.shard_parts(len(parts.ranges), engine.shards)
    pending = {}
    for layer in searched_layers:
        template = layer_template(engine, parts, layer)
        template_path = None
        if template is not None:
            template_path = os.path.join(folder, 'layer_{}'.format(layer), 'trained.faiss')
            shards.write_faiss(template, template_path)
        for shard, part_ids in enumerate(groups):
            pending[(layer, shard)] = task.remote(parts.settings, part_ids, layer, template_path,
                                                  shards.shard_path(folder, layer, shard))
    key_of = {ref: key for key, ref in pending.items()}
    waiting, results = list(key_of), {}
    with tqdm.tqdm(total=len(waiting), desc='index shards', unit='shard',
                   disable=not progress) as bar:
        while waiting:                          # in the order they finish
            [done], waiting = ray.wait(waiting, num_returns=1)
            results[key_of[done]] = engine_lib.get(done)
            bar.update()
    manifest = {'settings': settings, 'dims': parts.layer_widths(),
                'shards': [[results[(layer, s)] for s in range(engine.shards)]
                           for layer in searched_layers]}
    nlp_utils.atomic_write_json(os.path.join(folder, 'manifest.json'), manifest)
    return manifest


class ShardSearcher:
    """Ray actor: one shard of every searched layer, loaded once. Errors while loading
    (a missing or corrupt file) are kept and reported by ready(), so the driver can raise
    them as one line."""

    def __init__(self, paths, digests, nprobe, parts_settings, part_ids, layers):
        import faiss
        faiss.omp_set_num_threads(1)
        self.problem = None
        try:
            self.indexes = [shards.read_faiss(p, d) for p, d in zip(paths, digests)]
            self.rows = [self._rows(index, parts_settings, part_ids, layer)
                         for index, layer in zip(self.indexes, layers)]
        except UserError as error:
            self.problem = str(error)
            return
        for index in self.indexes:
            if not isinstance(index, faiss.IndexIDMap):
                faiss.extract_index_ivf(index).nprobe = nprobe

    @staticmethod
    def _rows(index, parts_settings, part_ids, layer):
        """(float32 vectors (n, D), their split row ids (n,) increasing, max row norm) of
        the shard: a flat shard's are faiss's own storage (no copy), an IVF shard's are
        read from its activation parts (IVF-PQ keeps only codes)."""
        import faiss
        if isinstance(index, faiss.IndexIDMap):
            flat = faiss.downcast_index(index.index)
            vectors = faiss.rev_swig_ptr(flat.get_xb(), flat.ntotal * flat.d).reshape(
                flat.ntotal, flat.d)
            ids = faiss.vector_to_array(index.id_map)
        else:
            parts = shards.ActivationParts(*parts_settings)
            vectors = np.ascontiguousarray(parts.column('layer_{}'.format(layer), part_ids))
            ids = np.concatenate([np.arange(*parts.ranges[p], dtype=np.int64)
                                  for p in part_ids])
        return vectors, ids, neighbor_rule.max_row_norm(vectors)

    def ready(self):
        """(None once loaded, else the one-line reason; the Ray node this actor runs on)."""
        import ray
        return self.problem, ray.get_runtime_context().get_node_id()

    def peak_mib(self):
        """Peak resident memory of this actor's process, MiB."""
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

    def search(self, position, queries, k):
        """(float64 Euclidean distances (M, k), row ids (M, k)) of the neighbour rule in
        the shard of searched layer `position`; -1 ids where it holds fewer than k rows."""
        import faiss
        index = self.indexes[position]
        vectors, ids, max_norm = self.rows[position]

        def candidates(batch, m):
            squared, found = index.search(batch, m)
            return (np.sqrt(np.maximum(squared, 0.0)),
                    np.where(found >= 0, np.searchsorted(ids, found), -1))
        distances, local = neighbor_rule.ranked(
            candidates, vectors, queries, k, isinstance(index, faiss.IndexIDMap),
            knn_index.NeighborIndex.roundoff, max_norm)
        return distances, np.where(local >= 0, ids[np.maximum(local, 0)], -1)


def merge_top_k(found, k):
    """Per-shard results [(distances (M, k_s), ids (M, k_s))] -> the k nearest overall,
    nearest first, ties by the smaller row id (the neighbour rule);
    -1 / inf where all shards together hold fewer than k."""
    distances = np.concatenate([d for d, _ in found], axis=1)
    ids = np.concatenate([i for _, i in found], axis=1)
    distances = np.where(ids < 0, np.inf, distances)
    order = np.lexsort((ids, distances), axis=1)[:, :k]
    return (np.take_along_axis(distances, order, axis=1),
            np.take_along_axis(ids, order, axis=1))


class ShardedIndex(knn_index.NeighborIndex):
    """A NeighborIndex whose vectors live in shard actors: search() sends the batch of
    queries to every shard once (ray.put) and merges their top-k."""

    def __init__(self, searchers, position, n_rows, dim):
        super().__init__()
        self.searchers, self.position = searchers, position
        self.n, self.dim = n_rows, dim

    def _build(self, vectors):
        raise UserError('a sharded index is built from activation parts on the Ray cluster '
                        '(sharded_indexes), not from vectors in memory')

    def _ranked(self, queries, k):
        """Each shard's neighbours by the rule, merged: the rule's k over all rows."""
        import ray
        shared = ray.put(queries)
        return merge_top_k(engine_lib.get([searcher.search.remote(self.position, shared, k)
                                           for searcher in self.searchers]), k)


def sharded_indexes(engine, parts, searched_layers, model_dir, progress=True):
    """One ShardedIndex per searched layer, from the shards in storage (built first
    when this engine's settings have none yet)."""
    engine_lib.connect(engine)
    settings = dict(engine.index_options(), layers=list(searched_layers),
                    n_rows=parts.plan['n_rows'], dtype=engine.dtype)
    folder = shards.index_folder(model_dir, settings)
    manifest = (shards.read_manifest(folder, settings)
                or build_shards(engine, parts, searched_layers, folder, settings, progress))
    searchers = open_searchers(engine, folder, manifest, searched_layers, parts)
    return [ShardedIndex(searchers, position, parts.plan['n_rows'], manifest['dims'][layer])
            for position, layer in enumerate(searched_layers)]


def open_searchers(engine, folder, manifest, searched_layers, parts):
    """One ShardSearcher actor per shard, each checked ready (a UserError otherwise),
    pinned round-robin to the cluster's live nodes, so every node searches, as
    docs/ray.md advises (Ray's SPREAD, and a soft node affinity, may put them all on the
    driver's node); says on how many nodes they landed."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    actor = ray.remote(num_cpus=0)(ShardSearcher)
    nodes = sorted(node['NodeID'] for node in ray.nodes() if node['Alive'])
    searchers = []
    groups = shards.shard_parts(len(parts.ranges), engine.shards)
    for shard in range(engine.shards):
        paths = [shards.shard_path(folder, layer, shard) for layer in searched_layers]
        digests = [manifest['shards'][position][shard][0]
                   for position in range(len(searched_layers))]
        where = NodeAffinitySchedulingStrategy(nodes[shard % len(nodes)], soft=False)
        searchers.append(actor.options(scheduling_strategy=where).remote(
            paths, digests, engine.nprobe, parts.settings, groups[shard], searched_layers))
    answers = engine_lib.get([searcher.ready.remote() for searcher in searchers])
    for problem, _ in answers:
        if problem:
            raise UserError(problem)
    print('{} on {}'.format(nlp_utils.count(len(searchers), 'shard search actor'),
                            nlp_utils.count(len({node for _, node in answers}), 'Ray node')),
          file=sys.stderr)
    return searchers
