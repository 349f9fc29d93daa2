"""Influential and mislabeled training examples from kNN representations (Rajani et al. 2020).

Builds on knn_representations: which training examples the kNN retrieves (per example
and over a whole split), which to remove in the removal experiment, and the detection
of mislabeled training examples with the paper's rule and two rankings to compare
against. Methods return plain arrays and dicts; rendering is in knn_report.py.
"""
import json
import os
import re

import numpy as np

from deepknn.neighbors import dknn
from deepknn.rajani import knn_representations as knn
from deepknn.rajani import label_issues
from deepknn.evaluation import calibration
from deepknn.evaluation import ranking as ranking_measures
import nlp_utils
from nlp_utils import UserError


# ---------------------------------------------------------------- influence
def retrieval_counts(indices, n_train):
    """How often each training example is among the neighbours: (M, k) -> (N,) int64."""
    return np.bincount(np.asarray(indices).ravel(), minlength=n_train).astype(np.int64)


def most_retrieved(counts, n):
    """The n training indices retrieved most often; ties go to the smaller index."""
    return np.lexsort((np.arange(len(counts)), -np.asarray(counts)))[:n]


def removal_sets(counts, fraction, seed):
    """(the round(fraction * N) most retrieved training indices, as many random ones
    drawn with RandomState(seed)), both sorted."""
    n = int(round(fraction * len(counts)))
    random = np.random.RandomState(seed).choice(len(counts), n, replace=False)
    return np.sort(most_retrieved(counts, n)), np.sort(random)


def training_set_counts(classifier, train_vectors, k=16):
    """Retrieval counts over the training set itself (each example's k nearest other
    training examples, itself left out), as in the paper's removal experiment."""
    neighbors = classifier.neighbors(train_vectors, k, leave_self_out=True)
    return retrieval_counts(neighbors.indices, classifier.n_train)


def explanations(classifier, vectors, k, temperature=1.0):
    """For M examples: their k nearest training examples and the kNN vote.
    Returns (Neighbors with k columns, p_knn (M, C))."""
    neighbors = classifier.neighbors(vectors, k)
    return neighbors, knn.knn_probabilities(neighbors, classifier.n_class, temperature)


# ---------------------------------------------------------------- mislabeled examples
def candidate_mislabeled(model_predictions, nearest):
    """The paper's rule: for each evaluated example whose model prediction differs from
    the label of its nearest training example, that training example is a candidate.
    model_predictions (M,), nearest: Neighbors with k >= 1 -> sorted unique indices."""
    disagree = np.asarray(model_predictions) != nearest.labels[:, 0]
    return np.unique(nearest.indices[disagree, 0])


def rule_counts(model_predictions, nearest, n_train):
    """The paper's rule as a ranking score: for each training example, how many evaluated
    examples it is the nearest neighbour of while its label contradicts the model's
    prediction there. (N,) int64; the candidates of candidate_mislabeled are those > 0."""
    disagree = np.asarray(model_predictions) != nearest.labels[:, 0]
    return retrieval_counts(nearest.indices[disagree, 0], n_train)


def ranking_of(scores):
    """All N indices by score, highest (most suspicious) first; ties: smaller index."""
    return np.lexsort((np.arange(len(scores)), -np.asarray(scores)))


def scores_of(ranking):
    """Strict scores (N - position) that order the indices as `ranking` does."""
    scores = np.empty(len(ranking), dtype=np.int64)
    scores[np.asarray(ranking)] = np.arange(len(ranking), 0, -1)
    return scores


def _flipped_mask(n, flipped):
    mask = np.zeros(n, dtype=bool)
    mask[np.asarray(flipped, dtype=np.int64)] = True
    return mask


def flipped_average_precision(scores, flipped):
    """evaluation.ranking.average_precision of `scores` (N,) (higher: more suspicious)
    for the flipped indices; a ValueError without any."""
    return ranking_measures.average_precision(scores, _flipped_mask(len(scores), flipped),
                                              'error')


def precision_recall_at(ranking, flipped, k):
    """(precision, recall) of the first k indices of `ranking` against the flipped set."""
    return ranking_measures.precision_recall_at_k(ranking, _flipped_mask(len(ranking), flipped),
                                                  k)


