"""Known answers for ANLI / HANS reading, the balanced validation split, kNN backoff with
HANS's collapsed labels (Rajani et al. 2020, Tables 4-6) and the ranked detection scores."""
import csv
import dataclasses
import gzip
import json
import os
import sys
import types

import numpy as np
import pytest

import cli_helpers
from deepknn.data import eval_sets
from deepknn.data import text_readers
from deepknn.rajani import knn_influence
from deepknn.rajani import robustness
from deepknn.reports import robustness_tables
from nlp_utils import UserError
from cli_helpers import assert_one_line_error, cli
import text_datasets
from tests.rajani.test_rajani_known_answers import CENTERS, make_setup, noisy_setup  # noqa: F401

DATA = os.environ.get('DKNN_DATA_DIR') or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'shared', 'data')
HANS_HEADER = ['gold_label', 'sentence1_binary_parse', 'sentence2_binary_parse',
               'sentence1_parse', 'sentence2_parse', 'sentence1', 'sentence2', 'pairID',
               'heuristic', 'subcase', 'template']
ANLI_HEADER = 'context,statement,reason,gold_label,uid\n'


def hans_line(label, premise, hypothesis, heuristic, subcase, n=0):
    return '\t'.join([label, '', '', '', '', premise, hypothesis, 'ex{}'.format(n), heuristic,
                      subcase, 'temp1']) + '\n'


def write(path, text, compress=False):
    if compress:
        with gzip.open(str(path), 'wt', encoding='utf-8') as f:
            f.write(text)
    else:
        path.write_text(text, encoding='utf-8')
    return str(path)


# ---------------------------------------------------------------- reading
def test_anli_csv_reads_labels_rounds_and_quoted_multiline_contexts(tmp_path):
    text = ANLI_HEADER + ('"A man ran.\nHe fell.",He ran.,why,e,u1\n'
                          'The sky is blue.,The sky is red.,,c,u2\n')
    path = write(tmp_path / 'ANLI_analysis_r2_dev.csv', text)
    read = eval_sets.load_eval_set(files=[path])
    assert [label for _, label in read.records] == ['entailment', 'contradiction']
    assert read.records[0][0] == (['A', 'man', 'ran', '.', 'He', 'fell', '.'], ['He', 'ran', '.'])
    assert read.groups == ['R2', 'R2'] and not read.binary


@pytest.mark.parametrize('row, problem', [
    ('The sky.,,,e,u3\n', 'empty context or statement'),
    ('The sky.,It is.,,x,u3\n', "gold_label 'x' is not one of e, n, c"),
    ('The sky.,It is.,,non-entailment,u3\n', "gold_label 'non-entailment' is not one of"),
    ('The sky.,It is.\n', 'expected 5 fields, got 2')])
def test_malformed_anli_row_names_file_and_line(tmp_path, row, problem):
    # the quoted context spans lines 2-3, so the bad row starts on line 4
    path = write(tmp_path / 'ANLI_analysis_r1_dev.csv',
                 ANLI_HEADER + '"A.\nB.",C.,,n,u1\n' + row)
    with pytest.raises(UserError) as error:
        eval_sets.load_eval_set(files=[path])
    message = str(error.value)
    assert message.startswith('{} line 4: {}'.format(path, problem)) and '\n' not in message


@pytest.mark.parametrize('compress', [False, True])
def test_malformed_hans_row_names_file_and_line(tmp_path, compress):
    text = '\t'.join(HANS_HEADER) + '\n' + hans_line('entailment', 'A b .', 'A b .', 'h', 's') \
        + hans_line('contradiction', 'A b .', 'B a .', 'h', 's')
    path = write(tmp_path / 'heuristics_evaluation_set.txt{}'.format('.gz' * compress), text,
                 compress)
    with pytest.raises(UserError, match=r"line 3: gold_label 'contradiction' is not one of "
                                        r"entailment, non-entailment"):
        eval_sets.load_eval_set(files=[path])


