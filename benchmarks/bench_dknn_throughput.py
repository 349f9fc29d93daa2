"""DkNN test-set throughput: the original's per-example KD-tree loop vs batched search.

    python benchmarks/bench_dknn_throughput.py --model-setup results/stsa.binary_cnn/args.json

(a) per-example: one model forward and one KD-tree query per layer for each test
    example, in a Python loop (how the original code evaluated);
(b) batched KD-tree: one model batch and one query per layer per batch;
(c) batched exact faiss (flat L2).
All three share the cached training activations and the calibration; the script
prints examples/second, the speed-up over (a), and whether predictions are identical.
"""
import os
import sys
import time

import numpy as np
import tqdm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import cli  # noqa: E402
from deepknn.models import model_setup  # noqa: E402
import nlp_utils  # noqa: E402
from deepknn.neighbors import dknn as dknn_lib  # noqa: E402
from deepknn.neighbors import dknn_settings  # noqa: E402


def per_example(setup, dknn, inputs):
    predictions = []
    for x in tqdm.tqdm(inputs, desc='(a) per-example kdtree', unit='example'):
        activations = setup.model.layer_activations([x])
        predictions.append(dknn.predict_from_activations(activations)['prediction'][0])
    return np.array(predictions)


def batched(setup, dknn, inputs, batchsize):
    predictions = []
    for start in tqdm.trange(0, len(inputs), batchsize, desc='batched ' + dknn.backend):
        activations = setup.model.layer_activations(inputs[start:start + batchsize], batchsize)
        predictions.append(dknn.predict_from_activations(activations)['prediction'])
    return np.concatenate(predictions)


def timed(function, *args):
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def main():
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser)
    cli.add_k(parser)
    cli.add_batchsize(parser, 1024, 'test examples per batched query')
    cli.add_limit(parser, help='first N test examples only')
    cli.add_benchmark_outputs(parser, 'bench_dknn_throughput')
    args = parser.parse_args()
    path = cli.benchmark_table(args) + '.md'
    setup = model_setup.load_setup(args.model_setup)
    inputs = [x for x, _ in setup.test[:args.limit]]
    dknns = {backend: dknn_lib.dknn_from_setup(setup, dknn_settings.DkNNSettings(args.k, backend))
             for backend in ('kdtree', 'faiss')}
    runs = [('(a) per-example KD-tree loop', *timed(per_example, setup, dknns['kdtree'], inputs)),
            ('(b) batched KD-tree', *timed(batched, setup, dknns['kdtree'], inputs, args.batchsize)),
            ('(c) batched exact faiss', *timed(batched, setup, dknns['faiss'], inputs, args.batchsize))]
    reference, baseline = runs[0][1], runs[0][2]
    lines = ['DkNN test-set evaluation, {} {} ({} examples, k={}, batch {}); '
             'command: python {}'.format(setup.config.dataset, setup.config.model, len(inputs),
                                         args.k, args.batchsize, ' '.join(sys.argv)), '',
             '| method | seconds | examples/s | speed-up vs (a) | predictions identical to (a) |',
             '| --- | --- | --- | --- | --- |']
    for name, predictions, seconds in runs:
        lines.append('| {} | {:.2f} | {:.1f} | {:.1f}x | {} |'.format(
            name, seconds, len(inputs) / seconds, baseline / seconds,
            bool(np.array_equal(predictions, reference))))
    table = '\n'.join(lines) + '\n'
    print(table)
    nlp_utils.atomic_write_text(path, table)


if __name__ == '__main__':
    cli.run_cli(main)
