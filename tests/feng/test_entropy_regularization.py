"""entropy_regularization and the two CLIs end to end on a tiny trained CNN."""
import json
import os
import shutil
import subprocess

import chainer
import numpy as np
import pytest

import cli_helpers
from deepknn.cli import command_line_message
from deepknn.feng import entropy_regularization as er
from deepknn.feng import measures
import paper_results
import finetune_entropy
from deepknn.models import model_setup
import nlp_utils
import reduce_inputs
from deepknn.storage import result_folder
from nlp_utils import UserError
from tests.commands.test_end_to_end import train
from tests.commands.test_interpretations import VOCAB, make_model, random_sentences


def test_entropy_matches_hand_computation_and_its_gradient_raises_entropy():
    logits = np.array([[2.0, -1.0, 0.5], [0.1, 0.1, 3.0]], dtype=np.float64)
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(er.entropy(logits).array, -(p * np.log(p)).sum(axis=1))
    # The fine-tuning step minimises -lambda * mean entropy: compare its gradient with
    # central finite differences, then check that a step against it raises the entropy.
    lam, eps = 0.7, 1e-6
    variable = chainer.Variable(logits.copy())
    loss = -lam * chainer.functions.mean(er.entropy(variable))
    loss.backward()
    numeric = np.zeros_like(logits)
    for index in np.ndindex(logits.shape):
        shifted = [logits.copy(), logits.copy()]
        shifted[0][index] += eps
        shifted[1][index] -= eps
        values = [-lam * er.entropy(s).array.mean() for s in shifted]
        numeric[index] = (values[0] - values[1]) / (2 * eps)
    np.testing.assert_allclose(variable.grad, numeric, atol=1e-6)
    stepped = logits - 0.1 * variable.grad
    assert er.entropy(stepped).array.mean() > er.entropy(logits).array.mean()


def test_finetuning_raises_entropy_on_reduced_inputs():
    # The first word decides the label, so plain NLL makes the model confident on the
    # one-word reduced inputs; the same run with lambda > 0 must leave them uncertain.
    sentences = random_sentences(90, seed=11)
    train_set = [(nlp_utils.to_ids(s, VOCAB), VOCAB[s[0]] % 3) for s in sentences]
    reduced = [nlp_utils.to_ids(s[:1], VOCAB) for s in sentences]
    entropies = {}
    for lam in (0.0, 2.0):
        model = make_model()
        history = er.finetune(model, train_set, reduced, lam=lam, lr=1e-2, epochs=8,
                              batchsize=16, progress=False)
        entropies[lam] = er.entropy(model.predict_logits(reduced)).array.mean()
        assert len(history) == 8 and history[-1]['nll'] < history[0]['nll']
    assert entropies[0.0] < 0.9 * np.log(3) and entropies[2.0] > entropies[0.0] + 0.15


def test_negative_lambda_and_empty_reduced_set_are_user_errors():
    with pytest.raises(UserError, match='lambda must be >= 0'):
        er.check_lambda(-0.1)
    with pytest.raises(UserError, match='reduced training set is empty'):
        er.finetune(make_model(), [], [], progress=False)


# ---------------------------------------------------------------- CLIs end to end
@pytest.fixture(scope='module')
def parent(tmp_path_factory):
    folder = tmp_path_factory.mktemp('data')
    from tests.commands.test_end_to_end import synthetic_lines
    (folder / 'train.txt').write_text(synthetic_lines(200, 0))
    (folder / 'test.txt').write_text(synthetic_lines(40, 1))
    out = tmp_path_factory.mktemp('results') / 'custom_cnn'
    train(out, (str(folder / 'train.txt'), str(folder / 'test.txt')), '--epoch', '6')
    return out, folder


