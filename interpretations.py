"""Word-importance maps (saliency maps) for text classifiers, as in sections 2, 3.3, 5 and 6.2.

    python interpretations.py --model-setup results/stsa.binary_cnn/args.json \
        --methods conformity,confidence,gradient --split test --limit 20 \
        --output results/stsa.binary_cnn/interpretations.html --png maps.png --neighbors 3

Every method takes an input and gives one importance value per token; a positive
value means the token supports the prediction of the method's classifier f.

  conformity   leave-one-out (Eq. 1) with f = the DkNN conformity vector (fraction of
               the neighbours over all layers with label j, section 3.3). y is the DkNN
               prediction; since p-values fall as conformity rises, that is the argmax
               of the conformity (ties to the smaller class id).
  credibility  leave-one-out with f = the DkNN p-values, i.e. calibrated conformity
               (section 6.2); f(y | x) for the DkNN prediction y is the credibility.
  confidence   leave-one-out with f = the softmax probability (section 2.1).
  calibrated   leave-one-out with f = the temperature-scaled softmax (section 6.2);
               needs temperature.json from scaling.py.
  gradient     -(dL/de_t) . e_t with L the cross-entropy at the softmax prediction
               (section 2.2); the minus sign makes positive mean "supports".

Leave-one-out g(w_i) = f(y | x) - f(y | x_-i): word i is deleted and the shorter
sentence is encoded again ('<eos>' stays last). For SNLI only hypothesis words are
left out; the premise stays fixed.

Edge cases:
  - an empty input (no tokens to interpret) is a UserError;
  - a one-token input has no leave-one-out variant (nothing is left once its only
    word goes), so its leave-one-out importance is NaN; the gradient is defined;
  - inputs of any length, also over 500 tokens, are allowed: the rows (full input
    plus its variants) are cut into chunks of at most `batchsize` rows and about
    `batchsize * TOKENS_PER_ROW` tokens, so memory stays bounded however long the
    input. Results never depend on how the rows were chunked.

Efficiency: the variants of several sentences are concatenated into one model batch
and one batched DkNN query per chunk, and `interpret_all` runs every leave-one-out
method over the same chunks, so the model and the DkNN see each row only once.

Outputs: `render_html` (a self-contained page, every text HTML-escaped) and
`render_png` (the same maps with matplotlib). Unknown words are shown in angle
brackets, as in the paper. Maps are normalised (`normalize`) so that they are
comparable across methods: by default each importance is divided by the sentence's
total absolute importance, as section 5.1 states; `--normalization per-sign` and
`half-scale` (the authors' code) are the alternatives.
"""
import collections.abc
import dataclasses
import html
import os
from typing import Optional

import matplotlib
matplotlib.use('Agg')  # headless: the figure is only ever saved
import matplotlib.pyplot as plt  # noqa: E402 (must follow the backend choice)
import numpy as np  # noqa: E402
import tqdm  # noqa: E402
from matplotlib.font_manager import FontProperties  # noqa: E402
from scipy import stats  # noqa: E402

import knn_index  # noqa: E402
import model_setup  # noqa: E402
import nlp_utils  # noqa: E402
import plots  # noqa: E402
import result_folder  # noqa: E402
import dknn as dknn_lib  # noqa: E402
import scaling  # noqa: E402
from nlp_utils import UserError  # noqa: E402

