"""Nothing a user owns is lost: --force, --resume, locks, failed runs, stale temp files.

Every case runs a CLI as a user would (cli.run_cli: exit status 2 and one line on
stderr for a user error) and checks that what existed before is byte-identical after.
"""
import json
import os
import subprocess

import chainer
import pytest

import cli_helpers
import nlp_utils
import paper_results
from deepknn.storage import manifest
from deepknn.storage import result_folder
from nlp_utils import UserError
import train_text_classifier
from cli_helpers import assert_one_line_error, cli, lines, snapshot, train_argv

from cli_helpers import ROOT


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp('data')
    (folder / 'train.txt').write_text(lines(80, 0))
    (folder / 'test.txt').write_text(lines(20, 1))
    return str(folder / 'train.txt'), str(folder / 'test.txt')


@pytest.fixture(scope='module')
def finished(tmp_path_factory, data):
    """A finished result folder (read-only for the tests: copy before changing)."""
    out = tmp_path_factory.mktemp('runs') / 'run'
    train_text_classifier.main(train_argv(out, data))
    return out


def copy_run(finished, tmp_path, name='run'):
    import pathlib
    return pathlib.Path(cli_helpers.copy_run(finished, tmp_path, name))


# ---------------------------------------------------------------- --force
def test_force_refuses_a_folder_with_unrelated_files(data, tmp_path, capsys):
    out = tmp_path / 'mine'
    out.mkdir()
    (out / 'thesis.tex').write_text('years of work')
    before = snapshot(tmp_path)
    status, err = cli(train_text_classifier.main, train_argv(out, data, '--force'), capsys)
    assert_one_line_error(status, err, 'not a result folder made by this tool', '--out')
    assert snapshot(tmp_path) == before


def test_force_refuses_the_working_directory(data, tmp_path, capsys, monkeypatch):
    checkout = tmp_path / 'checkout'
    (checkout / '.git').mkdir(parents=True)
    (checkout / '.git' / 'HEAD').write_text('ref: refs/heads/main\n')
    (checkout / 'results').mkdir()
    (checkout / 'results' / 'table1.md').write_text('| committed |\n')
    monkeypatch.chdir(checkout)
    before = snapshot(checkout)
    for out in ('.', 'results'):
        status, err = cli(train_text_classifier.main, train_argv(out, data, '--force'), capsys)
        assert_one_line_error(status, err, 'not a result folder made by this tool')
    assert snapshot(checkout) == before


def test_force_refuses_a_file(data, tmp_path, capsys):
    out = tmp_path / 'notes.txt'
    out.write_text('keep me')
    status, err = cli(train_text_classifier.main, train_argv(out, data, '--force'), capsys)
    assert_one_line_error(status, err, 'is not a folder')
    assert out.read_text() == 'keep me'


def test_force_and_resume_together_are_refused(finished, data, tmp_path, capsys):
    out = copy_run(finished, tmp_path)
    before = snapshot(out)
    with pytest.raises(SystemExit) as stop:
        train_text_classifier.parse_args(train_argv(out, data, '--force', '--resume'))
    assert stop.value.code == 2 and 'not allowed with argument' in capsys.readouterr().err
    assert snapshot(out) == before


def test_force_keeps_the_old_run_when_the_new_one_fails(finished, data, tmp_path, capsys,
                                                        monkeypatch):
    out = copy_run(finished, tmp_path)
    before = snapshot(out)

    def crash(self, **options):
        raise nlp_utils.UserError('simulated failure in epoch 1')
    monkeypatch.setattr(chainer.training.Trainer, 'run', crash)
    status, err = cli(train_text_classifier.main, train_argv(out, data, '--force'), capsys)
    assert_one_line_error(status, err, 'simulated failure')
    assert snapshot(out) == before
    assert os.listdir(str(tmp_path)) == ['run']   # no staging and no lock file left


