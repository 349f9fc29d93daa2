"""interpretations: every importance against a hand computation on a tiny model."""
import dataclasses
import types

import chainer
import chainer.functions as F
import matplotlib.pyplot as plt
import numpy as np
import pytest

import interpretations as interp
from deepknn.interpret import leave_one_out
from deepknn.interpret import saliency
from deepknn.reports import saliency_png
from deepknn.reports import saliency_report
from deepknn.interpret import saliency_scores
import nets
import nlp_utils
from deepknn.neighbors import dknn as dknn_lib
from nlp_utils import UserError
from deepknn.neighbors.dknn import DkNN

WORDS = ['good', 'bad', 'movie', 'the', 'a', 'not', 'great', 'film', 'plot', 'very', 'dull', 'fun']
VOCAB = {nlp_utils.EOS: 0, nlp_utils.UNK: 1, **{w: i + 2 for i, w in enumerate(WORDS)}}
LABEL_NAMES = ['neg', 'neu', 'pos']
N_CLASS = 3


def make_model(pair=False, seed=0):
    np.random.seed(seed)
    config = types.SimpleNamespace(model='cnn', unit=12, layer=1, dropout=0, embed_dim=6)
    model = nets.build_model(config, len(VOCAB), N_CLASS, pair)
    model.to_device('@numpy')
    return model


def random_sentences(n, seed, low=2, high=9):
    rng = np.random.RandomState(seed)
    return [list(rng.choice(WORDS, size=rng.randint(low, high))) for _ in range(n)]


def make_setup(tmp_path, pair=False):
    """A stand-in for model_setup.Setup with a DkNN over random training sentences."""
    model = make_model(pair)
    sentences = random_sentences(80, seed=1)
    tokens = [tuple(sentences[i:i + 2]) for i in range(0, 80, 2)] if pair else sentences
    labels = list(np.random.RandomState(2).randint(0, N_CLASS, len(tokens)))
    train, calib = list(zip(tokens, labels))[:-15], list(zip(tokens, labels))[-15:]
    encode = lambda examples: [x for x, _ in nlp_utils.encode_examples(examples, VOCAB)]
    dknn = DkNN(N_CLASS, k=5).fit(model.layer_activations(encode(train)), [y for _, y in train])
    dknn.calibrate(model.layer_activations(encode(calib)), [y for _, y in calib])
    setup = types.SimpleNamespace(
        model=model, vocab=VOCAB, result_dir=str(tmp_path), label_names=LABEL_NAMES,
        splits=types.SimpleNamespace(train=train, test=train[:4]),
        config=types.SimpleNamespace(dataset='toy', model='cnn', n_class=N_CLASS))
    setup.evaluation_examples = lambda split, eval_file, skip_bad_lines=False: (split, getattr(setup.splits, split))
    return setup, dknn


@pytest.fixture
def setup_and_dknn(tmp_path):
    return make_setup(tmp_path)


def examples_of(sentences):
    return [(s, i % N_CLASS) for i, s in enumerate(sentences)]


def variants(words):
    return [words[:i] + words[i + 1:] for i in range(len(words))]


# ---------------------------------------------------------------- leave-one-out by hand
def test_leave_one_out_inputs_re_encode_the_shortened_sentence():
    words, premise = ['good', 'Schweiger', 'movie'], ['the', 'plot']
    rows = leave_one_out.LeaveOneOutInputs(None, words, VOCAB)
    expected = [nlp_utils.to_ids(v, VOCAB) for v in [words] + variants(words)]
    assert len(rows) == 4 and all(np.array_equal(a, b) for a, b in zip(rows, expected))
    pair_rows = list(leave_one_out.LeaveOneOutInputs(premise, words, VOCAB))
    assert all(np.array_equal(p, nlp_utils.to_ids(premise, VOCAB)) for p, _ in pair_rows)
    assert all(np.array_equal(h, e) for (_, h), e in zip(pair_rows, expected))
    assert len(leave_one_out.LeaveOneOutInputs(None, ['fun'], VOCAB)) == 1


def test_confidence_loo_is_the_drop_in_softmax_probability(setup_and_dknn):
    setup, _ = setup_and_dknn
    examples = examples_of(random_sentences(5, seed=3))
    results = saliency.ConfidenceLOO(setup.model, VOCAB).interpret(examples, batchsize=16)
    for (words, label), result in zip(examples, results):
        full = setup.model.predict_proba([nlp_utils.to_ids(words, VOCAB)])[0]
        y = int(full.argmax())
        dropped = [setup.model.predict_proba([nlp_utils.to_ids(v, VOCAB)])[0, y]
                   for v in variants(words)]
        assert (result.prediction, result.label, result.tokens) == (y, label, words)
        assert result.score == pytest.approx(full[y], abs=1e-6)
        np.testing.assert_allclose(result.scores, full[y] - np.array(dropped), atol=1e-6)
        assert result.premise is None
    assert any(np.abs(r.scores).max() > 1e-4 for r in results)


