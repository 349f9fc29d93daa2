"""TracIn (Pruthi et al. 2020, "Estimating Training Data Influence by Tracing Gradient
Descent") over saved checkpoints, and the cosine of the final model's gradients.

  tracin-last       score_i(t) = sum_k eta_k <g_k(z_i), g_k(z_t)>, g the gradient of the
                    cross-entropy with respect to the last layer (W, b), in closed form
                    <g_i, g_t> = <p_i - y_i, p_t - y_t> (<f_i, f_t> + 1) (last_layer.py).
                    Training rows take the loss at their label, test rows at the class
                    explained.
  tracin-projected  the same sum over projected all-parameter gradients
                    (Checkpoint.loss_gradients from gradients.per_example_gradients):
                    <P^T g_i, P^T g_t>, an unbiased estimate of <g_i, g_t>.
  grad-cos          cos(g(z_i), g(z_t)) at the final model (Representations.final), from
                    the last layer ('last-layer', default) or projected gradients
                    ('projected'); 0 where a gradient is zero.

eta_k is Checkpoint.learning_rate. Self-influence (noisy-label detection, Pruthi et al.
section 4): sum_k eta_k |g_k(z_i)|^2.
"""
import numpy as np

from deepknn.attribution import last_layer
from deepknn.attribution.base import Attribution, checkpoints_of, require

GRADIENTS = ('last-layer', 'projected')


class LastLayerGradients:
    """Loss gradients of N rows with respect to the last layer, kept as features (N, D)
    and residuals p - onehot(label) (N, C)."""

    def __init__(self, checkpoint, labels):
        self.features = checkpoint.features
        self.residuals = last_layer.residuals(checkpoint.probabilities, labels, 'loss')

    def dot(self, other, start, stop):
        """<g_other[t], g_self[i]> for i in [start, stop): (n_other, stop - start)."""
        return last_layer.inner(other.features, other.residuals,
                                self.features[start:stop], self.residuals[start:stop])

    def squared_norms(self):
        return last_layer.squared_norms(self.features, self.residuals)

    def width(self):
        return self.features.shape[1]


class ProjectedGradients:
    """Projected loss gradients of N rows (N, P), from Checkpoint.loss_gradients."""

    def __init__(self, checkpoint, labels=None):
        self.gradients = checkpoint.loss_gradients

    def dot(self, other, start, stop):
        return (np.asarray(other.gradients, dtype=np.float64)
                @ np.asarray(self.gradients[start:stop], dtype=np.float64).T)

    def squared_norms(self):
        g = np.asarray(self.gradients, dtype=np.float64)
        return np.einsum('ij,ij->i', g, g)

    def width(self):
        return self.gradients.shape[1]


def _matching(train_sets, test_sets):
    """Test gradient sets checked against the training ones (count and width)."""
    require(len(test_sets) == len(train_sets), 'test', 'has {} checkpoints, the training '
            'set {}'.format(len(test_sets), len(train_sets)))
    require(all(a.width() == b.width() for a, b in zip(train_sets, test_sets)), 'test',
            'gradients have other dimensions than the training set\'s')
    return test_sets


class TracInLastLayer(Attribution):
    name = 'tracin-last'
    description = 'TracIn over checkpoints (Pruthi et al. 2020), last-layer gradients'
    gradient_class = LastLayerGradients
    needs = None                      # the Checkpoint array the gradients come from

    def _fit(self, train):
        checkpoints = checkpoints_of(train, 'train', self.needs)
        self.rates = [c.learning_rate for c in checkpoints]
        self.sets = [self.gradient_class(c, train.labels) for c in checkpoints]

    def _prepare(self, test):
        checkpoints = checkpoints_of(test, 'test', self.needs)
        return _matching(self.sets, [self.gradient_class(c, test.labels) for c in checkpoints])

    def _block(self, test_sets, start, stop):
        return sum(rate * train.dot(test, start, stop)
                   for rate, train, test in zip(self.rates, self.sets, test_sets))

    def _self_influence(self):
        return sum(rate * train.squared_norms() for rate, train in zip(self.rates, self.sets))


class TracInProjected(TracInLastLayer):
    name = 'tracin-projected'
    description = 'TracIn over checkpoints, seeded random projections of all-parameter gradients'
    gradient_class = ProjectedGradients
    needs = 'loss_gradients'


class GradientCosine(Attribution):
    name = 'grad-cos'
    description = 'cosine of the final model\'s loss gradients (last layer or projected)'

    def __init__(self, gradients='last-layer'):
        require(gradients in GRADIENTS, 'gradients',
                'must be one of {}, got {!r}'.format(GRADIENTS, gradients))
        self.gradients = gradients

    def _set(self, representations, side):
        if self.gradients == 'last-layer':
            return LastLayerGradients(representations.final, representations.labels)
        require(representations.final.loss_gradients is not None, side,
                'needs `loss_gradients` in its final checkpoint')
        return ProjectedGradients(representations.final)

    def _fit(self, train):
        self.set = self._set(train, 'train')
        self.norms = np.sqrt(self.set.squared_norms())

    def _prepare(self, test):
        test_set = _matching([self.set], [self._set(test, 'test')])[0]
        return test_set, np.sqrt(test_set.squared_norms())

    def _block(self, state, start, stop):
        test_set, test_norms = state
        norms = test_norms[:, None] * self.norms[None, start:stop]
        return np.divide(self.set.dot(test_set, start, stop), norms,
                         out=np.zeros(norms.shape), where=norms > 0)