def ranked_scores(scores, flipped):
    """A detector's ranking measured as the field does (cleanlab's benchmarks): AUPRC,
    and precision and recall among the first k = number of flipped (equal by design)."""
    precision, recall = precision_recall_at(ranking_of(scores), flipped, len(flipped))
    return {'auprc': flipped_average_precision(scores, flipped), 'k': len(flipped),
            'precision_at_k': precision, 'recall_at_k': recall,
            'base_rate': len(flipped) / len(scores)}


def detection_scores(candidates, flipped):
    """Precision, recall and F1 of a candidate set against the flipped set."""
    candidates, flipped = set(map(int, candidates)), set(map(int, flipped))
    hits = len(candidates & flipped)
    precision = hits / len(candidates) if candidates else 0.0
    recall = hits / len(flipped) if flipped else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {'precision': precision, 'recall': recall, 'f1': f1,
            'n_candidates': len(candidates), 'n_flipped': len(flipped), 'n_hits': hits}


def recall_at_fractions(ranking, flipped, fractions):
    """Recall of the flipped set among the first fraction * N of `ranking` (all N
    training indices, most suspicious first), for each fraction: (F,) floats."""
    is_flipped = _flipped_mask(len(ranking), flipped)
    found = np.concatenate([[0], np.cumsum(is_flipped[np.asarray(ranking)])])
    inspected = np.round(np.asarray(fractions) * len(ranking)).astype(int)
    return found[inspected] / max(1, is_flipped.sum())


def training_losses(train_proba, train_labels):
    """Cross-entropy of each training example at its (possibly flipped) label: (N,)."""
    picked = train_proba[np.arange(len(train_labels)), train_labels]
    return -np.log(np.maximum(picked, 1e-12))




def self_vote_ranking(classifier, train_vectors, losses, k=16):
    """Our ranking: how much an example's k nearest other training examples vote against
    its own label (1 - p_knn(own label), uniform weights, itself left out), ties broken
    by the higher training loss, then the smaller index."""
    neighbors = classifier.neighbors(train_vectors, k, leave_self_out=True)
    vote = knn.knn_probabilities(neighbors, classifier.n_class, np.inf)
    against = 1 - vote[np.arange(classifier.n_train), classifier.labels]
    return np.lexsort((np.arange(len(losses)), -losses, -against))


FRACTIONS = np.asarray(knn.HUNDREDTHS)   # of the training data, for the recall curves
PAPER_RULE = 'kNN rule (paper)'     # the flagged set of candidate_mislabeled
RULE_RANKING = 'kNN rule (counts)'  # its training examples by rule_counts


def mislabeled_experiment(setup, layer=-2, batchsize=64, k_self=16, seed=0):
    """Detection of the training labels flipped by --label-noise, on the dev split.

    Returns {'flipped': (F,) indices, 'n_train', 'n_dev', 'methods': {name:
    detection_scores plus 'fraction_inspected'} for the paper's rule and cleanlab's
    flagged sets, 'ranked': {name: ranked_scores} and 'curves': {name: recall over
    FRACTIONS}} for every ranking: the rule's (rule_counts), the training-loss baseline,
    self_vote_ranking and cleanlab's label-quality rankings. `seed`: the
    cross-validation folds of cleanlab's probe."""
    flipped = np.asarray(setup.splits.flipped_indices, dtype=np.int64)
    if len(flipped) == 0:
        raise UserError('{} was trained without flipped labels; re-train with '
                            '`label_noise` 0.1'.format(setup.result_dir))
    if not setup.splits.dev:
        raise UserError('{}: the dev split has no examples; the detection rule needs one'
                            .format(setup.result_dir))
    train_vectors, train_labels = dknn.train_activations(setup, 'gold', batchsize)
    knn.check_layer(layer, len(train_vectors))
    classifier = knn.KnnClassifier(train_vectors[layer], train_labels, setup.config.n_class)
    dev_activations, dev_proba = knn.split_outputs(setup, setup.dev, batchsize)
    nearest = classifier.neighbors(dev_activations[layer], 1)
    flagged = {PAPER_RULE: candidate_mislabeled(dev_proba.argmax(axis=1), nearest)}
    losses = training_losses(calibration.softmax(train_vectors[-1]), classifier.labels)
    scores = {RULE_RANKING: rule_counts(dev_proba.argmax(axis=1), nearest, classifier.n_train),
              'training loss': losses,
              'kNN self-vote': scores_of(self_vote_ranking(classifier, train_vectors[layer],
                                                           losses, k_self))}
    for name, (issues, ranking) in label_issues.cleanlab_methods(
            classifier, train_vectors[layer], seed).items():
        flagged[name], scores[name] = issues, scores_of(ranking)
    return {'flipped': flipped, 'n_train': classifier.n_train, 'n_dev': len(setup.splits.dev),
            'methods': {name: dict(detection_scores(indices, flipped),
                                   fraction_inspected=len(indices) / classifier.n_train)
                        for name, indices in flagged.items()},
            'ranked': {name: ranked_scores(score, flipped) for name, score in scores.items()},
            'curves': {name: recall_at_fractions(ranking_of(score), flipped, FRACTIONS)
                       for name, score in scores.items()}}


