"""kNN backoff on adversarial NLI sets that bring their own validation part (Rajani et al.
2020, Tables 4-6: the ANLI and HANS columns).

A model trained on an SNLI-style split meets an evaluation set (ANLI dev, HANS): a seeded
part of it, balanced across its groups (ANLI rounds; HANS heuristics and, within each, its
subcases), tunes T and tau at the paper's k = 64 over the model's training split; the
rest measures accuracy. HANS's gold labels are entailment / non-entailment, so a 3-way
model's neutral and contradiction predictions both count as non-entailment (the paper).
"""
import json
import os
import re

import numpy as np
from scipy import stats

from deepknn.neighbors import activation_cache
from deepknn.data import eval_sets
from deepknn.storage import result_folder
from deepknn.rajani import knn_representations as knn
import nlp_utils
from nlp_utils import UserError

PAPER_K = 64                 # Table 4's k for ANLI and HANS
HANS_VALIDATION = 10000      # the paper: 30K split into 10K validation and 20K test


def allocate(sizes, n):
    """Split n over groups of `sizes` in proportion (largest remainder; equal remainders
    to the earlier group): (G,) ints summing to n, each within one of its quota."""
    sizes = np.asarray(sizes, dtype=np.int64)
    quota = n * sizes / sizes.sum()
    counts = np.floor(quota).astype(np.int64)
    extra = np.lexsort((np.arange(len(sizes)), -(quota - counts)))[:n - counts.sum()]
    counts[extra] += 1
    return counts


def balanced_split(groups, n_validation, seed, subgroups=None):
    """(validation rows, test rows), each sorted: n_validation of the len(groups) rows,
    allocated over `groups` in proportion to their sizes and, within each group, over its
    `subgroups` (e.g. HANS heuristics, then subcases); the rows of each cell drawn with
    RandomState(seed)."""
    groups = np.asarray(groups)
    subgroups = np.asarray(subgroups if subgroups is not None else [''] * len(groups))
    if not 0 < n_validation < len(groups):
        raise UserError('the validation part must hold from 1 to {} of the {} pairs, got {}'
                        .format(len(groups) - 1, len(groups), n_validation), 'n_validation')
    random = np.random.RandomState(seed)
    chosen = []
    names = np.unique(groups)
    for name, n_group in zip(names, allocate([np.sum(groups == g) for g in names], n_validation)):
        in_group = groups == name
        cells = np.unique(subgroups[in_group])
        sizes = [np.sum(in_group & (subgroups == c)) for c in cells]
        for cell, n_cell in zip(cells, allocate(sizes, n_group)):
            rows = np.flatnonzero(in_group & (subgroups == cell))
            chosen.append(random.permutation(rows)[:n_cell])
    validation = np.sort(np.concatenate(chosen))
    return validation, np.setdiff1d(np.arange(len(groups)), validation)


def balanced_sample(eval_set, n, seed):
    """n pairs of eval_set drawn as balanced_split draws a validation part (by group,
    then HANS subcase), in file order, named '<name>-<n>'; all of it when n covers it."""
    if n >= len(eval_set.records):
        return eval_set
    rows = balanced_split(eval_set.groups, n, seed,
                          eval_set.subcases if eval_set.binary else None)[0]
    return eval_set.subset(rows, '{}-{}'.format(eval_set.name, n))