def test_a_broken_gzip_is_one_error(tmp_path):
    path = write(tmp_path / 'heuristics_evaluation_set.txt.gz', 'not gzipped')
    with pytest.raises(UserError, match='is not gzipped UTF-8 text'):
        eval_sets.read_pairs(path, text_datasets.text_readers.Reading(
            False, False, False, False, None), 'hans_tsv')


def test_hans_without_its_columns_is_one_error(tmp_path):
    path = write(tmp_path / 'hans.txt', 'gold_label\tsentence1\tsentence2\theuristic\tsubcase\n'
                 'entailment\tA .\tA .\th\n')
    with pytest.raises(UserError, match='line 2: expected 5 fields, got 4'):
        eval_sets.load_eval_set(files=[path])


def scripts_module(name):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'scripts'))
    return __import__(name)


@pytest.mark.parametrize('argv, fragments', [
    (['--eval-file', '{bad}'], ('bad.csv line 2:', "gold_label 'x'")),
    (['--eval-file', '{hans}', '{bad}'], ('pass ANLI .csv files or one HANS file',)),
    (['--dataset', 'hans-like', '--data-dir', '{tmp}'], ('hans-like:', 'not found'))])
def test_robustness_command_reports_bad_sets_in_one_line(tmp_path, capsys, argv, fragments):
    paths = {'bad': write(tmp_path / 'bad.csv', ANLI_HEADER + 'P .,H .,,x,u\n'),
             'hans': write(tmp_path / 'h.txt', '\t'.join(HANS_HEADER) + '\n'), 'tmp': tmp_path}
    out = tmp_path / 'tables'
    (tmp_path / 'run').mkdir()
    unread = write(tmp_path / 'run' / 'args.json', '{}')   # the sets are read before the run
    status, err = cli(scripts_module('knn_robustness').main,
                      ['--model-setup', str(unread), '--out', str(out)] +
                      [a.format(**paths) for a in argv], capsys)
    assert_one_line_error(status, err, *fragments)
    assert not out.exists()


def test_anli_is_an_eval_file_of_an_snli_model_and_hans_is_refused(tmp_path):
    anli = write(tmp_path / 'ANLI_analysis_r3_dev.csv', ANLI_HEADER + 'P .,H .,,n,u\n')
    examples = text_datasets.read_eval_file(anli, 'snli', text_datasets.SNLI_LABELS)
    assert examples == [((['P', '.'], ['H', '.']), 1)]
    hans = write(tmp_path / 'mine.txt', '\t'.join(HANS_HEADER) + '\n' +
                 hans_line('entailment', 'A .', 'A .', 'h', 's'))
    with pytest.raises(UserError, match='HANS labels are entailment / non-entailment'):
        text_datasets.read_eval_file(hans, 'snli', text_datasets.SNLI_LABELS)


@pytest.mark.parametrize('dataset', ['cad-snli', 'snli'])
def test_every_pair_layout_is_an_eval_file_of_any_pair_model(tmp_path, dataset):
    """A cad-snli (tsv) model reads SNLI's jsonl, and an SNLI (jsonl) model cad-snli's tsv
    and SNLI's own .txt layout (more columns, sentence1 and sentence2 among them)."""
    pair = {'sentence1': 'A man sleeps .', 'sentence2': 'A man rests .', 'gold_label': 'entailment'}
    files = {
        'snli.jsonl': json.dumps(pair) + '\n',
        'pairs.tsv': 'sentence1\tsentence2\tgold_label\nA man sleeps .\tA man rests .\tentailment\n',
        'snli_1.0_dev.txt': 'gold_label\tsentence1_binary_parse\tsentence1\tsentence2\n'
                            'entailment\t( A man )\tA man sleeps .\tA man rests .\n'}
    for name, text in files.items():
        examples = text_datasets.read_eval_file(write(tmp_path / name, text), dataset,
                                                text_datasets.SNLI_LABELS)
        assert examples == [((['A', 'man', 'sleeps', '.'], ['A', 'man', 'rests', '.']), 0)], name


