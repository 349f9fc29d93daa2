"""Train/dev/calibration splits of a Dataset, and changed training sets (Rajani et al. 2020).

`make_splits` carves dev (when the dataset has none) and calibration sets out of the
training pool with a seeded RNG; `change_train` drops training examples and/or flips
labels. Both return a `Splits`; the same arguments always give the same splits.
"""
from dataclasses import dataclass
from typing import Optional

import collections

import numpy as np

from nlp_utils import UserError


@dataclass
class Splits:
    """What a run trains, selects, calibrates and evaluates on (lists of Example)."""
    train: list
    dev: list
    calib: list
    test: list
    dev_indices: Optional[list]  # sorted indices into train_pool when dev was carved from it
    calib_indices: list          # sorted indices into train_pool
    excluded_indices: tuple = ()  # indices into the unchanged train split, dropped from it
    flipped_indices: tuple = ()   # indices into `train` whose labels were flipped (noise)


# ---------------------------------------------------------------- train/dev/calib splits
def _check_split_sizes(name, n_pool, n_dev, n_calib, carve_dev):
    if n_calib < 0:
        raise UserError('n_calib must be >= 0, got {}'.format(n_calib), 'n_calib')
    if carve_dev and n_dev < 1:
        raise UserError('{}: the training pool ({} examples) is too small to carve a dev set '
                        'from it'.format(name, n_pool))
    n_train = n_pool - n_dev - n_calib
    if n_train < max(1, n_pool // 10):
        raise UserError('{}: `n_calib` {} is too large: of {} training examples {} go to dev '
                        'and {} to calibration, leaving {} (< 10%) to train on; use a '
                        'smaller `n_calib`'.format(name, n_calib, n_pool, n_dev, n_calib,
                                                   n_train))


def make_splits(dataset, seed=777, dev_fraction=0.1, n_calib=1000, select_on_test=False):
    """Carve dev (when the dataset has none) and calibration sets out of train_pool.

    dev: the official dev split, else `dev_fraction` of train_pool picked with a seeded
    RNG; calib: `n_calib` further pool examples (never in dev); train: the rest, in pool
    order. The RNG is RandomState(seed + 1), independent of the 90/10 test split.
    `select_on_test=True` reproduces the original code, which picked epochs on the test
    set: dev is then the test set and nothing is carved from the pool for dev.
    Returns Splits; the same arguments always give the same splits.
    """
    if not 0 <= dev_fraction < 1:
        raise UserError('dev fraction must be in [0, 1), got {}'.format(dev_fraction))
    pool = dataset.train_pool
    carve_dev = dataset.dev is None and not select_on_test
    n_dev = int(len(pool) * dev_fraction) if carve_dev else 0
    _check_split_sizes(dataset.name, len(pool), n_dev, n_calib, carve_dev)
    order = np.random.RandomState(seed + 1).permutation(len(pool))
    dev_indices = sorted(order[:n_dev].tolist())
    calib_indices = sorted(order[n_dev:n_dev + n_calib].tolist())
    held_out = set(dev_indices) | set(calib_indices)
    train = [example for i, example in enumerate(pool) if i not in held_out]
    if select_on_test:
        dev = dataset.test
    elif carve_dev:
        dev = [pool[i] for i in dev_indices]
    else:
        dev = dataset.dev
    _check_every_class_trains(dataset, train)
    return Splits(train=train, dev=dev, calib=[pool[i] for i in calib_indices],
                  test=dataset.test, dev_indices=dev_indices if carve_dev else None,
                  calib_indices=calib_indices)


def _check_every_class_trains(dataset, train):
    """UserError when a class of the training pool has no example left in `train`
    (all went to dev or calibration): the model could never predict it."""
    counts = collections.Counter(label for _, label in train)
    pool_counts = collections.Counter(label for _, label in dataset.train_pool)
    names = dataset.readable_label_names
    missing = [names[label] for label in sorted(pool_counts) if not counts[label]]
    if missing:
        raise UserError('{}: class(es) {} have no training example left after the dev and '
                        'calibration splits (training pool per class: {}); lower `n_calib` or '
                        '`dev_fraction`, or add examples'.format(
                            dataset.name, ', '.join(map(repr, missing)),
                            ', '.join('{} {}'.format(names[label], n)
                                      for label, n in sorted(pool_counts.items()))))


# ---------------------------------------------------------------- training-set changes
def change_train(splits, n_class, exclude=(), label_noise=0.0, noise_seed=0):
    """Splits with training examples dropped and/or labels flipped (Rajani et al. 2020).

    exclude: indices into `splits.train` to drop (the removal experiment); then a
    `label_noise` fraction of the remaining training examples, chosen with
    RandomState(noise_seed), gets a different label drawn uniformly from the other
    classes (the mislabeled-detection experiment). The same arguments always give
    the same result; the new Splits records excluded_indices and flipped_indices.
    """
    n_train = len(splits.train)
    exclude = sorted(set(exclude))
    if exclude and not (0 <= exclude[0] and exclude[-1] < n_train):
        raise UserError('exclude_train holds indices outside the training split (0..{}); '
                        'write indices into the training split'.format(n_train - 1),
                        'exclude_train')
    if len(exclude) >= n_train:
        raise UserError('exclude_train drops all {} training examples; exclude fewer'
                        .format(n_train), 'exclude_train')
    if not 0 <= label_noise < 1:
        raise UserError('label_noise must be in [0, 1), got {}'.format(label_noise),
                        'label_noise')
    if label_noise > 0 and n_class < 2:
        raise UserError('label_noise needs at least two classes to flip between',
                        'label_noise')
    dropped = set(exclude)
    train = [example for i, example in enumerate(splits.train) if i not in dropped]
    rng = np.random.RandomState(noise_seed)
    flipped = sorted(rng.choice(len(train), int(round(label_noise * len(train))),
                                replace=False).tolist())
    for i in flipped:
        tokens, label = train[i]
        train[i] = (tokens, int((label + rng.randint(1, n_class)) % n_class))
    return Splits(train=train, dev=splits.dev, calib=splits.calib, test=splits.test,
                  dev_indices=splits.dev_indices, calib_indices=splits.calib_indices,
                  excluded_indices=tuple(exclude), flipped_indices=tuple(flipped))
