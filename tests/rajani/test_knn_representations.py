"""kNN representations (Rajani et al. 2020) on hand-made representations with known answers."""
import math
import os
import types

import numpy as np
import pytest

from deepknn.data import splits as run_splits
from deepknn.cli import command_line_message
from deepknn.rajani import knn_influence
from deepknn.rajani import knn_representations as knn
from deepknn.reports import knn_tables
import text_datasets
from nlp_utils import UserError


def neighbors(sq_distances, labels, indices=None):
    sq_distances = np.asarray(sq_distances, dtype=np.float64)
    if indices is None:
        indices = np.arange(sq_distances.size).reshape(sq_distances.shape)
    return knn.Neighbors(sq_distances, np.asarray(indices), np.asarray(labels))


def test_softmax_over_negative_distances_summed_per_label():
    p = knn.knn_probabilities(neighbors([[0.0, 1.0, 2.0]], [[0, 1, 1]]), 3, temperature=1.0)
    z = 1 + math.exp(-1) + math.exp(-2)
    assert p[0] == pytest.approx([1 / z, (math.exp(-1) + math.exp(-2)) / z, 0.0])
    # A higher temperature flattens the weights towards the plain vote (1/3, 2/3).
    flat = knn.knn_probabilities(neighbors([[0.0, 1.0, 2.0]], [[0, 1, 1]]), 3, 1e6)
    assert flat[0] == pytest.approx([1 / 3, 2 / 3, 0.0], abs=1e-5)
    # Huge distances do not underflow: the softmax is shifted by the nearest one.
    far = knn.knn_probabilities(neighbors([[1e6, 1e6 + 1]], [[1, 0]]), 2, 1.0)
    assert far[0] == pytest.approx([math.exp(-1) / (1 + math.exp(-1)), 1 / (1 + math.exp(-1))])


def test_classifier_normalises_then_weights_by_squared_distance():
    train = np.array([[-1.0, 5.0], [1.0, 5.0]])   # dim 0: mean 0, std 1; dim 1: constant
    classifier = knn.KnnClassifier(train, [0, 1], n_class=2)
    query = np.array([[0.5, 6.0]])                  # dim 1 scaled by 1 + eps, not by eps
    near = classifier.neighbors(query, 2)
    assert near.indices.tolist() == [[1, 0]] and near.labels.tolist() == [[1, 0]]
    expected = [(0.5 - 1) ** 2 + 1, (0.5 + 1) ** 2 + 1]
    assert near.sq_distances[0] == pytest.approx(expected, rel=1e-4)
    p = classifier.probabilities(query, 2, 1.0)[0]
    assert p[1] == pytest.approx(1 / (1 + math.exp(-(expected[1] - expected[0]))), rel=1e-4)


def test_dataset_wise_normalisation_uses_training_mean_and_std():
    rng = np.random.RandomState(0)
    train = rng.normal([3.0, -2.0, 0.0], [2.0, 0.5, 0.0], size=(500, 3))
    normalizer = knn.Normalizer.fit(train)
    normalised = normalizer(train)
    assert normalised[:, :2].mean(axis=0) == pytest.approx([0, 0], abs=1e-5)
    assert normalised[:, :2].std(axis=0) == pytest.approx([1, 1], abs=1e-4)
    assert normalizer.scale[2] == pytest.approx(1 + knn.EPSILON)   # std 0 guarded
    assert normalizer(np.array([[3.0, -2.0, 7.0]]))[0, 2] == pytest.approx(7.0, rel=1e-4)


def test_backoff_switches_strictly_above_tau():
    model = np.array([[0.6, 0.4], [0.6, 0.4], [0.7, 0.3]])
    knn_p = np.array([[0.1, 0.9]] * 3)
    signal = model.max(axis=1)
    assert knn.backoff_predictions(model, knn_p, signal, 0.6).tolist() == [1, 1, 0]
    assert knn.backoff_predictions(model, knn_p, signal, 0.59).tolist() == [0, 0, 0]
    assert knn.backoff_predictions(model, knn_p, signal, 0.0).tolist() == [0, 0, 0]
    assert knn.backoff_predictions(model, knn_p, signal, 1.0).tolist() == [1, 1, 1]


