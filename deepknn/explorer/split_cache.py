"""The explorer's split evaluations on disk: computed once per model, split and DkNN settings.

A split's evaluation (softmax, DkNN prediction, credibility and confidence, and the
activations of the layer Rajani et al.'s kNN searches) is written to
<result_dir>/explorer_split_<name>_<key>.npz, keyed by the model's parameters digest,
the vocabulary, the training, calibration and shown examples and the DkNN settings, so
a restarted explorer reads it instead of running the model again. Where the explorer has
none, `run_dknn.py`'s dknn_predictions_<split>_<backend>*.npz is reused when its report
names the same DkNN settings, its labels are the split's and the model gives the same
softmax on its first examples (the report has no parameters digest; the spot check
tells a retrained model apart). Writing holds the run folder's cache lock; where another
command holds it, the evaluation is kept in memory only.
"""
import glob
import hashlib
import inspect
import json
import os
import re
import sys

import numpy as np
import tqdm

from deepknn.evaluation import calibration
from deepknn.neighbors import activation_cache
from deepknn.neighbors import dknn as dknn_lib
from deepknn.neighbors import knn_index
from deepknn.storage import result_folder
import nets
import nlp_utils
from nlp_utils import UserError

KNN_LAYER = -2            # the last hidden layer, as run_knn_representations.py
COLUMNS = ('softmax', 'prediction', 'credibility', 'confidence', 'hidden')
SPOT_CHECK = 8            # examples whose softmax must match a reused prediction file


def resolved_options(backend, options):
    """The index options with the backend's defaults filled in, so {} and the defaults
    spelled out compare equal."""
    signature = inspect.signature(type(knn_index.make_index(backend, **options)).__init__)
    defaults = {name: p.default for name, p in signature.parameters.items()
                if p.default is not inspect.Parameter.empty}
    return dict(defaults, **options)


def run_key(setup, settings, has_dknn):
    """The part of every split's key that the session fixes: the model's parameters
    digest, the vocabulary, the training and calibration examples and the DkNN
    settings (dknn_settings.DkNNSettings) -> a JSON string."""
    model_path = os.path.join(setup.result_dir, setup.config.model_path)
    return json.dumps({
        'parameters': nlp_utils.npz_parameters_digest(model_path),
        'vocab': nlp_utils.vocab_digest(setup.vocab),
        'train': nlp_utils.examples_digest(setup.splits.train),
        'calib': nlp_utils.examples_digest(setup.splits.calib),
        'dknn': None if not has_dknn else {
            'k': settings.k, 'backend': settings.backend,
            'neighbor_labels': settings.neighbor_labels,
            'last_layer_only': settings.last_layer_only,
            'index_options': resolved_options(settings.backend, settings.index_options)},
        'batchsize': settings.batchsize}, sort_keys=True, default=str)


def cache_path(result_dir, name, key, kind='split'):
    """<result_dir>/explorer_<kind>_<name>_<16 hex digits of the key>.npz."""
    safe = re.sub(r'[^A-Za-z0-9_-]', '_', name)[:40]
    digest = hashlib.sha256(key.encode('utf-8')).hexdigest()[:16]
    return os.path.join(result_dir, 'explorer_{}_{}_{}.npz'.format(kind, safe, digest))


def split_key(base_key, name, examples):
    """The key of one split's cache: the run's (run_key), its name and its examples."""
    return '{}|{}|{}'.format(base_key, name, nlp_utils.examples_digest(examples))


def evaluate(setup, dknn, examples, batchsize, progress=None):
    """{'softmax': (N, C), 'hidden': (N, D), and with a DkNN 'prediction', 'credibility',
    'confidence': (N,)} of token-level `examples`, block by block (a tqdm bar in the
    terminal; progress(done, total) blocks after each, for the page)."""
    encoded = setup.encode(examples)
    blocks = nets.canonical_chunks(len(encoded))
    parts = []
    for done, (start, stop) in enumerate(tqdm.tqdm(blocks, desc='evaluating', unit='block'), 1):
        layers = dknn_lib.checked_activations(setup.model.layer_activations(
            [x for x, _ in encoded[start:stop]], batchsize), 'evaluation')
        part = {'softmax': calibration.softmax(layers[-1]), 'hidden': layers[KNN_LAYER]}
        if dknn is not None:
            result = dknn.predict_from_activations(layers)
            part.update({key: result[key] for key in ('prediction', 'credibility', 'confidence')})
        parts.append(part)
        if progress:
            progress(done, len(blocks))
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


