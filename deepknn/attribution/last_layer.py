"""Closed-form gradients with respect to the last Linear layer (W (C, D), b (C,)) of a
softmax classifier, from features and probabilities alone.

For logits z = W f + b, the gradient of a function h(z) with respect to (W, b) is
r outer [f, 1], with r = dh/dz (C,). Hence for two inputs

    <g_a, g_b> = <r_a, r_b> * (<f_a, f_b> + 1)      |g|^2 = |r|^2 * (|f|^2 + 1)

without forming the C (D + 1) numbers of g. Two choices of h:

  loss    cross-entropy at class y:   r = p - onehot(y)
  margin  log(p_y / (1 - p_y)) = z_y - logsumexp_{j != y} z_j (TRAK's output function):
          r_y = 1, r_j = -p_j / sum_{k != y} p_k  (= -(p - onehot(y)) / (1 - p_y)),
          computed from the other classes' probabilities, not from 1 - p_y, which
          float rounding makes 0 for a confident prediction.
"""
import numpy as np

from nlp_utils import UserError

OUTPUTS = ('loss', 'margin')

# Where every other class has probability 0 (float underflow) the margin residual
# divides by this instead, giving r_j = 0 for j != y.
_TINY = np.finfo(np.float64).tiny


def one_hot(labels, n_class):
    """(N,) ints -> (N, C) float64 indicator rows."""
    return np.eye(n_class)[np.asarray(labels)]


def residuals(probabilities, labels, output='loss'):
    """dh/dlogits (N, C) float64 for h the loss or the margin (module docstring)."""
    if output not in OUTPUTS:
        raise UserError('`output` must be one of {}, got {!r}'.format(OUTPUTS, output), 'output')
    p = np.asarray(probabilities, dtype=np.float64)
    y = one_hot(labels, p.shape[1])
    if output == 'loss':
        return p - y
    others = p * (1 - y)
    return y - others / np.maximum(others.sum(axis=1, keepdims=True), _TINY)


def wrong_class_mass(probabilities, labels):
    """(N,) 1 - p(label), summed over the other classes (exact near p(label) = 1)."""
    p = np.asarray(probabilities, dtype=np.float64)
    return (p * (1 - one_hot(labels, p.shape[1]))).sum(axis=1)


def gradients(features, probabilities, labels, output='loss'):
    """Explicit gradients (N, C * (D + 1)) with respect to (W, b): each row is W's
    gradient r f^T flattened row-major, then b's gradient r; the order of a Chainer
    L.Linear's parameters sorted by name (W before b). For small D and tests."""
    r = residuals(probabilities, labels, output)
    f = np.asarray(features, dtype=np.float64)
    weight = (r[:, :, None] * f[:, None, :]).reshape(len(r), -1)
    return np.concatenate([weight, r], axis=1)


def inner(features_a, residuals_a, features_b, residuals_b):
    """<g_a, g_b> for every pair: (n_a, n_b) float64 from features (n, D), residuals (n, C)."""
    f_a = np.asarray(features_a, dtype=np.float64)
    f_b = np.asarray(features_b, dtype=np.float64)
    return (residuals_a @ residuals_b.T) * (f_a @ f_b.T + 1)


def squared_norms(features, residuals_):
    """|g|^2 per row: (n,) float64."""
    f = np.asarray(features, dtype=np.float64)
    return np.einsum('ij,ij->i', residuals_, residuals_) * (np.einsum('ij,ij->i', f, f) + 1)
