"""The removal experiment of Rajani et al. 2020: retrain without the training examples
kNN retrieves most often vs without as many random ones (resumable).

    python scripts/knn_removal.py --template results/cad-snli_cnn/args.json --n-calib 0 \
        --runs-dir results/removal_cad-snli_cnn --out results/rajani --name knn_removal_cad-snli_cnn

For each seed: train the full model (the template's settings with --seed), count how often
each training example is among the k=16 nearest other training examples (the layer
before the logits, normalised), then retrain with --exclude-train on the top fraction
and on as many random examples (drawn with the same seed), calling the training library
with exactly the template's configuration. Runs that already have a train_result.json
are skipped and unfinished ones resume from their last snapshot (a run made with other
settings is refused), so an interrupted experiment continues where it stopped.
Prints and writes test-accuracy drops (points) against each seed's full model.
"""
import json
import os
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
sys.path.insert(0, ROOT)
from deepknn import cli  # noqa: E402
from deepknn.neighbors import dknn  # noqa: E402
from deepknn.rajani import knn_influence  # noqa: E402
from deepknn.rajani import knn_representations as knn  # noqa: E402
from deepknn.models import model_setup  # noqa: E402
from deepknn.models import training  # noqa: E402
import nlp_utils  # noqa: E402
from deepknn.reports import paper_numbers  # noqa: E402
from deepknn.reports.tables import markdown_table, write_table  # noqa: E402

# What a retrained run may differ in from the template: the rest is the template's.
RETRAIN_CHANGES = ('seed', 'n_calib', 'exclude_train')


def retrain_config(template, seed, n_calib, exclude=None):
    """The template's RunConfig (every training setting, --vocab included) with another
    seed, calibration size and excluded examples; no label noise, nothing derived."""
    return template.replace(seed=seed, n_calib=n_calib, exclude_train=exclude, label_noise=0.0,
                            vocab_digest=None, data_digest=None, extra={})


def train(out, config):
    """training.ensure_trained (refusing, with this script's way out, a folder that holds
    files this tool did not write), then the run's test accuracy."""
    training.ensure_trained(config, out, 'knn_removal.py',
                            'pass another --runs-dir or move {} away'.format(out))
    return nlp_utils.read_json(os.path.join(out, 'train_result.json'),
                               'training result')['test_accuracy']


def retrieval_counts(full_run, k, layer):
    setup = model_setup.load_setup(full_run)
    activations, labels = dknn.train_activations(setup)   # its cache locks the run
    knn.check_layer(layer, len(activations))
    classifier = knn.KnnClassifier(activations[layer], labels, setup.config.n_class)
    return knn_influence.training_set_counts(classifier, activations[layer], k)


def run_folder(runs, seed, kind='full', fraction=None):
    """<runs>/seed<S>_full, or seed<S>_top10 / seed<S>_random30 for a removal."""
    suffix = kind if fraction is None else '{}{}'.format(kind, round(100 * fraction))
    return os.path.join(runs, 'seed{}_{}'.format(seed, suffix))


def run_folders(args):
    """Every run folder of the experiment, in table order."""
    return [run_folder(args.runs_dir, seed, *variant) for seed in args.seeds
            for variant in [('full',)] + [(kind, fraction) for fraction in args.fractions
                                          for kind in ('top', 'random')]]


def run_seed(args, template, seed):
    """Test accuracies {'full': a, (fraction, 'top'|'random'): a} for one seed."""
    full = run_folder(args.runs_dir, seed)
    accuracies = {'full': train(full, retrain_config(template, seed, args.n_calib))}
    counts = retrieval_counts(full, args.k, args.layer)
    for fraction in args.fractions:
        for kind, indices in zip(('top', 'random'),
                                 knn_influence.removal_sets(counts, fraction, seed)):
            name = run_folder(args.runs_dir, seed, kind, fraction)
            exclude = os.path.abspath(name + '.exclude.json')
            check_same_exclusions(name, exclude, indices)
            if read_exclusions(exclude) != sorted(set(indices.tolist())):
                nlp_utils.atomic_write_text(exclude, json.dumps(indices.tolist()))
            accuracies[fraction, kind] = train(
                name, retrain_config(template, seed, args.n_calib, exclude))
    return accuracies


def read_exclusions(path):
    """The sorted set of training indices in exclusion file `path`, or None without one."""
    if not os.path.exists(path):
        return None
    return sorted(set(model_setup.read_exclusions(path)))


def check_same_exclusions(run, exclude, indices):
    """UserError when `run`, finished or resumable, was trained without another set of
    training examples than `indices` (another --k, --layer or --fractions made it): it
    is never reused for this set, nor is its exclusion file `exclude` rewritten under
    it. The run's own record (train_changes.json) decides; a run without one, its file."""
    if not any(os.path.exists(os.path.join(run, name))
               for name in ('train_result.json', training.SNAPSHOT)):
        return                                  # nothing to reuse: it is trained anew
    changes = os.path.join(run, 'train_changes.json')
    if os.path.exists(changes):
        used = sorted(nlp_utils.read_json(changes, 'training changes', dict).get(
            'excluded_indices', []))
    else:
        used = read_exclusions(exclude)
    wanted = sorted(set(indices.tolist()))
    if used != wanted:
        raise nlp_utils.UserError(
            '{} was trained without {} training examples, not the {} this call removes ({} '
            'in common), so it is not reused and {} stays as it was; was --k, --layer or '
            '--fractions changed? pass another --runs-dir or move the run away'.format(
                run, 'an unknown set of' if used is None else len(used), len(wanted),
                len(set(used or ()) & set(wanted)), exclude))


