"""Faithfulness of word-importance rankings: ERASER's comprehensiveness and sufficiency
(DeYoung et al. 2020), deletion and insertion curves, and the random and reversed
baselines. The statistics over the results (curve areas and means, agreement between
methods) are in faithfulness_stats, the bootstrap intervals in evaluation/statistics.py.

A sentence of n words (for NLI pairs: the hypothesis; the caller keeps the premise) is
changed only by deleting words. A variant is described by the positions it keeps, a
sorted int array, so this module knows nothing of vocabularies or models: the caller's
`predict(batch)` turns a batch of (sentence index, kept positions) into class
probabilities (B, C) (or, with probabilities=False, any finite class scores such as the
DkNN's conformity or p-values). With y the class predicted on the full input (or the
caller's `targets`) and f(y | .) its probability (score):

  comprehensiveness at k   f(y | x) - f(y | x without its top-k words)
  sufficiency at k         f(y | x) - f(y | only the top-k words, in their order)
  deletion curve, j=0..n   f(y | x without its top-j words)     (j=0: x itself)
  insertion curve, j=0..n  f(y | only the top-j words)          (j=0: the empty input)

top-k = round-half-up(k * n), at least 1 and at most n (top_k_sizes). The curves are
drawn over the fraction of words j / n in [0, 1] so that their areas (trapezoid rule)
compare across sentence lengths. Good rankings have high comprehensiveness, low
sufficiency, a low deletion area and a high insertion area.
"""
import dataclasses

import numpy as np
import tqdm

from deepknn.faithfulness import curves as faithfulness_stats
from nlp_utils import UserError

# ERASER's bins: the fractions of a sentence's words taken as its top-k.
ERASER_FRACTIONS = (0.01, 0.05, 0.10, 0.20, 0.50)
# Slack when checking that predict returns probabilities (float32 softmax rounding).
PROBABILITY_TOLERANCE = 1e-3


@dataclasses.dataclass
class MethodFaithfulness:
    """One ranking method's per-sentence measures; S sentences, K bins.

    comprehensiveness  (S, K)  f(y|x) - f(y|x without top-k), one column per fraction
    sufficiency        (S, K)  f(y|x) - f(y|top-k only)
    aopc_comp          (S,)    comprehensiveness averaged over the bins
    aopc_suff          (S,)    sufficiency averaged over the bins
    deletion_auc       (S,)    area under the deletion curve (NaN without curves)
    insertion_auc      (S,)    area under the insertion curve (NaN without curves)
    deletion_curves    S arrays (n_i + 1,), or None without curves
    insertion_curves   S arrays (n_i + 1,), or None without curves
    """
    comprehensiveness: np.ndarray
    sufficiency: np.ndarray
    aopc_comp: np.ndarray
    aopc_suff: np.ndarray
    deletion_auc: np.ndarray
    insertion_auc: np.ndarray
    deletion_curves: list = None
    insertion_curves: list = None


@dataclasses.dataclass
class FaithfulnessResult:
    """All methods' measures on the same S sentences.

    fractions          (K,)    the bins k
    lengths            (S,)    words per sentence n_i
    sizes              (S, K)  top-k word counts used per sentence and bin
    targets            (S,)    y, the class predicted on the full input
    full_probability   (S,)    f(y | x)
    methods            {name: MethodFaithfulness}, in the order given
    n_variants         distinct (sentence, kept) variants sent to predict
    """
    fractions: np.ndarray
    lengths: np.ndarray
    sizes: np.ndarray
    targets: np.ndarray
    full_probability: np.ndarray
    methods: dict
    n_variants: int


# ---------------------------------------------------------------- rankings
def top_k_sizes(n, fractions=ERASER_FRACTIONS):
    """Words in the top-k of an n-word sentence per fraction: (K,) int64.

    round-half-up(k * n) (not Python's round-half-to-even, so 1.5 and 2.5 both go up),
    with a tiny slack so that 0.1 * 25 computed as 2.4999... still rounds to 3;
    then at least 1 (a bin always removes a word) and at most n."""
    fractions = _check_fractions(fractions)
    raw = np.floor(fractions * n + 0.5 + 1e-9).astype(np.int64)
    return np.clip(raw, 1, n)


def ranking_from_scores(scores):
    """Word positions by decreasing importance, (n,) -> (n,) int64. Ties keep the
    earlier position first; NaN scores go last. Signed: pass np.abs(scores) to rank by
    magnitude."""
    scores = np.asarray(scores, dtype=np.float64)
    # argsort of -scores: stable for ties, and NaN sorts to the end.
    return np.argsort(-scores, kind='stable').astype(np.int64)


def random_rankings(lengths, seed=0):
    """A seeded random order per sentence: S arrays (n_i,) int64."""
    lengths = _check_lengths(lengths)
    rng = np.random.default_rng(seed)
    return [rng.permutation(int(n)).astype(np.int64) for n in lengths]