def test_official_hans_is_found_by_name_also_gzipped(tmp_path):
    (tmp_path / 'hans').mkdir()
    write(tmp_path / 'hans' / 'heuristics_evaluation_set.txt.gz', '\t'.join(HANS_HEADER) + '\n' +
          hans_line('non-entailment', 'A b .', 'B a .', 'lexical_overlap', 'ln_swap'), True)
    read = eval_sets.load_eval_set('hans', data_dir=str(tmp_path))
    assert read.binary and read.records == [((['A', 'b', '.'], ['B', 'a', '.']), 'non-entailment')]
    assert (read.groups, read.subcases) == (['lexical_overlap'], ['ln_swap'])
    with pytest.raises(UserError, match='anli: ANLI_analysis_r1_dev.csv not found'):
        eval_sets.load_eval_set('anli', data_dir=str(tmp_path))


@pytest.mark.skipif(not os.path.isdir(os.path.join(DATA, 'anli')), reason='no offline data')
def test_offline_sets_have_their_published_sizes():
    anli = eval_sets.load_eval_set('anli', data_dir=DATA)
    assert len(anli.records) == 3198 and sorted(set(anli.groups)) == ['R1', 'R2', 'R3']
    hans = eval_sets.load_eval_set('hans-like', data_dir=DATA)
    assert len(hans.records) == 30000 and len(set(hans.subcases)) == 30
    assert sorted(set(hans.groups)) == sorted(eval_sets.HEURISTICS)


# ---------------------------------------------------------------- the split
def test_allocation_is_proportional_and_exact():
    assert robustness.allocate([1000, 1000, 1000], 10000).tolist() == [3334, 3333, 3333]
    assert robustness.allocate([1000, 1000, 1198], 1599).tolist() == [500, 500, 599]


def test_hans_split_is_balanced_per_heuristic_and_subcase():
    heuristics = np.repeat(['constituent', 'lexical_overlap', 'subsequence'], 3000)
    subcases = np.array(['{}_{}'.format(h, i % 10) for i, h in enumerate(heuristics)])
    validation, test = robustness.balanced_split(heuristics, 3000, 7, subcases)
    assert len(validation) == 3000 and len(test) == 6000
    assert len(np.intersect1d(validation, test)) == 0
    assert (np.unique(heuristics[validation], return_counts=True)[1] == 1000).all()
    assert (np.unique(subcases[validation], return_counts=True)[1] == 100).all()
    again = robustness.balanced_split(heuristics, 3000, 7, subcases)[0]
    other = robustness.balanced_split(heuristics, 3000, 8, subcases)[0]
    assert np.array_equal(validation, again) and not np.array_equal(validation, other)


# ---------------------------------------------------------------- backoff on HANS
# (heuristic, subcase, gold, the model's 3-way prediction, its confidence, the cluster the
# representation sits in): neutral and contradiction are right for non-entailment once
# collapsed; the two low-confidence rows are wrong, and their cluster makes the kNN right.
HANS_DESIGN = [('h1', 'h1_e', 'entailment', 0, 0.9, 0), ('h1', 'h1_n', 'non-entailment', 1, 0.9, 1),
               ('h2', 'h2_e', 'entailment', 2, 0.455, 0), ('h2', 'h2_n', 'non-entailment', 2, 0.9, 2),
               ('h3', 'h3_e', 'entailment', 0, 0.9, 0), ('h3', 'h3_n', 'non-entailment', 0, 0.455, 2)]


@pytest.fixture
def hans_run(tmp_path, monkeypatch):
    """A constructed HANS file (3 pairs per subcase) and a stand-in 3-way model over 60
    training examples in three clusters."""
    rows = [design for design in HANS_DESIGN for _ in range(3)]
    text = '\t'.join(HANS_HEADER) + '\n' + ''.join(
        hans_line(gold, 'p{} .'.format(n), 'h .', heuristic, subcase, n)
        for n, (heuristic, subcase, gold, *_) in enumerate(rows))
    hans = eval_sets.load_eval_set(files=[write(tmp_path / 'hans.txt', text)])
    rng = np.random.RandomState(0)
    train_labels = np.repeat([0, 1, 2], 20)
    clusters = np.concatenate([train_labels, [row[5] for row in rows]])
    vectors = CENTERS[clusters] + rng.normal(0, 0.3, (len(clusters), 2))
    predicted = np.concatenate([train_labels, [row[3] for row in rows]])
    confidence = np.concatenate([np.full(60, 0.9), [row[4] for row in rows]])
    tokens = [(['t{}'.format(i)], ['x']) for i in range(60)] + [t for t, _ in hans.records]
    setup = make_setup(tmp_path, monkeypatch, vectors, np.concatenate([train_labels, [0] * 18]),
                       predicted, confidence, {'train': range(60), 'dev': [], 'test': []},
                       tokens=tokens)
    setup.dataset = types.SimpleNamespace(label_names=['entailment', 'neutral', 'contradiction'])
    return setup, hans


