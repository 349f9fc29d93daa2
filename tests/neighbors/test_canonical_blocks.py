"""Activations in canonical blocks (nets.BatchedInference): a row gets the same bytes in
one process, in a Ray part cut anywhere, and under any BLAS thread count. The CNN and
BiLSTM are as wide as the paper's (a BLAS product's rows change with its shape from about
50 inputs per row on), trained for one epoch on sentences with every length; a tiny
BERT checks the transformer's grouping under its padded-units cap."""
import os

import numpy as np
import pytest
import threadpoolctl

import cli_helpers
import nets
from deepknn.models import model_setup
from deepknn.distributed import activations, shards
from tests.models.test_transformer import write_tiny_checkpoint

WORDS = ['the', 'film', 'was', 'a', 'plot', 'and', 'it', 'very', 'long', 'story', 'good', 'bad']


@pytest.fixture(scope='module', params=['cnn', 'bilstm', 'transformer'])
def wide_run(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp('blocks_' + request.param)
    rng = np.random.RandomState(0)
    paths = []
    for name, n in (('train.txt', 150), ('test.txt', 20)):
        rows = ['{} {}'.format(['neg', 'pos'][rng.randint(2)],
                               ' '.join(rng.choice(WORDS, rng.randint(2, 30))))
                for _ in range(n)]
        paths.append(str(folder / name))
        with open(paths[-1], 'w') as f:
            f.write('\n'.join(rows) + '\n')
    import train_text_classifier
    if request.param == 'transformer':      # a tiny BERT: its pieces, grouped under a units cap
        model = ['--model', 'transformer', '--max-length', '32', '--pretrained',
                 str(write_tiny_checkpoint(folder / 'bert'))]
    else:
        model = ['--model', request.param, '--unit', '120', '--embed-dim', '60', '--layer', '1']
    train_text_classifier.main(cli_helpers.train_argv(folder / 'run', paths, *model,
                                                      '--n-calib', '20'))
    return model_setup.load_setup(str(folder / 'run'))


def test_parts_cut_anywhere_give_the_one_process_bytes(wide_run, tmp_path, monkeypatch):
    monkeypatch.setattr(nets, 'CANONICAL_ROWS', 64)      # several blocks in 150 rows
    expected = wide_run.model.layer_activations([x for x, _ in wide_run.train], 64)
    parts = shards.ActivationParts(str(tmp_path / 'parts'), len(wide_run.train), 10, 1,
                                   'float32').start()
    extractor = activations.PartExtractor(os.path.join(wide_run.result_dir, 'args.json'),
                                          wide_run.config.data_dir, 'train', parts.settings, 64)
    for part in range(len(parts.ranges)):       # what a Ray worker does with each part
        extractor.extract(part)
    for i, layer in enumerate(expected):
        np.testing.assert_array_equal(parts.column('layer_{}'.format(i)), layer)


def test_the_blas_thread_count_does_not_reach_the_bytes(wide_run):
    inputs = [x for x, _ in wide_run.train]
    with threadpoolctl.threadpool_limits(1):
        one = wide_run.model.layer_activations(inputs, 64)
    with threadpoolctl.threadpool_limits(2):
        two = wide_run.model.layer_activations(inputs, 64)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)


def test_a_part_computes_the_canonical_blocks_around_it():
    rows = nets.CANONICAL_ROWS
    assert nets.block_rows(20, 30, 3000) == (0, rows)
    assert nets.block_rows(rows - 5, rows + 5, 3000) == (0, 2 * rows)
    assert nets.block_rows(2 * rows + 1, 3000, 3000) == (2 * rows, 3000)
    assert nets.canonical_chunks(2 * rows + 1) == [(0, rows), (rows, 2 * rows),
                                                   (2 * rows, 2 * rows + 1)]
