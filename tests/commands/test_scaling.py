"""Temperature scaling, ECE, reliability bins and the reliability diagram."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from deepknn.reports import plots
from deepknn.evaluation import calibration
from deepknn.cli import command_line_message
from nlp_utils import UserError

from cli_helpers import ROOT
REPO = ROOT


def sample_labels(logits, temperature, seed):
    """Labels drawn from softmax(logits / temperature), one per row."""
    probs = calibration.softmax(logits, temperature)
    uniform = np.random.RandomState(seed).rand(len(probs), 1)
    # Inverse-CDF sampling; the min() guards against a cumulative sum of 0.9999999.
    return np.minimum((probs.cumsum(axis=1) < uniform).sum(axis=1), probs.shape[1] - 1)


def synthetic(temperature, n=20000, n_classes=5, seed=0):
    logits = np.random.RandomState(seed).normal(0, 3, (n, n_classes))
    return logits, sample_labels(logits, temperature, seed + 1)


# ---------------------------------------------------------------- softmax and NLL
def test_softmax_rows_sum_to_one_and_ignore_constant_shift():
    logits = np.random.RandomState(0).normal(0, 10, (50, 7))
    probs = calibration.softmax(logits, 0.7)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(calibration.softmax(logits + 1000.0, 0.7), probs, atol=1e-12)
    assert np.all(np.isfinite(calibration.softmax(logits * 1e4)))


def test_softmax_and_nll_match_hand_values():
    logits = np.array([[np.log(3.0), 0.0]])
    np.testing.assert_allclose(calibration.softmax(logits), [[0.75, 0.25]])
    # T = 2 halves the log-odds: probabilities sqrt(3) : 1.
    np.testing.assert_allclose(calibration.softmax(logits, 2.0)[0, 0], np.sqrt(3) / (np.sqrt(3) + 1))
    assert calibration.nll(logits, [1]) == pytest.approx(np.log(4.0))


# ---------------------------------------------------------------- fitting T
@pytest.mark.parametrize('true_temperature', [0.5, 2.0])
def test_fit_temperature_recovers_the_generating_temperature(true_temperature):
    logits, labels = synthetic(true_temperature)
    fitted = calibration.fit_temperature(logits, labels)
    assert fitted == pytest.approx(true_temperature, rel=0.04)
    assert calibration.nll(logits, labels, fitted) <= calibration.nll(logits, labels)


def test_fit_temperature_is_a_precise_deterministic_minimum():
    logits, labels = synthetic(1.6, n=3000, seed=5)
    fitted = calibration.fit_temperature(logits, labels)
    assert calibration.fit_temperature(logits, labels) == fitted
    best = calibration.nll(logits, labels, fitted)
    for step in (1 - 1e-3, 1 + 1e-3):
        assert best <= calibration.nll(logits, labels, fitted * step)


def test_fit_temperature_sharpens_underconfident_logits():
    logits, labels = synthetic(1.0, n=5000, seed=2)
    # Dividing the logits by 3 is undone by T = 1/3.
    assert calibration.fit_temperature(logits / 3.0, labels) == pytest.approx(1 / 3.0, rel=0.05)


# ---------------------------------------------------------------- ECE and bins
def test_ece_on_a_hand_made_example():
    probs = np.array([[0.95, 0.05],   # conf 0.95, bin 14, correct
                      [0.90, 0.10],   # conf 0.90, bin 13, correct
                      [0.09, 0.91],   # conf 0.91, bin 13, wrong
                      [0.30, 0.70],   # conf 0.70, bin 10, correct
                      [0.62, 0.38]])  # conf 0.62, bin 9, wrong
    labels = np.array([0, 0, 0, 1, 1])
    expected = (abs(1 - 0.95) + 2 * abs(0.5 - 0.905) + abs(1 - 0.70) + abs(0 - 0.62)) / 5
    assert calibration.expected_calibration_error(probs, labels) == pytest.approx(expected)


def test_reliability_bins_contents():
    confidences = np.array([0.0, 0.2, 0.5, 0.75, 1.0])
    correct = np.array([True, False, True, True, False])
    bins = calibration.reliability_bins(confidences, correct, n_bins=4)
    np.testing.assert_allclose(bins['bin_lower'], [0, 0.25, 0.5, 0.75])
    np.testing.assert_allclose(bins['bin_upper'], [0.25, 0.5, 0.75, 1.0])
    # Bins are (lower, upper]: 0.5 falls in the second bin, 0.75 in the third, 0 in the first.
    np.testing.assert_array_equal(bins['count'], [2, 1, 1, 1])
    np.testing.assert_allclose(bins['accuracy'], [0.5, 1.0, 1.0, 0.0])
    np.testing.assert_allclose(bins['mean_confidence'], [0.1, 0.5, 0.75, 1.0])


def test_reliability_bins_counts_sum_to_n_and_empty_bins_are_nan():
    confidences = np.random.RandomState(3).uniform(0.5, 1.0, 1000)
    bins = calibration.reliability_bins(confidences, confidences > 0.7)
    assert bins['count'].sum() == 1000
    assert len(bins['count']) == 15
    empty = bins['count'] == 0
    assert empty[:7].all()  # nothing below 0.5
    assert np.isnan(bins['accuracy'][empty]).all()
    assert not np.isnan(bins['accuracy'][~empty]).any()


def test_ece_is_near_zero_when_calibrated_and_large_when_not():
    logits, labels = synthetic(1.0, n=50000, seed=7)
    calibrated = calibration.expected_calibration_error(calibration.softmax(logits), labels)
    overconfident = calibration.expected_calibration_error(calibration.softmax(logits, 0.3), labels)
    assert calibrated < 0.01
    assert overconfident > 0.05


def test_temperature_scaling_reduces_ece_and_nll():
    logits, labels = synthetic(2.5, n=10000, seed=11)
    summary = calibration.calibration_summary(logits, labels)
    assert summary['nll_after'] < summary['nll_before']
    assert summary['ece_after'] < summary['ece_before'] / 3
    assert summary['n_calib'] == 10000 and summary['n_bins'] == 15


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize('logits, labels', [
    (np.zeros((0, 3)), np.zeros(0, dtype=int)),             # empty
    (np.zeros((2, 3)), np.array([0, 3])),                   # label out of range
    (np.zeros((2, 3)), np.array([-1, 0])),                  # negative label
    (np.array([[0.0, np.nan], [1.0, 2.0]]), np.array([0, 1])),  # NaN logit
    (np.zeros((2, 1)), np.array([0, 0])),                   # one class
    (np.zeros((2, 3)), np.array([0, 1, 2])),                # length mismatch
    (np.zeros((2, 3)), np.array([0.0, 1.0])),               # float labels
])
def test_bad_inputs_raise_user_error(logits, labels):
    for call in (calibration.fit_temperature, calibration.nll, calibration.expected_calibration_error):
        with pytest.raises(UserError) as info:
            call(logits, labels)
        assert '\n' not in str(info.value)


def test_bad_confidences_and_temperatures_raise_user_error():
    with pytest.raises(UserError):
        calibration.reliability_bins(np.array([]), np.array([], dtype=bool))
    with pytest.raises(UserError):
        calibration.reliability_bins(np.array([0.5, 1.5]), np.array([True, False]))
    with pytest.raises(UserError):
        calibration.softmax(np.zeros((2, 2)), temperature=0.0)


# ---------------------------------------------------------------- files
def test_reliability_diagram_writes_a_png(tmp_path):
    rng = np.random.RandomState(0)
    confidences = rng.uniform(0.3, 1.0, 500)
    path = tmp_path / 'sub' / 'diagram.png'
    plots.save_figure(plots.reliability_figure([
        calibration.reliability_curve('softmax', confidences, rng.rand(500) < confidences),
        calibration.reliability_curve('credibility', confidences ** 2, rng.rand(500) < confidences),
    ], 'test'), str(path))
    assert path.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert path.stat().st_size > 1000
    assert os.listdir(str(tmp_path / 'sub')) == ['diagram.png']  # no temp file left


def test_load_temperature_round_trip_and_missing_file(tmp_path):
    with pytest.raises(UserError) as info:
        calibration.load_temperature(str(tmp_path))
    expected = 'no temperature.json in {0}; run `scaling` `model_setup` {0}/args.json first'
    assert str(info.value) == expected.format(tmp_path)   # a Python caller's view
    shown = 'no temperature.json in {0}; run python scaling.py --model-setup {0}/args.json first'
    assert command_line_message(info.value) == shown.format(tmp_path)
    (tmp_path / 'temperature.json').write_text(json.dumps({'temperature': 1.7}))
    assert calibration.load_temperature(str(tmp_path)) == 1.7
    (tmp_path / 'temperature.json').write_text(json.dumps({'temperature': -1}))
    with pytest.raises(UserError):
        calibration.load_temperature(str(tmp_path))


FAKE_MODEL_SETUP = '''
import types
import numpy as np

def load_setup(path, gpu=-1, data_dir=None):
    rng = np.random.RandomState(0)
    logits = rng.normal(0, 3, ({n}, 3)).astype(np.float32)
    labels = logits.argmax(axis=1)
    flip = rng.rand({n}) < 0.3  # overconfident: 30% of labels disagree with the argmax
    labels[flip] = rng.randint(0, 3, flip.sum())
    calib = [(np.array([i], dtype=np.int32), int(y)) for i, y in enumerate(labels)]
    model = types.SimpleNamespace(
        predict_logits=lambda xs, batchsize=64: logits[[int(x[0]) for x in xs]])
    return types.SimpleNamespace(
        result_dir={result_dir!r}, model=model, encode=lambda examples: examples,
        evaluation_examples=lambda split, eval_file, skip=False: (split, calib if split == 'calib' else []))
'''


# Runs scaling.py as __main__ with the fake module standing in for model_setup
# (the real one sits beside scaling.py and would win on sys.path).
RUNNER = '''
import runpy
import sys
import fake_model_setup
sys.modules['deepknn.models.model_setup'] = fake_model_setup
sys.argv = [{script!r}] + sys.argv[1:]
runpy.run_path({script!r}, run_name='__main__')
'''


def run_cli_with_fake_setup(tmp_path, n):
    result_dir = tmp_path / 'result'
    result_dir.mkdir(exist_ok=True)
    (result_dir / 'args.json').write_text('{}')   # a run is there; the fake loads it
    fake_dir = tmp_path / 'fake'
    fake_dir.mkdir()
    (fake_dir / 'fake_model_setup.py').write_text(
        FAKE_MODEL_SETUP.format(n=n, result_dir=str(result_dir)))
    (fake_dir / 'run.py').write_text(RUNNER.format(script=os.path.join(REPO, 'scaling.py')))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake_dir), REPO]))
    process = subprocess.run(
        [sys.executable, str(fake_dir / 'run.py'), '--model-setup', str(result_dir / 'args.json')],
        env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    return process, result_dir


def test_cli_writes_temperature_json_and_diagram(tmp_path):
    process, result_dir = run_cli_with_fake_setup(tmp_path, n=2000)
    assert process.returncode == 0, process.stderr
    saved = json.loads((result_dir / 'temperature.json').read_text())
    assert set(saved) == {'temperature', 'nll_before', 'nll_after', 'ece_before',
                          'ece_after', 'n_calib', 'n_bins'}
    assert saved['temperature'] > 1 and saved['nll_after'] < saved['nll_before']
    assert saved['n_calib'] == 2000 and saved['n_bins'] == 15
    assert (result_dir / 'reliability_temperature.png').stat().st_size > 1000
    assert calibration.load_temperature(str(result_dir)) == saved['temperature']


def test_temperature_json_and_its_diagram_are_replaced_together_or_not_at_all(tmp_path):
    """The diagram's path cannot be replaced (a folder took it): the new temperature.json,
    renamed first, is put back, so the folder never holds a T without its diagram."""
    result_dir = tmp_path / 'result'
    result_dir.mkdir()
    (result_dir / 'temperature.json').write_text('{"temperature": 1.5}\n')
    (result_dir / 'reliability_temperature.png').mkdir()
    process, _ = run_cli_with_fake_setup(tmp_path, n=2000)
    assert process.returncode == 2, process.stderr
    assert process.stderr.strip().splitlines()[-1].startswith('error: cannot use ')
    assert (result_dir / 'temperature.json').read_text() == '{"temperature": 1.5}\n'
    assert sorted(os.listdir(str(result_dir))) == ['args.json', 'reliability_temperature.png',
                                                   'temperature.json']   # no temporaries


def test_cli_refuses_an_empty_calibration_split(tmp_path):
    process, result_dir = run_cli_with_fake_setup(tmp_path, n=0)
    assert process.returncode == 2
    assert '--n-calib' in process.stderr and len(process.stderr.strip().splitlines()) == 1
    assert 'the calib split of' in process.stderr
    assert not (result_dir / 'temperature.json').exists()


def test_temperature_at_the_first_bound_widens_the_search():
    # Separable logits whose NLL keeps falling as T shrinks: the optimum lies below
    # e^-5; the wider range finds a point in its interior or warns at its edge.
    logits = np.array([[0.0, 1e-3], [1e-3, 0.0]] * 10)
    labels = np.array([1, 0] * 10)
    with pytest.warns(UserWarning, match='lies at the edge of the search range'):
        temperature = calibration.fit_temperature(logits, labels)
    assert temperature < np.exp(-5.0)   # beyond the first range: it was widened


def test_temperature_inside_the_range_gives_no_warning():
    rng = np.random.RandomState(0)
    logits = rng.normal(0, 3, (200, 3))
    labels = np.where(rng.rand(200) < 0.7, logits.argmax(axis=1), rng.randint(0, 3, 200))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert np.exp(-5) < calibration.fit_temperature(logits, labels) < np.exp(5)
