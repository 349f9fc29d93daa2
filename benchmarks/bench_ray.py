"""Ray engine vs the one-process path: activation extraction and DkNN search.

    python benchmarks/bench_ray.py --model-setup results/stsa.binary_cnn/args.json \
        --workers 1 2 --shards 1 2 4 --repeats 3

Extraction: the training split's every-layer activations, (a) in this process
(model.layer_activations) and (b) by the Ray Data actor pool with 1 and 2 workers into a
fresh storage folder each repeat, actor start-up and model loading included (what a job
pays). Search: the k nearest training rows in every layer for the whole test split,
(a) one exact faiss flat index per layer in this process and (b) 1, 2, 4 flat shards
(one search actor each) with the top-k merged. Each measurement is repeated --repeats
times in this one run: median (min-max) seconds, throughput, and speed relative to the
one-process path (>1: faster). Peak resident memory: per Ray worker (extraction actors
and shard actors), and this process's own for the one-process path (it holds the model,
every layer and the indexes). Storage goes to new folders under --scratch, removed at
the end. An existing table is replaced only with --overwrite.
"""
import os
import resource
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import cli  # noqa: E402
from deepknn.neighbors import dknn as dknn_lib  # noqa: E402
from deepknn.neighbors import knn_index
from deepknn.models import model_setup  # noqa: E402
from deepknn.distributed import activations, search, shards  # noqa: E402
from deepknn.distributed.engine import RayEngine  # noqa: E402
from deepknn.reports.tables import markdown_table, write_table  # noqa: E402


def row(step, path, workers, n_shards, seconds, items, baseline, peak_mib):
    """One table row: median (min-max) seconds, items/s at the median, speed vs baseline."""
    return {'step': step, 'path': path, 'workers': workers, 'shards': n_shards,
            'seconds': cli.median_and_range(seconds, '{:.2f}'),
            'per_second': '{:.0f}'.format(items / np.median(seconds)),
            'speed_vs_one_process': cli.median_and_range(
                np.median(baseline) / np.asarray(seconds), '{:.2f}'),
            'peak_mib_per_worker': peak_mib}


def own_peak_mib():
    return '{:.0f} (this process)'.format(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0)


def bench_extraction(setup, args, key):
    """Rows of extraction in-process and with each worker count."""
    inputs = [x for x, _ in setup.train]
    local = [cli.timed(lambda: setup.model.layer_activations(inputs, args.batchsize))
             for _ in range(args.repeats)]
    rows = [row('extraction', 'one process', 1, '-', local, len(inputs), local, own_peak_mib())]
    for workers in args.workers:
        seconds, peaks = [], []
        for _ in range(args.repeats):
            storage = tempfile.mkdtemp(dir=args.scratch, prefix='bench_ray_')
            engine = RayEngine(storage, shards=1, workers=workers, num_cpus=args.cpus,
                               part_rows=args.part_rows)
            seconds.append(cli.timed(lambda: peaks.extend(activations.extract_split(
                engine, setup, 'train', key, args.batchsize, False).worker_peak_mib.values())))
            shutil.rmtree(storage)              # made by this repeat, above
        rows.append(row('extraction', 'ray', workers, '-', seconds, len(inputs), local,
                        '{:.0f}'.format(max(peaks))))
        print(rows[-1])
    return rows


