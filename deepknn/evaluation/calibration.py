"""Calibration maths: softmax, temperature scaling, NLL, ECE and reliability bins.

Temperature scaling (Guo et al. 2017, "On Calibration of Modern Neural Networks"): one
scalar T > 0 divides the logits; it is fitted by minimising the negative log-likelihood
on the held-out calibration split, which leaves the argmax (and so the accuracy)
unchanged and only changes how confident the softmax is. The CLI `scaling.py` fits it
and writes temperature.json and the reliability diagram; nothing here draws or writes.
"""
import os
import warnings

import numpy as np
from scipy import optimize

from nlp_utils import UserError, read_json

N_BINS = 15
TEMPERATURE_FILE = 'temperature.json'
# Search range for log T: T in [e^-5, e^5] ~ [0.0067, 148] covers any sane model.
LOG_T_BOUNDS = (-5.0, 5.0)
# Searched when the first range's optimum lies at its edge (T in [4.5e-5, 22026]).
WIDE_LOG_T_BOUNDS = (-10.0, 10.0)
BOUND_TOLERANCE = 1e-3   # in log T


# ---------------------------------------------------------------- validation
def _check_logits(logits, what='logits'):
    """(N, C) finite array with N >= 1 and C >= 2 -> float64 copy."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim != 2:
        raise UserError('{} must have shape (N, C), got shape {}'.format(what, logits.shape))
    if logits.shape[0] == 0:
        raise UserError('no examples: {} are empty'.format(what))
    if logits.shape[1] < 2:
        raise UserError('need at least 2 classes, got {}'.format(logits.shape[1]))
    if not np.all(np.isfinite(logits)):
        raise UserError('{} contain NaN or infinite values'.format(what))
    return logits


def _check_labels(labels, n_examples, n_classes):
    """Integer labels (N,) in [0, n_classes) -> int64 array."""
    labels = np.asarray(labels)
    if labels.shape != (n_examples,):
        raise UserError('expected {} labels, got shape {}'.format(n_examples, labels.shape))
    if not np.issubdtype(labels.dtype, np.integer):
        raise UserError('labels must be integers, got dtype {}'.format(labels.dtype))
    if labels.min() < 0 or labels.max() >= n_classes:
        raise UserError('labels must lie in [0, {}), got range [{}, {}]'.format(
            n_classes, labels.min(), labels.max()))
    return labels.astype(np.int64)


def _check_temperature(temperature):
    if not (np.isfinite(temperature) and temperature > 0):
        raise UserError('temperature must be a positive finite number, got {}'.format(
            temperature))


def _check_confidences(confidences, correct):
    """Confidences (N,) in [0, 1] and correctness flags (N,) -> (float64, bool) arrays."""
    confidences = np.asarray(confidences, dtype=np.float64)
    correct = np.asarray(correct)
    if confidences.ndim != 1 or confidences.shape != correct.shape:
        raise UserError('confidences and correct must be 1-d of equal length, got {} and {}'
                        .format(confidences.shape, correct.shape))
    if confidences.size == 0:
        raise UserError('no examples: confidences are empty')
    if not np.all(np.isfinite(confidences)):
        raise UserError('confidences contain NaN or infinite values')
    if confidences.min() < 0 or confidences.max() > 1:
        raise UserError('confidences must lie in [0, 1], got range [{}, {}]'.format(
            confidences.min(), confidences.max()))
    return confidences, correct.astype(bool)


# ---------------------------------------------------------------- softmax and NLL
def _log_softmax(logits, temperature):
    """(N, C) checked logits -> (N, C) log-probabilities of softmax(logits / T)."""
    scaled = logits / temperature
    # Subtracting the row max keeps exp() from overflowing; it cancels in the ratio.
    shifted = scaled - scaled.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def softmax(logits, temperature=1.0):
    """Row-wise softmax of logits / T: (N, C) -> (N, C) float64, rows sum to 1."""
    _check_temperature(temperature)
    return np.exp(_log_softmax(_check_logits(logits), temperature))


def nll(logits, labels, temperature=1.0):
    """Mean negative log-likelihood of int labels (N,) under softmax(logits (N, C) / T)."""
    _check_temperature(temperature)
    logits = _check_logits(logits)
    labels = _check_labels(labels, *logits.shape)
    return _nll_checked(logits, labels, temperature)


def _nll_checked(logits, labels, temperature):
    log_probs = _log_softmax(logits, temperature)
    return float(-log_probs[np.arange(len(labels)), labels].mean())


def fit_temperature(logits, labels):
    """The T > 0 minimising nll(logits (N, C), labels (N,), T).

    NLL is convex in 1/T, hence unimodal in log T, so a bounded Brent search on
    log T finds the global minimum deterministically. The tolerance on log T
    (1e-7) gives T to a relative accuracy far better than 1e-3.
    """
    logits = _check_logits(logits)
    labels = _check_labels(labels, *logits.shape)
    for low, high in (LOG_T_BOUNDS, WIDE_LOG_T_BOUNDS):
        result = optimize.minimize_scalar(
            lambda log_t: _nll_checked(logits, labels, np.exp(log_t)),
            bounds=(low, high), method='bounded', options={'xatol': 1e-7})
        if min(result.x - low, high - result.x) > BOUND_TOLERANCE:
            return float(np.exp(result.x))
    # NLL still falls at the edge: the logits are (nearly) uninformative or separable.
    warnings.warn('the fitted temperature {:.4g} lies at the edge of the search range '
                  '[{:.3g}, {:.3g}]: the calibration split is too easy or too hard for '
                  'temperature scaling to mean much'.format(
                      float(np.exp(result.x)), np.exp(low), np.exp(high)))
    return float(np.exp(result.x))


# ---------------------------------------------------------------- calibration error
def reliability_bins(confidences, correct, n_bins=N_BINS):
    """Group confidences (N,) into n_bins equal-width bins (lower, upper] on [0, 1].

    Returns a dict of (n_bins,) arrays: bin_lower, bin_upper, mean_confidence,
    accuracy (fraction of `correct` (N,) bool), count. Empty bins have count 0
    and NaN mean_confidence and accuracy. A confidence of exactly 0 goes in the
    first bin.
    """
    confidences, correct = _check_confidences(confidences, correct)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    # side='left' puts a value equal to an inner edge in the bin below: (lower, upper].
    bin_index = np.searchsorted(edges[1:-1], confidences, side='left')
    count = np.bincount(bin_index, minlength=n_bins)
    with np.errstate(invalid='ignore', divide='ignore'):
        mean_confidence = np.bincount(bin_index, confidences, n_bins) / count
        accuracy = np.bincount(bin_index, correct.astype(np.float64), n_bins) / count
    return {'bin_lower': edges[:-1], 'bin_upper': edges[1:],
            'mean_confidence': mean_confidence, 'accuracy': accuracy, 'count': count}


def binned_calibration_error(confidences, correct, n_bins=N_BINS):
    """ECE of any confidence score (N,) against correctness (N,) bool:
    sum over bins of (bin count / N) * |accuracy - mean confidence|."""
    bins = reliability_bins(confidences, correct, n_bins)
    filled = bins['count'] > 0
    gaps = np.abs(bins['accuracy'][filled] - bins['mean_confidence'][filled])
    return float((bins['count'][filled] * gaps).sum() / bins['count'].sum())


def reliability_curve(label, confidences, correct, n_bins=N_BINS):
    """What plots.reliability_figure draws for one score: {'label', 'bins' (see
    reliability_bins), 'ece'}."""
    return {'label': label, 'bins': reliability_bins(confidences, correct, n_bins),
            'ece': binned_calibration_error(confidences, correct, n_bins)}


def expected_calibration_error(probs, labels, n_bins=N_BINS):
    """ECE of class probabilities (N, C) against int labels (N,), binning the max prob."""
    probs = _check_logits(probs, 'probs')
    labels = _check_labels(labels, *probs.shape)
    correct = probs.argmax(axis=1) == labels
    return binned_calibration_error(probs.max(axis=1), correct, n_bins)


# ---------------------------------------------------------------- results on disk
def calibration_summary(logits, labels, n_bins=N_BINS):
    """Fit T on logits (N, C) / labels (N,) and report NLL and ECE before and after."""
    temperature = fit_temperature(logits, labels)
    return {
        'temperature': temperature,
        'nll_before': nll(logits, labels),
        'nll_after': nll(logits, labels, temperature),
        'ece_before': expected_calibration_error(softmax(logits), labels, n_bins),
        'ece_after': expected_calibration_error(softmax(logits, temperature), labels, n_bins),
        'n_calib': int(len(labels)),
        'n_bins': n_bins,
    }


def load_temperature(result_dir):
    """The fitted T from <result_dir>/temperature.json."""
    path = os.path.join(result_dir, TEMPERATURE_FILE)
    if not os.path.exists(path):
        raise UserError('no {} in {}; run `scaling` `model_setup` {} first'.format(
            TEMPERATURE_FILE, result_dir, os.path.join(result_dir, 'args.json')))
    saved = read_json(path, 'temperature file')
    temperature = saved.get('temperature') if isinstance(saved, dict) else None
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) \
            or not np.isfinite(temperature) or temperature <= 0:
        raise UserError('{} has no positive "temperature"; run `scaling` again'.format(path))
    return float(temperature)
