"""Numbers the docs quote from a committed table are the table's: Table 1's softmax and
DkNN accuracies as docs/reproducing.md and results/README.md give them, against
results/wallace/table1.csv."""
import csv
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
