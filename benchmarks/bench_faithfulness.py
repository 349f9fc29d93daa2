"""The cost of one faithfulness run (run_faithfulness): sentences/s and model rows/s.

    python benchmarks/bench_faithfulness.py --model-setup results/stsa.binary_cnn/args.json \
        [--limit 50 --repeats 3 --no-curves --out results/benchmarks/bench_faithfulness.md]

One run = every method's importances (interpret_all) + their rankings and baselines
measured under the softmax, DkNN conformity and DkNN credibility classifiers, each
distinct variant through the model and the DkNN once. The DkNN is built once before
the timed repeats; each repeat starts from nothing else cached. Prints a Markdown table
with the median and the spread (min - max) over the repeats; --out also writes it.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import cli  # noqa: E402
from deepknn.neighbors import dknn as dknn_lib  # noqa: E402
from deepknn.faithfulness import runs as faithfulness_runs  # noqa: E402
from deepknn.models import model_setup  # noqa: E402
from deepknn.interpret import saliency  # noqa: E402
import nlp_utils  # noqa: E402
from nlp_utils import UserError  # noqa: E402


def loo_rows(run):
    """Rows of the interpretation pass: n + 1 per sentence (1 for a one-word one)."""
    return int(sum(1 if n == 1 else n + 1 for n in run.lengths))


def main(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser)
    cli.add_split(parser, help='the sentences measured')
    cli.add_limit(parser, 50, 'the first N sentences of the split')
    cli.add_repeats(parser)
    cli.add_methods(parser, saliency, help='comma-separated interpretation methods (default: {}, '
                    'calibrated left out without temperature.json)'.format(
                        ','.join(saliency.STUDY_METHODS)))
    cli.add_dknn(parser)
    cli.add_batchsize(parser, 256, 'rows per model batch')
    parser.add_argument('--curves', action=argparse.BooleanOptionalAction,
                        default=True, help='deletion and insertion curves')
    cli.add_benchmark_outputs(parser, 'bench_faithfulness', printed_only=True)
    args = parser.parse_args(argv)
    stem = cli.benchmark_table(args)     # None: the table is only printed
    setup = model_setup.load_setup(args.model_setup)
    examples = getattr(setup.splits, args.split)[:args.limit]
    if not examples:
        raise UserError('the {} split is empty; pass another --split'.format(args.split))
    dknn = dknn_lib.dknn_from_setup(setup, cli.dknn_settings(args, setup.result_dir))
    seconds, run = [], None
    for _ in range(args.repeats):
        start = time.perf_counter()
        run = faithfulness_runs.run_faithfulness(
            setup, examples, dknn, args.methods or saliency.STUDY_METHODS,
            batchsize=args.batchsize, curves=args.curves, progress=False,
            optional=() if args.methods else saliency.STUDY_METHODS)
        seconds.append(time.perf_counter() - start)
    rows = loo_rows(run) + run.n_rows
    median = statistics.median(seconds)
    table = ('# Faithfulness run cost, {} {} ({} {} sentences, {:.1f} words on average)\n\n'
             'Methods: {}; k={}, {}; curves: {}; {} repeats. Command: `python {}`\n\n'
             '| quantity | median | min - max |\n| --- | --- | --- |\n'
             '| seconds | {:.2f} | {:.2f} - {:.2f} |\n'
             '| sentences/s | {:.2f} | {:.2f} - {:.2f} |\n'
             '| model rows/s | {:.0f} | {:.0f} - {:.0f} |\n\n'
             'Model rows per run: {} (interpretation {} + faithfulness variants {}, each once '
             'for all three classifiers).\n').format(
        setup.config.dataset, setup.config.model, len(examples), args.split,
        float(run.lengths.mean()), ', '.join(run.methods), args.k, args.backend,
        'yes' if args.curves else 'no', args.repeats, ' '.join(sys.argv), median,
        min(seconds), max(seconds), len(examples) / median, len(examples) / max(seconds),
        len(examples) / min(seconds), rows / median, rows / max(seconds), rows / min(seconds),
        rows, loo_rows(run), run.n_rows)
    print(table)
    if stem:
        nlp_utils.atomic_write_text(stem + '.md', table)


if __name__ == '__main__':
    cli.run_cli(main)
