"""Input reduction with beam search (Feng et al. 2018, section 2): the library.

Repeatedly remove the least important word while the prediction stays the same.
Importance comes from saliency.py's interpreters:

  gradient     the gradient approximation of leave-one-out (the paper's choice);
               the stopping rule keeps the softmax prediction
  confidence   exact leave-one-out with softmax confidence; keeps the softmax prediction
  conformity   leave-one-out with DkNN conformity; keeps the DkNN prediction

Beam search (section 2.2, footnote 1): at current length L the beam size is
b = max(1, min(k, L - 3)). Every beam item proposes the inputs without each of its b
least important words; the candidates that keep the original prediction (of the
classifier the importance belongs to) form the next beam, the b with the highest
f(y | candidate) first. When no candidate keeps the prediction, or one word is left,
the current beam is the result: every item has the same, minimum length (the paper
collects all of them as negative examples for entropy regularisation).

For SNLI pair models only the hypothesis is reduced; the premise is never touched.
Every step sends the beam items of all sentences through the interpreter in one call,
and all their candidates through the model (and DkNN) in one batched pass.
"""
import dataclasses
from typing import Optional

import numpy as np
import tqdm

from deepknn.interpret import leave_one_out
from deepknn.interpret import saliency
from deepknn.evaluation import calibration
from nlp_utils import UserError

# Every interpretation method can rank the words to remove: the registry's names.
IMPORTANCES = tuple(saliency.REGISTRY)
DEFAULT_BEAM = 5


@dataclasses.dataclass
class Reduction:
    """One input before and after reduction (words of the hypothesis for pairs)."""
    original: list              # tokens before reduction
    reduced: list               # the reduced tokens with the highest f(y | x), never empty
    kept: tuple                 # positions in `original` of the `reduced` tokens
    all_reduced: list           # every minimum-length reduced version found (lists of tokens)
    premise: Optional[list]     # SNLI premise tokens (unchanged), else None
    label: Optional[int]        # gold label, if known
    prediction: int             # kept all the way: softmax, or DkNN for 'conformity'
    score_before: float         # f(prediction | original), f the stopping classifier
    score_after: float          # f(prediction | reduced)
    steps: int                  # words removed


@dataclasses.dataclass
class BeamState:
    """Where the beam search over a list of examples stands; plain data, so it can be
    saved between steps (to_json) and a long reduction resumed (from_json)."""
    targets: list        # per example: the prediction to keep
    first_scores: list   # per example: f(target | original)
    beams: list          # per example: the beam, tuples of kept word positions
    beam_scores: list    # per example: f(target | item) of each beam item
    active: list         # indices of the examples still being reduced

    def to_json(self):
        return {'targets': self.targets, 'first_scores': self.first_scores,
                'beams': [[list(kept) for kept in beam] for beam in self.beams],
                'beam_scores': self.beam_scores, 'active': self.active}

    @classmethod
    def from_json(cls, obj, lengths):
        """The state saved by to_json, for examples of `lengths` words each; ValueError
        naming the first field that does not fit them (a damaged or foreign file)."""
        if not isinstance(obj, dict) or set(obj) != set(cls.__dataclass_fields__):
            raise ValueError('expected the fields {}'.format(', '.join(cls.__dataclass_fields__)))
        n = len(lengths)
        for name in ('targets', 'first_scores', 'beams', 'beam_scores'):
            if not isinstance(obj[name], list) or len(obj[name]) != n:
                raise ValueError('{} is not a list of {} entries'.format(name, n))
        _check_numbers(obj['targets'], int, 'targets')
        _check_numbers(obj['first_scores'], float, 'first_scores')
        for i, (beam, scores) in enumerate(zip(obj['beams'], obj['beam_scores'])):
            if not isinstance(beam, list) or not beam or not isinstance(scores, list) \
                    or len(scores) != len(beam):
                raise ValueError('beams / beam_scores of example {} do not match'.format(i))
            _check_numbers(scores, float, 'beam_scores of example {}'.format(i))
            for kept in beam:
                _check_numbers(kept, int, 'beams of example {}'.format(i))
                if not kept or not all(0 <= p < lengths[i] for p in kept):
                    raise ValueError('beams of example {} hold positions outside its {} '
                                     'words'.format(i, lengths[i]))
        _check_numbers(obj['active'], int, 'active')
        if not all(0 <= i < n for i in obj['active']):
            raise ValueError('active names an example outside 0..{}'.format(n - 1))
        return cls(obj['targets'], obj['first_scores'],
                   [[tuple(kept) for kept in beam] for beam in obj['beams']],
                   obj['beam_scores'], obj['active'])


def _check_numbers(values, kind, name):
    """ValueError unless `values` is a list of finite numbers (integers for kind int)."""
    allowed = (int,) if kind is int else (int, float)
    if not isinstance(values, list) or not all(
            isinstance(v, allowed) and not isinstance(v, bool) and np.isfinite(v)
            for v in values):
        raise ValueError('{} is not a list of {}'.format(
            name, 'integers' if kind is int else 'numbers'))


