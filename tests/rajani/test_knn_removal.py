"""scripts/knn_removal.py: retrains with the template's configuration, drops computed per seed."""
import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'scripts'))
import cli_helpers  # noqa: E402
import knn_removal  # noqa: E402
from deepknn.models import model_setup
from deepknn.models import training  # noqa: E402
from deepknn.models.model_setup import RunConfig  # noqa: E402
import nlp_utils  # noqa: E402
from nlp_utils import UserError  # noqa: E402


def template_config(**changes):
    values = dict(dataset='cad-snli', model='cnn', word_vectors='/v.txt.gz', embed_dim=50,
                  batchsize=32, epoch=7, unit=60, layer=1, dropout=0.25, data_dir='/data',
                  dev_fraction=0.2, min_freq=3, vocab='train', skip_bad_lines=True, seed=5,
                  n_calib=100, label_noise=0.1, n_class=3, pair=True, char_based=False,
                  vocab_path='vocab.json', model_path='best_model.npz', vocab_digest='abc',
                  extra={'finetuned_from': '..'})
    return RunConfig(**dict(values, **changes))


def test_a_retrained_run_has_exactly_the_templates_settings():
    """Every setting comes back (--vocab train included, which the flag rebuilding of
    the first version dropped); only seed, calibration size and exclusions change."""
    template = template_config()
    config = knn_removal.retrain_config(template, seed=2, n_calib=0, exclude='/x.json')
    for name in training.SETTINGS + training.CHAINER_SETTINGS:
        expected = {'seed': 2, 'n_calib': 0, 'exclude_train': '/x.json',
                    'label_noise': 0.0}.get(name, getattr(template, name))
        assert getattr(config, name) == expected, name
    assert config.vocab == 'train' and config.vocab_digest is None and config.extra == {}


def test_a_finished_run_with_other_settings_is_refused_not_reused(tmp_path, monkeypatch):
    out = tmp_path / 'seed1_full'
    out.mkdir()
    same = knn_removal.retrain_config(template_config(), 1, 100)
    model_setup.write_config(str(out), same.replace(n_vocab=321, vocab_digest='d'))  # derived
    (out / 'train_result.json').write_text('{"test_accuracy": 0.5}')
    trained = []
    monkeypatch.setattr(training, 'train', lambda *args, **kwargs: trained.append(args))
    assert knn_removal.train(str(out), same) == 0.5 and trained == []      # reused
    with pytest.raises(UserError, match='other settings .*epoch 7 not 9'):
        knn_removal.train(str(out), same.replace(epoch=9))
    assert trained == []


def test_an_unfinished_run_resumes_from_its_snapshot(tmp_path, monkeypatch):
    out = tmp_path / 'seed1_top10'
    out.mkdir()
    same = knn_removal.retrain_config(template_config(), 1, 100, '/x.json')
    model_setup.write_config(str(out), same.replace(n_vocab=321))
    (out / training.SNAPSHOT).write_bytes(b'epoch 1')
    calls = []

    def resumed(path, *args, **kwargs):
        calls.append(('resume', path))
        (out / 'train_result.json').write_text('{"test_accuracy": 0.7}')
    monkeypatch.setattr(training, 'continue_training', resumed)
    monkeypatch.setattr(training, 'train', lambda *args, **kwargs: calls.append(('train',)))
    with pytest.raises(UserError, match='other settings'):       # another run's snapshot
        knn_removal.train(str(out), same.replace(seed=2))
    assert calls == []
    assert knn_removal.train(str(out), same) == 0.7 and calls == [('resume', str(out))]


def fake_training(trained):
    """training.train writing what a finished run holds: its settings, the examples it
    excluded (train_changes.json) and a test accuracy that falls with each one. The run
    is made on behalf of the script, which names itself (the library names no script)."""
    def train(config, out, gpu=-1, force=False, created_by='training'):
        assert created_by == 'knn_removal.py'
        os.makedirs(out, exist_ok=True)
        model_setup.write_config(out, config)
        excluded = model_setup.read_exclusions(config.exclude_train)
        nlp_utils.atomic_write_json(os.path.join(out, 'train_changes.json'),
                                    {'excluded_indices': excluded, 'flipped_indices': []})
        nlp_utils.atomic_write_json(os.path.join(out, 'train_result.json'),
                                    {'test_accuracy': 0.9 - 0.1 * len(excluded)})
        trained.append(os.path.basename(out))
    return train