def halves(eval_set, seed):
    """(first half, second half) of ANLI as EvalSets, split as balanced_split splits (by
    round, seeded): the in-domain setting trains on the first and evaluates on the second,
    because ANLI's own training split is not offline."""
    first, second = balanced_split(eval_set.groups, len(eval_set.records) // 2, seed)
    return (eval_set.subset(first, eval_set.name + '-train-half'),
            eval_set.subset(second, eval_set.name + '-heldout-half'))


def default_validation_size(eval_set):
    """The paper's 10,000 for a full HANS set (a third of a smaller one); half of ANLI."""
    n = len(eval_set.records)
    if eval_set.binary:
        return HANS_VALIDATION if n == 3 * HANS_VALIDATION else n // 3
    return n // 2


def collapse_map(label_names):
    """(C,) model label id -> 0 entailment, 1 non-entailment (eval_sets.HANS_LABELS)."""
    if 'entailment' not in label_names:
        raise UserError('HANS needs an NLI model with an entailment label; this one has {}'
                        .format(', '.join(label_names)), 'model_setup')
    return np.array([0 if name == 'entailment' else 1 for name in label_names])


def gold_labels(eval_set, label_names):
    """(M,) gold ids: in HANS_LABELS for a binary set, else in the model's label_names."""
    names = eval_sets.HANS_LABELS if eval_set.binary else label_names
    unknown = sorted({label for _, label in eval_set.records} - set(names))
    if unknown:
        raise UserError('{} has labels {} that the model does not know ({})'.format(
            eval_set.name, ', '.join(unknown), ', '.join(names)), 'model_setup')
    return np.array([list(names).index(label) for _, label in eval_set.records])


def slice_accuracies(keys, gold, predictions, rows):
    """{key: {'n': count, name: accuracy}} over the `rows` of each distinct key.
    keys, gold (M,); predictions: {name: (M,) ids}; rows: (M,) bool."""
    keys = np.asarray(keys)
    return {str(key): dict({'n': int(np.sum(rows & (keys == key)))},
                           **{name: float(np.mean(predicted[rows & (keys == key)] ==
                                                  gold[rows & (keys == key)]))
                              for name, predicted in predictions.items()})
            for key in sorted(set(keys[rows]))}


def _neighbor_rows(neighbors, rows):
    return knn.Neighbors(neighbors.sq_distances[rows], neighbors.indices[rows],
                         neighbors.labels[rows])


def robustness_experiment(setup, eval_set, layer=-2, batchsize=64, k=PAPER_K, seed=0,
                          n_validation=None, engine=None):
    """Backoff on `eval_set` for one trained pair model. Returns a JSON-ready dict: the
    tuned T and tau ('choice'), backoff_scores on the test part ('test'), the validation
    and test sizes, and accuracies of model and backoff on the test part per group
    ('groups'), per group on non-entailment pairs only ('not_entail', HANS), and per
    subcase ('subcases', HANS). `engine`: a RayEngine that extracts the training split's
    activations (None: the run's activation cache)."""
    if not setup.config.pair:
        raise UserError('{}: ANLI and HANS need a premise/hypothesis (NLI) model'.format(
            setup.result_dir), 'model_setup')
    gold = gold_labels(eval_set, setup.dataset.label_names)
    collapse = collapse_map(setup.dataset.label_names) if eval_set.binary else None
    n_validation = n_validation or default_validation_size(eval_set)
    validation, test = balanced_split(eval_set.groups, n_validation, seed,
                                      eval_set.subcases if eval_set.binary else None)
    classifier = knn.classifier_from_setup(setup, layer, batchsize, engine)
    knn.check_k(k, classifier.n_train)
    hidden, proba = set_outputs(setup, eval_set, layer, batchsize)
    neighbors, signal = classifier.neighbors(hidden, k), proba.max(axis=1)
    choice = knn.tune_backoff(proba[validation], _neighbor_rows(neighbors, validation),
                              gold[validation], signal[validation], classifier.n_class, [k],
                              collapse=collapse)
    test_knn = knn.knn_probabilities(_neighbor_rows(neighbors, test), classifier.n_class,
                                     choice.temperature)
    predictions = {'model': knn.predicted(proba[test], collapse),
                   'backoff': knn.backoff_predictions(proba[test], test_knn, signal[test],
                                                      choice.threshold, collapse)}
    scores = knn.backoff_scores(proba[test], test_knn, signal[test], choice.threshold,
                                gold[test], collapse)
    result = {'choice': choice.__dict__, 'n_validation': len(validation), 'n_test': len(test),
              'test': dict(scores, **chance(gold[test], scores['model_accuracy']))}
    return dict(result, **breakdown_on_test(eval_set, test, gold[test], predictions))


def chance(gold, model_accuracy):
    """What guessing gets on the M test pairs, gold (M,): the share of the most common
    gold label ('majority_accuracy'), and the one-sided exact binomial p-value of the
    model's accuracy against that rate ('p_above_chance'): is the model above chance?"""
    majority = float(np.bincount(gold).max() / len(gold))
    successes = int(round(model_accuracy * len(gold)))
    p_value = stats.binomtest(successes, len(gold), majority, alternative='greater').pvalue
    return {'majority_accuracy': majority, 'p_above_chance': float(p_value)}


def set_outputs(setup, eval_set, layer, batchsize):
    """(layer `layer`'s activations (M, D), softmax probabilities (M, C)) of the set's M
    pairs. One forward pass per model and set, kept in
    <result_dir>/knn_robustness_<set>_outputs.npz: the split seeds of a table share it (a
    MiniLM's pass over HANS-like's 30,000 pairs takes about ten minutes here)."""
    path = os.path.join(setup.result_dir, 'knn_robustness_{}_outputs.npz'.format(
        _file_name(eval_set.name)))
    key = 'v1|{}|{}|layer {}'.format(activation_cache.activation_key(setup),
                                     nlp_utils.examples_digest(eval_set.records), layer)
    cached = activation_cache.read_cache(path, key)
    if cached is not None and {'hidden', 'proba'} <= set(cached):
        return cached['hidden'], cached['proba']
    activations, proba = knn.split_outputs(
        setup, setup.encode([(tokens, 0) for tokens, _ in eval_set.records]), batchsize,
        'forward pass: ' + eval_set.name)
    hidden = np.ascontiguousarray(activations[layer], dtype=np.float32)
    with result_folder.lock_for_caches(setup.result_dir, activation_cache.CACHES_PURPOSE):
        nlp_utils.atomic_savez(path, key=np.array(key), hidden=hidden, proba=proba)
    return hidden, proba


def _file_name(set_name):
    return re.sub(r'[^A-Za-z0-9_.-]+', '_', set_name)


def breakdown_on_test(eval_set, test, gold, predictions):
    """Accuracies on the test rows (M,) per group ('groups'); for HANS also per group on
    non-entailment pairs ('not_entail', Table 6) and per subcase with its gold label
    ('subcases'). gold (M,); predictions: {name: (M,) ids}."""
    every = np.ones(len(test), dtype=bool)
    groups, subcases = (np.asarray(keys)[test] for keys in (eval_set.groups, eval_set.subcases))
    parts = {'groups': slice_accuracies(groups, gold, predictions, every)}
    if eval_set.binary:
        parts['not_entail'] = slice_accuracies(groups, gold, predictions, gold == 1)
        parts['subcases'] = slice_accuracies(subcases, gold, predictions, every)
        for name, scores in parts['subcases'].items():   # a HANS subcase has one label
            labels = {eval_sets.HANS_LABELS[g] for g in gold[subcases == name]}
            scores['gold'] = ' / '.join(sorted(labels))
    return parts


def cached_robustness_experiment(setup, eval_set, layer=-2, batchsize=64, k=PAPER_K, seed=0,
                                 n_validation=None, engine=None):
    """robustness_experiment, kept in <result_dir>/knn_robustness_<set>_seed<S>.json and reused
    while the model, the evaluation files and the settings are unchanged, so a table over
    several runs resumes where a stopped one left off."""
    path = os.path.join(setup.result_dir, 'knn_robustness_{}_seed{}.json'.format(
        _file_name(eval_set.name), seed))
    key = 'v3|{}|{}|layer {}|k {}|seed {}|validation {}'.format(
        activation_cache.activation_key(setup),
        '+'.join(map(nlp_utils.file_digest, eval_set.paths)),
        layer, k, seed, n_validation)
    if os.path.exists(path):
        cached = nlp_utils.read_json(path, 'robustness cache', dict)
        if cached.get('key') == key and 'result' in cached:
            return cached['result']
    result = robustness_experiment(setup, eval_set, layer, batchsize, k, seed, n_validation,
                                   engine)
    result = json.loads(json.dumps(result))
    nlp_utils.atomic_write_json(path, {'key': key, 'result': result})
    return result
