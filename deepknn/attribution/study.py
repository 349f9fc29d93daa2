"""The attribution study of one run: every method variant's attributions of a seeded
sample of test inputs, scored by the identical-class test, the linear datamodeling
score and time; and on a run trained with flipped labels, noisy-label detection.

    study = RunStudy(setup, StudySettings(n_test=500), projection)
    rows = study.measure(lds=LdsTruth(masks, margins))   # one dict per variant

Each variant explains two classes of a test input: its prediction (the identical-class
test, the neighbour lists) and its gold label (the LDS, whose margins are those of the
gold label, as TRAK's and dattri's benchmarks take them). Score matrices are used and
dropped one variant at a time; only per-input results are kept.
"""
import dataclasses
import time

import numpy as np
import tqdm

import nlp_utils
from deepknn.attribution.base import require
from deepknn.attribution.methods import METHODS, Attribution
from deepknn.attribution.run_arrays import RunArrays
from deepknn.evaluation import attribution_measures as measures

TOP = 5            # training rows kept per test input and variant (the examples figure)
CHECKPOINT_METHODS = ('tracin-last', 'tracin-projected', 'trak')


@dataclasses.dataclass(frozen=True)
class Variant:
    """One row of the table: a METHODS name with its options."""
    label: str
    method: str
    options: tuple = ()               # ((name, value), ...): hashable, printable
    projected: bool = False           # needs the projected all-parameter gradients

    def build(self):
        return METHODS[self.method](**dict(self.options))

    @property
    def reads_checkpoints(self):
        """Whether the method sums or averages over checkpoints (TracIn, TRAK)."""
        return self.method in CHECKPOINT_METHODS


def layer_name(index, n_layers):
    """'layer 2 (penultimate)': the DkNN layer's index and, for the last two, its role."""
    role = {n_layers - 1: ' (logits)', n_layers - 2: ' (penultimate)'}.get(index, '')
    return 'layer {}{}'.format(index, role)


def variants(n_layers, k=75, projected=True):
    """The study's variants for a model with n_layers DkNN layers; the projected ones only
    where `projected` (they cost a backward pass per input and checkpoint)."""
    rows = []
    for layer in range(n_layers):
        name = layer_name(layer, n_layers)
        rows += [Variant('knn l2, ' + name, 'knn', (('layer', layer),)),
                 Variant('knn cosine, ' + name, 'knn', (('layer', layer), ('metric', 'cosine'))),
                 Variant('knn vote signed, ' + name, 'dknn-vote',
                         (('k', k), ('layers', (layer,)), ('signed', True), ('backend', 'faiss')))]
    rows += [Variant('dknn-vote', 'dknn-vote', (('k', k), ('backend', 'faiss'))),
             Variant('dknn-vote signed', 'dknn-vote',
                     (('k', k), ('signed', True), ('backend', 'faiss'))),
             Variant('representer', 'representer'),
             Variant('representer stationary', 'representer', (('stationary', True),)),
             Variant('tracin-last', 'tracin-last'),
             Variant('grad-cos', 'grad-cos'),
             Variant('trak last-layer', 'trak', (('gradients', 'last-layer'),)),
             Variant('random', 'random')]
    if projected:
        rows += [Variant('tracin-projected', 'tracin-projected', projected=True),
                 Variant('grad-cos projected', 'grad-cos', (('gradients', 'projected'),), True),
                 Variant('trak', 'trak', projected=True)]
    return rows


@dataclasses.dataclass
class StudySettings:
    n_test: int = 500        # test inputs sampled (seeded); all where the split is smaller
    seed: int = 0            # draws the sample
    k: int = 75              # the DkNN's k, for the votes
    projected: bool = True   # include the all-parameter (projected) variants


@dataclasses.dataclass
class LdsTruth:
    """The retrained halves: masks (M, n_train) bool and margins (M, n_test) at gold."""
    masks: np.ndarray
    margins: np.ndarray


def sample_indices(n, n_test, seed):
    """Sorted indices of min(n_test, n) test inputs drawn without replacement."""
    if n_test >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, n_test, replace=False))


def training_pool_indices(setup):
    """(n_train,) the position of each training-split example in the training pool (the
    training file's lines for custom data): the pool less the dev and calibration
    carve-outs, in pool order."""
    splits = setup.splits
    held_out = set(splits.dev_indices or ()) | set(splits.calib_indices or ())
    pool = [i for i in range(len(setup.dataset.train_pool)) if i not in held_out]
    kept = set(splits.excluded_indices or ())
    return np.array([i for j, i in enumerate(pool) if j not in kept])