METHODS = ('conformity', 'confidence', 'calibrated', 'gradient')
ALL_METHODS = METHODS + ('credibility',)
DKNN_METHODS = ('conformity', 'credibility')
DEFAULT_METHODS = ('conformity', 'confidence', 'gradient')   # the paper's Table 2
DEFAULT_BATCHSIZE = 256
TOKENS_PER_ROW = 64          # token budget of a chunk = batchsize * TOKENS_PER_ROW
HIGHLIGHT_THRESHOLD = 0.05   # section 5.1: "a light blue or light red highlight"


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
    counts finished inputs, or None.
    """
    max_ids = batchsize * TOKENS_PER_ROW
    finished = lambda chunk: sum(p == len(rows_per_input[o]) - 1 for o, p, _ in chunk)
    with tqdm.tqdm(total=len(rows_per_input), desc=progress, unit='example',
                   disable=progress is None) as bar:
        chunk, chunk_ids = [], 0
        for owner, rows in enumerate(rows_per_input):
            for position, row in enumerate(rows):
                if chunk and (len(chunk) >= batchsize or chunk_ids + _n_ids(row) > max_ids):
                    yield chunk
                    bar.update(finished(chunk))
                    chunk, chunk_ids = [], 0
                chunk.append((owner, position, row))
                chunk_ids += _n_ids(row)
        if chunk:
            yield chunk
            bar.update(finished(chunk))


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


# ---------------------------------------------------------------- interpreters
class Interpreter:
    """An input in, one importance value per token out (see the module docstring)."""
    name = None

    def __init__(self, model, vocab):
        self.model = model
        self.vocab = vocab

    def interpret(self, examples, batchsize=DEFAULT_BATCHSIZE, progress=None):
        """examples: list of (tokens, label) (label may be None) -> list of Interpretation.
        `progress`: a description for a progress bar over examples, or None."""
        raise NotImplementedError


class LeaveOneOut(Interpreter):
    """Eq. 1 with the classifier f given by `class_scores`; subclasses only choose f."""

    def class_scores(self, outputs):
        """ChunkOutputs of M rows -> (f values (M, C) floats, predictions of f (M,))."""
        raise NotImplementedError

    def interpret(self, examples, batchsize=DEFAULT_BATCHSIZE, progress=None):
        return run_leave_one_out([self], examples, batchsize, progress)[0]


class ConfidenceLOO(LeaveOneOut):
    """f = softmax(logits / T) with T = 1 (section 2.1)."""
    name = 'confidence'
    temperature = 1.0

    def class_scores(self, outputs):
        probabilities = scaling.softmax(outputs.logits, self.temperature)
        return probabilities, probabilities.argmax(axis=1)


class CalibratedConfidenceLOO(ConfidenceLOO):
    """f = temperature-scaled softmax (section 6.2); T leaves the prediction unchanged."""
    name = 'calibrated'

    def __init__(self, model, vocab, temperature):
        super().__init__(model, vocab)
        self.temperature = temperature


class ConformityLOO(LeaveOneOut):
    """f = the DkNN conformity vector, y = the DkNN prediction (section 3.3)."""
    name = 'conformity'
    dknn_key = 'conformity'

    def __init__(self, model, vocab, dknn):
        super().__init__(model, vocab)
        self.dknn = dknn

    def class_scores(self, outputs):
        result = outputs.dknn_result(self.dknn)
        return result[self.dknn_key], result['prediction']


class CredibilityLOO(ConformityLOO):
    """f = the DkNN p-values (calibrated conformity, section 6.2)."""
    name = 'credibility'
    dknn_key = 'p_values'


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
    """Several leave-one-out interpreters (sharing model and vocabulary) over the same
    examples; every chunk of rows goes through the model and each DkNN once.
    Returns one list of Interpretation per interpreter."""
    model, vocab = interpreters[0].model, interpreters[0].vocab
    if any(i.model is not model or i.vocab is not vocab for i in interpreters):
        raise ValueError('leave-one-out interpreters run together must share model and vocab')
    split = [split_example(tokens, model.pair) for tokens, _ in examples]
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


class Gradient(Interpreter):
    """-(dL/de_t) . e_t, L = cross-entropy at the softmax prediction (section 2.2);
    the '<eos>' position is dropped. prediction/score: softmax argmax and probability."""
    name = 'gradient'

    def interpret(self, examples, batchsize=DEFAULT_BATCHSIZE, progress=None):
        split = [split_example(tokens, self.model.pair) for tokens, _ in examples]
        rows = [[full_input(premise, words, self.vocab)] for premise, words in split]
        results = [None] * len(examples)
        for chunk in chunked_rows(rows, batchsize, progress):
            inputs = [row for _, _, row in chunk]
            probabilities = scaling.softmax(self.model.predict_logits(inputs, len(inputs)))
            predicted = probabilities.argmax(axis=1)
            gradients = self.model.input_gradients(inputs, predicted, len(inputs))
            for (owner, _, _), p, y, gradient in zip(chunk, probabilities, predicted, gradients):
                premise, words = split[owner]
                results[owner] = Interpretation(
                    words, -gradient[:-1].astype(np.float64), int(y), float(p[y]),
                    examples[owner][1], premise)
        return results


# ---------------------------------------------------------------- choosing methods
def parse_methods(methods):
    """'a,b' or a list -> tuple of distinct method names, in order; UserError if unknown."""
    names = methods.split(',') if isinstance(methods, str) else list(methods)
    names = [name.strip() for name in names if name.strip()]
    unknown = [name for name in names if name not in ALL_METHODS]
    if unknown or not names:
        raise UserError('unknown interpretation method(s) {}; choose from {}'.format(
            ', '.join(unknown) or '(none given)', ', '.join(ALL_METHODS)))
    return tuple(dict.fromkeys(names))


def make_interpreter(method, setup, dknn=None):
    """The Interpreter of `method` for a loaded setup (model_setup.Setup or anything
    with .model, .vocab, .result_dir). DkNN methods build a DkNN with the default
    settings (kdtree, k=75) when `dknn` is None."""
    parse_methods([method])
    if method == 'gradient':
        return Gradient(setup.model, setup.vocab)
    if method == 'confidence':
        return ConfidenceLOO(setup.model, setup.vocab)
    if method == 'calibrated':
        return CalibratedConfidenceLOO(setup.model, setup.vocab,
                                       scaling.load_temperature(setup.result_dir))
    if dknn is None:
        dknn = dknn_lib.dknn_from_setup(setup)
    return {'conformity': ConformityLOO, 'credibility': CredibilityLOO}[method](
        setup.model, setup.vocab, dknn)


def interpret_all(setup, methods, examples, dknn=None, batchsize=DEFAULT_BATCHSIZE,
                  progress=True):
    """{method: [Interpretation] over `examples`} for every method in `methods`.

    The DkNN is built (once) only when a DkNN method is asked for and `dknn` is None.
    All leave-one-out methods share one pass over the rows; progress bars count examples.
    """
    methods = parse_methods(methods)
    # Cheap interpreters first, so a missing temperature.json fails before a DkNN build.
    interpreters = {m: make_interpreter(m, setup) for m in methods if m not in DKNN_METHODS}
    if any(m in DKNN_METHODS for m in methods):
        if dknn is None:
            dknn = dknn_lib.dknn_from_setup(setup)
        interpreters.update({m: make_interpreter(m, setup, dknn)
                             for m in methods if m in DKNN_METHODS})
    loo = [m for m in methods if isinstance(interpreters[m], LeaveOneOut)]
    results = {}
    if loo:
        description = 'leave-one-out ({})'.format(', '.join(loo)) if progress else None
        maps = run_leave_one_out([interpreters[m] for m in loo], examples, batchsize, description)
        results.update(zip(loo, maps))
    if 'gradient' in methods:
        results['gradient'] = interpreters['gradient'].interpret(
            examples, batchsize, 'gradient' if progress else None)
    return {m: results[m] for m in methods}


def nearest_training_examples(model, dknn, train_examples, examples, n, vocab,
                              batchsize=DEFAULT_BATCHSIZE):
    """Interpretation by analogy (section 6.4): for each example, its `n` nearest
    training examples (tokens, label) in the final DkNN layer, nearest first.
    train_examples are the token-level examples the DkNN indexed, in order."""
    inputs = []
    for tokens, _ in examples:
        premise, words = split_example(tokens, model.pair)
        inputs.append(full_input(premise, words, vocab))
    final_layer = model.layer_activations(inputs, batchsize)[-1]
    _, neighbors = dknn.indexes[-1].search(final_layer, n)
    return [[train_examples[i] for i in row if i >= 0] for row in neighbors]


# ---------------------------------------------------------------- scores
# How a map's importances are scaled so that maps of different methods compare.
NORMALIZATIONS = {
    'total': "each word's importance / the sentence's total absolute importance "
             "(the paper's section 5.1 wording)",
    'per-sign': 'positive importances / their sum, negative ones / the sum of their '
                'magnitudes',
    'half-scale': "per-sign / 2, the authors' code (a colour scale centred at 0.5)",
}
DEFAULT_NORMALIZATION = 'total'


def normalize(scores, normalization=DEFAULT_NORMALIZATION):
    """Scale one map's importances (n,) -> (n,) float64, signs kept (NORMALIZATIONS):

    'total'       s_i / sum_j |s_j|, so the magnitudes sum to 1;
    'per-sign'    s_i / sum of the importances with the sign of s_i, so each sign's
                  magnitudes sum to 1;
    'half-scale'  per-sign / 2, in [-0.5, 0.5].
    NaN stays NaN and is left out of the sums; an all-zero map stays zero.
    """
    if normalization not in NORMALIZATIONS:
        raise ValueError('unknown normalization {!r}; choose from {}'.format(
            normalization, ', '.join(NORMALIZATIONS)))
    scores = np.asarray(scores, dtype=np.float64)
    normalized = scores.copy()
    if normalization == 'total':
        total = np.abs(scores[~np.isnan(scores)]).sum()
        return normalized / total if total > 0 else normalized
    positive, negative = scores > 0, scores < 0   # NaN is neither
    if positive.any():
        normalized[positive] /= scores[positive].sum()
    if negative.any():
        normalized[negative] /= -scores[negative].sum()
    return normalized / 2 if normalization == 'half-scale' else normalized


def highlighted(scores, threshold=HIGHLIGHT_THRESHOLD, normalization=DEFAULT_NORMALIZATION):
    """Boolean (n,): |normalised importance| > threshold (NaN is never highlighted)."""
    with np.errstate(invalid='ignore'):
        return np.abs(normalize(scores, normalization)) > threshold


def importance_ranks(scores, most_positive_first=False):
    """Rank of each token (n,) float: 1 = the most negative (section 5.1), or with
    most_positive_first=True 1 = the most positive, i.e. most important (Table 4).
    Tied tokens share the average of their ranks; NaN scores get rank NaN and the
    others are ranked among themselves."""
    scores = np.asarray(scores, dtype=np.float64)
    ranks = np.full(scores.shape, np.nan)
    finite = ~np.isnan(scores)
    ordered = -scores[finite] if most_positive_first else scores[finite]
    ranks[finite] = stats.rankdata(ordered, method='average')
    return ranks


def display_tokens(tokens, vocab):
    """Tokens with those outside the vocabulary shown as '<word>' (as in the paper)."""
    return [token if token in vocab else '<{}>'.format(token) for token in tokens]


# ---------------------------------------------------------------- what is rendered
@dataclasses.dataclass
class MethodMap:
    """One method's saliency map of one example, ready to draw."""
    method: str
    words: list                 # display tokens
    importance: np.ndarray      # (n_words,) normalised importance
    prediction: str             # label name
    score: float                # f(prediction | x)
    normalization: str = DEFAULT_NORMALIZATION   # how `importance` was normalised


