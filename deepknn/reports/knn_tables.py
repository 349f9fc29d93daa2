"""Table rows for the kNN-representation commands (Rajani et al. 2020): kNN backoff
(the detailed table and the paper's Tables 4 and 5) and mislabeled-example detection
(one row per method and seed, seed means, rankings). Plain dicts in, plain dicts out;
the published numbers come from paper_numbers.
"""
import os

import numpy as np

from deepknn.models import model_setup
from deepknn.rajani import knn_influence
from deepknn.reports import paper_numbers
import nlp_utils
from nlp_utils import UserError


def dataset_name(config):
    """'snli (dev-trained proxy)' for SNLI trained on its dev split, else the dataset."""
    if config.dataset == 'snli' and 'dev' in os.path.basename(config.train_file or ''):
        return 'snli (dev-trained proxy)'
    return config.dataset


def training_data(config):
    """dataset_name, or for a run trained on a file of its own that is no SNLI proxy the
    file too: 'snli format: anli-dev-halves_seed0/train.jsonl' (its folder and name)."""
    name = dataset_name(config)
    if not config.train_file or name != config.dataset:
        return name
    where = os.path.join(os.path.basename(os.path.dirname(config.train_file)),
                         os.path.basename(config.train_file))
    return '{} format: {}'.format(config.dataset, where)


def split_name(config, split):
    """A split of a run, for titles: 'cad-snli dev', or with the file that replaced it,
    'cad-snli dev (snli_1.0_dev.jsonl)', where --train-file / --dev-file / --test-file gave
    one (the paper's cad-snli runs validate and test on SNLI, not on cad-snli's own splits)."""
    name = '{} {}'.format(dataset_name(config), split)
    replaced = getattr(config, split + '_file', None)
    return '{} ({})'.format(name, os.path.basename(replaced)) if replaced else name


def percent(value):
    """A fraction as a percentage; '' where there was nothing to measure (no example
    below tau), so the table does not read 'not run'."""
    return '' if value is None else round(100 * value, 1)


def backoff_row(setup, result):
    conf, cred = result['confidence'], result['credibility'] or {}
    model = setup.config.model
    return {'dataset': dataset_name(setup.config), 'encoder': model_setup.MODEL_NAMES.get(model, model),
            'n_train': result['n_train'], 'k': conf['k'], 'T': conf['temperature'],
            'tau': conf['threshold'], 'model': percent(conf['model_accuracy']),
            'knn_backoff': percent(conf['backoff_accuracy']),
            'knn_alone': percent(conf['knn_accuracy']), 'n_test': conf['n_examples'],
            'n_below_tau': conf['n_below'],
            'model_below_tau': percent(conf['model_accuracy_below']),
            'backoff_below_tau': percent(conf['backoff_accuracy_below']),
            'credibility_threshold': cred.get('threshold'),
            'credibility_backoff': percent(cred.get('backoff_accuracy')),
            'n_below_credibility': cred.get('n_below'),
            'credibility_calibrated_on': cred.get('calibrated_on'),
            'paper_bert': paper_numbers.BACKOFF.get(setup.config.dataset, (None,))[0],
            'paper_knn_bert': paper_numbers.BACKOFF.get(setup.config.dataset, (None, None))[1],
            'paper_tau_bert': paper_numbers.BACKOFF_TAU.get(setup.config.dataset)}


def table4_rows(rows):
    """The paper's Table 4 layout: a row per model, a column per dataset."""
    datasets = list(dict.fromkeys(row['dataset'] for row in rows))
    table = []
    for encoder in dict.fromkeys(row['encoder'] for row in rows):
        for name, key in ((encoder, 'model'), ('kNN-' + encoder, 'knn_backoff')):
            line = {'model': name}
            line.update({d: next((r[key] for r in rows if r['dataset'] == d
                                  and r['encoder'] == encoder), None) for d in datasets})
            table.append(line)
    for name, i in (('BERT (paper)', 0), ('kNN-BERT (paper)', 1)):
        table.append(dict({'model': name},
                          **{d: paper_numbers.BACKOFF.get(d, ('', ''))[i] for d in datasets}))
    return table, ['model'] + datasets


def table5_rows(rows):
    """The paper's Table 5 layout: the chosen tau per dataset (row) and encoder (column)."""
    encoders = list(dict.fromkeys(row['encoder'] for row in rows))
    table = []
    for dataset in dict.fromkeys(row['dataset'] for row in rows):
        line = {'dataset': dataset, 'BERT (paper)': paper_numbers.BACKOFF_TAU.get(dataset, '')}
        line.update({e: next((r['tau'] for r in rows if r['dataset'] == dataset
                              and r['encoder'] == e), None) for e in encoders})
        table.append(line)
    return table, ['dataset'] + encoders + ['BERT (paper)']