def test_backoff_on_hans_collapses_predictions_and_reports_each_heuristic(hans_run):
    result = robustness.robustness_experiment(*hans_run, k=5, seed=3)
    assert (result['n_validation'], result['n_test']) == (6, 12)
    # the first grid value above 0.455 (ties go to the smaller tau)
    assert result['choice']['threshold'] == 0.46 and result['choice']['dev_accuracy'] == 1.0
    test = result['test']
    assert test['model_accuracy'] == pytest.approx(8 / 12)     # h2_e and h3_n wrong
    assert (test['backoff_accuracy'], test['knn_accuracy'], test['n_below']) == (1.0, 1.0, 4)
    # chance: 6 of the 12 test pairs are entailment; P(X >= 8 | 12, 1/2) = 794 / 4096
    assert test['majority_accuracy'] == 0.5
    assert test['p_above_chance'] == pytest.approx(794 / 4096)
    assert result['not_entail'] == {
        'h1': {'n': 2, 'model': 1.0, 'backoff': 1.0},          # neutral counts as right
        'h2': {'n': 2, 'model': 1.0, 'backoff': 1.0},
        'h3': {'n': 2, 'model': 0.0, 'backoff': 1.0}}
    assert result['subcases']['h2_e'] == {'n': 2, 'model': 0.0, 'backoff': 1.0,
                                          'gold': 'entailment'}
    assert len(result['subcases']) == 6


def test_split_seeds_share_one_forward_pass_and_a_changed_set_is_run_again(hans_run,
                                                                             monkeypatch):
    setup, hans = hans_run
    first = robustness.robustness_experiment(setup, hans, k=5, seed=3)
    passes = []
    real_outputs = robustness.knn.split_outputs
    monkeypatch.setattr(robustness.knn, 'split_outputs',
                        lambda *a, **kw: passes.append(1) or real_outputs(*a, **kw))
    assert robustness.robustness_experiment(setup, hans, k=5, seed=3) == first
    robustness.robustness_experiment(setup, hans, k=5, seed=4)
    assert passes == []                      # seeds 3 and 4 read the kept pass
    fewer = dataclasses.replace(hans, records=hans.records[:-1], groups=hans.groups[:-1],
                                subcases=hans.subcases[:-1])
    robustness.set_outputs(setup, fewer, -2, 64)
    assert passes == [1]                     # other pairs, same name: run again


# ---------------------------------------------------------------- ranked detection
def test_auprc_known_answers():
    flipped = [2, 5]
    assert knn_influence.flipped_average_precision([0, 0, 9, 0, 0, 8], flipped) == 1.0
    assert knn_influence.flipped_average_precision(np.ones(6), flipped) == pytest.approx(2 / 6)
    # ranking 2, 0, 5, ...: precision 1/1 at the first flip, 2/3 at the second
    assert knn_influence.flipped_average_precision([5, 0, 6, 0, 0, 4], flipped) == pytest.approx(
        (1 + 2 / 3) / 2)


def test_precision_and_recall_at_k_on_a_hand_made_ranking():
    ranking = [3, 0, 7, 1, 2, 4, 5, 6]
    assert knn_influence.precision_recall_at(ranking, [0, 1, 6], 3) == (1 / 3, 1 / 3)
    assert knn_influence.precision_recall_at(ranking, [0, 1, 6], 4) == (2 / 4, 2 / 3)
    scored = knn_influence.ranked_scores(knn_influence.scores_of(ranking), [3, 0])
    assert (scored['auprc'], scored['precision_at_k'], scored['k']) == (1.0, 1.0, 2)