# ---------------------------------------------------------------- out-of-sample loss
OOS_LOSS = 'out-of-sample loss, {}-fold retrain'   # Chong, Hong & Manning 2022
CLEANLAB_RETRAIN = 'cleanlab, {}-fold retrain'     # cleanlab's recipe, the model itself


def cv_folds(labels, n_folds, seed):
    """(N,) fold of each training example: each label's examples in a RandomState(seed)
    order dealt round-robin, so every fold holds every label in proportion."""
    labels = np.asarray(labels)
    folds = np.empty(len(labels), dtype=np.int64)
    random = np.random.RandomState(seed)
    for label in np.unique(labels):
        rows = random.permutation(np.flatnonzero(labels == label))
        folds[rows] = np.arange(len(rows)) % n_folds
    return folds


def with_ranking(result, name, scores):
    """A mislabeled_experiment result with one more detector's (N,) scores ranked."""
    flipped = result['flipped']
    return dict(result, ranked=dict(result['ranked'], **{name: ranked_scores(scores, flipped)}),
                curves=dict(result['curves'], **{name: recall_at_fractions(
                    ranking_of(scores), flipped, FRACTIONS)}))


def with_flagged(result, name, indices):
    """A mislabeled_experiment result with one more detector's flagged set scored."""
    scores = dict(detection_scores(indices, result['flipped']),
                  fraction_inspected=len(indices) / result['n_train'])
    return dict(result, methods=dict(result['methods'], **{name: scores}))


def write_oos_outputs(setup, proba, n_folds, seed):
    """Keep a run's out-of-sample probabilities (N, C) and their losses at its (noisy)
    training labels in <result_dir>/cv_oos_loss.json, keyed to its model and training
    split."""
    labels = knn.labels_of(setup.splits.train)
    nlp_utils.atomic_write_json(os.path.join(setup.result_dir, 'cv_oos_loss.json'), {
        'key': dknn.activation_key(setup), 'folds': n_folds, 'seed': seed,
        'losses': training_losses(proba, labels).tolist(), 'proba': np.asarray(proba).tolist()})


def read_oos_outputs(setup):
    """The kept write_oos_outputs of this very model as {'folds', 'losses' (N,), 'labels'
    (N,) (the run's noisy training labels), 'proba' (N, C) or None for a file written
    before the probabilities were kept}, else None."""
    path = os.path.join(setup.result_dir, 'cv_oos_loss.json')
    if not os.path.exists(path):
        return None
    kept = nlp_utils.read_json(path, 'out-of-sample losses', dict)
    if kept.get('key') != dknn.activation_key(setup):
        return None
    n_train = len(setup.splits.train)
    try:
        oos = {'folds': int(kept['folds']),
               'losses': np.asarray(kept['losses'], dtype=np.float64).reshape(n_train),
               'labels': knn.labels_of(setup.splits.train),
               'proba': (np.asarray(kept['proba'], dtype=np.float64).reshape(n_train, -1)
                         if 'proba' in kept else None)}
    except (KeyError, TypeError, ValueError):
        raise UserError('{}: not the out-of-sample outputs of this run\'s {} training '
                        'examples; run `knn_cv_loss` again to replace it'.format(path, n_train))
    return oos


def with_cross_validation(result, oos):
    """A mislabeled_experiment result with the detectors of a cross-validated retrain
    (read_oos_outputs): the out-of-sample loss ranking (Chong et al. 2022) and, where the
    probabilities were kept, the set cleanlab's full recipe flags on them. cleanlab's
    own ranking of them (its label-quality score, the probability of the given label)
    orders exactly as the loss, so it is not added a second time."""
    result = with_ranking(result, OOS_LOSS.format(oos['folds']), oos['losses'])
    if oos['proba'] is None:
        return result
    flagged, _ = label_issues.confident_learning(oos['labels'], oos['proba'])
    return with_flagged(result, CLEANLAB_RETRAIN.format(oos['folds']), flagged)