def test_force_with_bad_input_fails_before_touching_the_run(finished, data, tmp_path, capsys):
    out = copy_run(finished, tmp_path)
    before = snapshot(out)
    argv = train_argv(out, data, '--force', '--word_vectors', str(tmp_path / 'missing.txt'))
    status, err = cli(train_text_classifier.main, argv, capsys)
    assert_one_line_error(status, err, 'missing.txt does not exist')
    assert snapshot(out) == before


def test_force_replaces_a_result_folder_atomically(finished, data, tmp_path, capsys):
    out = copy_run(finished, tmp_path)
    nlp_utils.atomic_write_text(str(out / 'dknn_test_faiss.json'), '{"stale": true}')  # ours
    status, _ = cli(train_text_classifier.main, train_argv(out, data, '--force', '--seed', '3'),
                    capsys)
    assert status == 0
    assert json.loads((out / 'args.json').read_text())['seed'] == 3
    assert not (out / 'dknn_test_faiss.json').exists()   # the old run went as a whole
    assert os.listdir(str(tmp_path)) == ['run']


def test_force_refuses_a_result_folder_holding_a_users_files(finished, data, tmp_path, capsys):
    """The README once told users to write my_sentences.txt into the demo's folder:
    `make demo` (train --force) deleted it with the old run."""
    out = copy_run(finished, tmp_path)
    for name in ('my_sentences.txt', 'maps.html', 'notes.md', 'zz.txt'):
        (out / name).write_text('mine')
    before = snapshot(tmp_path)
    status, err = cli(train_text_classifier.main, train_argv(out, data, '--force'), capsys)
    assert_one_line_error(status, err, 'holds files this tool did not write (maps.html, '
                          'my_sentences.txt, notes.md and 1 more)', 'move them elsewhere',
                          '.deep-knn-files')
    assert snapshot(tmp_path) == before


def test_every_writer_records_its_files_so_force_replaces_them(finished, data, tmp_path,
                                                                 capsys):
    """run_dknn, scaling, interpretations and predict write into the run (the demo's
    commands): all of it is the tool's own, so --force replaces the whole run."""
    import interpretations
    import predict
    import run_dknn
    import scaling
    out = copy_run(finished, tmp_path)
    setup = str(out / 'args.json')
    (tmp_path / 'new.txt').write_text('the film was good\n')
    for main, argv in ((run_dknn.main, ['--model-setup', setup, '--k', '3']),
                       (scaling.main, ['--model-setup', setup]),
                       (interpretations.main, ['--model-setup', setup, '--limit', '2', '--k',
                                               '3', '--output', str(out / 'maps.html'),
                                               '--png', str(out / 'maps.png')]),
                       (predict.main, ['--model-setup', setup, '--input',
                                       str(tmp_path / 'new.txt'), '--k', '3',
                                       '--out', str(out / 'mine')])):
        assert cli(main, argv, capsys)[0] == 0
    assert (out / 'maps.png').exists() and (out / 'mine.html').exists()
    assert result_folder.manifest.foreign_files(str(out)) == []
    status, _ = cli(train_text_classifier.main, train_argv(out, data, '--force'), capsys)
    assert status == 0 and not (out / 'maps.html').exists() and not (out / 'mine.csv').exists()


def test_a_folder_from_before_manifests_counts_the_tools_own_names(finished, data, tmp_path,
                                                                     capsys):
    """No manifest: files with the names the tool writes are its own, others are not;
    the first file recorded starts the manifest with the former."""
    out = copy_run(finished, tmp_path)
    os.remove(str(out / result_folder.manifest.MANIFEST))
    (out / 'temperature.json').write_text('{}')
    (out / 'time.txt').write_text('wall_s 60')         # scripts/train_and_dknn.sh's
    (out / 'my_sentences.txt').write_text('mine')
    assert result_folder.manifest.foreign_files(str(out)) == ['my_sentences.txt']
    nlp_utils.atomic_write_text(str(out / 'maps.html'), '<p>')
    assert {'args.json', 'best_model.npz', 'log', 'temperature.json', 'time.txt',
            'maps.html'} <= \
        result_folder.manifest.recorded(str(out))
    status, err = cli(train_text_classifier.main, train_argv(out, data, '--force'), capsys)
    assert_one_line_error(status, err, '(my_sentences.txt)')
    os.remove(str(out / 'my_sentences.txt'))
    status, _ = cli(train_text_classifier.main, train_argv(out, data, '--force'), capsys)
    assert status == 0 and not (out / 'maps.html').exists()


