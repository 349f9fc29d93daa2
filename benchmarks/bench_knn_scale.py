"""Scale benchmark of the nearest-neighbour backends at SNLI size (a script, not a test).

Synthetic activations (a seeded Gaussian mixture in a low-dimensional latent space,
mapped linearly to `dims` and blurred with a little isotropic noise, float32) stand in
for the training set's layer activations; held-out draws from the same mixture are the
queries. For each dimension (smallest first) and each backend it measures

  build time, search time of one batched search of all queries (and per query),
  peak resident memory above what was resident before the build (faiss and KDTree
  memory is native, so this is measured from /proc, not tracemalloc), and
  recall@k against exact faiss flat search.

Every (backend, dims) run happens in a forked child process, so memory is measured
cleanly and a run over `--max-seconds` can be stopped: it is then reported as over
budget and the backend is skipped at the larger dims; a backend whose time, scaled
linearly with the dimension, would exceed the budget is skipped too. The exact
reference (faiss-flat) always runs.

Full size (the defaults; estimated 10-13 minutes on 2 idle cores, peak memory about
11 GB at 2400 dims):
  .venv/bin/python benchmarks/bench_knn_scale.py --n-train 550000 --dims 300 1200 2400 \
      --n-queries 200 --k 75 --max-seconds 180 --out results/benchmarks/knn_scale.md
Quick check (about 30 s):
  .venv/bin/python benchmarks/bench_knn_scale.py --n-train 50000 --dims 300 \
      --out benchmarks/out/knn_scale_small.md
"""
import csv
import io
import multiprocessing
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import cli  # noqa: E402

from deepknn.neighbors.knn_index import make_index  # noqa: E402
from nlp_utils import UserError, atomic_write_text  # noqa: E402

BENCH_BACKENDS = {   # name -> (make_index backend, options); faiss-flat is the exact reference
    'faiss-flat': ('faiss', {'kind': 'flat'}),
    'kdtree': ('kdtree', {}),
    'lsh': ('lsh', {}),
    'faiss-hnsw': ('faiss', {'kind': 'hnsw'}),
    'faiss-ivf': ('faiss', {'kind': 'ivf'}),
    'faiss-ivfpq': ('faiss', {'kind': 'ivfpq'}),
}
LATENT, CLUSTERS, NOISE = 48, 64, 0.05


def synthetic(n, dim, seed, stream, chunk=16384):
    """(n, dim) float32 activation-like vectors, generated in chunks (no float64 copy).

    The mixture (centres, spreads, latent -> dim map) depends only on `seed` and `dim`;
    `stream` selects independent draws from it (0: training set, 1: queries)."""
    mix_rng = np.random.default_rng([seed, dim])
    centres = mix_rng.normal(0.0, 2.0, (CLUSTERS, LATENT)).astype(np.float32)
    spreads = mix_rng.uniform(0.3, 1.0, (CLUSTERS, 1)).astype(np.float32)
    weights = mix_rng.dirichlet(np.full(CLUSTERS, 2.0))
    mapping = (mix_rng.normal(0.0, 1.0, (LATENT, dim)) / np.sqrt(LATENT)).astype(np.float32)
    rng = np.random.default_rng([seed, dim, stream + 1])
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, chunk):
        rows = min(chunk, n - start)
        c = rng.choice(CLUSTERS, size=rows, p=weights)
        z = centres[c] + spreads[c] * rng.standard_normal((rows, LATENT), dtype=np.float32)
        block = out[start:start + rows]
        np.matmul(z, mapping, out=block)
        block += NOISE * rng.standard_normal((rows, dim), dtype=np.float32)
    return out


def _rss_bytes():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')


def _hwm_bytes():
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmHWM:'):
                return int(line.split()[1]) * 1024
    return 0