@dataclasses.dataclass
class ExampleView:
    """One example with its maps under every method (one row per method)."""
    premise: Optional[list]     # display tokens of the SNLI premise, else None
    gold: Optional[str]         # gold label name, if known
    maps: list                  # [MethodMap]
    neighbors: list             # [(text, label name)] nearest training examples, maybe []

    @property
    def pair(self):
        return self.premise is not None


def example_text(tokens, vocab):
    """Token-level input -> one display string ('premise || hypothesis' for pairs)."""
    if isinstance(tokens, tuple):
        return ' || '.join(example_text(part, vocab) for part in tokens)
    return ' '.join(display_tokens(tokens, vocab))


def build_views(results, vocab, label_names, neighbors=None,
                normalization=DEFAULT_NORMALIZATION):
    """{method: [Interpretation]} (as from interpret_all) -> [ExampleView].
    neighbors: per example a list of training (tokens, label), or None;
    normalization: a key of NORMALIZATIONS."""
    methods = list(results)
    n_examples = len(results[methods[0]])
    views = []
    for i in range(n_examples):
        first = results[methods[0]][i]
        maps = [MethodMap(m, display_tokens(results[m][i].tokens, vocab),
                          normalize(results[m][i].scores, normalization),
                          label_names[results[m][i].prediction], results[m][i].score,
                          normalization) for m in methods]
        analogies = [(example_text(tokens, vocab), label_names[label])
                     for tokens, label in (neighbors[i] if neighbors else [])]
        views.append(ExampleView(
            None if first.premise is None else display_tokens(first.premise, vocab),
            None if first.label is None else label_names[first.label], maps, analogies))
    return views


