"""The DkNN caches lock what they write: the run folder's lock is taken only while a cache
is written, re-entrantly for a command that holds it already; readers of valid caches
need no lock; parallel builders never leave a torn cache."""
import json
import os
import subprocess
import threading
import sys

import numpy as np
import pytest

import cli_helpers
from deepknn.neighbors import activation_cache
from deepknn.neighbors import dknn as dknn_lib
from deepknn.models import model_setup
from deepknn.storage import result_folder
from deepknn.neighbors.dknn_settings import DkNNSettings
from nlp_utils import UserError

from cli_helpers import ROOT
CACHES = ('dknn_cache.npz', 'dknn_index_faiss.npz')


@pytest.fixture(scope='module')
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp('caches')
    cli_helpers.train_tiny(folder, folder / 'run')
    return model_setup.load_setup(str(folder / 'run' / 'args.json'))


def remove_caches(setup):
    for name in CACHES:
        path = os.path.join(setup.result_dir, name)
        if os.path.exists(path):
            os.remove(path)


def expected_train_layers(setup):
    """The known answer: the model's activations of the training split, computed here."""
    return setup.model.layer_activations([x for x, _ in setup.train])


def check_cache_holds(setup, layers):
    """The activation cache is whole (readable, with this model's key) and holds `layers`."""
    cache = activation_cache.read_cache(os.path.join(setup.result_dir, 'dknn_cache.npz'),
                                        activation_cache.activation_key(setup))
    assert cache is not None
    assert int(cache['n_layers']) == len(layers)
    for i, layer in enumerate(layers):
        np.testing.assert_allclose(cache['layer_{}'.format(i)], layer, rtol=1e-6, atol=1e-6)


def test_a_command_holding_the_folder_lock_still_builds_and_caches(run):
    remove_caches(run)
    with result_folder.lock(run.result_dir, 'run_dknn.py'):   # its own report's lock
        assert result_folder.held_by_this_process(run.result_dir)
        dknn = dknn_lib.dknn_from_setup(run, DkNNSettings(5))
    assert not result_folder.held_by_this_process(run.result_dir)
    check_cache_holds(run, expected_train_layers(run))
    assert os.path.exists(os.path.join(run.result_dir, 'dknn_index_faiss.npz'))
    assert dknn.calibration_scores is not None


def test_valid_caches_are_read_while_another_process_holds_the_lock(run):
    fresh = dknn_lib.dknn_from_setup(run, DkNNSettings(5), use_cache=False)  # the answer
    dknn_lib.dknn_from_setup(run, DkNNSettings(5))   # both caches valid now
    with cli_helpers.held_by_another_process(run.result_dir, 'a long fine-tune'):
        cached = dknn_lib.dknn_from_setup(run, DkNNSettings(5))
        np.testing.assert_array_equal(cached.calibration_scores, fresh.calibration_scores)
        test = run.model.layer_activations([x for x, _ in run.test])
        np.testing.assert_array_equal(cached.predict_from_activations(test)['neighbors'],
                                      fresh.predict_from_activations(test)['neighbors'])
        os.remove(os.path.join(run.result_dir, 'dknn_index_faiss.npz'))   # stale: a write
        with pytest.raises(UserError, match='in use by .*a long fine-tune') as raised:
            dknn_lib.dknn_from_setup(run, DkNNSettings(5))
        assert '\n' not in str(raised.value)
    assert not os.path.exists(os.path.join(run.result_dir, 'dknn_index_faiss.npz'))


BUILDER = '''
import sys
sys.path.insert(0, {root!r})
from deepknn.neighbors import dknn
from deepknn.models import model_setup
from deepknn.neighbors.dknn_settings import DkNNSettings
from nlp_utils import UserError
setup = model_setup.load_setup({args!r})
try:
    built = dknn.dknn_from_setup(setup, DkNNSettings(5))
    print('built', built.calibration_scores.tolist())
except UserError as error:
    print('refused', error)
'''


def test_parallel_builders_never_leave_a_torn_cache(run):
    remove_caches(run)
    script = BUILDER.format(root=ROOT, args=os.path.join(run.result_dir, 'args.json'))
    builders = [subprocess.Popen([sys.executable, '-c', script], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True) for _ in range(2)]
    outputs = [builder.communicate(timeout=300)[0].strip().splitlines()[-1]
               for builder in builders]
    assert all(builder.returncode == 0 for builder in builders)
    expected = dknn_lib.dknn_from_setup(run, DkNNSettings(5), use_cache=False)
    for line in outputs:   # each built the caches or waited and reused them: one answer
        assert line == 'built {}'.format(expected.calibration_scores.tolist())
    check_cache_holds(run, expected_train_layers(run))
    assert not [name for name in os.listdir(run.result_dir) if name.startswith('.tmp-')]


