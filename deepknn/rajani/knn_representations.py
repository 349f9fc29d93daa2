"""kNN over a model's hidden representations (Rajani et al. 2020): classifier and backoff.

The training split's activations of one layer (by default the last hidden layer, the one
before the logits) are normalised dataset-wise with the training mean and standard
deviation, indexed with exact faiss search, and turned into a classifier:

    d_i        = ||h~ - h~_i||^2 over the k nearest training examples K
    w_i        = softmax_{i in K}(-d_i / T)
    p_knn(y|x) = sum_{i in K, y_i = y} w_i

Backoff keeps the model's prediction where a switch signal (the model's max softmax
probability, or DkNN credibility) is strictly greater than a threshold tau, else takes
the kNN's. k, T and tau are tuned on the dev split only. Methods take and return plain
arrays; `knn_influence` builds on this module.
"""
import dataclasses
import sys

import numpy as np

from deepknn.neighbors import dknn
from deepknn.neighbors import dknn_settings as dknn_settings_lib
from deepknn.neighbors import knn_index
from deepknn.evaluation import calibration
from nlp_utils import UserError

EPSILON = 1e-5                      # the paper's epsilon in (h - mu) / (sigma + epsilon)
TABLE4_KS = (16, 64)   # the k values of Rajani et al.'s Table 4, always tuned over
TEMPERATURES = (0.1, 1.0, 10.0, 100.0, 1000.0)
# 0, 0.01, ..., 1: the grid of tau (THRESHOLDS) and of the detection curves' data fractions.
HUNDREDTHS = tuple(np.round(np.linspace(0, 1, 101), 2))
THRESHOLDS = HUNDREDTHS


def check_k(k, n_train, name='k'):
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n_train:
        raise UserError('{} must be an integer from 1 to the {} training examples, got {!r}{}'
                        .format(name, n_train, k, '; choose a smaller one'
                                if isinstance(k, (int, np.integer)) and k > n_train else ''),
                        name)


def check_temperature(temperature, name='temperature'):
    if not temperature > 0:
        raise UserError('{} must be > 0, got {}; pass a positive temperature'.format(
            name, temperature), name)


def check_threshold(threshold, name='tau'):
    if not 0 <= threshold <= 1:
        raise UserError('{} must be in [0, 1], got {}; pass a probability'.format(
            name, threshold), name)


@dataclasses.dataclass
class Normalizer:
    """Dataset-wise normalisation (h - mean) / scale with scale = std + EPSILON.
    A dimension constant over the training set (std 0, e.g. a dead ReLU) gets scale
    1 + EPSILON instead, so it cannot blow up a test example's distances."""
    mean: np.ndarray    # (D,)
    scale: np.ndarray   # (D,)

    @classmethod
    def fit(cls, vectors):
        """vectors: training activations (N, D)."""
        vectors = np.asarray(vectors, dtype=np.float64)
        std = vectors.std(axis=0)
        return cls(vectors.mean(axis=0), np.where(std > 0, std, 1.0) + EPSILON)

    def __call__(self, vectors):
        """(M, D) -> normalised float32 (M, D)."""
        return ((np.asarray(vectors, dtype=np.float64) - self.mean) / self.scale).astype(np.float32)


@dataclasses.dataclass
class Neighbors:
    """The k nearest training examples of M queries, nearest first."""
    sq_distances: np.ndarray   # (M, k) float64 squared Euclidean, normalised space
    indices: np.ndarray        # (M, k) int64 rows of the training split
    labels: np.ndarray         # (M, k) int64 their training labels

    def first(self, k):
        """The k nearest of these (k <= the k searched)."""
        return Neighbors(self.sq_distances[:, :k], self.indices[:, :k], self.labels[:, :k])