def check_beam(max_beam):
    """UserError unless the maximum beam size k is at least 1."""
    if max_beam < 1:
        raise UserError('the beam size must be at least 1, got {}; pass `beam` 1 or more'
                        .format(max_beam))


def beam_size(max_beam, length):
    """Footnote 1 of the paper: max(1, min(k, L - 3)) at current length L."""
    check_beam(max_beam)
    return max(1, min(max_beam, length - 3))


def make_reducer(importance, setup, dknn=None, max_beam=DEFAULT_BEAM,
                 batchsize=leave_one_out.DEFAULT_BATCHSIZE, temperature=None):
    """An InputReducer for a loaded setup; an importance that needs_dknn (conformity,
    credibility) needs a calibrated DkNN, which then decides what is kept; `temperature`:
    T for one that needs_temperature (None: read from temperature.json)."""
    if importance not in IMPORTANCES:
        raise UserError('unknown importance {!r}; choose from {}'.format(
            importance, ', '.join(IMPORTANCES)))
    check_beam(max_beam)
    if saliency.REGISTRY[importance].needs_dknn:   # the DkNN decides what is kept
        if dknn is None:
            raise ValueError('{} importance needs a DkNN'.format(importance))
        scorer = saliency.make_interpreter(importance, setup, dknn, temperature)
        return InputReducer(scorer, scorer, max_beam, batchsize)
    scorer = saliency.make_interpreter('confidence', setup)
    explainer = scorer if importance == 'confidence' else saliency.make_interpreter(
        importance, setup, temperature=temperature)
    return InputReducer(explainer, scorer, max_beam, batchsize)


class InputReducer:
    """explainer: a saliency.Interpreter giving word importances;
    scorer: a LeaveOneOut interpreter whose class_scores decide the prediction to keep."""

    def __init__(self, explainer, scorer, max_beam=DEFAULT_BEAM,
                 batchsize=leave_one_out.DEFAULT_BATCHSIZE):
        check_beam(max_beam)
        self.explainer = explainer
        self.scorer = scorer
        self.model, self.vocab = scorer.model, scorer.vocab
        self.max_beam = max_beam
        self.batchsize = batchsize

    def scores(self, inputs):
        """Model inputs (ids, or pairs of ids) -> (f values (M, C), predictions (M,)) of
        the scorer, in chunks of at most `batchsize` rows."""
        values = np.empty((len(inputs), 0))
        predictions = np.empty(len(inputs), dtype=np.int64)
        rows = [[x] for x in inputs]
        for chunk in leave_one_out.chunked_rows(rows, self.batchsize):
            f, predicted = self.scorer.class_scores(
                leave_one_out.ChunkOutputs(self.model, [row for _, _, row in chunk]))
            if values.shape[1] == 0:
                values = np.empty((len(inputs), f.shape[1]))
            owners = [owner for owner, _, _ in chunk]
            values[owners], predictions[owners] = f, predicted
        return values, predictions

    def reduce(self, examples, progress=None, resume=None, on_step=None):
        """examples: [(tokens, label)] as in saliency.py (pairs: (premise, hypothesis)).
        Returns one Reduction per example. `progress`: a progress-bar description or None.
        `on_step(state)` is called with the BeamState after every step; passing such a
        state of the same examples as `resume` continues the search where it stood, with
        the same result as an uninterrupted one (every step depends on the state alone)."""
        split = [leave_one_out.split_example(tokens, self.model.pair) for tokens, _ in examples]
        state = resume if resume is not None else self._start(split)
        if len(state.targets) != len(examples):
            raise ValueError('the resumed beam search holds {} examples, not {}'.format(
                len(state.targets), len(examples)))
        with tqdm.tqdm(total=len(examples), desc=progress, unit='example',
                       disable=progress is None) as bar:
            bar.update(len(examples) - len(state.active))
            while state.active:
                n_active = len(state.active)
                self._step(split, state)
                bar.update(n_active - len(state.active))
                if on_step is not None:
                    on_step(state)
        return [Reduction(words, [words[p] for p in state.beams[i][0]], state.beams[i][0],
                          [[words[p] for p in kept] for kept in state.beams[i]], premise,
                          examples[i][1], state.targets[i], state.first_scores[i],
                          state.beam_scores[i][0], len(words) - len(state.beams[i][0]))
                for i, (premise, words) in enumerate(split)]

    def _start(self, split):
        """The BeamState before the first removal: every input whole, its prediction the
        target to keep."""
        f, predictions = self.scores([leave_one_out.full_input(p, w, self.vocab) for p, w in split])
        targets = [int(y) for y in predictions]
        first_scores = [float(f[i, y]) for i, y in enumerate(targets)]
        return BeamState(targets, first_scores,
                         [[tuple(range(len(words)))] for _, words in split],
                         [[score] for score in first_scores],
                         [i for i, (_, words) in enumerate(split) if len(words) > 1])

    def _step(self, split, state):
        """Remove one more word from every active example's beam (in place)."""
        proposals = self._candidates(split, state.beams, state.active)
        flat = [(i, kept) for i in state.active for kept in proposals[i]]
        f, predicted = self.scores([self._encode(split[i], kept) for i, kept in flat])
        rows_of = {i: [] for i in state.active}
        for row, (i, _) in enumerate(flat):
            if predicted[row] == state.targets[i]:
                rows_of[i].append(row)
        still_active = []
        for i, rows in rows_of.items():
            if not rows:
                continue   # no removal keeps the prediction: the beam is final
            # The next beam: the b best by f(y | candidate); ties keep proposal order.
            target = state.targets[i]
            width = beam_size(self.max_beam, len(state.beams[i][0]))
            rows = sorted(rows, key=lambda r: -f[r, target])[:width]
            state.beams[i] = [flat[r][1] for r in rows]
            state.beam_scores[i] = [float(f[r, target]) for r in rows]
            if len(state.beams[i][0]) > 1:
                still_active.append(i)
        state.active = still_active

    def _encode(self, example, kept):
        """Model input (ids) of an example keeping the word positions `kept`."""
        premise, words = example
        return leave_one_out.full_input(premise, [words[p] for p in kept], self.vocab)

    @staticmethod
    def _input(example, kept):
        """(premise, words) and kept positions -> (premise, kept words) or kept words."""
        premise, words = example
        hypothesis = [words[p] for p in kept]
        return hypothesis if premise is None else (premise, hypothesis)

    def _candidates(self, split, beams, active):
        """{example: [kept positions]}: each beam item without each of its b least
        important words (lowest importance first, ties to the earlier word), deduplicated."""
        items = [(i, kept) for i in active for kept in beams[i]]
        importances = self.explainer.interpret(
            [(self._input(split[i], kept), None) for i, kept in items], self.batchsize)
        candidates = {i: {} for i in active}
        for (i, kept), result in zip(items, importances):
            order = np.argsort(result.scores, kind='stable')
            for position in order[:beam_size(self.max_beam, len(kept))]:
                reduced = kept[:position] + kept[position + 1:]
                candidates[i].setdefault(reduced, None)
        return {i: list(found) for i, found in candidates.items()}