@pytest.mark.parametrize('method,key', [('conformity', 'conformity'), ('credibility', 'p_values')])
def test_dknn_loo_is_the_drop_in_dknn_scores(setup_and_dknn, method, key):
    setup, dknn = setup_and_dknn
    examples = examples_of(random_sentences(6, seed=4))
    results = saliency.make_interpreter(method, setup, dknn).interpret(examples, batchsize=10)
    dknn_of = lambda words: dknn.predict_from_activations(
        setup.model.layer_activations([nlp_utils.to_ids(words, VOCAB)]))
    for (words, _), result in zip(examples, results):
        full = dknn_of(words)
        y = int(full['prediction'][0])
        dropped = np.array([dknn_of(v)[key][0, y] for v in variants(words)])
        assert result.prediction == y
        assert result.score == full[key][0, y]
        np.testing.assert_array_equal(result.scores, full[key][0, y] - dropped)
    assert any(np.abs(r.scores).max() > 0 for r in results)


def test_conformity_prediction_is_the_argmax_of_conformity(setup_and_dknn):
    setup, dknn = setup_and_dknn
    examples = examples_of(random_sentences(20, seed=5))
    results = saliency.ConformityLOO(setup.model, VOCAB, dknn).interpret(examples)
    conformity = dknn.predict_from_activations(setup.model.layer_activations(
        [nlp_utils.to_ids(words, VOCAB) for words, _ in examples]))['conformity']
    assert [r.prediction for r in results] == list(conformity.argmax(axis=1))


def test_calibrated_loo_uses_the_temperature(setup_and_dknn, tmp_path):
    setup, _ = setup_and_dknn
    with pytest.raises(UserError, match='run `scaling` `model_setup` .*args.json first'):
        saliency.make_interpreter('calibrated', setup)
    nlp_utils.atomic_write_json(str(tmp_path / 'temperature.json'), {'temperature': 2.5})
    words = random_sentences(1, seed=6)[0]
    result = saliency.make_interpreter('calibrated', setup).interpret([(words, None)])[0]
    logits = setup.model.predict_logits(
        [nlp_utils.to_ids(v, VOCAB) for v in [words] + variants(words)])
    probabilities = np.exp(logits / 2.5) / np.exp(logits / 2.5).sum(axis=1, keepdims=True)
    y = result.prediction
    assert y == logits[0].argmax() and result.label is None
    np.testing.assert_allclose(result.scores, probabilities[0, y] - probabilities[1:, y], atol=1e-6)


# ---------------------------------------------------------------- batching
def test_batched_results_equal_one_at_a_time(setup_and_dknn):
    setup, dknn = setup_and_dknn
    examples = examples_of(random_sentences(9, seed=7) + [['fun']])
    methods = ('conformity', 'confidence', 'credibility', 'gradient')
    together = saliency.interpret_all(setup, methods, examples, dknn, batchsize=7, progress=False)
    assert list(together) == list(methods)
    for method in methods:
        interpreter = saliency.make_interpreter(method, setup, dknn)
        alone = [interpreter.interpret([example], batchsize=1)[0] for example in examples]
        for a, b in zip(together[method], alone):
            assert (a.prediction, a.tokens) == (b.prediction, b.tokens)
            np.testing.assert_allclose(a.scores, b.scores, atol=1e-6)
            assert a.score == pytest.approx(b.score, abs=1e-6)


def test_chunks_respect_row_and_token_limits():
    rows = [[np.zeros(n, np.int32)] * n for n in (3, 1, 5, 2)] + [[np.zeros(1000, np.int32)] * 4]
    chunks = list(leave_one_out.chunked_rows(rows, batchsize=4))
    assert all(len(chunk) <= 4 for chunk in chunks)
    # Rows of 1000 ids exceed the 4 * TOKENS_PER_ROW budget, so each gets a chunk of its own.
    assert [len(chunk) for chunk in chunks][-4:] == [1, 1, 1, 1]
    flat = [(owner, position) for chunk in chunks for owner, position, _ in chunk]
    assert flat == [(o, p) for o, r in enumerate(rows) for p in range(len(r))]


def test_dknn_is_built_only_for_dknn_methods(setup_and_dknn, monkeypatch):
    setup, dknn = setup_and_dknn
    calls = []
    monkeypatch.setattr(dknn_lib, 'dknn_from_setup', lambda s, settings: calls.append(s) or dknn)
    examples = examples_of(random_sentences(2, seed=8))
    saliency.interpret_all(setup, ['confidence', 'gradient'], examples, progress=False)
    assert calls == []
    saliency.interpret_all(setup, ['conformity', 'credibility'], examples, progress=False)
    assert calls == [setup]


