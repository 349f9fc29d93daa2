"""The attribution study on a tiny run, against direct computations: the loss gradient
from the margin's, the identical-class share of the nearest neighbours, the LDS of a
method recomputed from its scores and the halves' margins, and the command's outputs."""
import csv
import json
import os

import numpy as np
import pytest

from deepknn.attribution import datamodels, gradients
from deepknn.attribution import study as study_lib
from deepknn.attribution.methods import METHODS
from deepknn.attribution.run_arrays import loss_from_margin
from deepknn.evaluation import attribution_measures as measures
from deepknn.models import model_setup
from tests.cli_helpers import cli, load_script, train_tiny


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    """(setup, halves folder) of a tiny two-epoch run kept per epoch, and 3 halves."""
    folder = tmp_path_factory.mktemp('attribution')
    train_tiny(folder, folder / 'run', 2, '--keep-epochs', '--epoch', '2', '--n-calib', '0')
    setup = model_setup.load_setup(str(folder / 'run' / 'args.json'))
    masks = datamodels.subset_masks(str(folder / 'run_lds'), len(setup.splits.train), 3)
    datamodels.train_subsets(setup.config, str(folder / 'run_lds'), masks)
    return setup, str(folder / 'run_lds')


def test_two_classes_give_the_loss_gradient_from_the_margins(tiny):
    setup, _ = tiny
    encoded = study_lib.encode(setup, setup.splits.train[:6])
    xs, labels = encoded[0], encoded[1]
    margin = gradients.per_example_gradients(setup.model, xs, labels, output='margin')
    loss = gradients.per_example_gradients(setup.model, xs, labels, output='loss')
    probabilities = study_lib.RunArrays.of(setup).checkpoint(setup.model, xs, labels).probabilities
    np.testing.assert_allclose(loss_from_margin(margin, probabilities, labels), loss,
                               rtol=1e-4, atol=1e-7)


def test_the_study_measures_what_a_direct_computation_gives(tiny):
    setup, halves = tiny
    study = study_lib.RunStudy(setup, study_lib.StudySettings(n_test=12, k=3, projected=False))
    assert study.arrays.epochs == [1, 2] and len(study.gold) == 12
    examples = [setup.splits.test[i] for i in study.test_indices]
    truth = study_lib.LdsTruth(*(lambda m: (m, datamodels.subset_margins(
        halves, m, examples, study.gold)))(datamodels.subset_masks(
            halves, len(study.train_labels), 3)))
    rows = {r['variant'].label: r for r in
            (study.measure_variant(v, truth) for v in study.variants()
             if v.label in ('knn l2, layer 0', 'tracin-last'))}
    # identical class: the nearest training row in layer 0, by brute force
    x, q = study.train.layers[0].astype(np.float64), \
        study.explained['prediction'].layers[0].astype(np.float64)
    nearest = np.argmin(((q[:, None, :] - x[None, :, :]) ** 2).sum(axis=2), axis=1)
    assert rows['knn l2, layer 0']['identical_class'] == pytest.approx(
        np.mean(study.train_labels[nearest] == study.predictions))
    # LDS: TracIn's scores at the gold label against the halves' margins
    scores = METHODS['tracin-last']().fit(study.train).scores(study.explained['gold'])
    np.testing.assert_allclose(rows['tracin-last']['lds'],
                               measures.lds(scores, truth.masks, truth.margins))


def test_the_command_writes_every_output_and_refuses_a_run_without_noise(tiny, tmp_path,
                                                                       capsys):
    setup, halves = tiny
    main = load_script('scripts/training_data_attribution.py').main
    argv = ['--model-setup', setup.result_dir, '--lds-runs', halves, '--n-test', '10',
            '--projected-runs', '0', '--k', '3', '--out', str(tmp_path), '--name', 'tiny']
    status, err = cli(main, argv + ['--noisy-setup', setup.result_dir], capsys)
    assert status == 2 and err == ['error: --noisy-setup {} was trained without '
                                   '--label-noise: no flipped label to detect'.format(
                                       os.path.join(setup.result_dir, 'args.json'))]
    assert not os.listdir(str(tmp_path))
    missing = str(tmp_path / 'no_halves')
    status, err = cli(main, argv[:2] + ['--lds-runs', missing] + argv[4:], capsys)
    assert status == 2 and err[-1].startswith('error: --lds-runs {} holds no subsets.json'.format(
        missing))
    status, _ = cli(main, argv, capsys)
    assert status == 0
    assert sorted(os.listdir(str(tmp_path))) == sorted(
        'tiny' + s for s in ('.md', '.csv', '_seeds.md', '_seeds.csv', '_measures.png',
                             '_examples.md'))
    with open(str(tmp_path / 'tiny.csv')) as f:
        methods = [row['method'] for row in csv.DictReader(f)]
    assert methods == [v.label for v in study_lib.variants(
        len(setup.model.layer_activations([[1]], 1)), projected=False)]
    assert 'tracin-last' in open(str(tmp_path / 'tiny_examples.md')).read()


