"""input_reduction: the beam search on a toy classifier with known importances, and its
invariants (prediction kept, never empty, premise untouched, batch-invariant) on tiny CNNs."""
import json
import types

import numpy as np
import pytest

from deepknn.feng import input_reduction as ir
from deepknn.interpret import leave_one_out
from deepknn.interpret import saliency
import nlp_utils
from nlp_utils import UserError
from tests.commands.test_interpretations import VOCAB, make_setup, random_sentences

WORDS = ['good', 'the', 'great', 'bad', 'x', 'y', 'z', 'w', 'v']
TOY_VOCAB = {nlp_utils.EOS: 0, nlp_utils.UNK: 1, **{w: i + 2 for i, w in enumerate(WORDS)}}
TOY_NAMES = {i: w for w, i in TOY_VOCAB.items()}


class ToyScorer:
    """A linear classifier: positive (class 1) iff bias + sum of word weights > 0.
    Reads the rows' ids directly, so no network is involved."""

    def __init__(self, weights, bias):
        self.weights, self.bias = weights, bias
        self.model = types.SimpleNamespace(pair=False)
        self.vocab = TOY_VOCAB

    def score(self, words):
        return self.bias + sum(self.weights.get(w, 0.0) for w in words)

    def class_scores(self, outputs):
        margins = np.array([self.score([TOY_NAMES[i] for i in ids[:-1]]) for ids in outputs.rows])
        positive = 1 / (1 + np.exp(-margins))
        return np.stack([1 - positive, positive], axis=1), (margins > 0).astype(np.int64)


class ToyExplainer:
    """Importance = a fixed value per word (sign-flipped for the negative class);
    records every input it is asked to explain."""

    def __init__(self, importance, scorer):
        self.importance, self.scorer, self.seen = importance, scorer, []

    def interpret(self, examples, batchsize=None, progress=None):
        results = []
        for words, _ in examples:
            self.seen.append(list(words))
            sign = 1 if self.scorer.score(words) > 0 else -1
            scores = sign * np.array([self.importance[w] for w in words], dtype=np.float64)
            results.append(types.SimpleNamespace(scores=scores))
        return results


def toy_reducer(weights, bias, importance=None, beam=1):
    scorer = ToyScorer(weights, bias)
    return ir.InputReducer(ToyExplainer(importance or weights, scorer), scorer, beam)


# ---------------------------------------------------------------- known answers
def test_the_least_important_word_goes_first_and_reduction_stops_before_a_flip():
    # margin: 2 + .2 + 2.4 - 1 - 2.5 = 1.1 > 0 (positive). Removing 'bad' (importance -1)
    # gives 2.1, then 'the' (.2) gives 1.9; removing 'good' (2) would give -0.1: a flip.
    reducer = toy_reducer({'good': 2, 'the': .2, 'great': 2.4, 'bad': -1}, bias=-2.5)
    [result] = reducer.reduce([(['good', 'the', 'great', 'bad'], 1)])
    assert reducer.explainer.seen == [['good', 'the', 'great', 'bad'], ['good', 'the', 'great'],
                                      ['good', 'great']]
    assert result.reduced == ['good', 'great'] and result.all_reduced == [['good', 'great']]
    assert (result.prediction, result.label, result.steps) == (1, 1, 2)
    assert result.score_after > result.score_before     # confidence rose, as in the paper
    assert result.score_after == pytest.approx(1 / (1 + np.exp(-1.9)))


def test_beam_search_finds_what_greedy_misses():
    # The explainer calls the crucial 'x' least important: greedy removes it, sees the
    # flip and stops; a beam of 2 also tries 'y' and goes on.
    weights = {'x': 5, 'y': 1, 'z': 1, 'w': 1, 'v': 1}
    misleading = {'x': 0, 'y': 1, 'z': 2, 'w': 3, 'v': 4}
    sentence = ['x', 'y', 'z', 'w', 'v']                      # margin 9 - 5.5 > 0
    greedy = toy_reducer(weights, -5.5, misleading, beam=1).reduce([(sentence, None)])[0]
    beam = toy_reducer(weights, -5.5, misleading, beam=2).reduce([(sentence, None)])[0]
    assert greedy.reduced == sentence and greedy.steps == 0
    assert beam.reduced == ['x', 'z', 'w', 'v'] and beam.steps == 1