def test_unknown_method_lists_choices(setup_and_dknn):
    setup, _ = setup_and_dknn
    with pytest.raises(UserError, match='choose from conformity, confidence, calibrated'):
        saliency.interpret_all(setup, 'confidence,saliency', [(['good'], 0)])
    with pytest.raises(UserError, match='saliency'):
        saliency.make_interpreter('saliency', setup)


def test_library_messages_name_the_parameter_and_the_cli_its_flag(any_run_path, tmp_path, capsys):
    with pytest.raises(UserError, match='^methods: unknown interpretation method'):
        saliency.parse_methods('nope')
    with pytest.raises(UserError, match='^methods: no interpretation method given'):
        saliency.parse_methods(' , ')
    with pytest.raises(SystemExit):     # checked as the flags are read
        interp.main(['--model-setup', 'x', '--methods', 'nope',
                     '--output', str(tmp_path / 'maps.html')])
    assert 'argument --methods: unknown interpretation method(s) nope; choose from ' \
        'conformity' in capsys.readouterr().err


# ---------------------------------------------------------------- the registry
@pytest.fixture
def clean_registry():
    """Whatever a test registers is gone afterwards (the registry as it was, in order)."""
    before = dict(saliency.REGISTRY)
    yield
    saliency.REGISTRY.clear()
    saliency.REGISTRY.update(before)


@pytest.fixture
def constant_method(clean_registry):
    """A method defined the way a newcomer would: one class, nothing else edited.
    f(0 | x) = the number of ids of x, so every word's importance is exactly 1."""
    class ConstantLOO(saliency.LeaveOneOut):
        name = 'constant'
        description = 'every word has importance 1 (a test method)'
        score_meaning = 'number of ids in the input'

        def class_scores(self, outputs):
            outputs.logits   # read like a real method, so sharing the pass is visible
            n_ids = np.array([len(row) for row in outputs.rows], dtype=np.float64)
            return (np.stack([n_ids, np.zeros_like(n_ids)], axis=1),
                    np.zeros(len(n_ids), dtype=np.int64))
    return ConstantLOO


def test_registry_holds_the_methods_in_order_with_their_facts():
    registry = saliency.REGISTRY
    assert list(registry) == ['conformity', 'confidence', 'calibrated', 'gradient', 'credibility']
    assert [n for n, c in registry.items() if c.needs_dknn] == ['conformity', 'credibility']
    assert [n for n, c in registry.items() if c.needs_temperature] == ['calibrated']
    assert saliency.DEFAULT_METHODS == ('conformity', 'confidence', 'gradient')
    assert all(registry[n].name == n and registry[n].description for n in registry)
    assert saliency.needs_dknn('confidence,credibility') and not saliency.needs_dknn(['gradient'])
    assert saliency.needs_temperature(['calibrated']) and not saliency.needs_temperature('conformity')


def test_a_new_method_class_is_available_everywhere(constant_method, setup_and_dknn, capsys,
                                                     monkeypatch):
    setup, dknn = setup_and_dknn
    assert saliency.REGISTRY['constant'] is constant_method
    assert saliency.parse_methods('confidence, constant') == ('confidence', 'constant')
    with pytest.raises(UserError, match='choose from .*credibility, constant$'):
        saliency.parse_methods('nope')
    with pytest.raises(SystemExit):
        interp.parse_args(['--help'])
    assert 'constant: every word has importance 1 (a test method)' in ' '.join(
        capsys.readouterr().out.split())
    examples = examples_of(random_sentences(4, seed=13) + [['fun']])
    alone = saliency.make_interpreter('constant', setup).interpret(examples)
    assert isinstance(saliency.make_interpreter('constant', setup), constant_method)
    for (words, label), result in zip(examples, alone):
        expected = np.ones(len(words)) if len(words) > 1 else np.full(1, np.nan)
        np.testing.assert_array_equal(result.scores, expected)
        assert (result.prediction, result.score, result.label) == (0, len(words) + 1, label)
    forward_passes = []
    layer_activations = setup.model.layer_activations
    monkeypatch.setattr(setup.model, 'layer_activations',
                        lambda *a: forward_passes.append(1) or layer_activations(*a))
    together = saliency.interpret_all(setup, 'constant,confidence,gradient', examples,
                                      batchsize=1000, progress=False)
    assert list(together) == ['constant', 'confidence', 'gradient']
    assert len(forward_passes) == 1     # grouped with the other leave-one-out method
    for a, b in zip(together['constant'], alone):
        np.testing.assert_array_equal(a.scores, b.scores)
    views = saliency_report.build_views(together, VOCAB, LABEL_NAMES)
    assert 'constant: number of ids in the input' in saliency_report.score_note(views)