class KnnClassifier:
    """Normalised training representations in an exact faiss index, with their labels."""

    def __init__(self, train_vectors, train_labels, n_class):
        """train_vectors (N, D) activations, train_labels (N,) ints in [0, n_class)."""
        self.normalizer = Normalizer.fit(train_vectors)
        self.index = knn_index.make_index('faiss', kind='flat').build(
            self.normalizer(train_vectors))
        self.labels = np.asarray(train_labels, dtype=np.int64)
        self.n_class = n_class

    @property
    def n_train(self):
        return len(self.labels)

    def neighbors(self, vectors, k, leave_self_out=False):
        """k nearest training examples of raw activations `vectors` (M, D).

        leave_self_out=True: the queries are the training vectors themselves, in order
        (M == N), and each one's own row is left out of its neighbours. Where exact
        duplicates crowd it out of the k+1 searched, the (equally near) last is dropped."""
        check_k(k, self.n_train - int(leave_self_out))
        if leave_self_out and len(vectors) != self.n_train:
            raise ValueError('leave_self_out needs the {} training vectors as queries, got {}'
                             .format(self.n_train, len(vectors)))
        distances, indices = self.index.search(self.normalizer(vectors), k + int(leave_self_out))
        if leave_self_out:
            own = indices == np.arange(len(indices))[:, None]
            own[~own.any(axis=1), -1] = True          # self not among them: drop the last
            distances = distances[~own].reshape(len(indices), k)
            indices = indices[~own].reshape(len(indices), k)
        return Neighbors(distances.astype(np.float64) ** 2, indices, self.labels[indices])

    def probabilities(self, vectors, k, temperature):
        """p_knn (M, C) for raw activations (M, D)."""
        return knn_probabilities(self.neighbors(vectors, k), self.n_class, temperature)


def knn_probabilities(neighbors, n_class, temperature):
    """Neighbors over M queries -> p_knn (M, C): softmax of -d/T over each row's k
    neighbours, summed per label."""
    check_temperature(temperature)
    logits = -neighbors.sq_distances / temperature
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))   # stable softmax
    weights /= weights.sum(axis=1, keepdims=True)
    rows = np.repeat(np.arange(len(weights)), weights.shape[1])
    probabilities = np.zeros((len(weights), n_class))
    np.add.at(probabilities, (rows, neighbors.labels.ravel()), weights.ravel())
    return probabilities


def predicted(proba, collapse=None):
    """(M,) argmax of proba (M, C), mapped through `collapse` (C,) when given: e.g.
    HANS's entailment / non-entailment from a 3-way model, [0, 1, 1]."""
    labels = np.argmax(proba, axis=1)
    return labels if collapse is None else np.asarray(collapse)[labels]


def backoff_predictions(model_proba, knn_proba, signal, threshold, collapse=None):
    """(M,) predictions: the model's argmax where signal > threshold (strictly), else the
    kNN's (each mapped through `collapse`, see predicted). signal (M,): e.g.
    model_proba.max(axis=1) (the paper) or DkNN credibility."""
    check_threshold(threshold)
    keep = np.asarray(signal) > threshold
    return np.where(keep, predicted(model_proba, collapse), predicted(knn_proba, collapse))


def k_grid(n_train):
    """The tuned ks: powers of two below 1% of the training set (at least k=1), plus the
    paper's 16 and 64; none above n_train."""
    ks = {1} | {2 ** p for p in range(1, 20) if 2 ** p < 0.01 * n_train} | set(TABLE4_KS)
    return sorted(k for k in ks if k <= n_train)


@dataclasses.dataclass
class BackoffChoice:
    """Hyperparameters chosen on dev, and the dev accuracy they give."""
    k: int
    temperature: float
    threshold: float
    dev_accuracy: float
    dev_model_accuracy: float


def tune_backoff(model_proba, neighbors, labels, signal, n_class, ks, temperatures=TEMPERATURES,
                 thresholds=THRESHOLDS, collapse=None):
    """Grid search over (k, T, threshold) for the best backoff accuracy on dev.

    model_proba (M, C), neighbors: Neighbors of the M dev examples with k >= max(ks),
    labels (M,) (collapsed labels when `collapse` maps predictions, see predicted),
    signal (M,). Ties go to the smaller threshold (fewer switches), then
    the smaller k, then the smaller T."""
    labels = np.asarray(labels)
    if len(labels) == 0:
        raise UserError('the dev split has no examples; tuning k, T and tau needs a dev '
                        'split (re-train with a dataset that has one or `dev_fraction` > 0)')
    thresholds = np.asarray(thresholds, dtype=np.float64)
    model_correct = predicted(model_proba, collapse) == labels
    keep = np.asarray(signal)[:, None] > thresholds[None, :]             # (M, n_thresholds)
    best = None
    for k in ks:
        for temperature in temperatures:
            knn_correct = predicted(knn_probabilities(neighbors.first(k), n_class, temperature),
                                    collapse) == labels
            n_correct = np.where(keep, model_correct[:, None], knn_correct[:, None]).sum(axis=0)
            t = int(np.argmax(n_correct))                 # first maximum: smallest threshold
            key = (-int(n_correct[t]), thresholds[t], k, temperature)
            if best is None or key < best:
                best = key
    n_correct, threshold, k, temperature = best
    return BackoffChoice(int(k), float(temperature), float(threshold), -n_correct / len(labels),
                         float(model_correct.mean()))


