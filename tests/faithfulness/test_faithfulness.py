"""deepknn.faithfulness.measures: known answers on hand-built models (a bag of words with one
important word, a constant model, a 3-word lookup table worked out by hand), the
deduplication of model calls, and a paired bootstrap interval of two rankings."""
import collections

import numpy as np
import pytest

from deepknn.faithfulness import measures as fa
from deepknn.faithfulness import curves as fs
from deepknn.evaluation import statistics
from nlp_utils import UserError


# ---------------------------------------------------------------- toy models
class BagOfWords:
    """Binary logistic model over the sum of per-word weights; sentences[i] holds the
    word ids of sentence i. Counts every variant it is asked for."""

    def __init__(self, weights, sentences, bias=0.0):
        self.weights, self.sentences, self.bias = weights, sentences, bias
        self.seen = collections.Counter()
        self.calls = 0

    def __call__(self, batch):
        self.calls += 1
        margins = []
        for i, kept in batch:
            self.seen[(i, tuple(kept))] += 1
            margins.append(self.bias + self.weights[self.sentences[i][kept]].sum())
        positive = 1 / (1 + np.exp(-np.array(margins)))
        return np.stack([1 - positive, positive], axis=1)


def bag_of_words_setup(n_sentences=12, seed=0):
    """Word 0 weighs 4 (the important word, in every sentence); the others weigh
    -0.3..0.5. Every sentence is predicted class 1; the true ranking sorts the words by
    weight (their contribution to class 1)."""
    rng = np.random.default_rng(seed)
    weights = np.concatenate([[4.0], rng.uniform(-0.3, 0.5, size=30)])
    sentences = []
    for _ in range(n_sentences):
        others = rng.choice(np.arange(1, 31), size=rng.integers(5, 12), replace=False)
        words = np.concatenate([[0], others])
        sentences.append(rng.permutation(words))
    true = [fa.ranking_from_scores(weights[s]) for s in sentences]
    return BagOfWords(weights, sentences), [len(s) for s in sentences], true


def constant_model(probabilities):
    def predict(batch):
        return np.tile(probabilities, (len(batch), 1))
    return predict


# ---------------------------------------------------------------- known answers
def test_true_ranking_beats_random_and_reverse_on_a_bag_of_words():
    model, lengths, true = bag_of_words_setup()
    rankings = fa.with_baselines({'true': true}, lengths, seed=3)
    result = fa.evaluate(lengths, rankings, model, batchsize=17)
    assert np.all(result.targets == 1)
    assert [r[0] for r in true] == [list(s).index(0) for s in model.sentences]
    t, rnd, rev = (result.methods[m] for m in ('true', 'random', 'reversed true'))
    eps = 1e-12
    # Per sentence and bin: removing the heaviest words drops f(y) the most, keeping
    # them keeps it the highest; the reverse order is the floor.
    assert np.all(t.comprehensiveness >= rnd.comprehensiveness - eps)
    assert np.all(rnd.comprehensiveness >= rev.comprehensiveness - eps)
    assert np.all(t.sufficiency <= rnd.sufficiency + eps)
    assert np.all(rnd.sufficiency <= rev.sufficiency + eps)
    assert np.all(t.deletion_auc <= rnd.deletion_auc + eps)
    assert np.all(rnd.deletion_auc <= rev.deletion_auc + eps)
    assert np.all(t.insertion_auc >= rnd.insertion_auc - eps)
    # Over the sentences the random order lies strictly between.
    assert t.aopc_comp.mean() > rnd.aopc_comp.mean() > rev.aopc_comp.mean()
    assert t.aopc_suff.mean() < rnd.aopc_suff.mean() < rev.aopc_suff.mean()
    assert t.deletion_auc.mean() < rnd.deletion_auc.mean() < rev.deletion_auc.mean()
    assert t.insertion_auc.mean() > rnd.insertion_auc.mean() > rev.insertion_auc.mean()


