"""Known answers for the kNN backoff and the mislabeled-example detection commands.

A stand-in model returns hand-made activations (a 2-d representation and the logits)
for examples whose token ids are [row]; the training activations reach the experiments
through dknn.train_activations, replaced here. The constructions fix what the commands
must report: the flipped set the rule finds, the tau the tuning must choose, and the
accuracies on test.
"""
import csv
import html
import types

import numpy as np
import pytest

import cli_helpers
from deepknn.neighbors import dknn
from deepknn.rajani import knn_influence
from deepknn.rajani import knn_representations as knn
from deepknn.rajani import label_issues
from deepknn.neighbors.dknn_settings import DkNNSettings
import run_knn_representations as cli

CENTERS = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])


class TableModel:
    """layer_activations of encoded examples ([row], label): rows of fixed per-layer tables."""

    def __init__(self, layers):
        self.layers = layers          # [(R, D_l)]: representation, logits

    def layer_activations(self, xs, batchsize=64, progress=None):
        rows = [x[0] for x in xs]
        return [layer[rows] for layer in self.layers]


def logits_for(predicted, confidence, n_class):
    """(M, C) logits whose softmax puts `confidence` on `predicted`, the rest evenly."""
    proba = np.full((len(predicted), n_class), 0.0)
    proba[:] = ((1 - np.asarray(confidence)) / (n_class - 1))[:, None]
    proba[np.arange(len(predicted)), predicted] = confidence
    return np.log(proba)


def make_setup(tmp_path, monkeypatch, vectors, labels, predicted, confidence, parts, flipped=(),
               n_class=3, tokens=None):
    """A setup whose rows are split into parts = {'train': rows, 'dev': rows, 'test': rows};
    labels (R,) are the (possibly flipped) labels, predicted / confidence the model's.
    tokens: token-level inputs per row (default: one word per row); encode maps them
    back to [row]."""
    layers = [np.asarray(vectors, dtype=np.float32),
              logits_for(predicted, confidence, n_class).astype(np.float32)]
    tokens = tokens or [['w{}'.format(row)] for row in range(len(labels))]
    examples = {name: [(tokens[row], int(labels[row])) for row in rows]
                for name, rows in parts.items()}
    rows_of = {repr(t): row for row, t in enumerate(tokens)}
    words = [w for t in tokens for part in (t if isinstance(t, tuple) else (t,)) for w in part]
    vocab = {w: i for i, w in enumerate(dict.fromkeys(words))}
    train_rows = list(parts['train'])
    monkeypatch.setattr(dknn, 'train_activations', lambda setup, *a, **k: setup.train_outputs)
    splits = types.SimpleNamespace(train=examples['train'], dev=examples['dev'],
                                   test=examples['test'], calib=[], flipped_indices=tuple(flipped))
    config = types.SimpleNamespace(n_class=n_class, model='cnn', dataset='constructed',
                                   train_file=None, label_noise_seed=1, pair=isinstance(tokens[0], tuple),
                                   model_path='model.npz')
    config.to_json = lambda: {k: v for k, v in vars(config).items() if k != 'to_json'}
    cli_helpers.write_weights(tmp_path / 'model.npz', b'constructed')  # the tables' provenance
    encoded = {name: [([row], int(labels[row])) for row in rows] for name, rows in parts.items()}
    return types.SimpleNamespace(
        result_dir=str(tmp_path), config=config, splits=splits, train=encoded['train'],
        dev=encoded['dev'], test=encoded['test'], model=TableModel(layers),
        label_names=['entailment', 'neutral', 'contradiction'][:n_class], vocab=vocab,
        encode=lambda chosen: [([rows_of[repr(t)]], y) for t, y in chosen],
        train_outputs=([layer[train_rows] for layer in layers],
                       np.asarray(labels)[train_rows].astype(np.int64)))


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


# ---------------------------------------------------------------- detection
FLIPPED = [0, 1, 20, 21, 40, 41]


