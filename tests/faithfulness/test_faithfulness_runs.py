"""deepknn.faithfulness.runs and `paper_results.py faithfulness` on a tiny trained model:
each classifier's f against the model and the DkNN computed directly, one model row per
distinct variant, pairs moving only hypothesis words, the ranking rule for NaN maps,
and the written report."""
import csv
import os
import re
import types

import numpy as np
import pytest

from cli_helpers import tiny_run_with_dknn
from deepknn.evaluation import calibration
from deepknn.cli import command_line_message
from deepknn.neighbors import dknn as dknn_lib
from deepknn.faithfulness import measures as faithfulness
from deepknn.faithfulness import runs
from deepknn.interpret import saliency
from deepknn.interpret.leave_one_out import Interpretation
from deepknn.faithfulness import report as faithfulness_report
import nets
import nlp_utils
import paper_results
from nlp_utils import UserError

# Varied inputs for the tiny model (trained on 'the film was good/bad'): a one-word
# sentence, an out-of-vocabulary word ('plot'), a repeated word.
EXAMPLES = [(['the', 'film', 'was', 'good'], 1), (['bad'], 0),
            (['good', 'film', 'the', 'was', 'bad', 'plot'], 1), (['was', 'bad', 'bad'], 0)]


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    """(results folder, setup, dknn) of a tiny trained bag-of-words run named 'run'."""
    return tiny_run_with_dknn(tmp_path_factory.mktemp('faithfulness'))


def encode(setup, examples):
    return [nlp_utils.to_ids(tokens, setup.vocab) for tokens, _ in examples]


# ---------------------------------------------------------------- the three classifiers
def test_each_classifier_is_softmax_conformity_or_p_values_of_the_model(trained):
    _, setup, dknn = trained
    inputs = encode(setup, EXAMPLES)
    probabilities = calibration.softmax(setup.model.predict_logits(inputs))
    direct = dknn.predict_from_activations(setup.model.layer_activations(inputs))
    shared = runs.VariantScores(setup, dknn, EXAMPLES)
    full = [(i, np.arange(len(tokens))) for i, (tokens, _) in enumerate(EXAMPLES)]
    np.testing.assert_allclose(shared.scores('softmax', full), probabilities, atol=1e-6)
    np.testing.assert_array_equal(shared.scores('conformity', full), direct['conformity'])
    np.testing.assert_array_equal(shared.scores('credibility', full), direct['p_values'])
    assert shared.predictions('softmax', full).tolist() == probabilities.argmax(1).tolist()
    assert shared.predictions('credibility', full).tolist() == direct['prediction'].tolist()
    # A variant is the kept words re-encoded ('<eos>' last, 'plot' unknown).
    kept = [(2, np.array([0, 4, 5])), (1, np.array([], dtype=np.int64))]
    variants = encode(setup, [(['good', 'bad', 'plot'], 1), ([], 0)])
    np.testing.assert_allclose(shared.scores('softmax', kept), calibration.softmax(
        setup.model.predict_logits(variants)), atol=1e-6)
    np.testing.assert_array_equal(shared.scores('credibility', kept), dknn.predict_from_activations(
        setup.model.layer_activations(variants))['p_values'])

    run = runs.run_faithfulness(setup, EXAMPLES, dknn, ['confidence', 'conformity', 'gradient'],
                                progress=False)
    rows = np.arange(len(EXAMPLES))
    y = probabilities.argmax(1)
    softmax, conformity, credibility = (run.classifiers[name].result for name in
                                        ('softmax', 'conformity', 'credibility'))
    np.testing.assert_allclose(softmax.full_probability, probabilities[rows, y], atol=1e-6)
    assert softmax.targets.tolist() == y.tolist()
    assert conformity.targets.tolist() == direct['prediction'].tolist()
    np.testing.assert_array_equal(conformity.full_probability,
                                  direct['conformity'][rows, direct['prediction']])
    np.testing.assert_array_equal(credibility.full_probability, direct['credibility'])
    assert run.classifiers['conformity'].same_prediction['conformity'].all()


# ---------------------------------------------------------------- one pass per variant
def expected_variants(rankings):
    """Distinct (sentence, kept) over every ranking's deletion and insertion points."""
    kept = set()
    for per_sentence in rankings.values():
        for i, ranking in enumerate(per_sentence):
            for j in range(len(ranking) + 1):
                kept.add((i, tuple(sorted(ranking[j:]))))
                kept.add((i, tuple(sorted(ranking[:j]))))
    return len(kept)