def reversed_rankings(rankings):
    """Each ranking from least to most important: the sanity floor of a method."""
    return [np.asarray(r, dtype=np.int64)[::-1].copy() for r in rankings]


def with_baselines(rankings, lengths, seed=0):
    """{name: rankings} plus 'random' and 'reversed <name>' per method (a new dict)."""
    out = dict(rankings)
    added = {'random': random_rankings(lengths, seed)}
    for name, per_sentence in rankings.items():
        added['reversed {}'.format(name)] = reversed_rankings(per_sentence)
    clash = sorted(set(added) & set(out))
    if clash:
        raise UserError('rankings already has methods named {}'.format(', '.join(clash)))
    out.update(added)
    return out


# ---------------------------------------------------------------- evaluation
def evaluate(lengths, rankings, predict, fractions=ERASER_FRACTIONS, curves=True,
             batchsize=64, progress=None, targets=None, probabilities=True):
    """Comprehensiveness, sufficiency and (curves=True) deletion/insertion curves of
    every method's rankings, in one pass over the model.

    lengths   (S,) words per sentence, each >= 1
    rankings  {method name: S arrays (n_i,)}, each a permutation of 0..n_i-1, most
              important position first
    predict   callable: [(sentence index, kept positions (m,) int64 sorted)] of length B
              -> (B, C) class probabilities. It must accept an empty kept array (the
              insertion curve starts there; a one-word sentence loses all its words).
    curves    False evaluates only the bins' variants (far fewer model calls); then
              the curves are None and their areas NaN.
    batchsize variants per predict call; progress: a tqdm description, or None.
    targets   (S,) the class y of each sentence, or None for the argmax of predict on the
              full input (ties to the smaller class id).
    probabilities  True checks that predict returns probabilities (rows in [0, 1] summing
              to 1); False accepts any finite scores (a DkNN's conformity, p-values).

    Identical (sentence, kept) variants across methods and curve points are sent once.
    Returns a FaithfulnessResult.
    """
    lengths = _check_lengths(lengths)
    fractions = _check_fractions(fractions)
    rankings = _check_rankings(rankings, lengths)
    if int(batchsize) < 1:
        raise UserError('batchsize must be at least 1, got {}'.format(batchsize))
    sizes = np.stack([top_k_sizes(n, fractions) for n in lengths])
    table = _VariantTable()
    full_rows = [table.add(i, np.arange(n)) for i, n in enumerate(lengths)]
    rows = {name: [_ranking_rows(table, i, r, sizes[i], curves)
                   for i, r in enumerate(per_sentence)]
            for name, per_sentence in rankings.items()}
    scores = _predict_all(table.variants, predict, int(batchsize), progress, probabilities)
    targets = (scores[full_rows].argmax(axis=1) if targets is None
               else _check_targets(targets, len(lengths), scores.shape[1]))
    # f(y | variant) of every variant under its own sentence's target.
    target_of_row = targets[[i for i, _ in table.variants]]
    f_y = scores[np.arange(len(scores)), target_of_row]
    full_y = f_y[full_rows]
    methods = {name: _method_scores(per_sentence, f_y, full_y, sizes, curves)
               for name, per_sentence in rows.items()}
    return FaithfulnessResult(
        fractions=fractions, lengths=lengths, sizes=sizes, targets=targets,
        full_probability=full_y, methods=methods, n_variants=len(table.variants))


class _VariantTable:
    """Distinct (sentence, kept positions) variants, each given one row."""

    def __init__(self):
        self.variants, self._row = [], {}

    def add(self, sentence, kept):
        kept = np.sort(np.asarray(kept, dtype=np.int64))
        key = (sentence, kept.tobytes())
        if key not in self._row:
            self._row[key] = len(self.variants)
            self.variants.append((sentence, kept))
        return self._row[key]


def _ranking_rows(table, sentence, ranking, sizes, curves):
    """Rows of one ranking's deletion and insertion points: two (n+1,) int arrays
    indexed by j, -1 where a point is not needed (curves=False)."""
    n = len(ranking)
    # Without curves: the bins, plus the full input (deletion j=0) for f(y | x).
    deleted = range(n + 1) if curves else np.unique(np.concatenate([[0], sizes]))
    inserted = range(n + 1) if curves else np.unique(sizes)
    deletion, insertion = np.full(n + 1, -1), np.full(n + 1, -1)
    for j in deleted:
        deletion[j] = table.add(sentence, ranking[j:])
    for j in inserted:
        insertion[j] = table.add(sentence, ranking[:j])
    return deletion, insertion