def backoff_scores(model_proba, knn_proba, signal, threshold, labels, collapse=None):
    """Accuracies of model, kNN and backoff over all M examples and over those at or
    below the threshold (where backoff switches to the kNN); predictions mapped through
    `collapse` (see predicted)."""
    labels = np.asarray(labels)
    model = predicted(model_proba, collapse) == labels
    knn = predicted(knn_proba, collapse) == labels
    combined = backoff_predictions(model_proba, knn_proba, signal, threshold, collapse) == labels
    below = np.asarray(signal) <= threshold
    mean = lambda correct: float(correct.mean()) if len(correct) else None
    return {'model_accuracy': mean(model), 'knn_accuracy': mean(knn),
            'backoff_accuracy': mean(combined), 'n_examples': int(len(labels)),
            'n_below': int(below.sum()), 'model_accuracy_below': mean(model[below]),
            'backoff_accuracy_below': mean(combined[below])}


# ---------------------------------------------------------------- a trained model
def check_layer(layer, n_layers):
    if not -n_layers <= layer < n_layers:
        raise UserError('layer {} does not exist: the model has {} layers (-{}..{}); the '
                        'last hidden layer is -2'.format(layer, n_layers, n_layers, n_layers - 1),
                        'layer')


def classifier_from_setup(setup, layer=-2, batchsize=64, engine=None):
    """KnnClassifier over the training split's `layer` activations: the DkNN cache, or
    with `engine` (a distributed.engine.RayEngine) the Ray Data pipeline's storage."""
    activations, labels = dknn.training_split_activations(
        setup, dknn_settings_lib.DkNNSettings(batchsize=batchsize, engine=engine))
    check_layer(layer, len(activations))
    return KnnClassifier(activations[layer], labels, setup.config.n_class)


def split_outputs(setup, examples, batchsize=64, progress='forward pass'):
    """(every layer's activations [(M, D_l)], softmax probabilities (M, C)) for encoded
    (ids, label) examples, from one forward pass (with a progress bar described by
    `progress`, None for none)."""
    activations = dknn.checked_activations(setup.model.layer_activations(
        [x for x, _ in examples], batchsize, progress), 'evaluation')
    return activations, calibration.softmax(activations[-1])


def whole_split_outputs(setup, split, batchsize=64, engine=None):
    """(activations, probabilities, labels (M,)) of a whole split of the setup, as
    split_outputs; with `engine` (a RayEngine) the activations come from the Ray Data
    pipeline, as the training split's do."""
    settings = dknn_settings_lib.DkNNSettings(batchsize=batchsize, engine=engine)
    activations, labels = dknn.split_activations(setup, split, settings, 'forward pass: ' + split)
    return activations, calibration.softmax(activations[-1]), np.asarray(labels, dtype=np.int64)


def labels_of(examples):
    return np.array([y for _, y in examples], dtype=np.int64)


def tuned_backoff(classifier, layer, dev, test, signals, grid=None, collapse=None):
    """Tune (k, T, tau) on dev and score on test for one switch signal.
    dev/test: (activations, probabilities, labels); signals: (dev (M,), test (M',));
    grid: {'ks', 'temperatures', 'thresholds'}, each None for the default grid;
    collapse: see predicted."""
    grid = grid or {}
    ks = grid.get('ks') or k_grid(classifier.n_train)
    for k in ks:
        check_k(k, classifier.n_train)
    dev_neighbors = classifier.neighbors(dev[0][layer], max(ks))
    choice = tune_backoff(dev[1], dev_neighbors, dev[2], signals[0], classifier.n_class, ks,
                          grid.get('temperatures') or TEMPERATURES,
                          grid.get('thresholds') or THRESHOLDS, collapse)
    test_knn = classifier.probabilities(test[0][layer], choice.k, choice.temperature)
    scores = backoff_scores(test[1], test_knn, signals[1], choice.threshold, test[2], collapse)
    return dict(dataclasses.asdict(choice), **scores)


DEV_HALF_SEED = 0   # fixes which dev half calibrates the DkNN of a run without a calib split