def test_a_constant_model_scores_zero_and_its_curve_areas_equal_the_constant():
    lengths = [1, 2, 7]
    rankings = fa.with_baselines({'order': [np.arange(n) for n in lengths]}, lengths)
    result = fa.evaluate(lengths, rankings, constant_model([0.25, 0.7, 0.05]))
    assert np.all(result.targets == 1)
    for scores in result.methods.values():
        assert np.all(scores.aopc_comp == 0) and np.all(scores.aopc_suff == 0)
        assert np.all(scores.comprehensiveness == 0) and np.all(scores.sufficiency == 0)
        np.testing.assert_allclose(scores.deletion_auc, 0.7, rtol=1e-12)
        np.testing.assert_allclose(scores.insertion_auc, 0.7, rtol=1e-12)


# Class-1 probability of each variant of the sentence (w0, w1, w2) under the ranking
# [1, 0, 2]: exactly the variants the module may ask for.
TABLE = {
    (0, 1, 2): 0.9,   # full input
    (0, 2): 0.5,      # without the top-1 (w1)
    (2,): 0.3,        # without the top-2 (w1, w0)
    (): 0.2,          # without all three / the empty insertion
    (1,): 0.7,        # only the top-1
    (0, 1): 0.8,      # only the top-2, in original order
}


def table_model(batch):
    p = np.array([TABLE[tuple(kept)] for _, kept in batch])
    return np.stack([1 - p, p], axis=1)


def test_hand_computed_three_word_sentence():
    result = fa.evaluate([3], {'m': [[1, 0, 2]]}, table_model)
    # k * 3 = 0.03, 0.15, 0.3, 0.6 -> at least 1 word; 1.5 rounds half up to 2.
    assert result.sizes.tolist() == [[1, 1, 1, 1, 2]]
    assert result.targets.tolist() == [1] and result.full_probability[0] == pytest.approx(0.9)
    m = result.methods['m']
    # comprehensiveness 0.9 - 0.5 = 0.4 (top-1), 0.9 - 0.3 = 0.6 (top-2)
    np.testing.assert_allclose(m.comprehensiveness[0], [0.4, 0.4, 0.4, 0.4, 0.6])
    assert m.aopc_comp[0] == pytest.approx((4 * 0.4 + 0.6) / 5)        # 0.44
    # sufficiency 0.9 - 0.7 = 0.2 (top-1), 0.9 - 0.8 = 0.1 (top-2)
    np.testing.assert_allclose(m.sufficiency[0], [0.2, 0.2, 0.2, 0.2, 0.1])
    assert m.aopc_suff[0] == pytest.approx((4 * 0.2 + 0.1) / 5)        # 0.18
    np.testing.assert_allclose(m.deletion_curves[0], [0.9, 0.5, 0.3, 0.2])
    np.testing.assert_allclose(m.insertion_curves[0], [0.2, 0.7, 0.8, 0.9])
    # Trapezoids of width 1/3: (0.7 + 0.4 + 0.25) / 3 and (0.45 + 0.75 + 0.85) / 3.
    assert m.deletion_auc[0] == pytest.approx(0.45)
    assert m.insertion_auc[0] == pytest.approx(2.05 / 3)


def scores_model(batch):
    """TABLE as unnormalised scores: class 1 gets p, class 0 gets 0.95 (the argmax on
    the full input, 0.95 > 0.9), rows not summing to 1 (like DkNN p-values)."""
    p = np.array([TABLE[tuple(kept)] for _, kept in batch])
    return np.stack([np.full_like(p, 0.95), p], axis=1)


