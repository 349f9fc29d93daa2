"""The explorer's dataset and training-set views: a split evaluated once, then sorted,
filtered and paged on the server.

A `SplitTable` keeps per example of a split the text, gold label, softmax and DkNN
predictions, credibility, and the activations of the layer Rajani et al.'s kNN
searches (the last hidden one), from split_cache (on disk, or evaluated once).
`SplitTable.page` answers a query in milliseconds (numpy over the kept columns). `training_view` gives the most retrieved training
examples (Rajani et al.'s retrieval counts, k=16) and the candidate mislabeled ones
(the paper's kNN rule on dev; cleanlab's confident learning on kNN votes), each with
the examples that retrieved it.
"""
import dataclasses
import functools

import numpy as np
from deepknn.explorer import selection
from deepknn.explorer import split_cache
from deepknn.neighbors import dknn as dknn_lib
from deepknn.rajani import knn_influence
from deepknn.rajani import knn_representations as knn
from deepknn.rajani import label_issues
from deepknn.reports import saliency_report
from nlp_utils import UserError

RETRIEVAL_K = 16          # Rajani et al.'s neighbours per example (Table 4, retrieval)
KNN_LAYER = split_cache.KNN_LAYER
MAX_PER_PAGE = 200
SORT_COLUMNS = ('index', 'credibility', 'softmax_probability', 'gold', 'text',
                'softmax_prediction', 'dknn_prediction')
MAX_SEARCH = 200                    # characters of a free-text search
WRONG_FILTERS = ('', 'softmax', 'dknn', 'either')


@dataclasses.dataclass
class Query:
    """One dataset-view request, checked."""
    page: int = 1
    per_page: int = 25
    sort: str = 'index'
    descending: bool = False
    wrong: str = ''                     # '', 'softmax', 'dknn' or 'either'
    max_credibility: float = 1.0        # rows with credibility <= this
    label: str = ''                     # gold label name, '' for all
    search: str = ''                    # rows whose text holds this, any case; '' for all

    @classmethod
    def from_params(cls, params, label_names):
        """A Query from the URL's parameters (strings); UserError naming the parameter."""
        def integer(name, low, high, default):
            value = params.get(name, str(default))
            if not (value.isascii() and value.isdigit()) or not low <= int(value) <= high:
                raise UserError('{} must be an integer from {} to {}, got {!r}'.format(
                    name, low, high, value), name)
            return int(value)

        def choice(name, choices, default):
            value = params.get(name, default)
            if value not in choices:
                raise UserError('{} must be one of {}, got {!r}'.format(
                    name, ', '.join(repr(c) for c in choices), value), name)
            return value
        try:
            max_credibility = float(params.get('max_credibility', '1'))
        except ValueError:
            max_credibility = float('nan')
        if not 0 <= max_credibility <= 1:
            raise UserError('max_credibility must be a number from 0 to 1, got {!r}'.format(
                params.get('max_credibility')), 'max_credibility')
        search = params.get('search', '')
        if len(search) > MAX_SEARCH:
            raise UserError('search has {} characters, more than {}; search for less'.format(
                len(search), MAX_SEARCH), 'search')
        return cls(integer('page', 1, 10 ** 9, 1), integer('per_page', 1, MAX_PER_PAGE, 25),
                   choice('sort', SORT_COLUMNS, 'index'),
                   choice('order', ('asc', 'desc'), 'asc') == 'desc',
                   choice('wrong', WRONG_FILTERS, ''), max_credibility,
                   choice('label', [''] + list(label_names), ''), search)