def split_subclasses(setup, subclasses):
    """(training split's subclasses (n_train,), test split's (n_test,)) from
    {'train': one per training-file line, 'test': one per test-file line}."""
    pool, test = np.asarray(subclasses['train']), np.asarray(subclasses['test'])
    require(len(pool) == len(setup.dataset.train_pool) and len(test) == len(setup.splits.test),
            'subclasses', 'must name one subclass per training line ({}) and test line ({}), '
            'got {} and {}'.format(len(setup.dataset.train_pool), len(setup.splits.test),
                                   len(pool), len(test)))
    return pool[training_pool_indices(setup)], test


def encode(setup, examples):
    """Model inputs and labels of raw (tokens, label) examples."""
    encoded = nlp_utils.encode_examples(examples, setup.vocab)
    return [ids for ids, _ in encoded], np.array([label for _, label in encoded])


class RunStudy:
    """The arrays of one run (training split, test sample) and the variants measured on them."""

    def __init__(self, setup, settings, projection=None, subclasses=None):
        """`subclasses`: {'train': [...], 'test': [...]} for the identical-subclass
        test of a run trained on merged classes (scripts/merged_classes.py), or None."""
        self.setup, self.settings = setup, settings
        self.arrays = RunArrays.of(setup, projection if settings.projected else None)
        train_xs, self.train_labels = encode(setup, setup.splits.train)
        self.test_indices = sample_indices(len(setup.splits.test), settings.n_test,
                                           settings.seed)
        test_xs, self.gold = encode(setup, [setup.splits.test[i] for i in self.test_indices])
        self.subclasses = None
        if subclasses is not None:
            train_sub, test_sub = split_subclasses(setup, subclasses)
            self.subclasses = train_sub, test_sub[self.test_indices]
        started = time.perf_counter()
        self.predictions = setup.model.predict_logits(test_xs).argmax(axis=1)
        self.forward_seconds = (time.perf_counter() - started) / len(test_xs)
        started = time.perf_counter()
        self.train = self.arrays.representations(train_xs, self.train_labels)
        self.explained = {'prediction': self.arrays.representations(test_xs, self.predictions)}
        self.arrays_seconds = time.perf_counter() - started
        self.explained['gold'] = (self.explained['prediction'] if
                                  np.array_equal(self.gold, self.predictions) else
                                  self.arrays.representations(test_xs, self.gold))

    def variants(self):
        return variants(len(self.train.layers), self.settings.k, self.settings.projected)

    def measure(self, lds=None):
        """One dict per variant: identical-class share, LDS per test input (where `lds`),
        its top training rows, and seconds to fit and per test input."""
        rows = []
        for variant in tqdm.tqdm(self.variants(), desc='attribution methods', unit='method'):
            rows.append(self.measure_variant(variant, lds))
        return rows

    def measure_variant(self, variant, lds):
        started = time.perf_counter()
        method = variant.build().fit(self.train)
        fit_seconds = time.perf_counter() - started
        started = time.perf_counter()
        top_ids, _ = method.top(self.explained['prediction'], TOP)
        score_seconds = (time.perf_counter() - started) / len(self.gold)
        row = {'variant': variant, 'fit_s': fit_seconds, 'per_input_s': score_seconds,
               'top': top_ids,
               'same_class': self.train_labels[top_ids[:, 0]] == self.predictions,
               'identical_class': measures.identical_class(self.train_labels[top_ids[:, 0]],
                                                           self.predictions)}
        if self.subclasses is not None:
            train_sub, test_sub = self.subclasses
            row['same_subclass'] = train_sub[top_ids[:, 0]] == test_sub
        if lds is not None:
            scores = method.scores(self.explained['gold'])
            row['lds'] = measures.lds(scores, lds.masks, lds.margins)
        return row


def defines_self_influence(variant):
    return METHODS[variant.method]._self_influence is not Attribution._self_influence


def noisy_label_rows(setup, flipped, settings, projection=None):
    """Noisy-label detection on a run trained with flipped labels: per variant defining
    a self-influence, AUPRC, AUROC and precision / recall at k = the number flipped."""
    arrays = RunArrays.of(setup, projection if settings.projected else None)
    xs, labels = encode(setup, setup.splits.train)
    train = arrays.representations(xs, labels)
    noisy = np.zeros(len(labels), dtype=bool)
    noisy[list(flipped)] = True
    rows = []
    for variant in tqdm.tqdm(variants(len(train.layers), settings.k, settings.projected),
                             desc='self-influence', unit='method'):
        if not defines_self_influence(variant) or variant.label == 'dknn-vote':
            continue        # the unsigned vote's self-influence is the signed one's
        method = variant.build().fit(train)
        rows.append(dict(measures.noisy_label_detection(
            method.self_influence(), noisy, int(noisy.sum())), variant=variant))
    return rows