def test_a_users_folder_named_like_chainers_temporaries_is_not_swept(finished, data, tmp_path,
                                                                       capsys):
    out = copy_run(finished, tmp_path)
    (out / 'log20240101').mkdir()
    (out / 'log20240101' / 'day1.txt').write_text('mine')
    (out / 'log20240101' / 'day2.txt').write_text('mine')
    (out / 'logabcd1234').mkdir()                    # what a killed LogReport left
    (out / 'logabcd1234' / 'log.json').write_text('[]')
    status, _ = cli(train_text_classifier.main,
                    train_argv(out, data, '--resume', '--epoch', '2'), capsys)
    assert status == 0 and not (out / 'logabcd1234').exists()
    assert sorted(os.listdir(str(out / 'log20240101'))) == ['day1.txt', 'day2.txt']


def test_a_file_written_again_and_again_is_recorded_once(tmp_path):
    """A checkpoint saved at every step of a search must not grow the manifest a line a
    step; a file written after the folder was replaced is recorded in the new one."""
    folder = str(tmp_path / 'run')
    result_folder.mark(folder, 'test')
    for step in range(50):
        nlp_utils.atomic_write_json(os.path.join(folder, 'search.partial.json'), {'step': step})
    manifest_path = os.path.join(folder, result_folder.manifest.MANIFEST)
    assert open(manifest_path).read() == '"search.partial.json"\n'
    os.remove(manifest_path)
    result_folder.mark(folder, 'test')                # a new folder in its place
    nlp_utils.atomic_write_json(os.path.join(folder, 'search.partial.json'), {'step': 50})
    assert result_folder.manifest.recorded(folder) == {'search.partial.json'}


# ---------------------------------------------------------------- --resume
def test_resume_deletes_nothing_and_records_the_epochs(finished, data, tmp_path, capsys):
    out = copy_run(finished, tmp_path)
    (out / 'my_notes.txt').write_text('mine')
    status, _ = cli(train_text_classifier.main,
                    train_argv(out, data, '--resume', '--epoch', '2'), capsys)
    assert status == 0
    assert (out / 'my_notes.txt').read_text() == 'mine'
    assert json.loads((out / 'args.json').read_text())['epoch'] == 2
    assert len(json.loads((out / 'log').read_text())) == 2


def test_resume_of_nothing_is_an_error(data, tmp_path, capsys):
    status, err = cli(train_text_classifier.main,
                      train_argv(tmp_path / 'none', data, '--resume'), capsys)
    assert_one_line_error(status, err, 'nothing to resume')
    assert not (tmp_path / 'none').exists()


def test_train_and_dknn_script_never_forces_a_resume(tmp_path):
    fake = tmp_path / 'python'
    fake.write_text('#!/bin/sh\necho "$@" >> {}\n'.format(tmp_path / 'calls'))
    fake.chmod(0o755)
    env = dict(os.environ, PYTHON=str(fake), RUN='script_test_run',
               DKNN_DATA_DIR=str(tmp_path))
    subprocess.run(['bash', 'scripts/train_and_dknn.sh', 'custom', 'bow', '--resume'],
                   cwd=ROOT, env=env, check=False, capture_output=True)
    subprocess.run(['bash', 'scripts/train_and_dknn.sh', 'custom', 'bow'],
                   cwd=ROOT, env=env, check=False, capture_output=True)
    calls = [c for c in (tmp_path / 'calls').read_text().splitlines()
             if c.startswith('train_text_classifier.py')]
    assert '--resume' in calls[0] and '--force' not in calls[0]
    assert '--force' in calls[1]
    leftover = os.path.join(ROOT, 'results', 'script_test_run.time')
    if os.path.exists(leftover):
        os.remove(leftover)


