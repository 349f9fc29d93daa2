"""Faithfulness of every interpretation method on a trained model: faithfulness/measures.py's
measures under three classifiers f, one model and DkNN pass per distinct variant.

For a loaded setup, token-level examples and a DkNN, `run_faithfulness`
  1. computes every method's word importances (saliency.interpret_all) and ranks them
     (`rankings_from_maps`, rule below), adding faithfulness.with_baselines' random and
     reversed rankings;
  2. measures them (faithfulness.evaluate) under each classifier f of CLASSIFIERS, each
     the `class_scores` of a registered leave-one-out method of saliency.py, so f(y | x)
     on the full input is exactly that method's Interpretation.score:
       softmax      f = softmax probabilities (ConfidenceLOO); y = the softmax prediction
       conformity   f = the DkNN conformity vector, the fraction of the neighbours over
                    all layers with each label (ConformityLOO); y = the DkNN prediction
       credibility  f = the DkNN p-values, calibrated conformity (CredibilityLOO);
                    y = the DkNN prediction, so f(y | x) is the DkNN credibility
     Conformity and p-values need not sum to 1 (p-values never do; a missing neighbour
     of an approximate index makes conformity sum below 1): evaluate runs with
     probabilities=False for them, and with y given as `targets` = the method's own
     prediction on the full input (for p-values the DkNN breaks ties by conformity,
     not by the smaller class id);
  3. Kendall tau between every pair of methods' importances (faithfulness_stats.kendall_agreement).

Rankings (`rankings_from_maps`): signed importances, most supporting the method's own
prediction first (faithfulness.ranking_from_scores). A map with a NaN importance (the
leave-one-out map of a one-word input) is ranked by the gradient map of that sentence
when the run has a finite one, else NaN positions go last in position order. A
one-word sentence has only one ranking, [0], so it stays in and every method scores the
same on it; it has no Kendall tau (left out of the agreement means).

Sharing (`VariantScores`): a variant (sentence, kept positions) is built as the model
input with only the moving words changed (for NLI pairs only hypothesis words; the
premise is kept), ids from the setup's vocabulary, '<eos>' last, as
leave_one_out.full_input builds it. Variants not seen yet go through the model in
bounded chunks (leave_one_out.chunked_rows), one `model.layer_activations` batch and
one DkNN query per layer each (leave_one_out.ChunkOutputs), and every classifier's f is
read off that one pass and cached, so the three evaluations cost one forward pass and
one DkNN search per distinct variant.
"""
import dataclasses
import itertools
import sys

import numpy as np

from deepknn.faithfulness import measures as faithfulness
from deepknn.faithfulness import curves as faithfulness_stats
from deepknn.evaluation import statistics
from deepknn.interpret import saliency
from deepknn.interpret.leave_one_out import ChunkOutputs, chunked_rows, full_input, split_example
from nlp_utils import UserError

FALLBACK_METHOD = 'gradient'    # ranks a map with NaN importances (see the docstring)
# Per-sentence measures with one value each (the bins' measures are added per fraction).
HEADLINE_MEASURES = ('aopc_comp', 'aopc_suff', 'deletion_auc', 'insertion_auc')
CURVE_MEASURES = ('deletion_auc', 'insertion_auc')


@dataclasses.dataclass(frozen=True)
class Classifier:
    """A classifier f under which rankings are measured: the registered saliency method
    whose class_scores is f, what f(y | x) means, whether f is a probability vector."""
    method: str
    meaning: str
    probabilities: bool


CLASSIFIERS = {
    'softmax': Classifier('confidence', 'softmax probability of y, the softmax prediction',
                          True),
    'conformity': Classifier('conformity', 'fraction of the DkNN neighbours (all layers) '
                             'with label y, the DkNN prediction', False),
    'credibility': Classifier('credibility', 'DkNN p-value of y, the DkNN prediction '
                              '(calibrated conformity; on the full input the credibility)',
                              False),
}


@dataclasses.dataclass
class ClassifierFaithfulness:
    """All rankings measured under one classifier f.

    result          faithfulness.FaithfulnessResult (targets = y, full_probability =
                    f(y | x), methods = {ranking name: MethodFaithfulness})
    same_prediction {method: (S,) bool}: whether the method's map was made for this
                    classifier's y (a map supports its own classifier's prediction)
    """
    name: str
    classifier: Classifier
    result: faithfulness.FaithfulnessResult
    same_prediction: dict


@dataclasses.dataclass
class FaithfulnessRun:
    """methods: the interpretation methods measured (without baselines); rankings:
    {name: S arrays (n_i,), most important position first} of the methods, 'random' and
    'reversed <method>'; lengths (S,) words moved per sentence; classifiers {name:
    ClassifierFaithfulness}; agreement {(a, b): Agreement} per pair of methods;
    n_variants distinct variants, n_rows model rows they cost (one per variant); notes:
    methods left out and why."""
    methods: tuple
    rankings: dict
    lengths: np.ndarray
    classifiers: dict
    agreement: dict
    n_variants: int
    n_rows: int
    curves: bool
    notes: list


