"""The explorer's comparison of two runs of one dataset: a sentence in both, and where they disagree.

`explore.py --model-setup A --compare B` opens a second ExplorerSession beside the
first. `check_comparable` refuses runs whose labels differ; `disagreements` gives the
rows of a split whose softmax (or DkNN) predictions differ between the two runs, both
runs' columns beside each other, paged like the dataset view, and refuses a split whose
gold labels do not line up row by row (runs trained on different training sets still
share their test split).
"""
import numpy as np

from nlp_utils import UserError

KINDS = ('softmax', 'dknn')


def check_comparable(first, second):
    """UserError naming `compare` unless both sessions have the same labels."""
    if list(first.setup.label_names) != list(second.setup.label_names):
        raise UserError('compare: {} has labels {} but {} has {}; compare two runs of the '
                        'same dataset'.format(first.setup.result_dir,
                                              list(first.setup.label_names),
                                              second.setup.result_dir,
                                              list(second.setup.label_names)), 'compare')


def check_same_rows(first, second):
    """UserError naming `split` unless two SplitTables hold the same gold labels."""
    if len(first.gold) != len(second.gold) or not (first.gold == second.gold).all():
        raise UserError('split {} differs between the two runs ({} and {} examples, or other '
                        'labels); compare a split both runs share, such as test'.format(
                            first.name, len(first.gold), len(second.gold)), 'split')


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
    check_same_rows(first, second)
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
