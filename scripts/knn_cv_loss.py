"""Out-of-sample loss of a cross-validated retrain (Chong, Hong & Manning 2022), the
strongest published baseline for finding mislabeled training examples, for runs trained
with --label-noise (resumable).

    python scripts/knn_cv_loss.py --model-setup results/cad-snli_cnn_noise_s1/args.json

For each run: its (noisy) training split is dealt into --folds folds stratified by label
(seeded); for each fold a model with the run's settings is trained on the other folds
into <run>/cv_fold<F>/ (the run's own dev and test examples, all three splits written
there as files) and predicts the held-out fold. Each training example's probabilities
and cross-entropy at its (noisy) label go to <run>/cv_oos_loss.json, which
`run_knn_representations.py detect` ranks beside the other detectors (the loss, and
cleanlab's confident learning on the probabilities: its recipe in full). Finished folds
are skipped, unfinished ones resume.
"""
import os
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
sys.path.insert(0, ROOT)
from deepknn import cli  # noqa: E402
from deepknn.models import model_setup  # noqa: E402
from deepknn.storage import result_folder  # noqa: E402
import text_datasets  # noqa: E402
from deepknn.models import training  # noqa: E402
from deepknn.rajani import knn_influence  # noqa: E402
from deepknn.rajani import knn_representations as knn  # noqa: E402
import nlp_utils  # noqa: E402
from nlp_utils import UserError  # noqa: E402


def fold_run(setup, fold_rows, out):
    """Train (or resume, or reuse) the run's settings without `fold_rows` into `out`."""
    suffix = '.tsv' if setup.config.pair else '.txt'
    held = set(fold_rows.tolist())
    parts = {'train': [e for i, e in enumerate(setup.splits.train) if i not in held],
             'dev': setup.splits.dev, 'test': setup.splits.test}
    os.makedirs(out + '.data', exist_ok=True)
    files = {role: os.path.abspath(os.path.join(out + '.data', role + suffix)) for role in parts}
    nlp_utils.atomic_write_files([(files[role], lambda f, text=text_datasets.examples_text(
        examples, setup.dataset.label_names,
        'pair_tsv' if setup.config.pair else 'labeled_lines'): f.write(text), 'w')
        for role, examples in parts.items()])
    config = setup.config.replace(
        dataset=setup.config.dataset if setup.config.pair else 'custom',
        train_file=files['train'], dev_file=files['dev'], test_file=files['test'],
        label_noise=0.0, exclude_train=None, vocab_digest=None, data_digest=None, extra={})
    training.ensure_trained(config, out)


def oos_proba(setup, n_folds, seed, batchsize):
    """(N, C) probabilities of each training example under the fold model that did not
    train on it."""
    labels = knn.labels_of(setup.splits.train)
    folds = knn_influence.cv_folds(labels, n_folds, seed)
    proba = np.empty((len(labels), setup.config.n_class))
    for fold in range(n_folds):
        rows = np.flatnonzero(folds == fold)
        out = os.path.join(setup.result_dir, 'cv_fold{}'.format(fold))
        fold_run(setup, rows, out)
        fold_setup = model_setup.load_setup(os.path.join(out, 'args.json'))
        held = fold_setup.encode([setup.splits.train[i] for i in rows])
        proba[rows] = knn.split_outputs(fold_setup, held, batchsize,
                                        'held-out fold {}'.format(fold))[1]
    return proba


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser, '+', 'runs trained with --label-noise')
    parser.add_argument('--folds', type=cli.positive_int, default=5,
                        help='cross-validation folds (Chong et al.: 5)')
    cli.add_seed(parser, help='seed of the folds')
    cli.add_batchsize(parser)
    args = parser.parse_args(argv)
    if args.folds < 2:
        raise UserError('--folds must be at least 2, got {}'.format(args.folds))
    return args


def main(argv=None):
    args = parse_args(argv)
    for path in args.model_setup:
        setup = model_setup.load_setup(path)
        if not setup.splits.flipped_indices:
            raise UserError('--model-setup {}: trained without flipped labels; pass runs '
                            'trained with --label-noise'.format(path))
        with result_folder.lock(setup.result_dir, 'knn_cv_loss.py'):
            proba = oos_proba(setup, args.folds, args.seed, args.batchsize)
            knn_influence.write_oos_outputs(setup, proba, args.folds, args.seed)
        print('{}: out-of-sample probabilities of {} training examples written'.format(
            setup.result_dir, len(proba)))


if __name__ == '__main__':
    cli.run_cli(main)
