"""Explorer request latency: the input view of a typed sentence and a dataset page.

    python benchmarks/bench_explorer.py --model-setup results/stsa.binary_cnn/args.json

Through Starlette's test client (the app in this process, no network), on a loaded
run: the input view (POST /api/predict: every map the run supports and the neighbours
in every DkNN layer) of each of the first --sentences test sentences typed as text,
and dataset pages (GET /api/dataset: page 1, a late page, sorted by credibility, wrong
only, one gold label) of a --rows example split: the training split repeated up to
--rows examples, evaluated once before the pages are timed (that one-off evaluation is
reported too). Each measurement --repeats times: median and min-max. Targets (2 CPU
cores): CNN < 0.3 s and MiniLM < 2 s per sentence, a page < 0.5 s. Writes a Markdown
table to --out (an existing file is replaced only with --overwrite).
"""
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
PAGES = (('page 1', {}), ('page 200', {'page': '200'}),
         ('sorted by credibility, descending', {'sort': 'credibility', 'order': 'desc'}),
         ('wrong only (either)', {'wrong': 'either'}),
         ('credibility <= 0.5, sorted by text', {'max_credibility': '0.5', 'sort': 'text'}))


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser)
    cli.add_dknn(parser)
    cli.add_device(parser)
    parser.add_argument('--sentences', type=cli.positive_int, default=10,
                        help='input views of the first N test sentences')
    parser.add_argument('--rows', type=cli.positive_int, default=10000,
                        help='examples in the dataset view\'s split')
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


def row(measurement, seconds, target=None):
    return {'measurement': measurement, 'median': '{:.3f}'.format(statistics.median(seconds)),
            'min-max': '{:.3f}-{:.3f}'.format(min(seconds), max(seconds)),
            'target': '' if target is None else '< {} s'.format(target),
            'met': '' if target is None else ('yes' if statistics.median(seconds) < target
                                              else 'no')}


def main(argv=None):
    args = parse_args(argv)
    path = cli.benchmark_table(args) + '.md'
    session = explorer.ExplorerSession.open(args.model_setup, explorer.Settings(
        cli.dknn_settings(args, None), gpu=args.gpu, data_dir=args.data_dir))
    client = TestClient(explorer_app.make_app(session))
    setup = session.setup
    typed = lambda words: ' '.join(map(nlp_utils.ptb_text, words))
    bodies = [{'premise': typed(tokens[0]), 'hypothesis': typed(tokens[1])}
              if setup.config.pair else {'text': typed(tokens)}
              for tokens, _ in setup.splits.test[:args.sentences]]
    client.post('/api/predict', json=dict(bodies[0], all_layers=True))   # warm-up
    per_sentence = [statistics.mean(
        timed(lambda: client.post('/api/predict', json=dict(body, all_layers=True)))
        for body in bodies) for _ in range(args.repeats)]
    train = setup.splits.train
    session.add_examples('bench', (train * (args.rows // len(train) + 1))[:args.rows])
    evaluation = timed(lambda: client.get('/api/dataset', params={'split': 'bench'}))
    rows = [row('input view, all {} maps + neighbours in every layer, mean over {} typed '
                'test sentences (s per sentence)'.format(len(session.methods), len(bodies)),
                per_sentence, SENTENCE_TARGETS.get(setup.config.model, DEFAULT_SENTENCE_TARGET)),
            row('dataset view: first request, evaluates the {:,}-example split once (s)'
                .format(args.rows), [evaluation])]
    for name, params in PAGES:
        query = dict(params, split='bench', per_page='25')
        rows.append(row('dataset page of {:,} examples, 25 rows: {} (s)'.format(
            args.rows, name), [timed(lambda: client.get('/api/dataset', params=query))
                               for _ in range(args.repeats)], PAGE_TARGET))
    header = ('# Explorer request latency: {} {}\n\n{}\n\nRun: {}. {}; {} repeats: median and '
              'min-max. The dataset split is the training split repeated to {:,} examples; '
              'requests through Starlette\'s test client (no network).\n'.format(
                  setup.config.dataset, setup.config.model, cli.provenance(),
                  model_setup.run_description(setup), cli.machine_load(), args.repeats,
                  args.rows))
    columns = ['measurement', 'median', 'min-max', 'target', 'met']
    table = markdown_table(rows, columns)
    nlp_utils.atomic_write_text(path, header + '\n' + table + '\n')
    print(header + '\n' + table)


if __name__ == '__main__':
    cli.run_cli(main)