def _method_scores(per_sentence_rows, f_y, full, sizes, curves):
    """Assemble one method's MethodFaithfulness from the rows of its variants."""
    n_sentences = len(per_sentence_rows)
    comp = np.empty(sizes.shape)
    suff = np.empty(sizes.shape)
    deletion_curves, insertion_curves = [], []
    for i, (deletion, insertion) in enumerate(per_sentence_rows):
        comp[i] = full[i] - f_y[deletion[sizes[i]]]
        suff[i] = full[i] - f_y[insertion[sizes[i]]]
        if curves:
            deletion_curves.append(f_y[deletion])
            insertion_curves.append(f_y[insertion])
    if curves:
        deletion_auc = np.array([faithfulness_stats.curve_area(c) for c in deletion_curves])
        insertion_auc = np.array([faithfulness_stats.curve_area(c) for c in insertion_curves])
    else:
        deletion_auc = insertion_auc = np.full(n_sentences, np.nan)
        deletion_curves = insertion_curves = None
    return MethodFaithfulness(
        comprehensiveness=comp, sufficiency=suff, aopc_comp=comp.mean(axis=1),
        aopc_suff=suff.mean(axis=1), deletion_auc=deletion_auc,
        insertion_auc=insertion_auc, deletion_curves=deletion_curves,
        insertion_curves=insertion_curves)


def _predict_all(variants, predict, batchsize, progress, probabilities=True):
    """predict over all variants in chunks: (V, C) float64, validated."""
    chunks = []
    with tqdm.tqdm(total=len(variants), desc=progress, unit='variant',
                   disable=progress is None) as bar:
        for start in range(0, len(variants), batchsize):
            batch = variants[start:start + batchsize]
            out = _check_probabilities(predict(batch), len(batch),
                                       chunks[0].shape[1] if chunks else None, probabilities)
            chunks.append(out)
            bar.update(len(batch))
    return np.concatenate(chunks)


# ---------------------------------------------------------------- validation
def _check_lengths(lengths):
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or lengths.size == 0 or not np.issubdtype(lengths.dtype, np.integer):
        raise UserError('lengths must be a non-empty 1-D sequence of word counts')
    if np.any(lengths < 1):
        raise UserError('lengths must be at least 1 word each')
    return lengths.astype(np.int64)


def _check_fractions(fractions):
    fractions = np.asarray(fractions, dtype=np.float64)
    if fractions.ndim != 1 or fractions.size == 0:
        raise UserError('fractions must be a non-empty 1-D sequence')
    if np.any(~(fractions > 0) | (fractions > 1)):
        raise UserError('fractions must be in (0, 1], got {}'.format(fractions.tolist()))
    return fractions


def _check_rankings(rankings, lengths):
    """{name: S arrays} -> the same with int64 arrays; each a permutation of 0..n_i-1."""
    if not rankings:
        raise UserError('rankings must name at least one method')
    checked = {}
    for name, per_sentence in rankings.items():
        if len(per_sentence) != len(lengths):
            raise UserError('rankings[{!r}] has {} sentences, lengths has {}'.format(
                name, len(per_sentence), len(lengths)))
        checked[name] = [_check_permutation(name, i, r, n)
                         for i, (r, n) in enumerate(zip(per_sentence, lengths))]
    return checked


def _check_permutation(name, i, ranking, n):
    ranking = np.asarray(ranking)
    if (ranking.shape != (n,) or not np.issubdtype(ranking.dtype, np.integer)
            or not np.array_equal(np.sort(ranking), np.arange(n))):
        raise UserError('rankings[{!r}][{}] must be a permutation of 0..{} (the sentence '
                        'has {} words), got {}'.format(name, i, n - 1, n, ranking.tolist()))
    return ranking.astype(np.int64)


def _check_targets(targets, n_sentences, n_classes):
    targets = np.asarray(targets)
    if (targets.shape != (n_sentences,) or not np.issubdtype(targets.dtype, np.integer)
            or np.any((targets < 0) | (targets >= n_classes))):
        raise UserError('targets must hold one class id in [0, {}) per sentence ({}), got {}'
                        .format(n_classes, n_sentences, targets.tolist()))
    return targets.astype(np.int64)


def _check_probabilities(out, batch_size, n_classes, probabilities=True):
    """predict's output for a batch -> (B, C) float64, or a UserError naming predict.
    probabilities=False checks only the shape and that every score is finite."""
    out = np.asarray(out, dtype=np.float64)
    expected = '({}, {})'.format(batch_size, 'C' if n_classes is None else n_classes)
    if (out.ndim != 2 or out.shape[0] != batch_size or out.shape[1] < 1
            or (n_classes is not None and out.shape[1] != n_classes)):
        raise UserError('predict must return {} probabilities for a batch of {} variants, '
                        'got shape {}'.format(expected, batch_size, out.shape))
    if not probabilities:
        if not np.all(np.isfinite(out)):
            raise UserError('predict must return finite class scores')
        return out
    tol = PROBABILITY_TOLERANCE
    if (not np.all(np.isfinite(out)) or np.any(out < -tol) or np.any(out > 1 + tol)
            or np.any(np.abs(out.sum(axis=1) - 1) > tol)):
        raise UserError('predict must return probabilities (each row in [0, 1], summing '
                        'to 1)')
    return out
