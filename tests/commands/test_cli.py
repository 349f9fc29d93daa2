"""deepknn/cli/__init__.py: argument types, run_cli's one-line errors naming flags, the machine load."""
import argparse
import glob
import io
import json
import os
import re

import pytest

import cli_helpers
from deepknn import cli
from deepknn.storage import result_folder
from nlp_utils import UserError
import train_text_classifier

from cli_helpers import ROOT


def test_positive_int_rejects_zero():
    assert cli.positive_int('3') == 3
    for bad in ('0', '-2', 'x'):
        with pytest.raises(argparse.ArgumentTypeError, match='>= 1'):
            cli.positive_int(bad)


@pytest.mark.parametrize('parse, text', [
    (cli.positive_int, '0'), (cli.non_negative_int, '-1'),
    (cli.fraction, '1.5'), (cli.fraction, '1'), (cli.fraction, 'nan'),
    (cli.positive_int, 'many'), (cli.seed, '1' + '0' * 400), (cli.positive_number, 'inf')])
def test_argument_types_refuse_out_of_range_values(parse, text):
    with pytest.raises(argparse.ArgumentTypeError, match='must be'):
        parse(text)


def test_machine_load_counts_other_running_processes(monkeypatch):
    """/proc/loadavg's running count includes the reader: 3 running -> 2 others."""
    from deepknn.cli import plumbing
    monkeypatch.setattr(plumbing.os, 'getloadavg', lambda: (4.31, 1.0, 0.5))
    monkeypatch.setattr(plumbing.os, 'cpu_count', lambda: 2)
    monkeypatch.setattr(plumbing, 'open', lambda *a, **k: io.StringIO('4.31 1.00 0.50 3/250 999\n'),
                        raising=False)
    assert cli.machine_load() == '2 CPUs, 2 other processes running, load average 4.3'

    def no_proc(*args, **kwargs):
        raise OSError('no /proc here')
    monkeypatch.setattr(plumbing, 'open', no_proc, raising=False)
    assert cli.machine_load() == '2 CPUs, load average 4.3'


def test_ctrl_c_in_any_command_is_one_line_and_exit_130(capsys):
    def interrupted():
        raise KeyboardInterrupt
    with pytest.raises(SystemExit) as stop:
        cli.run_cli(interrupted)
    assert stop.value.code == 130 and capsys.readouterr().err == 'interrupted\n'


# ---------------------------------------------------------------- parameters shown as flags
@pytest.mark.parametrize('message, parameter, shown', [
    ('choose a smaller `k`', None, 'choose a smaller --k'),
    ('re-train with `n_calib` > 0 or `dev_fraction` > 0', None,
     're-train with --n-calib > 0 or --dev-fraction > 0'),
    ('pass an existing `word_vectors` file', None, 'pass an existing --word_vectors file'),
    ('`dtype` float64 is not stored', None, '--activation-dtype float64 is not stored'),
    ('`index_options` must be a dict', None, '`index_options` must be a dict'),   # no flag
    ('k must be >= 1, got 0', 'k', '--k must be >= 1, got 0'),
    ('n_calib must be >= 0; lower `n_calib`', 'n_calib',
     '--n-calib must be >= 0; lower --n-calib'),
    ('request body is not JSON', 'request', 'request body is not JSON'),   # no flag
    ('kind of index', 'k', 'kind of index'),   # `k` is not the message's first word
    ('no temperature.json in R; run `scaling` `model_setup` R/args.json first', None,
     'no temperature.json in R; run python scaling.py --model-setup R/args.json first'),
])
def test_library_parameters_are_shown_as_their_flags(message, parameter, shown):
    assert cli.command_line_message(UserError(message, parameter)) == shown


