"""Table 1 (softmax vs DkNN accuracy) from the result folders' DkNN reports.

Rows are plain dicts, one per run and backend (table1_rows), grouped over seeds by
table1_summary. A run without a DkNN report in this checkout keeps its row from
the previous table (carried_rows), so regenerating the table after adding one model never
drops the numbers of models trained elsewhere.
"""
import os

import numpy as np

from deepknn.neighbors import dknn_evaluation
from deepknn.neighbors import knn_index
from deepknn.models import model_setup
from deepknn.reports import paper_numbers
from deepknn.reports import tables
import nlp_utils
from nlp_utils import UserError

MODELS = ('bilstm', 'cnn', 'minilm')
TABLE1_DATASETS = [('stsa.binary', 'SST'), ('custrev', 'CR'), ('TREC', 'TREC'),
                   ('mpqa', 'MPQA'), ('subj', 'SUBJ'), ('snli', 'SNLI')]


def read_runs(folder):
    """The DkNN test reports of a result folder, one per backend that was run, each
    with `epoch`, `seed`, `vocab`, `model_sha256` and, where DkNN also ran on dev,
    `dev_softmax_accuracy` and `dev_dknn_accuracy`. [] when DkNN was not run."""
    reports = []
    for backend in knn_index.BACKENDS:
        test, dev = (os.path.join(folder, dknn_evaluation.output_names(split, backend)[0])
                     for split in ('test', 'dev'))
        if not os.path.exists(test):
            continue
        report = dknn_report(test)
        config = model_setup.read_config(os.path.join(folder, 'args.json'))
        if 'finetuned_from' in config.extra:   # an entropy fine-tuned model: not Table 1
            return []
        report.update(epoch=config.epoch, seed=config.seed, vocab=config.vocab,
                      model_sha256=model_setup.model_digest(folder, config.model_path))
        if os.path.exists(dev):
            dev_report = dknn_report(dev)
            report.update(dev_softmax_accuracy=dev_report['softmax_accuracy'],
                          dev_dknn_accuracy=dev_report['dknn_accuracy'])
        reports.append(report)
    return reports


def dknn_report(path):
    """A run_dknn.py report with its two accuracies; a UserError naming the file when
    one is missing or not a number."""
    rerun = 'run `run_dknn` on {} again'.format(os.path.dirname(path))
    nlp_utils.check_whole(path, 'DkNN report', rerun)
    report = nlp_utils.read_json(path, 'DkNN report', dict)
    for name in ('softmax_accuracy', 'dknn_accuracy'):
        if isinstance(report.get(name), bool) or not isinstance(report.get(name), (int, float)):
            raise UserError('DkNN report {} has no number {}; {}'.format(path, name, rerun))
    return report


def table1_rows(results_dir):
    """One row per run and backend: results/<dataset>_<model> and every variant of it
    (results/<dataset>_<model>_<anything>, e.g. _seed1 or _trainvocab, from RUN=...
    train_and_dknn.sh); one 'not run' row where a model and dataset have none."""
    names = sorted(os.listdir(results_dir)) if os.path.isdir(results_dir) else []
    rows = []
    for model in MODELS:
        for dataset, short in TABLE1_DATASETS:
            run = '{}_{}'.format(dataset, model)
            variants = [name for name in names if name == run or name.startswith(run + '_')]
            found = [row for name in variants
                     for row in table1_row(results_dir, name, model, short)]
            rows.extend(found or [table1_empty_row(run, model, short)])
    return rows


def percent(fraction):
    return None if fraction is None else round(100 * fraction, 1)


def table1_empty_row(name, model, short):
    # The paper has no transformer: blank paper columns (None would read 'not run').
    paper_softmax, paper_dknn = paper_numbers.TABLE1.get(model, {}).get(short, ('', ''))
    return {'model': model_setup.MODEL_NAMES[model], 'dataset': short, 'run': name,
            'paper_softmax': paper_softmax, 'paper_dknn': paper_dknn, 'softmax': None,
            'dknn': None, 'difference': None, 'dev_softmax': None, 'dev_dknn': None,
            'epochs': None, 'backend': None, 'k': None, 'seed': None, 'vocab': None,
            'model_sha256': None}


