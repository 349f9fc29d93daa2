"""The explorer's comparison of two runs of one dataset: a sentence in both, and where they disagree.

`explore.py --model-setup A --compare B` opens a second ExplorerSession beside the
first. `check_comparable` refuses runs whose labels or split sizes differ (their
examples must line up row by row); `disagreements` gives the rows of a split whose
softmax (or DkNN) predictions differ between the two runs, both runs' columns beside
each other, paged like the dataset view.
"""
import numpy as np

from nlp_utils import UserError

KINDS = ('softmax', 'dknn')


def check_comparable(first, second):
    """UserError naming `compare` unless both sessions have the same labels and the
    same gold labels in every split they share."""
    if list(first.setup.label_names) != list(second.setup.label_names):
        raise UserError('compare: {} has labels {} but {} has {}; compare two runs of the '
                        'same dataset'.format(first.setup.result_dir,
                                              list(first.setup.label_names),
                                              second.setup.result_dir,
                                              list(second.setup.label_names)), 'compare')
    for split in set(first.examples) & set(second.examples):
        gold = [[y for _, y in session.examples[split]] for session in (first, second)]
        if gold[0] != gold[1]:
            raise UserError('compare: the {} splits of {} and {} differ ({} and {} '
                            'examples); compare two runs of the same data'.format(
                                split, first.setup.result_dir, second.setup.result_dir,
                                len(gold[0]), len(gold[1])), 'compare')


def predictions(table, kind):
    """(N,) label ids of one run's softmax or DkNN (the softmax where it has none)."""
    if kind == 'dknn' and table.dknn_prediction is not None:
        return table.dknn_prediction
    return table.softmax_prediction


def disagreeing_rows(first, second, kind):
    """Row numbers (ascending) where the two SplitTables' `kind` predictions differ."""
    if kind not in KINDS:
        raise UserError('kind must be one of {}, got {!r}'.format(', '.join(KINDS), kind),
                        'kind')
    return np.flatnonzero(predictions(first, kind) != predictions(second, kind))


def disagreements(first, second, kind, query):
    """A page of the rows where the runs disagree: {'split', 'kind', 'n_total',
    'n_softmax', 'n_dknn', 'n_matching', 'page', 'n_pages', 'rows': [{'index', 'text',
    'gold', 'a': row of the first run, 'b': of the second}]}; `query` a queries.Query
    (its page and per_page)."""
    rows = disagreeing_rows(first, second, kind)
    n_pages = max(1, -(-len(rows) // query.per_page))
    page = min(query.page, n_pages)
    shown = rows[(page - 1) * query.per_page:page * query.per_page]
    return {'split': first.name, 'kind': kind, 'n_total': len(first.gold),
            'n_softmax': len(disagreeing_rows(first, second, 'softmax')),
            'n_dknn': len(disagreeing_rows(first, second, 'dknn')),
            'n_matching': len(rows), 'page': page, 'n_pages': n_pages,
            'rows': [{'index': int(i), 'text': first.texts[i],
                      'gold': first.label_names[first.gold[i]],
                      'a': first.row(int(i)), 'b': second.row(int(i))} for i in shown]}