def test_beam_keeps_every_minimum_length_reduction():
    # Any one word can go (margin 4 - 3.5), no two can. At L = 5 the beam is 2 wide: the
    # two least important words ('x', 'y') are tried and both kept; at L = 4 every
    # proposal flips, so both length-4 inputs are the result (ties keep proposal order).
    importance = {'x': 1, 'y': 2, 'z': 3, 'w': 4, 'v': 5}
    reducer = toy_reducer(dict.fromkeys(importance, 1), -3.5, importance, beam=5)
    [result] = reducer.reduce([(['x', 'y', 'z', 'w', 'v'], None)])
    assert result.all_reduced == [['y', 'z', 'w', 'v'], ['x', 'z', 'w', 'v']]
    assert result.reduced == ['y', 'z', 'w', 'v'] and result.steps == 1


@pytest.mark.parametrize('k,length,expected', [(5, 20, 5), (5, 8, 5), (5, 6, 3), (5, 5, 2),
                                               (5, 4, 1), (5, 2, 1), (1, 50, 1), (3, 1, 1)])
def test_beam_size_is_max_1_min_k_l_minus_3(k, length, expected):
    assert ir.beam_size(k, length) == expected


# ---------------------------------------------------------------- tiny CNNs
@pytest.fixture(scope='module')
def cnn(tmp_path_factory):
    return make_setup(tmp_path_factory.mktemp('cnn'))


def test_reduction_keeps_the_prediction_and_never_empties(cnn):
    setup, dknn = cnn
    examples = [(s, None) for s in random_sentences(12, seed=7, low=1, high=9)]
    for importance in ir.IMPORTANCES:     # every registered method
        reducer = ir.make_reducer(importance, setup, dknn, max_beam=3, temperature=2.0)
        for result in reducer.reduce(examples):
            assert 1 <= len(result.reduced) <= len(result.original)
            ids = leave_one_out.full_input(None, result.reduced, VOCAB)
            if saliency.REGISTRY[importance].needs_dknn:   # the DkNN's prediction is kept
                kept = dknn.predict_from_activations(setup.model.layer_activations([ids]))
                assert kept['prediction'][0] == result.prediction
            else:
                assert setup.model.predict_logits([ids]).argmax() == result.prediction
            words = iter(result.original)             # reduced is a subsequence
            assert all(any(w == v for v in words) for w in result.reduced)


def test_batched_reduction_equals_one_at_a_time(cnn):
    setup, dknn = cnn
    examples = [(s, None) for s in random_sentences(10, seed=8, low=2, high=9)]
    for importance in ('gradient', 'conformity'):
        batched = ir.make_reducer(importance, setup, dknn, batchsize=256).reduce(examples)
        single = [ir.make_reducer(importance, setup, dknn, batchsize=1).reduce([e])[0]
                  for e in examples]
        for a, b in zip(batched, single):
            assert (a.reduced, a.all_reduced, a.prediction) == (b.reduced, b.all_reduced,
                                                                b.prediction)
            assert a.score_after == pytest.approx(b.score_after, abs=1e-6)
    assert any(r.steps > 0 for r in batched)


def test_a_resumed_reduction_equals_an_uninterrupted_one(cnn):
    """Stop after the second step, save the state as JSON, resume in a new reducer."""
    setup, dknn = cnn
    examples = [(s, None) for s in random_sentences(10, seed=11, low=4, high=9)]
    whole = ir.make_reducer('gradient', setup, dknn).reduce(examples)
    saved = []

    def stop_after_two_steps(state):
        saved.append(json.dumps(state.to_json()))
        if len(saved) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ir.make_reducer('gradient', setup, dknn).reduce(examples, on_step=stop_after_two_steps)
    state = ir.BeamState.from_json(json.loads(saved[-1]), [len(s) for s, _ in examples])
    assert state.active and len(state.active) < len(examples) + 1
    resumed = ir.make_reducer('gradient', setup, dknn).reduce(examples, resume=state)
    assert [(r.reduced, r.all_reduced, r.kept, r.steps, r.score_before, r.score_after)
            for r in resumed] == [(r.reduced, r.all_reduced, r.kept, r.steps, r.score_before,
                                   r.score_after) for r in whole]
    with pytest.raises(ValueError, match='holds 10 examples, not 9'):
        ir.make_reducer('gradient', setup, dknn).reduce(examples[:9], resume=state)


