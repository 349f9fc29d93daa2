"""Conformity leave-one-out throughput: the original's way vs batched.

    python benchmarks/bench_interpretations.py --model-setup results/stsa.binary_cnn/args.json --limit 200

(a) the original's way: one sentence at a time, each leave-one-out variant through
    the model alone and one KD-tree query per layer per variant;
(b) ours: saliency.interpret_all, the variants of many sentences in one model
    batch and one batched query per layer, with exact faiss (--backend) or KD-tree.
Each side is timed --repeats times, back to back; prints the median and range of
sentences/second and of the speed-up, and the largest difference in importance.
"""
import dataclasses
import os
import statistics
import sys
import time

import numpy as np
import tqdm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import cli  # noqa: E402
from deepknn.interpret import saliency  # noqa: E402
from deepknn.models import model_setup  # noqa: E402
import nlp_utils  # noqa: E402
from deepknn.neighbors import dknn as dknn_lib  # noqa: E402


def conformity_one_by_one(setup, dknn, tokens):
    """Importance of each word of one sentence, each input searched on its own."""
    def conformity(ids):
        result = dknn.predict_from_activations(setup.model.layer_activations([ids]))
        return result['conformity'][0], result['prediction'][0]

    full, prediction = conformity(nlp_utils.to_ids(tokens, setup.vocab))
    if len(tokens) == 1:
        return np.array([np.nan])
    return np.array([full[prediction] - conformity(
        nlp_utils.to_ids(tokens[:i] + tokens[i + 1:], setup.vocab))[0][prediction]
        for i in range(len(tokens))])


def timed(function):
    """(result, wall seconds) of function()."""
    start = time.perf_counter()
    result = function()
    return result, time.perf_counter() - start


def cells(values, form):
    """'median (min-max)' of repeated values."""
    return '{} ({}-{})'.format(form.format(statistics.median(values)), form.format(min(values)),
                               form.format(max(values)))


def main():
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser)
    cli.add_limit(parser, 200, 'first N test sentences')
    cli.add_k(parser)
    cli.add_backend(parser, help='search backend of (b)')
    cli.add_repeats(parser)
    cli.add_benchmark_outputs(parser, 'bench_interpretations')
    args = parser.parse_args()
    path = cli.benchmark_table(args) + '.md'
    setup = model_setup.load_setup(args.model_setup)
    if setup.model.pair:
        raise nlp_utils.UserError('this benchmark takes a single-sentence model')
    settings = cli.dknn_settings(args, setup.result_dir)
    dknn = dknn_lib.dknn_from_setup(setup, dataclasses.replace(settings, backend='kdtree'))
    batched_dknn = dknn_lib.dknn_from_setup(setup, settings)
    examples = setup.splits.test[:args.limit]
    load = cli.machine_load()

    one_seconds, batched_seconds = [], []
    for repeat in range(args.repeats):   # both sides back to back: a burst of load hits both
        original, seconds = timed(lambda: [
            conformity_one_by_one(setup, dknn, tokens) for tokens, _ in tqdm.tqdm(
                examples, desc='(a) one by one, repeat {}'.format(repeat + 1), unit='sentence')])
        one_seconds.append(seconds)
        batched, seconds = timed(lambda: saliency.interpret_all(
            setup, ['conformity'], examples, batched_dknn)['conformity'])
        batched_seconds.append(seconds)
    speedups = [a / b for a, b in zip(one_seconds, batched_seconds)]
    differences = [np.nanmax(np.abs(a - b.scores)) if len(a) > 1 else 0.0
                   for a, b in zip(original, batched)]
    n = len(examples)
    rows = n + sum(len(tokens) for tokens, _ in examples)
    table = ('# Conformity leave-one-out: one by one (the original) vs batched\n\n{}\n\n'
             'Model: {}. {} test sentences, {} model rows, k={}, kdtree for (a), {} for (b); '
             '{} repeats of each side, back to back: median (min-max). {} at '
             'the start.\n\n'
             '| method | seconds | sentences/s | speed-up |\n| --- | --- | --- | --- |\n'
             '| (a) one by one (original) | {} | {} | 1.0x |\n'
             '| (b) batched (ours) | {} | {} | {} |\n\n'
             'Importances of (a) and (b): largest absolute difference {:.2g}, in {} of {} '
             'sentences (exact ties among the k-th neighbours may be broken differently by '
             'the KD-tree and by {}); the rest are identical.\n').format(
        cli.provenance(), model_setup.run_description(setup), n, rows, args.k, args.backend,
        args.repeats, load, cells(one_seconds, '{:.1f}'),
        cells([n / t for t in one_seconds], '{:.2f}'), cells(batched_seconds, '{:.1f}'),
        cells([n / t for t in batched_seconds], '{:.2f}'), cells(speedups, '{:.1f}x'),
        max(differences), sum(d > 1e-9 for d in differences), n, args.backend)
    print(table)
    nlp_utils.atomic_write_text(path, table)


if __name__ == '__main__':
    cli.run_cli(main)
