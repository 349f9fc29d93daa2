"""Conformity leave-one-out throughput: the original's way vs batched.

    python benchmarks/bench_interpretations.py --model-setup results/stsa.binary_cnn/args.json --limit 200

(a) the original's way: one sentence at a time, each leave-one-out variant through
    the model alone and one KD-tree query per layer per variant;
(b) ours: saliency.interpret_all, the variants of many sentences in one model
    batch and one batched query per layer, with exact faiss (--backend) or KD-tree.
Prints sentences/second, the speed-up, and the largest difference in importance.
"""
import os
import sys
import time

import numpy as np
import tqdm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import saliency  # noqa: E402
from deepknn import model_setup  # noqa: E402
from deepknn import knn_index  # noqa: E402
import nlp_utils  # noqa: E402
from deepknn import dknn as dknn_lib  # noqa: E402


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


def main():
    parser = nlp_utils.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--model-setup', required=True, help='results/RUN/args.json')
    parser.add_argument('--limit', type=nlp_utils.positive_int, default=200,
                        help='first N test sentences')
    parser.add_argument('--k', type=nlp_utils.positive_int, default=75, help='neighbours per layer')
    parser.add_argument('--backend', choices=knn_index.BACKENDS, default='faiss',
                        help='search backend of (b)')
    parser.add_argument('--out', default='results/bench_interpretations.md', help='Markdown table')
    args = parser.parse_args()
    setup = model_setup.load_setup(args.model_setup)
    if setup.model.pair:
        raise nlp_utils.UserError('this benchmark takes a single-sentence model')
    dknn = dknn_lib.dknn_from_setup(setup, 'kdtree', args.k)
    batched_dknn = dknn_lib.dknn_from_setup(setup, args.backend, args.k)
    examples = setup.splits.test[:args.limit]

    start = time.perf_counter()
    original = [conformity_one_by_one(setup, dknn, tokens)
                for tokens, _ in tqdm.tqdm(examples, desc='(a) one by one', unit='sentence')]
    original_seconds = time.perf_counter() - start
    start = time.perf_counter()
    batched = saliency.interpret_all(setup, ['conformity'], examples,
                                           batched_dknn)['conformity']
    batched_seconds = time.perf_counter() - start

    difference = max(np.nanmax(np.abs(a - b.scores)) if len(a) > 1 else 0.0
                     for a, b in zip(original, batched))
    rows = len(examples) + sum(len(tokens) for tokens, _ in examples)
    table = ('Conformity leave-one-out on {} {} ({} test sentences, {} model rows, k={}, '
             'kdtree for (a), {} for (b)); command: python {}\n\n'
             '| method | seconds | sentences/s | speed-up |\n| --- | --- | --- | --- |\n'
             '| (a) one by one (original) | {:.1f} | {:.2f} | 1.0x |\n'
             '| (b) batched (ours) | {:.1f} | {:.2f} | {:.1f}x |\n\n'
             'Largest absolute difference in importance between (a) and (b): {:.2g}\n').format(
        setup.config.dataset, setup.config.model, len(examples), rows, args.k,
        args.backend, ' '.join(sys.argv), original_seconds, len(examples) / original_seconds,
        batched_seconds, len(examples) / batched_seconds, original_seconds / batched_seconds,
        difference)
    print(table)
    nlp_utils.atomic_write_text(args.out, table)


if __name__ == '__main__':
    nlp_utils.run_cli(main)
