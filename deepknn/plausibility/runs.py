"""Plausibility of every interpretation method on a trained SST model: plausibility/measures.py's
measures of each method's maps (saliency.interpret_all) against the treebank's human
rationales, with bootstrap intervals and paired differences (evaluation/statistics.py).

For a loaded setup, its token-level examples and their trees (sst_trees.align),
`run_plausibility` computes every method's maps, adds the seeded random baseline
(plausibility.random_importances), and measures each map against its sentence's
Rationale. Sentences without a tree are left out and counted. A method's importances
support its own prediction; toward the gold label they are turned by +1 when the
prediction is the gold label and by -1 when not (the SST-2 task is binary).
"""
import dataclasses
import sys

import numpy as np
import tqdm

from deepknn.evaluation import statistics
from deepknn.plausibility import measures as plausibility
from deepknn.interpret import saliency
from deepknn.data import sst_trees
from nlp_utils import UserError

RANDOM = 'random'


@dataclasses.dataclass
class PlausibilityRun:
    """methods: the interpretation methods measured (without the random baseline);
    values {method or 'random': {measure: (S,)}} over the S aligned sentences; lengths
    (S,) words; rationale_share {threshold: (S,)} share of words in the rationale;
    thresholds; n_sentences asked for, n_unaligned of them without a tree; notes."""
    methods: tuple
    values: dict
    lengths: np.ndarray
    rationale_share: dict
    thresholds: tuple
    n_sentences: int
    n_unaligned: int
    notes: list


def check_binary(setup, positive_label='positive'):
    """The human scores are signed toward a binary gold label: a two-class, single-
    sentence model whose labels include positive_label."""
    names = list(setup.label_names)
    if setup.config.n_class != 2 or setup.model.pair or positive_label not in names:
        raise UserError('plausibility needs a binary sentiment model of SST-2 (labels '
                        'negative/positive, single sentences); {} has labels {}'.format(
                            setup.result_dir, names))
    return names.index(positive_label)


def gold_signs(examples, positive_id):
    return [1 if label == positive_id else -1 for _, label in examples]


@dataclasses.dataclass
class Aligned:
    """The sentences of `examples` that have a tree: examples [(tokens, label)], their
    Rationales (humans), and how many sentences were given and left without a tree."""
    examples: list
    humans: list
    n_sentences: int
    n_unaligned: int


def align_rationales(examples, trees, positive_id):
    """Aligned: each sentence's tree (sst_trees.align) turned into its Rationale, signed
    toward its gold label (positive_id: the label id of 'positive')."""
    alignment = sst_trees.align([tokens for tokens, _ in examples], trees)
    kept = [i for i, tree in enumerate(alignment.trees) if tree is not None]
    if not kept:
        raise UserError('none of the {} sentences has a tree in the trees file: pass the '
                        "treebank file of the sentences' split".format(len(examples)))
    signs = gold_signs([examples[i] for i in kept], positive_id)
    return Aligned([examples[i] for i in kept],
                   [plausibility.rationale(alignment.trees[i], sign)
                    for i, sign in zip(kept, signs)], len(examples), alignment.n_unaligned)


def run_plausibility(setup, examples, trees, dknn, methods=saliency.STUDY_METHODS,
                     thresholds=plausibility.DEFAULT_THRESHOLDS, batchsize=256, seed=0,
                     progress=True, positive_label='positive'):
    """Every method's plausibility on `examples` ([(tokens, label)]) against `trees`
    (the split's sst_trees.Tree list). A method needing a missing temperature.json is
    left out with a note. Returns a PlausibilityRun."""
    thresholds = plausibility.check_thresholds(thresholds)
    aligned = align_rationales(examples, trees, check_binary(setup, positive_label))
    plan = saliency.plan_methods(methods, setup.result_dir)
    methods, notes = plan.methods, list(plan.notes)
    if aligned.n_unaligned:
        notes.append('{} of {} sentences have no tree and are left out'.format(
            aligned.n_unaligned, aligned.n_sentences))
    for note in notes:
        print('note: ' + note, file=sys.stderr)
    maps = saliency.interpret_all(setup, plan, aligned.examples, dknn, batchsize, progress)
    values = measure_maps(maps, aligned, thresholds, seed, progress)
    shares = {t: np.array([h.binary(t).mean() for h in aligned.humans]) for t in thresholds}
    lengths = np.array([len(tokens) for tokens, _ in aligned.examples], dtype=np.int64)
    return PlausibilityRun(methods, values, lengths, shares, thresholds, aligned.n_sentences,
                           aligned.n_unaligned, notes)


def measure_maps(maps, aligned, thresholds=plausibility.DEFAULT_THRESHOLDS, seed=0,
                 progress=True):
    """{method or 'random': {measure: (S,)}}: every map of `maps` ({method:
    [Interpretation]} over aligned.examples) and a seeded random one, measured against
    aligned.humans. A map is turned toward the gold label by +1 when its prediction is
    the gold label, else -1."""
    importances = {m: [(interpretation.scores, 1 if interpretation.prediction == label else -1)
                       for interpretation, (_, label) in zip(per_sentence, aligned.examples)]
                   for m, per_sentence in maps.items()}
    lengths = [len(tokens) for tokens, _ in aligned.examples]
    importances[RANDOM] = [(scores, 1) for scores in
                           plausibility.random_importances(lengths, seed)]
    return {name: measure_all(per_sentence, aligned.humans, thresholds,
                              progress and 'plausibility ({})'.format(name))
            for name, per_sentence in importances.items()}


def measure_all(per_sentence, humans, thresholds, progress=None):
    """{measure: (S,)} of one method: per_sentence [(importance (n,), toward_gold)]."""
    rows = [plausibility.sentence_measures(scores, sign, human, thresholds)
            for (scores, sign), human in tqdm.tqdm(list(zip(per_sentence, humans)),
                                                   desc=progress or None, disable=not progress)]
    return {name: np.array([row[name] for row in rows]) for name in rows[0]}


# ---------------------------------------------------------------- summaries
def summarize(run, n_resamples=1000, confidence=0.95, seed=0):
    """[statistics.Summary]: every method (and the random baseline) x measure, bootstrap
    over the sentences where the measure has a value."""
    return statistics.summarize_measures(run.values, n_resamples, confidence, seed)


def paired_differences(run, pairs=saliency.STUDY_PAIRS, n_resamples=1000,
                       confidence=0.95, seed=0):
    """[statistics.Summary] of measure(method) - measure(baseline) on the same sentences,
    for each pair of saliency.STUDY_PAIRS (conformity - confidence,
    conformity - gradient) whose methods both ran, and each measure."""
    values = {method: run.values[method] for method in run.methods}
    return statistics.paired_measure_differences(values, pairs, None, n_resamples, confidence, seed)
