"""--out DIR and --name STEM in every command that writes files, and the old spellings
(--table PATH, --output FILE, --out DIR/STEM, --out FILE.md) kept as hidden aliases that
resolve to exactly the paths they always gave."""
import os
import types

import pytest

from cli_helpers import parsed_args
from deepknn import cli
from nlp_utils import UserError


def stem_of(script, argv, monkeypatch):
    """The DIR/STEM `python script argv` writes under, found by the function the
    command itself calls."""
    module, args = parsed_args(script, argv, monkeypatch)
    if script == 'interpretations.py':
        paths = module.output_paths(args, types.SimpleNamespace(result_dir='RUN'), 'test')
        return paths['html'], paths['csv'], paths['png']
    if script == 'reduce_inputs.py':
        return module.output_stem(args, 'run')
    if hasattr(module, 'output_stem'):
        return module.output_stem(args)
    return cli.benchmark_table(args)


RUN = ['--model-setup', 'results/r/args.json']
KNN = 'run_knn_representations.py'
SAME_PATHS = [
    ('interpretations.py', RUN + ['--output', 'd/maps.html', '--png', 'd/maps.png'],
     RUN + ['--out', 'd', '--name', 'maps', '--png'], ('d/maps.html', 'd/maps.csv', 'd/maps.png')),
    ('predict.py', RUN + ['--input', 'x.txt', '--out', 'd/mine'],
     RUN + ['--input', 'x.txt', '--out', 'd', '--name', 'mine'], 'd/mine'),
    ('reduce_inputs.py', RUN + ['--out', 'd'], RUN + ['--out', 'd', '--name', 'reduction_run_dev'],
     'd/reduction_run_dev'),
    (KNN, ['backoff'] + RUN + ['--table', 'd/t'], ['backoff'] + RUN + ['--out', 'd', '--name', 't'],
     'd/t'),
    (KNN, ['explain'] + RUN + ['--out', 'd/t'], ['explain'] + RUN + ['--out', 'd', '--name', 't'],
     'd/t'),
    (KNN, ['retrieved'] + RUN + ['--out', 'd/t'],
     ['retrieved'] + RUN + ['--out', 'd', '--name', 't'], 'd/t'),
    (KNN, ['detect'] + RUN + ['--out', 'd/t'], ['detect'] + RUN + ['--out', 'd', '--name', 't'],
     'd/t'),
    (KNN, ['contrast', '--model-setup', 'a', 'b', '--out', 'd/t'],
     ['contrast', '--model-setup', 'a', 'b', '--out', 'd', '--name', 't'], 'd/t'),
    (KNN, ['candidates'] + RUN + ['--out', 'd/t'],
     ['candidates'] + RUN + ['--out', 'd', '--name', 't'], 'd/t'),
    (KNN, ['negation', '--out', 'd/t'], ['negation', '--out', 'd', '--name', 't'], 'd/t'),
    ('scripts/knn_removal.py', ['--template', 'r/args.json', '--runs', 'x', '--table', 'd/t'],
     ['--template', 'r/args.json', '--runs-dir', 'x', '--out', 'd', '--name', 't'], 'd/t'),
] + [('benchmarks/{}.py'.format(name), RUN + ['--out', 'd/{}.md'.format(name)],
      RUN + ['--out', 'd', '--name', name], 'd/' + name)
     for name in ('bench_dknn_throughput', 'bench_explorer', 'bench_faithfulness',
                  'bench_input_reduction', 'bench_interpretations', 'bench_plausibility',
                  'bench_transformer')] + [
    ('benchmarks/bench_knn_backoff.py', RUN + ['--out', 'd/t'], RUN + ['--out', 'd', '--name', 't'],
     'd/t'),
    ('benchmarks/bench_ray.py', RUN + ['--out', 'd/t'], RUN + ['--out', 'd', '--name', 't'], 'd/t'),
    ('benchmarks/bench_knn_scale.py', ['--out', 'd/t.md'], ['--out', 'd', '--name', 't'], 'd/t'),
    ('benchmarks/bench_lstm.py', ['--out', 'd/t.md'], ['--out', 'd', '--name', 't'], 'd/t')]