# ---------------------------------------------------------------- interrupted runs
def test_failure_before_the_first_snapshot_leaves_nothing(data, tmp_path, capsys, monkeypatch):
    def crash(self, **options):
        raise nlp_utils.UserError('simulated failure')
    monkeypatch.setattr(chainer.training.Trainer, 'run', crash)
    status, _ = cli(train_text_classifier.main, train_argv(tmp_path / 'new', data), capsys)
    assert status == 2 and not (tmp_path / 'new').exists()
    given = tmp_path / 'empty'
    given.mkdir()
    cli(train_text_classifier.main, train_argv(given, data), capsys)
    assert given.is_dir() and os.listdir(str(given)) == []   # the user's folder stays


def test_unfinished_run_is_kept_and_named_for_resume(finished, data, tmp_path, capsys):
    out = copy_run(finished, tmp_path)
    (out / 'train_result.json').unlink()           # as if killed after a snapshot
    before = snapshot(out)
    status, err = cli(train_text_classifier.main, train_argv(out, data), capsys)
    assert_one_line_error(status, err, 'unfinished run', '--resume')
    assert snapshot(out) == before
    status, _ = cli(train_text_classifier.main,
                    train_argv(out, data, '--resume', '--epoch', '2'), capsys)
    assert status == 0 and (out / 'train_result.json').exists()


def test_stale_temporary_files_are_swept_by_the_next_run(finished, data, tmp_path, capsys):
    out = copy_run(finished, tmp_path)
    (out / '.tmp-abc123best_model.npz').write_bytes(b'half written')
    (out / 'tmpsnapshot_latest.npzx1y2').mkdir()
    (out / 'my_notes.txt').write_text('mine')
    staging = tmp_path / '.run.staging-999999'
    result_folder.mark(str(staging), 'test')
    foreign = tmp_path / '.run.staging-not-ours'
    foreign.mkdir()                                   # no marker: not ours, kept
    status, _ = cli(train_text_classifier.main,
                    train_argv(out, data, '--resume', '--epoch', '2'), capsys)
    assert status == 0
    assert not (out / '.tmp-abc123best_model.npz').exists()
    assert not (out / 'tmpsnapshot_latest.npzx1y2').exists() and not staging.exists()
    assert foreign.exists() and (out / 'my_notes.txt').exists()


# ---------------------------------------------------------------- locks
def test_second_writer_gets_an_error_naming_the_holder(data, tmp_path, capsys):
    out = tmp_path / 'busy'
    with result_folder.lock(str(out), 'training'):
        status, err = cli(train_text_classifier.main, train_argv(out, data), capsys)
    assert_one_line_error(status, err, 'is in use by pid {}'.format(os.getpid()), 'training')
    assert not out.exists()
    status, _ = cli(train_text_classifier.main, train_argv(out, data), capsys)
    assert status == 0                                # the lock is released afterwards


# ---------------------------------------------------------------- reports
@pytest.mark.parametrize('command', ['table1', 'training'])
def test_report_without_runs_is_an_error_and_keeps_committed_tables(tmp_path, capsys,
                                                                   command):
    runs, out = tmp_path / 'runs', tmp_path / 'results'
    runs.mkdir()
    out.mkdir()
    (out / '{}.md'.format(command)).write_text('committed numbers\n')
    before = snapshot(out)
    status, err = cli(paper_results.main, ['--results', str(runs), '--out', str(out), command],
                      capsys)
    assert_one_line_error(status, err, 'no result folder', str(runs))
    assert snapshot(out) == before


