"""Damaged or odd inputs give one line naming the file or flag, never a traceback: a
garbled time.txt, a truncated predictions npz, a DkNN report without its accuracy, an
empty activations file, a binary tree file, a damaged or missing random stream in a
snapshot, a port past 65535."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import cli_helpers
import explore
import paper_results
import run_dknn
import train_text_classifier
from cli_helpers import assert_one_line_error, cli


@pytest.fixture(scope='module')
def results(tmp_path_factory):
    """A results folder holding one tiny run named like a Table 1 run, with its DkNN."""
    folder = tmp_path_factory.mktemp('damaged')
    run = folder / 'results' / 'stsa.binary_cnn'
    cli_helpers.train_tiny(folder, run)
    run_dknn.main(['--model-setup', str(run), '--k', '3', '--backend', 'faiss'])
    return folder / 'results'


@pytest.fixture
def run(results, tmp_path):
    """A copy of the run, to damage."""
    copy = tmp_path / 'results' / 'stsa.binary_cnn'
    shutil.copytree(str(results / 'stsa.binary_cnn'), str(copy))
    return copy


def paper(run, capsys, *command):
    return cli(paper_results.main, ['--results', str(run.parent), '--out',
                                    str(run.parent.parent / 'tables')] + list(command), capsys)


def test_a_garbled_time_txt_is_named(run, capsys):
    (run / 'time.txt').write_text('garbage here')
    status, err = paper(run, capsys, 'training')
    assert_one_line_error(status, err, '{} does not hold "peak_rss_kb N"'.format(run / 'time.txt'))


def test_a_truncated_predictions_npz_is_named(run, capsys):
    path = run / 'dknn_predictions_test_faiss_k3.npz'
    (run / 'dknn_predictions_test_faiss.npz').write_bytes(path.read_bytes()[:300])
    status, err = paper(run, capsys, 'reliability', '--run', run.name)
    assert_one_line_error(status, err, 'DkNN predictions {} is not a readable npz file'.format(
        run / 'dknn_predictions_test_faiss.npz'))


def test_a_report_without_its_accuracy_is_named(run, capsys):
    report = json.loads((run / 'dknn_test_faiss_k3.json').read_text())
    del report['softmax_accuracy']
    (run / 'dknn_test_faiss.json').write_text(json.dumps(report))
    status, err = paper(run, capsys, 'table1')
    assert_one_line_error(status, err, 'DkNN report {} has no number softmax_accuracy'.format(
        run / 'dknn_test_faiss.json'))


def test_an_empty_activations_file_is_named(tmp_path, capsys):
    rng = np.random.RandomState(0)
    for split, n in (('train', 30), ('calib', 10), ('test', 0)):
        np.savez(str(tmp_path / (split + '.npz')), layer_0=rng.normal(size=(n, 4)),
                 labels=rng.randint(0, 2, n))
    status, err = cli(run_dknn.main, ['--activations', str(tmp_path), '--k', '3', '--out',
                                      str(tmp_path / 'out')], capsys)
    assert_one_line_error(status, err, '{} holds no examples'.format(tmp_path / 'test.npz'))


def test_a_binary_tree_file_is_named(tmp_path):
    from deepknn.data import sst_trees
    (tmp_path / 'trees.bin').write_bytes(bytes(range(256)) * 8)
    with pytest.raises(sst_trees.UserError, match='is not UTF-8 text'):
        sst_trees.read_trees(str(tmp_path / 'trees.bin'))


def snapshot_with(run, change):
    path = str(run / 'snapshot_latest.npz')
    with np.load(path) as snapshot:
        arrays = {name: snapshot[name] for name in snapshot.files}
    change(arrays)
    np.savez(path, **arrays)


def test_a_damaged_random_stream_is_one_line(run, capsys):
    snapshot_with(run, lambda arrays: arrays.update({
        'extensions/RandomStream/keys': arrays['extensions/RandomStream/keys'][:100]}))
    status, err = cli(train_text_classifier.main, ['--out', str(run), '--resume', '--epoch', '2'],
                      capsys)
    assert_one_line_error(status, err, "the snapshot's random stream is damaged")


def test_an_older_snapshot_resumes_reseeded_and_says_so(run, capsys):
    snapshot_with(run, lambda arrays: [arrays.pop(name) for name in list(arrays)
                                       if 'RandomStream' in name])
    status, err = cli(train_text_classifier.main, ['--out', str(run), '--resume', '--epoch', '2'],
                      capsys)
    assert status == 0
    assert any('holds no random stream' in line for line in err)


def test_a_port_past_65535_is_a_usage_error(run, capsys):
    status, err = cli(explore.main, ['--model-setup', str(run), '--port', '70000'], capsys)
    assert status == 2 and err[-1].startswith('error: argument --port: must be a port number')
    assert os.listdir(str(run.parent)) == ['stsa.binary_cnn']


def test_a_host_that_does_not_resolve_is_named_as_such(run, capsys):
    status, err = cli(explore.main, ['--model-setup', str(run), '--host', 'no-such-host.invalid',
                                     '--allow-remote'], capsys)
    assert_one_line_error(status, err, '--host no-such-host.invalid does not resolve')


def test_a_hans_row_without_its_heuristic_is_a_bad_line(tmp_path):
    from deepknn.data import eval_sets
    path = tmp_path / 'heuristics_evaluation_set.txt'
    path.write_text('gold_label\tsentence1\tsentence2\theuristic\tsubcase\n'
                    'entailment\tThe cat sat .\tThe cat sat .\tlexical_overlap\tln_a\n'
                    'non-entailment\tThe dog ran .\tThe cat ran .\t\tln_b\n')
    with pytest.raises(eval_sets.UserError, match='line 3: empty heuristic or subcase'):
        eval_sets.load_eval_set(files=[str(path)])
    kept = eval_sets.load_eval_set(files=[str(path)], skip_bad_lines=True)
    assert kept.groups == ['lexical_overlap'] and kept.n_bad_lines == 1


def test_an_address_that_accepts_tcp_but_is_no_ray_head_fails_at_once():
    import http.server
    import socket
    import threading
    from deepknn.distributed import engine
    web = http.server.HTTPServer(('127.0.0.1', 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    silent = socket.create_server(('127.0.0.1', 0))      # accepts, never answers
    try:
        with pytest.raises(engine.UserError, match='it does not answer as a gRPC server'):
            engine.check_reachable('127.0.0.1:{}'.format(web.server_address[1]))
        with pytest.raises(engine.UserError, match=r'no Ray head answers there \(timed out\)'):
            engine.check_reachable('127.0.0.1:{}'.format(silent.getsockname()[1]), 0.5)
    finally:
        web.shutdown()
        silent.close()


KILLED_OUTPUT_WRITER = '''
import os, signal, sys
sys.path.insert(0, {root!r})
from deepknn.storage import result_folder
with result_folder.lock_outputs({stem!r}, [{stem!r} + '.md'], 'paper_results.py'):
    open(os.path.join({folder!r}, '.tmp-{{}}-abcdtable.md'.format(os.getpid())), 'w').close()
    os.kill(os.getpid(), signal.SIGKILL)
'''


def test_what_a_killed_writer_left_in_an_out_folder_is_swept_by_the_next(tmp_path):
    from deepknn.storage import result_folder
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    killed = subprocess.Popen([sys.executable, '-c', KILLED_OUTPUT_WRITER.format(
        root=root, stem=str(tmp_path / 'table'), folder=str(tmp_path))])
    assert killed.wait() == -9
    (tmp_path / 'notes.txt').write_text('mine')
    assert sorted(os.listdir(str(tmp_path))) == [
        '.table.outputs.lock', '.tmp-{}-abcdtable.md'.format(killed.pid), 'notes.txt']
    with result_folder.lock_outputs(str(tmp_path / 'other'), [str(tmp_path / 'other.md')],
                                    'another command'):
        assert sorted(os.listdir(str(tmp_path))) == ['.other.outputs.lock', 'notes.txt']


KILLED_REPORT_WRITER = '''
import os, signal, sys
sys.path.insert(0, {root!r})
import nlp_utils
real_replace, renamed = os.replace, []
def replace(source, target):
    if renamed:                                 # the predictions, after the report
        os.kill(os.getpid(), signal.SIGKILL)
    real_replace(source, target)
    renamed.append(target)
os.replace = replace
nlp_utils.atomic_write_files([
    ({report!r}, lambda f: f.write('{{"softmax_accuracy": 0.5, "dknn_accuracy": 0.5}}'), 'w'),
    ({predictions!r}, lambda f: f.write(open({predictions!r}, 'rb').read()), 'wb')])
'''


def test_readers_refuse_a_report_and_predictions_pair_a_kill_left_torn(run, capsys):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    shutil.copyfile(str(run / 'dknn_test_faiss_k3.json'), str(run / 'dknn_test_faiss.json'))
    shutil.copyfile(str(run / 'dknn_predictions_test_faiss_k3.npz'),
                    str(run / 'dknn_predictions_test_faiss.npz'))
    killed = subprocess.Popen([sys.executable, '-c', KILLED_REPORT_WRITER.format(
        root=root, report=str(run / 'dknn_test_faiss.json'),
        predictions=str(run / 'dknn_predictions_test_faiss.npz'))])
    assert killed.wait() == -9
    for command, what in ((['table1'], 'DkNN report'),
                          (['reliability', '--run', run.name], 'DkNN predictions')):
        status, err = paper(run, capsys, *command)
        assert_one_line_error(status, err, what, 'whose replacement a killed command left half')


@pytest.mark.parametrize('after', [False, True])
def test_paper_results_takes_out_before_or_after_the_subcommand(run, tmp_path, capsys, after):
    shutil.copyfile(str(run / 'dknn_test_faiss_k3.json'), str(run / 'dknn_test_faiss.json'))
    out = ['--out', str(tmp_path / 'tables')]
    argv = ['--results', str(run.parent)] + ([] if after else out) + ['table1'] + (
        out if after else [])
    status, err = cli(paper_results.main, argv, capsys)
    assert status == 0, err
    assert (tmp_path / 'tables' / 'table1.md').exists()