def test_tuning_picks_the_smallest_threshold_of_the_best_accuracy():
    # Model right when confident (0.9), wrong at 0.4 and 0.45; the nearest neighbour of
    # every example carries the right label, so backing off at <= 0.45 is perfect.
    model = np.array([[0.9, 0.1], [0.6, 0.4], [0.55, 0.45], [0.1, 0.9]])
    labels = np.array([0, 1, 1, 1])
    signal = np.array([0.9, 0.4, 0.45, 0.9])
    near = neighbors([[0.0, 9.0]] * 4, [[0, 1], [1, 0], [1, 0], [1, 0]])
    choice = knn.tune_backoff(model, near, labels, signal, 2, ks=[1, 2], temperatures=[1.0])
    assert (choice.k, choice.threshold, choice.dev_accuracy) == (1, 0.45, 1.0)
    assert choice.dev_model_accuracy == 0.5
    scores = knn.backoff_scores(model, np.eye(2)[[0, 1, 1, 1]], signal, 0.45, labels)
    assert scores['n_below'] == 2 and scores['model_accuracy_below'] == 0.0
    assert scores['backoff_accuracy_below'] == 1.0 and scores['backoff_accuracy'] == 1.0


def test_k_grid_stays_below_one_percent_plus_the_papers_ks():
    assert knn.k_grid(1666) == [1, 2, 4, 8, 16, 64]
    assert knn.k_grid(20) == [1, 16]
    assert knn.k_grid(10000) == [1, 2, 4, 8, 16, 32, 64]


def test_leave_self_out_and_duplicates():
    train = np.array([[0.0], [1.0], [10.0], [11.5], [0.0]])
    classifier = knn.KnnClassifier(train, [0, 0, 1, 1, 1], n_class=2)
    near = classifier.neighbors(train, 1, leave_self_out=True)
    # Rows 0 and 4 are duplicates: each one's neighbour is the other, never itself.
    assert near.indices[:, 0].tolist() == [4, 0, 3, 2, 0]
    expected = np.array([0, 1, 1.5 ** 2, 1.5 ** 2, 0]) / train.std() ** 2   # normalised
    assert near.sq_distances[:, 0] == pytest.approx(expected, rel=1e-4, abs=1e-9)
    counts = knn_influence.training_set_counts(classifier, train, k=1)
    assert counts.tolist() == [2, 0, 1, 1, 1]


def test_retrieval_counts_and_removal_sets():
    counts = knn_influence.retrieval_counts([[2, 0], [2, 3], [3, 2]], 5)
    assert counts.tolist() == [1, 0, 3, 2, 0]
    assert knn_influence.most_retrieved(counts, 4).tolist() == [2, 3, 0, 1]   # tie: smaller id
    top, random = knn_influence.removal_sets(counts, 0.4, seed=0)
    assert top.tolist() == [2, 3] and len(random) == 2 and len(set(random)) == 2
    assert knn_influence.removal_sets(counts, 0.4, seed=0)[1].tolist() == random.tolist()


def test_detection_rule_on_a_constructed_flipped_set():
    # Five dev examples; nearest training examples 3, 7, 3, 8, 1 with labels 0, 1, 0, 2, 1.
    nearest = neighbors([[0.0]] * 5, [[0], [1], [0], [2], [1]], [[3], [7], [3], [8], [1]])
    predictions = [1, 1, 2, 0, 1]          # disagree with 3 (twice), 8; agree with 7, 1
    candidates = knn_influence.candidate_mislabeled(predictions, nearest)
    assert candidates.tolist() == [3, 8]
    scores = knn_influence.detection_scores(candidates, flipped=[3, 5, 9])
    assert (scores['precision'], scores['recall']) == (0.5, pytest.approx(1 / 3))
    assert scores['f1'] == pytest.approx(2 * 0.5 * (1 / 3) / (0.5 + 1 / 3))
    assert knn_influence.detection_scores([], [1])['f1'] == 0.0


def test_recall_curve_and_rankings():
    recall = knn_influence.recall_at_fractions([3, 1, 0, 2], [1, 2], [0, 0.25, 0.5, 1.0])
    assert recall.tolist() == [0.0, 0.0, 0.5, 1.0]
    losses = np.array([0.1, 2.0, 0.5, 2.0])
    assert knn_influence.ranking_of(losses).tolist() == [1, 3, 2, 0]
    # Example 2 sits among class-1 examples but is labelled 0: its vote is all against.
    train = np.array([[0.0], [0.1], [5.0], [5.1], [5.2], [0.2]])
    classifier = knn.KnnClassifier(train, [0, 0, 0, 1, 1, 0], n_class=2)
    ranking = knn_influence.self_vote_ranking(classifier, train, np.zeros(6), k=2)
    assert ranking[0] == 2


