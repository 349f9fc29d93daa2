"""Running the CLIs as a user does, and checking that nothing they should not touch changed."""
import contextlib
import argparse
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import numpy as np

from deepknn.neighbors import dknn
from deepknn.cli import run_cli
from deepknn.models import model_setup
from deepknn.neighbors.dknn_settings import DkNNSettings
import nlp_utils
import train_text_classifier


def lines(n, seed, labels=('neg', 'pos')):
    """n `label text` lines whose label is given away by one word."""
    rng = np.random.RandomState(seed)
    words = ['bad', 'good', 'odd', 'fine'][:len(labels)]
    rows = []
    for _ in range(n):
        label = rng.randint(len(labels))
        rows.append('{} the film was {}'.format(labels[label], words[label]))
    return '\n'.join(rows) + '\n'


def train_argv(out, data, *extra):
    """Flags of a tiny, fast training run (a bag of words) on `data` = (train, test)."""
    return ['--dataset', 'custom', '--train-file', data[0], '--test-file', data[1],
            '--model', 'bow', '--unit', '8', '--embed-dim', '8', '--epoch', '1',
            '--batchsize', '16', '--n-calib', '10', '--min-freq', '1',
            '--out', str(out)] + list(extra)


def train_tiny(folder, out, n_labels=2, *extra):
    """Write data into `folder` and train a tiny run into `out`; -> (train, test) paths."""
    labels = ('neg', 'pos', 'mixed')[:n_labels]
    train, test = os.path.join(str(folder), 'train.txt'), os.path.join(str(folder), 'test.txt')
    with open(train, 'w') as f:
        f.write(lines(80, 0, labels))
    with open(test, 'w') as f:
        f.write(lines(20, 1, labels))
    train_text_classifier.main(train_argv(out, (train, test), *extra))
    return train, test


def tiny_run_with_dknn(folder):
    """(results folder, setup, DkNN with k=5) of a tiny run trained into
    FOLDER/results/run."""
    results = folder / 'results'
    train_tiny(folder, results / 'run')
    setup = model_setup.load_setup(str(results / 'run' / 'args.json'))
    return results, setup, dknn.dknn_from_setup(setup, DkNNSettings(5, 'kdtree'), use_cache=False)


def cli(main, argv, capsys):
    """Run `main(argv)` the way the scripts do: (exit status, stderr lines)."""
    capsys.readouterr()
    try:
        run_cli(lambda: main(argv))
        status = 0
    except SystemExit as stop:
        status = stop.code
    return status, capsys.readouterr().err.strip().splitlines()


def snapshot(folder):
    """{relative path: md5} of every file under `folder` (hidden ones too)."""
    digests = {}
    for parent, _, files in os.walk(str(folder)):
        for name in files:
            path = os.path.join(parent, name)
            with open(path, 'rb') as f:
                digests[os.path.relpath(path, str(folder))] = hashlib.md5(f.read()).hexdigest()
    return digests


def assert_one_line_error(status, err, *fragments):
    assert status == 2 and len(err) == 1 and err[0].startswith('error: '), err
    for fragment in fragments:
        assert fragment in err[0], err[0]


def copy_run(run, folder, name='run'):
    target = os.path.join(str(folder), name)
    shutil.copytree(str(run), target)
    return target


def write_weights(path, content):
    """A one-array weights npz at `path` whose array 'W' holds the bytes `content`;
    -> weights_digest(content)."""
    with open(str(path), 'wb') as f:
        np.savez(f, W=np.frombuffer(content, dtype=np.uint8))
    return weights_digest(content)


def weights_digest(content):
    """The 12-digit parameters digest tables print for write_weights(path, content),
    written out by hand: sha256 of the JSON [name, dtype, shape], then the bytes."""
    header = '["W", "|u1", [{}]]'.format(len(content)).encode('utf-8')
    return hashlib.sha256(header + content).hexdigest()[:12]


def npz_digest(path):
    """The 12-digit parameters digest of an npz file, computed here independently of
    nlp_utils: every member in name order, its JSON [name, dtype, shape], its bytes."""
    digest = hashlib.sha256()
    with np.load(str(path)) as npz:
        for name in sorted(npz.files):
            array = np.ascontiguousarray(npz[name])
            digest.update('["{}", "{}", {}]'.format(name, array.dtype.str,
                                                    list(array.shape)).encode('utf-8'))
            digest.update(array.tobytes())
    return digest.hexdigest()[:12]


HOLDER = '''
import sys
sys.path.insert(0, {root!r})
from deepknn.storage import result_folder
with result_folder.lock({folder!r}, {purpose!r}):
    print('held', flush=True)
    sys.stdin.read()        # until the test closes our stdin
'''


@contextlib.contextmanager
def held_by_another_process(folder, purpose):
    """Hold result folder `folder`'s lock in a child process for the duration (a lock of
    this very process would be re-entrant for the DkNN caches)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    holder = subprocess.Popen(
        [sys.executable, '-c', HOLDER.format(root=root, folder=str(folder), purpose=purpose)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    _HOLDERS.append(holder)
    try:
        assert holder.stdout.readline().strip() == 'held'
        yield
    finally:
        release_holders()
        holder.wait(timeout=60)


_HOLDERS = []


def release_holders():
    """Let every holder of held_by_another_process go (from another thread, say)."""
    while _HOLDERS:
        _HOLDERS.pop().stdin.close()
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))


def load_script(script):
    """The module of a command (a path relative to the repository root), loaded afresh."""
    path = os.path.join(ROOT, script)
    spec = importlib.util.spec_from_file_location(
        'documented_' + re.sub(r'\W', '_', script), path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(path))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(os.path.dirname(path))
    return module


class Parsed(Exception):
    """Raised by the patched parse_args once a command line has parsed; .args holds it."""


def parsed_args(script, argv, monkeypatch):
    """(module, namespace) of `python script argv`: its main stopped right after its
    flags are parsed, so nothing is loaded or written."""
    real = argparse.ArgumentParser.parse_args

    def parse_and_stop(self, args=None, namespace=None):
        raise Parsed(real(self, args, namespace))
    module = load_script(script)
    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, 'parse_args', parse_and_stop)
        patch.setattr(sys, 'argv', [script] + list(argv))
        try:
            module.main(argv) if module.main.__code__.co_argcount else module.main()
        except Parsed as parsed:
            return module, parsed.args[0]
    raise AssertionError('{} did not parse its flags'.format(script))