def test_report_does_not_overwrite_committed_tables_by_default(finished, tmp_path, capsys,
                                                              monkeypatch):
    monkeypatch.chdir(tmp_path)
    copy_run(finished, tmp_path / 'results', 'custom_bow')
    (tmp_path / 'results' / 'wallace').mkdir()
    committed = tmp_path / 'results' / 'wallace' / 'training.md'   # its study folder
    committed.write_text('committed numbers\n')
    before = snapshot(tmp_path / 'results')
    status, err = cli(paper_results.main, ['training'], capsys)
    assert_one_line_error(status, err, 'training.md', '--overwrite')
    assert snapshot(tmp_path / 'results') == before
    status, _ = cli(paper_results.main, ['--overwrite', 'training'], capsys)
    assert status == 0 and 'custom' in committed.read_text()


def test_dknn_caching_waits_for_no_one_and_names_the_training_holder(finished, tmp_path,
                                                                    capsys):
    import run_dknn
    out = copy_run(finished, tmp_path)
    before = snapshot(out)
    with result_folder.lock(str(out), 'training'):
        status, err = cli(run_dknn.main, ['--model-setup', str(out), '--k', '3'], capsys)
    assert_one_line_error(status, err, 'in use by pid', 'training')
    assert snapshot(out) == before                    # no cache written beside a training
    status, _ = cli(run_dknn.main, ['--model-setup', str(out), '--k', '3'], capsys)
    assert status == 0 and (out / 'dknn_test_faiss_k3.json').exists()


def test_a_folder_given_twice_is_named_so_not_in_use_by_another(tmp_path):
    """The same folder passed twice to one command used to read 'in use by <our pid>'."""
    folder = str(tmp_path / 'run')
    with result_folder.lock(folder, 'first use'):
        with pytest.raises(UserError, match='this very command: is the same folder given twice'):
            with result_folder.lock(folder, 'second use'):
                pass


# ---------------------------------------------------------------- kill -9
KILLED_WRITER = '''
import os, signal, sys
sys.path.insert(0, {root!r})
import nlp_utils
from deepknn.storage import result_folder

def write(f):
    f.write(b'half an activation cache')
    f.flush()
    os.kill(os.getpid(), signal.SIGKILL)

with result_folder.lock({folder!r}, 'caching activations'):
    nlp_utils.atomic_write_files([({folder!r} + '/dknn_cache.npz', write, 'wb')])
'''


def test_a_kill_9_in_a_write_leaves_nothing_the_next_command_keeps(tmp_path):
    folder = tmp_path / 'run'
    folder.mkdir()
    killed = subprocess.Popen([os.sys.executable, '-c',
                               KILLED_WRITER.format(root=ROOT, folder=str(folder))])
    assert killed.wait() == -9
    left, = os.listdir(str(folder))                  # the killed writer's temporary file
    assert left.startswith('.tmp-{}-'.format(killed.pid)) and (tmp_path / '.run.lock').exists()
    live = folder / '.tmp-{}-report.html'.format(os.getpid())   # a running writer's: kept
    live.write_text('being written')
    with result_folder.lock(str(folder), 'the next command'):   # the stale lock file is free
        assert os.listdir(str(folder)) == [live.name]
    assert not (tmp_path / '.run.lock').exists()


KILLED_BETWEEN_RENAMES = '''
import os, signal, sys
sys.path.insert(0, {root!r})
import nlp_utils
from deepknn.storage import result_folder

real_replace, renamed = os.replace, []

def replace(source, target):
    if renamed:                                 # the second file of the group
        os.kill(os.getpid(), signal.SIGKILL)
    real_replace(source, target)
    renamed.append(target)

os.replace = replace
with result_folder.lock({folder!r}, 'scaling.py'):
    nlp_utils.atomic_write_files([
        ({folder!r} + '/temperature.json', lambda f: f.write('new T'), 'w'),
        ({folder!r} + '/reliability_temperature.png', lambda f: f.write('new diagram'), 'w')])
'''


