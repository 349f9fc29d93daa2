"""The shift study: measured.py's rows against scikit-learn on hand-made studies, the sets'
rules, and scripts/trust_under_shift.py end to end on a tiny trained run."""
import csv
import os

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from cli_helpers import cli, load_script, train_tiny
from deepknn.models import model_setup
from deepknn.shift import measured, sets as sets_lib, study as study_lib


def fake_study(scores_test, correct_test, scores_other):
    """A StudyRun of one scorer 'msp' on a labelled test set and an other-task set."""
    n = len(scores_test)
    gold = np.zeros(n, dtype=np.int64)
    prediction = np.where(correct_test, 0, 1)
    test = study_lib.SetResult(sets_lib.ShiftSet('test', sets_lib.IN_DISTRIBUTION,
                                                 [None] * n, gold),
                               prediction, {'msp': np.asarray(scores_test, float)}, {}, None, None)
    other = study_lib.SetResult(sets_lib.ShiftSet('trec', sets_lib.OTHER_TASK,
                                                  [None] * len(scores_other), None),
                                np.zeros(len(scores_other), np.int64),
                                {'msp': np.asarray(scores_other, float)}, {}, None, None)
    return study_lib.StudyRun('run', ['msp'], None, None, None, 1.0, [], [], [test, other])


def test_misclassification_and_ood_rows_are_scikit_learns_aurocs():
    rng = np.random.default_rng(0)
    scores, correct = rng.random(60), rng.random(60) < 0.7
    other = rng.random(40) * 0.8
    study = fake_study(scores, correct, other)
    rows = {(r['set'], r['measure']): r for r in
            measured.misclassification_rows(study, 50) + measured.ood_rows(study, 50)}
    assert rows['test', 'auroc']['value'] == pytest.approx(roc_auc_score(correct, scores))
    assert rows['test', 'aupr_error']['n'] == 60
    inside = np.r_[np.ones(60, bool), np.zeros(40, bool)]
    assert rows['trec', 'ood_auroc']['value'] == pytest.approx(
        roc_auc_score(inside, np.r_[scores, other]))
    assert rows['test', 'auroc']['low'] <= rows['test', 'auroc']['value'] \
        <= rows['test', 'auroc']['high']
    assert ('trec', 'auroc') not in rows       # no labels: no misclassification rows


def test_hans_like_correctness_is_read_in_the_gold_labels_space():
    hans = sets_lib.ShiftSet('hans-like', sets_lib.SAME_TASK, [None] * 4,
                             np.array([0, 1, 1, 0]), collapse=np.array([0, 1, 1]))
    # model labels: entailment, neutral, contradiction
    assert hans.correct(np.array([0, 2, 1, 1])).tolist() == [True, True, True, False]


def test_a_sample_is_seeded_and_keeps_file_order():
    examples = list(range(100))
    sample = sets_lib.sampled(examples, 10)
    assert sample == sets_lib.sampled(examples, 10) == sorted(sample) and len(sample) == 10
    assert sets_lib.sampled(examples, 200) == examples


def test_the_command_writes_tables_whose_numbers_are_the_models(tmp_path, capsys):
    train, test = train_tiny(tmp_path, tmp_path / 'run')
    other = tmp_path / 'other.txt'
    other.write_text('what is the capital of france ?\nhow many legs has a spider ?\n' * 10)
    script = load_script('scripts/trust_under_shift.py')
    status, err = cli(script.main, [
        '--model-setup', str(tmp_path / 'run' / 'args.json'), '--k', '5', '--backend',
        'kdtree', '--eval-file', test, '--unlabelled-file', str(other), '--n-resamples', '20',
        '--out', str(tmp_path / 'shift'), '--name', 'tiny'], capsys)
    assert status == 0, err
    for suffix in ('.md', '.csv', '_seeds.md', '_seeds.csv', '_risk_coverage.png',
                   '_auroc.png', '_coverage.png'):
        assert os.path.getsize(tmp_path / 'shift' / ('tiny' + suffix)) > 0
    with open(tmp_path / 'shift' / 'tiny.csv', newline='') as f:
        rows = {(r['set'], r['scorer'], r['measure']): r for r in csv.DictReader(f)}
    setup = model_setup.load_setup(str(tmp_path / 'run' / 'args.json'))
    logits = setup.model.predict_logits([x for x, _ in setup.encode(setup.splits.test)])
    gold = np.array([y for _, y in setup.splits.test])
    correct = logits.argmax(axis=1) == gold
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    msp = (probabilities / probabilities.sum(axis=1, keepdims=True)).max(axis=1)
    if 0 < correct.sum() < len(correct):
        assert float(rows['test', 'msp', 'auroc']['value']) == pytest.approx(
            roc_auc_score(correct, msp), abs=1e-9)
    assert ('file-other', 'msp', 'ood_auroc') in rows
    assert ('file-test', 'dknn-standard', 'coverage@alpha=0.1') in rows
    assert os.path.exists(tmp_path / 'run' / 'shift_outputs_test.npz')   # resumable


def test_a_missing_file_is_one_line_before_anything_loads(tmp_path, capsys):
    train_tiny(tmp_path, tmp_path / 'run')
    script = load_script('scripts/trust_under_shift.py')
    status, err = cli(script.main, ['--model-setup', str(tmp_path / 'run' / 'args.json'),
                                    '--unlabelled-file', str(tmp_path / 'nope.txt'),
                                    '--out', str(tmp_path / 'shift')], capsys)
    assert status != 0 and len(err) == 1 and '--unlabelled-file' in err[0]
    assert not os.path.exists(tmp_path / 'shift')


def test_the_summary_names_the_best_scorer_and_how_credibility_fares():
    from deepknn.reports import shift_report
    verdict = shift_report.SEED_COLUMNS[-1]
    rows = [{'set': 'cr', 'role': 'same', 'measure': 'auroc', 'scorer': s, 'mean': m,
             'min': m, 'max': m, 'runs': '3', verdict: v}
            for s, m, v in (('msp', '0.600', ''), ('dknn-credibility', '0.550', '0 / 2 / 1'),
                            ('knn-sun-k50', '0.640', '1 / 0 / 2'))]
    row, = shift_report.summary_rows({'sst2_cnn': rows})
    assert (row['best scorer'], row['best vs msp'], row['credibility vs msp']) == (
        'knn-sun-k50', '1 / 0 / 2', '0 / 2 / 1')
    assert row['msp'] == '0.600 [0.600, 0.600]'


def test_the_conformal_summary_spreads_each_measure_over_the_runs():
    from deepknn.reports import shift_report
    rows = [{'set': 'cr', 'scorer': 'dknn-standard', 'measure': 'coverage@alpha=0.1',
             'value': v, 'n': '100', 'run': r} for v, r in (('0.8', 'a'), ('0.9', 'b'))]
    rows.append(dict(rows[0], measure='auroc'))      # not a conformal measure: left out
    row, = shift_report.conformal_summary_rows({'sst2_cnn': rows})
    assert row['coverage@alpha=0.1'] == '0.850 [0.800, 0.900]' and row['runs'] == 2