def hidden_activations(setup, examples, batchsize):
    """(N, D) activations of KNN_LAYER of token-level `examples`."""
    encoded = setup.encode(examples)
    return dknn_lib.checked_activations(setup.model.layer_activations(
        [x for x, _ in encoded], batchsize, progress='hidden layer'), 'evaluation')[KNN_LAYER]


def load(path, key):
    """The cached columns at `path` when its key is `key`, else None."""
    cache = activation_cache.read_cache(path, np.array(key))
    if cache is None or 'softmax' not in cache:
        return None
    return {name: cache[name] for name in COLUMNS if name in cache}


def save(path, key, columns):
    """Write the columns under the run folder's cache lock; a folder another command
    holds is left alone (the columns stay in memory)."""
    try:
        with result_folder.lock_for_caches(os.path.dirname(path), activation_cache.CACHES_PURPOSE,
                                           wait_seconds=0):
            nlp_utils.atomic_savez(path, key=np.array(key), **columns)
    except UserError as busy:
        print('warning: not caching {} ({})'.format(os.path.basename(path), busy),
              file=sys.stderr)


def from_run_dknn(setup, settings, name, examples):
    """The columns of run_dknn.py's predictions of split `name` (no 'hidden') when a
    report in the run folder matches (see the module docstring), else None."""
    gold = np.array([y for _, y in examples], dtype=np.int64)
    pattern = os.path.join(glob.escape(setup.result_dir),
                           'dknn_{}_{}*.json'.format(name, settings.backend))
    for report_path in sorted(glob.glob(pattern)):
        predictions = os.path.join(setup.result_dir, os.path.basename(report_path).replace(
            'dknn_', 'dknn_predictions_', 1)[:-len('.json')] + '.npz')
        columns = _same_settings(report_path, settings, name) and \
            _prediction_columns(predictions, gold)
        if columns and _same_softmax(setup, examples, columns['softmax'], settings.batchsize):
            print('reusing {}'.format(predictions), file=sys.stderr)
            return columns
    return None


def _same_settings(report_path, settings, name):
    """Whether run_dknn.py's report at `report_path` evaluated split `name` in this
    process with the DkNN `settings`."""
    try:
        report = nlp_utils.read_json(report_path, 'DkNN report', dict)
    except UserError:
        return False
    return report.get('split') == name and report.get('eval_file') is None and \
        report.get('engine', 'local') == 'local' and report.get('k') == settings.k and \
        report.get('backend') == settings.backend and \
        report.get('neighbor_labels') == settings.neighbor_labels and \
        report.get('last_layer_only') == settings.last_layer_only and \
        resolved_options(settings.backend, report.get('index_options') or {}) == \
        resolved_options(settings.backend, settings.index_options)


def _prediction_columns(path, gold):
    """The columns of a run_dknn.py prediction file whose labels are `gold`, else None."""
    names = ('label', 'softmax_probability', 'prediction', 'credibility', 'confidence')
    try:
        cache = nlp_utils.read_npz_arrays(path, names, 'DkNN predictions', 'it is ignored')
    except UserError:
        return None      # missing, half written or of another version: not reused
    if not np.array_equal(cache['label'], gold):
        return None
    return {'softmax': cache['softmax_probability'], 'prediction': cache['prediction'],
            'credibility': cache['credibility'], 'confidence': cache['confidence']}


def _same_softmax(setup, examples, softmax, batchsize):
    """Whether the loaded model gives `softmax` (N, C) on the first SPOT_CHECK examples."""
    encoded = setup.encode(examples[:SPOT_CHECK])
    logits = setup.model.layer_activations([x for x, _ in encoded], batchsize)[-1]
    return np.allclose(calibration.softmax(logits), softmax[:SPOT_CHECK], atol=1e-5)


def split_columns(setup, dknn, settings, base_key, name, examples, progress=None, reuse=True):
    """(columns, hidden_source) of split `name`: the explorer's cache, else run_dknn.py's
    predictions (then hidden_source() computes and caches the hidden layer when first
    needed), else a fresh evaluation (`progress` as for `evaluate`), cached. `reuse`
    False: evaluated afresh whatever is on disk (a benchmark's first open)."""
    key = split_key(base_key, name, examples)
    path = cache_path(setup.result_dir, name, key)
    columns = load(path, key) if reuse else None
    if columns is None and dknn is not None and reuse:
        columns = from_run_dknn(setup, settings, name, examples)
    if columns is None:
        columns = evaluate(setup, dknn, examples, settings.batchsize, progress)
        save(path, key, columns)

    def hidden_source():
        columns['hidden'] = hidden_activations(setup, examples, settings.batchsize)
        save(path, key, columns)
        return columns['hidden']
    return columns, hidden_source
