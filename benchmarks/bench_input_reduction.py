"""Input reduction throughput (gradient importance, beam 5): one candidate at a time vs batched.

    python benchmarks/bench_input_reduction.py --model-setup results/stsa.binary_cnn/args.json

(a) one at a time: the same beam search with batch size 1, so every beam item's
    gradient and every candidate removal goes through the model alone;
(b) batched (ours): each beam step sends all candidate removals of all beams of all
    sentences through the model together (batch size --batchsize);
both on the first --baseline-limit test sentences, checking they give the same
reductions; then (c) batched over the whole test split. Prints seconds, sentences
per second and the speed-up of (b) over (a), all measured in this one run.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import cli  # noqa: E402
from deepknn.feng import input_reduction  # noqa: E402
from deepknn.models import model_setup  # noqa: E402
import nlp_utils  # noqa: E402


def timed_reduction(setup, examples, batchsize, beam, description):
    reducer = input_reduction.make_reducer('gradient', setup, None, beam, batchsize)
    start = time.perf_counter()
    reductions = reducer.reduce(examples, progress=description)
    return reductions, time.perf_counter() - start


def main():
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser)
    parser.add_argument('--baseline-limit', type=cli.positive_int, default=100,
                        help='test sentences for the one-at-a-time comparison')
    cli.add_batchsize(parser, 256, 'rows per model batch')
    parser.add_argument('--beam', type=cli.positive_int, default=5, help='maximum beam')
    cli.add_benchmark_outputs(parser, 'bench_input_reduction')
    args = parser.parse_args()
    path = cli.benchmark_table(args) + '.md'
    setup = model_setup.load_setup(args.model_setup)
    test = setup.splits.test
    subset = test[:args.baseline_limit]
    single, single_seconds = timed_reduction(setup, subset, 1, args.beam, '(a) one at a time')
    batched, batched_seconds = timed_reduction(setup, subset, args.batchsize, args.beam,
                                               '(b) batched')
    same = sum(a.all_reduced == b.all_reduced for a, b in zip(single, batched))
    whole, whole_seconds = timed_reduction(setup, test, args.batchsize, args.beam,
                                           '(c) whole test split')
    mean_length = sum(len(r.reduced) for r in whole) / len(whole)
    row = '| {} | {} | {:.1f} | {:.2f} | {} |\n'
    table = ('# Input reduction throughput, {} {} (gradient importance, beam {}, this CPU)\n\n'
             'Command: `python {}`\n\n| method | sentences | seconds | sentences/s | speed-up |\n'
             '| --- | --- | --- | --- | --- |\n').format(
        setup.config.dataset, setup.config.model, args.beam, ' '.join(sys.argv))
    table += row.format('(a) one candidate at a time', len(subset), single_seconds,
                        len(subset) / single_seconds, '1.0x')
    table += row.format('(b) batched (batch {})'.format(args.batchsize), len(subset),
                        batched_seconds, len(subset) / batched_seconds,
                        '{:.1f}x'.format(single_seconds / batched_seconds))
    table += row.format('(c) batched, whole test split', len(test), whole_seconds,
                        len(test) / whole_seconds, '')
    table += ('\n(a) and (b) give the same reduced inputs for {} of {} sentences. Whole test '
              'split: mean length {:.2f} -> {:.2f} words.\n').format(
        same, len(subset), sum(len(r.original) for r in whole) / len(whole), mean_length)
    print(table)
    nlp_utils.atomic_write_text(path, table)


if __name__ == '__main__':
    cli.run_cli(main)