def test_scores_that_are_no_probabilities_with_given_targets():
    with pytest.raises(UserError, match='predict must return probabilities'):
        fa.evaluate([3], {'m': [[1, 0, 2]]}, scores_model)
    # Default target: the argmax on the full input, class 0 at a constant 0.95.
    by_argmax = fa.evaluate([3], {'m': [[1, 0, 2]]}, scores_model, probabilities=False)
    assert by_argmax.targets.tolist() == [0]
    assert np.all(by_argmax.methods['m'].comprehensiveness == 0)
    # Given target 1: the hand-computed answers of the table, though rows do not sum to 1.
    given = fa.evaluate([3], {'m': [[1, 0, 2]]}, scores_model, probabilities=False,
                        targets=[1])
    assert given.targets.tolist() == [1] and given.full_probability[0] == pytest.approx(0.9)
    np.testing.assert_allclose(given.methods['m'].comprehensiveness[0],
                               [0.4, 0.4, 0.4, 0.4, 0.6])
    np.testing.assert_allclose(given.methods['m'].sufficiency[0], [0.2, 0.2, 0.2, 0.2, 0.1])
    assert given.methods['m'].deletion_auc[0] == pytest.approx(0.45)
    for targets in ([2], [0, 1], [0.5]):
        with pytest.raises(UserError, match='targets'):
            fa.evaluate([3], {'m': [[1, 0, 2]]}, scores_model, probabilities=False,
                        targets=targets)
    with pytest.raises(UserError, match='finite'):
        fa.evaluate([3], {'m': [[1, 0, 2]]}, lambda batch: np.full((len(batch), 2), np.inf),
                    probabilities=False)


def test_without_curves_only_the_bins_are_predicted():
    model, lengths, true = bag_of_words_setup(n_sentences=4)
    with_curves = fa.evaluate(lengths, {'t': true}, model)
    model.seen.clear()
    bins_only = fa.evaluate(lengths, {'t': true}, model, curves=False)
    assert bins_only.n_variants < with_curves.n_variants
    assert bins_only.methods['t'].deletion_curves is None
    assert np.all(np.isnan(bins_only.methods['t'].deletion_auc))
    np.testing.assert_allclose(bins_only.methods['t'].comprehensiveness,
                               with_curves.methods['t'].comprehensiveness)
    np.testing.assert_allclose(bins_only.methods['t'].sufficiency,
                               with_curves.methods['t'].sufficiency)
    assert ((0, ()) not in model.seen) and len(model.seen) == bins_only.n_variants


def test_top_k_sizes_round_half_up_and_stay_within_the_sentence():
    assert fa.top_k_sizes(1).tolist() == [1, 1, 1, 1, 1]
    assert fa.top_k_sizes(10).tolist() == [1, 1, 1, 2, 5]
    assert fa.top_k_sizes(25).tolist() == [1, 1, 3, 5, 13]     # 0.1 * 25 = 2.5 -> 3
    assert fa.top_k_sizes(4, [1.0, 0.125]).tolist() == [4, 1]  # 0.5 -> 1


