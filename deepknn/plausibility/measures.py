"""Plausibility of word-importance maps: agreement with the human word and phrase labels
of the Stanford Sentiment Treebank (ERASER's measures, DeYoung et al. 2020, and the
'extraneous words' of Wallace et al. section 5.1).

Human rationale of a tree (sst_trees.Tree), the rule of ferret's SST rationales after
Carton et al. 2020: a node's polarity is |(label - 2) / 2| (0, 0.5 or 1); a node is an
*explanatory phrase* when its polarity exceeds that of every node below it (for a leaf:
exceeds 0, i.e. the word alone is polar). Each word's soft rationale is the polarity of
the largest explanatory phrase covering it, 0 when none does. Why: a phrase counts as
the reason for a sentiment when people rated it more polar than any of its parts, so
'not bad' is a rationale of two words while the neutral 'the movie' around a polar
'fun' is not. The signed human score is that phrase's (label - 2) / 2 turned toward
the sentence's gold label (+ supports it, - opposes it). The binary rationale at a
threshold t is soft >= t; with polarities in {0, 0.5, 1}, t = 0.5 takes every
explanatory phrase and t = 1 only the very polar ones.

Measures of one map (importances (n,), positive = supports the method's prediction):
  auprc             average precision of |importance| against the binary rationale
                    (ties grouped; a constant map gets the rationale's share of words)
  token_f1          F1 of the top-k words by |importance|, k = the rationale's size
                    (ties by position); with k predicted and k true, F1 = precision
  iou_f1            ERASER's IOU F1: the top-k words' contiguous runs against the
                    rationale's phrases, a pair matching when their IOU > 0.5
  highlight_recall  share of the rationale's words highlighted (below); with
                    1 - extraneous_share, the precision of the highlights at t = 0.5,
                    it tests section 5.1's "higher precision, slightly lower recall"
  spearman          rank correlation of the importance turned toward the gold label
                    with the signed human score
  highlighted_words words with |normalised importance| > 0.05 (section 5.1)
  extraneous_words  highlighted words people rated neutral and that lie in no polar
                    phrase, i.e. soft rationale 0 (a polar word is its own explanatory
                    phrase, so 'neutral' follows from 'in no explanatory phrase')
  extraneous_share  extraneous_words / highlighted_words
A measure without a value is NaN: no rationale word (the threshold measures), fewer
than two words or a constant side (spearman), nothing highlighted (extraneous_share),
or a map with a NaN importance (all of them).
"""
import dataclasses
import math

import numpy as np
from scipy import stats

from deepknn.faithfulness import measures as faithfulness
from deepknn.evaluation import ranking
from deepknn.interpret import saliency_scores
from nlp_utils import UserError

DEFAULT_THRESHOLDS = (0.5, 1.0)
IOU_MATCH = 0.5     # ERASER: a predicted span matches a true one when IOU > 0.5
THRESHOLD_MEASURES = ('auprc', 'token_f1', 'iou_f1', 'highlight_recall')
OTHER_MEASURES = ('spearman', 'extraneous_share', 'extraneous_words', 'highlighted_words')
# Which sign of a difference means the first method is the more plausible one (None:
# descriptive only).
HIGHER_IS_BETTER = {'auprc': True, 'token_f1': True, 'iou_f1': True, 'highlight_recall': True,
                    'spearman': True,
                    'extraneous_share': False, 'extraneous_words': False,
                    'highlighted_words': None}


@dataclasses.dataclass
class Rationale:
    """A sentence's human rationale, n words.

    soft     (n,) polarity 0 / 0.5 / 1 of the largest explanatory phrase over each word
    signed   (n,) that phrase's (label - 2) / 2 toward the gold label, in [-1, 1]
    phrases  (P, 2) [start, end) of the largest explanatory phrases, left to right
    phrase_polarity (P,) their polarities
    """
    soft: np.ndarray
    signed: np.ndarray
    phrases: np.ndarray
    phrase_polarity: np.ndarray

    def binary(self, threshold):
        return self.soft >= threshold

    def spans(self, threshold):
        """The explanatory phrases of polarity >= threshold: (P', 2)."""
        return self.phrases[self.phrase_polarity >= threshold]


# ---------------------------------------------------------------- the rationale rule
def polarity(labels):
    return np.abs(np.asarray(labels, dtype=np.float64) - 2) / 2


def explanatory_nodes(tree):
    """(N,) bool: the node's polarity exceeds every polarity below it (module docstring)."""
    node_polarity = polarity(tree.labels)
    below = np.zeros(len(tree.labels))      # max polarity of the nodes below; 0 for a leaf
    for node in range(len(tree.labels) - 1, 0, -1):     # children come after parents
        parent = tree.parent[node]
        below[parent] = max(below[parent], node_polarity[node], below[node])
    return node_polarity > below


def rationale(tree, gold_sign=None):
    """The Rationale of a tree. gold_sign: +1 when the sentence's gold label is positive,
    -1 when negative; None takes the sign of the root's label (SST-2's rule)."""
    if gold_sign is None:
        gold_sign = 1 if tree.root_label > 2 else -1
    if gold_sign not in (1, -1):
        raise UserError('gold_sign must be +1 or -1, got {!r}'.format(gold_sign))
    explanatory = explanatory_nodes(tree)
    covered = np.zeros(len(tree.labels), dtype=bool)   # an explanatory node above
    n = len(tree.words)
    soft, signed, largest = np.zeros(n), np.zeros(n), []
    for node in range(len(tree.labels)):
        parent = tree.parent[node]
        covered[node] = parent >= 0 and (covered[parent] or explanatory[parent])
        if explanatory[node] and not covered[node]:
            start, end = tree.spans[node]
            value = (tree.labels[node] - 2) / 2
            soft[start:end], signed[start:end] = abs(value), gold_sign * value
            largest.append(node)
    order = sorted(largest, key=lambda node: tree.spans[node][0])
    return Rationale(soft, signed, tree.spans[order].reshape(-1, 2),
                     polarity(tree.labels[order]))