@pytest.fixture
def noisy_setup(tmp_path, monkeypatch):
    """60 training examples, 20 per class in three tight clusters; FLIPPED carry the next
    class's label. The model predicts each cluster's class. Dev examples sit on training
    examples 0, 1, 20, 21, 40 (flipped: the rule finds them), 5 and 25 (clean: it does
    not) and 45 (clean, but the model predicts class 0 there: a false candidate).
    Flipped example 41 is nobody's nearest neighbour: missed."""
    rng = np.random.RandomState(0)
    true = np.repeat([0, 1, 2], 20)
    train = CENTERS[true] + rng.normal(0, 0.3, (60, 2))
    labels = true.copy()
    labels[FLIPPED] = (true[FLIPPED] + 1) % 3
    on = [0, 1, 20, 21, 40, 5, 25, 45]
    vectors = np.concatenate([train, train[on]])
    all_labels = np.concatenate([labels, true[on]])
    predicted = np.concatenate([true, true[on]])
    predicted[-1] = 0                                     # wrong on the dev copy of 45
    parts = {'train': range(60), 'dev': range(60, 68), 'test': range(60, 68)}
    return make_setup(tmp_path, monkeypatch, vectors, all_labels, predicted,
                      np.full(68, 0.9), parts, FLIPPED)


def test_detection_finds_the_constructed_flipped_set(noisy_setup):
    result = knn_influence.mislabeled_experiment(noisy_setup, seed=0)
    rule = result['methods']['kNN rule (paper)']
    assert (rule['n_candidates'], rule['n_hits']) == (6, 5)           # 0,1,20,21,40 + 45
    assert rule['precision'] == rule['recall'] == pytest.approx(5 / 6)
    assert rule['fraction_inspected'] == pytest.approx(0.1)
    # The model's loss is highest on exactly the six flipped labels.
    loss = result['curves']['training loss']
    assert loss[knn_influence.FRACTIONS.tolist().index(0.1)] == 1.0
    assert knn_influence.fraction_to_match(loss, 5 / 6) == 0.08       # round(0.08*60) = 5
    for name in ('cleanlab, kNN from features', 'cleanlab, cross-validated probe'):
        assert result['methods'][name]['precision'] == result['methods'][name]['recall'] == 1.0
        assert result['curves'][name][knn_influence.FRACTIONS.tolist().index(0.1)] == 1.0


def test_detect_command_reports_the_known_scores(any_run_path, noisy_setup, tmp_path, monkeypatch):
    monkeypatch.setattr(cli, 'load', lambda args, path, writes_into_run=False: noisy_setup)
    stem = str(tmp_path / 'detect')
    cli.main(['detect', '--model-setup', 'a', 'b', '--out', stem])
    rows = read_csv(stem + '.csv')
    rule = [r for r in rows if r['method'] == 'kNN rule (paper)']
    assert [r['precision'] for r in rule] == ['0.833'] * 3 and rule[2]['run'] == 'mean of 2 seeds'
    assert rule[2]['seed'] == 'F1 0.833-0.833'
    assert rule[0]['training_loss_recall_same_fraction'] == '1.0'
    rankings = {r['ranking']: r for r in read_csv(stem + '_rankings.csv')}
    assert rankings['training loss']['fraction_to_match_the_rule'] == '0.08'
    assert rankings['training loss (paper, BERT)']['fraction_to_match_the_rule'] == '0.65'


def test_cleanlab_inputs_are_out_of_sample():
    # Datalab's kNN probabilities leave the example itself out: two points per class,
    # k = 1, so each example's vote is its twin's label.
    vectors = np.array([[0.0], [0.1], [5.0], [5.1]])
    classifier = knn.KnnClassifier(vectors, [0, 1, 1, 1], n_class=2)
    proba = label_issues.knn_vote_proba(classifier, vectors, k=1)
    assert proba.tolist() == [[0, 1], [1, 0], [0, 1], [0, 1]]
    labels = np.repeat([0, 1], 10)
    separable = np.concatenate([np.linspace(0, 1, 10), np.linspace(9, 10, 10)])[:, None]
    cv = label_issues.cross_validated_proba(knn.KnnClassifier(separable, labels, 2), separable)
    assert cv.shape == (20, 2) and (cv.argmax(axis=1) == labels).all()