def test_model_and_dknn_run_once_per_distinct_variant(trained, monkeypatch):
    _, setup, dknn = trained
    model_rows, dknn_rows = [], []
    layer_activations, predict = setup.model.layer_activations, dknn.predict_from_activations

    def counted_activations(xs, batchsize=64, progress=None):
        model_rows.append(len(xs))
        return layer_activations(xs, batchsize, progress)

    def counted_predict(activations):
        dknn_rows.append(len(activations[0]))
        return predict(activations)

    monkeypatch.setattr(setup.model, 'layer_activations', counted_activations)
    monkeypatch.setattr(dknn, 'predict_from_activations', counted_predict)
    run = runs.run_faithfulness(setup, EXAMPLES, dknn, ['confidence', 'conformity', 'gradient'],
                                batchsize=7, progress=False)
    # interpret_all's leave-one-out pass first: n + 1 rows per sentence, 1 for one word.
    loo_rows = sum(1 if len(t) == 1 else len(t) + 1 for t, _ in EXAMPLES)
    distinct = expected_variants(run.rankings)
    assert run.n_variants == run.n_rows == distinct
    assert sum(model_rows) == loo_rows + distinct          # not 3 x distinct
    assert sum(dknn_rows) == loo_rows + distinct           # conformity and p-values share
    assert max(model_rows) <= 7
    assert set(run.classifiers) == {'softmax', 'conformity', 'credibility'}
    assert set(run.rankings) == {'confidence', 'conformity', 'gradient', 'random',
                                 'reversed confidence', 'reversed conformity',
                                 'reversed gradient'}


# ---------------------------------------------------------------- NLI pairs
VOCAB = {nlp_utils.EOS: 0, nlp_utils.UNK: 1,
         **{w: i + 2 for i, w in enumerate(['a', 'man', 'dog', 'runs', 'sleeps', 'no'])}}


def pair_setup(tmp_path):
    np.random.seed(0)
    config = types.SimpleNamespace(model='cnn', unit=8, layer=1, dropout=0, embed_dim=4)
    model = nets.build_model(config, len(VOCAB), 3, True)
    model.to_device('@numpy')
    rng = np.random.RandomState(1)
    words = list(VOCAB)[2:]
    pairs = [(list(rng.choice(words, 4)), list(rng.choice(words, 3))) for _ in range(30)]
    labels = rng.randint(0, 3, len(pairs))
    layers = model.layer_activations([(nlp_utils.to_ids(p, VOCAB), nlp_utils.to_ids(h, VOCAB))
                                      for p, h in pairs])
    dknn = dknn_lib.DkNN(3, 'kdtree', k=3).fit([a[:20] for a in layers], labels[:20])
    dknn.calibrate([a[20:] for a in layers], labels[20:])
    return types.SimpleNamespace(model=model, vocab=VOCAB, result_dir=str(tmp_path)), dknn


def test_pairs_move_only_hypothesis_words(tmp_path, monkeypatch):
    setup, dknn = pair_setup(tmp_path)
    premise, hypothesis = ['a', 'man', 'runs', 'no'], ['a', 'dog', 'sleeps']
    seen = []
    layer_activations = setup.model.layer_activations

    def recorded(xs, batchsize=64, progress=None):
        seen.extend(xs)
        return layer_activations(xs, batchsize, progress)

    monkeypatch.setattr(setup.model, 'layer_activations', recorded)
    run = runs.run_faithfulness(setup, [((premise, hypothesis), 1)], dknn,
                                ['confidence', 'conformity'], progress=False)
    assert run.lengths.tolist() == [3]
    premise_ids, hypothesis_ids = (nlp_utils.to_ids(premise, VOCAB),
                                   nlp_utils.to_ids(hypothesis, VOCAB))
    hypotheses = set()
    for row_premise, row_hypothesis in seen:
        np.testing.assert_array_equal(row_premise, premise_ids)      # never moves
        assert row_hypothesis[-1] == VOCAB[nlp_utils.EOS]
        words = list(row_hypothesis[:-1])
        assert words == [i for i in hypothesis_ids[:-1] if i in words]   # kept, in order
        hypotheses.add(tuple(words))
    assert () in hypotheses and tuple(hypothesis_ids[:-1]) in hypotheses


