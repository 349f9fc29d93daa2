"""Trust scorers of the logits and of one layer (deepknn/shift/logit_scorers.py,
feature_scorers.py, base.py) against closed forms, hand computations, scikit-learn's
EmpiricalCovariance and brute-force neighbour search."""
import math

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from sklearn.covariance import EmpiricalCovariance

from deepknn.evaluation import calibration
from deepknn.shift.scorers import SCORERS, Outputs
from nlp_utils import UserError

# 2-D class clusters with means (1, 0) and (5, 0); both centre to (+-1, 0), (0, +-1):
# pooled within-class covariance 0.5 I. All 8 rows: mean (3, 0), covariance diag(4.5, 0.5).
HAND_X = np.array([[0, 0], [2, 0], [1, 1], [1, -1], [4, 0], [6, 0], [5, 1], [5, -1]], float)
HAND_Y = np.array([0, 0, 0, 0, 1, 1, 1, 1])


def outputs(*layers, n_class=2):
    """Outputs whose layers are `layers` then zero logits of n_class classes."""
    logits = np.zeros((len(layers[0]), n_class))
    return Outputs(logits, list(layers) + [logits])


def fitted(name, train_layer, labels, **options):
    """SCORERS[name](**options) fitted with `train_layer` as training and calibration
    layer 0, with as many classes as the highest label needs (at least 2)."""
    train = outputs(train_layer, n_class=max(2, int(np.max(labels)) + 1))
    return SCORERS[name](**options).fit(train, labels, train, labels)


def test_registry_lists_every_scorer_in_order():
    assert list(SCORERS) == ['msp', 'temperature', 'energy', 'mahalanobis',
                             'relative-mahalanobis', 'knn-sun', 'dknn-credibility',
                             'dknn-confidence', 'dknn-normalized', 'dknn-layer',
                             'dknn-selected']


def test_msp_and_energy_closed_forms():
    logits = np.array([[0, math.log(3)], [1, 1]], float)
    batch = Outputs(logits, [logits])
    scorer = SCORERS['msp']().fit(batch, [0, 1], batch, [0, 1])
    np.testing.assert_allclose(scorer.score(batch), [0.75, 0.5])
    energy = SCORERS['energy']().fit(batch, [0, 1], batch, [0, 1])
    np.testing.assert_allclose(energy.score(batch), [math.log(4), 1 + math.log(2)])
    # T = 2: 2 * log(exp(0) + exp(ln3 / 2)) = 2 log(1 + sqrt 3).
    energy_2 = SCORERS['energy'](temperature=2.0).fit(batch, [0, 1], batch, [0, 1])
    assert energy_2.score(batch)[0] == pytest.approx(2 * math.log(1 + math.sqrt(3)))
    huge = Outputs(np.array([[1000.0, 0.0]]), [np.zeros((1, 1))])
    assert SCORERS['energy']().fit(huge, [0], huge, [0]).score(huge)[0] == pytest.approx(1000)


def test_temperature_scorer_uses_the_temperature_fitted_on_calibration():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 400)
    logits = rng.normal(0, 1, (400, 3)) + 4 * np.eye(3)[labels] * rng.random((400, 1))
    train = Outputs(np.zeros((5, 3)), [np.zeros((5, 1))])
    calib = Outputs(logits, [np.zeros((400, 1))])
    scorer = SCORERS['temperature']().fit(train, labels[:5] * 0, calib, labels)
    temperature = calibration.fit_temperature(logits, labels)
    assert scorer.temperature == pytest.approx(temperature)
    np.testing.assert_allclose(scorer.score(calib),
                               calibration.softmax(logits, temperature).max(axis=1))


def test_mahalanobis_by_hand():
    scorer = fitted('mahalanobis', HAND_X, HAND_Y, layer=0)
    batch = outputs(np.array([[2, 1], [3, 0]], float))
    # S^-1 = 2 I: (2, 1) is 2 * (1 + 1) = 4 from (1, 0); (3, 0) is 2 * 4 = 8 from both.
    np.testing.assert_allclose(scorer.class_distances(batch), [[4, 20], [8, 8]])
    np.testing.assert_allclose(scorer.score(batch), [-4, -8])


def test_relative_mahalanobis_by_hand_and_as_the_difference():
    batch = outputs(np.array([[2, 1], [3, 0]], float))
    relative = fitted('relative-mahalanobis', HAND_X, HAND_Y, layer=0)
    background = np.array([1 / 4.5 + 1 / 0.5, 0.0])       # under diag(4.5, 0.5), mean (3, 0)
    np.testing.assert_allclose(relative.background_distances(batch), background)
    np.testing.assert_allclose(relative.score(batch), background - [4, 8])
    plain = fitted('mahalanobis', HAND_X, HAND_Y, layer=0)
    np.testing.assert_allclose(relative.score(batch), plain.score(batch) + background)