@pytest.mark.parametrize('script, old, new, expected', SAME_PATHS,
                         ids=['{} {}'.format(s, o[0]) for s, o, _, _ in SAME_PATHS])
def test_the_old_spelling_writes_where_the_new_one_does(script, old, new, expected,
                                                        monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)      # 'd' is no folder here: the old --out d/t is a path
    monkeypatch.setattr(cli, 'model_setup_path', str)   # the runs need not exist here
    old_stem = stem_of(script, old, monkeypatch)
    assert old_stem == stem_of(script, new, monkeypatch) == expected
    assert not os.listdir(str(tmp_path))      # parsing and resolving wrote nothing


@pytest.mark.parametrize('argv, expected', [
    (['explain', '--model-setup', 'runs/r/args.json'], 'runs/r/knn_explanations_test'),
    (['retrieved', '--model-setup', 'runs/r/args.json', '--split', 'dev'],
     'runs/r/knn_retrieved_dev'),
    (['backoff', '--model-setup', 'runs/r/args.json'], 'results/rajani/knn_backoff'),
    (['detect', '--model-setup', 'runs/r/args.json', '--name', 'x'], 'results/rajani/x'),
    (['negation', '--out', 'mine/'], 'mine/knn_negation')])
def test_defaults_and_a_folder_out(argv, expected, monkeypatch):
    monkeypatch.setattr(cli, 'model_setup_path', str)
    assert stem_of(KNN, argv, monkeypatch) == expected


@pytest.mark.parametrize('argv, expected', [
    (['table1'], 'results/wallace/table1'), (['--out', 'd', 'table1', '--name', 't'], 'd/t'),
    (['faithfulness', '--run', 'r'], 'results/faithfulness/faithfulness_r_test'),
    (['--out', 'd', 'faithfulness', '--run', 'r', '--name', 'f'], 'd/f'),
    (['plausibility-summary', '--runs', 'a,b', '--name', 's'], 'results/faithfulness/s'),
    (['entropy', '--runs', 'a'], 'results/feng/entropy_regularization'),
    (['highlights', '--run', 'r'], 'results/wallace/highlights_r'),
    (['--out', 'd', 'table2', '--run', 'r', '--name', 't'], 'd/t')])
def test_paper_results_subcommands_write_under_out_and_name(argv, expected, monkeypatch):
    assert stem_of('paper_results.py', argv, monkeypatch) == expected


def test_an_analysis_with_another_normalization_gets_its_suffix(monkeypatch):
    module, args = parsed_args('paper_results.py', [
        '--out', 'd', 'terribly', '--run', 'r', '--name', 't', '--normalization', 'per-sign'],
        monkeypatch)
    args.stem = module.output_stem(args)
    assert module.analysis_stem(args) == 'd/t_per-sign'


def test_an_existing_folder_given_as_out_is_a_folder_even_where_out_was_a_path(
        monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, 'model_setup_path', str)
    (tmp_path / 'd').mkdir()
    assert stem_of('predict.py', RUN + ['--input', 'x', '--out', 'd'], monkeypatch) == \
        'd/predictions'


@pytest.mark.parametrize('argv, message', [
    (['backoff', '--model-setup', 'r', '--table', 'd/t', '--out', 'd'],
     '--table is the old spelling of --out DIR --name STEM'),
    (['backoff', '--model-setup', 'r', '--name', 'd/t'], "--name 'd/t' is not a file stem"),
    (['explain', '--model-setup', 'r', '--out', 'd/.'], '--out d/. names a folder')])
def test_contradicting_or_bad_output_flags_are_one_line_errors(argv, message, monkeypatch):
    monkeypatch.setattr(cli, 'model_setup_path', str)
    with pytest.raises(UserError) as error:
        stem_of(KNN, argv, monkeypatch)
    assert str(error.value).startswith(message) and '\n' not in str(error.value)
