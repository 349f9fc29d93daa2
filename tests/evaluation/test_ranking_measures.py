"""The shared ranking measures (deepknn/evaluation/ranking.py) against scikit-learn's and
hand-computed answers, ties included."""
import math

import numpy as np
import pytest
from sklearn import metrics

from deepknn.evaluation import ranking


def cases():
    rng = np.random.RandomState(0)
    for n in (5, 40, 300):
        for tie_levels in (3, 1000):                 # many ties, almost none
            scores = rng.randint(0, tie_levels, n).astype(float)
            positive = rng.rand(n) < 0.3
            positive[0], positive[1] = True, False   # both classes
            yield scores, positive


@pytest.mark.parametrize('scores, positive', list(cases()))
def test_average_precision_and_auroc_are_scikit_learns(scores, positive):
    assert ranking.average_precision(scores, positive) == pytest.approx(
        metrics.average_precision_score(positive, scores), abs=1e-12)
    assert ranking.auroc(scores, positive) == pytest.approx(
        metrics.roc_auc_score(positive, scores), abs=1e-12)


@pytest.mark.parametrize('scores, positive', list(cases()))
def test_fpr_at_95_tpr_is_read_off_scikit_learns_roc_curve(scores, positive):
    fpr, tpr, _ = metrics.roc_curve(positive, scores, drop_intermediate=False)
    assert ranking.fpr_at_tpr(scores, positive, 0.95) == pytest.approx(
        fpr[np.argmax(tpr >= 0.95)], abs=1e-12)


def test_hand_computed_answers_and_the_rule_for_no_positive():
    assert ranking.average_precision([3, 2, 1], [True, False, True]) == pytest.approx(
        (1 + 2 / 3) / 2)
    assert ranking.average_precision([1, 1, 1, 1], [True, False, False, False]) == 0.25
    assert ranking.auroc([1, 1], [True, False]) == 0.5                # a tie counts half
    assert ranking.fpr_at_tpr([4, 3, 2, 1], [True, False, True, False], 0.95) == 0.5
    assert ranking.precision_recall_at_k([2, 0, 1, 3], [True, False, True, False], 2) == (1, 1)
    assert math.isnan(ranking.average_precision([1, 2], [False, False]))
    with pytest.raises(ValueError, match='no positive row'):
        ranking.average_precision([1, 2], [False, False], if_none='error')
    assert math.isnan(ranking.auroc([1, 2], [True, True]))
    with pytest.raises(ValueError, match='one length'):
        ranking.auroc([1, 2, 3], [True, False])