def _child(conn, name, train, queries, k):
    """Build and search in this (forked) process; send the measurements back."""
    try:
        try:                                    # reset the peak-RSS mark to the current RSS
            with open('/proc/self/clear_refs', 'w') as f:
                f.write('5')
            hwm_ok = True
        except OSError:
            hwm_ok = False
        base = _rss_bytes()
        peak = [base]
        done = threading.Event()

        def sample():
            while not done.wait(0.02):
                peak[0] = max(peak[0], _rss_bytes())
        threading.Thread(target=sample, daemon=True).start()
        backend, options = BENCH_BACKENDS[name]
        t0 = time.perf_counter()
        index = make_index(backend, **options).build(train)
        t1 = time.perf_counter()
        _, indices = index.search(queries, k)
        t2 = time.perf_counter()
        done.set()
        top = max(peak[0], _rss_bytes(), _hwm_bytes() if hwm_ok else 0)
        notes = []
        if hasattr(index, 'bits_used'):
            notes.append('n_bits={} n_tables={}'.format(index.bits_used, index.n_tables))
        if hasattr(index, 'nlist_used'):
            notes.append('nlist={} nprobe={}'.format(index.nlist_used, index.nprobe))
        if getattr(index, 'kind', None) == 'ivfpq':
            notes.append('pq_m={} bytes/vector'.format(index._index.pq.M))
        if options.get('kind') == 'hnsw':
            notes.append('M={} efC={} efS={}'.format(index.hnsw_m, index.ef_construction,
                                                     max(index.ef_search, k)))
        conn.send({'build_s': t1 - t0, 'search_s': t2 - t1, 'peak_mb': (top - base) / 2**20,
                   'indices': indices, 'short': index.n_short_queries, 'notes': ' '.join(notes)})
    except BaseException as error:  # report anything, including MemoryError
        conn.send({'error': '{}: {}'.format(type(error).__name__, error)})
    finally:
        conn.close()


def run_one(name, train, queries, k, max_seconds):
    """Measurements of one backend in a forked child; {'error': ...} if it fails or runs over."""
    context = multiprocessing.get_context('fork')
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(send, name, train, queries, k))
    start = time.perf_counter()
    process.start()
    send.close()
    result = None
    if receive.poll(max_seconds):            # max_seconds=None: wait as long as it takes
        try:
            result = receive.recv()
        except EOFError:
            pass
    if result is None and process.is_alive():
        process.kill()
        result = {'error': 'over budget (> {:g} s)'.format(max_seconds), 'over': True}
    process.join()
    if result is None:
        result = {'error': 'child died (exit code {})'.format(process.exitcode)}
    result['wall_s'] = time.perf_counter() - start
    return result


def recall_at_k(found, exact):
    return float(np.mean([len(np.intersect1d(f[f >= 0], e)) / len(e)
                          for f, e in zip(found, exact)]))


COLUMNS = ['backend', 'dims', 'n_train', 'build_s', 'search_s', 'ms_per_query', 'peak_mb',
           'recall_at_k', 'short_queries', 'status', 'settings']


def format_table(rows, k):
    head = ['backend', 'dims', 'N', 'build s', 'search s', 'ms/query', 'peak MB',
            'recall@{}'.format(k), 'short', 'status', 'settings']
    lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
    for r in rows:
        def num(key, fmt):
            return '' if r[key] == '' else fmt.format(r[key])
        lines.append('| ' + ' | '.join([
            r['backend'], str(r['dims']), str(r['n_train']), num('build_s', '{:.1f}'),
            num('search_s', '{:.2f}'), num('ms_per_query', '{:.2f}'), num('peak_mb', '{:.0f}'),
            num('recall_at_k', '{:.3f}'), str(r['short_queries']), r['status'],
            r['settings']]) + ' |')
    return '\n'.join(lines)


def usability(rows, backends):
    """One line per backend: the dims it finished within budget and where it stopped."""
    lines = []
    for name in backends:
        ok = [r['dims'] for r in rows if r['backend'] == name and r['status'] == 'ok']
        stopped = [r for r in rows if r['backend'] == name and r['status'] != 'ok']
        text = '- {}: finished at dims {}'.format(name, ', '.join(map(str, ok)) or 'none')
        if stopped:
            text += '; stopped at {} ({})'.format(stopped[0]['dims'], stopped[0]['status'])
        lines.append(text)
    return '\n'.join(lines)