# ---------------------------------------------------------------- rankings and methods
def maps_of(*scores):
    return [Interpretation(['w'] * len(s), np.array(s, float), 1, 0.9, None, None)
            for s in scores]


def test_nan_maps_are_ranked_by_the_gradient_else_nan_last():
    maps = {'conformity': maps_of([0.1, np.nan, 0.3], [np.nan], [0.2, -0.5]),
            'gradient': maps_of([0.0, 2.0, 1.0], [0.7], [1.0, 3.0])}
    rankings = runs.rankings_from_maps(maps)
    assert [r.tolist() for r in rankings['conformity']] == [[1, 2, 0], [0], [0, 1]]
    assert [r.tolist() for r in rankings['gradient']] == [[1, 2, 0], [0], [1, 0]]
    alone = runs.rankings_from_maps({'conformity': maps['conformity']})
    assert alone['conformity'][0].tolist() == [2, 0, 1]       # NaN last


def test_calibrated_without_temperature_json_is_an_error_unless_optional(tmp_path):
    setup = types.SimpleNamespace(result_dir=str(tmp_path))
    with pytest.raises(UserError, match='calibrated needs the temperature.*run `scaling` '
                                        '`model_setup` .*args.json first'):
        runs.usable_methods(setup, 'conformity,calibrated,gradient')
    methods, notes = runs.usable_methods(setup, 'conformity,calibrated,gradient',
                                         optional=saliency.STUDY_METHODS)
    assert methods == ('conformity', 'gradient')
    assert len(notes) == 1 and 'calibrated left out' in notes[0] and '`scaling`' in notes[0]
    with pytest.raises(UserError, match='none of calibrated can run'):
        runs.usable_methods(setup, ['calibrated'], optional=['calibrated'])
    (tmp_path / calibration.TEMPERATURE_FILE).write_text('{"temperature": 2.0}')
    assert runs.usable_methods(setup, 'calibrated,gradient') == (('calibrated', 'gradient'), [])


def test_summaries_and_paired_differences_of_a_hand_made_run():
    """Two methods over three sentences: the difference of their AOPC comprehensiveness
    is their per-sentence difference's mean; the interval of a constant is that constant."""
    def scores(comp):
        comp = np.array(comp, float)[:, None].repeat(2, axis=1)
        return faithfulness.MethodFaithfulness(comp, comp * 0, comp[:, 0], comp[:, 0] * 0,
                                               np.full(3, np.nan), np.full(3, np.nan))
    result = faithfulness.FaithfulnessResult(
        np.array([0.1, 0.5]), np.array([2, 2, 2]), np.ones((3, 2), int), np.ones(3, int),
        np.ones(3), {'conformity': scores([0.5, 0.5, 0.5]), 'confidence': scores([0.1, 0.2, 0.3])},
        10)
    measured = runs.ClassifierFaithfulness('softmax', runs.CLASSIFIERS['softmax'], result,
                                           {'conformity': np.array([True, False, True]),
                                            'confidence': np.ones(3, bool)})
    run = runs.FaithfulnessRun(('conformity', 'confidence'), {'conformity': [], 'confidence': []},
                               np.array([2, 2, 2]), {'softmax': measured}, {}, 10, 10, False, [])
    summary = {(s.method, s.measure): s.interval for s in runs.summarize(run)}
    assert set(m for _, m in summary) == {'aopc_comp', 'aopc_suff', 'comp@10%', 'comp@50%',
                                          'suff@10%', 'suff@50%', 'same_y'}
    assert summary['conformity', 'aopc_comp'].low == summary['conformity', 'aopc_comp'].high == 0.5
    assert summary['conformity', 'same_y'].mean == pytest.approx(2 / 3)
    difference, = [d for d in runs.paired_differences(run) if d.measure == 'aopc_comp']
    assert (difference.method, difference.baseline) == ('conformity', 'confidence')
    assert difference.interval.mean == pytest.approx(0.3) and difference.interval.excludes_zero


