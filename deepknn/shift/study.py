"""One run's trust study under shift: the model's outputs on every set (cached in the
run folder), every scorer fitted on the training and calibration splits, and each
scorer's score of every example.

    study = run_study(setup, study_sets(setup, data_dir), settings)

Nothing here measures: measured.py turns a StudyRun into rows of measures.
"""
import dataclasses
import os
import re

import numpy as np
import tqdm

import nlp_utils
from deepknn.neighbors import activation_cache
from deepknn.neighbors import dknn as dknn_lib
from deepknn.shift.scorers import SCORERS, Outputs
from deepknn.storage import result_folder

SUN_K = 50       # Sun et al. 2022's k for the normalised-feature kNN score


@dataclasses.dataclass(frozen=True)
class ScorerSpec:
    """A scorer as the study names it (`label`, e.g. 'mahalanobis@2'), its registry
    name and the options it is built with."""
    label: str
    name: str
    options: tuple = ()

    def build(self):
        return SCORERS[self.name](**dict(self.options))


def default_scorers(n_layers, k, backend='faiss'):
    """[ScorerSpec]: every scorer of the study for a model with `n_layers` DkNN layers
    (the last of them the logits; layer -2 the penultimate), DkNN scorers with `k`."""
    knn = (('backend', backend),)
    dknn = (('k', k), ('backend', backend))
    specs = [ScorerSpec('msp', 'msp'), ScorerSpec('temperature', 'temperature'),
             ScorerSpec('energy', 'energy'),
             ScorerSpec('mahalanobis', 'mahalanobis', (('layer', -2),)),
             ScorerSpec('relative-mahalanobis', 'relative-mahalanobis', (('layer', -2),)),
             ScorerSpec('knn-sun-k{}'.format(SUN_K), 'knn-sun', (('k', SUN_K),) + knn),
             ScorerSpec('knn-sun-k{}'.format(k), 'knn-sun', (('k', k),) + knn),
             ScorerSpec('dknn-credibility', 'dknn-credibility', dknn),
             ScorerSpec('dknn-confidence', 'dknn-confidence', dknn),
             ScorerSpec('dknn-normalized', 'dknn-normalized', dknn),
             ScorerSpec('dknn-selected', 'dknn-selected', dknn)]
    for layer in range(n_layers):
        specs += [ScorerSpec('mahalanobis@{}'.format(layer), 'mahalanobis', (('layer', layer),)),
                  ScorerSpec('relative-mahalanobis@{}'.format(layer), 'relative-mahalanobis',
                             (('layer', layer),)),
                  ScorerSpec('dknn-layer@{}'.format(layer), 'dknn-layer',
                             (('layer', layer),) + dknn)]
    return specs


@dataclasses.dataclass
class SetResult:
    """One set's outputs: softmax predictions (n,), each scorer's scores {label: (n,)},
    the all-layer DkNN's `dknn` result (predict_from_activations) and nonconformity
    (n, C), and the penultimate layer (n, D) the domain classifier reads."""
    shift_set: object
    softmax_prediction: np.ndarray
    scores: dict
    dknn: dict
    nonconformity: np.ndarray
    penultimate: np.ndarray


@dataclasses.dataclass
class StudyRun:
    """A run's study: its folder, the scorers' labels, the fitted all-layer DkNN (for
    recalibration), the calibration split's nonconformity at its labels (M,) and
    penultimate layer (M, D), the temperature, dknn-selected's choice and per-layer
    calibration AUROCs, and a SetResult per set (the in-distribution test first)."""
    result_dir: str
    labels: list
    dknn: object
    calibration_scores: np.ndarray
    calibration_penultimate: np.ndarray
    temperature: float
    selected_layers: list
    layer_aurocs: list
    sets: list


def _cache_name(set_name):
    return 'shift_outputs_{}.npz'.format(re.sub(r'[^A-Za-z0-9_.-]+', '_', set_name))


def set_outputs(setup, shift_set, batchsize):
    """Outputs of the model on a set, cached in <result_dir>/shift_outputs_<set>.npz under
    the model's activation key and the examples' digest (a rerun reads them back)."""
    path = os.path.join(setup.result_dir, _cache_name(shift_set.name))
    key = 'v1|{}|{}'.format(activation_cache.activation_key(setup, batchsize),
                            nlp_utils.examples_digest(shift_set.examples))
    cached = activation_cache.read_cache(path, key)
    if cached is None:
        inputs = [x for x, _ in setup.encode(shift_set.examples)]
        layers = activation_cache.checked_activations(setup.model.layer_activations(
            inputs, batchsize, progress='forward pass: ' + shift_set.name), shift_set.name)
        cached = {'layer_{}'.format(i): layer for i, layer in enumerate(layers)}
        with result_folder.lock_for_caches(setup.result_dir, activation_cache.CACHES_PURPOSE):
            nlp_utils.atomic_savez(path, key=np.array(key), **cached)
    return Outputs.from_layers([cached['layer_{}'.format(i)]
                                for i in range(len(cached) - ('key' in cached))])


def fit_scorers(specs, setup, settings):
    """({label: fitted scorer}, calibration Outputs, calibration labels (M,)): the scorers
    fitted on the training split (the run's activation cache) and the calibration split;
    `specs` None: default_scorers for the model's layers."""
    train_layers, train_labels = dknn_lib.training_split_activations(setup, settings)
    calib_layers, calib_labels = dknn_lib.split_activations(setup, 'calib', settings)
    train, calib = Outputs.from_layers(train_layers), Outputs.from_layers(calib_layers)
    train_labels, calib_labels = np.asarray(train_labels), np.asarray(calib_labels)
    if specs is None:
        specs = default_scorers(len(train_layers), settings.k, settings.backend)
    fitted = {}
    for spec in tqdm.tqdm(specs, desc='fitting scorers', unit='scorer'):
        fitted[spec.label] = spec.build().fit(train, train_labels, calib, calib_labels)
    return fitted, calib, calib_labels


def run_study(setup, sets, settings, specs=None):
    """StudyRun of `setup` over `sets` ([ShiftSet]) with the scorers `specs` ([ScorerSpec];
    None: default_scorers). The study needs 'msp', 'temperature', 'dknn-credibility' and
    'dknn-selected' among them."""
    fitted, calib, calib_labels = fit_scorers(specs, setup, settings)
    dknn = fitted['dknn-credibility'].dknn
    calib_result = dknn.predict_from_activations(calib.layers)
    calib_nonconformity = dknn.nonconformity(calib_result['neighbor_labels'])
    results = []
    for shift_set in tqdm.tqdm(sets, desc='scoring sets', unit='set'):
        outputs = set_outputs(setup, shift_set, settings.batchsize)
        found = dknn.predict_from_activations(outputs.layers)
        results.append(SetResult(
            shift_set, outputs.logits.argmax(axis=1),
            {label: scorer.score(outputs) for label, scorer in fitted.items()}, found,
            dknn.nonconformity(found['neighbor_labels']), outputs.layers[-2]))
    selected = fitted['dknn-selected']
    return StudyRun(setup.result_dir, list(fitted), dknn,
                    calib_nonconformity[np.arange(len(calib_labels)), calib_labels],
                    calib.layers[-2], float(fitted['temperature'].temperature),
                    list(selected.chosen_layers), list(selected.layer_aurocs), results)
