"""The removal experiment of Rajani et al. 2020: retrain without the training examples
kNN retrieves most often vs without as many random ones (resumable).

    python scripts/knn_removal.py --template results/cad-snli_cnn/args.json --n-calib 0 \
        --runs results/removal_cad-snli_cnn --table results/knn_removal_cad-snli_cnn

For each seed: train the full model (the template's flags with --seed), count how often
each training example is among the k=16 nearest other training examples (the layer
before the logits, normalised), then retrain with --exclude-train on the top fraction
and on as many random examples (drawn with the same seed). Runs that already have a
train_result.json are skipped, so an interrupted experiment continues where it stopped.
Prints and writes test-accuracy drops (points) against each seed's full model.
"""
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
sys.path.insert(0, ROOT)
from deepknn import cli  # noqa: E402
from deepknn import dknn  # noqa: E402
from deepknn.rajani import knn_influence  # noqa: E402
from deepknn.rajani import knn_representations as knn  # noqa: E402
from deepknn import model_setup  # noqa: E402
import nlp_utils  # noqa: E402
from deepknn import result_folder  # noqa: E402
from deepknn.reports import paper_numbers  # noqa: E402
from deepknn.reports.tables import markdown_table, write_table  # noqa: E402

# Paper (BERT, 1,666 pairs): drops of 4.6 vs 1.2 points at 10%, a further 6 vs 4 at 30%.
# args.json fields passed back to train_text_classifier.py as --flag value.
VALUE_FLAGS = ('dataset', 'model', 'word_vectors', 'embed_dim', 'batchsize', 'epoch', 'unit',
               'layer', 'dropout', 'data_dir', 'train_file', 'dev_file', 'test_file',
               'dev_fraction', 'min_freq', 'max_vocab')
SWITCH_FLAGS = ('char_based', 'select_on_test', 'skip_bad_lines', 'snli_majority')


def training_flags(config):
    """The template's training flags, without seed, calibration size or data changes."""
    flags = []
    for key in VALUE_FLAGS:
        if config.get(key) is not None:
            flags += ['--' + key.replace('_', '-'), str(config[key])]
    return flags + ['--' + key.replace('_', '-') for key in SWITCH_FLAGS if config.get(key)]


def train(out, flags):
    """Train into `out` unless it is finished; returns its test accuracy."""
    result_path = os.path.join(out, 'train_result.json')
    if not os.path.exists(result_path):
        print('training', out, flush=True)
        with open(out + '.log', 'w') as log:
            subprocess.run([sys.executable, os.path.join(ROOT, 'train_text_classifier.py'),
                            '--out', out, '--force'] + flags, stdout=log,
                           stderr=subprocess.STDOUT, check=True)
    return nlp_utils.read_json(result_path, 'training result')['test_accuracy']


def retrieval_counts(full_run, k, layer):
    setup = model_setup.load_setup(full_run)
    with result_folder.lock(setup.result_dir, 'knn_removal.py'):   # the activation cache
        activations, labels = dknn.train_activations(setup)
    knn.check_layer(layer, len(activations))
    classifier = knn.KnnClassifier(activations[layer], labels, setup.config['n_class'])
    return knn_influence.training_set_counts(classifier, activations[layer], k)


def run_seed(args, base_flags, seed):
    """Test accuracies {'full': a, (fraction, 'top'|'random'): a} for one seed."""
    flags = base_flags + ['--seed', str(seed), '--n-calib', str(args.n_calib)]
    full = os.path.join(args.runs, 'seed{}_full'.format(seed))
    accuracies = {'full': train(full, flags)}
    counts = retrieval_counts(full, args.k, args.layer)
    for fraction in args.fractions:
        for kind, indices in zip(('top', 'random'),
                                 knn_influence.removal_sets(counts, fraction, seed)):
            name = os.path.join(args.runs, 'seed{}_{}{}'.format(seed, kind, round(100 * fraction)))
            exclude = name + '.exclude.json'
            nlp_utils.atomic_write_text(exclude, json.dumps(indices.tolist()))
            accuracies[fraction, kind] = train(name, flags + ['--exclude-train', exclude])
    return accuracies


def table_rows(per_seed, fractions):
    rows = []
    for fraction in fractions:
        drops = {kind: [100 * (acc['full'] - acc[fraction, kind]) for acc in per_seed.values()]
                 for kind in ('top', 'random')}
        row = {'removed': '{:.0%}'.format(fraction)}
        for seed, acc in per_seed.items():
            row['seed {} full / top / random'.format(seed)] = '{:.1f} / {:.1f} / {:.1f}'.format(
                100 * acc['full'], 100 * acc[fraction, 'top'], 100 * acc[fraction, 'random'])
        row.update(drop_most_retrieved=round(float(np.mean(drops['top'])), 1),
                   drop_random=round(float(np.mean(drops['random'])), 1),
                   paper_drop_most_retrieved=paper_numbers.REMOVAL_DROPS.get(fraction, (None,))[0],
                   paper_drop_random=paper_numbers.REMOVAL_DROPS.get(fraction, (None, None))[1])
        rows.append(row)
    return rows


def parse_args(argv=None):
    parser = nlp_utils.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--template', required=True, help='args.json whose training flags to reuse')
    parser.add_argument('--runs', required=True, help='folder for the retrained runs')
    parser.add_argument('--table', required=True, help='output path without .md/.csv')
    parser.add_argument('--seeds', type=nlp_utils.non_negative_int, nargs='+', default=[1, 2, 3],
                        help='training seeds; every variant is trained with each')
    parser.add_argument('--fractions', type=nlp_utils.fraction, nargs='+', default=[0.1, 0.3],
                        help='parts of the training set removed')
    parser.add_argument('--n-calib', type=nlp_utils.non_negative_int, default=0,
                        help='calibration split of every run')
    parser.add_argument('--k', type=nlp_utils.positive_int, default=16,
                        help='neighbours retrieved per training example (the paper: 16)')
    parser.add_argument('--layer', type=int, default=-2,
                        help='activation layer (-2: the last hidden layer)')
    args = parser.parse_args(argv)
    if any(not 0 < f < 1 for f in args.fractions):
        raise nlp_utils.UserError('--fractions must be in (0, 1), got {}'.format(args.fractions))
    return args


def main(argv=None):
    args = parse_args(argv)
    base_flags = training_flags(model_setup.read_config(args.template))
    os.makedirs(args.runs, exist_ok=True)
    per_seed = {seed: run_seed(args, base_flags, seed) for seed in args.seeds}
    rows = table_rows(per_seed, args.fractions)
    header = ('# Removal experiment (Rajani et al. 2020): test accuracy drop (points) after '
              'retraining without the most-retrieved (k={}) vs random training examples\n\n'
              '{}\n'.format(args.k, cli.provenance()))
    write_table(args.table, rows, list(rows[0]), header)
    print(markdown_table(rows, list(rows[0])))


if __name__ == '__main__':
    nlp_utils.run_cli(main)
