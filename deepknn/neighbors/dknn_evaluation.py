"""DkNN evaluation: predictions of a calibrated `dknn.DkNN` over a model's examples or
over activations another framework computed, the accuracy and uncertainty summary of a
report, and the report's file names. Used by run_dknn.py and the analysis scripts."""
import os
import zipfile

import numpy as np
import tqdm

import nets
import nlp_utils
from deepknn.evaluation import calibration
from deepknn.neighbors.dknn import checked_activations, split_activations
from nlp_utils import UserError


def evaluate(setup, dknn, examples, batchsize=64):
    """Softmax and DkNN predictions for (ids, label) examples, canonical block by block
    (nets.canonical_chunks; labels None for unlabelled inputs: the result then has no
    'label')."""
    inputs = [x for x, _ in examples]

    def batches():
        for start, stop in nets.canonical_chunks(len(inputs)):
            layers = checked_activations(setup.model.layer_activations(
                inputs[start:stop], batchsize), 'evaluation')
            yield layers, layers[-1]   # the last DkNN layer is the logits
    return _evaluation(dknn, batches(), [y for _, y in examples])


def evaluate_split(setup, dknn, split, examples, settings):
    """evaluate() of token-level `examples`, which are the whole `split` of the setup
    (None: examples from elsewhere, a file). With settings.engine set, a whole split's
    activations come from the Ray Data pipeline (dknn.split_activations) as the training
    and calibration activations do; otherwise they are computed here batch by batch."""
    if settings.engine is not None and split is not None:
        layers, labels = split_activations(setup, split, settings)
        return evaluate_activations(dknn, layers, labels, layers[-1])   # the last is the logits
    return evaluate(setup, dknn, setup.encode(examples), settings.batchsize)


def evaluate_activations(dknn, activations, labels, logits=None, batchsize=1024):
    """DkNN predictions for activations computed elsewhere: list of (N, D_l) arrays,
    labels (N,), and optionally the model's logits (N, C) for its softmax."""
    batches = (([layer[start:start + batchsize] for layer in activations],
                None if logits is None else logits[start:start + batchsize])
               for start in range(0, len(labels), batchsize))
    return _evaluation(dknn, batches, labels)


def _evaluation(dknn, batches, labels):
    """Merge the DkNN results of (layers, logits or None) batches into arrays over all
    examples, with the softmax of the logits where given."""
    results = []
    with tqdm.tqdm(total=len(labels), desc='evaluating', unit='example') as bar:
        for layers, logits in batches:
            result = dknn.predict_from_activations(layers)
            if logits is not None:
                result['softmax_probability'] = calibration.softmax(logits)
            results.append(result)
            bar.update(len(layers[0]))
    merged = {key: np.concatenate([r[key] for r in results]) for key in results[0]}
    if all(label is not None for label in labels):     # new sentences have none
        merged['label'] = np.asarray(labels, dtype=np.int64)
    return merged


# Per evaluated example, saved beside the report for figures (see paper_results.py).
PREDICTION_KEYS = ('label', 'prediction', 'credibility', 'confidence', 'softmax_probability')


def output_names(split, backend, variant=''):
    """(report JSON, per-example npz) file names of a DkNN evaluation: one pair per
    evaluated split (or file), backend and `variant` (a tag of the other settings that
    change the result, '' for the defaults), so no run overwrites another's."""
    return ('dknn_{}_{}{}.json'.format(split, backend, variant),
            'dknn_predictions_{}_{}{}.npz'.format(split, backend, variant))


def summary(evaluation):
    """The accuracy and uncertainty statistics of a DkNN report (softmax statistics only
    when the evaluation has the model's softmax)."""
    labels = evaluation['label']
    correct = evaluation['prediction'] == labels
    stats = {'dknn_accuracy': float(np.mean(correct)), 'n_examples': int(len(labels)),
             'softmax_accuracy': None, 'agreement_with_softmax': None}
    if 'softmax_probability' in evaluation:
        softmax_prediction = evaluation['softmax_probability'].argmax(axis=1)
        stats.update(softmax_accuracy=float(np.mean(softmax_prediction == labels)),
                     agreement_with_softmax=float(np.mean(
                         softmax_prediction == evaluation['prediction'])))
    for name in ('credibility', 'confidence'):
        for outcome, mask in (('correct', correct), ('wrong', ~correct)):
            values = evaluation[name][mask]
            stats['mean_{}_{}'.format(name, outcome)] = float(values.mean()) if len(values) else None
    return stats


# ---------------------------------------------------------------- activations from elsewhere
ACTIVATION_SPLITS = ('train', 'calib', 'test')


def read_activations(path):
    """One split of activations another framework computed: an npz with arrays
    layer_0 ... layer_{L-1} (N, D_l), labels (N,) integers in [0, C), and optionally
    logits (N, C). Returns (list of layers, labels, logits or None)."""
    if not os.path.exists(path):
        raise UserError('{} does not exist; the `activations` folder needs {} (see '
                        'docs/dknn.md)'.format(
            path, ', '.join(s + '.npz' for s in ACTIVATION_SPLITS)))
    nlp_utils.check_npz(path, 'activations file', 'write it with numpy.savez')
    try:
        with np.load(path, allow_pickle=False) as saved:
            files = set(saved.files)
            n_layers = 0
            while 'layer_{}'.format(n_layers) in files:
                n_layers += 1
            beyond = sorted(f for f in files if f.startswith('layer_')
                            and f not in {'layer_{}'.format(i) for i in range(n_layers)})
            if beyond:
                raise UserError('{}: layers must be numbered layer_0, layer_1, ... without a '
                                'gap; layer_{} is missing before {}'.format(
                                    path, n_layers, ', '.join(beyond)))
            layers = [saved['layer_{}'.format(i)] for i in range(n_layers)]
            labels = saved['labels'] if 'labels' in files else None
            logits = saved['logits'] if 'logits' in files else None
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise UserError('{} is not a readable npz without pickle ({})'.format(path, error))
    if not layers or labels is None:
        raise UserError('{} needs arrays layer_0, layer_1, ... and labels; it has {}'.format(
            path, ', '.join(sorted(files)) or 'none'))
    labels = np.asarray(labels)
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise UserError('{}: labels must be a 1-D integer array, got {} {}'.format(
            path, labels.dtype, labels.shape))
    if len(labels) == 0:
        raise UserError('{} holds no examples (0 labels); write at least one row'.format(path))
    for i, layer in enumerate(layers + ([logits] if logits is not None else [])):
        if layer.ndim != 2 or len(layer) != len(labels):
            raise UserError('{}: {} must have shape ({}, D), got {}'.format(
                path, 'logits' if i == len(layers) else 'layer_{}'.format(i), len(labels),
                layer.shape))
    return checked_activations(layers, path), labels.astype(np.int64), logits
