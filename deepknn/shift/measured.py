"""Every measure of a shift study (study.py's StudyRun) as rows with 95% bootstrap
intervals: misclassification detection, selective prediction, out-of-distribution
detection, calibration and conformal coverage, per set and scorer.

A row: {'set', 'role', 'scorer', 'measure', 'value', 'low', 'high', 'n'}. Scores rank
trust (higher = more trusted); the right/wrong truth is always the softmax prediction's,
so every scorer is judged on the same question, except the DkNN's calibration rows
(its own prediction).
"""
import copy
import functools

import numpy as np
import tqdm

from deepknn.evaluation import calibration, conformal, ranking, selective, statistics
from deepknn.shift import sets as sets_lib

COVERAGES = (0.8, 0.9)           # selective accuracy at these coverages
ALPHAS = (0.1, 0.05)             # conformal prediction sets at these error levels
RECALIBRATION_SHARE = 0.2        # labelled share of a target set used to recalibrate
RECALIBRATION_SEED = 0


def _row(shift_set, scorer, measure, interval):
    return {'set': shift_set.name, 'role': shift_set.role, 'scorer': scorer,
            'measure': measure, 'value': interval.mean, 'low': interval.low,
            'high': interval.high, 'n': interval.n}


def _aupr_error(scores, correct):
    """AUPR of finding the wrong predictions, ranked by distrust (-score)."""
    return ranking.average_precision(-np.asarray(scores), ~np.asarray(correct, bool))


def _selective(coverage, scores, correct):
    return selective.selective_accuracy(scores, correct, coverage)[0]


def trust_measures(correct):
    """{measure: statistic(scores, correct)} of misclassification detection and
    selective prediction."""
    measures = {'auroc': lambda s, c: ranking.auroc(s, c), 'aupr_error': _aupr_error,
                'aurc': selective.aurc}
    for coverage in COVERAGES:
        measures['accuracy@{:.0%}'.format(coverage)] = functools.partial(_selective, coverage)
    return measures


def misclassification_rows(study, n_resamples, seed=0):
    """Per labelled set and scorer: AUROC of right vs wrong, AUPR of the wrong ones,
    AURC and selective accuracy at COVERAGES (softmax predictions); the per-layer scorers
    ('name@layer', for the per-layer table) AUROC only."""
    rows = []
    for result in tqdm.tqdm(study.sets, desc='bootstrapping measures', unit='set'):
        if result.shift_set.gold is None:
            continue
        correct = result.shift_set.correct(result.softmax_prediction)
        measures = trust_measures(correct)
        for label in study.labels:
            for measure, statistic in measures.items():
                if '@' in label and measure != 'auroc':
                    continue
                rows.append(_row(result.shift_set, label, measure, statistics.bootstrap_statistic_ci(
                    statistic, [result.scores[label], correct], n_resamples, seed=seed)))
    return rows


def ood_rows(study, n_resamples, seed=0):
    """Per other-task (or unlabelled named) set and scorer: AUROC and FPR at 95% TPR of
    telling the in-distribution test set (positive) from it."""
    test = study.sets[0]
    rows = []
    for result in study.sets[1:]:
        if result.shift_set.role not in (sets_lib.OTHER_TASK, sets_lib.NAMED_FILE) \
                or result.shift_set.gold is not None:
            continue
        inside = np.r_[np.ones(len(test.softmax_prediction), bool),
                       np.zeros(len(result.softmax_prediction), bool)]
        for label in study.labels:
            scores = np.r_[test.scores[label], result.scores[label]]
            for measure, statistic in (('ood_auroc', ranking.auroc),
                                       ('fpr@95%tpr', ranking.fpr_at_tpr)):
                rows.append(_row(result.shift_set, label, measure,
                                 statistics.bootstrap_statistic_ci(
                                     statistic, [scores, inside], n_resamples, seed=seed)))
    return rows


