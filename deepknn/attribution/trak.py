"""TRAK (Park et al. 2023, "TRAK: Attributing Model Behavior at Scale"): attribution by
a kernel regression on projected gradients of the margin, over an ensemble of models.

For each model m (Representations.checkpoints: checkpoints of one run or independently
trained models):

  Phi_m  (N, P)  projected gradients of the model output function
                 f(z) = log(p(z) / (1 - p(z))) at each training row's label
                 (Checkpoint.margin_gradients, gradients.per_example_gradients with
                 output='margin'); gradients='last-layer' uses the explicit gradients
                 with respect to the last layer instead (last_layer.py, no projection)
  phi_m(t) (P,)  the same for the test input, at the class explained
  Q_m    (N,)    1 - p_i(label), the loss's derivative with respect to the margin
  kernel_m(t, i) = phi_m(t)^T (Phi_m^T Phi_m + ridge_m I)^{-1} Phi_m[i]

Scores, average='separate' (default: the paper's Algorithm 1, line "T <- [1/M sum_m
Phi_m (Phi_m^T Phi_m)^-1 Phi_m^T] . [1/M sum_m Q_m]", as the authors' library
computes it too): the mean kernel over models times the mean Q,

    tau(t)_i = (1/M sum_m kernel_m(t, i)) * (1/M sum_m Q_m[i])

average='scores' averages the per-model scores instead, 1/M sum_m kernel_m(t, i) Q_m[i]
(the two agree for one model).

Choices and deviations:
- ridge_m = ridge * trace(Phi_m^T Phi_m) / P (ridge default 1e-6, relative to the mean
  eigenvalue), for a stable Cholesky factor; the paper inverts Phi^T Phi as is
  (ridge=0 here, which fails with a UserError when Phi^T Phi is singular).
- No soft-thresholding: Algorithm 1 ends by soft-thresholding T with a level chosen by
  cross-validation; the scores here are unthresholded (the authors' library does not
  threshold either).
- The projection scale 1/sqrt(P) of gradients.py multiplies every kernel by the same
  constant, so it leaves rankings and LDS unchanged.
- self_influence is tau(z_i)_i: Q times the leverage Phi[i] (Phi^T Phi + ridge)^-1 Phi[i]^T.
"""
import numpy as np
import scipy.linalg

from deepknn.attribution import last_layer
from deepknn.attribution.base import Attribution, checkpoints_of, require
from nlp_utils import UserError

AVERAGES = ('separate', 'scores')
GRADIENTS = ('projected', 'last-layer')
DEFAULT_RIDGE = 1e-6


def margin_features(checkpoint, labels, gradients):
    """Phi (N, P) float64 of one model: projected or explicit last-layer margin gradients."""
    if gradients == 'last-layer':
        return last_layer.gradients(checkpoint.features, checkpoint.probabilities, labels,
                                    'margin')
    return np.asarray(checkpoint.margin_gradients, dtype=np.float64)


def kernel_factor(phi, ridge):
    """Cholesky factor of Phi^T Phi + ridge * trace / P * I, for scipy.linalg.cho_solve."""
    gram = phi.T @ phi
    gram[np.diag_indices_from(gram)] += ridge * np.trace(gram) / len(gram)
    try:
        factor = scipy.linalg.cho_factor(gram)
    except np.linalg.LinAlgError:
        factor = None
    # Rounding can let an exactly singular matrix through with a pivot near 0: a
    # factor's diagonal spread beyond 1/sqrt(P eps) means singular in float64.
    diagonal = None if factor is None else np.abs(np.diag(factor[0]))
    if diagonal is None or diagonal.min() ** 2 <= len(gram) * np.finfo(float).eps * \
            diagonal.max() ** 2:
        raise UserError('`ridge` {} leaves Phi^T Phi singular; choose a positive `ridge`'
                        .format(ridge), 'ridge')
    return factor


class TRAK(Attribution):
    name = 'trak'
    description = 'TRAK (Park et al. 2023): kernel regression on projected margin gradients'

    def __init__(self, ridge=DEFAULT_RIDGE, gradients='projected', average='separate'):
        require(ridge >= 0, 'ridge', 'must be at least 0, got {!r}'.format(ridge))
        require(gradients in GRADIENTS, 'gradients',
                'must be one of {}, got {!r}'.format(GRADIENTS, gradients))
        require(average in AVERAGES, 'average',
                'must be one of {}, got {!r}'.format(AVERAGES, average))
        self.ridge, self.gradients, self.average = float(ridge), gradients, average

    def _needs(self):
        return 'margin_gradients' if self.gradients == 'projected' else None

    def _fit(self, train):
        models = checkpoints_of(train, 'train', self._needs())
        self.phis = [margin_features(m, train.labels, self.gradients) for m in models]
        self.factors = [kernel_factor(phi, self.ridge) for phi in self.phis]
        self.qs = [last_layer.wrong_class_mass(m.probabilities, train.labels) for m in models]

    def _prepare(self, test):
        """Per model, (Phi^T Phi + ridge)^-1 phi(t): (n_test, P)."""
        models = checkpoints_of(test, 'test', self._needs())
        require(len(models) == len(self.phis), 'test', 'has {} models, the training set {}'
                .format(len(models), len(self.phis)))
        solved = []
        for model, phi, factor in zip(models, self.phis, self.factors):
            test_phi = margin_features(model, test.labels, self.gradients)
            require(test_phi.shape[1] == phi.shape[1], 'test',
                    'gradients have {} dims, the training set\'s {}'.format(
                        test_phi.shape[1], phi.shape[1]))
            solved.append(scipy.linalg.cho_solve(factor, test_phi.T).T)
        return solved

    def _block(self, solved, start, stop):
        kernels = [x @ phi[start:stop].T for x, phi in zip(solved, self.phis)]
        if self.average == 'scores':
            return np.mean([k * q[start:stop] for k, q in zip(kernels, self.qs)], axis=0)
        return np.mean(kernels, axis=0) * np.mean([q[start:stop] for q in self.qs], axis=0)

    def _self_influence(self):
        leverages = [np.einsum('ij,ji->i', phi, scipy.linalg.cho_solve(factor, phi.T))
                     for phi, factor in zip(self.phis, self.factors)]
        if self.average == 'scores':
            return np.mean([lev * q for lev, q in zip(leverages, self.qs)], axis=0)
        return np.mean(leverages, axis=0) * np.mean(self.qs, axis=0)
