"""kNN representations (Rajani et al. 2020) over trained text classifiers.

    python run_knn_representations.py backoff --model-setup results/cad-snli_cnn/args.json
    python run_knn_representations.py explain --model-setup results/cad-snli_cnn/args.json
    python run_knn_representations.py retrieved --model-setup results/cad-snli_cnn/args.json
    python run_knn_representations.py detect --model-setup results/cad-snli_cnn_noise_s1/args.json

backoff: tune k, T and tau on dev, report test accuracy of the model alone and with kNN
backoff (and with DkNN credibility as the switch); explain: the nearest training
examples of some examples as JSON and HTML; retrieved: the training examples retrieved
most often over a split; detect: mislabeled-example detection on runs trained with
--label-noise, with the paper's Figure 4, beside cleanlab, every detector also ranked
(AUPRC, P/R at k; with scripts/knn_cv_loss.py's out-of-sample losses where a run has
them); contrast: two runs (original vs augmented split) on the negation slice, and the
neighbours of the examples one of them gets right (Tables 1-2); candidates: a sample of
the rule's candidate mislabeled examples (Table 3).
"""
import argparse
import contextlib
import os

import numpy as np

from deepknn.reports import paper_numbers
from deepknn import cli
from deepknn.neighbors import dknn
from deepknn.neighbors import dknn_settings
from deepknn.rajani import knn_influence
from deepknn.rajani import label_issues
from deepknn.reports import knn_report
from deepknn.reports import knn_tables
from deepknn.rajani import knn_representations as knn
from deepknn.models import model_setup
import nlp_utils
import text_datasets
from deepknn.storage import result_folder
from deepknn.reports import saliency_report
from nlp_utils import UserError
from deepknn.reports.tables import markdown_table, write_table


# The result folders that backoff and detect write into (knn_backoff.json, the detection
# cache) stay locked until the command ends; the DkNN caches lock themselves.
LOCKS = contextlib.ExitStack()


def load(args, path, writes_into_run=False):
    setup = model_setup.load_setup(path, args.gpu, args.data_dir)
    if writes_into_run:
        LOCKS.enter_context(result_folder.lock(setup.result_dir, 'run_knn_representations.py'))
    return setup


# ---------------------------------------------------------------- backoff
def backoff(args):
    cli.check_new_outputs([args.stem + suffix + '.md' for suffix in ('', '_table4', '_table5')],
                          args.overwrite)
    rows, models = [], []
    for path in args.model_setup:
        setup = load(args, path, writes_into_run=True)
        models.append(model_setup.run_description(setup))
        tested, examples = setup.evaluation_examples(
            eval_file=args.eval_file, skip_bad_lines=args.skip_bad_lines) if args.eval_file \
            else ('test', None)
        result = knn.backoff_experiment(setup, args.layer,
                                        cli.dknn_settings(args, setup.result_dir, args.dknn_k),
                                        args.k, args.temperature, args.tau, examples)
        nlp_utils.atomic_write_json(os.path.join(setup.result_dir, 'knn_backoff{}.json'.format(
            '' if examples is None else '_' + tested)), dict(result, layer=args.layer))
        rows.append(dict(knn_tables.backoff_row(setup, result), **{'tested on': tested}))
        print('{dataset} {encoder}: model {model}  kNN backoff {knn_backoff}  (k={k}, T={T}, '
              'tau={tau}); credibility switch {credibility_backoff}'.format(**rows[-1]))
    header = ('# kNN backoff (Rajani et al. 2020, Tables 4 and 5): test accuracy (%)\n\n'
              'k, T and tau (the max-softmax threshold) tuned on dev only; layer {}; '
              'accuracy on the `tested on` set (test: the run\'s test split).\n'
              '{}\n{}\n'.format(args.layer, model_setup.models_line(models), cli.provenance()))
    write_table(args.stem, rows, list(rows[0]), header)
    for suffix, (table, columns) in (('_table4', knn_tables.table4_rows(rows)),
                                     ('_table5', knn_tables.table5_rows(rows))):
        write_table(args.stem + suffix, table, columns, header)
        print(markdown_table(table, columns))