def test_rule_counts_how_many_predictions_each_neighbour_contradicts():
    nearest = types.SimpleNamespace(indices=np.array([[4], [4], [1], [2]]),
                                    labels=np.array([[0], [0], [1], [2]]))
    counts = knn_influence.rule_counts([1, 2, 1, 0], nearest, 5)
    assert counts.tolist() == [0, 0, 1, 0, 2]      # example 1 agrees with its prediction
    assert knn_influence.ranking_of(counts)[:2].tolist() == [4, 2]


def test_detection_ranks_every_detector(noisy_setup):
    result = knn_influence.mislabeled_experiment(noisy_setup, seed=0)
    ranked = result['ranked']
    assert ranked['training loss']['auprc'] == 1.0      # highest loss on exactly the flips
    # the rule's six candidates (count 1 each, ties by index) hold five of the six flips
    assert ranked['kNN rule (counts)']['precision_at_k'] == pytest.approx(5 / 6)
    assert ranked['kNN rule (counts)']['base_rate'] == pytest.approx(0.1)


def test_cv_folds_are_stratified_seeded_and_cover_every_example():
    labels = np.repeat([0, 1, 2], [10, 20, 5])
    folds = knn_influence.cv_folds(labels, 5, seed=1)
    for label, per_fold in ((0, 2), (1, 4), (2, 1)):
        assert (np.bincount(folds[labels == label], minlength=5) == per_fold).all()
    assert np.array_equal(folds, knn_influence.cv_folds(labels, 5, seed=1))
    assert not np.array_equal(folds, knn_influence.cv_folds(labels, 5, seed=2))


def test_fold_files_read_back_to_the_same_tokens(tmp_path):
    pairs = [((['A', 'man', "'", 's', 'hat', '.'], ['Not', '"', 'here', '"']), 2)]
    path = write(tmp_path / 'train.tsv', text_datasets.examples_text(
        pairs, text_datasets.SNLI_LABELS, 'pair_tsv'))
    assert text_datasets.read_eval_file(path, 'cad-snli', text_datasets.SNLI_LABELS) == pairs


def test_robustness_command_end_to_end_on_a_tiny_snli_model(tmp_path, capsys):
    import json
    import csv as csv_module
    import run_dknn
    import train_text_classifier
    verbs = ['sits', 'waits', 'sleeps']
    rng = np.random.RandomState(0)
    train = [json.dumps({'sentence1': 'a man sits outside .', 'gold_label': label,
                         'sentence2': 'a man {} outside'.format(verbs[i])})
             for i, label in enumerate(text_datasets.SNLI_LABELS) for _ in range(30)]
    (tmp_path / 'train.jsonl').write_text('\n'.join(train) + '\n')
    (tmp_path / 'test.jsonl').write_text('\n'.join(train[::10]) + '\n')
    out = tmp_path / 'run'
    train_text_classifier.main([
        '--dataset', 'snli', '--train-file', str(tmp_path / 'train.jsonl'), '--test-file',
        str(tmp_path / 'test.jsonl'), '--model', 'bow', '--unit', '8', '--embed-dim', '6',
        '--epoch', '3', '--n-calib', '9', '--min-freq', '1', '--out', str(out)])
    anli = [write(tmp_path / 'ANLI_analysis_r{}_dev.csv'.format(r), ANLI_HEADER + ''.join(
        'a man sits outside .,a man {} outside,,{},u\n'.format(verbs[i], 'enc'[i])
        for i in rng.randint(3, size=6))) for r in (1, 2)]
    hans = write(tmp_path / 'heuristics_evaluation_set.txt', '\t'.join(HANS_HEADER) + '\n' + ''.join(
        hans_line(gold, 'a man sits outside .', 'a man {} outside'.format(verb), h, h + gold[:1])
        for h in ('lexical_overlap', 'subsequence', 'constituent')
        for gold, verb in (('entailment', 'sits'), ('non-entailment', 'sleeps')) for _ in range(3)))
    tables = tmp_path / 'tables'
    for files, name in ((anli, 'anli'), ([hans], 'hans')):
        status, err = cli(scripts_module('knn_robustness').main, [
            '--model-setup', str(out), '--eval-file', *files, '--k', '5', '--out', str(tables),
            '--name', name], capsys)
        assert status == 0, err
    with open(str(tables / 'hans_table6.csv')) as f:
        table6 = list(csv_module.DictReader(f))
    assert [r['slice'] for r in table6 if r['run'] == 'run'] == \
        ['constituent', 'lexical_overlap', 'subsequence']
    assert [r['n'] for r in table6 if r['run'] == 'run'] == ['2', '2', '2']   # 6 of 18 pairs validate
    assert len([r for r in table6 if r['run'] == 'paper']) == 6
    with open(str(tables / 'anli_groups.csv')) as f:
        assert [(r['slice'], r['n']) for r in csv_module.DictReader(f)] == [('R1', '3'), ('R2', '3')]
    assert 'Produced by' in (tables / 'anli_table4.md').read_text()
    cached = out / 'knn_robustness_heuristics_evaluation_set.txt_seed0.json'
    assert cached.exists()
    run_dknn.main(['--model-setup', str(out), '--k', '5', '--eval-file', anli[0],
                   '--backend', 'faiss'])
    assert any('ANLI_analysis_r1_dev' in name for name in os.listdir(str(out)))


