"""A run's cached DkNN inputs: training activations and built indexes, written under
the run folder's lock.

<result_dir>/dknn_cache.npz holds every DkNN layer's activations of the training split
(with gold and predicted labels), dknn_index_<backend>.npz the built indexes of a backend
that saves them without pickle (faiss). Both are keyed by digests of the model, the
vocabulary and the training examples, so a changed run rebuilds them. Reading a valid
cache takes no lock; writing one holds result_folder.lock_for_caches.
"""
import os
import sys
import zipfile
import zlib

import numpy as np

from deepknn.neighbors import knn_index
from deepknn.storage import result_folder
import nlp_utils
from nlp_utils import UserError


def checked_activations(activations, what):
    """The activations, unchanged, or a UserError naming the first non-finite layer."""
    for i, layer in enumerate(activations):
        if not np.all(np.isfinite(layer)):
            raise UserError('{} activations of layer {} contain NaN or inf: the model gives '
                            'non-finite values on these inputs (did its training diverge?); '
                            're-train it'.format(what, i))
    return activations


def activation_key(setup, batchsize=64):
    """Identifies the cached activations: digests of the model file, the vocabulary and
    the training split's examples (a data file changed with the same number of lines
    changes the key too), and the canonical block size the rows were computed in
    (nets.BatchedInference), which fixes their last bits."""
    model_path = os.path.join(setup.result_dir, setup.config.model_path)
    return '{}:{}:{}:blocks of {}'.format(
        nlp_utils.file_digest(model_path), nlp_utils.vocab_digest(setup.vocab),
        nlp_utils.examples_digest(setup.splits.train), batchsize)


def read_cache(path, key):
    """The arrays of cache file `path` as a dict when its key is `key`, else None. A
    corrupt cache is reported and ignored, so it is rebuilt rather than a dead end."""
    if not os.path.exists(path):
        return None
    try:
        nlp_utils.check_npz(path, 'cache', 'it is rebuilt')
        with np.load(path, allow_pickle=False) as cache:
            if str(cache['key']) != str(key):
                return None
            return {name: cache[name] for name in cache.files}
    except (UserError, OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile,
            zlib.error) as error:
        print('warning: ignoring the unreadable cache {} ({}); rebuilding it'.format(
            path, error), file=sys.stderr)
        return None


CACHES_PURPOSE = 'writing the DkNN caches'   # what the run folder's lock file names


def train_activations(setup, neighbor_labels='gold', batchsize=64, use_cache=True, key=None):
    """(list of (N, D_l) float32, labels (N,)) for the training split, cached in
    <result_dir>/dknn_cache.npz and reused while model file and split are unchanged
    (use_cache False: recomputed and cached anew). Reading a valid cache takes no lock;
    writing one holds the run folder's (result_folder.lock_for_caches), so a second
    writer stops with a one-line error. `key`: activation_key(setup, batchsize), if known."""
    cache_path = os.path.join(setup.result_dir, 'dknn_cache.npz')
    key = np.array(key or activation_key(setup, batchsize))
    cache = _complete(read_cache(cache_path, key), cache_path) if use_cache else None
    if cache is None:
        with result_folder.lock_for_caches(setup.result_dir, CACHES_PURPOSE):
            # Another builder may have finished between the read above and the lock.
            cache = _complete(read_cache(cache_path, key), cache_path) if use_cache else None
            cache = cache or _write_train_cache(setup, batchsize, cache_path, key)
    activations = [cache['layer_{}'.format(i)] for i in range(int(cache['n_layers']))]
    return activations, cache[neighbor_labels].astype(np.int64)


def _complete(cache, path):
    """The training cache's arrays when it holds every array it names, else None (a
    warning says it is rebuilt)."""
    if cache is None:
        return None
    names = ['n_layers', 'gold', 'predicted']
    try:
        names += ['layer_{}'.format(i) for i in range(int(cache.get('n_layers', -1)))]
    except (TypeError, ValueError):
        names = names + ['n_layers as a number']
    missing = [name for name in names if name not in cache]
    if missing:
        print('warning: ignoring the incomplete cache {} (no {}); rebuilding it'.format(
            path, ', '.join(missing)), file=sys.stderr)
        return None
    return cache


def _write_train_cache(setup, batchsize, cache_path, key):
    """Compute the training split's activations and write them to `cache_path` ->
    the cache's arrays (n_layers, gold, predicted, layer_<i>)."""
    activations = checked_activations(setup.model.layer_activations(
        [x for x, _ in setup.train], batchsize, progress='caching train activations'),
        'training')
    arrays = {'layer_{}'.format(i): a for i, a in enumerate(activations)}
    arrays.update(n_layers=len(activations), gold=np.array([y for _, y in setup.train],
                                                           dtype=np.int64),
                  predicted=activations[-1].argmax(axis=1).astype(np.int64))
    nlp_utils.atomic_savez(cache_path, key=key, **arrays)
    return arrays


class IndexCache:
    """<result_dir>/dknn_index_<backend>.npz: built indexes of backends that can be saved
    without pickle (faiss); KD-tree and LSH indexes are rebuilt from the cached
    activations. Valid while activations, backend options and layers are unchanged."""

    def __init__(self, result_dir, activations_key, dknn):
        self.path = os.path.join(result_dir, 'dknn_index_{}.npz'.format(dknn.backend))
        self.key = '{}|{}|{}'.format(activations_key, sorted(dknn.index_options.items()),
                                     dknn.last_layer_only)
        self.dknn = dknn
        self.saves_index = type(knn_index.make_index(dknn.backend)).saved_state is not \
            knn_index.NeighborIndex.saved_state

    def load(self):
        """Per-layer saved states, or None when there is no valid cache."""
        cache = read_cache(self.path, self.key)
        return None if cache is None else knn_index.index_states_from(cache)

    def save(self):
        arrays = knn_index.index_state_arrays(self.dknn.indexes)
        if arrays is not None:
            nlp_utils.atomic_savez(self.path, key=np.array(self.key), **arrays)

    def fit(self, activations, labels):
        """self.dknn fitted on the activations, its indexes restored from the cache when
        valid, else built and cached under the run folder's lock."""
        states = self.load()
        if states is not None or not self.saves_index:
            try:
                return self.dknn.fit(activations, labels, progress=True, index_states=states)
            except knn_index.CorruptIndex as problem:
                print('warning: ignoring the cache {} ({}); rebuilding it'.format(
                    self.path, problem), file=sys.stderr)
        with result_folder.lock_for_caches(os.path.dirname(self.path), CACHES_PURPOSE):
            states = self.load()   # another builder's, written since the read above
            try:
                self.dknn.fit(activations, labels, progress=True, index_states=states)
            except knn_index.CorruptIndex:
                states = None      # the corrupt one again: rebuilt and replaced below
                self.dknn.fit(activations, labels, progress=True)
            if states is None:
                self.save()
        return self.dknn