# ---------------------------------------------------------------- explain / retrieved
def explain(args):
    setup = load(args, args.model_setup)
    examples = cli.split_examples(setup, args.split)
    positions = args.examples or list(range(min(5, len(examples))))
    if any(not 0 <= p < len(examples) for p in positions):
        raise UserError('--examples must be indices into the {} {} examples'.format(
            len(examples), args.split))
    knn.check_temperature(args.temperature)
    out = args.stem
    cli.check_new_outputs([out + '.json', out + '.html'], args.overwrite)
    classifier = knn.classifier_from_setup(setup, args.layer, args.batchsize,
                                           cli.engine(args, setup.result_dir))
    activations, proba = knn.split_outputs(setup, setup.encode([examples[p] for p in positions]),
                                           args.batchsize)
    neighbors, vote = knn_influence.explanations(classifier, activations[args.layer], args.k,
                                                 args.temperature)
    records = knn_report.explanation_records(examples, positions, proba, neighbors, vote,
                                             setup.splits.train, setup.label_names, setup.vocab)
    knn_report.write_explanations(out, records, 'Nearest training examples: {} (k={})'.format(
        knn_tables.split_name(setup.config, args.split), args.k), 'Model: {}. {}'.format(
            model_setup.run_description(setup), cli.provenance()))
    print('wrote {0}.json and {0}.html'.format(out))


def retrieved(args):
    setup = load(args, args.model_setup)
    out = args.stem
    cli.check_new_outputs([out + '.md', out + '.csv'], args.overwrite)
    engine = cli.engine(args, setup.result_dir)
    classifier = knn.classifier_from_setup(setup, args.layer, args.batchsize, engine)
    if args.split == 'train':
        train_vectors = dknn.training_split_activations(setup, dknn_settings.DkNNSettings(
            batchsize=args.batchsize, engine=engine))[0][args.layer]
        counts = knn_influence.training_set_counts(classifier, train_vectors, args.k)
    else:
        activations = knn.whole_split_outputs(setup, args.split, args.batchsize, engine)[0]
        counts = knn_influence.retrieval_counts(
            classifier.neighbors(activations[args.layer], args.k).indices, classifier.n_train)
    rows = [{'rank': rank + 1, 'train_index': int(i), 'times_retrieved': int(counts[i]),
             'label': setup.label_names[setup.splits.train[i][1]],
             'text': saliency_report.example_text(setup.splits.train[i][0],
                                                             setup.vocab)}
            for rank, i in enumerate(knn_influence.most_retrieved(counts, args.top))]
    header = ('# Training examples retrieved most often: {} split, k={}\n\nModel: {}. '
              '{}\n'.format(knn_tables.split_name(setup.config, args.split), args.k,
                            model_setup.run_description(setup), cli.provenance()))
    write_table(out, rows, ['rank', 'train_index', 'times_retrieved', 'label', 'text'], header)
    print(markdown_table(rows, ['rank', 'times_retrieved', 'label', 'text']))


# ---------------------------------------------------------------- detect
def detect(args):
    cli.check_new_outputs([args.stem + suffix for suffix in ('.md', '_rankings.md', '_auprc.md',
                                                            '.png')], args.overwrite)
    rows, ranked, curves, points, models = [], [], {}, {}, []
    setups = [load(args, path, writes_into_run=True) for path in args.model_setup]
    knn_tables.check_seed_replicates([setup.config for setup in setups], args.model_setup)
    for setup in setups:
        models.append(model_setup.run_description(setup))
        result = knn_influence.cached_mislabeled_experiment(setup, args.layer, args.batchsize,
                                                            seed=setup.config.label_noise_seed)
        oos = knn_influence.read_oos_outputs(setup)     # scripts/knn_cv_loss.py
        if oos is not None:
            result = knn_influence.with_cross_validation(result, oos)
        rows += knn_tables.detection_rows(setup, result)
        ranked += knn_tables.ranked_rows(setup, result)
        for name, scores in result['methods'].items():
            points.setdefault(name, []).append((scores['fraction_inspected'], scores['recall']))
        for name, curve in result['curves'].items():
            curves.setdefault(name, []).append(curve)
    means = knn_tables.mean_rows(rows)
    rows += means
    if rows[0]['dataset'] == 'cad-snli':
        rows.append(dict({key: '' for key in rows[0]}, run='paper (BERT)', dataset='cad-snli',
                         method=knn_influence.PAPER_RULE, **paper_numbers.DETECTION))
    header = ('# Mislabeled-example detection (Rajani et al. 2020): 10% of training labels '
              'flipped\n\nkNN rule: the nearest training example (k=1) of each dev example '
              'whose model prediction disagrees with its label. cleanlab: confident learning '
              '(cleanlab.filter.find_label_issues) on out-of-sample probabilities from the '
              'model\'s training representations, by a leave-self-out kNN vote (k={}, as '
              'Datalab) or a {}-fold cross-validated logistic regression (see '
              'deepknn/rajani/label_issues.py), and, where scripts/knn_cv_loss.py ran, '
              'on the probabilities of the model retrained without each fold ("retrain" '
              'rows; its out-of-sample loss ranks as Chong et al. 2022).\n{}\n{}\n'.format(
                  label_issues.DATALAB_K, label_issues.CV_FOLDS, model_setup.models_line(models),
                  cli.provenance()))
    write_table(args.stem, rows, list(rows[0]), header)
    rule_recall = next(row['recall'] for row in means
                       if row['method'] == knn_influence.PAPER_RULE)
    rankings = knn_tables.ranking_rows(curves, rule_recall)
    write_table(args.stem + '_rankings', rankings, list(rankings[0]), header)
    ranked += knn_tables.mean_rows(ranked, 'ranking', 'auprc')
    write_table(args.stem + '_auprc', ranked, list(ranked[0]), header + AUPRC_NOTE)
    knn_report.recall_figure(args.stem + '.png', knn_influence.FRACTIONS, curves, points,
                             'Flipped-label recall, {}, {:,} dev pairs ({})'.format(
                                 rows[0]['dataset'], ranked[0]['dev_pairs'],
                                 nlp_utils.count(len(args.model_setup), 'seed')))
    print(markdown_table(rows, list(rows[0])))
    print(markdown_table(rankings, list(rankings[0])))
    print(markdown_table(ranked, list(ranked[0])))