def test_a_limited_hans_set_is_a_balanced_sample():
    heuristics = list(np.repeat(list(eval_sets.HEURISTICS), 60))
    subcases = ['{}_{}'.format(h, i % 2) for i, h in enumerate(heuristics)]
    full = eval_sets.EvalSet('hans-like', [(([str(i)], ['x']), 'entailment') for i in range(180)],
                             heuristics, subcases, True, [])
    sample = robustness.balanced_sample(full, 30, seed=0)
    assert sample.name == 'hans-like-30' and len(sample.records) == 30
    assert sorted(np.unique(sample.subcases, return_counts=True)[1]) == [5] * 6
    assert robustness.balanced_sample(full, 500, seed=0) is full


def test_out_of_sample_outputs_are_read_back_only_for_their_model(tmp_path, monkeypatch):
    """Probabilities (0.5, 0.5) and (0.1, 0.9) at labels 0, 0: losses log 2 and log 10."""
    from deepknn.neighbors import dknn
    setup = types.SimpleNamespace(result_dir=str(tmp_path), splits=types.SimpleNamespace(
        train=[('a', 0), ('b', 0)]))
    monkeypatch.setattr(dknn, 'activation_key', lambda s: 'model A')
    knn_influence.write_oos_outputs(setup, np.array([[0.5, 0.5], [0.1, 0.9]]), 5, 0)
    oos = knn_influence.read_oos_outputs(setup)
    assert oos['folds'] == 5 and oos['labels'].tolist() == [0, 0]
    assert np.allclose(oos['losses'], [np.log(2), np.log(10)])
    monkeypatch.setattr(dknn, 'activation_key', lambda s: 'model B')   # retrained since
    assert knn_influence.read_oos_outputs(setup) is None


@pytest.mark.parametrize('kept', [{}, {'folds': 5}, {'folds': 5, 'losses': [1.0]},
                                  {'folds': 'x', 'losses': [1.0, 2.0]},
                                  {'folds': 5, 'losses': [1.0, 2.0], 'proba': [[0.5], 1]}])
def test_a_malformed_out_of_sample_file_is_one_line_naming_it(tmp_path, monkeypatch, kept):
    from deepknn.neighbors import dknn
    import json
    setup = types.SimpleNamespace(result_dir=str(tmp_path), splits=types.SimpleNamespace(
        train=[('a', 0), ('b', 0)]))
    monkeypatch.setattr(dknn, 'activation_key', lambda s: 'model A')
    (tmp_path / 'cv_oos_loss.json').write_text(json.dumps(dict(kept, key='model A')))
    with pytest.raises(UserError) as error:
        knn_influence.read_oos_outputs(setup)
    assert str(error.value) == ('{}: not the out-of-sample outputs of this run\'s 2 training '
                                'examples; run `knn_cv_loss` again to replace it'.format(
                                    tmp_path / 'cv_oos_loss.json'))


