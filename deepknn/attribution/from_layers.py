"""Training-data attribution from a run's DkNN layers alone, for any input: the methods
that need no saved checkpoint or parameter gradient, as the explorer shows them.

    explainer = LayerAttribution('grad-cos', train_layers, train_labels)
    indices, scores = explainer.top(query_layers, classes, m)     # (n, m) each

The DkNN already holds every layer of its training rows (the penultimate features and
the logits among them), which is all the last-layer methods read: grad-cos, representer
points and TracIn with the final model as its one checkpoint take their closed-form
last-layer gradients from them, the signed kNN vote its neighbours.
"""
import numpy as np

from deepknn.attribution.base import Representations, require
from deepknn.attribution.methods import METHODS

# name -> (METHODS name, options); the explorer offers these.
FROM_LAYERS = {'grad-cos': ('grad-cos', {}), 'representer': ('representer', {}),
               'tracin-final': ('tracin-last', {}),
               'dknn-vote-signed': ('dknn-vote', {'signed': True})}
# What the explorer shows by default: the best of these in the study (docs/attribution.md,
# "Results"): level with representer points on the SST-2 CNN's LDS (0.063 vs 0.064, three
# seeds) and ahead of it on TREC's identical subclass (0.698 vs 0.493).
DEFAULT = 'grad-cos'


class LayerAttribution:
    """One method of FROM_LAYERS fitted on the training rows' DkNN layers."""

    def __init__(self, name, train_layers, train_labels, k=75):
        require(name in FROM_LAYERS, 'attribution', 'must be one of {}, got {!r}'.format(
            ', '.join(FROM_LAYERS), name))
        method, options = FROM_LAYERS[name]
        if method == 'dknn-vote':
            options = dict(options, k=min(k, len(train_labels)))
        self.name, self.with_checkpoint = name, method == 'tracin-last'
        self.method = METHODS[method](**options).fit(self._arrays(train_layers, train_labels))

    def _arrays(self, layers, labels):
        """Representations of DkNN layers at `labels`; for TracIn the final model is also
        its one checkpoint."""
        arrays = Representations.from_layers(layers, np.asarray(labels))
        if self.with_checkpoint:
            arrays = Representations(arrays.labels, arrays.final, arrays.layers, [arrays.final])
        return arrays

    def top(self, layers, classes, m):
        """The m training rows that most support each input's class (`classes` (n,)), best
        first, ties by the smaller index: (indices (n, m) int64, scores (n, m) float64)."""
        return self.method.top(self._arrays(layers, classes), min(m, len(self.method.train)))