AUPRC_NOTE = ('\nEvery detector as a ranking (cleanlab\'s own evaluation): AUPRC (average '
              'precision; tied scores enter together, so a random ranking scores the base rate) '
              'and precision and recall among the first k = number of flipped labels (equal, '
              'as k is the number of flips). kNN rule (counts): training examples by how many dev '
              'examples they are the nearest neighbour of while contradicting the model\'s '
              'prediction there (the paper\'s candidates are those with a count above 0; the '
              'rest tie).\n')


# ---------------------------------------------------------------- contrast / candidates
def explained(setup, examples, positions, args):
    """Explanation records of examples[positions] under one run (its model, its kNN over
    its own training split)."""
    classifier = knn.classifier_from_setup(setup, args.layer, args.batchsize,
                                           cli.engine(args, setup.result_dir))
    chosen = [examples[p] for p in positions]
    activations, proba = knn.split_outputs(setup, setup.encode(chosen), args.batchsize, None)
    neighbors, vote = knn_influence.explanations(classifier, activations[args.layer], args.k,
                                                 args.temperature)
    return knn_report.explanation_records(chosen, range(len(chosen)), proba, neighbors, vote,
                                          setup.splits.train, setup.label_names, setup.vocab)


def contrast(args):
    """Two runs on the first run's split: accuracy on the negation slice, and the
    nearest training examples of the examples exactly one of them gets right."""
    cli.check_new_outputs([args.stem + suffix for suffix in ('.md', '.html')], args.overwrite)
    runs = [load(args, path) for path in args.model_setup]
    if runs[0].label_names != runs[1].label_names or not runs[0].config.pair:
        raise UserError('--model-setup: contrast needs two pair (NLI) runs with the same labels')
    knn.check_temperature(args.temperature)
    examples = cli.split_examples(runs[0], args.split)[:args.limit]
    evaluated_on = knn_tables.split_name(runs[0].config, args.split)
    names = [os.path.basename(run.result_dir) for run in runs]
    predictions = [knn.split_outputs(run, run.encode(examples), args.batchsize,
                                     'forward pass: ' + name)[1].argmax(axis=1)
                   for run, name in zip(runs, names)]
    rows = []
    for run, name, predicted in zip(runs, names, predictions):
        slices = knn_influence.negation_slices(examples, predicted, run.label_names)
        rows.append(dict({'run': name, 'trained on': knn_tables.dataset_name(run.config),
                          'n_train': len(run.splits.train)},
                         **{'{} (n={})'.format(key, n): knn_tables.percent(accuracy)
                            for key, (accuracy, n) in slices.items()}))
    sources = '{}\n{}'.format(model_setup.models_line(map(model_setup.run_description, runs)),
                              cli.provenance())
    header = ('# Two models on {} (Rajani et al. 2020, section 5): accuracy (%)\n\n'
              'A hypothesis is negated when it holds \'not\' or "n\'t". The paper (BERT): '
              'accuracy on entailment examples with a negation drops by {} points when trained '
              'on the augmented split.\n{}\n'.format(
                  evaluated_on, paper_numbers.NEGATION_ENTAILMENT_DROP, sources))
    gold = knn.labels_of(examples)
    positions = np.concatenate([chosen[:args.show] for chosen in
                                knn_influence.contrasting(gold, *predictions)]).tolist()
    records = [explained(run, examples, positions, args) for run in runs]
    for per_run in records:
        for record, position in zip(per_run, positions):
            record['example'] = int(position)
    title = ('Nearest training examples (k={}) of {} examples one model gets right: first '
             'those {} gets right, then those {} gets right'.format(
                 args.k, evaluated_on, *names))
    page = knn_report.contrast_html(records, names, title, sources)
    write_table(args.stem, rows, list(rows[0]), header)
    nlp_utils.atomic_write_text(args.stem + '.html', page)
    print(markdown_table(rows, list(rows[0])))
    print('wrote {0}.md, {0}.csv and {0}.html'.format(args.stem))


