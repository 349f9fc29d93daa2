"""kNN backoff's added cost per test example vs the model's own forward pass.

    python benchmarks/bench_knn_backoff.py --model-setup results/stsa.binary_cnn/args.json \
        results/cad-snli_cnn/args.json

For each model, over its whole test split in batches: (a) the model's forward pass
(every layer, which it computes anyway to get the logits); (b) what backoff adds on
top: normalising the hidden layer, exact faiss search (IndexFlatL2) for the k nearest
training examples, p_knn and the switch. Each is timed --repeats times in this one run
and the median and range are kept; the script prints microseconds per example and the ratio
b/a (targets: at most 1x extra for the small CNNs, 0.1x for a transformer, whose
forward pass is the expensive part). An existing table is replaced only with
--overwrite. Building the index is a one-off and reported apart.
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn.rajani import knn_representations as knn  # noqa: E402
from deepknn import cli  # noqa: E402
from deepknn.models import model_setup  # noqa: E402
from deepknn.evaluation import calibration  # noqa: E402
from deepknn.reports.tables import markdown_table, write_table  # noqa: E402


def bench(setup, k, temperature, tau, layer, batchsize, repeats, limit=None):
    inputs = [x for x, _ in setup.test[:limit]]
    start = time.perf_counter()
    classifier = knn.classifier_from_setup(setup, layer, batchsize)
    build_seconds = time.perf_counter() - start
    activations = setup.model.layer_activations(inputs, batchsize)    # warm-up

    def forward():
        for start in range(0, len(inputs), batchsize):
            setup.model.layer_activations(inputs[start:start + batchsize], batchsize)

    def added():
        for start in range(0, len(inputs), batchsize):
            batch = [layer_[start:start + batchsize] for layer_ in activations]
            model_proba = calibration.softmax(batch[-1])
            knn_proba = classifier.probabilities(batch[layer], k, temperature)
            knn.backoff_predictions(model_proba, knn_proba, model_proba.max(axis=1), tau)

    # the two sides back to back in each repeat, so a burst of load hits both
    forward_s, added_s = zip(*[(cli.timed(forward), cli.timed(added)) for _ in range(repeats)])
    per = 1e6 / len(inputs)
    return {'dataset': setup.config.dataset, 'model': setup.config.model,
            'n_train': classifier.n_train, 'n_test': len(inputs), 'k': k,
            'forward_us_per_example': cli.median_and_range(np.multiply(forward_s, per), '{:.1f}'),
            'backoff_added_us_per_example': cli.median_and_range(np.multiply(added_s, per),
                                                             '{:.1f}'),
            'added_over_forward': cli.median_and_range(np.divide(added_s, forward_s), '{:.3f}'),
            'index_build_s': round(build_seconds, 2)}


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser, '+', 'args.json of trained runs (or their folders)')
    cli.add_k(parser, [16, 64], 'neighbours (one timing each)', nargs='+')
    parser.add_argument('--temperature', type=cli.positive_number, default=10.0,
                        help='T of the kNN softmax')
    parser.add_argument('--tau', type=float, default=0.5, help='backoff threshold')
    cli.add_layer(parser)
    cli.add_batchsize(parser)
    cli.add_repeats(parser, 5)
    cli.add_limit(parser, help='time the first N test inputs only (default: all)')
    cli.add_data_dir(parser, 'data folder (default: as trained)')
    cli.add_benchmark_outputs(parser, 'bench_knn_backoff')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    stem = cli.benchmark_table(args, ('.md', '.csv'))
    rows = []
    for path in args.model_setup:
        setup = model_setup.load_setup(path, data_dir=args.data_dir)
        for k in args.k:
            rows.append(bench(setup, k, args.temperature, args.tau, args.layer, args.batchsize,
                              args.repeats, args.limit))
            print('{dataset} {model} k={k}: forward {forward_us_per_example} us/example, '
                  'backoff adds {backoff_added_us_per_example} us/example = '
                  '{added_over_forward}x the forward pass'.format(**rows[-1]))
    header = ('# kNN backoff: added cost per test example vs the forward pass (CPU, batch {}, '
              'median (min-max) of {} runs, exact faiss)\n\nThe target: at most 0.1x the '
              'forward pass for the transformer. {} at the end.\n{}\n'.format(
                  args.batchsize, args.repeats, cli.machine_load(), cli.provenance()))
    write_table(stem, rows, list(rows[0]), header)
    print(markdown_table(rows, list(rows[0])))


if __name__ == '__main__':
    cli.run_cli(main)
