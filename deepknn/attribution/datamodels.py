"""The subset retrains of the linear datamodeling score (Park et al. 2023, section 2):
M models trained on random halves of a run's training split with the run's recipe, and
their margins on the test inputs.

    masks = subset_masks(root, n_train, m, seed)     # (m, n_train) bool, written once
    train_subsets(template, root, masks)              # resumable: finished halves skipped
    margins = subset_margins(root, masks, xs, classes)    # (m, n_test)

Folder `root` holds subsets.json (the seed and every half's training indices) and one
run folder per half (half_000, ...), trained by deepknn.models.training with the
template's settings, its seed included (the seed also draws the dev / calibration
carve-out, so every half is a half of the same training split), and --exclude-train
set to the other half. A later call with another m, seed or training size is refused
rather than mixing halves of two draws.
"""
import json
import os

import numpy as np
import tqdm

import nlp_utils
from deepknn.attribution.base import require
from deepknn.evaluation.attribution_measures import random_halves
from deepknn.models import model_setup
from deepknn.models import training
from nlp_utils import UserError

SUBSETS = 'subsets.json'


def subset_folder(root, i):
    return os.path.join(root, 'half_{:03d}'.format(i))


def subset_masks(root, n_train, m, seed=0):
    """(m, n_train) bool masks of the kept training rows, from root/subsets.json or drawn
    (random_halves) and written there; UserError when the file holds another draw."""
    path = os.path.join(root, SUBSETS)
    wanted = {'seed': seed, 'n_train': n_train, 'm': m}
    if os.path.exists(path):
        saved = nlp_utils.read_json(path, 'subset file', dict)
        if {k: saved.get(k) for k in wanted} != wanted:
            raise UserError('{} holds {} halves of {} training rows drawn with seed {}, not {} '
                            'of {} with seed {}; pass another folder'.format(
                                path, saved.get('m'), saved.get('n_train'), saved.get('seed'),
                                m, n_train, seed))
        masks = np.zeros((m, n_train), dtype=bool)
        for row, kept in zip(masks, saved['kept']):
            row[kept] = True
        return masks
    masks = random_halves(n_train, m, seed)
    os.makedirs(root, exist_ok=True)
    nlp_utils.atomic_write_text(path, json.dumps(dict(
        wanted, kept=[np.flatnonzero(row).tolist() for row in masks])))
    return masks


def half_config(template, root, i, mask):
    """The template's RunConfig with the rows outside half i excluded (its file written
    beside the run), no label noise, no per-epoch models, nothing derived."""
    exclude = os.path.abspath(subset_folder(root, i) + '.exclude.json')
    if not os.path.exists(exclude):
        nlp_utils.atomic_write_text(exclude, json.dumps(np.flatnonzero(~mask).tolist()))
    return template.replace(exclude_train=exclude, label_noise=0.0, keep_epochs=False,
                            vocab_digest=None, data_digest=None, extra={})


def train_subsets(template, root, masks, created_by='subset retrains'):
    """Train every half not yet trained (an unfinished one resumes); `created_by` (the
    command) goes into each folder's marker."""
    for i, mask in enumerate(tqdm.tqdm(masks, desc='subset retrains', unit='model')):
        training.ensure_trained(half_config(template, root, i, mask), subset_folder(root, i),
                                created_by, 'pass another `out`')


def margins_of(model, xs, classes, batchsize=64):
    """(n,) float64: log(p_c / (1 - p_c)) = z_c - logsumexp of the other logits, for each
    input's class c (TRAK's model output), dropout off."""
    logits = model.layer_activations(xs, batchsize)[-1].astype(np.float64)
    classes = np.asarray(classes)
    rows = np.arange(len(xs))
    others = logits.copy()
    others[rows, classes] = -np.inf
    top = others.max(axis=1, keepdims=True)
    rest = np.log(np.sum(np.exp(others - top), axis=1)) + top[:, 0]
    return logits[rows, classes] - rest


def subset_margins(root, masks, examples, classes):
    """(m, n) margins of each trained half on `examples` (a list of raw examples, as the
    run's splits hold them) at `classes` (n,); UserError naming the first half missing."""
    require(len(examples) == len(classes), 'classes', 'must have one class per example')
    out = np.empty((len(masks), len(examples)))
    for i in tqdm.tqdm(range(len(masks)), desc='margins of the halves', unit='model'):
        folder = subset_folder(root, i)
        if not os.path.exists(os.path.join(folder, 'train_result.json')):
            raise UserError('{} is not trained; run `lds_retrains` first'.format(folder))
        setup = model_setup.load_setup(os.path.join(folder, 'args.json'))
        xs = [ids for ids, _ in nlp_utils.encode_examples(
            [(tokens, 0) for tokens, _ in examples], setup.vocab)]
        out[i] = margins_of(setup.model, xs, classes, setup.config.batchsize)
    return out
