"""Every command line the documentation shows, and every `Produced by` line of a committed
table, parses with its command's own parser: a renamed or removed flag fails here.

The command lines are read from the ```bash blocks of README.md, docs/*.md and
results/README.md, and from the `Produced by: `python ...`` lines of results/**/*.md.
Each is run through its script's `main` with `ArgumentParser.parse_args` patched to
stop right after parsing, so nothing is trained or written.
"""
import argparse
import glob
import os
import re
import shlex
import sys

import pytest

from cli_helpers import load_script
from deepknn import cli

from cli_helpers import ROOT
PYTHON = re.compile(r'^(?:\S*/)?python3?$')
SHELL_BREAKS = {'&&', '||', ';', '|', '>', '>>', '<', '2>', '&'}


class Parsed(Exception):
    """Raised by the patched parse_args once a command line has parsed."""


def documented_files():
    return ([os.path.join(ROOT, 'README.md'), os.path.join(ROOT, 'results', 'README.md')]
            + sorted(glob.glob(os.path.join(ROOT, 'docs', '*.md'))))


def bash_blocks(text):
    """The shell lines of every ```bash block, continuation lines joined."""
    for block in re.findall(r'```bash\n(.*?)```', text, re.DOTALL):
        yield from re.sub(r'\\\n\s*', ' ', block).splitlines()


def python_commands(line):
    """[(script, argv)] of the `python script.py ...` commands on a shell line."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return []
    commands, current = [], []
    for word in words + [';']:
        if word in SHELL_BREAKS:
            commands.append(current)
            current = []
        else:
            current.append(word)
    found = []
    for words in commands:
        while words and re.match(r'^[A-Z_]+=', words[0]):      # VAR=value prefixes
            words = words[1:]
        if len(words) >= 2 and PYTHON.match(words[0]) and words[1].endswith('.py'):
            found.append((words[1], words[2:]))
    return found


def documented_command_lines():
    """[(where, script, argv)] of every documented and every produced-by command."""
    lines = []
    for path in documented_files():
        with open(path, encoding='utf-8') as f:
            text = f.read()
        lines += [(os.path.relpath(path, ROOT), script, argv) for line in bash_blocks(text)
                  for script, argv in python_commands(line)]
    for path in sorted(glob.glob(os.path.join(ROOT, 'results', '**', '*.md'), recursive=True)):
        with open(path, encoding='utf-8') as f:
            for command in re.findall(r'Produced by: `(python [^`]*)`', f.read()):
                lines += [(os.path.relpath(path, ROOT), script, argv)
                          for script, argv in python_commands(command)]
    return lines


COMMANDS = documented_command_lines()


def test_the_documentation_shows_commands_to_check():
    scripts = {script for _, script, _ in COMMANDS}
    assert {'train_text_classifier.py', 'run_dknn.py', 'predict.py', 'paper_results.py'} <= scripts


@pytest.mark.parametrize('where, script, argv', COMMANDS,
                         ids=['{}: {}'.format(w, ' '.join([s] + a))[:90] for w, s, a in COMMANDS])
def test_documented_command_parses(where, script, argv, monkeypatch, capsys):
    assert os.path.isfile(os.path.join(ROOT, script)), '{} names {}, which does not exist'.format(
        where, script)
    real = argparse.ArgumentParser.parse_args

    def parse_and_stop(self, args=None, namespace=None):
        real(self, args, namespace)
        raise Parsed()
    monkeypatch.setattr(argparse.ArgumentParser, 'parse_args', parse_and_stop)
    monkeypatch.setattr(cli, 'model_setup_path', str)   # the runs need not exist here
    monkeypatch.setattr(sys, 'argv', [script] + argv)
    module = load_script(script)
    with pytest.raises((Parsed, SystemExit)) as stopped:
        main = module.main
        main(argv) if main.__code__.co_argcount else main()
    assert stopped.type is Parsed, '{}: `python {} {}` does not parse: {}'.format(
        where, script, ' '.join(argv), capsys.readouterr().err.strip())
