"""Trust scorers that read one layer's activations: Mahalanobis distance to the nearest
class Gaussian, its relative version, and the distance to the k-th nearest training
example of the normalised activations (registered in deepknn.shift.base.SCORERS).

Each takes `layer`, an index into Outputs.layers (default -2, the penultimate layer:
the input of the output layer in this project's models), so per-layer variants of every
scorer can be built for every layer.

  mahalanobis            -min_c (x - mu_c)^T S^+ (x - mu_c)       (Lee et al. 2018)
  relative-mahalanobis   -min_c [(x - mu_c)^T S^+ (x - mu_c) - (x - mu_0)^T S_0^+ (x - mu_0)]
                                                                    (Ren et al. 2021)
  knn-sun                -|z - z_(k)|, z = x / |x|, z_(k) the k-th nearest normalised
                         training activation                       (Sun et al. 2022)
"""
import numpy as np

from deepknn.neighbors.knn_index import make_index
from deepknn.shift.base import Scorer, checked_count, checked_layer, l2_normalized
from nlp_utils import UserError


def pseudo_inverse_root(covariance):
    """W (D, r) with W W^T = the Moore-Penrose pseudo-inverse of a symmetric PSD
    covariance (D, D), r its numerical rank. Eigenvalues up to D * float64 epsilon * the
    largest count as 0, the cutoff of scipy.linalg.pinvh (which sklearn's
    EmpiricalCovariance uses): directions without training variance, such as dead ReLU
    units, then add nothing to a distance, instead of the huge 1 / ridge a ridge adds."""
    eigenvalues, vectors = np.linalg.eigh(covariance)
    cutoff = len(covariance) * np.finfo(np.float64).eps * np.abs(eigenvalues).max()
    kept = eigenvalues > cutoff
    return vectors[:, kept] / np.sqrt(eigenvalues[kept])


class TiedGaussians:
    """Gaussians with one shared covariance, fitted in float64 to rows x (N, D) split
    into groups (N,) ints: group means mu_g, and the pooled within-group covariance
    S = (1/N) sum_i (x_i - mu_g(i)) (x_i - mu_g(i))^T (maximum likelihood, as Lee et al.).
    Groups without rows are left out; `groups_present` lists those kept."""

    def __init__(self, x, groups):
        x = np.asarray(x, dtype=np.float64)
        self.groups_present = np.unique(groups)
        means = np.stack([x[groups == g].mean(axis=0) for g in self.groups_present])
        centred = x - means[np.searchsorted(self.groups_present, groups)]
        self.whitening = pseudo_inverse_root(centred.T @ centred / len(x))
        self.whitened_means = means @ self.whitening

    def squared_distances(self, x):
        """Squared Mahalanobis distances (x - mu_g)^T S^+ (x - mu_g) of rows x (n, D) to
        every group's mean: (n, G) float64."""
        z = np.asarray(x, dtype=np.float64) @ self.whitening
        # One group at a time: an (n, G, r) difference would be G times larger.
        return np.stack([((z - mean) ** 2).sum(axis=1) for mean in self.whitened_means],
                        axis=1)


class LayerScorer(Scorer):
    """A scorer of one layer's activations, layers[layer]."""

    def __init__(self, layer=-2):
        self.layer = layer
        self.layer_index = None     # `layer` as an index in [0, L), once fitted

    def _fit(self, train, train_labels, calib, calib_labels):
        self.layer_index = checked_layer(self.layer, len(train.layers))
        self._fit_layer(self.activations(train), train_labels)

    def activations(self, outputs):
        """The chosen layer's activations of `outputs`, (n, D) float64."""
        return np.asarray(outputs.layers[self.layer_index], dtype=np.float64)

    def _fit_layer(self, x, labels):
        raise NotImplementedError


class Mahalanobis(LayerScorer):
    """Minus the squared Mahalanobis distance to the nearest class mean under class
    Gaussians with a tied covariance (TiedGaussians on the training activations; the
    pseudo-inverse, see pseudo_inverse_root). Classes absent from training are left out."""
    name = 'mahalanobis'
    description = ('minus the Mahalanobis distance to the nearest class mean, tied '
                   'covariance, on one layer (Lee et al. 2018)')

    def _fit_layer(self, x, labels):
        self.classes = TiedGaussians(x, labels)

    def class_distances(self, batch):
        """(n, G) squared distances to the means of the classes present in training."""
        return self.classes.squared_distances(self.activations(batch))

    def _score(self, batch):
        return -self.class_distances(batch).min(axis=1)


class RelativeMahalanobis(Mahalanobis):
    """Ren et al. (2021): each class's squared Mahalanobis distance minus that of one
    background Gaussian fitted to all training activations (mean mu_0, covariance S_0,
    labels ignored); the score is -min_c of the difference, i.e. the background distance
    minus the nearest class's distance."""
    name = 'relative-mahalanobis'
    description = ('minus the smallest class Mahalanobis distance less the distance under '
                   'one background Gaussian, on one layer (Ren et al. 2021)')

    def _fit_layer(self, x, labels):
        super()._fit_layer(x, labels)
        self.background = TiedGaussians(x, np.zeros(len(x), dtype=np.int64))

    def background_distances(self, batch):
        """(n,) squared Mahalanobis distances under the background Gaussian."""
        return self.background.squared_distances(self.activations(batch))[:, 0]

    def _score(self, batch):
        relative = self.class_distances(batch) - self.background_distances(batch)[:, None]
        return -relative.min(axis=1)


class SunKNN(LayerScorer):
    """Sun et al. (2022): minus the Euclidean distance from the L2-normalised activation
    to its k-th nearest L2-normalised training activation (an all-zero row stays zero).
    Exact with the default backend 'kdtree' (or 'faiss' with kind 'flat'); an
    approximate index that finds fewer than k neighbours gives -inf. A query that is
    itself a training row finds itself at distance 0: score held-out data only."""
    name = 'knn-sun'
    description = ('minus the distance to the k-th nearest training example of the '
                   'L2-normalised layer, k = 50 (Sun et al. 2022)')

    def __init__(self, k=50, layer=-2, backend='kdtree', index_options=None):
        super().__init__(layer)
        self.k = checked_count(k, 'k')
        self.backend, self.index_options = backend, dict(index_options or {})
        make_index(backend, **self.index_options)    # a bad backend or option fails now

    def _fit_layer(self, x, labels):
        if self.k > len(x):
            raise UserError('`k`={} is larger than the {} training examples; choose a '
                            'smaller `k`'.format(self.k, len(x)), parameter='k')
        self.index = make_index(self.backend, **self.index_options).build(l2_normalized(x))

    def _score(self, batch):
        distances, _ = self.index.search(l2_normalized(self.activations(batch)), self.k)
        return -distances[:, -1].astype(np.float64)