def test_finetuned_folder_loads_like_any_result_folder(parent, tmp_path):
    out, _ = parent
    finetuned = tmp_path / 'custom_cnn_entropy'
    argv = ['--model-setup', str(out / 'args.json'), '--out', str(finetuned), '--epochs', '1',
            '--reduce-limit', '30', '--lambda', '0.5']
    finetune_entropy.main(argv)
    setup = model_setup.load_setup(str(finetuned / 'args.json'))
    config = json.loads((finetuned / 'args.json').read_text())
    assert config['entropy_lambda'] == 0.5
    assert os.path.normpath(os.path.join(str(finetuned), config['finetuned_from'])) == str(out)
    for name in ('vocab.json', 'calib.json'):
        assert (finetuned / name).read_bytes() == (out / name).read_bytes()
    parent_setup = model_setup.load_setup(str(out / 'args.json'))
    inputs = [x for x, _ in parent_setup.test]
    assert not np.allclose(setup.model.predict_logits(inputs),
                           parent_setup.model.predict_logits(inputs))   # it did change
    cache = out / 'reduced_train_gradient_beam5_limit30.json'
    assert len(json.loads(cache.read_text())['inputs']) >= 30
    with pytest.raises(UserError) as error:
        finetune_entropy.main(argv)        # an earlier fine-tune is kept unless asked
    assert 'already exists; pass --force' in command_line_message(error.value)
    finetune_entropy.main(argv + ['--force'])   # ... and replaced when asked
    assert not [n for n in os.listdir(str(tmp_path)) if n.startswith('.')]   # no staging left
    # every other script reads it: input reduction with all importances and the DkNN
    reduce_inputs.main(['--model-setup', str(finetuned / 'args.json'), '--split', 'test',
                        '--importance', 'gradient,conformity', '--k', '5', '--limit', '6',
                        '--out', str(tmp_path)])
    jsonl = tmp_path / 'reduction_custom_cnn_entropy_test_conformity.jsonl'
    lines = jsonl.read_text().split('\n')
    records = [json.loads(line) for line in lines if line]
    assert len(records) == 6 and all(r['reduced_length'] >= 1 for r in records)
    assert all(r['dknn_prediction_after'] == r['prediction'] for r in records)
    html = (tmp_path / 'reduction_custom_cnn_entropy_test_gradient.html').read_text()
    assert '<script' not in html and 'Input reduction' in html


def test_an_interrupted_training_set_reduction_resumes_from_its_last_step(
        parent, monkeypatch):
    out, _ = parent
    setup = model_setup.load_setup(str(out / 'args.json'))
    partial = out / 'reduced_train_gradient_beam5_limit25.partial.json'
    whole = er.reduced_training_set(setup, limit=25)      # uninterrupted (and now cached)
    os.remove(str(out / 'reduced_train_gradient_beam5_limit25.json'))
    assert not partial.exists()                           # removed once the cache is written
    save = er.ReductionCheckpoint.save

    def save_then_stop(self, state):
        save(self, state)
        raise KeyboardInterrupt                           # the session ends after a step

    monkeypatch.setattr(er.ReductionCheckpoint, 'save', save_then_stop)
    with pytest.raises(KeyboardInterrupt, match='stopped; its last step is saved in .*'
                                                'limit25.partial.json, and the same command '
                                                'resumes from it'):
        er.reduced_training_set(setup, limit=25)
    monkeypatch.undo()
    left = len(json.loads(partial.read_text())['state']['active'])
    assert 0 < left < 25
    steps = []
    monkeypatch.setattr(er.input_reduction.InputReducer, '_start',
                        lambda *a: pytest.fail('a resumed reduction starts over'))
    monkeypatch.setattr(er.ReductionCheckpoint, 'save', lambda self, state: steps.append(1))
    assert er.reduced_training_set(setup, limit=25) == whole
    assert steps and not partial.exists()
    monkeypatch.undo()
    other = er.ReductionCheckpoint(str(partial), 'another model', [2] * 25)
    other.save(er.input_reduction.BeamState([0], [1.0], [[(0, 1)]], [[1.0]], [0]))
    assert er.ReductionCheckpoint(str(partial), 'this model', [2] * 25).load() is None
    os.remove(str(partial))


@pytest.mark.parametrize('damage, problem', [
    (lambda state: state.pop('active'), 'expected the fields'),
    (lambda state: state.update(active=[2]), 'active names an example outside 0..1'),
    (lambda state: state['beams'][1].append([0, 7]), 'beams / beam_scores of example 1 do not match'),
    (lambda state: state['beams'][0][0].append(3), 'beams of example 0 hold positions outside'),
    (lambda state: state.update(first_scores=[0.5, 'x']), 'first_scores is not a list of numbers'),
    (lambda state: state.update(targets=[0]), 'targets is not a list of 2 entries')])
def test_a_damaged_reduction_state_is_a_one_line_error(tmp_path, damage, problem):
    """Two examples of 3 and 2 words; a saved state round-trips, a damaged one is named."""
    path = str(tmp_path / 'reduced_train.partial.json')
    checkpoint = er.ReductionCheckpoint(path, 'model', [3, 2])
    state = er.input_reduction.BeamState([1, 0], [0.9, 0.6], [[(0, 2), (1, 2)], [(0, 1)]],
                                         [[0.8, 0.7], [0.6]], [0])
    checkpoint.save(state)
    assert checkpoint.load() == state
    saved = json.loads(open(path).read())
    damage(saved['state'])
    with open(path, 'w') as f:
        json.dump(saved, f)
    with pytest.raises(UserError, match='reduced_train.partial.json is damaged \\({}.*delete '
                                        'it'.format(problem)):
        checkpoint.load()


