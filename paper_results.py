"""Collect trained result folders into the paper's tables and figures under results/.

    python paper_results.py table1        # results/table1.md and .csv
    python paper_results.py training      # results/training.md and .csv
    python paper_results.py reliability --run stsa.binary_cnn   # results/reliability_*.png

Each output names the command that produced it; the runs themselves come from
scripts/train_and_dknn.sh (see the README).
"""
import argparse
import csv
import io
import os
import sys

import numpy as np

import nlp_utils
import plots
from nlp_utils import UserError

TABLE1_DATASETS = [('stsa.binary', 'SST'), ('custrev', 'CR'), ('TREC', 'TREC'),
                   ('mpqa', 'MPQA'), ('subj', 'SUBJ')]
# Table 1 of the paper (GloVe 840B 300d): (softmax, DkNN) test accuracy in percent.
PAPER_TABLE1 = {
    'bilstm': {'SST': (86.7, 86.6), 'CR': (82.7, 82.5), 'TREC': (91.5, 91.3),
               'MPQA': (88.9, 88.6), 'SUBJ': (94.8, 94.9)},
    'cnn': {'SST': (85.7, 85.8), 'CR': (83.3, 83.4), 'TREC': (92.8, 92.4),
            'MPQA': (89.1, 88.7), 'SUBJ': (93.5, 93.1)},
}
MODEL_NAMES = {'bilstm': 'BiLSTM', 'cnn': 'CNN'}


def read_run(results_dir, dataset, model):
    """dknn.json and train args of results/<dataset>_<model>, or None if not run."""
    folder = os.path.join(results_dir, '{}_{}'.format(dataset, model))
    if not os.path.exists(os.path.join(folder, 'dknn.json')):
        return None
    report = nlp_utils.read_json(os.path.join(folder, 'dknn.json'))
    report['epoch'] = nlp_utils.read_json(os.path.join(folder, 'args.json'))['epoch']
    return report


def table1_rows(results_dir):
    rows = []
    for model in ('bilstm', 'cnn'):
        for dataset, short in TABLE1_DATASETS:
            paper_softmax, paper_dknn = PAPER_TABLE1[model][short]
            run = read_run(results_dir, dataset, model)
            row = {'model': MODEL_NAMES[model], 'dataset': short, 'paper_softmax': paper_softmax,
                   'paper_dknn': paper_dknn, 'softmax': None, 'dknn': None, 'difference': None,
                   'epochs': None, 'backend': None, 'k': None}
            if run:
                softmax, dknn = 100 * run['softmax_accuracy'], 100 * run['dknn_accuracy']
                row.update(softmax=round(softmax, 1), dknn=round(dknn, 1),
                           difference=round(dknn - softmax, 1), epochs=run['epoch'],
                           backend=run['backend'], k=run['k'])
            rows.append(row)
    return rows


def markdown_table(rows, columns):
    show = lambda value: 'not run' if value is None else str(value)
    lines = ['| ' + ' | '.join(columns) + ' |', '|' + ' --- |' * len(columns)]
    lines += ['| ' + ' | '.join(show(row[c]) for c in columns) + ' |' for row in rows]
    return '\n'.join(lines) + '\n'


def csv_text(rows, columns):
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, columns, lineterminator='\n')
    writer.writeheader()
    writer.writerows({c: row[c] for c in columns} for row in rows)
    return buffer.getvalue()


def write_table(path_stem, rows, columns, header):
    nlp_utils.atomic_write_text(path_stem + '.md', header + '\n' + markdown_table(rows, columns))
    nlp_utils.atomic_write_text(path_stem + '.csv', csv_text(rows, columns))


def table1(args):
    rows = table1_rows(args.results)
    columns = ['model', 'dataset', 'softmax', 'dknn', 'difference', 'paper_softmax',
               'paper_dknn', 'epochs', 'backend', 'k']
    header = ('# Table 1: softmax vs DkNN test accuracy (%)\n\nOurs: GloVe 6B 50d, this 2-core '
              'CPU, epoch chosen on dev; paper: GloVe 840B 300d.\nProduced by: `{}`\n'.format(
                  'python ' + ' '.join(sys.argv)))
    write_table(os.path.join(args.out, 'table1'), rows, columns, header)
    print(markdown_table(rows, columns))


def training_row(folder):
    """Accuracy, speed and memory of one training run, from its result folder."""
    config = nlp_utils.read_json(os.path.join(folder, 'args.json'))
    result = nlp_utils.read_json(os.path.join(folder, 'train_result.json'))
    log = nlp_utils.read_json(os.path.join(folder, 'log'))
    timing = {}
    if os.path.exists(os.path.join(folder, 'time.txt')):
        with open(os.path.join(folder, 'time.txt')) as f:
            words = f.read().split()
        timing = dict(zip(words[0::2], words[1::2]))
    return {'dataset': config['dataset'], 'model': config['model'],
            'dev': round(100 * result['dev_accuracy'], 1),
            'test': round(100 * result['test_accuracy'], 1), 'epochs': config['epoch'],
            'seconds_per_epoch': round(log[-1]['elapsed_time'] / log[-1]['epoch'], 1),
            'peak_memory_mb': round(int(timing['peak_rss_kb']) / 1024) if timing else None,
            'command': 'scripts/train_and_dknn.sh {} {}{}'.format(
                config['dataset'], config['model'],
                '' if config['epoch'] == 30 else ' --epoch {}'.format(config['epoch']))}


def training(args):
    folders = sorted(os.path.join(args.results, name) for name in os.listdir(args.results)
                     if os.path.exists(os.path.join(args.results, name, 'train_result.json')))
    rows = [training_row(folder) for folder in folders]
    columns = ['dataset', 'model', 'dev', 'test', 'epochs', 'seconds_per_epoch',
               'peak_memory_mb', 'command']
    header = ('# Training runs on this 2-core CPU (GloVe 6B 50d, accuracy in %)\n\n'
              'Produced by: `{}`\n'.format('python ' + ' '.join(sys.argv)))
    write_table(os.path.join(args.out, 'training'), rows, columns, header)
    print(markdown_table(rows, columns))


def reliability(args):
    path = os.path.join(args.results, args.run, 'dknn_predictions.npz')
    if not os.path.exists(path):
        raise UserError('{} does not exist; run python run_dknn.py --model-setup {}/args.json '
                        'first'.format(path, os.path.dirname(path)))
    with np.load(path, allow_pickle=False) as predictions:
        labels, probabilities = predictions['label'], predictions['softmax_probability']
        curves = [('DkNN credibility', predictions['credibility'],
                   predictions['prediction'] == labels),
                  ('softmax confidence', probabilities.max(axis=1),
                   probabilities.argmax(axis=1) == labels)]
    output = os.path.join(args.out, 'reliability_{}.png'.format(args.run))
    plots.reliability_diagram(output, curves, '{} (test set)'.format(args.run))
    print('wrote', output)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--results', default='results', help='folder of the result folders')
    parser.add_argument('--out', default='results', help='where tables and figures go')
    commands = parser.add_subparsers(dest='command', required=True)
    commands.add_parser('table1', help='softmax vs DkNN accuracy (Table 1)')
    commands.add_parser('training', help='accuracy, seconds per epoch and memory of each run')
    figure = commands.add_parser('reliability', help='reliability diagram of one run')
    figure.add_argument('--run', default='stsa.binary_cnn', help='result folder name')
    args = parser.parse_args(argv)
    {'table1': table1, 'training': training, 'reliability': reliability}[args.command](args)


if __name__ == '__main__':
    nlp_utils.run_cli(main)