def test_a_name_clash_or_a_missing_fact_is_refused(clean_registry):
    before = dict(saliency.REGISTRY)
    with pytest.raises(ValueError, match="'confidence' is already registered by .*ConfidenceLOO"):
        class Impostor(saliency.LeaveOneOut):
            name = 'confidence'
            description = 'another confidence'
    with pytest.raises(ValueError, match='one-line description'):
        class Undescribed(saliency.Interpreter):
            name = 'undescribed'
    with pytest.raises(ValueError, match='without commas'):
        class Listed(saliency.Interpreter):
            name = 'a,b'
            description = 'two names'

    class Tweaked(saliency.ConfidenceLOO):   # no name of its own: a helper, not a method
        temperature = 2.0
    assert saliency.REGISTRY == before and saliency.REGISTRY['confidence'] is saliency.ConfidenceLOO


def test_registry_facts_decide_what_interpret_all_builds(constant_method, setup_and_dknn,
                                                         tmp_path, monkeypatch):
    setup, dknn = setup_and_dknn
    built = []
    monkeypatch.setattr(dknn_lib, 'dknn_from_setup', lambda s, settings: built.append(s) or dknn)

    class NeighbourLOO(saliency.ConformityLOO):   # needs_dknn is inherited
        name = 'toy-dknn'
        description = 'conformity under another name (a test method)'

    class CalibratedNeighbourLOO(NeighbourLOO):   # the fact alone makes the check
        name = 'toy-dknn-temperature'
        description = 'needs a DkNN and the temperature (a test method)'
        needs_temperature = True

    examples = examples_of(random_sentences(3, seed=14))
    saliency.interpret_all(setup, ['constant', 'gradient'], examples, progress=False)
    assert built == []                         # no method needs a DkNN: none is built
    results = saliency.interpret_all(setup, ['constant', 'toy-dknn'], examples, progress=False)
    assert built == [setup]                    # one needs it: built once
    conformity = saliency.ConformityLOO(setup.model, VOCAB, dknn).interpret(examples)
    for a, b in zip(results['toy-dknn'], conformity):
        np.testing.assert_array_equal(a.scores, b.scores)
    saliency.interpret_all(setup, ['toy-dknn'], examples, dknn, progress=False)
    assert built == [setup]                    # given one: none is built
    with pytest.raises(UserError, match='temperature.json'):
        saliency.interpret_all(setup, ['toy-dknn-temperature'], examples, progress=False)
    assert built == [setup]                    # a missing temperature fails before the build
    nlp_utils.atomic_write_json(str(tmp_path / 'temperature.json'), {'temperature': 2.5})
    saliency.interpret_all(setup, ['toy-dknn-temperature'], examples, progress=False)
    assert built == [setup, setup]


# ---------------------------------------------------------------- gradient
def test_gradient_is_minus_input_gradient_and_matches_finite_differences(setup_and_dknn):
    setup, _ = setup_and_dknn
    model = setup.model
    for param in model.params():
        param.array = param.array.astype(np.float64)
    words = random_sentences(1, seed=9)[0]
    result = saliency.Gradient(model, VOCAB).interpret([(words, 1)])[0]
    ids = nlp_utils.to_ids(words, VOCAB)
    y = int(model.predict_logits([ids])[0].argmax())
    assert result.prediction == y
    np.testing.assert_allclose(result.scores, -model.input_gradients([ids], [y])[0][:-1])

    def loss(embedded):
        with chainer.using_config('train', False), chainer.no_backprop_mode():
            logits = model.layers_from_embedded([chainer.Variable(embedded)])[-1]
            return float(F.softmax_cross_entropy(logits, np.array([y], np.int32)).array)

    embedded, eps = model.embed.W.array[ids], 1e-6
    for t in range(len(words)):
        plus, minus = embedded.copy(), embedded.copy()
        plus[t] *= 1 + eps
        minus[t] *= 1 - eps
        # Positive importance: growing the word's embedding lowers the loss at y.
        estimate = -(loss(plus) - loss(minus)) / (2 * eps)
        assert result.scores[t] == pytest.approx(estimate, rel=1e-4, abs=1e-8)
    assert np.abs(result.scores).max() > 1e-4


# ---------------------------------------------------------------- scores
def test_normalize_three_ways_hand_example():
    scores = [2, 1, -1, -3]   # total |importance| 7; positives sum to 3, negatives to -4
    np.testing.assert_allclose(saliency_scores.normalize(scores), [2 / 7, 1 / 7, -1 / 7, -3 / 7])
    np.testing.assert_allclose(saliency_scores.normalize(scores, 'total'), [2 / 7, 1 / 7, -1 / 7, -3 / 7])
    np.testing.assert_allclose(saliency_scores.normalize(scores, 'per-sign'), [2 / 3, 1 / 3, -1 / 4, -3 / 4])
    np.testing.assert_allclose(saliency_scores.normalize(scores, 'half-scale'),
                               [1 / 3, 1 / 6, -1 / 8, -3 / 8])