def test_snli_premises_are_untouched(tmp_path):
    setup, dknn = make_setup(tmp_path, pair=True)
    sentences = random_sentences(12, seed=9, low=3, high=9)
    examples = [((sentences[i], sentences[i + 1]), None) for i in range(0, 12, 2)]
    results = ir.make_reducer('gradient', setup, dknn).reduce(examples)
    for ((premise, hypothesis), _), result in zip(examples, results):
        assert result.premise == premise and result.original == hypothesis
        full = leave_one_out.full_input(premise, result.reduced, VOCAB)
        assert setup.model.predict_logits([full]).argmax() == result.prediction
    assert any(r.steps > 0 for r in results)


def test_before_after_and_summary(cnn):
    setup, dknn = cnn
    examples = [(s, None) for s in random_sentences(8, seed=10, low=2, high=9)]
    reductions = ir.make_reducer('gradient', setup, dknn).reduce(examples)
    view = ir.before_after(setup.model, VOCAB, reductions, dknn)
    probabilities = setup.model.predict_proba(
        [leave_one_out.full_input(None, r.reduced, VOCAB) for r in reductions])
    np.testing.assert_allclose(view['confidence_after'], probabilities.max(axis=1), atol=1e-6)
    np.testing.assert_array_equal(view['softmax_prediction_after'],
                                  [r.prediction for r in reductions])
    stats = ir.summarize(reductions, view)
    assert stats['mean_reduced_length'] == np.mean([len(r.reduced) for r in reductions])
    assert stats['fraction_1_2_words'] == np.mean([len(r.reduced) <= 2 for r in reductions])
    assert 0 <= stats['mean_credibility_after'] <= 1


# ---------------------------------------------------------------- bad input
def test_bad_input_is_one_line_user_error(cnn):
    setup, dknn = cnn
    with pytest.raises(UserError, match='pass `beam` 1 or more'):
        ir.make_reducer('gradient', setup, max_beam=0)
    with pytest.raises(UserError, match='empty input'):
        ir.make_reducer('gradient', setup).reduce([([], None)])
    with pytest.raises(UserError, match='choose from'):
        ir.make_reducer('attention', setup)


def test_report_escapes_every_text_and_strikes_the_removed_words():
    from deepknn.reports import reduction_report
    vocab = {'<eos>': 0, '<unk>': 1, '<b>': 2, 'fine': 3, '&': 4}
    reduction = ir.Reduction(['<b>', 'fine', '&', 'x"y'], ['fine'], (1,), [['fine']],
                             ['a<i>'], 0, 0, 0.9, 0.95, 3)
    view = {'confidence_before': np.array([0.9]), 'confidence_after': np.array([0.95]),
            'softmax_prediction_before': np.array([0]),
            'softmax_prediction_after': np.array([0])}
    rows = reduction_report.records([reduction], view, ['<neg>', 'pos'], vocab)
    assert rows[0]['original'] == '<b> fine & <x"y>' and rows[0]['reduced'] == 'fine'
    assert rows[0]['prediction'] == '<neg>' and rows[0]['softmax_prediction_after'] == '<neg>'
    page = reduction_report.html_page(rows, [reduction], vocab, 'T<itle>')
    assert '<b>' not in page.replace('<b><bdi>fine</bdi></b>', '') and '<i>' not in page
    assert '&lt;neg&gt;' in page and '&lt;x&quot;y&gt;' in page and 'T&lt;itle&gt;' in page
    assert page.count('class="removed"') == 3
    # Every text is direction-isolated: a right-to-left word cannot reorder its row.
    assert '<bdi>fine</bdi>' in page and '<bdi>&lt;neg&gt;</bdi>' in page