def test_bad_hyperparameters_name_the_parameter_and_the_command_line_names_the_flag():
    classifier = knn.KnnClassifier(np.eye(3), [0, 1, 1], n_class=2)
    for call, name in ((lambda: knn.check_threshold(1.5), 'tau'),
                       (lambda: knn.check_threshold(-0.1), 'tau'),
                       (lambda: knn.check_temperature(0), 'temperature'),
                       (lambda: knn.knn_probabilities(neighbors([[0.0]], [[0]]), 2, -1),
                        'temperature'),
                       (lambda: classifier.neighbors(np.eye(3), 0), 'k'),
                       (lambda: classifier.neighbors(np.eye(3), 4), 'k'),
                       (lambda: knn.check_layer(5, 3), 'layer')):
        with pytest.raises(UserError, match='^' + name + ' ') as raised:
            call()
        assert raised.value.parameter == name
        assert command_line_message(raised.value).startswith('--' + name + ' ')
    with pytest.raises(UserError, match='dev split has no examples'):
        knn.tune_backoff(np.zeros((0, 2)), neighbors(np.zeros((0, 1)), np.zeros((0, 1), int)),
                         [], [], 2, ks=[1])


def splits_of(n):
    examples = [(('w{}'.format(i),), i % 3) for i in range(n)]
    return run_splits.Splits(train=examples, dev=[], calib=[], test=[], dev_indices=None,
                             calib_indices=[])


def test_exclusion_and_label_noise_are_seeded_and_flip_to_another_label():
    splits = splits_of(50)
    changed = run_splits.change_train(splits, 3, exclude=[0, 49, 3], label_noise=0.1,
                                      noise_seed=4)
    assert changed.excluded_indices == (0, 3, 49) and len(changed.train) == 47
    kept = [e for i, e in enumerate(splits.train) if i not in (0, 3, 49)]
    assert len(changed.flipped_indices) == 5
    for i, ((tokens, label), (tokens0, label0)) in enumerate(zip(changed.train, kept)):
        assert tokens == tokens0 and (label != label0) == (i in changed.flipped_indices)
    again = run_splits.change_train(splits, 3, exclude=[3, 0, 49], label_noise=0.1,
                                    noise_seed=4)
    assert again.train == changed.train
    other = run_splits.change_train(splits, 3, label_noise=0.1, noise_seed=5)
    assert other.flipped_indices != changed.flipped_indices


@pytest.mark.parametrize('kwargs, flag', [
    ({'label_noise': 1.0}, '--label-noise'), ({'label_noise': -0.1}, '--label-noise'),
    ({'exclude': [50]}, '--exclude-train'), ({'exclude': list(range(50))}, '--exclude-train')])
def test_bad_training_changes_name_the_flag(kwargs, flag):
    with pytest.raises(UserError) as raised:
        run_splits.change_train(splits_of(50), 3, **kwargs)
    assert command_line_message(raised.value).startswith(flag + ' ')


def test_training_flags_are_recorded_and_reproduced_at_load(tmp_path):
    import json
    from deepknn.models import model_setup
    import train_text_classifier
    from tests.commands.test_end_to_end import synthetic_lines
    (tmp_path / 'train.txt').write_text(synthetic_lines(120, 0))
    (tmp_path / 'test.txt').write_text(synthetic_lines(20, 1))
    (tmp_path / 'exclude.json').write_text('[0, 5, 7]')
    out = tmp_path / 'run'
    train_text_classifier.main([
        '--dataset', 'custom', '--train-file', str(tmp_path / 'train.txt'),
        '--test-file', str(tmp_path / 'test.txt'), '--model', 'cnn', '--unit', '6',
        '--embed-dim', '4', '--epoch', '1', '--n-calib', '0', '--min-freq', '1',
        '--exclude-train', str(tmp_path / 'exclude.json'), '--label-noise', '0.2',
        '--label-noise-seed', '3', '--out', str(out)])
    config = json.loads((out / 'args.json').read_text())
    assert (config['label_noise'], config['label_noise_seed']) == (0.2, 3)
    changes = json.loads((out / 'train_changes.json').read_text())
    assert changes['excluded_indices'] == [0, 5, 7]
    setup = model_setup.load_setup(str(out))
    assert len(setup.splits.train) == 120 - 12 - 3        # 10% dev carved, 3 excluded
    assert list(setup.splits.flipped_indices) == changes['flipped_indices']
    assert len(changes['flipped_indices']) == round(0.2 * 105)
    unchanged = model_setup.load_data(setup.config.replace(exclude_train=None, label_noise=0.0))[1]
    kept = [e for i, e in enumerate(unchanged.train) if i not in (0, 5, 7)]
    flipped = set(changes['flipped_indices'])
    assert all((a[1] != b[1]) == (i in flipped)
               for i, (a, b) in enumerate(zip(setup.splits.train, kept)))
    (tmp_path / 'exclude.json').write_text('{"not": "a list"}')
    with pytest.raises(UserError, match='exclude.train'):
        model_setup.load_setup(str(out))


DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'shared', 'data')


@pytest.mark.skipif(not os.path.isdir(os.path.join(DATA, 'cad-nli')), reason='no ../shared/data')
def test_cad_snli_evaluated_on_snli_jsonl_has_the_papers_sizes():
    snli = os.path.join(DATA, 'snli_1.0', 'snli_1.0_{}.jsonl')
    dataset = text_datasets.load_dataset('cad-snli', data_dir=DATA, dev_file=snli.format('dev'),
                                         test_file=snli.format('test'))
    assert (len(dataset.train_pool), len(dataset.dev), len(dataset.test)) == (1666, 9842, 9824)
    assert dataset.pair and dataset.label_names == text_datasets.SNLI_LABELS


def test_explanation_page_escapes_and_isolates_every_text():
    from deepknn.reports import knn_report
    record = {'example': 0, 'gold': '<neg>', 'text': '\u05e9\u05dc\u05d5\u05dd \u202e<b>',
              'model_prediction': 'pos', 'model_probability': 0.9, 'knn_prediction': 'pos',
              'knn_vote': {'pos': 0.75, '<neg>': 0.25},
              'neighbors': [{'text': 'x<script>', 'label': 'pos', 'sq_distance': 1.0}]}
    page = knn_report.explanation_html([record], 'kNN <title>',
                                       'Model: runs/<a> (model sha256 12ab). Produced by: `x`')
    assert 'Model: runs/&lt;a&gt; (model sha256 12ab). Produced by: x</p>' in page
    assert '<script' not in page and '<b>\u202e' not in page and '&lt;neg&gt;' in page
    assert '<bdi>\u05e9\u05dc\u05d5\u05dd \u202e&lt;b&gt;</bdi>' in page
    assert '<bdi>x&lt;script&gt;</bdi>' in page and '<bdi>&lt;neg&gt;</bdi> 0.250' in page


def test_negation_association_counts_not_and_split_nt_and_their_label_share():
    from deepknn.rajani import knn_influence
    labels = ['entailment', 'neutral', 'contradiction']
    examples = [((['p'], ['A', 'man', 'is', 'not', 'here']), 2),
                ((['p'], ['He', 'isn', "'", 't', 'sad']), 2),        # tokenizer-split n't
                ((['p'], ['They', "don't", 'run']), 0),
                ((['p'], ['Nothing', 'notable']), 2),                  # no negation word
                ((['p'], ['A', 'knot']), 1)]
    stats = knn_influence.negation_association(examples, labels)
    assert (stats['n'], stats['n_negated']) == (5, 3)
    assert stats['share_negated'] == 0.6 and stats['share_label'] == 2 / 3


def test_split_names_say_which_file_replaced_a_split():
    config = types.SimpleNamespace(dataset='cad-snli', train_file=None, test_file=None,
                                   dev_file='/data/snli_1.0/snli_1.0_dev.jsonl')
    assert knn_tables.split_name(config, 'dev') == 'cad-snli dev (snli_1.0_dev.jsonl)'
    assert knn_tables.split_name(config, 'test') == 'cad-snli test'
    proxy = types.SimpleNamespace(dataset='snli', dev_file=None, test_file=None,
                                  train_file='/data/snli_1.0/snli_1.0_dev.jsonl')
    assert knn_tables.split_name(proxy, 'test') == 'snli (dev-trained proxy) test'
    assert knn_tables.training_data(proxy) == 'snli (dev-trained proxy)'
    own = types.SimpleNamespace(dataset='snli', train_file='/r/anli-dev-halves_seed0/train.jsonl')
    assert knn_tables.training_data(own) == 'snli format: anli-dev-halves_seed0/train.jsonl'
    assert knn_tables.training_data(config) == 'cad-snli'

def test_a_k_below_one_is_not_told_to_choose_a_smaller_one():
    with pytest.raises(UserError) as error:
        knn.check_k(0, 10)
    assert 'from 1 to the 10 training examples, got 0' in str(error.value)
    assert 'smaller' not in str(error.value)
    with pytest.raises(UserError, match='got 11; choose a smaller one'):
        knn.check_k(11, 10)