def test_noisy_label_rows_rank_the_flipped_rows_by_each_methods_self_influence(tmp_path):
    train_tiny(tmp_path, tmp_path / 'noisy', 2, '--keep-epochs', '--epoch', '2',
               '--label-noise', '0.2', '--n-calib', '0')
    setup = model_setup.load_setup(str(tmp_path / 'noisy' / 'args.json'))
    flipped = setup.splits.flipped_indices
    assert flipped
    rows = {r['variant'].label: r for r in study_lib.noisy_label_rows(
        setup, flipped, study_lib.StudySettings(k=3, projected=False))}
    arrays = study_lib.RunArrays.of(setup)
    xs, labels = study_lib.encode(setup, setup.splits.train)
    train = arrays.representations(xs, labels)
    n_layers = len(train.layers)
    assert list(rows) == ['knn vote signed, ' + study_lib.layer_name(i, n_layers)
                          for i in range(n_layers)] + [
        'dknn-vote signed', 'representer', 'representer stationary', 'tracin-last',
        'trak last-layer', 'random']
    influence = METHODS['tracin-last']().fit(train).self_influence()
    noisy = np.isin(np.arange(len(labels)), flipped)
    expected = measures.noisy_label_detection(influence, noisy, int(noisy.sum()))
    assert rows['tracin-last']['average_precision'] == pytest.approx(
        expected['average_precision'])


def test_the_identical_subclass_test_reads_each_training_rows_original_class(tmp_path,
                                                                            capsys):
    """TREC-like data, six classes merged into two groups by scripts/merged_classes.py;
    the study's subclass of each top-1 training row equals the one found by its text."""
    words = ['what', 'which', 'abbr', 'who', 'where', 'count']   # one cue word per class
    data = tmp_path / 'data' / 'sent-conv-torch'
    data.mkdir(parents=True)
    rng = np.random.RandomState(0)
    for name, n in (('TREC.train.all', 120), ('TREC.test.all', 30)):
        labels = rng.randint(6, size=n)
        data.joinpath(name).write_text(''.join('{} {} is it number {} ?\n'.format(
            label, words[label], i) for i, label in enumerate(labels)))
    merge = load_script('scripts/merged_classes.py').main
    out = tmp_path / 'merged'
    status, err = cli(merge, ['--dataset', 'TREC', '--data-dir', str(tmp_path / 'data'),
                              '--out', str(out), '--group', 'thing=description,entity',
                              '--group', 'fact=human,location,number'], capsys)
    assert status == 2 and err == ['error: --group: classes abbreviation are in no group']
    assert not out.exists()
    merge(['--dataset', 'TREC', '--data-dir', str(tmp_path / 'data'), '--out', str(out),
           '--group', 'thing=description,entity,abbreviation',
           '--group', 'fact=human,location,number'])
    subclasses = json.load(open(str(out / 'subclasses.json')))
    by_text = {line.split(' ', 1)[1].strip(): sub for line, sub in zip(
        open(str(out / 'train.txt')), subclasses['train'])}
    test_by_text = {line.split(' ', 1)[1].strip(): sub for line, sub in zip(
        open(str(out / 'test.txt')), subclasses['test'])}
    train_text_classifier_main = load_script('train_text_classifier.py').main
    train_text_classifier_main([
        '--dataset', 'custom', '--train-file', str(out / 'train.txt'), '--test-file',
        str(out / 'test.txt'), '--model', 'bow', '--unit', '8', '--embed-dim', '8',
        '--epoch', '1', '--batchsize', '16', '--n-calib', '10', '--min-freq', '1',
        '--out', str(tmp_path / 'run')])
    setup = model_setup.load_setup(str(tmp_path / 'run' / 'args.json'))
    study = study_lib.RunStudy(setup, study_lib.StudySettings(n_test=30, k=3, projected=False),
                               subclasses=subclasses)
    row = study.measure_variant(study_lib.Variant('knn', 'knn', (('layer', 0),)), None)
    texts = [' '.join(tokens) for tokens, _ in setup.splits.train]
    expected = [by_text[texts[i]] == test_by_text[' '.join(setup.splits.test[t][0])]
                for i, t in zip(row['top'][:, 0], study.test_indices)]
    assert row['same_subclass'].tolist() == expected
    with pytest.raises(Exception, match='one subclass per training line'):
        study_lib.RunStudy(setup, study_lib.StudySettings(n_test=5, projected=False),
                           subclasses={'train': subclasses['train'][:-1],
                                       'test': subclasses['test']})


def test_projected_variants_run_and_the_final_model_is_found_among_the_checkpoints(tiny):
    setup, _ = tiny
    study = study_lib.RunStudy(setup, study_lib.StudySettings(n_test=6, k=3),
                               gradients.GaussianProjection(16, seed=1))
    best = int(np.argmax([e['validation/main/accuracy'] for e in json.load(
        open(os.path.join(setup.result_dir, 'log')))]))
    assert study.arrays.final_checkpoint == best
    final = study.train.final.loss_gradients
    np.testing.assert_array_equal(final, study.train.checkpoints[best].loss_gradients)
    rows = [study.measure_variant(v, None) for v in study.variants() if v.projected]
    assert [r['variant'].label for r in rows] == ['tracin-projected', 'grad-cos projected',
                                                  'trak']
