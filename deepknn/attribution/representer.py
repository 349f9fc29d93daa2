"""Representer points (Yeh et al. 2018, "Representer Point Selection for Explaining Deep
Neural Networks"): the last layer's logits as a sum over training rows.

If the last layer W (C, D) is a stationary point of

    (1/n) sum_i L(W f_i, y_i) + lam |W|^2        (L the softmax cross-entropy)

then W = sum_i alpha_i f_i^T with alpha_i = -(1 / (2 lam n)) dL/dlogits_i
= -(p_i - onehot(y_i)) / (2 lam n) (C,), so W f_t = sum_i alpha_i <f_i, f_t>.
The score of training row i for test input t explained at class c_t is its term:

    score_i(t) = alpha_i[c_t] * <f_i, f_t>

Choices:
- lam defaults to 5e-5: the project's models train with Chainer's WeightDecay(1e-4),
  which adds 1e-4 * theta to the gradient of the mean loss, i.e. the gradient of
  (1e-4 / 2) |theta|^2 = lam |theta|^2 with lam = 5e-5. The decay also reaches the
  biases, which the theorem does not cover (our fit below leaves the bias free).
- The project's models are trained by Adam for a fixed number of epochs and are not at
  the stationary point the theorem assumes, so W != sum_i alpha_i f_i^T for them. Yeh
  et al. fine-tune the last layer to it; `stationary=True` does the same with
  fit_last_layer_stationary (L-BFGS on the L2-regularised softmax regression of the
  fixed features) and takes alpha from the fitted layer's probabilities.
- self_influence is |alpha_i[y_i]| = (1 - p_i[y_i]) / (2 lam n): Yeh et al. (section 4.1)
  rank training points for label checking by the size of alpha.
"""
import numpy as np
import scipy.optimize
import scipy.special

from deepknn.attribution import last_layer
from deepknn.evaluation.calibration import softmax
from deepknn.attribution.base import Attribution, as_rows, require

DEFAULT_LAMBDA = 5e-5


def representer_alphas(probabilities, labels, lam):
    """alpha (N, C) float64 = -(p - onehot(y)) / (2 lam N)."""
    return -last_layer.residuals(probabilities, labels) / (2 * lam * len(labels))


def _objective(params, features, targets, lam, fit_bias):
    """Value and gradient of (1/n) sum CE + lam |W|^2 at flattened (W, b)."""
    n, width = features.shape
    n_class = targets.shape[1]
    weight = params[:n_class * width].reshape(n_class, width)
    bias = params[n_class * width:] if fit_bias else np.zeros(n_class)
    logits = features @ weight.T + bias
    log_p = logits - scipy.special.logsumexp(logits, axis=1, keepdims=True)
    value = -np.sum(targets * log_p) / n + lam * np.sum(weight * weight)
    residual = (np.exp(log_p) - targets) / n
    grad = [(residual.T @ features + 2 * lam * weight).ravel()]
    if fit_bias:
        grad.append(residual.sum(axis=0))
    return value, np.concatenate(grad)


def _hessian(params, features, lam, fit_bias, n_class):
    """Hessian of the objective at flattened (W, b), in the order of `params`."""
    n, width = features.shape
    x = np.hstack([features, np.ones((n, 1))]) if fit_bias else features
    logits = features @ params[:n_class * width].reshape(n_class, width).T
    p = softmax(logits + (params[n_class * width:] if fit_bias else 0))
    blocks = np.empty((n_class, x.shape[1], n_class, x.shape[1]))
    for c in range(n_class):
        for d in range(n_class):
            weights = p[:, c] * ((c == d) - p[:, d]) / n     # softmax Jacobian, per row
            blocks[c, :, d, :] = (x * weights[:, None]).T @ x
    # Reorder (class, feature-or-bias) to W row-major first, then b.
    order = np.arange(n_class * x.shape[1]).reshape(n_class, x.shape[1])
    order = np.concatenate([order[:, :width].ravel(), order[:, width:].ravel()])
    hessian = blocks.reshape(len(order), len(order))[np.ix_(order, order)]
    hessian[np.arange(n_class * width), np.arange(n_class * width)] += 2 * lam
    return hessian