# ---------------------------------------------------------------- methods and rankings
def usable_methods(setup, methods, optional=()):
    """(methods that can run, notes). A method that needs temperature.json when the run
    has none (scaling.py writes it) is an error naming the fix, unless it is in
    `optional` (methods nobody asked for by name, e.g. the defaults): then it is left out
    with a note."""
    plan = saliency.plan_methods(methods, setup.result_dir, optional)
    return plan.methods, list(plan.notes)


def rankings_from_maps(maps, fallback=FALLBACK_METHOD):
    """{method: [Interpretation]} -> {method: S rankings (n_i,) int64}, most important
    first, by the rule of the module docstring."""
    rankings = {}
    for method, per_sentence in maps.items():
        rankings[method] = []
        for i, interpretation in enumerate(per_sentence):
            scores = np.asarray(interpretation.scores, dtype=np.float64)
            if np.isnan(scores).any() and fallback in maps:
                fallback_scores = np.asarray(maps[fallback][i].scores, dtype=np.float64)
                if np.all(np.isfinite(fallback_scores)):
                    scores = fallback_scores
            rankings[method].append(faithfulness.ranking_from_scores(scores))
    return rankings


# ---------------------------------------------------------------- shared model outputs
class VariantScores:
    """Every classifier's f on each distinct (sentence, kept positions) variant of
    `examples`, the model and the DkNN run once per variant (module docstring).

    classifiers: names in CLASSIFIERS. `predictor(name)` is faithfulness.evaluate's
    predict for one classifier; `predictions(name, batch)` its predictions of y.
    rows_run counts the model rows (= distinct variants computed)."""

    def __init__(self, setup, dknn, examples, classifiers=tuple(CLASSIFIERS), batchsize=256):
        self.model = setup.model
        self.batchsize = int(batchsize)
        self.names = tuple(classifiers)
        self.interpreters = [saliency.make_interpreter(CLASSIFIERS[name].method, setup, dknn)
                             for name in self.names]
        self.inputs = []    # per sentence: (premise ids or None, word ids ending in '<eos>')
        for tokens, _ in examples:
            premise, words = split_example(tokens, self.model.pair)
            encoded = full_input(premise, words, setup.vocab)
            self.inputs.append(encoded if premise is not None else (None, encoded))
        self._cache = {}    # variant key -> per classifier (f values (C,), prediction)
        self.rows_run = 0

    def model_input(self, sentence, kept):
        """The model input of a variant: the sentence's ids at `kept`, then '<eos>' (to_ids
        maps token by token, so this equals encoding the kept words); the premise as is."""
        premise, ids = self.inputs[sentence]
        kept_ids = ids[np.append(np.asarray(kept, dtype=np.int64), len(ids) - 1)]
        return kept_ids if premise is None else (premise, kept_ids)

    @staticmethod
    def key(sentence, kept):
        return int(sentence), np.asarray(kept, dtype=np.int64).tobytes()

    def _fill(self, batch):
        """Run the variants of `batch` not cached yet (each once) and cache their f."""
        missing = list(dict.fromkeys(self.key(s, kept) for s, kept in batch
                                     if self.key(s, kept) not in self._cache))
        rows = [[self.model_input(s, np.frombuffer(kept, dtype=np.int64))] for s, kept in missing]
        for chunk in chunked_rows(rows, self.batchsize):
            outputs = ChunkOutputs(self.model, [row for _, _, row in chunk])
            per_classifier = [interpreter.class_scores(outputs)
                              for interpreter in self.interpreters]
            for n, (owner, _, _) in enumerate(chunk):
                self._cache[missing[owner]] = [(np.asarray(values[n], dtype=np.float64),
                                                int(predicted[n]))
                                               for values, predicted in per_classifier]
            self.rows_run += len(chunk)

    def scores(self, name, batch):
        """f of classifier `name` on a batch of (sentence, kept): (B, C) float64."""
        self._fill(batch)
        c = self.names.index(name)
        return np.stack([self._cache[self.key(s, kept)][c][0] for s, kept in batch])

    def predictions(self, name, batch):
        """The classifier's prediction on each variant of the batch: (B,) int64."""
        self._fill(batch)
        c = self.names.index(name)
        return np.array([self._cache[self.key(s, kept)][c][1] for s, kept in batch],
                        dtype=np.int64)

    def predictor(self, name):
        return lambda batch: self.scores(name, batch)