class SplitTable:
    """One evaluated split: columns over its N examples."""

    def __init__(self, name, examples, columns, setup, hidden_source=None):
        """`columns`: split_cache's {'softmax': (N, C), with a DkNN 'prediction',
        'credibility', 'confidence' (N,), and 'hidden' (N, D) or `hidden_source()`
        giving it when first needed}."""
        self.name = name
        self.examples = examples
        self.texts = [saliency_report.example_text(tokens, setup.vocab)
                      for tokens, _ in examples]
        self.gold = np.array([y for _, y in examples], dtype=np.int64)
        self.softmax = columns['softmax']
        self.softmax_prediction = self.softmax.argmax(axis=1)
        self.softmax_probability = self.softmax.max(axis=1)
        self.dknn_prediction = columns.get('prediction')
        self.credibility = columns.get('credibility')
        self.confidence = columns.get('confidence')
        self._hidden = columns.get('hidden')
        self._hidden_source = hidden_source
        self.label_names = setup.label_names

    @classmethod
    def evaluate(cls, name, examples, setup, dknn, batchsize=64, progress=None):
        """Run the model (and the DkNN, when there is one) over token-level examples."""
        if not examples:
            raise UserError('split {} has no examples'.format(name), 'split')
        return cls(name, examples, split_cache.evaluate(setup, dknn, examples, batchsize,
                                                        progress), setup)

    def accuracy(self):
        """{'softmax', 'dknn' (None without a DkNN)}: the fractions of rows predicted right."""
        return {'softmax': float(np.mean(self.softmax_prediction == self.gold)),
                'dknn': None if self.dknn_prediction is None else
                float(np.mean(self.dknn_prediction == self.gold))}

    @property
    def hidden(self):
        """(N, D) activations of the last hidden layer (Rajani et al.'s kNN layer)."""
        if self._hidden is None:
            self._hidden = self._hidden_source()
        return self._hidden

    def matching(self, query):
        """Row indices that pass the query's filters, in its order."""
        keep = np.ones(len(self.gold), dtype=bool)
        softmax_wrong = self.softmax_prediction != self.gold
        dknn_wrong = softmax_wrong if self.dknn_prediction is None else \
            self.dknn_prediction != self.gold
        keep &= {'': keep, 'softmax': softmax_wrong, 'dknn': dknn_wrong,
                 'either': softmax_wrong | dknn_wrong}[query.wrong]
        if self.credibility is not None and query.max_credibility < 1:
            keep &= self.credibility <= query.max_credibility
        if query.label:
            keep &= self.gold == self.label_names.index(query.label)
        if query.search:
            wanted = query.search.lower()
            keep &= np.fromiter((wanted in text for text in self.lowered_texts), bool,
                                len(self.gold))
        rows = np.flatnonzero(keep)
        key = self._sort_key(query.sort)[rows]
        # A stable sort keeps index order among ties, in both directions.
        return rows[np.argsort(-key if query.descending else key, kind='stable')]

    def _sort_key(self, column):
        """(N,) numbers whose ascending order is the column's (texts by their rank)."""
        if column == 'credibility' and self.credibility is not None:
            return self.credibility
        if column == 'text':
            return self.text_rank
        if column == 'dknn_prediction' and self.dknn_prediction is not None:
            return self.dknn_prediction
        return {'index': np.arange(len(self.gold)), 'gold': self.gold,
                'softmax_prediction': self.softmax_prediction,
                'dknn_prediction': self.softmax_prediction,
                'softmax_probability': self.softmax_probability,
                'credibility': self.softmax_probability}[column]

    @functools.cached_property
    def text_rank(self):
        """(N,) each text's rank in alphabetical order (ties share one), computed once."""
        return np.unique(self.texts, return_inverse=True)[1].astype(np.int64)

    @functools.cached_property
    def lowered_texts(self):
        """The texts in lower case, for the free-text search, computed once."""
        return [text.lower() for text in self.texts]

    def csv(self, query):
        """Every row that passes the query's filters, in its order, as CSV text
        (selection.csv_text: quoted, formulas neutralised)."""
        return selection.csv_text([self.row(int(i)) for i in self.matching(query)])

    def page(self, query):
        """One page of rows: {'split', 'n_total', 'n_matching', 'page', 'n_pages', 'rows'}."""
        rows = self.matching(query)
        n_pages = max(1, -(-len(rows) // query.per_page))
        start = (min(query.page, n_pages) - 1) * query.per_page
        return {'split': self.name, 'n_total': len(self.gold), 'n_matching': len(rows),
                'page': min(query.page, n_pages), 'n_pages': n_pages,
                'per_page': query.per_page,
                'rows': [self.row(int(i)) for i in rows[start:start + query.per_page]]}

    def row(self, i):
        names = self.label_names
        row = {'index': i, 'text': self.texts[i], 'gold': names[self.gold[i]],
               'softmax_prediction': names[self.softmax_prediction[i]],
               'softmax_probability': float(self.softmax_probability[i]),
               'dknn_prediction': None, 'credibility': None}
        if self.credibility is not None:
            row.update(dknn_prediction=names[self.dknn_prediction[i]],
                       credibility=float(self.credibility[i]))
        return row


# ---------------------------------------------------------------- the training set
MAX_LISTED = 25          # training examples per list
MAX_RETRIEVERS = 5       # examples shown under each training example


def training_view(setup, shown, dev, flipped=()):
    """The training-set view: {'split', 'k', 'most_retrieved', 'knn_rule', 'cleanlab',
    'n_flipped'}. `shown`: the SplitTable whose retrievals are counted (Rajani et al.'s
    `retrieved`: every example's k=16 nearest training examples in the last hidden
    layer, normalised, each training example's own row left out when `shown` is the
    training split); `dev`: the SplitTable of the dev split for the kNN rule, or
    None; `flipped`: training indices whose labels --label-noise flipped."""
    classifier = knn.classifier_from_setup(setup, KNN_LAYER)
    # Over the training split itself each example's own row is left out, as in
    # knn_influence.training_set_counts.
    itself = shown.name == 'train'
    neighbors = classifier.neighbors(shown.hidden, min(RETRIEVAL_K, classifier.n_train - itself),
                                     leave_self_out=itself)
    counts = knn_influence.retrieval_counts(neighbors.indices, classifier.n_train)
    retrievers = inverted(neighbors.indices)
    view = {'split': shown.name, 'k': int(neighbors.indices.shape[1]),
            'n_flipped': len(flipped), 'knn_rule': None,
            'most_retrieved': [training_item(setup, i, flipped, counts, shown, retrievers.get(i))
                               for i in knn_influence.most_retrieved(counts, MAX_LISTED)]}
    if dev is not None:
        nearest = classifier.neighbors(dev.hidden, 1)
        candidates = knn_influence.candidate_mislabeled(dev.softmax_prediction, nearest)
        disagree = np.flatnonzero(dev.softmax_prediction != nearest.labels[:, 0])
        by_candidate = inverted(nearest.indices[disagree], disagree)
        view['knn_rule'] = {'n_candidates': len(candidates), 'items': [
            training_item(setup, int(i), flipped, counts, dev, by_candidate.get(int(i)))
            for i in candidates[:MAX_LISTED]]}
    train_vectors = dknn_lib.train_activations(setup)[0][KNN_LAYER]
    flagged, ranking = label_issues.confident_learning(
        classifier.labels, label_issues.knn_vote_proba(classifier, train_vectors))
    flagged_set = set(flagged.tolist())
    view['cleanlab'] = {'n_candidates': len(flagged), 'items': [
        training_item(setup, int(i), flipped, counts, shown, retrievers.get(int(i)))
        for i in ranking if int(i) in flagged_set][:MAX_LISTED]}
    return view


def inverted(indices, owners=None):
    """{training index: [row numbers of the examples that retrieved it]} of an (M, k)
    neighbour matrix, those that have it nearest first (then by row); `owners` (M,)
    renames the rows."""
    owners = np.arange(len(indices)) if owners is None else owners
    found = {}
    for owner, row in zip(owners, indices):
        for rank, i in enumerate(row):
            if i >= 0:
                found.setdefault(int(i), []).append((rank, int(owner)))
    return {i: [owner for _, owner in sorted(pairs)] for i, pairs in found.items()}


def training_item(setup, index, flipped, counts, table, retrievers):
    """One training example of a list, with the first MAX_RETRIEVERS rows of `table` that
    retrieved it (those that have it nearest first)."""
    tokens, label = setup.splits.train[index]
    return {'index': int(index), 'label': setup.label_names[label],
            'text': saliency_report.example_text(tokens, setup.vocab),
            'times_retrieved': int(counts[index]), 'flipped': int(index) in set(flipped),
            'n_retrievers': len(retrievers or []),
            'retrieved_by': [dict(table.row(r), split=table.name)
                             for r in (retrievers or [])[:MAX_RETRIEVERS]]}