# ---------------------------------------------------------------- before and after
def before_after(model, vocab, reductions, dknn=None, batchsize=leave_one_out.DEFAULT_BATCHSIZE):
    """Softmax (and DkNN) view of every original and reduced input. Returns a dict of
    arrays over the N reductions: confidence_before/after (softmax probability of
    the softmax prediction), softmax_prediction_before/after; with a DkNN also
    credibility_before/after and dknn_prediction_before/after (all (N,))."""
    inputs = ([leave_one_out.full_input(r.premise, r.original, vocab) for r in reductions]
              + [leave_one_out.full_input(r.premise, r.reduced, vocab) for r in reductions])
    n = len(reductions)
    probabilities = np.empty((2 * n, 0))
    credibility = np.empty(2 * n)
    dknn_prediction = np.empty(2 * n, dtype=np.int64)
    for chunk in leave_one_out.chunked_rows([[x] for x in inputs], batchsize):
        owners = [owner for owner, _, _ in chunk]
        outputs = leave_one_out.ChunkOutputs(model, [row for _, _, row in chunk])
        p = calibration.softmax(outputs.logits)
        if probabilities.shape[1] == 0:
            probabilities = np.empty((2 * n, p.shape[1]))
        probabilities[owners] = p
        if dknn is not None:
            result = outputs.dknn_result(dknn)
            credibility[owners], dknn_prediction[owners] = (result['credibility'],
                                                            result['prediction'])
    view = {}
    for when, part in (('before', slice(0, n)), ('after', slice(n, 2 * n))):
        view['softmax_prediction_' + when] = probabilities[part].argmax(axis=1)
        view['confidence_' + when] = probabilities[part].max(axis=1)
        if dknn is not None:
            view['credibility_' + when] = credibility[part]
            view['dknn_prediction_' + when] = dknn_prediction[part]
    return view


def summarize(reductions, view):
    """The paper's statistics: mean original / reduced length, fraction reduced to 1-2
    words, mean confidence (and credibility) before and after. Plain floats."""
    original = np.array([len(r.original) for r in reductions], dtype=np.float64)
    reduced = np.array([len(r.reduced) for r in reductions], dtype=np.float64)
    stats = {'n_examples': len(reductions), 'mean_original_length': float(original.mean()),
             'mean_reduced_length': float(reduced.mean()),
             'fraction_1_2_words': float(np.mean(reduced <= 2))}
    for key in ('confidence', 'credibility'):
        if key + '_before' in view:
            for when in ('before', 'after'):
                stats['mean_{}_{}'.format(key, when)] = float(np.mean(view[key + '_' + when]))
    return stats