def dev_halves(n_dev, seed=DEV_HALF_SEED):
    """(calibration rows, tuning rows) of a dev split of n_dev examples: a seeded random
    half (the smaller one when n_dev is odd) and the rest, each sorted."""
    order = np.random.RandomState(seed).permutation(n_dev)
    return np.sort(order[:n_dev // 2]), np.sort(order[n_dev // 2:])


def rows_of(split, rows):
    """The (activations, probabilities, labels) of `split` restricted to `rows`."""
    activations, probabilities, labels = split
    return [layer[rows] for layer in activations], probabilities[rows], labels[rows]


def credibility_backoff(setup, classifier, layer, dev, test, grid, dknn_settings):
    """Backoff with DkNN credibility as the switch (the DkNN of `dknn_settings`, a
    dknn_settings.DkNNSettings, its k cut to the training set's size). A run with a
    calibration split calibrates on it and tunes on all of dev; one without (the paper's
    setup, every labelled pair trains) calibrates on a seeded half of dev and tunes on the
    other half, so no example both calibrates and tunes. The result names its calibration
    set."""
    if dknn_settings.k > classifier.n_train:
        print('warning: the DkNN\'s k={} is larger than the {} training examples; it uses '
              'k={}'.format(dknn_settings.k, classifier.n_train, classifier.n_train),
              file=sys.stderr)
        dknn_settings = dknn_settings.with_k(classifier.n_train)
    deep = dknn.fitted_dknn_from_setup(setup, dknn_settings)
    if setup.splits.calib:
        dknn.calibrated_on_split(deep, setup, dknn_settings)
        calibrated_on = 'calibration split ({})'.format(len(setup.splits.calib))
    else:
        if len(dev[2]) < 2:
            raise UserError('{}: a dev split of {} example(s) cannot be halved to calibrate '
                            'the DkNN; re-train with a larger dev split or `n_calib` > 0'
                            .format(setup.result_dir, len(dev[2])))
        calib_rows, tune_rows = dev_halves(len(dev[2]))
        calib_activations, _, calib_labels = rows_of(dev, calib_rows)
        deep.calibrate(calib_activations, calib_labels)
        dev = rows_of(dev, tune_rows)
        calibrated_on = 'dev half ({}), tuned on the other dev half ({})'.format(
            len(calib_rows), len(tune_rows))
    credibility = tuple(deep.predict_from_activations(split[0])['credibility']
                        for split in (dev, test))
    return dict(tuned_backoff(classifier, layer, dev, test, credibility, grid),
                calibrated_on=calibrated_on)


def backoff_experiment(setup, layer=-2, dknn_settings=dknn_settings_lib.DkNNSettings(), k=None,
                       temperature=None, tau=None, test_examples=None):
    """The paper's kNN backoff on a trained model, and DkNN credibility as the switch.

    Returns {'confidence': ..., 'credibility': ..., 'n_train': N}: each the chosen k, T,
    threshold and dev accuracy (see BackoffChoice) plus the test scores of
    backoff_scores; credibility also names its calibration set (credibility_backoff).
    dknn_settings: the credibility switch's DkNN (its batchsize is the model's batch; with
    its engine, every split's activations come from the Ray Data pipeline).
    k, temperature, tau: fixed values instead of tuning them (tau: the confidence switch).
    test_examples: token-level (tokens, label) examples scored in place of the test split
    (a user's file; k, T and tau are still tuned on the run's dev split)."""
    batchsize = dknn_settings.batchsize
    if temperature is not None:
        check_temperature(temperature)
    if tau is not None:
        check_threshold(tau)
    grid = {'ks': None if k is None else [k],
            'temperatures': None if temperature is None else [temperature]}
    if not setup.splits.dev:
        raise UserError('{}: the dev split has no examples; tuning k, T and tau needs one '
                        '(re-train with `dev_fraction` > 0)'.format(setup.result_dir))
    if k is not None:   # before the activations are cached
        check_k(k, len(setup.splits.train))
    classifier = classifier_from_setup(setup, layer, batchsize, dknn_settings.engine)
    dev = whole_split_outputs(setup, 'dev', batchsize, dknn_settings.engine)
    if test_examples is None:
        test = whole_split_outputs(setup, 'test', batchsize, dknn_settings.engine)
    else:
        encoded = setup.encode(test_examples)
        test = split_outputs(setup, encoded, batchsize, 'forward pass: file') + (
            labels_of(encoded),)
    confidence = (dev[1].max(axis=1), test[1].max(axis=1))
    return {'confidence': tuned_backoff(classifier, layer, dev, test, confidence,
                                        dict(grid, thresholds=None if tau is None else [tau])),
            'credibility': credibility_backoff(setup, classifier, layer, dev, test, grid,
                                               dknn_settings),
            'n_train': classifier.n_train}
