"""Leave-one-out's rows and chunks: an example's model input and its n variants, cut
into bounded chunks that the model and each DkNN see once, and Eq. 1 over them.

The machinery under saliency.py's methods (which only choose the classifier f) and
feng/input_reduction.py's scorer; it knows no method by name.

Leave-one-out g(w_i) = f(y | x) - f(y | x_-i): word i is deleted and the shorter
sentence is encoded again ('<eos>' stays last). For SNLI only hypothesis words are
left out; the premise stays fixed.

Edge cases:
  - an empty input (no tokens to interpret) is a UserError;
  - a one-token input has no leave-one-out variant (nothing is left once its only
    word goes), so its leave-one-out importance is NaN;
  - inputs of any length, also over 500 tokens, are allowed: the rows (full input
    plus its variants) are cut into chunks of at most `batchsize` rows and about
    `batchsize * TOKENS_PER_ROW` tokens, so memory stays bounded however long the
    input. Results never depend on how the rows were chunked.

Efficiency: the variants of several sentences are concatenated into one model batch
and one batched DkNN query per chunk, and `run_leave_one_out` runs several
leave-one-out methods over the same chunks, so the model and the DkNN see each row
only once.
"""
import collections.abc
import dataclasses
import sys
from typing import Optional

import numpy as np
import tqdm

import nlp_utils
from nlp_utils import UserError

DEFAULT_BATCHSIZE = 256
TOKENS_PER_ROW = 64          # token budget of a chunk = batchsize * TOKENS_PER_ROW
LONG_INPUT_WORDS = 1000      # leave-one-out of a longer input gets a warning first


@dataclasses.dataclass
class Interpretation:
    """One method's word importances for one input."""
    tokens: list                # the interpreted tokens (the hypothesis for SNLI)
    scores: np.ndarray          # (n_tokens,) importance; positive supports `prediction`
    prediction: int             # the prediction of the method's classifier f
    score: float                # f(prediction | x) on the full input
    label: Optional[int]        # gold label, if known
    premise: Optional[list]     # SNLI premise tokens (kept fixed), else None


# ---------------------------------------------------------------- inputs and chunks
def split_example(tokens, pair):
    """Token-level input -> (premise tokens or None, tokens to interpret)."""
    if pair != isinstance(tokens, tuple):
        raise UserError('a {} model takes {} inputs, got {!r}'.format(
            'pair' if pair else 'single-sentence',
            '(premise, hypothesis)' if pair else 'token-list', tokens))
    premise, words = tokens if pair else (None, tokens)
    if len(words) == 0:
        raise UserError('cannot interpret an empty input (no {} tokens)'.format(
            'hypothesis' if pair else 'input'))
    return premise, list(words)


def full_input(premise, words, vocab):
    """The model input of an example: ids, or (premise ids, hypothesis ids)."""
    ids = nlp_utils.to_ids(words, vocab)
    return ids if premise is None else (nlp_utils.to_ids(premise, vocab), ids)


class LeaveOneOutInputs(collections.abc.Sequence):
    """The n + 1 model inputs of leave-one-out: row 0 is the full input, row i + 1 the
    input without word i (only row 0 for a one-word input). Rows are built on access,
    so a long input never holds its n variants (n^2 ids) at once. Deleting id i from
    the encoded sentence equals encoding the shortened one: to_ids maps token by token.
    """

    def __init__(self, premise, words, vocab):
        self.full = full_input(premise, words, vocab)
        self.n_words = len(words)

    def __len__(self):
        return 1 if self.n_words == 1 else self.n_words + 1

    def __getitem__(self, row):
        if not 0 <= row < len(self):
            raise IndexError(row)
        if row == 0:
            return self.full
        if isinstance(self.full, tuple):
            premise_ids, ids = self.full
            return premise_ids, np.delete(ids, row - 1)
        return np.delete(self.full, row - 1)


def _n_ids(model_input):
    return sum(len(part) for part in model_input) if isinstance(model_input, tuple) \
        else len(model_input)


