"""Explorer latency at scale: the training split's first open, a dataset page, a typed sentence, the embedding view.

    python benchmarks/bench_explorer.py --model-setup results/sst2_phrases10k_cnn/args.json \
        results/sst2_phrases_cnn/args.json --browser

For each run (runs of one model at different training-set sizes, smallest first), on a
loaded session through Starlette's test client (the app in this process, no network):

- the training split's first open (`/api/dataset?split=train`): the model and the DkNN
  over every training example, with the explorer's disk cache ignored (--cold-repeats
  times: it is the slow one), then after a restart (a new session reading the cache);
- dataset pages of the training split (page 1, a late page, sorted by credibility,
  wrong only, a free-text search);
- the input view of each of the first --sentences test sentences typed as text (every
  map, the neighbours in every DkNN layer);
- the embedding view of the last hidden layer: a session's first request (its
  projection fitted and cached, or read from that cache), then the server's answer
  (every training point), and with --browser the whole view in headless Chromium
  (request, JSON, drawing on the canvas) until it is drawn.

--measure picks some of them (open, pages, sentences, embedding), e.g. `--measure
sentences` for a transformer run whose training split takes long to evaluate.

Each warm measurement --repeats times: median and min-max, and the ratio of the last
run's median to the first's. Targets (2 CPU cores): CNN < 0.3 s and MiniLM < 2 s per
sentence, a page < 0.5 s, the embedding view < 2 s once its projection is cached.
Writes a Markdown table to --out (an existing file is replaced only with --overwrite).
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from starlette.testclient import TestClient  # noqa: E402

from deepknn import cli  # noqa: E402
from deepknn.models import model_setup  # noqa: E402
from deepknn.explorer import app as explorer_app  # noqa: E402
from deepknn.explorer import session as explorer  # noqa: E402
from deepknn.reports.tables import markdown_table  # noqa: E402
import nlp_utils  # noqa: E402
from nlp_utils import UserError  # noqa: E402

SENTENCE_TARGETS = {'minilm': 2.0, 'transformer': 2.0}   # seconds; other models 0.3 s
DEFAULT_SENTENCE_TARGET = 0.3
PAGE_TARGET = 0.5
EMBEDDING_TARGET = 2.0
PAGES = (('page 1', {}), ('page 200', {'page': '200'}),
         ('sorted by credibility, descending', {'sort': 'credibility', 'order': 'desc'}),
         ('wrong only (either)', {'wrong': 'either'}),
         ('search "good", sorted by DkNN prediction', {'search': 'good',
                                                      'sort': 'dknn_prediction'}))


MEASUREMENTS = ('open', 'pages', 'sentences', 'embedding')


def measurements(text):
    """argparse type of --measure: a comma-separated subset of MEASUREMENTS."""
    names = [name.strip() for name in text.split(',') if name.strip()]
    unknown = [name for name in names if name not in MEASUREMENTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError('{!r}: choose among {}'.format(
            text, ', '.join(MEASUREMENTS)))
    return names


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser, nargs='+', help='args.json of each run, smallest training '
                        'set first')
    cli.add_dknn(parser)
    cli.add_device(parser)
    parser.add_argument('--sentences', type=cli.positive_int, default=10,
                        help='input views of the first N test sentences')
    parser.add_argument('--cold-repeats', type=cli.positive_int, default=1,
                        help='timed first opens of the training split (each evaluates it)')
    parser.add_argument('--measure', default=','.join(MEASUREMENTS), type=measurements,
                        help='comma-separated measurements among {} (default: all)'.format(
                            ', '.join(MEASUREMENTS)))
    parser.add_argument('--browser', action='store_true',
                        help='also time the embedding view in headless Chromium (selenium)')
    cli.add_repeats(parser, 5)
    cli.add_benchmark_outputs(parser, 'bench_explorer')
    return parser.parse_args(argv)


def timed(call):
    start = time.perf_counter()
    response = call()
    seconds = time.perf_counter() - start
    if response.status_code != 200:
        raise UserError('the app answered {}: {}'.format(response.status_code, response.text))
    return seconds


def open_session(path, args, reuse=True):
    return explorer.ExplorerSession.open(path, explorer.Settings(
        cli.dknn_settings(args, None), gpu=args.gpu, data_dir=args.data_dir,
        reuse_evaluations=reuse))


def first_opens(path, args):
    """(cold seconds [--cold-repeats], after-restart seconds [--repeats]) of the training
    split's first dataset page."""
    cold = []
    for _ in range(args.cold_repeats):
        session = open_session(path, args, reuse=False)     # as if nothing were cached
        cold.append(timed(lambda: TestClient(explorer_app.make_app(session)).get(
            '/api/dataset', params={'split': 'train'})))
    warm = []
    for _ in range(args.repeats):
        session = open_session(path, args)
        warm.append(timed(lambda: TestClient(explorer_app.make_app(session)).get(
            '/api/dataset', params={'split': 'train'})))
    return cold, warm


