"""Known answers of the attribution measures: identical class/subclass, LDS, random
halves and noisy-label detection."""
import math

import numpy as np
import pytest
import scipy.stats

from deepknn.evaluation.attribution_measures import (identical_class, identical_subclass,
                                                     lds, lds_interval, noisy_label_detection,
                                                     random_halves)
from deepknn.evaluation.statistics import Interval
from nlp_utils import UserError


def test_identical_class_and_subclass_on_a_constructed_case():
    # Top-1 training labels against the test predictions: 3 of 4 agree.
    assert identical_class([0, 1, 1, 2], [0, 1, 2, 2]) == 0.75
    assert identical_class([1], [0]) == 0.0
    assert identical_subclass(['imdb', 'yelp', 'yelp'], ['imdb', 'imdb', 'yelp']) == \
        pytest.approx(2 / 3)
    with pytest.raises(UserError) as error:
        identical_class([0, 1], [0])
    assert error.value.parameter == 'top1_train_labels'
    with pytest.raises(UserError):
        identical_subclass([], [])


def test_random_halves_are_exact_halves_and_reproducible():
    masks = random_halves(7, 40, seed=3)
    assert masks.shape == (40, 7) and masks.dtype == bool
    assert np.all(masks.sum(axis=1) == 3)
    np.testing.assert_array_equal(random_halves(7, 40, seed=3), masks)
    assert not np.array_equal(random_halves(7, 40, seed=4), masks)
    assert len({row.tobytes() for row in masks}) > 10          # not one subset repeated
    with pytest.raises(UserError) as error:
        random_halves(1, 5)
    assert error.value.parameter == 'n_train'


@pytest.fixture(scope='module')
def datamodel():
    """An exact linear datamodel: margins = masks @ w for three test inputs."""
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(3, 30))
    masks = random_halves(30, 60, seed=1)
    return weights, masks, masks @ weights.T


def test_lds_of_an_exact_linear_datamodel_is_one(datamodel):
    weights, masks, margins = datamodel
    np.testing.assert_allclose(lds(weights, masks, margins), 1, rtol=1e-12)
    # Any increasing transform of the margins keeps rank correlation 1.
    np.testing.assert_allclose(lds(weights, masks, np.exp(margins)), 1, rtol=1e-12)
    np.testing.assert_allclose(lds(weights, masks, -margins), -1, rtol=1e-12)


def test_lds_of_random_attributions_is_about_zero(datamodel):
    _, masks, _ = datamodel
    rng = np.random.default_rng(5)
    values = lds(rng.normal(size=(300, 30)), masks, rng.normal(size=(60, 300)))
    assert abs(values.mean()) < 0.05 and values.std() > 0.05


def test_lds_is_spearman_with_average_ranks_for_ties():
    masks = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [0, 1, 1]], dtype=bool)
    attributions = np.array([[1.0, 1.0, 2.0]])
    margins = np.array([[0.3], [0.1], [0.5], [0.4], [0.2]])
    expected = scipy.stats.spearmanr(masks @ attributions[0], margins[:, 0])[0]
    assert lds(attributions, masks, margins)[0] == pytest.approx(expected, rel=1e-12)


def test_lds_is_nan_where_predictions_or_margins_are_constant(datamodel):
    weights, masks, margins = datamodel
    constant = lds(np.zeros((3, 30)), masks, margins)
    assert np.all(np.isnan(constant))
    flat = margins.copy()
    flat[:, 1] = 2.0
    values = lds(weights, masks, flat)
    assert math.isnan(values[1]) and np.allclose(values[[0, 2]], 1)
    interval = lds_interval(values, n_resamples=200)
    assert isinstance(interval, Interval) and interval.n == 2
    assert interval.mean == pytest.approx(1.0)


def test_lds_rejects_mismatched_shapes(datamodel):
    weights, masks, margins = datamodel
    for args, parameter in [((weights[:, :5], masks, margins), 'subset_masks'),
                            ((weights, masks.astype(int), margins), 'subset_masks'),
                            ((weights, masks, margins.T), 'margins')]:
        with pytest.raises(UserError) as error:
            lds(*args)
        assert error.value.parameter == parameter


def test_noisy_label_detection_by_hand():
    result = noisy_label_detection([5, 4, 3, 2, 1], [True, False, True, False, False], k=2)
    assert result['precision_at_k'] == 0.5 and result['recall_at_k'] == 0.5
    assert result['average_precision'] == pytest.approx((1 + 2 / 3) / 2)
    assert result['auroc'] == pytest.approx(5 / 6)
    # Ties in the first k go to the smaller index.
    tied = noisy_label_detection([1, 1, 1, 0], [False, True, False, False], k=1)
    assert tied['precision_at_k'] == 0.0
    with pytest.raises(UserError) as error:
        noisy_label_detection([1, 2], [False, False], k=1)
    assert error.value.parameter == 'noisy'