def test_normalize_lone_small_negative_word():
    """Per sign, one tiny negative word is drawn at full strength; in total it is ~0."""
    np.testing.assert_allclose(saliency_scores.normalize([10, 5, -0.01], 'per-sign'), [2 / 3, 1 / 3, -1])
    np.testing.assert_allclose(saliency_scores.normalize([10, 5, -0.01], 'total'),
                               [10 / 15.01, 5 / 15.01, -0.01 / 15.01])


@pytest.mark.parametrize('normalization,expected', [
    ('total', [-0.25, -0.75, 0]), ('per-sign', [-0.25, -0.75, 0]),
    ('half-scale', [-0.125, -0.375, 0])])
def test_normalize_only_negative_importances(normalization, expected):
    np.testing.assert_allclose(saliency_scores.normalize([-1, -3, 0], normalization), expected)


@pytest.mark.parametrize('normalization', sorted(saliency_scores.NORMALIZATIONS))
def test_normalize_zeros_and_nan(normalization):
    np.testing.assert_array_equal(saliency_scores.normalize([0, 0, 0], normalization), [0, 0, 0])
    assert np.isnan(saliency_scores.normalize([np.nan], normalization)).all()
    half = 0.5 if normalization == 'half-scale' else 1
    total = 0.5 if normalization == 'total' else 1
    # NaN stays NaN and does not enter the sums.
    np.testing.assert_allclose(saliency_scores.normalize([np.nan, 2, -2], normalization),
                               [np.nan, half * total, -half * total])
    with pytest.raises(ValueError, match='unknown normalization'):
        saliency_scores.normalize([1.0], 'softmax')


def test_highlighted_counts_words_above_the_threshold():
    scores = [0.9, 0.04, 0.06, -1, -1, 0]
    # total |importance| 3: [0.3, 0.013, 0.02, -0.33, -0.33, 0]
    np.testing.assert_array_equal(saliency_scores.highlighted(scores),
                                  [True, False, False, True, True, False])
    # per sign: [0.9, 0.04, 0.06, -0.5, -0.5, 0]; half-scale: half of that.
    np.testing.assert_array_equal(saliency_scores.highlighted(scores, normalization='per-sign'),
                                  [True, False, True, True, True, False])
    np.testing.assert_array_equal(saliency_scores.highlighted(scores, normalization='half-scale'),
                                  [True, False, False, True, True, False])
    assert saliency_scores.highlighted([0.92, 0.08], normalization='per-sign').sum() == 2
    assert saliency_scores.highlighted([0.92, 0.08], normalization='half-scale').sum() == 1
    assert saliency_scores.highlighted([0.9, 0.04, 0.06], threshold=0.03).sum() == 3
    assert not saliency_scores.highlighted([np.nan]).any()


def test_importance_ranks_hand_example():
    scores = [0.3, -2.0, 0.0, 0.3, 1.5]
    np.testing.assert_array_equal(saliency_scores.importance_ranks(scores), [3.5, 1, 2, 3.5, 5])
    np.testing.assert_array_equal(saliency_scores.importance_ranks(scores, most_positive_first=True),
                                  [2.5, 5, 4, 2.5, 1])
    ranks = saliency_scores.importance_ranks([np.nan, 1.0, -1.0])
    assert np.isnan(ranks[0]) and list(ranks[1:]) == [2, 1]


def test_display_tokens_brackets_unknown_words():
    assert saliency_report.display_tokens(['good', 'Schweiger', 'movie'], VOCAB) == \
        ['good', '<Schweiger>', 'movie']


# ---------------------------------------------------------------- edge cases
def test_one_token_input_has_nan_leave_one_out_but_a_gradient(setup_and_dknn):
    setup, dknn = setup_and_dknn
    results = saliency.interpret_all(setup, ['confidence', 'conformity', 'gradient'],
                                   [(['fun'], 2)], dknn, progress=False)
    for method in ('confidence', 'conformity'):
        (result,) = results[method]
        assert result.scores.shape == (1,) and np.isnan(result.scores).all()
        assert 0 < result.score <= 1
    assert np.isfinite(results['gradient'][0].scores).all()


def test_all_unknown_input_gives_equal_scores_and_bracketed_words(setup_and_dknn):
    """Every word is '<unk>', so every leave-one-out variant is the same input."""
    setup, dknn = setup_and_dknn
    words = ['zzz', 'qqq', 'xxx']
    results = saliency.interpret_all(setup, ['confidence', 'conformity'], [(words, 0)], dknn,
                                   progress=False)
    for method in ('confidence', 'conformity'):
        scores = results[method][0].scores
        assert np.isfinite(scores).all() and np.ptp(scores) == 0
    assert saliency_report.display_tokens(words, VOCAB) == ['<zzz>', '<qqq>', '<xxx>']


def test_empty_input_is_a_user_error(setup_and_dknn):
    setup, dknn = setup_and_dknn
    for method in ('confidence', 'gradient'):
        with pytest.raises(UserError, match='empty input'):
            saliency.make_interpreter(method, setup, dknn).interpret([(['good'], 0), ([], 1)])