def fit_last_layer_stationary(features, labels, lam=DEFAULT_LAMBDA, n_class=None,
                              initial=None, fit_bias=True, max_iter=20000, gtol=1e-12,
                              newton_steps=2):
    """The last layer (W (C, D), b (C,)) minimising (1/n) sum_i CE(W f_i + b, y_i) +
    lam |W|^2 over fixed features (N, D): L-BFGS from `initial` ((W, b), e.g. the
    model's own last layer) or zeros, then `newton_steps` Newton steps. The bias is
    unregularised (fit_bias=False keeps it 0). At the solution W = sum_i alpha_i f_i^T
    (representer_alphas at the fitted probabilities) up to |gradient| / (2 lam)."""
    features = as_rows(features, 'features').astype(np.float64)
    require(lam > 0, 'lam', 'must be positive, got {!r}'.format(lam))
    labels = np.asarray(labels)
    n_class = int(n_class or labels.max() + 1)
    width = features.shape[1]
    if initial is None:
        start = np.zeros(n_class * (width + (1 if fit_bias else 0)))
    else:
        start = np.concatenate([np.ravel(initial[0])] + ([np.ravel(initial[1])] if fit_bias
                                                         else [])).astype(np.float64)
    targets = last_layer.one_hot(labels, n_class)
    result = scipy.optimize.minimize(
        _objective, start, args=(features, targets, lam, fit_bias),
        jac=True, method='L-BFGS-B',
        options={'maxiter': max_iter, 'ftol': 0.0, 'gtol': gtol, 'maxcor': 30})
    params = result.x
    # L-BFGS stops once the objective's changes drown in rounding (|gradient| ~ 1e-9,
    # a residual |gradient| / (2 lam) in the theorem): Newton steps, which need only
    # the gradient, finish the job. lstsq: the free bias is defined up to a constant.
    for _ in range(newton_steps):
        grad = _objective(params, features, targets, lam, fit_bias)[1]
        hessian = _hessian(params, features, lam, fit_bias, n_class)
        params = params - np.linalg.lstsq(hessian, grad, rcond=None)[0]
    weight = params[:n_class * width].reshape(n_class, width)
    bias = params[n_class * width:] if fit_bias else np.zeros(n_class)
    return weight, bias


class Representer(Attribution):
    name = 'representer'
    description = 'representer points (Yeh et al. 2018): alpha_i[c] <f_i, f_t>'

    def __init__(self, lam=DEFAULT_LAMBDA, stationary=False):
        require(lam > 0, 'lam', 'must be positive, got {!r}'.format(lam))
        self.lam, self.stationary = float(lam), bool(stationary)

    def _fit(self, train):
        self.features = np.asarray(train.final.features, dtype=np.float64)
        probabilities = train.final.probabilities
        if self.stationary:
            self.weight, self.bias = fit_last_layer_stationary(
                self.features, train.labels, self.lam, train.n_class)
            probabilities = softmax(self.features @ self.weight.T + self.bias)
        self.alphas = representer_alphas(probabilities, train.labels, self.lam)

    def _prepare(self, test):
        require(test.final.features.shape[1] == self.features.shape[1], 'test',
                'features have {} dims, the training set\'s {}'.format(
                    test.final.features.shape[1], self.features.shape[1]))
        return np.asarray(test.final.features, dtype=np.float64), test.labels

    def _block(self, state, start, stop):
        features, explained = state
        return (features @ self.features[start:stop].T) * self.alphas[start:stop, explained].T

    def _self_influence(self):
        return np.abs(self.alphas[np.arange(len(self.alphas)), self.train.labels])
