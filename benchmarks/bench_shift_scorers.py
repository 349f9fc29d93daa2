"""What each trust scorer of the shift study costs per example beside the forward pass.

    python benchmarks/bench_shift_scorers.py --model-setup results/stsa.binary_cnn/args.json

For each model, over its first --limit test inputs: (a) the model's forward pass (every
DkNN layer, the logits among them); (b) each scorer's score() of those outputs, the
scorer fitted once beforehand on the training and calibration splits (its fitting time
is reported apart). Both are timed --repeats times back to back in this one run; the
table keeps the median and range of microseconds per example and of the ratio b/a.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import cli  # noqa: E402
from deepknn.models import model_setup  # noqa: E402
from deepknn.reports.tables import markdown_table, write_table  # noqa: E402
from deepknn.shift import study  # noqa: E402
from deepknn.shift.scorers import Outputs  # noqa: E402


def bench(setup, settings, repeats, limit):
    """One row per headline scorer of the study: forward and scoring microseconds per
    example, their ratio, and the seconds the scorer took to fit."""
    inputs = [x for x, _ in setup.test[:limit]]
    specs = [s for s in study.default_scorers(2, settings.k, settings.backend)
             if '@' not in s.label]
    fitted, seconds = {}, {}
    study.fit_scorers(specs[:1], setup, settings)   # warm-up: the caches read once
    for spec in specs:
        seconds[spec.label] = cli.timed(lambda: fitted.update(
            study.fit_scorers([spec], setup, settings)[0]))
    outputs = Outputs.from_layers(setup.model.layer_activations(inputs, settings.batchsize))
    rows, per = [], 1e6 / len(inputs)
    for label, scorer in fitted.items():
        forward, scoring = zip(*[(cli.timed(lambda: setup.model.layer_activations(
            inputs, settings.batchsize)), cli.timed(lambda: scorer.score(outputs)))
            for _ in range(repeats)])
        rows.append({'run': os.path.basename(os.path.normpath(setup.result_dir)),
                     'scorer': label, 'n_test': len(inputs),
                     'forward_us_per_example': cli.median_and_range(np.multiply(forward, per),
                                                                '{:.1f}'),
                     'score_us_per_example': cli.median_and_range(np.multiply(scoring, per),
                                                              '{:.1f}'),
                     'score_over_forward': cli.median_and_range(np.divide(scoring, forward),
                                                            '{:.3f}'),
                     'fit_s': round(seconds[label], 2)})
    return rows


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser, '+', 'args.json of trained runs (or their folders)')
    cli.add_dknn(parser)
    cli.add_batchsize(parser)
    cli.add_repeats(parser, 5)
    cli.add_limit(parser, 1000, 'time the first N test inputs (default: %(default)s)')
    cli.add_data_dir(parser, 'data folder (default: as trained)')
    cli.add_benchmark_outputs(parser, 'bench_shift_scorers')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    stem = cli.benchmark_table(args, ('.md', '.csv'))
    rows = []
    for path in args.model_setup:
        setup = model_setup.load_setup(path, data_dir=args.data_dir)
        rows += bench(setup, cli.dknn_settings(args, setup.result_dir), args.repeats,
                      args.limit)
    header = ('# Trust scorers: cost per test example beside the forward pass (CPU, batch '
              '{}, median (min-max) of {} runs; fitting once, apart)\n\n{} at the end.\n{}\n'
              .format(args.batchsize, args.repeats, cli.machine_load(), cli.provenance()))
    write_table(stem, rows, list(rows[0]), header)
    print(markdown_table(rows, list(rows[0])))


if __name__ == '__main__':
    cli.run_cli(main)