def candidates(args):
    """The paper's Table 3: a random sample of the rule's candidate mislabeled training
    examples of a run (no flipped labels needed)."""
    cli.check_new_outputs([args.stem + '.md'], args.overwrite)
    setup = load(args, args.model_setup)
    engine = cli.engine(args, setup.result_dir)
    classifier = knn.classifier_from_setup(setup, args.layer, args.batchsize, engine)
    activations, proba, _ = knn.whole_split_outputs(setup, 'dev', args.batchsize, engine)
    found = knn_influence.candidate_mislabeled(proba.argmax(axis=1),
                                               classifier.neighbors(activations[args.layer], 1))
    sample = np.sort(np.random.RandomState(args.seed).choice(
        found, min(args.sample, len(found)), replace=False))
    rows = [{'train_index': int(i), 'label': setup.label_names[setup.splits.train[i][1]],
             'text': saliency_report.example_text(setup.splits.train[i][0], setup.vocab)}
            for i in sample]
    header = ('# Candidate mislabeled training examples (Rajani et al. 2020, Table 3): {}\n\n'
              '{} of the {} candidates ({:.1%} of {} training examples), drawn with seed {}: '
              'the nearest training example of a dev example whose model prediction differs '
              'from its label. Model: {}. {}\n'.format(
                  knn_tables.dataset_name(setup.config), len(rows), len(found),
                  len(found) / classifier.n_train, classifier.n_train, args.seed,
                  model_setup.run_description(setup), cli.provenance()))
    write_table(args.stem, rows, ['train_index', 'label', 'text'], header)
    print(markdown_table(rows, ['train_index', 'label', 'text']))


# ---------------------------------------------------------------- flags
def add_outputs(sub, default_dir, default_name, old_path_flags=()):
    """--out DIR, --name STEM, --overwrite of a subcommand; default_dir None: the run's
    result folder. `default_name` may hold {split}."""
    cli.add_outputs(sub, default_dir or "the run's result folder", default_name, old_path_flags)
    sub.set_defaults(default_stem=(default_dir, default_name))


def output_stem(args):
    """The DIR/STEM a subcommand writes under (add_outputs' flags; the subcommands other
    than backoff took --out PATH before, which still writes there)."""
    folder, name = args.default_stem
    if folder is None:   # beside the run's args.json
        folder = os.path.dirname(args.model_setup)
    return cli.output_stem(args, folder, name.format(split=getattr(args, 'split', '')),
                           out_was_path=args.command != 'backoff')