def cached_mislabeled_experiment(setup, layer=-2, batchsize=64, seed=0):
    """mislabeled_experiment, kept in <result_dir>/knn_mislabeled.json and reused while
    the model, the training split and the settings are unchanged (a table over more
    seeds then only runs the new ones). Arrays come back as lists."""
    path = os.path.join(setup.result_dir, 'knn_mislabeled.json')
    key = 'v3|{}|layer {}|seed {}|{}'.format(dknn.activation_key(setup), layer, seed,
                                          ','.join(map(str, setup.splits.flipped_indices)))
    if os.path.exists(path):
        cached = nlp_utils.read_json(path, 'detection cache', dict)
        if cached.get('key') == key and 'result' in cached:
            return _in_order(cached['result'])
    result = mislabeled_experiment(setup, layer, batchsize, seed=seed)
    result = json.loads(json.dumps(result, default=lambda a: np.asarray(a).tolist()))
    nlp_utils.atomic_write_json(path, {'key': key, 'result': result})
    return _in_order(result)


# Table rows and figure curves in this order, whether a result was cached (JSON with
# sorted keys) or just measured: the paper's rule and baseline first, then ours, then
# cleanlab's.
ORDER = (PAPER_RULE, RULE_RANKING, 'training loss', 'kNN self-vote',
         label_issues.KNN_FROM_FEATURES, label_issues.CV_PROBE)


def _in_order(result):
    rank = lambda name: (ORDER.index(name) if name in ORDER else len(ORDER), name)
    return dict(result, **{part: {name: result[part][name]
                                  for name in sorted(result[part], key=rank)}
                           for part in ('methods', 'ranked', 'curves')})


def fraction_to_match(curve, recall):
    """The smallest fraction of FRACTIONS at which a recall curve reaches `recall`
    (the paper: the loss ranking needs ~65% of the data to match the kNN rule)."""
    reached = np.flatnonzero(np.asarray(curve) >= recall - 1e-12)
    return float(FRACTIONS[reached[0]]) if len(reached) else None


# ---------------------------------------------------------------- a spurious association
# 'not', or "n't" whether the tokenizer kept it ("n't") or split it ("isn ' t").
NEGATION = re.compile(r"\bnot\b|n ?' ?t\b")


def negation_association(examples, label_names, label='contradiction'):
    """Rajani et al.'s 'not' pattern (section 5): of the pair examples [((premise,
    hypothesis), label id)] whose hypothesis holds a negation ('not', "n't"), how many,
    and what share carries `label`. -> {'n', 'n_negated', 'share_negated', 'share_label'}."""
    labels = np.array([y for _, y in examples], dtype=np.int64)[negated(examples)]
    target = label_names.index(label)
    return {'n': len(examples), 'n_negated': len(labels),
            'share_negated': len(labels) / len(examples) if examples else float('nan'),
            'share_label': float((labels == target).mean()) if len(labels) else float('nan')}


def negated(examples):
    """(M,) bool: which pair examples [((premise, hypothesis), label)] hold a negation in
    the hypothesis."""
    return np.array([bool(NEGATION.search(' '.join(hypothesis).lower()))
                     for (_, hypothesis), _ in examples], dtype=bool)


def negation_slices(examples, predictions, label_names, label='entailment'):
    """The paper's data slice (section 5): accuracy on the `label` examples whose
    hypothesis holds a negation, beside all negated examples and the whole split.
    predictions (M,) ids for the M examples. -> {slice: (accuracy or None, count)}."""
    gold = np.array([y for _, y in examples], dtype=np.int64)
    correct = np.asarray(predictions) == gold
    with_negation = negated(examples)
    slices = {'all': np.ones(len(gold), dtype=bool), 'negated hypothesis': with_negation,
              '{}, negated hypothesis'.format(label): with_negation & (gold == label_names.index(label))}
    return {name: (float(correct[rows].mean()) if rows.any() else None, int(rows.sum()))
            for name, rows in slices.items()}


def contrasting(gold, first, second):
    """Indices where exactly one of two models is right: (first right and second wrong,
    first wrong and second right), each in split order. All arguments (M,) label ids."""
    gold = np.asarray(gold)
    first_right, second_right = np.asarray(first) == gold, np.asarray(second) == gold
    return (np.flatnonzero(first_right & ~second_right),
            np.flatnonzero(~first_right & second_right))
