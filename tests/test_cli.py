"""deepknn/cli.py: argument types, run_cli's one-line errors, the machine-load line."""
import argparse
import io

import pytest

from deepknn import cli


def test_positive_int_rejects_zero():
    assert cli.positive_int('3') == 3
    for bad in ('0', '-2', 'x'):
        with pytest.raises(argparse.ArgumentTypeError, match='>= 1'):
            cli.positive_int(bad)


@pytest.mark.parametrize('parse, text', [
    (cli.positive_int, '0'), (cli.non_negative_int, '-1'),
    (cli.fraction, '1.5'), (cli.fraction, '1'), (cli.fraction, 'nan'),
    (cli.positive_int, 'many')])
def test_argument_types_refuse_out_of_range_values(parse, text):
    with pytest.raises(argparse.ArgumentTypeError, match='must be'):
        parse(text)


def test_machine_load_counts_other_running_processes(monkeypatch):
    """/proc/loadavg's running count includes the reader: 3 running -> 2 others."""
    monkeypatch.setattr(cli.os, 'getloadavg', lambda: (4.31, 1.0, 0.5))
    monkeypatch.setattr(cli.os, 'cpu_count', lambda: 2)
    monkeypatch.setattr(cli, 'open', lambda *a, **k: io.StringIO('4.31 1.00 0.50 3/250 999\n'),
                        raising=False)
    assert cli.machine_load() == '2 CPUs, 2 other processes running, load average 4.3'

    def no_proc(*args, **kwargs):
        raise OSError('no /proc here')
    monkeypatch.setattr(cli, 'open', no_proc, raising=False)
    assert cli.machine_load() == '2 CPUs, load average 4.3'


def test_ctrl_c_in_any_command_is_one_line_and_exit_130(capsys):
    def interrupted():
        raise KeyboardInterrupt
    with pytest.raises(SystemExit) as stop:
        cli.run_cli(interrupted)
    assert stop.value.code == 130 and capsys.readouterr().err == 'interrupted\n'