# ---------------------------------------------------------------- measures
def top_k(scores, k):
    """(n,) bool: the k words of largest score, ties by position."""
    chosen = np.zeros(len(scores), dtype=bool)
    chosen[faithfulness.ranking_from_scores(scores)[:k]] = True
    return chosen


def token_f1(chosen, relevant):
    """Token-level F1 of a selection (n,) bool against a rationale (n,) bool; NaN
    without a relevant word."""
    if not relevant.any():
        return math.nan
    overlap = np.sum(chosen & relevant)
    if overlap == 0:
        return 0.0
    precision, recall = overlap / chosen.sum(), overlap / relevant.sum()
    return float(2 * precision * recall / (precision + recall))


def runs(chosen):
    """The contiguous runs of True in (n,) bool: (R, 2) [start, end)."""
    edges = np.diff(np.r_[0, np.asarray(chosen, dtype=np.int8), 0])
    return np.stack([np.nonzero(edges == 1)[0], np.nonzero(edges == -1)[0]], axis=1)


def iou_f1(predicted, true):
    """ERASER's IOU F1 of predicted spans (R, 2) against true spans (P, 2): a span
    matches when its IOU with a span of the other side exceeds IOU_MATCH; precision =
    matched predicted / R, recall = matched true / P. NaN without a true span."""
    if len(true) == 0:
        return math.nan
    if len(predicted) == 0:
        return 0.0
    starts, ends = predicted[:, None, :1], predicted[:, None, 1:]
    overlap = np.clip(np.minimum(ends, true[None, :, 1:]) - np.maximum(starts, true[None, :, :1]),
                      0, None)[..., 0]
    union = (ends - starts)[..., 0] + (true[:, 1] - true[:, 0])[None, :] - overlap
    match = overlap / union > IOU_MATCH
    precision, recall = match.any(axis=1).mean(), match.any(axis=0).mean()
    return 0.0 if precision + recall == 0 else float(2 * precision * recall /
                                                      (precision + recall))


def spearman(a, b):
    """Spearman's rho of (n,) and (n,); NaN for fewer than two words or a constant side."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    return float(stats.spearmanr(a, b).statistic)


def sentence_measures(importance, toward_gold, human, thresholds=DEFAULT_THRESHOLDS):
    """{measure: value} of one map (module docstring). importance (n,): positive
    supports the method's prediction; toward_gold: +1 when that prediction is the gold
    label, -1 when not (a binary task: support of one class opposes the other);
    human: the sentence's Rationale. Threshold measures are named 'auprc@0.5'."""
    importance = np.asarray(importance, dtype=np.float64)
    if importance.shape != human.soft.shape:
        raise UserError('importance has {} words, the rationale {}'.format(
            importance.shape, human.soft.shape))
    names = [measure_name(m, t) for t in thresholds for m in THRESHOLD_MEASURES]
    if np.isnan(importance).any():
        return dict.fromkeys(names + list(OTHER_MEASURES), math.nan)
    magnitude = np.abs(importance)
    highlighted = saliency_scores.highlighted(importance)
    values = {}
    for threshold in thresholds:
        relevant = human.binary(threshold)
        chosen = top_k(magnitude, int(relevant.sum()))
        values[measure_name('auprc', threshold)] = ranking.average_precision(
            magnitude, relevant, if_none='nan')
        values[measure_name('token_f1', threshold)] = token_f1(chosen, relevant)
        values[measure_name('iou_f1', threshold)] = iou_f1(runs(chosen), human.spans(threshold))
        values[measure_name('highlight_recall', threshold)] = (
            np.sum(highlighted & relevant) / relevant.sum() if relevant.any() else math.nan)
    extraneous = int(np.sum(highlighted & (human.soft == 0)))
    values.update(spearman=spearman(toward_gold * importance, human.signed),
                  highlighted_words=float(highlighted.sum()), extraneous_words=float(extraneous),
                  extraneous_share=extraneous / highlighted.sum() if highlighted.any()
                  else math.nan)
    return values


def measure_name(measure, threshold=None):
    """'auprc@0.5' for a threshold measure, else the measure."""
    return measure if threshold is None else '{}@{:g}'.format(measure, threshold)


def base_measure(name):
    """'auprc@0.5' -> 'auprc'."""
    return name.split('@')[0]


def check_thresholds(thresholds):
    """A tuple of distinct thresholds in (0, 1]; UserError otherwise."""
    values = tuple(dict.fromkeys(float(t) for t in thresholds))
    if not values or any(not 0 < t <= 1 for t in values):
        raise UserError('thresholds must be in (0, 1] (rationale polarities are 0, 0.5 and '
                        '1), got {}'.format(list(thresholds)))
    return values


def random_importances(lengths, seed=0):
    """The seeded random baseline: standard normal importances, S arrays (n_i,)."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(int(n)) for n in lengths]