def chunked_rows(rows_per_input, batchsize, progress=None):
    """Cut the rows of many inputs into chunks of at most `batchsize` rows and about
    batchsize * TOKENS_PER_ROW ids (a chunk always takes at least one row).

    rows_per_input: list over inputs of sequences of model inputs. Yields lists of
    (input index, row index, model input). `progress`: a description for a bar that
    counts rows (so one very long input moves it too), or None.
    """
    max_ids = batchsize * TOKENS_PER_ROW
    with tqdm.tqdm(total=sum(len(rows) for rows in rows_per_input), desc=progress,
                   unit='row', disable=progress is None) as bar:
        chunk, chunk_ids = [], 0
        for owner, rows in enumerate(rows_per_input):
            for position, row in enumerate(rows):
                if chunk and (len(chunk) >= batchsize or chunk_ids + _n_ids(row) > max_ids):
                    yield chunk
                    bar.update(len(chunk))
                    chunk, chunk_ids = [], 0
                chunk.append((owner, position, row))
                chunk_ids += _n_ids(row)
        if chunk:
            yield chunk
            bar.update(len(chunk))


def warn_about_long_inputs(split_inputs, limit=LONG_INPUT_WORDS):
    """Leave-one-out of an n-word input runs n + 1 inputs of about n words (~n^2 tokens):
    say so before a long one starts, rather than look stuck."""
    for number, (_, words) in enumerate(split_inputs, 1):
        if len(words) > limit:
            print('warning: input {} has {} words: leave-one-out runs {} variants of about '
                  '{} words each (~{:.1e} tokens); this takes a while'.format(
                      number, len(words), len(words) + 1, len(words),
                      float(len(words)) ** 2), file=sys.stderr)


class ChunkOutputs:
    """The model's (and DkNN's) view of one chunk of rows, computed on first use so
    that all methods run on a chunk share one forward pass and one DkNN query."""

    def __init__(self, model, rows):
        self.model = model
        self.rows = rows
        self._activations = None
        self._dknn_results = {}

    @property
    def activations(self):
        """Every DkNN layer, list of (M, D_l) arrays; the last one is the logits."""
        if self._activations is None:
            self._activations = self.model.layer_activations(self.rows, len(self.rows))
        return self._activations

    @property
    def logits(self):
        return self.activations[-1]

    def dknn_result(self, dknn):
        """DkNN.predict_from_activations on these rows (one batched query per layer)."""
        if id(dknn) not in self._dknn_results:
            self._dknn_results[id(dknn)] = dknn.predict_from_activations(self.activations)
        return self._dknn_results[id(dknn)]


# ---------------------------------------------------------------- Eq. 1 over chunks
def loo_interpretation(f_values, predictions, words, label, premise):
    """Eq. 1 from f on the rows of one input: f_values (n + 1, C) and predictions
    (n + 1,), row 0 the full input, row i + 1 the input without word i (a one-word
    input has only row 0 and gets NaN)."""
    y = int(predictions[0])
    full_score = float(f_values[0, y])
    scores = full_score - f_values[1:, y] if len(words) > 1 else np.full(1, np.nan)
    return Interpretation(words, np.asarray(scores, dtype=np.float64), y, full_score,
                          label, premise)


def run_leave_one_out(interpreters, examples, batchsize=DEFAULT_BATCHSIZE, progress=None):
    """Several leave-one-out interpreters (saliency.LeaveOneOut: .model, .vocab and
    class_scores(ChunkOutputs); all share model and vocabulary) over the same examples;
    every chunk of rows goes through the model and each DkNN once.
    Returns one list of Interpretation per interpreter."""
    model, vocab = interpreters[0].model, interpreters[0].vocab
    if any(i.model is not model or i.vocab is not vocab for i in interpreters):
        raise ValueError('leave-one-out interpreters run together must share model and vocab')
    split = [split_example(tokens, model.pair) for tokens, _ in examples]
    warn_about_long_inputs(split)
    rows = [LeaveOneOutInputs(premise, words, vocab) for premise, words in split]
    # f values and predictions of every row, per interpreter and input.
    f_values = [[None] * len(rows) for _ in interpreters]
    predictions = [[np.empty(len(r), dtype=np.int64) for r in rows] for _ in interpreters]
    for chunk in chunked_rows(rows, batchsize, progress):
        outputs = ChunkOutputs(model, [row for _, _, row in chunk])
        for m, interpreter in enumerate(interpreters):
            values, predicted = interpreter.class_scores(outputs)
            for (owner, position, _), value, prediction in zip(chunk, values, predicted):
                if f_values[m][owner] is None:
                    f_values[m][owner] = np.empty((len(rows[owner]), len(value)))
                f_values[m][owner][position] = value
                predictions[m][owner][position] = prediction
    return [[loo_interpretation(f_values[m][i], predictions[m][i], words, label, premise)
             for i, ((premise, words), (_, label)) in enumerate(zip(split, examples))]
            for m in range(len(interpreters))]