# ---------------------------------------------------------------- deduplication
def test_each_distinct_variant_is_predicted_once():
    model, lengths, true = bag_of_words_setup(n_sentences=5)
    rankings = fa.with_baselines({'true': true, 'same': [r.copy() for r in true]}, lengths)
    result = fa.evaluate(lengths, rankings, model, batchsize=7)
    assert max(model.seen.values()) == 1
    # Every prefix and suffix of every ranking, once: count them independently.
    expected = set()
    for name, per_sentence in rankings.items():
        for i, r in enumerate(per_sentence):
            for j in range(len(r) + 1):
                expected.add((i, tuple(sorted(r[j:]))))
                expected.add((i, tuple(sorted(r[:j]))))
    assert set(model.seen) == expected and result.n_variants == len(expected)
    assert model.calls == -(-len(expected) // 7)
    # 'same' duplicates 'true' entirely, so it cost nothing extra and scores the same.
    np.testing.assert_array_equal(result.methods['same'].deletion_auc,
                                  result.methods['true'].deletion_auc)


def test_progress_bar_description_is_accepted(capsys):
    fa.evaluate([3], {'m': [[1, 0, 2]]}, table_model, progress='faithfulness')
    assert 'faithfulness' in capsys.readouterr().err


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize('ranking', [[0, 1], [0, 1, 1], [0, 1, 3], [0.0, 1.0, 2.0]])
def test_a_ranking_that_is_not_a_permutation_is_refused(ranking):
    with pytest.raises(UserError, match=r"rankings\['m'\]\[0\] must be a permutation"):
        fa.evaluate([3], {'m': [ranking]}, table_model)


@pytest.mark.parametrize('fractions', [[0.0, 0.5], [0.5, 1.5], [-0.1], [np.nan]])
def test_fractions_outside_0_1_are_refused(fractions):
    with pytest.raises(UserError, match=r'fractions must be in \(0, 1\]'):
        fa.evaluate([3], {'m': [[1, 0, 2]]}, table_model, fractions=fractions)


@pytest.mark.parametrize('predict, message', [
    (lambda batch: np.full((len(batch) + 1, 2), 0.5), 'shape'),
    (lambda batch: np.full(len(batch), 1.0), 'shape'),
    (lambda batch: np.full((len(batch), 2), 0.7), 'probabilities'),
    (lambda batch: np.tile([1.5, -0.5], (len(batch), 1)), 'probabilities'),
    (lambda batch: np.full((len(batch), 2), np.nan), 'probabilities'),
])
def test_predict_returning_no_probabilities_is_refused(predict, message):
    with pytest.raises(UserError, match='predict must return.*' + message):
        fa.evaluate([3], {'m': [[1, 0, 2]]}, predict)


def test_predict_changing_its_class_count_between_batches_is_refused():
    sizes = iter([2, 3, 3, 3])

    def predict(batch):
        c = next(sizes)
        return np.full((len(batch), c), 1 / c)
    with pytest.raises(UserError, match=r'predict must return \(2, 2\)'):
        fa.evaluate([3], {'m': [[1, 0, 2]]}, predict, batchsize=2)


def test_other_arguments_are_checked():
    with pytest.raises(UserError, match='lengths'):
        fa.evaluate([3, 0], {'m': [[1, 0, 2], []]}, table_model)
    with pytest.raises(UserError, match=r"rankings\['m'\] has 1 sentences"):
        fa.evaluate([3, 3], {'m': [[1, 0, 2]]}, table_model)
    with pytest.raises(UserError, match='batchsize'):
        fa.evaluate([3], {'m': [[1, 0, 2]]}, table_model, batchsize=0)
    with pytest.raises(UserError, match='random'):
        fa.with_baselines({'random': [[0]]}, [1])


# ---------------------------------------------------------------- baselines
def test_baselines_are_seeded_permutations_and_reversals():
    lengths = [4, 9, 1]
    a, b = fa.random_rankings(lengths, seed=5), fa.random_rankings(lengths, seed=5)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert all(sorted(r) == list(range(n)) for r, n in zip(a, lengths))
    assert fa.reversed_rankings([np.array([2, 0, 1])])[0].tolist() == [1, 0, 2]
    assert fa.ranking_from_scores([0.1, 0.5, 0.1, np.nan, 0.9]).tolist() == [4, 1, 0, 2, 3]


# ---------------------------------------------------------------- paired bootstrap
def test_paired_difference_of_a_method_with_itself_is_exactly_zero():
    model, lengths, true = bag_of_words_setup()
    result = fa.evaluate(lengths, fa.with_baselines({'true': true}, lengths), model)
    t, rev = result.methods['true'], result.methods['reversed true']
    itself = statistics.paired_bootstrap_ci(t.aopc_comp, t.aopc_comp)
    assert (itself.mean, itself.low, itself.high) == (0.0, 0.0, 0.0)
    assert not itself.excludes_zero
    beats = statistics.paired_bootstrap_ci(t.aopc_comp, rev.aopc_comp)
    assert beats.low > 0 and beats.excludes_zero
    with pytest.raises(UserError, match='confidence'):
        statistics.bootstrap_ci([1.0, 2.0], confidence=1.0)
    with pytest.raises(UserError, match='values_a'):
        statistics.paired_bootstrap_ci([1.0], [1.0, 2.0])