def test_a_run_is_reused_only_for_the_same_exclusion_set(any_run_path, tmp_path, monkeypatch):
    """A rerun into the same --runs with another --k retrieved other examples: it used
    to reuse the old k's retrain (a 0.0-point difference in the table) and overwrite
    that run's exclusion file."""
    trained = []
    monkeypatch.setattr(training, 'train', fake_training(trained))
    # k 1 retrieves examples 0 and 1 most often, k 2 examples 2 and 3.
    monkeypatch.setattr(knn_removal, 'retrieval_counts', lambda full, k, layer: np.array(
        [9, 8, 0, 0, 0, 0] if k == 1 else [0, 0, 9, 8, 0, 0]))

    def run(k):
        args = knn_removal.parse_args(['--template', 'x', '--runs', str(tmp_path), '--table',
                                       't', '--seeds', '1', '--fractions', '0.3', '--k', str(k)])
        return knn_removal.run_seed(args, template_config(), 1)
    assert run(1)[0.3, 'top'] == pytest.approx(0.7)
    assert trained == ['seed1_full', 'seed1_top30', 'seed1_random30']
    exclusions = tmp_path / 'seed1_top30.exclude.json'
    assert json.loads(exclusions.read_text()) == [0, 1]
    before = exclusions.stat().st_mtime_ns
    assert run(1)[0.3, 'top'] == pytest.approx(0.7) and len(trained) == 3   # reused
    assert exclusions.stat().st_mtime_ns == before            # not even rewritten
    with pytest.raises(UserError, match=r'seed1_top30 was trained without 2 training examples, '
                       r'not the 2 this call removes \(0 in common\).*seed1_top30\.exclude\.json '
                       r'stays as it was.*--k.*another --runs'):
        run(2)
    assert json.loads(exclusions.read_text()) == [0, 1] and len(trained) == 3


def test_a_folder_of_someone_elses_files_is_refused_naming_this_scripts_way_out(tmp_path):
    out = tmp_path / 'seed1_full'
    out.mkdir()
    (out / 'notes.txt').write_text('mine')
    with pytest.raises(UserError) as error:
        knn_removal.train(str(out), knn_removal.retrain_config(template_config(), 1, 100))
    assert 'another --runs' in str(error.value) and '--out' not in str(error.value)
    assert '--force' not in str(error.value) and (out / 'notes.txt').read_text() == 'mine'


def test_drops_are_full_minus_variant_in_points_averaged_over_seeds():
    per_seed = {1: {'full': 0.60, (0.1, 'top'): 0.50, (0.1, 'random'): 0.58},
                2: {'full': 0.70, (0.1, 'top'): 0.64, (0.1, 'random'): 0.70}}
    row, = knn_removal.table_rows(per_seed, [0.1])
    assert row['drop_most_retrieved'] == pytest.approx(8.0)
    assert row['drop_random'] == pytest.approx(1.0)
    assert row['seed 1 full / top / random'] == '60.0 / 50.0 / 58.0'
    assert (row['paper_drop_most_retrieved'], row['paper_drop_random']) == (4.6, 1.2)
    # Extra drops 8.0 and 6.0 > 0, mean 7.0 against a 10-point spread of the full models.
    assert row['extra_drop_per_seed'] == '8.0 / 6.0'
    assert row['full_seed_spread'] == pytest.approx(10.0)
    assert row['exceeds_seed_noise'] == 'no'


def test_an_extra_drop_beyond_seed_noise_is_called_so():
    per_seed = {1: {'full': 0.70, (0.3, 'top'): 0.60, (0.3, 'random'): 0.68},
                2: {'full': 0.71, (0.3, 'top'): 0.62, (0.3, 'random'): 0.70},
                3: {'full': 0.69, (0.3, 'top'): 0.61, (0.3, 'random'): 0.70}}
    row, = knn_removal.table_rows(per_seed, [0.3])
    assert row['extra_drop_per_seed'] == '8.0 / 8.0 / 9.0'      # spread 2.0 < mean 8.3
    assert row['exceeds_seed_noise'] == 'yes'
    per_seed[3][0.3, 'random'] = 0.60                           # seed 3: no extra drop
    assert knn_removal.table_rows(per_seed, [0.3])[0]['exceeds_seed_noise'] == 'no'
    one, = knn_removal.table_rows({1: per_seed[1]}, [0.3])
    assert one['exceeds_seed_noise'] == 'one seed: no spread'
    assert one['full_seed_spread'] == 'one seed'


def test_the_table_names_every_run_folder_and_its_weights(any_run_path, tmp_path):
    args = knn_removal.parse_args(['--template', 'x/args.json', '--runs', str(tmp_path),
                                   '--table', str(tmp_path / 't'), '--seeds', '1', '2',
                                   '--fractions', '0.1'])
    names = [os.path.basename(f) for f in knn_removal.run_folders(args)]
    assert names == ['seed1_full', 'seed1_top10', 'seed1_random10',
                     'seed2_full', 'seed2_top10', 'seed2_random10']
    run = tmp_path / 'seed1_full'
    run.mkdir()
    model_setup.write_config(str(run), template_config())
    expected = cli_helpers.write_weights(run / 'best_model.npz', b'weights')
    assert model_setup.folder_description(str(run)).endswith(
        '(parameters sha256 {})'.format(expected))
    line = model_setup.models_line(['a (parameters sha256 1)', 'b (parameters sha256 2)'])
    assert line == 'Models: a (parameters sha256 1); b (parameters sha256 2).'