def calibration_rows(study, n_resamples, seed=0):
    """Per labelled set: ECE of softmax, temperature-scaled softmax (softmax correct) and
    DkNN credibility and confidence (DkNN correct)."""
    rows = []
    for result in study.sets:
        if result.shift_set.gold is None:
            continue
        softmax_correct = result.shift_set.correct(result.softmax_prediction)
        dknn_correct = result.shift_set.correct(result.dknn['prediction'])
        for label, confidence, correct in (
                ('msp', result.scores['msp'], softmax_correct),
                ('temperature', result.scores['temperature'], softmax_correct),
                ('dknn-credibility', result.dknn['credibility'], dknn_correct),
                ('dknn-confidence', result.dknn['confidence'], dknn_correct)):
            rows.append(_row(result.shift_set, label, 'ece', statistics.bootstrap_statistic_ci(
                calibration.binned_calibration_error, [confidence, correct], n_resamples,
                seed=seed)))
    return rows


def conformal_p_values(study, result):
    """{'standard', 'weighted', 'recalibrated'}: (p-values (n', C), gold (n',)) of a
    labelled set. Weighted: Tibshirani et al.'s p-values, weights from a domain classifier
    on the penultimate layer (calibration split vs this set, labels unused).
    Recalibrated: a seeded RECALIBRATION_SHARE of the set, labelled, calibrates the DkNN;
    the other rows are measured."""
    gold = result.shift_set.gold
    source_weights, target_weights = conformal.domain_classifier_weights(
        study.calibration_penultimate, result.penultimate)
    weighted = conformal.weighted_p_values(study.calibration_scores, source_weights,
                                           result.nonconformity, target_weights)
    rows = np.random.default_rng(RECALIBRATION_SEED).permutation(len(gold))
    part, rest = rows[:int(RECALIBRATION_SHARE * len(gold))], rows[int(RECALIBRATION_SHARE * len(gold)):]
    recalibrated = copy.copy(study.dknn)
    recalibrated.calibration_scores = np.sort(result.nonconformity[part, gold[part]])
    return {'standard': (result.dknn['p_values'], gold), 'weighted': (weighted, gold),
            'recalibrated': (recalibrated.p_values(result.nonconformity[rest]), gold[rest])}


def conformal_rows(study, n_resamples, seed=0, alphas=ALPHAS):
    """Per labelled set with the model's labels (not HANS-like's two) and way of
    calibrating: coverage and mean set size of DkNN prediction sets at each alpha."""
    rows = []
    for result in study.sets:
        if result.shift_set.gold is None or result.shift_set.collapse is not None:
            continue
        for way, (p_values, gold) in conformal_p_values(study, result).items():
            for alpha in alphas:
                chosen = conformal.prediction_sets(p_values, alpha)
                covered = chosen[np.arange(len(gold)), gold].astype(np.float64)
                for measure, values in (('coverage', covered),
                                        ('set_size', chosen.sum(axis=1).astype(np.float64))):
                    rows.append(_row(result.shift_set, 'dknn-' + way,
                                     '{}@alpha={:g}'.format(measure, alpha),
                                     statistics.bootstrap_ci(values, n_resamples, seed=seed)))
    return rows


def all_rows(study, n_resamples=1000, seed=0):
    """Every measure's rows of a StudyRun, in the order above."""
    return (misclassification_rows(study, n_resamples, seed) + ood_rows(study, n_resamples, seed)
            + calibration_rows(study, n_resamples, seed) + conformal_rows(study, n_resamples, seed))


def coverage_curves(study, alphas):
    """{set: {way: (len(alphas),) coverage}} of the conformal sets of every labelled set
    with the model's labels, for the figure of coverage against alpha."""
    curves = {}
    for result in study.sets:
        if result.shift_set.gold is None or result.shift_set.collapse is not None:
            continue
        curves[result.shift_set.name] = {
            way: np.array([conformal.set_coverage(conformal.prediction_sets(p, alpha), gold)
                           for alpha in alphas])
            for way, (p, gold) in conformal_p_values(study, result).items()}
    return curves


def risk_coverage_curves(study, scorers):
    """{set: {scorer: (coverage (m,), risk (m,))}} of every labelled set, for `scorers`."""
    return {result.shift_set.name: {
        label: selective.risk_coverage(result.scores[label],
                                       result.shift_set.correct(result.softmax_prediction))
        for label in scorers}
        for result in study.sets if result.shift_set.gold is not None}