def test_mahalanobis_on_gaussians_equals_scikit_learns_pooled_covariance():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 3, 600)
    means = np.array([[0, 0, 0], [3, 1, 0], [0, 3, 2]])
    mixing = np.array([[1, 0.5, 0], [0, 1, 0.3], [0.2, 0, 0.5]])
    x = means[labels] + rng.normal(0, 1, (600, 3)) @ mixing
    query = rng.normal(1, 2, (50, 3))
    scorer = fitted('mahalanobis', x, labels, layer=0)
    class_means = np.stack([x[labels == c].mean(axis=0) for c in range(3)])
    centred = x - class_means[labels]
    pooled = EmpiricalCovariance(assume_centered=True).fit(centred)
    reference = np.stack([pooled.mahalanobis(query - mu) for mu in class_means], axis=1)
    batch = outputs(query, n_class=3)
    np.testing.assert_allclose(scorer.class_distances(batch), reference, rtol=1e-9)
    inverse = np.linalg.inv(centred.T @ centred / 600)    # full rank: the plain inverse
    hand = np.einsum('nd,de,ne->n', query - class_means[0], inverse, query - class_means[0])
    np.testing.assert_allclose(scorer.class_distances(batch)[:, 0], hand, rtol=1e-9)
    background = EmpiricalCovariance().fit(x).mahalanobis(query)
    relative = fitted('relative-mahalanobis', x, labels, layer=0)
    np.testing.assert_allclose(relative.score(batch),
                               background - reference.min(axis=1), rtol=1e-9, atol=1e-9)


def test_dead_units_use_the_pseudo_inverse():
    rng = np.random.default_rng(2)
    labels = rng.integers(0, 2, 200)
    live = rng.normal(0, 1, (200, 2)) + 3 * labels[:, None]
    x = np.hstack([live, np.zeros((200, 2))])             # two dead ReLU units
    query = np.hstack([rng.normal(0, 1, (10, 2)), rng.normal(0, 1, (10, 2))])
    dead = fitted('mahalanobis', x, labels, layer=0).score(outputs(query))
    alive = fitted('mahalanobis', live, labels, layer=0).score(outputs(query[:, :2]))
    np.testing.assert_allclose(dead, alive, rtol=1e-9)    # dead units add nothing
    assert np.all(np.isfinite(dead))


def test_knn_sun_equals_brute_force_on_normalised_vectors():
    rng = np.random.default_rng(3)
    train, query = rng.normal(0, 1, (120, 5)), rng.normal(0.5, 1, (30, 5))
    logits = rng.normal(0, 1, (120, 2))
    scorer = SCORERS['knn-sun'](k=7).fit(Outputs(logits, [train, logits]), logits.argmax(1),
                                         Outputs(logits, [train, logits]), logits.argmax(1))
    normalise = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)  # noqa: E731
    expected = -np.sort(cdist(normalise(query), normalise(train)), axis=1)[:, 6]
    batch = Outputs(logits[:30], [query, logits[:30]])
    np.testing.assert_allclose(scorer.score(batch), expected, rtol=1e-5)


def test_knn_sun_by_hand():
    # Normalised: (1, 0), (0, 1), (1, 1)/sqrt 2; the query (5, 0) normalises to (1, 0).
    scorer = fitted('knn-sun', np.array([[1, 0], [0, 2], [3, 3]], float), [0, 1, 0],
                    k=2, layer=0)
    assert scorer.score(outputs(np.array([[5.0, 0]])))[0] == pytest.approx(
        -math.sqrt(2 - math.sqrt(2)), rel=1e-6)


def test_layer_argument_picks_the_layer_and_defaults_to_the_penultimate():
    rng = np.random.default_rng(4)
    first, penultimate = rng.normal(0, 1, (40, 3)), rng.normal(0, 1, (40, 4))
    logits = rng.normal(0, 1, (40, 2))
    data, labels = Outputs(logits, [first, penultimate, logits]), logits.argmax(1)
    default = SCORERS['mahalanobis']().fit(data, labels, data, labels)
    assert default.layer_index == 1
    for layer, activations in ((0, first), (-3, first), (2, logits)):
        scorer = SCORERS['mahalanobis'](layer=layer).fit(data, labels, data, labels)
        alone = fitted('mahalanobis', activations, labels, layer=0)
        np.testing.assert_allclose(scorer.score(data), alone.score(outputs(activations)))


def test_errors_name_the_parameter():
    data = outputs(HAND_X)
    with pytest.raises(UserError, match=r'`k`=9 is larger than the 8 training examples'):
        SCORERS['knn-sun'](k=9, layer=0).fit(data, HAND_Y, data, HAND_Y)
    with pytest.raises(UserError, match='`k` must be an integer >= 1, got 0'):
        SCORERS['knn-sun'](k=0)
    with pytest.raises(UserError, match=r'`layer` must index one of the 2 layers \(-2..1\), '
                                        r'got 5'):
        SCORERS['mahalanobis'](layer=5).fit(data, HAND_Y, data, HAND_Y)
    with pytest.raises(UserError, match='unknown nearest-neighbour backend'):
        SCORERS['knn-sun'](backend='nope')
    with pytest.raises(UserError, match='`temperature` must be a positive number'):
        SCORERS['energy'](temperature=0)
    with pytest.raises(UserError, match='call fit'):
        SCORERS['msp']().score(data)
    scorer = SCORERS['msp']().fit(data, HAND_Y, data, HAND_Y)
    with pytest.raises(UserError, match='`batch` has layer widths'):
        scorer.score(outputs(np.zeros((2, 3))))
    with pytest.raises(UserError, match=r'`train_labels` must lie in \[0, 2\)'):
        SCORERS['msp']().fit(data, HAND_Y + 1, data, HAND_Y)
    with pytest.raises(UserError, match='`calib_labels` must be 8 integer class ids'):
        SCORERS['msp']().fit(data, HAND_Y, data, HAND_Y[:3])
    with pytest.raises(UserError, match='`layers` must have one row per row of `logits`'):
        Outputs(np.zeros((3, 2)), [np.zeros((4, 2))])
    with pytest.raises(UserError, match=r'`layers`\[0\] contain NaN'):
        Outputs(np.zeros((1, 2)), [np.array([[np.nan]])])
