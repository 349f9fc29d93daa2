"""Conformal prediction measures: prediction sets from p-values, their coverage and size,
and p-values weighted for covariate shift with the weights a domain classifier gives.

P-values are (n, C) in [0, 1], one per test input and candidate class. The DkNN's
(deepknn.neighbors.dknn.DkNN, Papernot & McDaniel 2018) is the fraction of the m calibration
nonconformity scores >= the candidate's: count / m. The standard split-conformal p-value
counts the test point too, (count + 1) / (m + 1), which weighted_p_values gives with all
weights 1. Either way a set {j : p_j > alpha} holds the true label with probability about
1 - alpha when calibration and test data are exchangeable; under covariate shift only
the weighted p-values of Tibshirani, Barber, Candes and Ramdas (2019, "Conformal
prediction under covariate shift") keep that promise, given the likelihood ratio.
"""
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from nlp_utils import UserError

# Log-odds of the domain classifier are clipped here before exp(): a point the classifier
# is all but certain about gets a large finite weight instead of inf or 0.
MAX_LOG_ODDS = 30.0


def _matrix(values, name, columns=None):
    """A finite float64 (n, C) copy of `values`, or a UserError naming `name`."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] == 0 or values.shape[1] == 0:
        raise UserError('`{}` must be a non-empty (n, C) array, got shape {}'.format(
            name, values.shape), parameter=name)
    if columns is not None and values.shape[1] != columns:
        raise UserError('`{}` must have {} columns, got {}'.format(
            name, columns, values.shape[1]), parameter=name)
    if not np.all(np.isfinite(values)):
        raise UserError('`{}` must be finite'.format(name), parameter=name)
    return values


def _vector(values, name, length=None, nonnegative=False):
    """A finite float64 (n,) copy of `values`, or a UserError naming `name`."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or values.size == 0 or (length is not None and len(values) != length):
        raise UserError('`{}` must be a non-empty (n,) array{}, got shape {}'.format(
            name, '' if length is None else ' of length {}'.format(length), values.shape),
            parameter=name)
    if not np.all(np.isfinite(values)) or (nonnegative and values.min() < 0):
        raise UserError('`{}` must be finite{}'.format(
            name, ' and >= 0' if nonnegative else ''), parameter=name)
    return values


def _sets(sets):
    """`sets` as a bool (n, C) array, or a UserError."""
    sets = np.asarray(sets)
    if sets.ndim != 2 or sets.shape[0] == 0 or sets.dtype != np.bool_:
        raise UserError('`sets` must be a non-empty bool (n, C) array, got {} of {}'.format(
            sets.shape, sets.dtype), parameter='sets')
    return sets


# ---------------------------------------------------------------- sets and their measures
def prediction_sets(p_values, alpha):
    """The conformal prediction sets: p_values (n, C) in [0, 1] -> bool (n, C), class j
    in row i's set when p_values[i, j] > alpha (alpha in (0, 1), the error rate allowed)."""
    p_values = _matrix(p_values, 'p_values')
    if p_values.min() < 0 or p_values.max() > 1:
        raise UserError('`p_values` must lie in [0, 1], got range [{}, {}]'.format(
            p_values.min(), p_values.max()), parameter='p_values')
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.number)) \
            or not 0 < alpha < 1:
        raise UserError('`alpha` must lie in (0, 1), got {!r}'.format(alpha),
                        parameter='alpha')
    return p_values > alpha


def set_coverage(sets, labels):
    """Fraction of rows whose set (n, C) bool holds the true label, labels (n,) ints."""
    sets = _sets(sets)
    labels = np.asarray(labels)
    if labels.shape != (len(sets),) or not np.issubdtype(labels.dtype, np.integer) \
            or labels.min() < 0 or labels.max() >= sets.shape[1]:
        raise UserError('`labels` must be {} integer class ids in [0, {}), got {} of {}'
                        .format(len(sets), sets.shape[1], labels.shape, labels.dtype),
                        parameter='labels')
    return float(sets[np.arange(len(sets)), labels].mean())