def test_identical_curves_stay_visible_in_the_figure():
    """Three rankings with the very same curves: every line is drawn with its own width,
    marker shape and marker positions, so none hides the others; the legend says so."""
    curve = [np.array([1.0, 0.5, 0.0])]
    same = faithfulness.MethodFaithfulness(np.zeros((1, 2)), np.zeros((1, 2)), np.zeros(1),
                                           np.zeros(1), np.full(1, 0.5), np.full(1, 0.5),
                                           curve, curve)
    rankings = ('conformity', 'credibility', 'reversed conformity')
    result = faithfulness.FaithfulnessResult(np.array([0.1, 0.5]), np.array([2]),
                                             np.ones((1, 2), int), np.zeros(1, int), np.ones(1),
                                             {name: same for name in rankings}, 3)
    run = runs.FaithfulnessRun(('conformity', 'credibility'), dict.fromkeys(rankings),
                               np.array([2]), {'softmax': runs.ClassifierFaithfulness(
                                   'softmax', runs.CLASSIFIERS['softmax'], result, {})},
                               {}, 3, 3, True, [])
    figure = faithfulness_report.figure(run, None, 'title')
    lines = figure.axes[0].get_lines()
    assert [line.get_label() for line in lines] == list(rankings)
    np.testing.assert_array_equal(lines[0].get_ydata(), lines[1].get_ydata())   # identical
    assert len({line.get_linewidth() for line in lines}) == 3
    assert lines[0].get_linewidth() > lines[1].get_linewidth() > lines[2].get_linewidth()
    assert len({line.get_marker() for line in lines}) == 3
    assert len({tuple(line.get_markevery()) for line in lines}) == 3
    assert 'identical curves' in figure.legends[0].get_title().get_text()
    faithfulness_report.plots.plt.close(figure)


# ---------------------------------------------------------------- the command line
def test_cli_writes_markdown_csv_and_png(trained, tmp_path, monkeypatch):
    results, _, _ = trained
    out = tmp_path / 'out'
    named = ['--results', str(results), '--out', str(out), 'faithfulness', '--run', 'run',
             '--split', 'dev', '--limit', '5', '--k', '5', '--backend', 'kdtree']
    with pytest.raises(UserError) as error:
        paper_results.main(named + ['--methods', 'conformity,calibrated'])
    assert re.search('calibrated needs the temperature.*run python scaling.py --model-setup '
                     '.*args.json first', command_line_message(error.value))
    assert not out.exists()
    paper_results.main(named)   # the default methods: calibrated left out with a note
    stem = out / 'faithfulness_run_dev'
    page = (stem.with_suffix('.md')).read_text()
    assert page.startswith('# Faithfulness') and 'Produced by: `python' in page
    assert 'parameters sha256' in page and 'calibrated left out' in page
    for heading in ('## f = softmax', '## f = conformity', '## f = credibility',
                    '## Paired differences', '## Agreement'):
        assert heading in page
    assert stem.with_suffix('.png').stat().st_size > 0
    with open(stem.with_suffix('.csv')) as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == faithfulness_report.CSV_COLUMNS
        rows = list(reader)
    measures = {(r['classifier'], r['method'], r['measure']) for r in rows
                if r['section'] == 'measure'}
    for classifier in ('softmax', 'conformity', 'credibility'):
        for method in ('conformity', 'confidence', 'gradient', 'random', 'reversed gradient'):
            for measure in ('aopc_comp', 'aopc_suff', 'deletion_auc', 'insertion_auc',
                            'comp@1%', 'suff@50%'):
                assert (classifier, method, measure) in measures
    differences = {(r['classifier'], r['method'], r['baseline']) for r in rows
                   if r['section'] == 'difference'}
    assert differences == {(c, 'conformity', b) for c in ('softmax', 'conformity', 'credibility')
                           for b in ('confidence', 'gradient')}
    assert all(r['excludes_zero'] in ('True', 'False') for r in rows
               if r['section'] == 'difference')
    assert len([r for r in rows if r['section'] == 'agreement']) == 6   # 4 methods, 6 pairs
    # Committed tables (the default --out results/faithfulness/) are only replaced with
    # --overwrite.
    monkeypatch.chdir(results.parent)
    committed = results / 'faithfulness' / 'faithfulness_run_dev.csv'
    committed.parent.mkdir()
    committed.write_text('committed')
    with pytest.raises(UserError, match='faithfulness_run_dev.csv exists'):
        paper_results.main(['faithfulness', '--run', 'run', '--split', 'dev'])
    assert committed.read_text() == 'committed'
    os.remove(str(committed))
    os.rmdir(str(committed.parent))