# ---------------------------------------------------------------- the run
def run_faithfulness(setup, examples, dknn, methods=saliency.STUDY_METHODS,
                     classifiers=tuple(CLASSIFIERS), batchsize=256, curves=True, seed=0,
                     fractions=faithfulness.ERASER_FRACTIONS, progress=True, optional=()):
    """Every method's rankings (and the baselines) measured under every classifier, and
    the methods' agreement, on `examples` ([(tokens, label)], a split's first N).
    `seed` seeds the random baseline. A method needing a missing temperature.json is an
    error, or if in `optional` left out with a printed note (also in .notes). Returns a
    FaithfulnessRun."""
    unknown = [name for name in classifiers if name not in CLASSIFIERS]
    if unknown or not classifiers:
        raise UserError('classifiers: unknown {}; choose from {}'.format(
            ', '.join(unknown) or 'none given', ', '.join(CLASSIFIERS)))
    plan = saliency.plan_methods(methods, setup.result_dir, optional)
    methods = plan.methods
    for note in plan.notes:
        print('note: ' + note, file=sys.stderr)
    maps = saliency.interpret_all(setup, plan, examples, dknn, batchsize, progress)
    lengths = np.array([len(m.tokens) for m in maps[methods[0]]], dtype=np.int64)
    rankings = faithfulness.with_baselines(rankings_from_maps(maps), lengths, seed)
    shared = VariantScores(setup, dknn, examples, classifiers, batchsize)
    full = [(i, np.arange(n)) for i, n in enumerate(lengths)]
    measured = {}
    for number, name in enumerate(classifiers):
        targets = shared.predictions(name, full)
        # The first evaluation runs the model; the others read the cache.
        result = faithfulness.evaluate(
            lengths, rankings, shared.predictor(name), fractions, curves, batchsize,
            progress='faithfulness variants' if progress and number == 0 else None,
            targets=targets, probabilities=CLASSIFIERS[name].probabilities)
        same = {m: np.array([interpretation.prediction == y
                             for interpretation, y in zip(maps[m], targets)])
                for m in methods}
        measured[name] = ClassifierFaithfulness(name, CLASSIFIERS[name], result, same)
    agreement = {(a, b): faithfulness_stats.kendall_agreement([m.scores for m in maps[a]],
                                                        [m.scores for m in maps[b]])
                 for a, b in itertools.combinations(methods, 2)}
    return FaithfulnessRun(
        methods=methods, rankings=rankings, lengths=lengths, classifiers=measured,
        agreement=agreement, n_variants=measured[classifiers[0]].result.n_variants,
        n_rows=shared.rows_run, curves=bool(curves), notes=list(plan.notes))


# ---------------------------------------------------------------- summaries
def bin_label(kind, fraction):
    """'comp@5%' for kind 'comp' and fraction 0.05."""
    return '{}@{:g}%'.format(kind, round(100 * float(fraction), 6))


def measure_values(result, ranking, curves=True):
    """{measure: (S,)} of one ranking under one classifier: the HEADLINE_MEASURES
    (without the curve areas when curves=False), then comp@k and suff@k per fraction."""
    scores = result.methods[ranking]
    values = {measure: getattr(scores, measure) for measure in HEADLINE_MEASURES
              if curves or measure not in CURVE_MEASURES}
    for kind, table in (('comp', scores.comprehensiveness), ('suff', scores.sufficiency)):
        for column, fraction in enumerate(result.fractions):
            values[bin_label(kind, fraction)] = table[:, column]
    return values


def method_values(run, measured):
    """{ranking: {measure: (S,)}} of one classifier of the run (measure_values)."""
    return {ranking: measure_values(measured.result, ranking, run.curves)
            for ranking in run.rankings}


def summarize(run, n_resamples=1000, confidence=0.95, seed=0):
    """[statistics.Summary]: every classifier x ranking x measure (measure_values) with
    its bootstrap interval over sentences, plus 'same_y' (the share of sentences whose
    map was made for the classifier's y) for the methods."""
    rows = []
    for name, measured in run.classifiers.items():
        values = method_values(run, measured)
        for ranking in values:
            if ranking in measured.same_prediction:
                values[ranking]['same_y'] = measured.same_prediction[ranking].astype(np.float64)
        rows += statistics.summarize_measures(values, n_resamples, confidence, seed, classifier=name)
    return rows


def paired_differences(run, pairs=saliency.STUDY_PAIRS, n_resamples=1000, confidence=0.95,
                       seed=0):
    """[statistics.Summary] of measure(method) - measure(baseline), the same sentences
    resampled for both, per classifier, pair (both methods in the run) and headline
    measure."""
    rows = []
    for name, measured in run.classifiers.items():
        values = {method: scores for method, scores in method_values(run, measured).items()
                  if method in run.methods}
        rows += statistics.paired_measure_differences(values, pairs, HEADLINE_MEASURES, n_resamples,
                                              confidence, seed, classifier=name)
    return rows
