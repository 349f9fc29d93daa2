"""Table 2 of Feng et al. 2018 for our models: before vs after entropy fine-tuning.

    python entropy_results.py --runs stsa.binary_cnn,cad-snli_cnn [--limit 300]

For each run R and its fine-tuned R_entropy (finetune_entropy.py; --suffix) in --results:
softmax accuracy on dev (the paper's "regular validation examples") and test, mean
length after input reduction (gradient importance, beam 5, first --limit dev
examples), mean confidence and DkNN credibility of the reduced inputs, and (a new
result) DkNN test accuracy and the highlighted words per test sentence of each
interpretation method (first --limit test examples). Writes
results/entropy_regularization.md/.csv (--out, --name). Each model's numbers are kept in
its folder's entropy_measures.json and reused while model, data and settings are
unchanged, so runs measured one by one (in parallel) assemble into one table quickly.
"""
import os
import sys

import numpy as np

from deepknn import dknn as dknn_lib
from deepknn import dknn_evaluation
from deepknn.feng import input_reduction
from deepknn import knn_index
from deepknn import model_setup
import nlp_utils
from deepknn import result_folder
from deepknn import saliency
from deepknn import saliency_scores
from nlp_utils import UserError
from deepknn.reports.tables import write_table

HIGHLIGHT_METHODS = ('gradient', 'confidence', 'conformity')
# Table 2 of the paper: SNLI (BIMPM, full train) accuracy and reduced length, before/after.
PAPER = {'accuracy': (85.71, 85.72), 'reduced_length': (1.50, 2.20)}


def parse_args(argv=None):
    parser = nlp_utils.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--runs', required=True, help='comma-separated result folder names')
    parser.add_argument('--results', default='results', help='folder of the result folders')
    parser.add_argument('--suffix', default='_entropy',
                        help='the fine-tuned folder of run R is R + SUFFIX')
    parser.add_argument('--limit', type=nlp_utils.positive_int, default=300,
                        help='dev examples to reduce and test examples to interpret')
    parser.add_argument('--beam', type=int, default=input_reduction.DEFAULT_BEAM,
                        help='maximum beam size k (beam max(1, min(k, L - 3)))')
    parser.add_argument('--k', type=nlp_utils.positive_int, default=75,
                        help='DkNN neighbours per layer')
    parser.add_argument('--backend', choices=knn_index.BACKENDS, default='faiss',
                        help='DkNN backend (faiss flat: exact, the fastest here)')
    parser.add_argument('--batchsize', type=nlp_utils.positive_int, default=256,
                        help='rows per model batch')
    parser.add_argument('--out', default='results', help='where the table goes')
    parser.add_argument('--name', default='entropy_regularization',
                        help='file name of the table (without .md/.csv)')
    return parser.parse_args(argv)


def accuracy(setup, examples, batchsize):
    logits = setup.model.predict_logits([x for x, _ in examples], batchsize)
    return 100 * float(np.mean(logits.argmax(axis=1) == [y for _, y in examples]))


MEASURES = 'entropy_measures.json'   # per model folder: {measure_key: measure() row}


def measure_key(setup, args):
    """What one model's numbers depend on: the model, vocabulary and training split
    (dknn.activation_key), the dev and test examples measured, and the settings."""
    return '{}|{}|{}|beam{}|k{}|{}|limit{}'.format(
        dknn_lib.activation_key(setup), nlp_utils.examples_digest(setup.splits.dev),
        nlp_utils.examples_digest(setup.splits.test), args.beam, args.k, args.backend,
        args.limit)


def cached_measure(setup, args):
    """measure(setup, args), reused from <result_dir>/MEASURES while measure_key is
    unchanged, so the runs of one table can be measured in parallel processes first
    (one entry per key: a demo with other settings does not evict the table's)."""
    path = os.path.join(setup.result_dir, MEASURES)
    key = measure_key(setup, args)
    row = read_measures(path).get(key)
    if row is None:
        row = measure(setup, args)
        with result_folder.lock(setup.result_dir, 'entropy_results.py'):
            nlp_utils.atomic_write_json(path, dict(read_measures(path), **{key: row}))
    return row


