"""What the same answer everywhere costs: canonical blocks, one BLAS thread, the neighbour rule.

    python benchmarks/bench_canonical_blocks.py --model-setup results/cad-snli_cnn/args.json

Activations of the run's training split, each way timed `--repeats` times in one run:
(a) before: inputs grouped by length over the whole split (least padding), BLAS threads
    as the machine gives them: a row's last bits depended on its batch mates;
(b) canonical blocks of --batchsize rows in split order, BLAS threads free;
(c) canonical blocks with one BLAS thread: what every path runs now.
Then the neighbour search of the test split at k: (d) the backend's own top k (faiss flat),
(e) the neighbour rule (candidates re-ranked in float64, fetched until complete).
Prints seconds (median [min, max]) and each ratio to its baseline, (a) or (d).
"""
import contextlib
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import cli  # noqa: E402
from deepknn.neighbors import knn_index  # noqa: E402
from deepknn.models import model_setup  # noqa: E402
import nets  # noqa: E402
import nlp_utils  # noqa: E402


def timings(function, repeats):
    """Seconds of `repeats` calls of function()."""
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        seconds.append(time.perf_counter() - start)
    return seconds


@contextlib.contextmanager
def blas_threads_free():
    """(a) and (b): the BLAS thread pin lifted, as before the canonical blocks."""
    pinned = nets.one_blas_thread
    nets.one_blas_thread = contextlib.nullcontext
    try:
        yield
    finally:
        nets.one_blas_thread = pinned


def activation_ways(setup, batchsize):
    inputs = [x for x, _ in setup.train]
    by_length = sorted(inputs, key=setup.model.input_length)

    def free(xs):
        def run():
            with blas_threads_free():
                setup.model.layer_activations(xs, batchsize)
        return run
    return [('(a) length-grouped, BLAS threads free', free(by_length)),
            ('(b) canonical blocks, BLAS threads free', free(inputs)),
            ('(c) canonical blocks, one BLAS thread (now)',
             lambda: setup.model.layer_activations(inputs, batchsize))]


def search_ways(setup, batchsize, k):
    train = setup.model.layer_activations([x for x, _ in setup.train], batchsize)[0]
    test = setup.model.layer_activations([x for x, _ in setup.test], batchsize)[0]
    index = knn_index.make_index('faiss', kind='flat').build(train)
    return [('(d) faiss flat top k, first layer', lambda: index._search(test, k)),
            ('(e) neighbour rule over faiss flat, first layer', lambda: index.search(test, k))]


def rows_of(ways, repeats):
    rows, baseline = [], None
    for name, function in ways:
        seconds = timings(function, repeats)
        median = statistics.median(seconds)
        baseline = baseline or median
        rows.append('| {} | {:.3f} [{:.3f}, {:.3f}] | {:.2f}x |'.format(
            name, median, min(seconds), max(seconds), median / baseline))
    return rows


def main():
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser)
    cli.add_batchsize(parser)
    cli.add_k(parser)
    cli.add_repeats(parser, 5)
    cli.add_benchmark_outputs(parser, 'bench_canonical_blocks', printed_only=True)
    args = parser.parse_args()
    path = cli.benchmark_table(args)
    setup = model_setup.load_setup(args.model_setup)
    lines = ['Canonical blocks and the neighbour rule, {} ({} training, {} test examples, '
             'batch {}, k={}, {} repeats); command: python {}'.format(
                 setup.result_dir, len(setup.train), len(setup.test), args.batchsize, args.k,
                 args.repeats, ' '.join(sys.argv)), '',
             '| way | seconds, median [min, max] | ratio to (a) / (d) |', '| --- | --- | --- |']
    lines += rows_of(activation_ways(setup, args.batchsize), args.repeats)
    lines += rows_of(search_ways(setup, args.batchsize, args.k), args.repeats)
    table = '\n'.join(lines) + '\n'
    print(table)
    if path:
        nlp_utils.atomic_write_text(path + '.md', table)


if __name__ == '__main__':
    cli.run_cli(main)
