"""What Table 2 of Feng et al. 2018 measures of one model, before or after entropy fine-tuning.

For a model: softmax accuracy on dev (the paper's "regular validation examples") and
test, mean length after input reduction (gradient importance, beam `beam`, first `limit`
dev examples), mean confidence and DkNN credibility of the reduced inputs, and (a new
result) DkNN test accuracy and the highlighted words per test sentence of each
interpretation method (first `limit` test examples). Each model's numbers are kept in
its folder's entropy_measures.json and reused while model, data and settings are
unchanged, so runs measured one by one (in parallel) assemble into one table quickly.
The table itself is written by the command line (the entropy analysis).
"""
import dataclasses
import os
from typing import Optional

import numpy as np

from deepknn.neighbors import dknn as dknn_lib
from deepknn.neighbors import dknn_evaluation
from deepknn.neighbors import dknn_settings
from deepknn.feng import input_reduction
import nets
import nlp_utils
from nlp_utils import UserError
from deepknn.storage import result_folder
from deepknn.interpret import saliency
from deepknn.interpret import saliency_scores

# The importances whose highlights Feng et al.'s Table 2 counts (its columns, in order).
TABLE2_METHODS = ('gradient', 'confidence', 'conformity')


MEASURES = 'entropy_measures.json'   # per model folder: {measure_key: measure() row}


@dataclasses.dataclass(frozen=True)
class MeasureSettings:
    """How one model is measured: input reduction's maximum `beam`, the first `limit`
    dev examples reduced and test sentences mapped (None: all), and the DkNN's
    dknn_settings.DkNNSettings (its batchsize is every model batch's)."""
    beam: int
    limit: Optional[int] = None
    dknn: dknn_settings.DkNNSettings = dknn_settings.DkNNSettings()

    def __post_init__(self):
        input_reduction.check_beam(self.beam)
        if self.limit is not None and (isinstance(self.limit, bool) or
                                       not isinstance(self.limit, int) or self.limit < 1):
            raise UserError('limit must be a positive integer or None, got {!r}'.format(
                self.limit), parameter='limit')


def measure_key(setup, settings):
    """What one model's numbers depend on: the model, vocabulary and training split
    (dknn.activation_key), the dev and test examples measured, and the settings."""
    return '{}|{}|{}|beam{}|k{}|{}|limit{}'.format(
        dknn_lib.activation_key(setup), nlp_utils.examples_digest(setup.splits.dev),
        nlp_utils.examples_digest(setup.splits.test), settings.beam, settings.dknn.k,
        settings.dknn.backend, settings.limit)


def cached_measure(setup, settings):
    """measure(setup, settings) of MeasureSettings `settings`, reused from
    <result_dir>/MEASURES while measure_key is unchanged, so the runs of one table can be
    measured in parallel processes first (one entry per key: a demo with other settings
    does not evict the table's)."""
    path = os.path.join(setup.result_dir, MEASURES)
    key = measure_key(setup, settings)
    row = read_measures(path).get(key)
    if row is not None:
        check_row(row, path)
    else:
        row = measure(setup, settings)
        with result_folder.lock(setup.result_dir, 'entropy measures'):
            nlp_utils.atomic_write_json(path, dict(read_measures(path), **{key: row}))
    return row


def read_measures(path):
    """{key: row} of a MEASURES file ({} when there is none)."""
    if not os.path.exists(path):
        return {}
    return nlp_utils.read_json(path, 'entropy measurements', dict)


def check_row(row, path):
    """UserError naming the MEASURES file when its row for a model lacks a number."""
    missing = [name for name in MEASURED if not isinstance(row, dict) or isinstance(
        row.get(name), bool) or not isinstance(row.get(name), (int, float))]
    if missing:
        raise UserError('entropy measurements {}: the entry of this model has no number for '
                        '{}; delete the file to measure the models again'.format(
                            path, ', '.join(missing)))


def measure(setup, settings):
    """Every number of one model's row (plain floats), measured with MeasureSettings
    `settings`."""
    batchsize = settings.dknn.batchsize
    dknn = dknn_lib.dknn_from_setup(setup, settings.dknn)
    reducer = input_reduction.make_reducer('gradient', setup, dknn, settings.beam, batchsize)
    reductions = reducer.reduce(setup.splits.dev[:settings.limit], progress='reducing dev')
    view = input_reduction.before_after(setup.model, setup.vocab, reductions, dknn, batchsize)
    stats = input_reduction.summarize(reductions, view)
    dknn_summary = dknn_evaluation.summary(dknn_evaluation.evaluate_split(
        setup, dknn, 'test', setup.splits.test, settings.dknn))
    maps = saliency.interpret_all(setup, TABLE2_METHODS, setup.splits.test[:settings.limit],
                                  dknn, batchsize)
    row = {'dev_accuracy': 100 * nets.accuracy(setup.model, setup.dev, batchsize),
           'test_accuracy': 100 * nets.accuracy(setup.model, setup.test, batchsize),
           'reduced_length': stats['mean_reduced_length'],
           'reduced_1_2_words': stats['fraction_1_2_words'],
           'reduced_confidence': stats['mean_confidence_after'],
           'reduced_credibility': stats['mean_credibility_after'],
           'dknn_test_accuracy': 100 * dknn_summary['dknn_accuracy']}
    for method in TABLE2_METHODS:
        # One-word inputs have no leave-one-out map (NaN) and are left out.
        counts = [saliency_scores.highlighted(m.scores).sum() for m in maps[method]
                  if not np.isnan(m.scores).any()]
        row['highlights_' + method] = float(np.mean(counts))
    return row


# The columns of a row, in order (a cached row comes back with its keys sorted).
MEASURED = ('dev_accuracy', 'test_accuracy', 'reduced_length', 'reduced_1_2_words',
            'reduced_confidence', 'reduced_credibility', 'dknn_test_accuracy') + tuple(
                'highlights_' + method for method in TABLE2_METHODS)


def table_row(run, before, after):
    row = {'run': run}
    for key in MEASURED:
        digits = 1 if 'accuracy' in key else 2 if 'length' in key or 'highlights' in key else 3
        row[key + '_before'] = round(before[key], digits)
        row[key + '_after'] = round(after[key], digits)
    return row
