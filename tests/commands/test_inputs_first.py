"""Inputs before outputs, and one --split choice set: a command pointed at a run that does
not exist names the run and how to make it even where its output already exists (not
"exists; pass --overwrite"), and --split reads the same four names everywhere."""
import argparse
import sys
import types

import pytest

from cli_helpers import cli, load_script
from deepknn import cli as cli_lib
from nlp_utils import UserError

# (script, argv with RUN for the missing run and OUT for the output folder, existing output)
MISSING_RUN = [
    ('interpretations.py', ['--model-setup', 'RUN', '--out', 'OUT', '--name', 'maps'], 'maps.html'),
    ('predict.py', ['--model-setup', 'RUN', '--input', 'x.txt', '--out', 'OUT', '--name', 'p'],
     'p.csv'),
    ('reduce_inputs.py', ['--model-setup', 'RUN', '--out', 'OUT', '--name', 'r'], 'r.md'),
    ('run_dknn.py', ['--model-setup', 'RUN', '--out', 'OUT'], 'dknn_test_faiss.json'),
    ('scaling.py', ['--model-setup', 'RUN'], None),
    ('finetune_entropy.py', ['--model-setup', 'RUN', '--out', 'OUT'], 'args.json'),
    ('explore.py', ['--model-setup', 'RUN', '--export', 'OUT'], 'index.html'),
    ('scripts/knn_removal.py', ['--template', 'RUN', '--out', 'OUT', '--name', 't'], 't.md'),
    ('scripts/knn_robustness.py', ['--model-setup', 'RUN', '--out', 'OUT'], 'knn_robustness.md'),
    ('scripts/knn_cv_loss.py', ['--model-setup', 'RUN'], None),
] + [('run_knn_representations.py', [command, '--model-setup', 'RUN'] + extra +
      ['--out', 'OUT', '--name', 't'], 't.md')
     for command, extra in (('backoff', []), ('explain', []), ('retrieved', []), ('detect', []),
                            ('contrast', ['RUN']), ('candidates', []))] + [
    ('benchmarks/{}.py'.format(name), ['--model-setup', 'RUN', '--out', 'OUT', '--name', 'b'],
     'b.md') for name in ('bench_dknn_throughput', 'bench_explorer', 'bench_faithfulness',
                          'bench_input_reduction', 'bench_interpretations', 'bench_knn_backoff',
                          'bench_plausibility', 'bench_ray', 'bench_transformer')]


def run(script, argv, capsys, monkeypatch):
    """(exit status, stderr lines) of `python script argv`, run in this process."""
    main = load_script(script).main
    if main.__code__.co_argcount:
        return cli(main, argv, capsys)
    monkeypatch.setattr(sys, 'argv', [script] + argv)     # a main() that reads sys.argv
    return cli(lambda _: main(), argv, capsys)


@pytest.mark.parametrize('script, argv, existing', MISSING_RUN,
                         ids=['{} {}'.format(s, a[0]) for s, a, _ in MISSING_RUN])
def test_a_missing_run_is_named_before_any_output_is_looked_at(script, argv, existing,
                                                               tmp_path, capsys, monkeypatch):
    out, missing = tmp_path / 'out', tmp_path / 'no_such_run'
    out.mkdir()
    if existing:
        (out / existing).write_text('committed numbers\n')
    argv = [{'RUN': str(missing), 'OUT': str(out)}.get(word, word) for word in argv]
    status, err = run(script, argv, capsys, monkeypatch)
    assert status == 2 and len(err) == 1, err
    assert '{0} is no trained run ('.format(missing) in err[0] and 'overwrite' not in err[0]
    assert 'make it with `python train_text_classifier.py --out {}`'.format(missing) in err[0]
    assert [p.name for p in out.iterdir()] == ([existing] if existing else [])


def test_paper_results_names_a_missing_run_before_its_committed_table(tmp_path, capsys,
                                                                     monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'results').mkdir()
    (tmp_path / 'results' / 'highlights_nope.md').write_text('committed numbers\n')
    status, err = cli(load_script('paper_results.py').main, ['highlights', '--run', 'nope'],
                      capsys)
    assert status == 2 and 'nope holds no trained run; make it with' in err[0], err


def split_flag(script, argv=()):
    """The --split action of a command's parser, found by parsing its flags."""
    seen = {}
    real = argparse.ArgumentParser.parse_args

    def capture(self, args=None, namespace=None):
        for action in self._actions:
            if '--split' in action.option_strings:
                seen['action'] = action
        real(self, args, namespace)
        raise SystemExit(0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, 'parse_args', capture)
        patch.setattr(cli_lib, 'model_setup_path', str)
        with pytest.raises(SystemExit):
            module = load_script(script)
            module.main(list(argv)) if module.main.__code__.co_argcount else module.main()
    return seen['action']


@pytest.mark.parametrize('script', ['interpretations.py', 'reduce_inputs.py', 'run_dknn.py',
                                    'scaling.py', 'explore.py'])
def test_every_split_flag_has_the_one_choice_set(script, monkeypatch):
    monkeypatch.setattr('sys.argv', [script, '--model-setup', 'r'])
    assert tuple(split_flag(script, ['--model-setup', 'r']).choices) == cli_lib.SPLITS


def test_a_split_a_command_cannot_use_is_refused_when_the_flags_are_read(any_run_path, capsys):
    status, err = cli(load_script('scaling.py').main,
                      ['--model-setup', 'r', '--split', 'calib'], capsys)
    assert status == 2 and 'argument --split: calib: the temperature is fitted there' in err[0]


def test_an_empty_split_names_the_run_and_the_calibration_flag():
    setup = types.SimpleNamespace(result_dir='results/r', splits=types.SimpleNamespace(
        calib=[], dev=[(['a'], 0)]))
    assert cli_lib.split_examples(setup, 'dev') == [(['a'], 0)]
    with pytest.raises(UserError, match=r'^--split calib: the calib split of results/r is '
                                        r'empty \(trained with --n-calib 0\)'):
        cli_lib.split_examples(setup, 'calib')