def test_a_group_a_kill_9_stopped_half_way_is_finished_by_the_next_command(tmp_path):
    """scaling.py's temperature.json was replaced before its PNG: killed in between, the
    folder held a new T beside the old diagram."""
    folder = tmp_path / 'run'
    killed_half_way(folder)
    assert (folder / 'temperature.json').read_text() == 'new T'          # half new
    assert (folder / 'reliability_temperature.png').read_text() == 'old diagram'
    with result_folder.lock(str(folder), 'the next command'):
        assert (folder / 'reliability_temperature.png').read_text() == 'new diagram'
        assert sorted(os.listdir(str(folder))) == ['reliability_temperature.png',
                                                   'temperature.json']


def killed_half_way(folder):
    """The old pair in `folder`, then a group write of the new pair killed by SIGKILL
    between its two renames (its journal left behind)."""
    folder.mkdir()
    (folder / 'temperature.json').write_text('old T')
    (folder / 'reliability_temperature.png').write_text('old diagram')
    killed = subprocess.Popen([os.sys.executable, '-c',
                               KILLED_BETWEEN_RENAMES.format(root=ROOT, folder=str(folder))])
    assert killed.wait() == -9


def test_a_later_write_of_the_same_group_resolves_the_killed_one_first(tmp_path):
    """interpretations.py --overwrite killed half way, then run again: it used to leave
    the journal, which a later command replayed over its newer outputs."""
    folder = tmp_path / 'run'
    killed_half_way(folder)
    nlp_utils.atomic_write_files([
        (str(folder / 'temperature.json'), lambda f: f.write('newest T'), 'w'),
        (str(folder / 'reliability_temperature.png'), lambda f: f.write('newest diagram'), 'w')])
    assert sorted(os.listdir(str(folder))) == ['reliability_temperature.png', 'temperature.json']
    with result_folder.lock(str(folder), 'a later, unrelated command'):
        assert (folder / 'temperature.json').read_text() == 'newest T'
        assert (folder / 'reliability_temperature.png').read_text() == 'newest diagram'


def test_a_journal_is_never_replayed_over_files_written_since(tmp_path):
    folder = tmp_path / 'run'
    killed_half_way(folder)
    (folder / 'reliability_temperature.png').write_text('a newer diagram, written by hand')
    with result_folder.lock(str(folder), 'the next command'):
        assert (folder / 'reliability_temperature.png').read_text() == \
            'a newer diagram, written by hand'
        assert sorted(os.listdir(str(folder))) == ['reliability_temperature.png',
                                                   'temperature.json']


def test_run_dknn_after_a_killed_run_cleans_up_and_works(finished, tmp_path, capsys):
    import run_dknn
    out = copy_run(finished, tmp_path)
    dead = subprocess.Popen(['true'])                # a pid that no longer runs
    dead.wait()
    (out / '.tmp-{}-dknn_cache.npz'.format(dead.pid)).write_bytes(b'half written')
    (tmp_path / '.run.lock').write_text('pid {} (killed)\n'.format(dead.pid))
    status, err = cli(run_dknn.main, ['--model-setup', str(out), '--k', '3'], capsys)
    assert status == 0 and any('removed 1 temporary file(s) left by a killed run' in line
                               for line in err)
    assert not [name for name in os.listdir(str(out)) if name.startswith('.tmp-')]
    assert (out / 'dknn_test_faiss_k3.json').exists() and not (tmp_path / '.run.lock').exists()