def main():
    parser = cli.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--n-train', type=cli.positive_int, default=550000,
                        help='synthetic training vectors per layer')
    parser.add_argument('--dims', type=cli.positive_int, nargs='+',
                        default=[300, 1200, 2400], help='layer dimensions to try')
    parser.add_argument('--n-queries', type=cli.positive_int, default=200,
                        help='queries timed per backend')
    cli.add_k(parser, help='neighbours')
    parser.add_argument('--backends', nargs='+', default=list(BENCH_BACKENDS),
                        help='any of: ' + ', '.join(BENCH_BACKENDS))
    parser.add_argument('--max-seconds', type=cli.positive_number, default=180.0,
                        help='budget for one backend build+search at one dimension')
    cli.add_seed(parser, help='seed of the synthetic data')
    cli.add_benchmark_outputs(parser, 'knn_scale')
    args = parser.parse_args()
    stem = cli.benchmark_table(args, ('.md', '.csv'))
    unknown = [b for b in args.backends if b not in BENCH_BACKENDS]
    if unknown:
        raise UserError('unknown backend(s) {}; choose from {}'.format(
            ', '.join(unknown), ', '.join(BENCH_BACKENDS)))
    if args.n_train < args.k or args.k < 1 or args.n_queries < 1 or min(args.dims) < 1:
        raise UserError('need 1 <= k <= n-train, n-queries >= 1 and positive dims')
    backends = ['faiss-flat'] + [b for b in dict.fromkeys(args.backends) if b != 'faiss-flat']
    rows, last = [], {}            # name -> (dims, seconds) of its last finished run, or 'over'/'failed'
    started = time.perf_counter()
    for dim in sorted(set(args.dims)):
        t0 = time.perf_counter()
        train = synthetic(args.n_train, dim, args.seed, stream=0)
        queries = synthetic(args.n_queries, dim, args.seed, stream=1)
        print('# dims={}: generated {} x {} float32 ({:.2f} GB) in {:.1f} s'.format(
            dim, args.n_train, dim, train.nbytes / 1e9, time.perf_counter() - t0), flush=True)
        exact = None
        for name in backends:
            row = dict.fromkeys(COLUMNS, '')
            row.update(backend=name, dims=dim, n_train=args.n_train)
            previous = last.get(name)
            if previous == 'failed':
                row['status'] = 'skipped (failed at fewer dims)'
            elif previous == 'over' or (previous and name != 'faiss-flat'
                                        and previous[1] * dim / previous[0] > args.max_seconds):
                row['status'] = 'skipped (over budget)'
            else:
                budget = args.max_seconds if name != 'faiss-flat' else None  # the reference always runs
                result = run_one(name, train, queries, args.k, budget)
                if 'error' in result:
                    row['status'] = result['error']
                    last[name] = 'over' if result.get('over') else 'failed'
                else:
                    if name == 'faiss-flat':
                        exact = result['indices']
                    row.update(build_s=result['build_s'], search_s=result['search_s'],
                               ms_per_query=1000 * result['search_s'] / args.n_queries,
                               peak_mb=result['peak_mb'], short_queries=result['short'],
                               settings=result['notes'], status='ok')
                    if exact is not None:
                        row['recall_at_k'] = recall_at_k(result['indices'], exact)
                    last[name] = (dim, result['build_s'] + result['search_s'])
            rows.append(row)
            print('{:<11} dims={:<5} {}'.format(name, dim, ' '.join(
                '{}={}'.format(c, '{:.3f}'.format(row[c]) if isinstance(row[c], float) else row[c])
                for c in COLUMNS[3:] if row[c] != '')), flush=True)
        del train, queries
    table = format_table(rows, args.k)
    summary = usability(rows, backends)
    print('\n' + table + '\n\n' + summary)
    print('total {:.0f} s'.format(time.perf_counter() - started))
    header = ('# Nearest-neighbour backends at scale\n\n'
              'Synthetic activations: {} training vectors, {} queries, k={}, seed {}; '
              'Gaussian mixture of {} clusters in a {}-dim latent space, linear map to '
              '`dims`, noise sd {}. Recall@{} is against exact faiss flat search. '
              'Time budget {:.0f} s per backend and dimension; {} CPU cores.\n\n'
              'Command: `{}`\n\n').format(
        args.n_train, args.n_queries, args.k, args.seed, CLUSTERS, LATENT, NOISE, args.k,
        args.max_seconds, len(os.sched_getaffinity(0)),
        ' '.join(['python'] + [os.path.relpath(sys.argv[0])] + sys.argv[1:]))
    atomic_write_text(stem + '.md', header + table + '\n\n' + summary + '\n')
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS + ['k'])
    writer.writeheader()
    for row in rows:
        writer.writerow({c: round(v, 4) if isinstance(v, float) else v
                         for c, v in dict(row, k=args.k).items()})
    atomic_write_text(stem + '.csv', buffer.getvalue())
    print('wrote {0}.md and {0}.csv'.format(stem))


if __name__ == '__main__':
    cli.run_cli(main)