# ---------------------------------------------------------------- backoff
@pytest.fixture
def backoff_setup(tmp_path, monkeypatch):
    """Two clusters of 20 training examples. Dev: 10 examples the model gets right at
    confidence 0.9 and 10 it gets wrong at 0.505-0.595; every dev example sits in its
    class's cluster, so the kNN is right on all. Backing off at tau = 0.60 (the first
    grid value above every wrong confidence; ties go to the smallest tau, k and T) is
    perfect on dev. Test: 10
    right at 0.9, 5 wrong at 0.55 (backed off: fixed) and 5 wrong at 0.65 (kept)."""
    rng = np.random.RandomState(1)
    train_true = np.repeat([0, 1], 20)
    eval_true = np.tile([0, 1], 20)                        # 20 dev, then 20 test
    vectors = np.concatenate([CENTERS[train_true], CENTERS[eval_true]]) + \
        rng.normal(0, 0.3, (80, 2))
    right = np.tile([True] * 10 + [False] * 10, 2)
    predicted = np.concatenate([train_true, np.where(right, eval_true, 1 - eval_true)])
    confidence = np.concatenate([np.full(40, 0.9), np.full(10, 0.9), np.linspace(0.505, 0.595, 10),
                                 np.full(10, 0.9), np.full(5, 0.55), np.full(5, 0.65)])
    parts = {'train': range(40), 'dev': range(40, 60), 'test': range(60, 80)}
    return make_setup(tmp_path, monkeypatch, vectors, np.concatenate([train_true, eval_true]),
                      predicted, confidence, parts, n_class=2)


def test_backoff_tunes_the_known_tau_and_scores_test(backoff_setup):
    result = knn.backoff_experiment(backoff_setup)
    chosen = result['confidence']
    assert (chosen['k'], chosen['temperature'], chosen['threshold']) == (1, 0.1, 0.6)
    assert (chosen['dev_accuracy'], chosen['dev_model_accuracy']) == (1.0, 0.5)
    assert (chosen['model_accuracy'], chosen['backoff_accuracy'], chosen['knn_accuracy']) == \
        (0.5, 0.75, 1.0)
    assert (chosen['n_below'], chosen['model_accuracy_below'],
            chosen['backoff_accuracy_below']) == (5, 0.0, 1.0)


def test_credibility_switch_without_a_calibration_split_uses_dev_halves(backoff_setup):
    # k = 5 DkNN over the two layers: a right dev/test example has nonconformity 0 for its
    # prediction (credibility 1); a wrong one sits in its true cluster but on the other
    # class's logits, so every class scores 5, the value of exactly the w wrong examples
    # of the calibration half: credibility w/10. Tuned on the other half, the switch backs
    # off at tau = w/10 and fixes every wrong test example (the kNN is right on all).
    calib_rows, tune_rows = knn.dev_halves(20)
    assert sorted(calib_rows.tolist() + tune_rows.tolist()) == list(range(20))
    assert len(calib_rows) == len(tune_rows) == 10
    n_wrong = int((calib_rows >= 10).sum())             # dev rows 10-19 are the wrong ones
    assert 0 < n_wrong < 10
    chosen = knn.backoff_experiment(backoff_setup, dknn_settings=DkNNSettings(5))['credibility']
    assert chosen['calibrated_on'] == 'dev half (10), tuned on the other dev half (10)'
    assert chosen['threshold'] == pytest.approx(n_wrong / 10)
    assert chosen['dev_accuracy'] == 1.0
    assert chosen['dev_model_accuracy'] == np.mean(tune_rows < 10)
    assert (chosen['model_accuracy'], chosen['backoff_accuracy'], chosen['n_below']) == \
        (0.5, 1.0, 10)


def test_backoff_command_writes_the_known_row(any_run_path, backoff_setup, tmp_path, monkeypatch):
    monkeypatch.setattr(cli, 'load', lambda args, path, writes_into_run=False: backoff_setup)
    stem = str(tmp_path / 'backoff')
    cli.main(['backoff', '--model-setup', 'a', '--table', stem])
    row = read_csv(stem + '.csv')[0]
    assert (row['tau'], row['model'], row['knn_backoff'], row['knn_alone']) == \
        ('0.6', '50.0', '75.0', '100.0')
    assert read_csv(stem + '_table5.csv')[0]['CNN'] == '0.6'
    assert row['credibility_calibrated_on'].startswith('dev half (10)')


# ---------------------------------------------------------------- contrast / candidates
HYPOTHESES = ['he is not asleep', "he isn't here", 'he sleeps', 'nobody is not', 'a dog runs',
              'it is notable']
DEV_GOLD = [0, 0, 0, 2, 1, 0]