def test_a_full_disk_gives_one_line_and_keeps_no_half_cache(finished, tmp_path):
    """RLIMIT_FSIZE makes writes past 4 KiB fail with EFBIG, as a full disk does."""
    import resource
    out = copy_run(finished, tmp_path)
    for name in os.listdir(str(out)):
        if name.startswith('dknn_'):
            os.remove(str(out / name))
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    done = subprocess.run([os.sys.executable, os.path.join(ROOT, 'run_dknn.py'), '--model-setup',
                           str(out), '--k', '3'], preexec_fn=limit, capture_output=True, text=True)
    errors = [line for line in done.stderr.replace('\r', '\n').splitlines()
              if line.strip() and '%|' not in line]
    assert done.returncode == 2 and errors == [
        'error: cannot use a file (File too large); check the path and the disk']
    assert not [name for name in os.listdir(str(out)) if name.startswith(('.tmp-', 'dknn_'))]


KILLED_IN_THE_SWAP = '''
import os, signal, sys
sys.path.insert(0, {root!r})
import train_text_classifier

real_replace = os.replace

def replace(source, target):
    real_replace(source, target)
    if '.replaced-' in target:         # the old run moved aside, the new one not yet in
        os.kill(os.getpid(), signal.SIGKILL)

os.replace = replace
train_text_classifier.main({argv!r})
'''


def killed_in_the_swap(run, data, *extra):
    """Retrain `run` with --force (and `extra` flags) in a process killed by SIGKILL
    between the swap's two renames -> its pid."""
    argv = train_argv(run, data, '--force', *extra)
    killed = subprocess.Popen([os.sys.executable, '-c', KILLED_IN_THE_SWAP.format(
        root=ROOT, argv=argv)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert killed.wait() == -9
    assert not run.exists()
    assert sorted(os.listdir(str(run.parent))) == sorted(['.run.lock', '.run.replaced-{}'.format(
        killed.pid), '.run.staging-{}'.format(killed.pid)])
    return killed.pid


def test_a_force_killed_in_the_swap_is_finished_by_the_next_command(finished, data, tmp_path,
                                                                     capsys):
    run = copy_run(finished, tmp_path)
    old = snapshot(run)
    killed_in_the_swap(run, data, '--seed', '5')
    status, err = cli(train_text_classifier.main, train_argv(run, data), capsys)
    assert status == 2 and 'finished replacing' in ' '.join(err)    # and no "removed 2"
    assert 'already holds a trained model' in err[-1]
    new = snapshot(run)
    assert new['best_model.npz'] != old['best_model.npz'] and json.loads(
        (run / 'args.json').read_text())['seed'] == 5          # the new, complete run
    assert os.listdir(str(tmp_path)) == ['run']


def test_an_old_run_moved_aside_alone_is_put_back(finished, data, tmp_path, capsys):
    run = copy_run(finished, tmp_path)
    old = snapshot(run)
    pid = killed_in_the_swap(run, data, '--seed', '5')
    result_folder.discard(str(tmp_path / '.run.staging-{}'.format(pid)))
    status, err = cli(train_text_classifier.main, train_argv(run, data), capsys)
    assert status == 2 and 'put back the run' in ' '.join(err)
    assert snapshot(run) == old and os.listdir(str(tmp_path)) == ['run']


def test_every_staged_writer_recovers_an_interrupted_swap_first(tmp_path, capsys):
    """explore.py --export and finetune_entropy.py swap through result_folder.staged."""
    folder = str(tmp_path / 'export')
    for kind, text in (('replaced', 'old'), ('staging', 'new')):
        result_folder.mark(str(tmp_path / '.export.{}-999999'.format(kind)), 'explorer')
        (tmp_path / '.export.{}-999999'.format(kind) / 'data.json').write_text(text)
        manifest.record(str(tmp_path / '.export.{}-999999'.format(kind)), ['data.json'])
    with result_folder.lock(folder, 'explorer'):
        with result_folder.staged(folder, 'explorer') as staging:
            assert (tmp_path / 'export' / 'data.json').read_text() == 'new'
            (tmp_path / staging / 'data.json').write_text('newest')
            manifest.record(staging, ['data.json'])
    assert 'finished replacing' in capsys.readouterr().err
    assert (tmp_path / 'export' / 'data.json').read_text() == 'newest'
    assert os.listdir(str(tmp_path)) == ['export']