def table1_row(results_dir, name, model, short):
    """The rows of one run: one per backend DkNN ran with (none if it did not run)."""
    rows = []
    for report in read_runs(os.path.join(results_dir, name)):
        softmax, dknn = 100 * report['softmax_accuracy'], 100 * report['dknn_accuracy']
        rows.append(dict(table1_empty_row(name, model, short), softmax=round(softmax, 1),
                         dknn=round(dknn, 1), difference=round(dknn - softmax, 1),
                         epochs=report['epoch'], seed=report['seed'], vocab=report['vocab'],
                         dev_softmax=percent(report.get('dev_softmax_accuracy')),
                         dev_dknn=percent(report.get('dev_dknn_accuracy')),
                         backend=report['backend'], k=report['k'],
                         model_sha256=report['model_sha256']))
    return rows


def table1_summary(rows):
    """Runs grouped by model, dataset, vocabulary, epochs and backend: mean and
    standard deviation over the seeds of test accuracy, means of dev accuracy."""
    groups = {}
    for row in rows:
        key = (row['model'], row['dataset'], row['vocab'], row['epochs'], row['backend'])
        groups.setdefault(key, []).append(row)
    summary = []
    for (model, dataset, vocab, _, backend), members in groups.items():
        first = members[0]
        ran = first['softmax'] is not None
        entry = {'model': model, 'dataset': dataset, 'vocab': vocab, 'backend': backend,
                 'seeds': len(members) if ran else 0,
                 'epochs': first['epochs'] if ran else None,
                 'paper_softmax': first['paper_softmax'], 'paper_dknn': first['paper_dknn']}
        for column in ('softmax', 'dknn', 'difference', 'dev_softmax', 'dev_dknn'):
            values = [m[column] for m in members if m[column] is not None]
            entry[column] = round(float(np.mean(values)), 1) if values else None
        for column in ('softmax', 'dknn'):
            values = [m[column] for m in members if m[column] is not None]
            # One seed has no spread: blank, not 'not run'.
            entry[column + '_sd'] = (round(float(np.std(values)), 1) if len(values) > 1
                                     else '' if values else None)
        summary.append(entry)
    return summary


NUMERIC_COLUMNS = ('softmax', 'dknn', 'difference', 'dev_softmax', 'dev_dknn', 'epochs', 'k',
                   'seed')


def carried_rows(previous_csv, rows):
    """The rows of an earlier table1_runs.csv for runs the new rows do not measure (their
    folder is not in this checkout, or has no DkNN report yet), numbers parsed back and
    model_sha256 kept (tables.NOT_RECORDED where that table had none); [] without that
    file. Rows that never ran ('not run') are not carried: the new table
    has its own."""
    fresh = {row['run'] for row in rows if row['softmax'] is not None}
    carried = []
    for line, row in tables.previous_rows(previous_csv):
        if not row.get('softmax') or row['run'] in fresh:
            continue
        try:
            parsed = {c: (float(row[c]) if '.' in row[c] else int(row[c])) if row[c] else None
                      for c in NUMERIC_COLUMNS}
        except (KeyError, ValueError) as error:
            raise UserError('{} line {}: unreadable Table 1 row ({}); delete that row or the '
                            'file to rebuild Table 1 from the folders alone'.format(
                                previous_csv, line, error))
        model = {name: key for key, name in model_setup.MODEL_NAMES.items()}.get(row.get('model'))
        if model is None:
            raise UserError('{} line {}: unknown model {!r}; delete that row or the file to '
                            'rebuild Table 1 from the folders alone'.format(
                                previous_csv, line, row.get('model')))
        empty = table1_empty_row(row['run'], model, row['dataset'])
        carried.append(dict(empty, **parsed, backend=row['backend'], vocab=row['vocab'],
                            model_sha256=row.get('model_sha256') or tables.NOT_RECORDED))
    return carried


def with_carried(rows, carried):
    """rows plus carried rows, in table1_rows' order (model, dataset, run); a carried
    row replaces the 'not run' row of its model and dataset."""
    have = {(row['model'], row['dataset']) for row in carried}
    kept = [row for row in rows if row['softmax'] is not None or
            (row['model'], row['dataset']) not in have]
    models = [model_setup.MODEL_NAMES[m] for m in MODELS]
    datasets = [short for _, short in TABLE1_DATASETS]
    return sorted(kept + carried, key=lambda row: (models.index(row['model']),
                                                   datasets.index(row['dataset']), row['run']))
