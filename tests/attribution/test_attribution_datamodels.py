"""The subset retrains of the LDS: halves drawn once and refused when redrawn otherwise,
every half a half of the run's training split, margins in closed form, and per-epoch
models (TracIn's checkpoints) that load and differ."""
import json
import os

import numpy as np
import pytest

import nlp_utils
from deepknn.attribution import datamodels
from deepknn.models import model_setup
from nlp_utils import UserError
from tests.cli_helpers import train_tiny


def test_the_halves_are_written_once_and_read_back_the_same(tmp_path):
    masks = datamodels.subset_masks(str(tmp_path), 11, 4, seed=3)
    assert masks.shape == (4, 11) and (masks.sum(axis=1) == 5).all()
    assert np.array_equal(datamodels.subset_masks(str(tmp_path), 11, 4, seed=3), masks)
    with pytest.raises(UserError, match='with seed 3, not 4 of 11 with seed 4'):
        datamodels.subset_masks(str(tmp_path), 11, 4, seed=4)


class Logits:
    """A stand-in model whose last layer is fixed logits."""

    def __init__(self, logits):
        self.logits = np.asarray(logits, dtype=np.float32)

    def layer_activations(self, xs, batchsize):
        return [self.logits[:len(xs)]]


def test_the_margin_is_log_p_over_one_minus_p():
    logits = [[0.0, 1.0, 2.0], [3.0, -1.0, 0.5]]
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    margins = datamodels.margins_of(Logits(logits), [None, None], [2, 0])
    assert np.allclose(margins, [np.log(p[0, 2] / (1 - p[0, 2])),
                                 np.log(p[1, 0] / (1 - p[1, 0]))])


def test_each_half_trains_on_its_half_of_the_runs_training_split(tmp_path):
    train_tiny(tmp_path, tmp_path / 'run', 2, '--keep-epochs', '--epoch', '2')
    files = os.listdir(str(tmp_path / 'run'))
    assert {'model_epoch1.npz', 'model_epoch2.npz'} <= set(files)
    first, second = (np.load(str(tmp_path / 'run' / 'model_epoch{}.npz'.format(e)))
                     for e in (1, 2))
    assert any(not np.array_equal(first[k], second[k]) for k in first.files)
    template = model_setup.read_config(str(tmp_path / 'run' / 'args.json'))
    _, splits = model_setup.load_data(template)
    root = str(tmp_path / 'lds')
    masks = datamodels.subset_masks(root, len(splits.train), 2)
    datamodels.train_subsets(template, root, masks)
    for i, mask in enumerate(masks):
        changes = nlp_utils.read_json(os.path.join(datamodels.subset_folder(root, i),
                                                   'train_changes.json'), 'changes')
        assert changes['excluded_indices'] == np.flatnonzero(~mask).tolist()
        assert 'model_epoch1.npz' not in os.listdir(datamodels.subset_folder(root, i))
    margins = datamodels.subset_margins(root, masks, splits.test[:5],
                                        [label for _, label in splits.test[:5]])
    assert margins.shape == (2, 5) and np.all(np.isfinite(margins))
    assert json.load(open(os.path.join(root, 'subsets.json')))['m'] == 2