def detection_rows(setup, result):
    """One row per flagging method of one seed's run: its scores, and the recall the
    training-loss ranking reaches when as many examples are inspected."""
    loss_curve = result['curves']['training loss']
    return [{'run': os.path.basename(setup.result_dir), 'dataset': dataset_name(setup.config),
             'seed': setup.config.label_noise_seed, 'method': method,
             **{key: round(scores[key], 3) for key in ('precision', 'recall', 'f1')},
             'n_candidates': scores['n_candidates'], 'n_flipped': scores['n_flipped'],
             'fraction_inspected': round(scores['fraction_inspected'], 3),
             'training_loss_recall_same_fraction': round(float(np.interp(
                 scores['fraction_inspected'], knn_influence.FRACTIONS, loss_curve)), 3)}
            for method, scores in result['methods'].items()]


# The settings of runs averaged as seeds of one experiment that may differ: the seeds,
# what they decide (the dev split drawn, so the vocabulary and the data digest), and
# where the files lie.
SEED_SETTINGS = ('seed', 'label_noise_seed')
NOT_COMPARED = SEED_SETTINGS + ('model_path', 'vocab_path', 'data_dir', 'n_vocab',
                                'vocab_digest', 'data_digest')


def check_seed_replicates(configs, names):
    """UserError unless the runs (RunConfigs, folder names) differ only in SEED_SETTINGS
    (and NOT_COMPARED): averaging, say, an SST and an SNLI run as two seeds is wrong.
    The message names each setting that differs from the first run and both values."""
    first = configs[0].to_json()
    for config, name in zip(configs[1:], names[1:]):
        values = config.to_json()
        differ = [key for key in dict.fromkeys(list(first) + list(values))
                  if key not in NOT_COMPARED and first.get(key) != values.get(key)]
        if differ:
            raise UserError('{} and {} differ in more than the seed ({}): they are not seeds '
                            'of one experiment to average; pass runs that differ only in {}'
                            .format(names[0], name, '; '.join(
                                '{} {!r} vs {!r}'.format(key, first.get(key), values.get(key))
                                for key in differ), ' and '.join(SEED_SETTINGS)))


def ranked_rows(setup, result):
    """One row per ranking of one seed's run: AUPRC and precision / recall at k = the
    number of flipped labels, beside the base rate (a random ranking's AUPRC)."""
    return [{'run': os.path.basename(setup.result_dir), 'dataset': dataset_name(setup.config),
             'dev_pairs': result['n_dev'], 'seed': setup.config.label_noise_seed,
             'ranking': name, 'auprc': round(scores['auprc'], 3), 'k': scores['k'],
             'precision_at_k': round(scores['precision_at_k'], 3),
             'recall_at_k': round(scores['recall_at_k'], 3),
             'base_rate': round(scores['base_rate'], 3)}
            for name, scores in result['ranked'].items()]


def _mean(values):
    """The mean to 3 decimals; a value every seed shares as it is (167, not 167.0)."""
    return values[0] if len(set(values)) == 1 else round(float(np.mean(values)), 3)


def mean_rows(rows, key='method', spread='f1'):
    """Per method (or ranking: `key`), the seed mean of every number and the seeds'
    range of the `spread` column ('F1 0.700-0.800')."""
    means = []
    for method in dict.fromkeys(row[key] for row in rows):
        mine = [row for row in rows if row[key] == method]
        mean = {column: _mean([row[column] for row in mine])
                for column in mine[0] if column not in ('run', 'dataset', 'seed', key)}
        values = [row[spread] for row in mine]
        means.append(dict(mean, **{'run': 'mean of ' + nlp_utils.count(len(mine), 'seed'),
                                   key: method, 'dataset': mine[0]['dataset'],
                                   'seed': '{} {:.3f}-{:.3f}'.format(
                                       {'f1': 'F1'}.get(spread, spread), min(values),
                                       max(values))}))
    return means


def ranking_rows(curves, rule_recall):
    """Per ranking (seed-mean curve): recall at 10/30/50% inspected, and the fraction it
    must inspect to reach the paper rule's mean recall."""
    rows = []
    for name, per_seed in curves.items():
        curve = np.mean(per_seed, axis=0)
        at = lambda fraction: round(float(np.interp(fraction, knn_influence.FRACTIONS, curve)), 3)
        rows.append({'ranking': name, 'recall_at_10pct': at(0.1), 'recall_at_30pct': at(0.3),
                     'recall_at_50pct': at(0.5),
                     'fraction_to_match_the_rule': knn_influence.fraction_to_match(
                         curve, rule_recall)})
    rows.append({'ranking': 'training loss (paper, BERT)', 'recall_at_10pct': '',
                 'recall_at_30pct': '', 'recall_at_50pct': '',
                 'fraction_to_match_the_rule': paper_numbers.DETECTION_LOSS_FRACTION})
    return rows