def table_rows(per_seed, fractions):
    """One row per fraction: each seed's accuracies, the mean drops (points, full minus
    retrained) and whether removing the most retrieved costs more than removing random
    examples by more than seed noise: every seed's extra drop is positive and their mean
    exceeds the seed spread of the full models' accuracy (max - min)."""
    full = [100 * acc['full'] for acc in per_seed.values()]
    spread = max(full) - min(full)
    rows = []
    for fraction in fractions:
        drops = {kind: [100 * (acc['full'] - acc[fraction, kind]) for acc in per_seed.values()]
                 for kind in ('top', 'random')}
        extra = [top - random for top, random in zip(drops['top'], drops['random'])]
        row = {'removed': '{:.0%}'.format(fraction)}
        for seed, acc in per_seed.items():
            row['seed {} full / top / random'.format(seed)] = '{:.1f} / {:.1f} / {:.1f}'.format(
                100 * acc['full'], 100 * acc[fraction, 'top'], 100 * acc[fraction, 'random'])
        row.update(drop_most_retrieved=round(float(np.mean(drops['top'])), 1),
                   drop_random=round(float(np.mean(drops['random'])), 1),
                   extra_drop_per_seed=' / '.join('{:.1f}'.format(e) for e in extra),
                   full_seed_spread=round(spread, 1) if len(full) > 1 else 'one seed',
                   exceeds_seed_noise=('one seed: no spread' if len(full) == 1 else
                                       'yes' if min(extra) > 0 and np.mean(extra) > spread
                                       else 'no'),
                   paper_drop_most_retrieved=paper_numbers.REMOVAL_DROPS.get(fraction, (None,))[0],
                   paper_drop_random=paper_numbers.REMOVAL_DROPS.get(fraction, (None, None))[1])
        rows.append(row)
    return rows


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    parser.add_argument('--template', required=True, type=cli.model_setup_path,
                        help='args.json (or folder) of the run whose training flags to reuse')
    parser.add_argument('--runs-dir', default=None,
                        help="folder for the retrained runs (default: results/removal_RUN, RUN "
                             "the template's result folder)")
    cli.add_hidden_alias(parser, '--runs', 'runs_dir')
    cli.add_outputs(parser, cli.RAJANI, 'knn_removal_RUN', old_path_flags=['--table'])
    parser.add_argument('--seeds', type=cli.non_negative_int, nargs='+', default=[1, 2, 3],
                        help='training seeds; every variant is trained with each')
    parser.add_argument('--fractions', type=cli.fraction, nargs='+', default=[0.1, 0.3],
                        help='parts of the training set removed')
    parser.add_argument('--n-calib', type=cli.non_negative_int, default=0,
                        help='calibration split of every run')
    cli.add_k(parser, cli.RAJANI_K, 'neighbours retrieved per training example (the paper: 16)')
    cli.add_layer(parser)
    args = parser.parse_args(argv)
    if any(not 0 < f < 1 for f in args.fractions):
        raise nlp_utils.UserError('--fractions must be in (0, 1), got {}'.format(args.fractions))
    return args


def template_run(args):
    """The name of the template's result folder."""
    return os.path.basename(os.path.dirname(os.path.abspath(args.template)))


def output_stem(args):
    """DIR/STEM of the table (--out, --name; or the old --table PATH)."""
    return cli.output_stem(args, cli.RAJANI, 'knn_removal_' + template_run(args))


def main(argv=None):
    args = parse_args(argv)
    template = model_setup.read_config(args.template)   # the input before the outputs
    stem = output_stem(args)
    cli.check_new_outputs([stem + '.md'], args.overwrite)
    args.runs_dir = args.runs_dir or os.path.join(cli.RESULTS, 'removal_' + template_run(args))
    os.makedirs(args.runs_dir, exist_ok=True)
    per_seed = {seed: run_seed(args, template, seed) for seed in args.seeds}
    rows = table_rows(per_seed, args.fractions)
    header = ('# Removal experiment (Rajani et al. 2020): test accuracy drop (points) after '
              'retraining without the most-retrieved (k={}) vs random training examples\n\n'
              "extra_drop_per_seed: each seed's drop without the most retrieved minus its drop "
              "without random ones; exceeds_seed_noise: yes when every seed's extra drop is "
              "positive and their mean exceeds full_seed_spread, the spread (max - min) of the "
              "full models' test accuracy over seeds.\n\n{}\n{}\n".format(
                  args.k, model_setup.models_line(map(model_setup.folder_description,
                                                      run_folders(args))),
                  cli.provenance()))
    write_table(stem, rows, list(rows[0]), header)
    print(markdown_table(rows, list(rows[0])))


if __name__ == '__main__':
    cli.run_cli(main)
