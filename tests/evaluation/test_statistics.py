"""deepknn.evaluation.statistics: the bootstrap of any statistic and the one summary of
every study, against closed forms and the per-mean bootstrap."""
import math

import numpy as np
import pytest

from deepknn.evaluation import ranking, statistics


def test_a_statistic_of_constant_data_has_a_point_interval():
    interval = statistics.bootstrap_statistic_ci(np.mean, [np.full(20, 0.3)], 200)
    assert (interval.mean, interval.low, interval.high, interval.n) == pytest.approx(
        (0.3, 0.3, 0.3, 20))


def test_the_bootstrap_of_a_mean_matches_the_normal_approximation():
    values = np.random.default_rng(1).normal(size=400)
    interval = statistics.bootstrap_statistic_ci(np.mean, [values], 2000, seed=3)
    half_width = 1.96 * values.std() / math.sqrt(len(values))
    assert interval.mean == pytest.approx(values.mean())
    assert (interval.high - interval.low) / 2 == pytest.approx(half_width, rel=0.1)


def test_an_auroc_interval_resamples_scores_and_truth_together():
    scores = np.array([0.9, 0.8, 0.7, 0.2, 0.1, 0.05])
    positive = np.array([True, True, True, False, False, False])
    interval = statistics.bootstrap_statistic_ci(ranking.auroc, [scores, positive], 300)
    # perfectly separated: every resample with both classes has AUROC 1; single-class
    # resamples (NaN) are left out
    assert (interval.mean, interval.low, interval.high) == (1.0, 1.0, 1.0)


def test_arrays_of_two_lengths_are_refused():
    with pytest.raises(Exception, match='one length'):
        statistics.bootstrap_statistic_ci(ranking.auroc, [np.ones(3), np.ones(4, bool)])


def test_one_summary_for_every_study():
    values = {'a': {'m1': np.array([1.0, 2.0, 3.0]), 'm2': np.array([0.0, 1.0, np.nan])},
              'b': {'m1': np.array([1.0, 1.0, 1.0]), 'm2': np.array([1.0, 1.0, 1.0])}}
    rows = statistics.summarize_measures(values, 100, classifier='softmax')
    assert [(r.method, r.measure, r.classifier) for r in rows] == [
        ('a', 'm1', 'softmax'), ('a', 'm2', 'softmax'), ('b', 'm1', 'softmax'),
        ('b', 'm2', 'softmax')]
    assert rows[0].interval == statistics.bootstrap_ci(values['a']['m1'], 100)
    assert rows[1].interval.n == 2 and rows[1].interval.mean == 0.5
    differences = statistics.paired_measure_differences(
        values, [('a', 'b'), ('a', 'missing')], ['m2'], 100)
    assert [(d.method, d.baseline, d.measure) for d in differences] == [('a', 'b', 'm2')]
    assert differences[0].interval == statistics.paired_bootstrap_ci(
        values['a']['m2'], values['b']['m2'], 100)