def read_measures(path):
    """{key: row} of a MEASURES file ({} when there is none)."""
    if not os.path.exists(path):
        return {}
    return nlp_utils.read_json(path, 'entropy measurements', dict)


def measure(setup, args):
    """Every number of one model's row (plain floats)."""
    with result_folder.lock(setup.result_dir, 'entropy_results.py'):   # DkNN caches
        dknn = dknn_lib.dknn_from_setup(setup, args.backend, args.k, batchsize=args.batchsize)
    reducer = input_reduction.make_reducer('gradient', setup, dknn, args.beam, args.batchsize)
    reductions = reducer.reduce(setup.splits.dev[:args.limit], progress='reducing dev')
    view = input_reduction.before_after(setup.model, setup.vocab, reductions, dknn,
                                        args.batchsize)
    stats = input_reduction.summarize(reductions, view)
    dknn_summary = dknn_evaluation.summary(dknn_evaluation.evaluate(setup, dknn, setup.test, args.batchsize))
    maps = saliency.interpret_all(setup, HIGHLIGHT_METHODS, setup.splits.test[:args.limit],
                                         dknn, args.batchsize)
    row = {'dev_accuracy': accuracy(setup, setup.dev, args.batchsize),
           'test_accuracy': accuracy(setup, setup.test, args.batchsize),
           'reduced_length': stats['mean_reduced_length'],
           'reduced_1_2_words': stats['fraction_1_2_words'],
           'reduced_confidence': stats['mean_confidence_after'],
           'reduced_credibility': stats['mean_credibility_after'],
           'dknn_test_accuracy': 100 * dknn_summary['dknn_accuracy']}
    for method in HIGHLIGHT_METHODS:
        # One-word inputs have no leave-one-out map (NaN) and are left out.
        counts = [saliency_scores.highlighted(m.scores).sum() for m in maps[method]
                  if not np.isnan(m.scores).any()]
        row['highlights_' + method] = float(np.mean(counts))
    return row


# The columns of a row, in order (a cached row comes back with its keys sorted).
MEASURED = ('dev_accuracy', 'test_accuracy', 'reduced_length', 'reduced_1_2_words',
            'reduced_confidence', 'reduced_credibility', 'dknn_test_accuracy') + tuple(
                'highlights_' + method for method in HIGHLIGHT_METHODS)


def table_row(run, before, after):
    row = {'run': run}
    for key in MEASURED:
        digits = 1 if 'accuracy' in key else 2 if 'length' in key or 'highlights' in key else 3
        row[key + '_before'] = round(before[key], digits)
        row[key + '_after'] = round(after[key], digits)
    return row


def main(argv=None):
    args = parse_args(argv)
    input_reduction.check_beam(args.beam)
    runs = [name.strip() for name in args.runs.split(',') if name.strip()]
    rows = []
    for run in runs:
        folders = [os.path.join(args.results, name) for name in (run, run + args.suffix)]
        missing = [f for f in folders if not os.path.exists(os.path.join(f, 'args.json'))]
        if missing:
            raise UserError('{} has no args.json; train the run and fine-tune it with '
                            'finetune_entropy.py first'.format(missing[0]))
        before, after = (cached_measure(model_setup.load_setup(os.path.join(f, 'args.json')),
                                        args) for f in folders)
        rows.append(table_row(run, before, after))
    columns = list(rows[0])
    header = ('# Entropy regularisation (Feng et al. 2018, Table 2 layout): before / after '
              'fine-tuning\n\nAccuracy in %. Reduced length: mean words after input reduction '
              '(gradient, beam {}) of the first {} dev examples; highlights: mean highlighted '
              'words of the first {} test sentences; DkNN: k={}, {}. Paper (SNLI, BIMPM): '
              'accuracy {} -> {}, reduced length {} -> {}.\nProduced by: `python {}`\n'.format(
                  args.beam, args.limit, args.limit, args.k, args.backend, *PAPER['accuracy'],
                  *PAPER['reduced_length'], ' '.join(sys.argv)))
    write_table(os.path.join(args.out, args.name), rows, columns, header)
    print('wrote', os.path.join(args.out, args.name + '.md'))


if __name__ == '__main__':
    nlp_utils.run_cli(main)