def mean_set_size(sets):
    """Mean number of classes in a set, sets (n, C) bool: 1 is a sure classifier, C one
    that cannot rule out any class, 0 an input no class conforms to (out of distribution)."""
    return float(_sets(sets).sum(axis=1).mean())


# ---------------------------------------------------------------- covariate shift
def weighted_p_values(calibration_scores, calibration_weights, test_nonconformity,
                      test_weights):
    """Weighted conformal p-values (Tibshirani et al. 2019), (n, C):

        p_i(y) = (sum_{j : V_j >= V_i(y)} w_j + w_i) / (sum_j w_j + w_i)

    with V_j the calibration_scores (m,) (each calibration example's nonconformity at its
    true label), w_j the calibration_weights (m,), V_i(y) = test_nonconformity[i, y]
    (n, C) and w_i = test_weights[i] (n,); weights are the likelihood ratio
    dP_test/dP_calibration of each input (domain_classifier_weights), >= 0. The test
    point's own weight sits in the numerator as the paper's point mass at +infinity, so
    y is in the paper's set exactly when p_i(y) > alpha (prediction_sets).

    With all weights 1 this is (count + 1) / (m + 1), count = #{j : V_j >= V_i(y)}: the
    standard split-conformal p-value, slightly larger than the DkNN's count / m (by
    (1 - count/m) / (m + 1)), so its sets are never smaller."""
    scores = _vector(calibration_scores, 'calibration_scores')
    weights = _vector(calibration_weights, 'calibration_weights', len(scores), True)
    nonconformity = _matrix(test_nonconformity, 'test_nonconformity')
    test_weights = _vector(test_weights, 'test_weights', len(nonconformity), True)
    if np.any(weights.sum() + test_weights == 0):
        raise UserError('`calibration_weights` and `test_weights` are all 0 for some test '
                        'input; the p-value is undefined', parameter='calibration_weights')
    order = np.argsort(scores, kind='stable')
    sorted_scores, sorted_weights = scores[order], weights[order]
    # weight_from[j] = total weight of the sorted scores j.. (the last entry: none).
    weight_from = np.r_[np.cumsum(sorted_weights[::-1])[::-1], 0.0]
    first_at_least = np.searchsorted(sorted_scores, nonconformity, side='left')
    own = test_weights[:, None]
    # The suffix sums round differently from the total: clipped, a p-value stays in [0, 1].
    return np.minimum((weight_from[first_at_least] + own) / (weights.sum() + own), 1.0)


def domain_classifier_weights(source_features, target_features, seed=0, C=1.0):
    """Likelihood ratios w(x) = dP_target/dP_source from a domain classifier:
    source_features (m, D), target_features (t, D) -> (source_weights (m,),
    target_weights (t,)), the same function w evaluated on both sets.

    A logistic regression (L2 penalty of inverse strength `C`) learns P(target | x) from
    the pooled features; by Bayes' rule w(x) = P(target|x) / P(source|x) * m / t, the
    last factor undoing the share of each set in the pool. The features are standardised
    (on the pool) first because the L2 penalty treats every coefficient alike, so it is
    only fair when the features share one scale, and because lbfgs converges in far fewer
    steps on standardised activations, whose units differ in scale by orders of
    magnitude. Log-odds are clipped to +-MAX_LOG_ODDS. `seed` is the classifier's
    random_state (lbfgs itself draws nothing; the fit is deterministic)."""
    source = _matrix(source_features, 'source_features')
    target = _matrix(target_features, 'target_features', source.shape[1])
    if not (isinstance(C, (int, float, np.number)) and C > 0 and np.isfinite(C)):
        raise UserError('`C` must be a positive number, got {!r}'.format(C), parameter='C')
    pooled = StandardScaler().fit_transform(np.vstack([source, target]))
    is_target = np.r_[np.zeros(len(source)), np.ones(len(target))]
    classifier = LogisticRegression(C=C, max_iter=1000, random_state=seed)
    log_odds = classifier.fit(pooled, is_target).decision_function(pooled)
    weights = np.exp(np.clip(log_odds, -MAX_LOG_ODDS, MAX_LOG_ODDS)) * len(source) / len(target)
    return weights[:len(source)], weights[len(source):]
