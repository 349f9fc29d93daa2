"""Numbers the docs quote from a committed table are the table's: Table 1's softmax and
DkNN accuracies as docs/reproducing.md and results/README.md give them (against
results/wallace/table1.csv), and results/README.md's Tables 4-6 summary and its
training-seed spread (against results/rajani/knn_robustness_table4.csv and
knn_robustness_glove_seeds_table4.csv)."""
import csv
import os
import re

import pytest

from cli_helpers import ROOT
DATASETS = {'SST-2': 'SST', 'SNLI proxy': 'SNLI'}      # the docs' names -> the table's


def read(path):
    with open(os.path.join(ROOT, path), encoding='utf-8') as f:
        return f.read()


@pytest.fixture(scope='module')
def table1():
    """{(model, dataset, vocab): (softmax, DkNN)} of the committed Table 1."""
    with open(os.path.join(ROOT, 'results', 'wallace', 'table1.csv'), newline='') as f:
        return {(row['model'], row['dataset'], row['vocab']): (row['softmax'], row['dknn'])
                for row in csv.DictReader(f)}


def summary_quotes():
    """(model, dataset, softmax, DkNN) of docs/reproducing.md's Table 1 summary."""
    text = ' '.join(read('docs/reproducing.md').split())
    quotes = []
    for model, pattern in (('CNN', r'CNN softmax / DkNN, mean of 3 seeds: (.*?) \(paper'),
                           ('BiLSTM', r'BiLSTM \(10 epochs, best dev epoch\): (.*?) \(paper')):
        listed = re.search(pattern, text).group(1)
        quotes += [(model, dataset, softmax, dknn) for dataset, softmax, dknn in
                   re.findall(r'(SST|CR|TREC|MPQA|SUBJ) ([\d.]+) / ([\d.]+)', listed)]
    quotes += [('MiniLM', 'SST') + re.search(
        r'\(all-MiniLM-L6-v2 fine-tuned, `--model minilm`\)\.\*\* SST-2 softmax / DkNN '
        r'([\d.]+) / ([\d.]+)', text).groups()]
    return quotes


TABLE_1_HEADERS = ('| model | dataset | vocabulary | softmax | DkNN |',
                   '| model | dataset | softmax | DkNN | dev softmax / DkNN |')


def readme_quotes():
    """(model, dataset, vocab, softmax, DkNN) of results/README.md's two Table 1 tables."""
    quotes, header = [], None
    for line in read('results/README.md').splitlines():
        if not line.startswith('|'):
            header = None                              # a table ends at its last row
        elif line.startswith('| model |'):
            header = line if line.startswith(TABLE_1_HEADERS) else None
        if not header or not line.startswith(('| CNN', '| BiLSTM', '| MiniLM')):
            continue
        cells = [cell.strip() for cell in line.strip('|').split('|')]
        model, dataset = cells[0].split(' ')[0], DATASETS.get(cells[1], cells[1])
        with_vocab = header.startswith(TABLE_1_HEADERS[0])
        vocab = cells[2].split(',')[0] if with_vocab else 'pretrained'
        numbers = cells[3:5] if with_vocab else cells[2:4]
        quotes.append((model, dataset, vocab) + tuple(n.split(' ')[0] for n in numbers))
    return quotes


def test_the_table_1_summary_quotes_the_table(table1):
    quotes = summary_quotes()
    assert len(quotes) == 11
    for model, dataset, softmax, dknn in quotes:
        assert table1[(model, dataset, 'pretrained')] == (softmax, dknn), (model, dataset)


def test_results_readme_quotes_table_1(table1):
    quotes = readme_quotes()
    assert len(quotes) >= 24
    for model, dataset, vocab, softmax, dknn in quotes:
        assert table1[(model, dataset, vocab)] == (softmax, dknn), (model, dataset, vocab)


RUN_OF_ROW = {'CNN, cad-snli original': 'cad-snli_cnn', 'CNN, cad-snli augmented':
              'cad-snli-augmented_cnn', 'CNN, SNLI proxy': 'snli_cnn',
              'BiLSTM, cad-snli original': 'cad-snli_bilstm',
              'BiLSTM, cad-snli augmented': 'cad-snli-augmented_bilstm',
              'MiniLM, cad-snli original': 'cad-snli-snlieval_minilm',
              'MiniLM, cad-snli augmented': 'cad-snli-augmented_minilm',
              'MiniLM, SNLI proxy': 'snli_minilm'}


def csv_rows(name):
    with open(os.path.join(ROOT, 'results', 'rajani', name), newline='') as f:
        return list(csv.DictReader(f))


def readme_rows(header):
    """The cells of each row of the results/README.md table under `header`."""
    rows, inside = [], False
    for line in read('results/README.md').splitlines():
        if line.startswith(header):
            inside = True
        elif inside and not line.startswith('|'):
            break
        elif inside and not line.startswith('| ---'):
            rows.append([cell.strip() for cell in line.strip('|').split('|')])
    return rows


def test_results_readme_quotes_tables_4_to_6(table1):
    table4 = {(row['run'], row['evaluated on']): row for row in csv_rows('knn_robustness_table4.csv')}
    rows = [row for row in readme_rows('| model (training pairs) | ANLI dev: model / kNN-model')
            if not row[0].startswith('paper')]
    assert len(rows) == 8
    for row in rows:
        run = RUN_OF_ROW[row[0].split(' (')[0]]
        for cell, evaluated_on in ((row[1], 'anli'), (row[2], 'hans-like')):
            quoted = re.match(r'([\d.]+) / ([\d.]+) \(([\d.]+)\), ([\d.e-]+)', cell).groups()
            measured = table4[(run, evaluated_on)]
            assert [float(q) for q in quoted] == [float(measured[name]) for name in (
                'model', 'kNN-model', 'tau', 'model above chance (p)')], (run, evaluated_on)


def test_results_readme_quotes_the_training_seed_spread():
    spread = {(row['model run'], row['evaluated on']): row
              for row in csv_rows('knn_robustness_glove_seeds_table4.csv')}
    rows = readme_rows('| model | ANLI dev: model | kNN-model | kNN - model |')
    assert len(rows) == 5
    for row in rows:
        run = RUN_OF_ROW[row[0]]
        for cells, evaluated_on in ((row[1:4], 'anli'), (row[4:7], 'hans-like')):
            measured = spread[(run, evaluated_on)]
            expected = [measured['model'], measured['kNN-model'], measured['kNN - model']]
            # the README writes differences with their sign: +0.2 [-1.5, +2.5]
            assert [cell.replace('+', '') for cell in cells] == [
                value.replace('-0.0', '0.0') for value in expected], (run, evaluated_on)
