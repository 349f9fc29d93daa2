"""DkNNSettings: validated once, errors naming the parameter (rendered as the flag by the
command lines), and deepknn/cli/__init__.py's mapping of a command's flags onto it."""
import pytest

from deepknn import cli
from deepknn.neighbors.dknn_settings import DkNNSettings
from deepknn.distributed.engine import RayEngine
import nlp_utils
from nlp_utils import UserError
import run_dknn
import interpretations


@pytest.mark.parametrize('fields, parameter, message', [
    (dict(k=0), 'k', 'k must be a positive integer, got 0'),
    (dict(k=True), 'k', 'k must be a positive integer, got True'),
    (dict(k=2.5), 'k', 'k must be a positive integer, got 2.5'),
    (dict(batchsize=-1), 'batchsize', 'batchsize must be a positive integer, got -1'),
    (dict(backend='annoy'), 'backend', "backend must be one of kdtree, lsh, faiss, got 'annoy'"),
    (dict(neighbor_labels='noisy'), 'neighbor_labels',
     "neighbor_labels must be one of gold, predicted, got 'noisy'"),
    (dict(last_layer_only='yes'), 'last_layer_only',
     "last_layer_only must be True or False, got 'yes'"),
    (dict(engine='ray'), 'engine', "engine must be None or a RayEngine, got 'ray'"),
    (dict(backend='kdtree', engine=RayEngine(storage='s')), 'backend',
     "backend must be faiss with a Ray engine (it searches faiss shards), got 'kdtree'"),
])
def test_a_bad_setting_is_one_line_naming_the_parameter(fields, parameter, message):
    with pytest.raises(UserError) as raised:
        DkNNSettings(**fields)
    assert str(raised.value) == message and raised.value.parameter == parameter
    assert cli.command_line_message(raised.value) == cli.PARAMETER_FLAGS[parameter] + \
        message[len(parameter):]


def test_unknown_index_options_are_refused_on_construction():
    with pytest.raises(UserError, match=r"unknown option\(s\) n_bits for backend 'faiss'"):
        DkNNSettings(index_options={'n_bits': 8})
    assert DkNNSettings(backend='lsh', index_options={'n_bits': 8}).index_options == {'n_bits': 8}


def test_settings_are_frozen_and_with_k_validates():
    settings = DkNNSettings()
    assert (settings.k, settings.backend, settings.neighbor_labels, settings.batchsize,
            settings.engine) == (75, 'faiss', 'gold', 64, None)
    with pytest.raises(AttributeError):
        settings.k = 3
    assert settings.with_k(7).k == 7 and settings.k == 75
    with pytest.raises(UserError, match='k must be a positive integer, got 0'):
        settings.with_k(0)


def test_run_dknn_flags_map_onto_the_settings(any_run_path):
    args = run_dknn.parse_args(['--model-setup', 'r/args.json', '--k', '7', '--faiss-kind',
                                'ivfpq', '--pq-m', '4', '--nprobe', '3',
                                '--neighbor-labels', 'predicted', '--last-layer-only',
                                '--batchsize', '9'])
    settings = cli.dknn_settings(args, 'r')
    assert settings == DkNNSettings(k=7, backend='faiss', neighbor_labels='predicted',
                                    last_layer_only=True, batchsize=9, index_options={
                                        'kind': 'ivfpq', 'nprobe': 3, 'ef_search': 128,
                                        'pq_m': 4})
    lsh = cli.dknn_settings(run_dknn.parse_args(['--model-setup', 'r', '--backend', 'lsh',
                                                 '--lsh-bits', '6']), 'r')
    assert lsh.index_options == {'n_bits': 6} and lsh.engine is None


def test_a_command_without_index_flags_gets_the_defaults_and_its_engine(any_run_path, tmp_path):
    args = interpretations.parse_args(['--model-setup', 'r', '--k', '5', '--engine', 'ray',
                                       '--shards', '3'])
    settings = cli.dknn_settings(args, str(tmp_path))
    assert (settings.k, settings.index_options, settings.neighbor_labels) == (5, {}, 'gold')
    assert settings.engine.shards == 3 and settings.engine.storage == str(tmp_path / 'ray_storage')
    with pytest.raises(UserError, match='--shards needs --engine ray'):
        cli.dknn_settings(interpretations.parse_args(['--model-setup', 'r', '--shards', '3']),
                          str(tmp_path))


def test_run_cli_names_the_flag_of_a_bad_setting(capsys):
    def main():
        DkNNSettings(k=0)
    with pytest.raises(SystemExit):
        cli.run_cli(main)
    assert capsys.readouterr().err.strip() == 'error: --k must be a positive integer, got 0'