def bench_search(setup, args, key, storage):
    """Rows of search in-process and with each shard count, on the training split's
    activations in `storage` (extracted once, not timed)."""
    base = RayEngine(storage, shards=max(args.shards), workers=2, num_cpus=args.cpus,
                     part_rows=args.part_rows)
    parts = activations.extract_split(base, setup, 'train', key, args.batchsize, False)
    queries = setup.model.layer_activations([x for x, _ in setup.test], args.batchsize)
    layers = list(range(len(queries)))
    train = [parts.column('layer_{}'.format(i)) for i in layers]

    def search_all(indexes):
        return [index.search(query, args.k) for index, query in zip(indexes, queries)]
    indexes = [knn_index.FaissIndex('flat').build(layer) for layer in train]
    local = [cli.timed(lambda: search_all(indexes)) for _ in range(args.repeats)]
    rows = [row('search', 'one process, all faiss threads', 1, 1, local, len(queries[0]),
                local, own_peak_mib())]
    # One faiss thread, as each shard actor runs: on a machine busy with other jobs,
    # OpenMP threads wait on each other. (faiss's thread count stays 1 from here on.)
    indexes = [knn_index.FaissIndex('flat', n_threads=1).build(layer) for layer in train]
    seconds = [cli.timed(lambda: search_all(indexes)) for _ in range(args.repeats)]
    rows.append(row('search', 'one process, 1 faiss thread', 1, 1, seconds, len(queries[0]),
                    local, own_peak_mib()))
    for n_shards in args.shards:
        engine = RayEngine(storage, shards=n_shards, workers=2, num_cpus=args.cpus,
                           part_rows=args.part_rows)
        sharded = search.sharded_indexes(engine, parts, layers,
                                         shards.model_folder(storage, key), progress=False)
        check_exact(search_all(sharded), search_all(indexes))
        seconds = [cli.timed(lambda: search_all(sharded)) for _ in range(args.repeats)]
        import ray
        peak = max(ray.get([s.peak_mib.remote() for s in sharded[0].searchers]))
        rows.append(row('search', 'ray', n_shards, n_shards, seconds, len(queries[0]), local,
                        '{:.0f}'.format(peak)))
        print(rows[-1])
    return rows


def check_exact(found, expected):
    """Flat shards must merge to the exact answer; a benchmark of a wrong answer stops."""
    for (_, ids), (_, exact_ids) in zip(found, expected):
        if np.mean(ids == exact_ids) < 0.999:     # ties between equal distances may swap
            raise SystemExit('sharded search disagrees with the exact index')


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser)
    # --workers and --shards are the engine's (one count each); the old spellings here
    # stay hidden aliases.
    for flag, default, help in (('workers', [1, 2], 'extraction actor counts to time'),
                                ('shards', [1, 2, 4], 'index shard counts to time')):
        parser.add_argument('--{}-counts'.format(flag[:-1]), dest=flag, nargs='+',
                            type=cli.positive_int, default=default, help=help)
        cli.add_hidden_alias(parser, '--' + flag, flag, nargs='+', type=cli.positive_int)
    parser.add_argument('--cpus', type=cli.positive_int, default=os.cpu_count(),
                        help='CPUs of the local Ray')
    parser.add_argument('--part-rows', type=cli.positive_int, default=1000,
                        help='rows per activation part')
    cli.add_repeats(parser)
    parser.add_argument('--scratch', default=None,
                        help='folder for the temporary storage folders (default: the '
                             "system's temporary folder)")
    cli.add_k(parser)
    cli.add_batchsize(parser)
    cli.add_benchmark_outputs(parser, 'bench_ray')
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    stem = cli.benchmark_table(args, ('.md', '.csv'))
    cli.check_output_folder(args.scratch, '--scratch')
    setup = model_setup.load_setup(args.model_setup)
    key = dknn_lib.activation_key(setup)
    load = cli.machine_load()
    rows = bench_extraction(setup, args, key)
    storage = tempfile.mkdtemp(dir=args.scratch, prefix='bench_ray_')
    try:
        rows += bench_search(setup, args, key, storage)
    finally:
        shutil.rmtree(storage)                  # made above
    header = ('# Ray engine vs one process: extraction and search ({}; {} training and {} '
              'test examples, k={}, median (min-max) of {} repeats in this one run)\n\n'
              'Extraction includes starting the actor pool and loading the model; search is '
              'every layer for the whole test split, flat (exact) indexes. Machine at the '
              'start: {}.\n{}\n'.format(model_setup.run_description(setup), len(setup.train),
                                        len(setup.test), args.k, args.repeats, load,
                                        cli.provenance()))
    write_table(stem, rows, list(rows[0]), header)
    print(markdown_table(rows, list(rows[0])))


if __name__ == '__main__':
    cli.run_cli(main)
