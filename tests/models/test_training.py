"""The training library's optimizers: the flags reach them, the BERT schedule is right."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import cli_helpers
from deepknn.models import model_setup
from deepknn.models import chainer_trainer
from deepknn.models import training
from nlp_utils import UserError
from tests.rajani.test_knn_removal import template_config
import train_text_classifier

from cli_helpers import ROOT


def test_the_learning_rate_flag_reaches_every_optimizer():
    """--lr is the Chainer models' Adam rate too (it was read only for transformers)."""
    cnn = template_config(lr=0.01)
    optimizer, hooks, schedule = chainer_trainer.make_optimizer(cnn, n_train=100)
    assert optimizer.alpha == 0.01 and schedule is None
    assert chainer_trainer.make_optimizer(template_config(), 100)[0].alpha == 0.001
    minilm = template_config(model='minilm', lr=3e-5, epoch=2, batchsize=10, warmup=0.1)
    optimizer, hooks, schedule = chainer_trainer.make_optimizer(minilm, n_train=100)
    # 20 steps, 2 of warm-up: the first step runs at 1/2 of the rate; decay is 0.01 x lr.
    assert optimizer.alpha == 3e-5 and optimizer.eta == 0.5
    assert optimizer.weight_decay_rate == pytest.approx(0.01 * 3e-5)


def test_a_full_disk_during_training_is_one_line_without_a_zipfile_traceback(tmp_path):
    """RLIMIT_FSIZE makes writes past 16 KiB fail (EFBIG), as a full disk does: the model
    (a 2,000 x 8 embedding, ~64 KiB) cannot be saved. Chainer's own npz writer left its
    ZipFile open, whose finaliser printed a second traceback after the one-line error."""
    import resource
    (tmp_path / 'train.txt').write_text(cli_helpers.lines(80, 0))
    (tmp_path / 'test.txt').write_text(cli_helpers.lines(20, 1))
    argv = cli_helpers.train_argv(tmp_path / 'run', (str(tmp_path / 'train.txt'),
                                                     str(tmp_path / 'test.txt')))
    argv[argv.index('--unit') + 1] = '2000'
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))
    done = subprocess.run([sys.executable, os.path.join(ROOT, 'train_text_classifier.py')] + argv,
                          preexec_fn=limit, capture_output=True, text=True, cwd=str(tmp_path))
    errors = [line for line in done.stderr.replace('\r', '\n').splitlines()
              if line.strip() and '%|' not in line]
    assert done.returncode == 2 and errors == [
        'error: cannot use a file (File too large); check the path and the disk']


