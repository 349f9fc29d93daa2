"""What plausibility adds to the maps: seconds of the measures beside seconds of the maps.

    python benchmarks/bench_plausibility.py --model-setup results/stsa.binary_cnn/args.json \
        [--limit 200 --repeats 3 --out results/benchmarks/bench_plausibility.md]

One repeat = every method's maps (saliency.interpret_all, as paper_results.py
plausibility computes them) and then their measures against the SST test trees
(plausibility_runs.measure_maps, the random baseline included). The DkNN is built and
the trees read once before the timed repeats. Prints a Markdown table with the median
and the spread (min - max) over the repeats, and the measures' share of a run; --out
also writes it.
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import cli  # noqa: E402
from deepknn.neighbors import dknn as dknn_lib  # noqa: E402
from deepknn.faithfulness import runs as faithfulness_runs  # noqa: E402
from deepknn.models import model_setup  # noqa: E402
from deepknn.plausibility import runs as plausibility_runs  # noqa: E402
from deepknn.interpret import saliency  # noqa: E402
from deepknn.data import sst_trees  # noqa: E402
import nlp_utils  # noqa: E402


def timed(function):
    start = time.perf_counter()
    result = function()
    return result, time.perf_counter() - start


def spread(values):
    return '{:.2f} | {:.2f} - {:.2f}'.format(statistics.median(values), min(values), max(values))


def main(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser)
    cli.add_limit(parser, 200, 'the first N test sentences')
    cli.add_repeats(parser)
    parser.add_argument('--trees', default=None,
                        help='the SST test trees (default: DATA_DIR/sst-trees/test.txt)')
    cli.add_dknn(parser)
    cli.add_batchsize(parser, 256, 'rows per model batch')
    cli.add_benchmark_outputs(parser, 'bench_plausibility', printed_only=True)
    args = parser.parse_args(argv)
    stem = cli.benchmark_table(args)     # None: the table is only printed
    setup = model_setup.load_setup(args.model_setup)
    trees = sst_trees.read_trees(args.trees or sst_trees.default_trees_path(
        'test', setup.config.data_dir))
    aligned = plausibility_runs.align_rationales(setup.splits.test[:args.limit], trees,
                                                 plausibility_runs.check_binary(setup))
    methods, _ = faithfulness_runs.usable_methods(setup, saliency.STUDY_METHODS)
    dknn = dknn_lib.dknn_from_setup(setup, cli.dknn_settings(args, setup.result_dir))
    map_seconds, measure_seconds = [], []
    for _ in range(args.repeats):
        maps, seconds = timed(lambda: saliency.interpret_all(
            setup, methods, aligned.examples, dknn, args.batchsize, progress=False))
        map_seconds.append(seconds)
        measure_seconds.append(timed(lambda: plausibility_runs.measure_maps(
            maps, aligned, progress=False))[1])
    shares = [m / (m + s) for m, s in zip(measure_seconds, map_seconds)]
    table = ('# Plausibility cost beside the maps, {} {} ({} test sentences)\n\n'
             'Model: {}. Methods: {} and the random baseline; k={}, {}; {} repeats; {}. '
             'Command: `python '
             '{}`\n\n| quantity | median | min - max |\n| --- | --- | --- |\n'
             '| seconds of the maps | {} |\n| seconds of the measures | {} |\n'
             '| measures / (maps + measures) | {} |\n').format(
        setup.config.dataset, setup.config.model, len(aligned.examples),
        model_setup.run_description(setup), ', '.join(methods),
        args.k, args.backend, args.repeats, cli.machine_load(), ' '.join(sys.argv),
        spread(map_seconds), spread(measure_seconds), spread(shares))
    print(table)
    if stem:
        nlp_utils.atomic_write_text(stem + '.md', table)


if __name__ == '__main__':
    cli.run_cli(main)