def test_a_damaged_reduced_training_set_names_the_file():
    assert er.cached_inputs({'inputs': [['a', 'b'], ['c']]}, 'f.json', False) == [['a', 'b'],
                                                                                   ['c']]
    assert er.cached_inputs({'inputs': [[['p'], ['h']]]}, 'f.json', True) == [(['p'], ['h'])]
    for inputs, pair in (([['a'], 'b'], False), ([['a', 'b']], True), (None, False),
                         ([[['p'], ['h', 3]]], True)):
        with pytest.raises(UserError, match='reduced training set f.json holds no list of '
                                            '.*delete it'):
            er.cached_inputs({'inputs': inputs}, 'f.json', pair)


def test_entropy_table_reuses_each_models_measurements_until_the_model_changes(
        parent, tmp_path, monkeypatch):
    out, _ = parent
    results = tmp_path / 'results'
    results.mkdir()
    shutil.copytree(str(out), str(results / 'custom_cnn'))
    finetune_entropy.main(['--model-setup', str(results / 'custom_cnn' / 'args.json'),
                           '--epochs', '1', '--reduce-limit', '20'])
    argv = ['--results', str(results), '--out', str(tmp_path), 'entropy', '--runs', 'custom_cnn',
            '--limit', '8', '--k', '5', '--name', 'table']
    paper_results.main(argv)
    table = (tmp_path / 'table.csv').read_text()
    assert table.startswith('run,dev_accuracy_before,dev_accuracy_after')
    digests = [cli_helpers.npz_digest(results / name / 'best_model.npz')
               for name in ('custom_cnn', 'custom_cnn_entropy')]
    assert digests[0] != digests[1]
    assert '{} (parameters sha256 {}); {} (parameters sha256 {}).'.format(
        os.path.relpath(str(results / 'custom_cnn')), digests[0],
        os.path.relpath(str(results / 'custom_cnn_entropy')), digests[1]) in (
        tmp_path / 'table.md').read_text()                 # the models each row was read from
    measured = []
    real_measure = measures.measure
    monkeypatch.setattr(measures, 'measure',
                        lambda setup, settings: measured.append(setup.result_dir) or
                        real_measure(setup, settings))
    paper_results.main(argv)                       # both models cached: nothing measured
    assert measured == [] and (tmp_path / 'table.csv').read_text() == table
    argv[argv.index('--limit') + 1] = '6'
    paper_results.main(argv)                       # other settings: both measured again
    assert len(measured) == 2
    finetune_entropy.main(['--model-setup', str(results / 'custom_cnn' / 'args.json'),
                           '--epochs', '1', '--reduce-limit', '20', '--lr', '0.01', '--force'])
    measured.clear()
    paper_results.main(argv)                       # a new fine-tuned model: only it
    assert measured == [str(results / 'custom_cnn_entropy')]
    measured.clear()
    argv[argv.index('--limit') + 1] = '8'            # the parent kept its first entry too
    paper_results.main(argv)
    assert measured == [str(results / 'custom_cnn_entropy')]


def test_foreign_folder_is_never_overwritten(parent, tmp_path):
    out, _ = parent
    foreign = tmp_path / 'mine'
    foreign.mkdir()
    (foreign / 'keep.txt').write_text('x')
    argv = ['--model-setup', str(out / 'args.json'), '--out', str(foreign)]
    with pytest.raises(UserError, match='already exists; pass `force`'):
        finetune_entropy.main(argv)
    with pytest.raises(UserError, match='not a result folder made by this tool'):
        finetune_entropy.main(argv + ['--force'])
    assert os.listdir(str(foreign)) == ['keep.txt']


def test_finetune_never_replaces_another_run_or_its_parent(parent, tmp_path):
    """The data-loss defects: --out naming the parent itself, a folder inside it or
    another trained run (a marked result folder) are refused, --force or not, and the
    runs stay byte-identical."""
    out, folder = parent
    other = tmp_path / 'other_run'
    train(other, (str(folder / 'train.txt'), str(folder / 'test.txt')), '--epoch', '1')
    before = {p: p.read_bytes() for run in (out, other) for p in run.iterdir() if p.is_file()}
    base = ['--model-setup', str(out / 'args.json'), '--epochs', '1', '--reduce-limit', '5']
    for target, force, message in ((out, ['--force'], 'parent run'),
                                   (out / 'inside', [], 'parent run'),
                                   (other, [], 'already exists; pass `force`')):
        with pytest.raises(UserError, match=message):
            finetune_entropy.main(base + ['--out', str(target)] + force)
    assert {p: p.read_bytes() for p in before} == before