def sentence_times(client, setup, args):
    typed = lambda words: ' '.join(map(nlp_utils.ptb_text, words))
    bodies = [{'premise': typed(tokens[0]), 'hypothesis': typed(tokens[1])}
              if setup.config.pair else {'text': typed(tokens)}
              for tokens, _ in setup.splits.test[:args.sentences]]
    client.post('/api/predict', json=dict(bodies[0], all_layers=True))   # warm-up
    return [statistics.mean(
        timed(lambda: client.post('/api/predict', json=dict(body, all_layers=True)))
        for body in bodies) for _ in range(args.repeats)]


def browser_times(session, layer, repeats):
    """Seconds from opening #/embedding in headless Chromium until its canvas is drawn."""
    from deepknn.explorer.browser import Server, chromium, wait_for
    driver = chromium()
    try:
        with Server(session) as base:
            seconds = []
            for _ in range(repeats + 1):            # the first warms the browser up
                driver.get('about:blank')
                start = time.perf_counter()
                driver.get(base + '#/embedding?layer={}'.format(layer))
                wait_for(driver, '#embedding-canvas', 300)
                seconds.append(time.perf_counter() - start)
            return seconds[1:]
    finally:
        driver.quit()


def measure(path, args):
    """{measurement name: (seconds list, target or None)} of one run, its setup and its
    training-set size."""
    found = {}
    if 'open' in args.measure:
        cold, warm = first_opens(path, args)
        found['training split, first open: model and DkNN over every example (s)'] = (cold, None)
        found['training split, first open after a restart: read from the disk cache (s)'] = (
            warm, None)
    session = open_session(path, args)
    client = TestClient(explorer_app.make_app(session))
    if 'pages' in args.measure:
        client.get('/api/dataset', params={'split': 'train'})   # loaded before timing
        for name, params in PAGES:
            query = dict(params, split='train', per_page='25')
            found['dataset page of the training split, 25 rows: {} (s)'.format(name)] = (
                [timed(lambda: client.get('/api/dataset', params=query))
                 for _ in range(args.repeats)], PAGE_TARGET)
    if 'sentences' in args.measure:
        target = SENTENCE_TARGETS.get(session.setup.config.model, DEFAULT_SENTENCE_TARGET)
        found['typed sentence: every map + neighbours in every layer (s per sentence, mean '
              'over {})'.format(args.sentences)] = (sentence_times(client, session.setup, args),
                                                    target)
    if 'embedding' in args.measure:
        found.update(embedding_times(session, client, args))
    return found, session.setup, len(session.examples['train'])


def embedding_times(session, client, args):
    """The embedding view's measurements: the projection once, then the server's answer
    and (--browser) the view in Chromium."""
    layer = session.dknn.n_layers - 2
    found = {'embedding: a session\'s first request (projection read from the run folder, '
             'or fitted and cached) (s)': (
        [timed(lambda: client.get('/api/embedding', params={'layer': layer}))], None),
        'embedding: the server\'s answer, every training point (s)': (
            [timed(lambda: client.get('/api/embedding', params={'layer': layer}))
             for _ in range(args.repeats)], None)}
    if args.browser:
        found['embedding view in headless Chromium: request, JSON and canvas drawn (s)'] = (
            browser_times(session, layer, args.repeats), EMBEDDING_TARGET)
    return found


def table_rows(results, sizes):
    """One row per measurement: each run's median (min-max), the last/first ratio."""
    rows = []
    for name in results[0]:
        row = {'measurement': name}
        for found, size in zip(results, sizes):
            seconds, target = found[name]
            row['{:,} train'.format(size)] = cli.median_and_range(seconds, '{:.3f}')
        medians = [statistics.median(found[name][0]) for found in results]
        row['ratio'] = '{:.1f}x'.format(medians[-1] / medians[0]) if len(results) > 1 else ''
        row['target'] = '' if target is None else '< {} s'.format(target)
        row['met'] = '' if target is None else ('yes' if all(m < target for m in medians)
                                                else 'no')
        rows.append(row)
    return rows


def main(argv=None):
    args = parse_args(argv)
    path = cli.benchmark_table(args) + '.md'
    measured = [measure(run, args) for run in args.model_setup]
    results, setups, sizes = zip(*measured)
    header = ('# Explorer latency at scale: {} {}\n\n{}\n\nRuns: {}. {}; {} repeats (the cold '
              'first open {}): median (min-max); ratio: the largest run\'s median over the '
              'smallest\'s. Requests through Starlette\'s test client (no network); the '
              'Chromium row through uvicorn on 127.0.0.1.\n'.format(
                  setups[0].config.dataset, setups[0].config.model, cli.provenance(),
                  '; '.join('{} ({:,} training examples)'.format(
                      model_setup.run_description(s), n) for s, n in zip(setups, sizes)),
                  cli.machine_load(), args.repeats, args.cold_repeats))
    columns = ['measurement'] + ['{:,} train'.format(n) for n in sizes] + ['ratio', 'target',
                                                                           'met']
    table = markdown_table(table_rows(results, sizes), columns)
    nlp_utils.atomic_write_text(path, header + '\n' + table + '\n')
    print(header + '\n' + table)


if __name__ == '__main__':
    cli.run_cli(main)