def test_long_input_is_interpreted_in_bounded_chunks(setup_and_dknn):
    setup, dknn = setup_and_dknn
    words = random_sentences(1, seed=10, low=520, high=521)[0]
    results = saliency.interpret_all(setup, ['confidence', 'conformity'], [(words, 0)], dknn,
                                   batchsize=64, progress=False)
    full_ids = nlp_utils.to_ids(words, VOCAB)
    for method in ('confidence', 'conformity'):
        assert results[method][0].scores.shape == (520,)
        assert np.isfinite(results[method][0].scores).all()
    probabilities = setup.model.predict_proba([full_ids] + [
        nlp_utils.to_ids(words[:i] + words[i + 1:], VOCAB) for i in (0, 300, 519)])
    y = results['confidence'][0].prediction
    np.testing.assert_allclose(results['confidence'][0].scores[[0, 300, 519]],
                               probabilities[0, y] - probabilities[1:, y], atol=1e-6)


def test_pair_model_interprets_only_the_hypothesis(tmp_path):
    setup, dknn = make_setup(tmp_path, pair=True)
    premise, hypothesis = random_sentences(2, seed=11, low=4, high=7)
    methods = ['confidence', 'conformity', 'gradient']
    results = saliency.interpret_all(setup, methods, [((premise, hypothesis), 1)], dknn,
                                   progress=False)
    for method in methods:
        result = results[method][0]
        assert result.tokens == hypothesis and result.premise == premise
        assert result.scores.shape == (len(hypothesis),)
    premise_ids = nlp_utils.to_ids(premise, VOCAB)
    inputs = [(premise_ids, nlp_utils.to_ids(h, VOCAB))
              for h in [hypothesis] + variants(hypothesis)]
    probabilities = setup.model.predict_proba(inputs)
    y = results['confidence'][0].prediction
    np.testing.assert_allclose(results['confidence'][0].scores,
                               probabilities[0, y] - probabilities[1:, y], atol=1e-6)
    with pytest.raises(UserError, match='pair model'):
        saliency.ConfidenceLOO(setup.model, VOCAB).interpret([(hypothesis, 0)])


# ---------------------------------------------------------------- rendering
def hostile_views(tmp_path):
    """Views whose tokens, labels and neighbours all try to inject markup."""
    labels = ['<b>neg', 'neu&', 'pos"']
    interpretation = leave_one_out.Interpretation(
        ['<script>', 'alert(1)', '</script>', 'good', '$5'],
        np.array([1.0, -0.5, 0.2, 0.0, np.nan]), 0, 0.9, 2, ['<i>premise', 'zzz'])
    neighbors = [[((['<script>x'], ['good']), 1)]]
    return saliency_report.build_views({'conformity': [interpretation]}, VOCAB, labels, neighbors,
                              'per-sign')


def test_html_escapes_every_text(tmp_path):
    path = tmp_path / 'out' / 'maps.html'
    nlp_utils.atomic_write_files([saliency_report.html_write(
        hostile_views(tmp_path), str(path), title='<script>title')])
    page = path.read_text()
    assert '&lt;script&gt;' in page and '&lt;/script&gt;' in page
    assert '<script' not in page.lower() and '</script' not in page.lower()
    assert '<b>neg' not in page and '&lt;b&gt;neg' in page and '&lt;i&gt;' in page
    assert 'neu&amp;' in page
    # Unknown words (also the premise's) are shown in angle brackets, escaped.
    assert '&lt;zzz&gt;' in page and '&lt;&lt;script&gt;x&gt;' in page
    # SNLI palette (green / pink) and its legend; positives normalised by their sum 1.2.
    assert 'rgba(26,152,80,0.833)' in page and 'rgba(222,45,140,1.000)' in page
    assert 'green: supports the prediction' in page


def test_html_colours_follow_the_sign(tmp_path):
    interpretation = leave_one_out.Interpretation(['good', 'bad', 'movie'], np.array([2.0, -1.0, 0.0]),
                                           2, 0.8, 2, None)
    views = saliency_report.build_views({'confidence': [interpretation]}, VOCAB, LABEL_NAMES)
    page = saliency_report.html_page(views, 'maps')
    assert 'rgba(33,102,172,0.667)' in page      # 'good': 2 of the total 3, blue
    assert 'rgba(178,24,43,0.333)' in page       # 'bad': 1 of 3, red
    assert 'rgba(33,102,172,0.000)' in page      # 'movie' uncoloured
    assert '<bdi>pos</bdi> (0.800)' in page and 'gold: <b><bdi>pos</bdi></b>' in page
    assert 'wrong' not in page.split('</style>')[1].split('Prediction columns')[0]
    assert "Normalisation: total (each word&#x27;s importance" in page
    per_sign = saliency_report.html_page(saliency_report.build_views(
        {'confidence': [interpretation]}, VOCAB, LABEL_NAMES, normalization='per-sign'), 'maps')
    assert 'rgba(33,102,172,1.000)' in per_sign and 'rgba(178,24,43,1.000)' in per_sign
    assert 'Normalisation: per-sign' in per_sign