def test_a_second_finetune_into_the_same_folder_is_refused_from_the_start(parent, tmp_path):
    """The lock of --out is held for the whole run (reduction included), so a twin
    run is refused at once instead of both reporting success."""
    out, _ = parent
    target = tmp_path / 'ft'
    with result_folder.lock(str(target), 'another fine-tune'):
        with pytest.raises(UserError, match='in use by .*another fine-tune'):
            finetune_entropy.main(['--model-setup', str(out / 'args.json'), '--out',
                                   str(target)])
    assert not target.exists()


@pytest.mark.parametrize('lr', ['inf', '1e6'])
def test_a_diverging_finetune_writes_nothing(parent, tmp_path, lr):
    out, _ = parent
    target = tmp_path / 'ft'
    argv = ['--model-setup', str(out / 'args.json'), '--out', str(target), '--epochs', '2',
            '--reduce-limit', '30', '--lr', lr]
    with pytest.raises(UserError, match='finite|diverged'):
        finetune_entropy.main(argv)
    assert not target.exists() and not [n for n in os.listdir(str(tmp_path))
                                        if n.startswith('.')]


@pytest.mark.parametrize('flags,message', [(['--lambda', '-1'], '--lambda must be >= 0'),
                                           (['--beam', '0'], '--beam 1 or more'),
                                           (['--lr', '0'], '--lr must be a finite number > 0')])
def test_finetune_bad_flags(parent, flags, message):
    out, _ = parent
    with pytest.raises(UserError) as error:
        finetune_entropy.main(['--model-setup', str(out / 'args.json')] + flags)
    assert message in command_line_message(error.value)


def test_reduce_inputs_locks_its_outputs_and_removes_what_a_killed_run_left(parent, tmp_path):
    out, _ = parent
    dead = subprocess.Popen(['true'])                # a pid that no longer runs
    dead.wait()
    left = tmp_path / '.tmp-{}-abcd1234reduction_custom_cnn_test_gradient.html'.format(dead.pid)
    # A killed writer's temporary of other outputs in the same --out folder: swept too
    # (issue 44: a killed interpretations.py --out DIR left them there for good).
    other = tmp_path / '.tmp-{}-abcd1234my_page.html'.format(dead.pid)
    left.write_text('half a page')
    other.write_text('half another page')
    argv = ['--model-setup', str(out / 'args.json'), '--split', 'test', '--importance',
            'gradient', '--limit', '2', '--out', str(tmp_path)]
    stem = str(tmp_path / 'reduction_custom_cnn_test')
    with result_folder.lock_outputs(stem, [], 'another reduce_inputs.py'):
        with pytest.raises(UserError, match='reduction_custom_cnn_test.* is in use by pid'):
            reduce_inputs.main(argv)
    assert left.exists() and not (tmp_path / 'reduction_custom_cnn_test.md').exists()
    reduce_inputs.main(argv)
    assert not left.exists() and not other.exists()
    assert (tmp_path / 'reduction_custom_cnn_test.md').exists()


def test_reduce_inputs_bad_input(parent, tmp_path, capsys):
    out, folder = parent
    base = ['--model-setup', str(out / 'args.json'), '--out', str(tmp_path)]
    with pytest.raises(UserError) as error:
        reduce_inputs.main(base + ['--beam', '0'])
    assert command_line_message(error.value).endswith('pass --beam 1 or more')
    with pytest.raises(SystemExit):
        reduce_inputs.main(base + ['--importance', 'attention'])
    assert 'argument --importance' in capsys.readouterr().err
    no_calib = tmp_path / 'no_calib'
    train(no_calib, (str(folder / 'train.txt'), str(folder / 'test.txt')), '--epoch', '1',
          '--n-calib', '0')
    with pytest.raises(UserError, match='re-train with --n-calib'):
        reduce_inputs.main(['--model-setup', str(no_calib / 'args.json'),
                            '--importance', 'conformity', '--out', str(tmp_path)])


def test_a_damaged_entropy_measurement_names_the_file():
    row = {name: 1.0 for name in measures.MEASURED}
    measures.check_row(row, 'm.json')
    for damaged, missing in ((dict(row, reduced_length='2.5'), 'reduced_length'),
                             ({k: v for k, v in row.items() if k != 'test_accuracy'},
                              'test_accuracy'), ([1.0], 'dev_accuracy, test_accuracy')):
        with pytest.raises(UserError, match='entropy measurements m.json: the entry of this '
                                            'model has no number for {}'.format(missing)):
            measures.check_row(damaged, 'm.json')
