"""Plausibility on a trained run (plausibility/runs.py) and its commands in paper_results.py,
on a tiny bag-of-words model whose label is given away by one word."""
import csv

import numpy as np
import pytest

from cli_helpers import assert_one_line_error, cli, tiny_run_with_dknn
from deepknn.plausibility import measures as pl
from deepknn.plausibility import runs
from deepknn.interpret import saliency
from deepknn.data import sst_trees
import paper_results

TREES = ['(3 (2 (2 the) (2 film)) (3 (2 was) (3 good)))',
         '(1 (2 (2 the) (2 film)) (1 (2 was) (1 bad)))']
EXAMPLES = [(['the', 'film', 'was', 'good'], 1), (['the', 'film', 'was', 'bad'], 0),
            (['no', 'tree'], 1)]
METHODS = ('conformity', 'confidence', 'gradient')


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    return tiny_run_with_dknn(tmp_path_factory.mktemp('plausibility'))


@pytest.fixture(scope='module')
def measured(trained):
    _, setup, dknn = trained
    trees = [sst_trees.parse_tree(t) for t in TREES]
    return runs.run_plausibility(setup, EXAMPLES, trees, dknn, METHODS, progress=False,
                                 positive_label='pos')


def test_each_map_is_measured_against_its_own_tree(trained, measured):
    _, setup, dknn = trained
    assert measured.n_sentences == 3 and measured.n_unaligned == 1
    assert measured.lengths.tolist() == [4, 4]
    assert set(measured.values) == set(METHODS) | {runs.RANDOM}
    maps = saliency.interpret_all(setup, ['gradient'], EXAMPLES[:2], progress=False)['gradient']
    for i, (interpretation, (_, label), text) in enumerate(zip(maps, EXAMPLES, TREES)):
        sign = 1 if label == 1 else -1
        expected = pl.sentence_measures(
            interpretation.scores, 1 if interpretation.prediction == label else -1,
            pl.rationale(sst_trees.parse_tree(text), sign))
        for name, value in expected.items():
            np.testing.assert_allclose(measured.values['gradient'][name][i], value)


def test_the_word_that_gives_the_label_away_is_the_rationale_and_the_top_word(measured):
    # The rationale is the one polar word; leave-one-out of the softmax ranks it first.
    assert [share.tolist() for share in measured.rationale_share.values()] == [[0.25, 0.25],
                                                                               [0, 0]]
    assert measured.values['confidence']['auprc@0.5'].tolist() == [1, 1]
    assert np.isnan(measured.values['confidence']['auprc@1']).all()   # nothing very polar


def test_paired_differences_are_of_the_same_sentences(measured):
    differences = runs.paired_differences(measured, n_resamples=50)
    found = {(d.method, d.baseline, d.measure): d.interval for d in differences}
    a = measured.values['conformity']['highlighted_words']
    b = measured.values['gradient']['highlighted_words']
    assert found[('conformity', 'gradient', 'highlighted_words')].mean == pytest.approx(
        np.mean(a - b))
    assert ('conformity', 'confidence', 'spearman') in found


def test_the_command_refuses_a_model_that_is_not_binary_sentiment(trained, capsys, tmp_path):
    results, _, _ = trained
    status, err = cli(paper_results.main, ['--results', str(results), '--out', str(tmp_path),
                                           'plausibility', '--run', 'run'], capsys)
    assert_one_line_error(status, err, 'plausibility needs a binary sentiment model of SST-2',
                          "['neg', 'pos']")


@pytest.mark.parametrize('value', ['0', '0.5,2', 'half'])
def test_a_threshold_outside_0_1_is_a_usage_error_naming_the_flag(tmp_path, capsys, value):
    status, err = cli(paper_results.main, ['--results', str(tmp_path), 'plausibility',
                                           '--thresholds', value], capsys)
    assert status == 2 and '--thresholds' in err[-1] and 'must be comma-separated numbers' \
        in err[-1]


def write_csv(path, rows):
    with open(path, 'w', newline='') as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_summary_gives_each_difference_its_verdict_and_draws_the_figure(tmp_path):
    def row(section, method, measure, mean, low, high, baseline=''):
        return {'section': section, 'method': method, 'baseline': baseline, 'measure': measure,
                'mean': mean, 'low': low, 'high': high, 'n': 10, 'excludes_zero': ''}
    plausible = [row('measure', m, 'auprc@0.5', v, v - 0.1, v + 0.1)
                 for m, v in (('conformity', 0.6), ('confidence', 0.7))]
    # Higher AUPRC beyond the interval; fewer extraneous words; spearman inside the spread.
    plausible += [row('difference', 'conformity', 'auprc@0.5', 0.1, 0.05, 0.2, 'confidence'),
                  row('difference', 'conformity', 'extraneous_words', -1, -2, -0.5, 'confidence'),
                  row('difference', 'conformity', 'spearman', 0.1, -0.1, 0.3, 'confidence')]
    write_csv(tmp_path / 'plausibility_cnn.csv', plausible)
    write_csv(tmp_path / 'faithfulness_cnn_test.csv', [
        dict(row('measure', m, 'aopc_comp', 0.2, 0.1, 0.3), classifier=f)
        for m in ('conformity', 'confidence') for f in ('softmax', 'conformity')])
    paper_results.main(['--results', str(tmp_path), '--out', str(tmp_path),
                        'plausibility-summary', '--runs', 'cnn'])
    with open(tmp_path / 'plausibility_summary.csv') as f:
        summary, at_one = list(csv.DictReader(f))     # thresholds 0.5 and 1
    assert at_one['threshold'] == '1' and at_one['auprc'] == '' and at_one['spearman']
    assert summary['difference'] == 'conformity - confidence'
    assert summary['verdict'] == 'more plausible on 2, inside the spread on 1'
    assert summary['auprc'] == '+0.100 [+0.050, +0.200]' and summary['threshold'] == '0.5'
    assert (tmp_path / 'plausibility_summary.png').stat().st_size > 0
    # The page says which weights and how many sentences each table read.
    assert ('cnn: plausibility not recorded (10 sentences), faithfulness not recorded (10 '
            'sentences)') in (tmp_path / 'plausibility_summary.md').read_text()


def test_summary_names_the_missing_table_and_the_command_that_makes_it(tmp_path, capsys):
    status, err = cli(paper_results.main, ['--results', str(tmp_path), '--out', str(tmp_path),
                                           'plausibility-summary', '--runs', 'cnn'], capsys)
    assert_one_line_error(status, err, 'plausibility_cnn.csv does not exist',
                          'plausibility --run cnn')