def test_report_marks_wrong_predictions_states_scores_and_settings():
    wrong = leave_one_out.Interpretation(['-lrb-', 'good', '-rrb-', 'zzz'],
                                    np.array([0.1, 1.0, 0.1, 0.0]), 1, 0.8, 0, None)
    views = saliency_report.build_views({'conformity': [wrong]}, dict(VOCAB, **{
        '-lrb-': 90, '-rrb-': 91}), LABEL_NAMES)
    page = saliency_report.html_page(views, 'Produced by: `python x.py`',
                                     {'k': 75, 'backend': 'faiss', 'temperature': None})
    body = page.split('<body>')[1]
    assert '\u2717 wrong' in body and 'Settings: k 75, backend faiss.' in body
    assert 'conformity: fraction of the DkNN neighbours' in body
    assert '`' not in page                          # no stray Markdown in headings
    assert '>(</span>' in body and '>)</span>' in body and '&lt;zzz&gt;' in body
    assert 'unicode-bidi: isolate' in page


def test_raw_importances_are_exported_with_both_scales(tmp_path):
    found = leave_one_out.Interpretation(['good', 'bad'], np.array([3.0, -1.0]), 2, 0.8, 2, None)
    rows = saliency_report.importance_rows({'gradient': [found]}, VOCAB, LABEL_NAMES)
    assert [(r['token'], r['raw_importance'], r['normalized_importance']) for r in rows] == [
        ('good', 3.0, 0.75), ('bad', -1.0, -0.25)]
    path = tmp_path / 'maps.csv'
    nlp_utils.atomic_write_files([saliency_report.importances_write(rows, str(path))])
    assert path.read_text().splitlines()[1] == '1,gradient,0,good,True,3.0,0.75,total,pos,pos'


def test_png_caps_very_long_tokens():
    assert len(saliency_png.png_word('x' * 5000)) == saliency_png.PNG_MAX_CHARS
    assert saliency_png.png_word('short') == 'short'


def test_long_inputs_warn_before_leave_one_out(capsys):
    leave_one_out.warn_about_long_inputs([(None, ['w'] * 1500), (None, ['w'] * 3)])
    err = capsys.readouterr().err
    assert 'input 1 has 1500 words: leave-one-out runs 1501 variants' in err
    assert 'input 2' not in err


def test_progress_counts_rows_so_one_long_input_moves_the_bar(capsys):
    rows = [[np.zeros(4, np.int32)] * 10]
    chunks = list(leave_one_out.chunked_rows(rows, batchsize=3, progress='loo'))
    assert [len(c) for c in chunks] == [3, 3, 3, 1]
    assert '10/10' in capsys.readouterr().err


def test_png_is_written(tmp_path):
    path = tmp_path / 'maps.png'
    nlp_utils.atomic_write_files([saliency_png.png_write(hostile_views(tmp_path), str(path))])
    assert path.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n' and path.stat().st_size > 1000
    assert [p.name for p in tmp_path.iterdir()] == ['maps.png']   # no temp file left


def test_nearest_training_examples_are_final_layer_neighbours(setup_and_dknn):
    setup, dknn = setup_and_dknn
    examples = examples_of(random_sentences(3, seed=12))
    found = saliency.nearest_training_examples(setup.model, dknn, setup.splits.train, examples,
                                             4, VOCAB)
    train_final = setup.model.layer_activations(
        [nlp_utils.to_ids(t, VOCAB) for t, _ in setup.splits.train])[-1]
    queries = setup.model.layer_activations([nlp_utils.to_ids(t, VOCAB) for t, _ in examples])[-1]
    distances = np.linalg.norm(queries[:, None] - train_final[None], axis=2)
    for query, row, neighbours in zip(queries, distances, found):
        # Compared by distance: the random training set repeats some sentences.
        assert all(neighbour in setup.splits.train for neighbour in neighbours)
        found_final = setup.model.layer_activations(
            [nlp_utils.to_ids(t, VOCAB) for t, _ in neighbours])[-1]
        np.testing.assert_allclose(np.linalg.norm(found_final - query, axis=1),
                                   np.sort(row)[:4], rtol=1e-5)