def add_explained_split(sub, default='test', help='the examples whose neighbours are retrieved'):
    cli.add_split(sub, default, help)


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    common = argparse.ArgumentParser(add_help=False)
    cli.add_layer(common)
    cli.add_batchsize(common)
    cli.add_device(common)
    commands = parser.add_subparsers(dest='command', required=True)
    sub = commands.add_parser('backoff', parents=[common], help='kNN backoff, Tables 4 and 5')
    cli.add_model_setup(sub, '+', 'args.json of trained runs (or their folders)')
    cli.add_dknn_k(sub)
    cli.add_k(sub, None, 'fixed k (default: tuned on dev)')
    sub.add_argument('--temperature', type=float, default=None, help='fixed T (default: tuned)')
    sub.add_argument('--tau', type=float, default=None, help='fixed tau (default: tuned)')
    sub.add_argument('--eval-file', default=None,
                     help="a file of yours scored in place of the test split (the run's data "
                          'format; for a pair model any pair layout), k, T and tau still tuned '
                          "on the run's dev split")
    cli.add_skip_bad_lines(sub)
    add_outputs(sub, cli.RAJANI, 'knn_backoff', old_path_flags=['--table'])
    cli.add_engine(sub)
    sub.set_defaults(run=backoff)
    sub = commands.add_parser('explain', parents=[common], help='nearest training examples')
    cli.add_model_setup(sub)
    add_explained_split(sub)
    sub.add_argument('--examples', type=int, nargs='*', help='indices (default: the first 5)')
    cli.add_k(sub, cli.RAJANI_K, 'neighbours')
    sub.add_argument('--temperature', type=float, default=100.0, help='T of the kNN vote')
    add_outputs(sub, None, 'knn_explanations_{split}')
    cli.add_engine(sub)
    sub.set_defaults(run=explain)
    sub = commands.add_parser('retrieved', parents=[common],
                              help='most retrieved training examples')
    cli.add_model_setup(sub)
    add_explained_split(sub)
    cli.add_k(sub, cli.RAJANI_K, 'neighbours')
    sub.add_argument('--top', type=cli.positive_int, default=20,
                     help='how many training examples to list')
    add_outputs(sub, None, 'knn_retrieved_{split}')
    cli.add_engine(sub)
    sub.set_defaults(run=retrieved)
    sub = commands.add_parser('detect', parents=[common], help='mislabeled examples, Figure 4')
    cli.add_model_setup(sub, '+', 'runs trained with --label-noise (one per seed)')
    add_outputs(sub, cli.RAJANI, 'knn_mislabeled')
    sub.set_defaults(run=detect)
    sub = commands.add_parser('contrast', parents=[common], help=contrast.__doc__)
    cli.add_model_setup(sub, 2, 'two pair runs: e.g. trained on the original and on the '
                        'augmented split; examples come from the first one\'s split')
    add_explained_split(sub, 'dev', 'the first run\'s split to evaluate both models on')
    cli.add_limit(sub, help='only the first N examples of the split')
    sub.add_argument('--show', type=cli.positive_int, default=10,
                     help='examples shown per direction on the HTML page')
    cli.add_k(sub, 4, 'neighbours shown (the paper\'s Tables 1-2 show 4)')
    sub.add_argument('--temperature', type=float, default=100.0, help='T of the kNN vote')
    add_outputs(sub, cli.RAJANI, 'knn_contrast')
    cli.add_engine(sub)
    sub.set_defaults(run=contrast)
    sub = commands.add_parser('candidates', parents=[common], help=candidates.__doc__)
    cli.add_model_setup(sub)
    sub.add_argument('--sample', type=cli.positive_int, default=20,
                     help='how many candidates to list')
    cli.add_seed(sub, help='seed of the sample')
    add_outputs(sub, cli.RAJANI, 'knn_candidates')
    cli.add_engine(sub)
    sub.set_defaults(run=candidates)
    sub = commands.add_parser('negation', help=negation.__doc__)
    sub.add_argument('--datasets', nargs='+', default=['cad-snli', 'cad-snli-augmented'],
                     help='pair datasets whose training splits are counted')
    cli.add_data_dir(sub)
    add_outputs(sub, cli.RAJANI, 'knn_negation')
    sub.set_defaults(run=negation)
    return parser.parse_args(argv)


def negation(args):
    """The 'not' -> contradiction association of the cad-snli splits (data only)."""
    cli.check_new_outputs([args.stem + '.md'], args.overwrite)
    rows = []
    for name, paper in zip(args.datasets, paper_numbers.NEGATION_CONTRADICTION + (None,) * 9):
        dataset = text_datasets.load_dataset(name, data_dir=args.data_dir)
        if not dataset.pair:
            raise UserError('--datasets {}: not a pair dataset; pass cad-snli splits'.format(name))
        stats = knn_influence.negation_association(dataset.train_pool, dataset.label_names)
        rows.append({'dataset': name, 'training pairs': stats['n'],
                     'hypotheses with a negation': stats['n_negated'],
                     'share negated': round(stats['share_negated'], 3),
                     'share of those labelled contradiction': round(stats['share_label'], 3),
                     'paper': '' if paper is None else paper})
    header = ('# Negation in the hypothesis and the contradiction label (Rajani et al. 2020, '
              'section 5)\n\nA hypothesis is negated when it holds \'not\' or "n\'t". The '
              'paper: the pattern \'occurs approximately 37% and 60% of times in the original '
              'and augmented training splits\'; read here as the share labelled '
              'contradiction.\n{}\n'.format(cli.provenance()))
    write_table(args.stem, rows, list(rows[0]), header)
    print(markdown_table(rows, list(rows[0])))


def main(argv=None):
    args = parse_args(argv)
    args.stem = output_stem(args)
    with LOCKS:
        args.run(args)


if __name__ == '__main__':
    cli.run_cli(main)
