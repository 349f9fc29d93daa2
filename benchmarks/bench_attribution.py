"""What each training-data attribution method costs per explained input beside the forward
pass, in time and memory.

    python benchmarks/bench_attribution.py --model-setup results/sst2_cnn_attr

For each run, over --limit test inputs and the whole training split: (a) the model's
forward pass of those inputs; (b) the arrays of them the method reads (the final model's DkNN
layers; for TracIn and TRAK each checkpoint's too; with --projected the projected
gradients, a backward pass per input and checkpoint) and its top-5 training rows for each, the method fitted
once beforehand (its fitting time is reported apart). Both are timed --repeats times
back to back in this one run; the table keeps the median and range of milliseconds per
input and of the ratio b/a, and the peak memory numpy allocated while scoring
(tracemalloc, the largest over the repeats).
"""
import os
import sys
import tracemalloc

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import cli  # noqa: E402
from deepknn.attribution import gradients  # noqa: E402
from deepknn.attribution import study as study_lib  # noqa: E402
from deepknn.attribution.run_arrays import RunArrays  # noqa: E402
from deepknn.models import model_setup  # noqa: E402
from deepknn.reports.tables import markdown_table, write_table  # noqa: E402

BENCHED = ('knn l2, {penultimate}', 'dknn-vote signed', 'representer', 'tracin-last',
           'grad-cos', 'trak last-layer', 'tracin-projected', 'trak')


def benched_variants(n_layers, projected):
    penultimate = study_lib.layer_name(n_layers - 2, n_layers)
    wanted = [label.format(penultimate=penultimate) for label in BENCHED]
    return [v for v in study_lib.variants(n_layers, projected=projected) if v.label in wanted]


def scored(variant, method, arrays, xs, labels):
    """Build the inputs' arrays the method reads and rank the training rows for each:
    the per-input cost."""
    method.top(arrays.representations(xs, labels, variant.reads_checkpoints), 5)


def peak_bytes(function):
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def bench(setup, repeats, limit, projected):
    """One row per benched method of one run."""
    arrays = RunArrays.of(setup, gradients.GaussianProjection() if projected else None)
    train_xs, train_labels = study_lib.encode(setup, setup.splits.train)
    train = arrays.representations(train_xs, train_labels)
    xs, _ = study_lib.encode(setup, setup.splits.test[:limit])
    labels = setup.model.predict_logits(xs).argmax(axis=1)
    rows, per = [], 1e3 / len(xs)
    for variant in benched_variants(len(train.layers), projected):
        method = variant.build()
        fit_s = cli.timed(lambda: method.fit(train))
        forward, scoring, memory = zip(*[(
            cli.timed(lambda: setup.model.layer_activations(xs, setup.config.batchsize)),
            cli.timed(lambda: scored(variant, method, arrays, xs, labels)),
            peak_bytes(lambda: scored(variant, method, arrays, xs, labels)))
            for _ in range(repeats)])
        rows.append({'run': os.path.basename(os.path.normpath(setup.result_dir)),
                     'method': variant.label, 'n_train': len(train_labels), 'n_test': len(xs),
                     'checkpoints': len(arrays.checkpoints),
                     'forward_ms_per_input': cli.median_and_range(np.multiply(forward, per),
                                                                  '{:.2f}'),
                     'method_ms_per_input': cli.median_and_range(np.multiply(scoring, per),
                                                                 '{:.2f}'),
                     'method_over_forward': cli.median_and_range(np.divide(scoring, forward),
                                                                 '{:.1f}'),
                     'peak_MiB': round(max(memory) / 2 ** 20, 1), 'fit_s': round(fit_s, 2)})
    return rows


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser, '+', 'args.json of trained runs (or their folders)')
    cli.add_repeats(parser, 3)
    cli.add_limit(parser, 100, 'explain the first N test inputs (default: %(default)s)')
    parser.add_argument('--projected', action='store_true',
                        help='also the all-parameter (projected) methods: a backward pass per '
                             'input and checkpoint')
    cli.add_data_dir(parser, 'data folder (default: as trained)')
    cli.add_benchmark_outputs(parser, 'bench_attribution')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    stem = cli.benchmark_table(args, ('.md', '.csv'))
    rows = []
    for path in args.model_setup:
        rows += bench(model_setup.load_setup(path, data_dir=args.data_dir), args.repeats,
                      args.limit, args.projected)
    header = ('# Training-data attribution: cost per explained input beside the forward pass '
              '(CPU, median (min-max) of {} runs; the inputs\' arrays included, fitting once, '
              'apart)\n\n{} at the end.\n{}\n'.format(args.repeats, cli.machine_load(),
                                                     cli.provenance()))
    write_table(stem, rows, list(rows[0]), header)
    print(markdown_table(rows, list(rows[0])))


if __name__ == '__main__':
    cli.run_cli(main)