def test_ctrl_c_during_training_is_one_line_exit_130_and_resume_continues(tmp_path):
    """SIGINT once the first epoch's snapshot exists: one line saying how to continue,
    exit status 130, the snapshot kept; --resume then finishes the run."""
    import signal
    import time
    (tmp_path / 'train.txt').write_text(cli_helpers.lines(80, 0))
    (tmp_path / 'test.txt').write_text(cli_helpers.lines(20, 1))
    out = tmp_path / 'run'
    argv = cli_helpers.train_argv(out, (str(tmp_path / 'train.txt'), str(tmp_path / 'test.txt')))
    argv[argv.index('--epoch') + 1] = '100000'
    command = [sys.executable, os.path.join(ROOT, 'train_text_classifier.py')]
    # A shell starts background jobs with SIGINT ignored, and Python keeps an ignored
    # SIGINT ignored: give the child the default, as a terminal would.
    running = subprocess.Popen(command + argv, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, cwd=str(tmp_path),
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        for _ in range(1200):                 # wait up to 2 minutes for the first snapshot
            if (out / training.SNAPSHOT).exists() or running.poll() is not None:
                break
            time.sleep(0.1)
        time.sleep(0.5)                       # inside a later epoch
        running.send_signal(signal.SIGINT)
        _, err = running.communicate(timeout=120)
    finally:
        running.kill()
    errors = [line for line in err.replace('\r', '\n').splitlines()
              if line.strip() and '%|' not in line]
    assert running.returncode == 130 and errors == [
        'interrupted: training stopped; rerun with --resume and --out {} to continue from the '
        'last finished epoch'.format(out)]
    assert (out / training.SNAPSHOT).exists() and not (out / 'train_result.json').exists()
    done = subprocess.run(command + ['--resume', '--out', str(out), '--epoch', '2'],
                          capture_output=True, text=True, cwd=str(tmp_path))
    assert done.returncode == 0 and (out / 'train_result.json').exists()


class FixedLogits:
    """A model whose logits are given: predict_logits(xs) -> logits[xs]."""
    def __init__(self, logits):
        self.logits = np.asarray(logits, np.float32)

    def predict_logits(self, xs, batchsize):
        return self.logits[np.asarray(xs)]


def test_the_dev_loss_and_accuracy_weight_every_example_alike():
    """Known answer: logits (2, 0), (0, 1), (0, 0) at labels 0, 0, 1: losses log(1 + e^-2),
    log(1 + e), log 2; one of three right. Chainer's Evaluator in batches of 2 would give
    the mean of the batch means (accuracy (1/2 + 0) / 2 = 0.25)."""
    model = FixedLogits([[2, 0], [0, 1], [0, 0]])
    loss, accuracy = chainer_trainer.dev_losses(model, [(0, 0), (1, 0), (2, 1)], batchsize=2)
    expected = (np.log1p(np.exp(-2)) + np.log1p(np.e) + np.log(2)) / 3
    assert loss == pytest.approx(expected, rel=1e-6) and accuracy == pytest.approx(1 / 3)


def test_the_logged_dev_accuracy_is_the_best_models_dev_accuracy(tmp_path):
    """The run also records its BLAS thread counts, which retraining to the bit needs.
    Training in batches of 3 on 8 dev examples with some labels flipped (so neither
    0 nor 1): the epoch's validation accuracy in `log` is the accuracy over the dev
    examples that train_result.json reports for the saved model, to the last digit."""
    rng = np.random.RandomState(3)
    rows = cli_helpers.lines(80, 0).splitlines()
    noisy = [('pos' if row.startswith('neg') else 'neg') + row[3:] if rng.rand() < 0.3 else row
             for row in rows]
    (tmp_path / 'train.txt').write_text('\n'.join(noisy) + '\n')
    (tmp_path / 'test.txt').write_text(cli_helpers.lines(20, 1))
    out = tmp_path / 'run'
    argv = cli_helpers.train_argv(out, (str(tmp_path / 'train.txt'), str(tmp_path / 'test.txt')))
    argv[argv.index('--batchsize') + 1] = '3'
    import train_text_classifier
    train_text_classifier.main(argv)
    logged = json.loads((out / 'log').read_text())[-1]['validation/main/accuracy']
    reported = json.loads((out / 'train_result.json').read_text())['dev_accuracy']
    assert 0 < reported < 1 and logged == reported
    threads = json.loads((out / 'train_result.json').read_text())['blas_threads']
    assert threads == training.blas_threads() and all(n >= 1 for n in threads.values())
    assert (out / 'train.log').read_text().splitlines()[-1] == 'BLAS threads ' + json.dumps(threads)
    # --dev-average batches: Chainer's Evaluator, the mean of the batch means in file order
    batches = tmp_path / 'batches'
    argv[argv.index('--out') + 1] = str(batches)
    train_text_classifier.main(argv + ['--dev-average', 'batches'])
    setup = model_setup.load_setup(str(batches / 'args.json'))
    dev = setup.encode(setup.splits.dev)
    logits = setup.model.predict_logits([x for x, _ in dev])
    right = logits.argmax(axis=1) == np.array([y for _, y in dev])
    logged = json.loads((batches / 'log').read_text())[-1]['validation/main/accuracy']
    assert setup.config.dev_average == 'batches' and len(dev) == 8
    assert logged == pytest.approx(np.mean([right[:3].mean(), right[3:6].mean(),
                                            right[6:].mean()]))
    assert logged != pytest.approx(right.mean())


def test_a_run_config_refuses_an_unknown_dev_average():
    with pytest.raises(UserError, match="field 'dev_average' is 'median', expected one of "
                                        "examples, batches"):
        model_setup.RunConfig.from_json(dict(template_config().to_json(), dev_average='median'))


def test_a_model_at_the_majority_rate_is_warned_about(tmp_path, capsys):
    """One class in 90% of the lines, a learning rate too small to move: dev accuracy is
    the majority rate, and training says so."""
    rows = ['{} the film {}'.format(*(('neg', 'was bad') if i % 10 else ('pos', 'was good')))
            for i in range(200)]
    (tmp_path / 'train.txt').write_text('\n'.join(rows) + '\n')
    (tmp_path / 'test.txt').write_text('\n'.join(rows[:20]) + '\n')
    train_text_classifier.main(cli_helpers.train_argv(
        tmp_path / 'run', (str(tmp_path / 'train.txt'), str(tmp_path / 'test.txt')),
        '--lr', '1e-9'))
    assert 'is the majority-class rate' in capsys.readouterr().err
    assert training.majority_rate([(None, 0), (None, 1), (None, 1), (None, 1)]) == 0.75