def test_a_retrain_adds_its_loss_ranking_and_cleanlabs_flagged_set():
    """Six examples, 3 of each label; example 1's label (0) is flipped from 1. The fold
    models put 0.95 on the true label everywhere: the out-of-sample loss ranks 1 first,
    and cleanlab on those probabilities flags exactly {1} (precision and recall 1)."""
    labels = np.array([0, 0, 0, 1, 1, 1])
    proba = np.array([[0.95, 0.05], [0.05, 0.95], [0.95, 0.05],
                      [0.05, 0.95], [0.05, 0.95], [0.05, 0.95]])
    oos = {'folds': 5, 'labels': labels, 'proba': proba,
           'losses': knn_influence.training_losses(proba, labels)}
    empty = {'flipped': np.array([1]), 'n_train': 6, 'methods': {}, 'ranked': {}, 'curves': {}}
    result = knn_influence.with_cross_validation(empty, oos)
    assert result['ranked']['out-of-sample loss, 5-fold retrain']['precision_at_k'] == 1.0
    flagged = result['methods']['cleanlab, 5-fold retrain']
    assert (flagged['precision'], flagged['recall'], flagged['fraction_inspected']) == (1, 1, 1 / 6)
    # cleanlab's label-quality ranking is the loss's order: one ranking, not two
    assert list(result['ranked']) == ['out-of-sample loss, 5-fold retrain']
    without_proba = knn_influence.with_cross_validation(empty, dict(oos, proba=None))
    assert list(without_proba['ranked']) == ['out-of-sample loss, 5-fold retrain']


# ---------------------------------------------------------------- in-domain ANLI halves
def anli_files(tmp_path, sizes=(6, 4, 10)):
    """ANLI CSVs of rounds 1-3 with sizes[r] pairs each, quotes and commas included."""
    labels = 'enc'
    return [write(tmp_path / 'ANLI_analysis_r{}_dev.csv'.format(r + 1), ANLI_HEADER + ''.join(
        '"A ""quoted"" context, {} {} ." ,It is {} .,,{},u\n'.format(r, n, n, labels[n % 3])
        for n in range(size))) for r, size in enumerate(sizes)]


def test_anli_halves_are_disjoint_proportional_seeded_and_read_back(tmp_path, capsys):
    anli = eval_sets.load_eval_set(files=anli_files(tmp_path))
    first, second = robustness.halves(anli, seed=0)
    assert len(first.records) == 10 and len(second.records) == 10
    assert sorted(first.groups) == ['R1'] * 3 + ['R2'] * 2 + ['R3'] * 5   # half of each round
    assert sorted(first.records + second.records) == sorted(anli.records)
    assert robustness.halves(anli, seed=0)[0].records == first.records
    assert robustness.halves(anli, seed=1)[0].records != first.records
    out = tmp_path / 'halves'
    status, err = cli(scripts_module('anli_dev_halves').main,
                      ['--data-dir', str(tmp_path), '--seed', '0', '--out', str(out)], capsys)
    assert status == 0, err
    # the held-out CSVs read back as the second half, with their rounds
    files = [str(out / 'anli-heldout-half_r{}.csv'.format(r)) for r in (1, 2, 3)]
    again = eval_sets.load_eval_set(files=files)
    assert (again.records, again.groups) == (second.records, second.groups)
    assert again.name == 'anli-heldout-half'          # what the round files share
    # the training file reads back as the first half in the pair model's own reader
    pairs = text_datasets.read_eval_file(str(out / 'train.jsonl'), 'snli', text_datasets.SNLI_LABELS)
    assert [(pair, text_datasets.SNLI_LABELS[y]) for pair, y in pairs] == \
        [(tuple(p), label) for p, label in first.records]
    # unchanged files are left alone; changed ones need --overwrite
    assert cli(scripts_module('anli_dev_halves').main,
               ['--data-dir', str(tmp_path), '--seed', '0', '--out', str(out)], capsys)[0] == 0
    status, err = cli(scripts_module('anli_dev_halves').main,
                      ['--data-dir', str(tmp_path), '--seed', '1', '--out', str(out)], capsys)
    assert status != 0 and len(err) == 1 and '--overwrite' in err[0]


