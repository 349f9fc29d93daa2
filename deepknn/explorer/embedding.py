"""The explorer's embedding view: a 2-D PCA of one layer's training activations, cached.

`layer_projection` fits a PCA (scikit-learn, 2 components) on at most FIT_SAMPLE training
rows of a DkNN layer (a seeded sample: fitting needs no more; every row is projected and
drawn) and caches mean, components and the projected rows in
<result_dir>/explorer_pca_layer<l>_<key>.npz, keyed as the split cache is
(split_cache.run_key). UMAP is not available here (not installed); PCA is exact and
needs nothing more. `points` gives the page what it draws: every training example's
coordinates with its label, prediction and credibility; `query_point` places one input
(its activations projected with the same mean and components).
"""
import numpy as np

from deepknn.explorer import split_cache
from deepknn.neighbors import activation_cache
from deepknn.neighbors import dknn as dknn_lib
from nlp_utils import UserError

FIT_SAMPLE = 10000        # rows the PCA is fitted on (TensorBoard samples 10,000 for UMAP)
DIGITS = 4                # decimals of the coordinates sent to the page


def fit_projection(vectors, sample=FIT_SAMPLE, seed=0):
    """(mean (D,), components (2, D)) of a PCA of `vectors` (N, D), fitted on at most
    `sample` rows drawn without replacement with `seed`."""
    from sklearn.decomposition import PCA
    rows = vectors
    if len(vectors) > sample:
        rows = vectors[np.sort(np.random.RandomState(seed).choice(len(vectors), sample,
                                                                  replace=False))]
    # The D x D covariance's eigenvectors: exact, and ~40x faster than the full SVD of
    # the rows (10,000 x 300: 0.2 s against 8.7 s here).
    pca = PCA(n_components=2, svd_solver='covariance_eigh').fit(rows.astype(np.float64))
    return pca.mean_, pca.components_


def project(vectors, mean, components):
    """(N, 2) coordinates of `vectors` (N, D) in the PCA's plane."""
    return (np.asarray(vectors, dtype=np.float64) - mean) @ components.T


def check_layer(layer, n_layers):
    """The layer number, or a UserError naming `layer` and its range."""
    if isinstance(layer, str) and layer.isascii() and layer.isdigit():
        layer = int(layer)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n_layers:
        raise UserError('layer must be an integer from 0 to {} (the DkNN layers), got {!r}'
                        .format(n_layers - 1, layer), 'layer')
    return layer


def layer_projection(setup, settings, base_key, layer):
    """{'mean', 'components', 'coords' (N_train, 2)} of DkNN layer `layer`, from the run
    folder's cache or fitted now (and cached)."""
    activations = dknn_lib.training_split_activations(setup, settings)[0]
    layer = check_layer(layer, len(activations))
    key = '{}|pca2 layer {} sample {}'.format(base_key, layer, FIT_SAMPLE)
    path = split_cache.cache_path(setup.result_dir, 'layer{}'.format(layer), key, 'pca')
    found = activation_cache.read_cache(path, np.array(key))
    if found is not None:
        return {name: found[name] for name in ('mean', 'components', 'coords')}
    mean, components = fit_projection(activations[layer])
    found = {'mean': mean, 'components': components,
             'coords': project(activations[layer], mean, components).astype(np.float32)}
    split_cache.save(path, key, found)
    return found


def points(projection, train_table, layer, layer_name):
    """What the embedding view draws: {'layer', 'name', 'n', 'x', 'y', 'gold',
    'prediction' (DkNN where there is one, else softmax: label ids), 'credibility' (or
    None), 'labels'}."""
    coords = np.round(projection['coords'].astype(np.float64), DIGITS)
    prediction = train_table.dknn_prediction if train_table.dknn_prediction is not None \
        else train_table.softmax_prediction
    return {'layer': layer, 'name': layer_name, 'n': int(len(coords)),
            'x': coords[:, 0].tolist(), 'y': coords[:, 1].tolist(),
            'gold': train_table.gold.tolist(), 'prediction': prediction.tolist(),
            'credibility': None if train_table.credibility is None else
            np.round(train_table.credibility, 3).tolist(),
            'labels': list(train_table.label_names)}


def query_point(layers, projection, layer):
    """[x, y] of one input whose activations are `layers` (list of (1, D_l))."""
    return np.round(project(layers[layer], projection['mean'],
                            projection['components'])[0], DIGITS).tolist()