def pair_runs(tmp_path, monkeypatch):
    """Two runs sharing 6 dev pairs (negated hypotheses: rows 0, 1 and 3; 'notable' is
    not a negation). First run right on 0, 2, 3, 4, 5; second run right on 1, 2, 4."""
    premise = ['a', 'man', 'sits']
    tokens = [(premise, ['train', str(i)]) for i in range(6)] + \
        [(premise, h.split()) for h in HYPOTHESES]
    train_labels = [0, 1, 2, 0, 1, 2]
    vectors = np.concatenate([CENTERS[train_labels], CENTERS[DEV_GOLD]])
    parts = {'train': range(6), 'dev': range(6, 12), 'test': range(6, 12)}
    runs = []
    for name, dev_predicted in (('original', [0, 2, 0, 2, 1, 0]), ('augmented', [2, 0, 0, 0, 1, 1])):
        folder = tmp_path / name
        folder.mkdir()
        runs.append(make_setup(folder, monkeypatch, vectors, train_labels + DEV_GOLD,
                               train_labels + dev_predicted, np.full(12, 0.8), parts,
                               tokens=tokens))
    return runs


def test_negation_slices_and_contrasting_examples():
    examples = [(('p', h.split()), y) for h, y in zip(HYPOTHESES, DEV_GOLD)]
    slices = knn_influence.negation_slices(examples, [0, 2, 0, 2, 1, 0],
                                           ['entailment', 'neutral', 'contradiction'])
    assert slices == {'all': (5 / 6, 6), 'negated hypothesis': (2 / 3, 3),
                      'entailment, negated hypothesis': (0.5, 2)}
    first_only, second_only = knn_influence.contrasting(DEV_GOLD, [0, 2, 0, 2, 1, 0],
                                                        [2, 0, 0, 0, 1, 1])
    assert (first_only.tolist(), second_only.tolist()) == ([0, 3, 5], [1])


def test_contrast_command_tables_the_slices_and_shows_both_directions(any_run_path, tmp_path, monkeypatch):
    runs = pair_runs(tmp_path, monkeypatch)
    monkeypatch.setattr(cli, 'load', lambda args, path, writes_into_run=False: runs[int(path)])
    stem = str(tmp_path / 'contrast')
    cli.main(['contrast', '--model-setup', '0', '1', '--show', '2', '--k', '2', '--out', stem])
    rows = read_csv(stem + '.csv')
    assert [r['entailment, negated hypothesis (n=2)'] for r in rows] == ['50.0', '50.0']
    assert [r['all (n=6)'] for r in rows] == ['83.3', '50.0']
    assert [r['negated hypothesis (n=3)'] for r in rows] == ['66.7', '33.3']
    page = open(stem + '.html').read()
    # Examples 0 and 3 (first run right), then 1 (second right), each under both runs.
    assert page.count('<section>') == 3 and page.count('<h3>') == 6
    assert page.index('Example 0') < page.index('Example 3') < page.index('Example 1')
    assert 'he isn&#x27;t here' in page                      # escaped
    models = next(line for line in open(stem + '.md') if line.startswith('Models: '))
    assert '<p class="settings">' + html.escape(models) in page   # the table's sources


def test_candidates_command_lists_the_rules_candidates(any_run_path, noisy_setup, tmp_path, monkeypatch):
    monkeypatch.setattr(cli, 'load', lambda args, path, writes_into_run=False: noisy_setup)
    stem = str(tmp_path / 'candidates')
    cli.main(['candidates', '--model-setup', 'a', '--sample', '10', '--out', stem])
    assert [int(r['train_index']) for r in read_csv(stem + '.csv')] == [0, 1, 20, 21, 40, 45]
    assert '6 of the 6 candidates (10.0% of 60 training examples)' in open(stem + '.md').read()


def test_detection_results_are_cached_per_run_and_settings(noisy_setup, monkeypatch):
    first = knn_influence.cached_mislabeled_experiment(noisy_setup, seed=0)
    assert first['methods']['kNN rule (paper)']['n_hits'] == 5

    def not_again(*args, **kwargs):
        raise AssertionError('recomputed although nothing changed')
    real = knn_influence.mislabeled_experiment
    monkeypatch.setattr(knn_influence, 'mislabeled_experiment', not_again)
    assert knn_influence.cached_mislabeled_experiment(noisy_setup, seed=0) == first
    monkeypatch.setattr(knn_influence, 'mislabeled_experiment', real)
    with open(noisy_setup.result_dir + '/model.npz', 'wb') as f:
        f.write(b'another model')
    calls = []
    monkeypatch.setattr(knn_influence, 'mislabeled_experiment',
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    knn_influence.cached_mislabeled_experiment(noisy_setup, seed=0)
    assert calls == [1]                                   # a new model is measured again