def test_every_parameter_flag_is_a_flag_of_some_command():
    """A flag renamed or removed from every command must leave PARAMETER_FLAGS too."""
    defined = set()
    for pattern in ('*.py', 'scripts/*.py', 'benchmarks/*.py'):
        for path in glob.glob(os.path.join(ROOT, pattern)):
            with open(path, encoding='utf-8') as source:
                defined.update(re.findall(r"add_argument\(\s*'(--[\w-]+)'", source.read()))
    with open(os.path.join(ROOT, 'deepknn', 'cli', '__init__.py'), encoding='utf-8') as source:
        defined.update(re.findall(r"'(--[\w-]+)'", source.read()))   # the shared flags
    assert set(cli.PARAMETER_FLAGS.values()) - defined == set()
    assert '--k' in defined and '--n-calib' in defined   # the scan finds flags at all


def test_every_step_command_runs_a_command_of_the_checkout():
    for command in cli.STEP_COMMANDS.values():
        python, script = command.split()
        assert python == 'python' and os.path.isfile(os.path.join(ROOT, script))


def test_a_command_is_named_by_its_path_in_the_checkout(tmp_path):
    assert cli.command_name(os.path.join(ROOT, 'run_dknn.py')) == 'run_dknn.py'
    assert cli.command_name(os.path.join(ROOT, 'scripts', 'knn_removal.py')) == \
        'scripts/knn_removal.py'
    assert cli.command_name(str(tmp_path / 'elsewhere.py')) == 'elsewhere.py'


def test_run_cli_prints_flags_and_the_notes_on_one_line(capsys):
    def fails():
        error = UserError('`out` /x already exists; pass `force`')
        error.add_note('training stopped; rerun with `resume`')
        raise error
    with pytest.raises(SystemExit) as stop:
        cli.run_cli(fails)
    assert stop.value.code == 2 and capsys.readouterr().err == (
        'error: --out /x already exists; pass --force; training stopped; rerun with --resume\n')


def test_a_command_line_user_reads_the_flag_a_library_message_names(tmp_path, capsys):
    """splits.py names `n_calib`; train_text_classifier.py's user reads --n-calib."""
    train, test = tmp_path / 'train.txt', tmp_path / 'test.txt'
    train.write_text(cli_helpers.lines(80, 0))
    test.write_text(cli_helpers.lines(20, 1))
    argv = cli_helpers.train_argv(tmp_path / 'run', (str(train), str(test)))
    argv[argv.index('--n-calib') + 1] = '70'
    status, errors = cli_helpers.cli(train_text_classifier.main, argv, capsys)
    assert status == 2 and len(errors) == 1
    assert errors[0].startswith('error: custom: --n-calib 70 is too large: of 80 training ')
    assert errors[0].endswith('; use a smaller --n-calib')
    assert not (tmp_path / 'run').exists()


def test_a_trained_folder_is_marked_as_made_by_the_command(tmp_path):
    """The library names no script: train_text_classifier.py passes its own name."""
    cli_helpers.train_tiny(tmp_path, tmp_path / 'run')
    marker = json.loads((tmp_path / 'run' / result_folder.MARKER).read_text())
    assert marker['created_by'] == 'train_text_classifier.py'


def test_help_shows_a_default_once_and_never_none():
    parser = cli.ArgumentParser(prog='demo')
    parser.add_argument('--k', type=int, default=3, help='neighbours')
    parser.add_argument('--model-setup', help='args.json of a trained run')
    parser.add_argument('--n-validation', type=int, default=None,
                        help='pairs that tune tau (default: half of the set)')
    parser.add_argument('--layer', type=int, default=-2, help='layer (default -2: the last)')
    text = ' '.join(parser.format_help().split())
    assert 'neighbours (default: 3)' in text
    assert 'default: None' not in text
    assert text.count('default') == 3   # --k's, and the two the help words itself
    assert '(default -2: the last) (default' not in text


def test_dknn_settings_of_a_command_without_the_flags_are_the_settings_defaults():
    """A command without --backend, --batchsize, ... gets DkNNSettings' own defaults (the
    defaults are stated once, there)."""
    import argparse
    from deepknn.neighbors.dknn_settings import DkNNSettings
    assert cli.dknn_settings(argparse.Namespace(k=5), None) == DkNNSettings(k=5)
    given = cli.dknn_settings(argparse.Namespace(k=5, backend='kdtree', batchsize=7), None)
    assert (given.backend, given.batchsize, given.neighbor_labels) == ('kdtree', 7, 'gold')