def test_a_builder_waits_for_another_building_the_same_caches_then_reuses_them(run, capsys):
    remove_caches(run)
    expected = dknn_lib.dknn_from_setup(run, DkNNSettings(5), use_cache=False)
    remove_caches(run)
    with cli_helpers.held_by_another_process(run.result_dir, activation_cache.CACHES_PURPOSE):
        # The holder lets go a second later, as a builder that finished would.
        threading.Timer(1.0, cli_helpers.release_holders).start()
        built = dknn_lib.dknn_from_setup(run, DkNNSettings(5))
    np.testing.assert_array_equal(built.calibration_scores, expected.calibration_scores)
    assert 'waiting for {} (pid '.format(run.result_dir) in capsys.readouterr().err
    check_cache_holds(run, expected_train_layers(run))


def test_past_its_time_limit_a_waiting_builder_stops_with_one_line(run, monkeypatch):
    remove_caches(run)
    monkeypatch.setattr(result_folder, 'CACHE_WAIT_SECONDS', 0.5)
    with cli_helpers.held_by_another_process(run.result_dir, activation_cache.CACHES_PURPOSE):
        with pytest.raises(UserError, match=r'still in use by pid .*writing the DkNN caches.* '
                                            r'after 0.5 s; run the command again') as raised:
            dknn_lib.dknn_from_setup(run, DkNNSettings(5))
    assert '\n' not in str(raised.value)


def test_a_cache_with_its_key_but_not_every_array_is_rebuilt(run, capsys):
    expected = dknn_lib.dknn_from_setup(run, DkNNSettings(5), use_cache=False)
    path = os.path.join(run.result_dir, 'dknn_cache.npz')
    with np.load(path) as cache:
        arrays = {name: cache[name] for name in cache.files if name != 'layer_1'}
    np.savez(path, **arrays)
    built = dknn_lib.dknn_from_setup(run, DkNNSettings(5))
    np.testing.assert_array_equal(built.calibration_scores, expected.calibration_scores)
    assert 'ignoring the incomplete cache {} (no layer_1); rebuilding it'.format(path) \
        in capsys.readouterr().err
    check_cache_holds(run, expected_train_layers(run))


def test_a_faiss_index_cache_with_a_corrupt_count_is_rebuilt(run, capsys):
    expected = dknn_lib.dknn_from_setup(run, DkNNSettings(5), use_cache=False)
    dknn_lib.dknn_from_setup(run, DkNNSettings(5))
    path = os.path.join(run.result_dir, 'dknn_index_faiss.npz')
    with np.load(path) as cache:
        arrays = {name: cache[name].copy() for name in cache.files}
    arrays['index_0_faiss_index'][12:20] = 255          # ntotal: a negative count
    np.savez(path, **arrays)
    built = dknn_lib.dknn_from_setup(run, DkNNSettings(5))
    np.testing.assert_array_equal(built.calibration_scores, expected.calibration_scores)
    assert 'a saved faiss index is corrupt' in capsys.readouterr().err
    dknn_lib.dknn_from_setup(run, DkNNSettings(5))      # the rebuilt cache reads back
    assert 'corrupt' not in capsys.readouterr().err


def test_an_unknown_model_in_args_json_is_one_line(run, tmp_path, capsys):
    import run_dknn
    folder = cli_helpers.copy_run(run.result_dir, tmp_path)
    with open(os.path.join(folder, 'args.json')) as f:
        args = json.load(f)
    with open(os.path.join(folder, 'args.json'), 'w') as f:
        json.dump(dict(args, model='xyz'), f)
    status, err = cli_helpers.cli(run_dknn.main, ['--model-setup', str(folder)], capsys)
    assert status == 2 and err == ["error: model setup {}: field 'model' is 'xyz', expected "
                                   "one of cnn, bilstm, rnn, bow, minilm, transformer; restore "
                                   "the file or re-train".format(
                                       os.path.join(folder, 'args.json'))]


SLOW_HOLDER = '''
import fcntl, os, socket, sys, time
with open({path!r}, 'a+') as handle:
    fcntl.flock(handle, fcntl.LOCK_EX)
    print('locked', flush=True)
    time.sleep(0.6)                     # its line not written yet
    handle.write('pid {{}} on {{}} (writing the DkNN caches, since now)\\n'.format(
        os.getpid(), socket.gethostname()))
    handle.flush()
    time.sleep(0.6)
    os.remove({path!r})
'''


def test_a_holder_that_has_not_written_its_line_yet_is_read_again(run, capsys):
    """The race of a second builder that reads the lock file between the first's flock
    and its line (seen on a loaded machine): it was refused as 'another process'."""
    remove_caches(run)
    path = result_folder._sibling(run.result_dir, 'lock')
    holder = subprocess.Popen([sys.executable, '-c', SLOW_HOLDER.format(path=path)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == 'locked'
    built = dknn_lib.dknn_from_setup(run, DkNNSettings(5))
    holder.wait(timeout=60)
    assert built.calibration_scores is not None
    assert 'waiting for {} (pid {} '.format(run.result_dir, holder.pid) in capsys.readouterr().err