def test_the_cross_validated_retrain_predicts_each_example_with_the_model_without_it(tmp_path):
    """A tiny run with flipped labels, 2 folds: each fold model trained on exactly the
    other fold's examples, every probability row sums to 1, the kept losses are
    -log p(noisy label), and the file is read back for this run."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), 'scripts'))
    import knn_cv_loss
    from deepknn.models import model_setup
    out = tmp_path / 'run'
    cli_helpers.train_tiny(tmp_path, out, 2, '--label-noise', '0.1', '--n-calib', '0')
    knn_cv_loss.main(['--model-setup', str(out / 'args.json'), '--folds', '2'])
    setup = model_setup.load_setup(str(out / 'args.json'))
    oos = knn_influence.read_oos_outputs(setup)
    n_train = len(setup.splits.train)
    folds = knn_influence.cv_folds(oos['labels'], 2, 0)
    for fold in range(2):
        fold_setup = model_setup.load_setup(str(out / 'cv_fold{}'.format(fold) / 'args.json'))
        assert len(fold_setup.splits.train) == n_train - np.sum(folds == fold)
    assert oos['proba'].shape == (n_train, 2) and np.allclose(oos['proba'].sum(axis=1), 1)
    picked = oos['proba'][np.arange(n_train), oos['labels']]
    assert np.allclose(oos['losses'], -np.log(picked))
    assert oos['labels'].tolist() == [label for _, label in setup.splits.train]


def test_the_seed_spread_is_the_mean_and_range_over_training_and_split_seeds(tmp_path, capsys):
    def row(run, model, backoff, slice_name='R1'):
        return {'run': run, 'trained on': 'cad-snli', 'encoder': 'cnn', 'evaluated on': 'anli',
                'slice': slice_name, 'model': model, 'kNN-model': backoff}
    split0 = [row('m', '30.0', '31.0'), row('m_seed1', '32.0', '32.5'), row('m_seed2', '34.0', '35.0')]
    split1 = [row('m', '31.0', '30.0'), row('m_seed1', '33.0', '34.0'), row('m_seed2', '35.0', '36.0')]
    spread, = robustness_tables.seed_spread_rows([split0, split1])
    assert (spread['model run'], spread['training seeds'], spread['split seeds']) == ('m', 3, 2)
    assert spread['model'] == '32.5 [30.0, 35.0]'                      # (30+32+34+31+33+35)/6
    assert spread['kNN-model'] == '33.1 [30.0, 36.0]'                  # 198.5 / 6 = 33.08
    assert spread['kNN - model'] == '0.6 [-1.0, 1.0]' and spread['kNN - model sign'] == 'mixed'
    one_sign, = robustness_tables.seed_spread_rows([split0])
    assert one_sign['kNN - model sign'] == '+'
    for seed, rows in enumerate((split0, split1)):
        with open(str(tmp_path / 'split{}_table4.csv'.format(seed)), 'w', newline='') as f:
            fields = [k for k in rows[0] if k != 'slice']
            writer = csv.DictWriter(f, fields, extrasaction='ignore')
            writer.writeheader()
            writer.writerows(rows + [dict(row('paper', '', ''), **{'run': 'paper'})])
    script = cli_helpers.load_script('scripts/robustness_seed_spread.py')
    script.main(['--table', str(tmp_path / 'split0_table4.csv'), str(tmp_path / 'split1_table4.csv'),
                 '--out', str(tmp_path), '--name', 'spread'])
    text = (tmp_path / 'spread.md').read_text()
    assert '| m | cad-snli | cnn | anli | all | 3 | 2 | 32.5 [30.0, 35.0] |' in text
