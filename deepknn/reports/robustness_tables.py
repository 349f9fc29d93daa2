"""Table rows of kNN backoff on ANLI and HANS (Rajani et al. 2020, Tables 4-6 and the 30
HANS subcases), from the results of deepknn.rajani.robustness. Plain dicts in and out;
the published numbers come from paper_numbers.
"""
import os
import re

import numpy as np

from deepknn.reports import knn_tables
from deepknn.reports import paper_numbers


def _run(setup):
    return {'run': os.path.basename(setup.result_dir),
            'trained on': knn_tables.training_data(setup.config), 'encoder': setup.config.model}


def table4_row(setup, set_name, result):
    """One model on one evaluation set: test-part accuracy (%) of the model and of kNN
    backoff, the majority-class rate and the one-sided binomial p-value of the model
    against it, with the tuned T and tau (Table 5) and the part sizes."""
    test, choice = result['test'], result['choice']
    return dict(_run(setup), **{
        'evaluated on': set_name, 'model': knn_tables.percent(test['model_accuracy']),
        'kNN-model': knn_tables.percent(test['backoff_accuracy']),
        'kNN alone': knn_tables.percent(test['knn_accuracy']),
        'majority class': knn_tables.percent(test['majority_accuracy']),
        'model above chance (p)': '{:.2g}'.format(test['p_above_chance']), 'k': choice['k'],
        'T': choice['temperature'], 'tau': choice['threshold'],
        'switched to kNN': test['n_below'], 'n_validation': result['n_validation'],
        'n_test': result['n_test']})


def paper_table4_rows(eval_sets):
    """The paper's BERT and RoBERTa rows for the kinds of set we ran (ANLI; HANS, whose
    column a HANS-like set sits beside)."""
    columns = dict.fromkeys('hans' if eval_set.binary else 'anli' for eval_set in eval_sets)
    return [{'run': 'paper', 'trained on': 'ANLI train (162,865)', 'encoder': encoder,
             'evaluated on': column, 'model': model[column], 'kNN-model': knn_model[column],
             'tau': paper_numbers.ROBUSTNESS_TAU[encoder][column]}
            for encoder, (model, knn_model) in paper_numbers.ROBUSTNESS.items()
            for column in columns]


def group_rows(setup, set_name, result, part='groups'):
    """Test-part accuracy (%) per ANLI round or HANS heuristic ('groups'), the same on
    HANS's non-entailment pairs ('not_entail', Table 6) or per HANS subcase ('subcases')."""
    return [dict(_run(setup), **{'evaluated on': set_name, 'slice': name, 'n': scores['n'],
                                 **({'gold': scores['gold']} if 'gold' in scores else {}),
                                 'model': knn_tables.percent(scores['model']),
                                 'kNN-model': knn_tables.percent(scores['backoff'])})
            for name, scores in result[part].items()]


def paper_table6_rows():
    """Table 6 of the paper: not-entail accuracy (%) per heuristic on HANS."""
    return [{'run': 'paper', 'trained on': 'ANLI train (162,865)', 'encoder': encoder,
             'evaluated on': 'hans', 'slice': heuristic, 'n': '', 'model': model,
             'kNN-model': knn_model}
            for encoder, per_heuristic in paper_numbers.HANS_NOT_ENTAIL.items()
            for heuristic, (model, knn_model) in per_heuristic.items()]


# A run trained at another seed than the default: RUN_seedS (Makefile, rajani-robustness-seeds).
_TRAINING_SEED = re.compile(r'_seed(\d+)$')
SEED_SPREAD_COLUMNS = ('model run', 'trained on', 'encoder', 'evaluated on', 'slice',
                       'training seeds', 'split seeds', 'model', 'kNN-model', 'kNN - model',
                       'kNN - model sign')


def seed_spread_rows(tables):
    """One row per model, evaluation set and slice over every training seed (runs named
    RUN and RUN_seedS) and split seed (one groups table each: a list of group_rows dicts).
    `model`, `kNN-model` and their difference: 'mean [min, max]' in points over all
    (training seed, split seed) pairs; the sign column says whether kNN backoff is above
    (+), below (-) or on both sides of the model in them."""
    cells = {}
    for split_seed, rows in enumerate(tables):
        for row in rows:
            base = _TRAINING_SEED.sub('', row['run'])
            key = (base, row['trained on'], row['encoder'], row['evaluated on'], row['slice'])
            cells.setdefault(key, []).append((row['run'], split_seed, float(row['model']),
                                              float(row['kNN-model'])))
    return [dict(zip(SEED_SPREAD_COLUMNS[:5], key), **_spread(values))
            for key, values in cells.items()]


def _spread(values):
    """The seed-spread columns of one cell's (run, split seed, model, kNN-model) values."""
    model = np.array([v[2] for v in values])
    backoff = np.array([v[3] for v in values])
    difference = backoff - model
    signs = {'+' if d > 0 else '-' if d < 0 else '0' for d in difference}
    return {'training seeds': len({v[0] for v in values}),
            'split seeds': len({v[1] for v in values}),
            'model': _mean_range(model), 'kNN-model': _mean_range(backoff),
            'kNN - model': _mean_range(difference),
            'kNN - model sign': signs.pop() if len(signs) == 1 else 'mixed'}


def _mean_range(values):
    return '{:.1f} [{:.1f}, {:.1f}]'.format(values.mean(), values.min(), values.max())