# (supports the prediction, supports another class) RGB; SNLI as in the paper's Table 3.
PALETTES = {False: ((33, 102, 172), (178, 24, 43)),     # blue / red
            True: ((26, 152, 80), (222, 45, 140))}      # green / pink
PALETTE_NAMES = {False: ('blue', 'red'), True: ('green', 'pink')}


def word_colour(importance, pair):
    """Normalised importance -> (r, g, b, alpha) with r, g, b in 0..255 and
    alpha = |importance| in [0, 1] (0 for NaN or zero)."""
    supports, opposes = PALETTES[pair]
    if not np.isfinite(importance) or importance == 0:
        return supports + (0.0,)
    return (supports if importance > 0 else opposes) + (min(1.0, abs(float(importance))),)


# ---------------------------------------------------------------- HTML
HTML_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
section { margin-bottom: 1.6em; border-top: 1px solid #ccc; padding-top: .6em; }
table { border-collapse: collapse; }
td { padding: .25em .6em; vertical-align: top; }
td.method { font-weight: bold; white-space: nowrap; }
td.prediction { white-space: nowrap; color: #555; }
.w { padding: 1px 2px; margin: 0 1px; border-radius: 3px; line-height: 1.9; }
.premise { color: #555; margin: .2em 0 .4em 0; }
.neighbors { color: #555; font-size: 90%; margin: .4em 0 0 1em; }
.legend span { display: inline-block; padding: 2px 8px; margin-right: 1em; }
"""


def _html_word(word, importance, pair):
    r, g, b, alpha = word_colour(importance, pair)
    text_colour = '#fff' if alpha > 0.6 else '#000'
    tip = 'undefined' if np.isnan(importance) else '{:+.3f}'.format(importance)
    return ('<span class="w" style="background: rgba({},{},{},{:.3f}); color: {}" '
            'title="normalised importance {}">{}</span>').format(
                r, g, b, alpha, text_colour, html.escape(tip), html.escape(word))


def _html_legend(pairs):
    items = []
    for pair in sorted(pairs):
        for (r, g, b), name, meaning in zip(PALETTES[pair], PALETTE_NAMES[pair],
                                           ('supports the prediction',
                                            'supports another class')):
            items.append('<span style="background: rgb({},{},{}); color: #fff">{}: {}{}</span>'
                         .format(r, g, b, html.escape(name), html.escape(meaning),
                                 html.escape(' (SNLI)' if pair else '')))
    return ('<p class="legend">Colour legend: {} — opacity is proportional to the normalised '
            'importance.</p>').format(' '.join(items))


def _html_example(number, view):
    parts = ['<section>', '<div>Example {} — gold: <b>{}</b></div>'.format(
        number, html.escape(view.gold if view.gold is not None else 'unknown'))]
    if view.pair:
        parts.append('<div class="premise">Premise: {}</div>'.format(
            html.escape(' '.join(view.premise))))
    parts.append('<table>')
    for method_map in view.maps:
        words = ' '.join(_html_word(w, v, view.pair)
                         for w, v in zip(method_map.words, method_map.importance))
        parts.append('<tr><td class="method">{}</td><td class="prediction">{} ({:.3f})</td>'
                     '<td>{}{}</td></tr>'.format(
                         html.escape(method_map.method), html.escape(method_map.prediction),
                         method_map.score, html.escape('Hypothesis: ') if view.pair else '',
                         words))
    parts.append('</table>')
    if view.neighbors:
        items = ''.join('<li>{} <i>({})</i></li>'.format(html.escape(text), html.escape(label))
                        for text, label in view.neighbors)
        parts.append('<div class="neighbors">Nearest training examples (final DkNN layer):'
                     '<ol>{}</ol></div>'.format(items))
    parts.append('</section>')
    return '\n'.join(parts)


def normalizations_used(views):
    return sorted({m.normalization for view in views for m in view.maps})


def normalization_note(views):
    """One line naming (and explaining) how the maps of `views` were normalised."""
    return 'Normalisation: ' + '; '.join('{} ({})'.format(n, NORMALIZATIONS[n])
                                         for n in normalizations_used(views))


def html_page(views, title):
    """The self-contained HTML text: one table row per (example, method)."""
    body = '\n'.join(_html_example(i + 1, view) for i, view in enumerate(views))
    return ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title>'
            '<style>{style}</style></head>\n<body><h1>{title}</h1>\n{legend}\n'
            '<p>{normalization}.</p>\n'
            '<p>Prediction columns: the label predicted by each method\'s classifier, with '
            'its score on the full input.</p>\n{body}\n</body></html>\n').format(
                title=html.escape(title), style=HTML_STYLE,
                legend=_html_legend({view.pair for view in views} or {False}),
                normalization=html.escape(normalization_note(views)), body=body)


def render_html(views, path, title='Interpretations'):
    """Write `html_page(views, title)` to `path` atomically."""
    nlp_utils.atomic_write_text(path, html_page(views, title))


# ---------------------------------------------------------------- PNG
PNG_FONT_SIZE = 10
PNG_WIDTH = 12.0          # inches
PNG_LABEL_WIDTH = 2.6     # inches kept for the method / prediction column
PNG_LINE_HEIGHT = 0.3     # inches


def _png_items(views, measure):
    """Lay the words out in inches from the top-left corner.

    measure: str -> width in inches. Returns ([(x, y, text, facecolour or None,
    bold)], total height)."""
    items = [(0.0, PNG_LINE_HEIGHT, 'Normalisation: ' + ', '.join(normalizations_used(views)),
              None, False)]
    y = 2 * PNG_LINE_HEIGHT
    space = measure(' ')

    def words_line(words, colours, y):
        x = PNG_LABEL_WIDTH
        for word, colour in zip(words, colours):
            width = measure(word)
            if x > PNG_LABEL_WIDTH and x + width > PNG_WIDTH:
                x, y = PNG_LABEL_WIDTH, y + PNG_LINE_HEIGHT
            items.append((x, y, word, colour, False))
            x += width + space
        return y + PNG_LINE_HEIGHT

    for number, view in enumerate(views, 1):
        gold = view.gold if view.gold is not None else 'unknown'
        items.append((0.0, y, 'Example {} (gold: {})'.format(number, gold), None, True))
        y += PNG_LINE_HEIGHT
        if view.pair:
            items.append((0.0, y, 'premise', None, False))
            y = words_line(view.premise, [None] * len(view.premise), y)
        for method_map in view.maps:
            items.append((0.0, y, '{}: {} ({:.2f})'.format(
                method_map.method, method_map.prediction, method_map.score), None, False))
            colours = [word_colour(v, view.pair) for v in method_map.importance]
            colours = [(r / 255, g / 255, b / 255, a) for r, g, b, a in colours]
            y = words_line(method_map.words, colours, y)
        y += PNG_LINE_HEIGHT / 2
    return items, y


def render_png(views, path):
    """The maps as a PNG: per example a header, the premise (SNLI) and one line (or more,
    wrapped) per method with each word in a box coloured as in the HTML."""
    figure = plt.figure(figsize=(PNG_WIDTH, 1))
    renderer = figure.canvas.get_renderer()
    font = FontProperties(size=PNG_FONT_SIZE)

    def measure(text):
        width, _, _ = renderer.get_text_width_height_descent(text, font, ismath=False)
        return width / figure.dpi

    items, height = _png_items(views, measure)
    figure.set_size_inches(PNG_WIDTH, height)
    for x, y, text, colour, bold in items:
        box = None if colour is None else dict(boxstyle='square,pad=0.1', facecolor=colour,
                                               edgecolor='none')
        text_colour = 'white' if colour is not None and colour[3] > 0.6 else 'black'
        # Figure fractions, not inches, so the layout survives savefig's change of dpi;
        # parse_math=False: a token such as '$5' must not start mathtext.
        figure.text(x / PNG_WIDTH, 1 - y / height, text, fontsize=PNG_FONT_SIZE,
                    fontweight='bold' if bold else 'normal', bbox=box, color=text_colour,
                    parse_math=False, va='baseline')
    plots.save_figure(figure, path)


# ---------------------------------------------------------------- CLI
def parse_args(argv=None):
    parser = nlp_utils.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--model-setup', required=True, help='results/<dataset>_<model>/args.json')
    parser.add_argument('--methods', default=','.join(DEFAULT_METHODS),
                        help='comma-separated, from {}'.format(', '.join(ALL_METHODS)))
    parser.add_argument('--split', choices=('train', 'dev', 'calib', 'test'), default='test')
    parser.add_argument('--limit', type=int, default=20, help='interpret the first N examples')
    parser.add_argument('--output', default=None,
                        help='HTML file (default <result dir>/interpretations_<split>.html)')
    parser.add_argument('--png', default=None, help='also write the maps as this PNG')
    parser.add_argument('--normalization', choices=sorted(NORMALIZATIONS),
                        default=DEFAULT_NORMALIZATION,
                        help="how maps are scaled: 'total' (the paper's wording, default), "
                             "'per-sign' or 'half-scale' (the authors' code)")
    parser.add_argument('--neighbors', type=int, default=0,
                        help='show the N nearest training examples (final DkNN layer)')
    parser.add_argument('--k', type=int, default=75, help='DkNN neighbours per layer')
    parser.add_argument('--backend', choices=knn_index.BACKENDS, default='faiss',
                        help='DkNN nearest-neighbour backend')
    parser.add_argument('--batchsize', type=int, default=DEFAULT_BATCHSIZE,
                        help='rows (leave-one-out variants) per model batch and DkNN query')
    parser.add_argument('--gpu', type=int, default=-1, help='GPU id, negative for the CPU')
    parser.add_argument('--data-dir', default=None, help='data folder (default: as trained)')
    return parser.parse_args(argv)


def check_args(args):
    for name, minimum in (('limit', 1), ('neighbors', 0), ('k', 1), ('batchsize', 1)):
        if getattr(args, name) < minimum:
            raise UserError('--{} must be at least {}, got {}'.format(
                name, minimum, getattr(args, name)))


def main(argv=None):
    args = parse_args(argv)
    check_args(args)
    nlp_utils.check_output_path(args.output, '--output')
    nlp_utils.check_output_path(args.png, '--png')
    methods = parse_methods(args.methods)
    setup = model_setup.load_setup(args.model_setup, args.gpu, args.data_dir)
    if 'calibrated' in methods:
        scaling.load_temperature(setup.result_dir)   # fail before the slow DkNN build
    examples = getattr(setup.splits, args.split)[:args.limit]
    if not examples:
        raise UserError('the {} split is empty'.format(args.split))
    dknn = None
    if args.neighbors or any(m in DKNN_METHODS for m in methods):
        with result_folder.lock(setup.result_dir, 'interpretations.py'):   # DkNN caches
            dknn = dknn_lib.dknn_from_setup(setup, args.backend, args.k, batchsize=args.batchsize)
    results = interpret_all(setup, methods, examples, dknn, args.batchsize)
    neighbors = None
    if args.neighbors:
        neighbors = nearest_training_examples(setup.model, dknn, setup.splits.train, examples,
                                              args.neighbors, setup.vocab, args.batchsize)
    views = build_views(results, setup.vocab, setup.label_names, neighbors,
                        args.normalization)
    output = args.output or os.path.join(setup.result_dir,
                                         'interpretations_{}.html'.format(args.split))
    title = '{} {}: {} examples'.format(setup.config['dataset'], setup.config['model'],
                                        args.split)
    render_html(views, output, title)
    print('wrote {}'.format(output))
    if args.png:
        render_png(views, args.png)
        print('wrote {}'.format(args.png))


if __name__ == '__main__':
    nlp_utils.run_cli(main)
