"""Temperature scaling of a trained model: fit T on the calibration split, or evaluate it.

CLI: python scaling.py --model-setup results/<dataset>_<model>/args.json
writes temperature.json and reliability_temperature.png next to args.json (the maths is
deepknn/evaluation/calibration.py).
"""
import os
import sys

import numpy as np

from deepknn.evaluation.calibration import (N_BINS, TEMPERATURE_FILE, calibration_summary,
                                 expected_calibration_error, load_temperature, nll,
                                 reliability_curve, softmax)
from deepknn import cli
from nlp_utils import UserError, atomic_write_files, json_write

DIAGRAM_FILE = 'reliability_temperature.png'
MIN_RELIABLE_CALIBRATION = 50   # fewer examples: the fitted T is said to be unreliable


def reliability_write(path, logits, labels, temperature, title):
    """(path, write, mode) of the reliability diagram of the softmax before and after
    dividing by T, for atomic_write_files."""
    # Drawing pulls in matplotlib, which the rest of this module does not need.
    from deepknn.reports.plots import figure_write, reliability_figure
    curves = []
    for name, t in [('softmax', 1.0), ('softmax / T={:.3f}'.format(temperature), temperature)]:
        probs = softmax(logits, t)
        curves.append(reliability_curve(name, probs.max(axis=1), probs.argmax(axis=1) == labels))
    return figure_write(reliability_figure(curves, title), path)


def write_calibration(result_dir, logits, labels):
    """Fit T, write temperature.json and the before/after reliability diagram (renamed
    into place together); -> summary."""
    labels = np.asarray(labels)
    summary = calibration_summary(logits, labels)
    atomic_write_files([
        json_write(os.path.join(result_dir, TEMPERATURE_FILE), summary),
        reliability_write(os.path.join(result_dir, DIAGRAM_FILE), logits, labels,
                          summary['temperature'], 'Temperature scaling on the calibration split')])
    return summary


def evaluate_calibration(result_dir, name, logits, labels):
    """NLL and ECE before/after the saved T on another split or file `name`; writes
    calibration_<name>.json and reliability_temperature_<name>.png. -> summary."""
    labels = np.asarray(labels)
    temperature = load_temperature(result_dir)
    summary = {'temperature': temperature, 'evaluated': name, 'n_examples': int(len(labels)),
               'nll_before': nll(logits, labels), 'nll_after': nll(logits, labels, temperature),
               'ece_before': expected_calibration_error(softmax(logits), labels),
               'ece_after': expected_calibration_error(softmax(logits, temperature), labels),
               'n_bins': N_BINS}
    atomic_write_files([
        json_write(os.path.join(result_dir, 'calibration_{}.json'.format(name)), summary),
        reliability_write(os.path.join(result_dir, 'reliability_temperature_{}.png'.format(name)),
                          logits, labels, temperature,
                          'Temperature (fitted on calibration) on {}'.format(name))])
    return summary


def main(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser)
    evaluated = parser.add_mutually_exclusive_group()
    cli.add_split(evaluated, None, 'evaluate the saved temperature on this split (default: fit '
                  'it on the calibration split)', unusable={
                      'calib': 'the temperature is fitted there (scaling.py without --split); '
                               'evaluate it on train, dev or test'})
    evaluated.add_argument('--eval-file', default=None,
                           help="evaluate the saved temperature on this file, in the training "
                                "data's format")
    cli.add_batchsize(parser)
    cli.add_device(parser)
    cli.add_skip_bad_lines(parser)
    args = parser.parse_args(argv)

    # Imported here because it pulls in Chainer, which the functions above do not need.
    from deepknn.models.model_setup import load_setup
    from deepknn.storage.result_folder import lock
    setup = load_setup(args.model_setup, gpu=args.gpu, data_dir=args.data_dir)
    fitting = args.split is None and args.eval_file is None
    name, examples = setup.evaluation_examples('calib' if fitting else args.split, args.eval_file, args.skip_bad_lines)
    if not examples:
        raise UserError('the {} split of {} is empty{}'.format(
            name, setup.result_dir, '; retrain with --n-calib > 0' if fitting else ''))
    if not fitting:
        load_temperature(setup.result_dir)   # before the forward pass
    if fitting and len(examples) < MIN_RELIABLE_CALIBRATION:
        print('warning: the temperature is fitted on only {} calibration examples; it is '
              'unreliable below about {} (re-train with a larger --n-calib)'.format(
                  len(examples), MIN_RELIABLE_CALIBRATION), file=sys.stderr)
    encoded = setup.encode(examples)
    labels = np.asarray([label for _, label in encoded], dtype=np.int64)
    logits = setup.model.predict_logits([ids for ids, _ in encoded], batchsize=args.batchsize)
    with lock(setup.result_dir, 'scaling.py'):
        if fitting:
            summary = write_calibration(setup.result_dir, logits, labels)
        else:
            summary = evaluate_calibration(setup.result_dir, name, logits, labels)
    print('temperature {temperature:.4f}: NLL {nll_before:.4f} -> {nll_after:.4f}, '
          'ECE {ece_before:.4f} -> {ece_after:.4f} on {n} examples of {name}'.format(
              n=len(labels), name=name, **summary))


if __name__ == '__main__':
    cli.run_cli(main)