def test_maps_of_more_than_8_examples_are_split_into_png_pages(tmp_path):
    assert saliency_png.png_pages('a/maps.png', 8) == [('a/maps.png', slice(0, 8))]
    assert saliency_png.png_pages('a/maps.png', 20) == [
        ('a/maps_1.png', slice(0, 8)), ('a/maps_2.png', slice(8, 16)),
        ('a/maps_3.png', slice(16, 20))]
    view = hostile_views(tmp_path)[0]
    views = [dataclasses.replace(view, heading='Example {}'.format(i)) for i in range(1, 11)]
    writes = saliency_png.png_writes(views, str(tmp_path / 'maps.png'), 'Maps')
    nlp_utils.atomic_write_files(writes)
    assert sorted(p.name for p in tmp_path.iterdir()) == ['maps_1.png', 'maps_2.png']
    one_page = saliency_png.png_writes(views[:1], str(tmp_path / 'one.png'), 'One')
    nlp_utils.atomic_write_files(one_page)
    heights = [plt.imread(str(tmp_path / name)).shape[0]
               for name in ('one.png', 'maps_1.png', 'maps_2.png')]
    # 8 examples on the first page, 2 on the second: each taller than one example alone.
    assert heights[1] > heights[2] > heights[0]


# ---------------------------------------------------------------- CLI
def test_cli_writes_html_and_png(any_run_path, setup_and_dknn, tmp_path, monkeypatch):
    setup, dknn = setup_and_dknn
    monkeypatch.setattr(interp.model_setup, 'load_setup', lambda *args: setup)
    monkeypatch.setattr(dknn_lib, 'dknn_from_setup', lambda *args, **kwargs: dknn)
    html_path, png_path = tmp_path / 'maps.html', tmp_path / 'maps.png'
    interp.main(['--model-setup', 'x', '--limit', '3', '--output', str(html_path),
                 '--png', str(png_path), '--neighbors', '2'])
    page = html_path.read_text()
    assert page.count('<section>') == 3 and page.count('<tr>') == 9
    assert 'Nearest training examples' in page and png_path.stat().st_size > 0
    assert 'Normalisation: total' in page
    with pytest.raises(UserError, match='maps.html exists; pass --overwrite'):
        interp.main(['--model-setup', 'x', '--limit', '1', '--output', str(html_path)])
    interp.main(['--model-setup', 'x', '--limit', '1', '--out', str(tmp_path), '--name', 'maps',
                 '--normalization', 'half-scale', '--overwrite'])
    assert 'Normalisation: half-scale' in html_path.read_text()
    with pytest.raises(UserError, match='temperature.json'):
        interp.main(['--model-setup', 'x', '--methods', 'calibrated', '--output', str(html_path)])
    assert (tmp_path / 'maps.csv').read_text().startswith('example,method,position,token')


def test_cli_writes_page_csv_and_png_together_or_not_at_all(any_run_path, setup_and_dknn, tmp_path,
                                                            monkeypatch):
    from deepknn.reports import plots
    setup, dknn = setup_and_dknn
    monkeypatch.setattr(interp.model_setup, 'load_setup', lambda *args: setup)
    paths = [tmp_path / name for name in ('maps.html', 'maps.csv', 'maps.png')]
    for path in paths:
        path.write_text('old')

    def broken_png(figure, path, dpi=120):
        def write(f):
            raise OSError(28, 'No space left on device', path)
        return path, write, 'wb'
    monkeypatch.setattr(plots, 'figure_write', broken_png)
    with pytest.raises(OSError):
        interp.main(['--model-setup', 'x', '--methods', 'confidence', '--limit', '2',
                     '--out', str(tmp_path), '--name', 'maps', '--png', '--overwrite'])
    assert [p.read_text() for p in paths] == ['old'] * 3       # nothing half new
    assert sorted(p.name for p in tmp_path.iterdir()) == ['maps.csv', 'maps.html', 'maps.png']


def test_one_registry_mechanism_holds_any_kind_of_class():
    """deepknn/registry.py: the rules the interpretation methods follow, for any kind."""
    from deepknn import registry
    scorers = registry.Registry('scorer')

    class Scorer(scorers.Registered):
        pass                                    # abstract: no name, not registered

    class MaxSoftmax(Scorer):
        name, description = 'max-softmax', 'the largest softmax probability'
    assert list(scorers) == ['max-softmax'] and scorers['max-softmax'] is MaxSoftmax
    assert scorers.describe() == 'max-softmax: the largest softmax probability'
    assert scorers.parse('max-softmax, max-softmax', '--scorers') == ('max-softmax',)
    with pytest.raises(UserError, match='^--scorers: unknown scorer\\(s\\) energy; choose from '
                                        'max-softmax$'):
        scorers.parse('energy', '--scorers')
    with pytest.raises(ValueError, match="scorer 'max-softmax' is already registered"):
        type('Again', (Scorer,), {'name': 'max-softmax', 'description': 'x'})
    with pytest.raises(ValueError, match="scorer 'two' .* needs a one-line description"):
        type('Two', (Scorer,), {'name': 'two', 'description': 'a\nb'})
    assert 'max-softmax' not in saliency.REGISTRY          # registries are apart
