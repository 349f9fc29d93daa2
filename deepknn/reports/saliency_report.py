"""Rendering saliency maps: a self-contained HTML page (every text escaped), a PNG, and
the raw importances as CSV, from the plain Interpretations of saliency.py.

Unknown words are shown in angle brackets, as in the paper; PTB tokens (-lrb-, ...)
as the characters they stand for.
"""
import csv
import dataclasses
import html
from typing import Optional

import matplotlib
matplotlib.use('Agg')  # headless: the figure is only ever saved
import matplotlib.pyplot as plt  # noqa: E402 (must follow the backend choice)
import numpy as np  # noqa: E402
from matplotlib.font_manager import FontProperties  # noqa: E402

from deepknn import calibration  # noqa: E402
from deepknn import saliency  # noqa: E402
from deepknn.reports import plots  # noqa: E402
from nlp_utils import ptb_text  # noqa: E402
from deepknn.saliency_scores import DEFAULT_NORMALIZATION, NORMALIZATIONS, normalize  # noqa: E402


def isolated(text):
    """`text` escaped and direction-isolated (<bdi>): a right-to-left word or a bidi
    control character in the data cannot reorder the page around it."""
    return '<bdi>{}</bdi>'.format(html.escape(text))


def display_tokens(tokens, vocab):
    """Tokens as shown: PTB escapes as their characters, and words outside the
    vocabulary in angle brackets (as in the paper)."""
    return ['<{}>'.format(ptb_text(token)) if token not in vocab else ptb_text(token)
            for token in tokens]


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
    correct: Optional[bool] = None               # prediction == gold, when gold is known


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
    views = []
    for i, first in enumerate(results[methods[0]]):
        maps = []
        for method in methods:
            found = results[method][i]
            maps.append(MethodMap(
                method, display_tokens(found.tokens, vocab),
                normalize(found.scores, normalization), label_names[found.prediction],
                found.score, normalization,
                None if found.label is None else found.prediction == found.label))
        analogies = [(example_text(tokens, vocab), label_names[label])
                     for tokens, label in (neighbors[i] if neighbors else [])]
        views.append(ExampleView(
            None if first.premise is None else display_tokens(first.premise, vocab),
            None if first.label is None else label_names[first.label], maps, analogies))
    return views


def importance_rows(results, vocab, label_names, normalization=DEFAULT_NORMALIZATION):
    """One row per (example, method, token) with the raw and the normalised importance,
    for users' own statistics: [dict]."""
    rows = []
    for method, interpretations in results.items():
        for number, found in enumerate(interpretations, 1):
            normalized = normalize(found.scores, normalization)
            for position, (token, raw, norm) in enumerate(zip(found.tokens, found.scores,
                                                              normalized)):
                rows.append({'example': number, 'method': method, 'position': position,
                             'token': token, 'in_vocabulary': token in vocab,
                             'raw_importance': float(raw), 'normalized_importance': float(norm),
                             'normalization': normalization,
                             'prediction': label_names[found.prediction],
                             'gold': None if found.label is None else label_names[found.label]})
    return rows


def importances_write(rows, path):
    """(path, write, mode) of the rows of importance_rows as CSV, for
    nlp_utils.atomic_write_files."""
    columns = ['example', 'method', 'position', 'token', 'in_vocabulary', 'raw_importance',
               'normalized_importance', 'normalization', 'prediction', 'gold']

    def write(f):
        writer = csv.DictWriter(f, columns, lineterminator='\n')
        writer.writeheader()
        writer.writerows(rows)
    return path, write, 'w'


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
.w { padding: 1px 2px; margin: 0 1px; border-radius: 3px; line-height: 1.9;
     unicode-bidi: isolate; overflow-wrap: anywhere; }
.wrong { color: #b2182b; font-weight: bold; }
.settings { color: #555; }
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


def legend_items(pair):
    """The colour legend of a pair (SNLI) or single-sentence model: [((r, g, b), colour
    name, what the colour means)], for the pages and the explorer alike."""
    return list(zip(PALETTES[pair], PALETTE_NAMES[pair],
                    ('supports the prediction', 'supports another class')))


def _html_legend(pairs):
    items = []
    for pair in sorted(pairs):
        for (r, g, b), name, meaning in legend_items(pair):
            items.append('<span style="background: rgb({},{},{}); color: #fff">{}: {}{}</span>'
                         .format(r, g, b, html.escape(name), html.escape(meaning),
                                 html.escape(' (SNLI)' if pair else '')))
    return ('<p class="legend">Colour legend: {} — opacity is proportional to the normalised '
            'importance.</p>').format(' '.join(items))


def _html_example(number, view):
    parts = ['<section>', '<div>Example {} — gold: <b><bdi>{}</bdi></b></div>'.format(
        number, html.escape(view.gold if view.gold is not None else 'unknown'))]
    if view.pair:
        parts.append('<div class="premise">Premise: <bdi>{}</bdi></div>'.format(
            html.escape(' '.join(view.premise))))
    parts.append('<table>')
    for method_map in view.maps:
        words = ' '.join(_html_word(w, v, view.pair)
                         for w, v in zip(method_map.words, method_map.importance))
        wrong = ' <span class="wrong">\u2717 wrong</span>' if method_map.correct is False else ''
        parts.append('<tr><td class="method">{}</td><td class="prediction"><bdi>{}</bdi> '
                     '({:.3f}){}</td><td>{}{}</td></tr>'.format(
                         html.escape(method_map.method), html.escape(method_map.prediction),
                         method_map.score, wrong,
                         html.escape('Hypothesis: ') if view.pair else '', words))
    parts.append('</table>')
    if view.neighbors:
        items = ''.join('<li><bdi>{}</bdi> <i>(<bdi>{}</bdi>)</i></li>'.format(
            html.escape(text), html.escape(label)) for text, label in view.neighbors)
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


def score_note(views):
    """What the score in brackets means, for each method on the page."""
    methods = list(dict.fromkeys(m.method for view in views for m in view.maps))
    return 'Scores in brackets: ' + '; '.join('{}: {}'.format(
        m, saliency.REGISTRY.get(m, saliency.Interpreter).score_meaning) for m in methods)


def settings_note(settings):
    """'k 75, backend faiss, temperature 2.52' from a dict of the run's settings."""
    return ', '.join('{} {}'.format(name, value) for name, value in settings.items()
                     if value is not None)


def html_page(views, title, settings=None):
    """The self-contained HTML text: one table row per (example, method). `settings`:
    what the reader needs to know about the run (k, backend, temperature), shown."""
    title = title.replace('`', '')   # provenance lines quote commands Markdown-style
    body = '\n'.join(_html_example(i + 1, view) for i, view in enumerate(views))
    settings_line = ('<p class="settings">Settings: {}.</p>\n'.format(
        html.escape(settings_note(settings))) if settings else '')
    return ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title>'
            '<style>{style}</style></head>\n<body><h1>{title}</h1>\n{legend}\n'
            '<p>{normalization}.</p>\n{settings}'
            '<p>Prediction columns: the label predicted by each method\'s classifier, marked '
            '\u2717 where it differs from the gold label. {scores}.</p>\n{body}\n'
            '</body></html>\n').format(
                title=html.escape(title), style=HTML_STYLE,
                legend=_html_legend({view.pair for view in views} or {False}),
                normalization=html.escape(normalization_note(views)), settings=settings_line,
                scores=html.escape(score_note(views)), body=body)


def html_write(views, path, title='Interpretations', settings=None):
    """(path, write, mode) of `html_page(views, title, settings)`, for
    nlp_utils.atomic_write_files (a page, its PNG and its CSV are renamed together)."""
    page = html_page(views, title, settings)
    return path, lambda f: f.write(page), 'w'


def page_settings(setup, methods, k, backend, neighbors=0):
    """What a reader of the page needs to know about how it was made: the model, the
    DkNN's k and backend where one is used, the temperature where one is read."""
    uses_dknn = neighbors or saliency.needs_dknn(methods)
    return {'model': '{} {}'.format(setup.config.dataset, setup.config.model),
            'k': k if uses_dknn else None, 'backend': backend if uses_dknn else None,
            'temperature': ('{:.3f}'.format(calibration.load_temperature(setup.result_dir))
                            if saliency.needs_temperature(methods) else None)}


def map_writes(results, setup, paths, title, settings, normalization=DEFAULT_NORMALIZATION,
               neighbors=None):
    """(path, write, mode) of the maps of interpret_all's `results`: paths = {'html':
    page, 'csv': raw importances, 'png': optional figure (None for none)}, to be renamed
    together with nlp_utils.atomic_write_files."""
    views = build_views(results, setup.vocab, setup.label_names, neighbors, normalization)
    rows = importance_rows(results, setup.vocab, setup.label_names, normalization)
    writes = [html_write(views, paths['html'], title, settings),
              importances_write(rows, paths['csv'])]
    if paths.get('png'):
        writes.append(png_write(views, paths['png'], title))
    return writes


# ---------------------------------------------------------------- PNG
PNG_FONT_SIZE = 10
PNG_WIDTH = 12.0          # inches
PNG_LABEL_WIDTH = 2.6     # inches kept for the method / prediction column
PNG_LINE_HEIGHT = 0.3     # inches
PNG_WORD_GAP = 0.06       # inches between coloured boxes, beyond a space, so none touch
PNG_MAX_CHARS = 40        # longer tokens are cut (a 5,000-character token stays one box)


def png_word(word):
    return word if len(word) <= PNG_MAX_CHARS else word[:PNG_MAX_CHARS - 1] + '\u2026'


def _legend_items(views, y):
    """The colour legend row at height y: [(x, y, text, colour, bold)]."""
    items, x = [(0.0, y, 'Colours:', None, True)], PNG_LABEL_WIDTH
    for pair in sorted({view.pair for view in views} or {False}):
        for (r, g, b), meaning in zip(PALETTES[pair], ('supports the prediction',
                                                       'supports another class')):
            items.append((x, y, meaning + (' (SNLI)' if pair else ''),
                          (r / 255, g / 255, b / 255, 0.9), False))
            x += 2.3
    return items


def _png_items(views, measure, title):
    """Lay the title, legend and words out in inches from the top-left corner.

    measure: str -> width in inches. Returns ([(x, y, text, facecolour or None,
    bold)], total height)."""
    items = [(0.0, PNG_LINE_HEIGHT, title, None, True)] if title else []
    y = PNG_LINE_HEIGHT * (2 if title else 1)
    items += _legend_items(views, y)
    items.append((0.0, y + PNG_LINE_HEIGHT, 'Normalisation: ' + ', '.join(
        normalizations_used(views)) + '; opacity = |normalised importance|', None, False))
    y += 2.5 * PNG_LINE_HEIGHT
    space = measure(' ') + PNG_WORD_GAP

    def words_line(words, colours, y):
        x = PNG_LABEL_WIDTH
        for word, colour in zip(map(png_word, words), colours):
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
            items.append((0.0, y, '{}: {} ({:.2f}){}'.format(
                method_map.method, method_map.prediction, method_map.score,
                ' \u2717' if method_map.correct is False else ''), None, False))
            colours = [word_colour(v, view.pair) for v in method_map.importance]
            colours = [(r / 255, g / 255, b / 255, a) for r, g, b, a in colours]
            y = words_line(method_map.words, colours, y)
        y += PNG_LINE_HEIGHT / 2
    return items, y


def png_write(views, path, title=None):
    """(path, write, mode) of the maps as a PNG, for nlp_utils.atomic_write_files: a
    title, the colour legend, then per example a header, the premise (SNLI) and one line
    (or more, wrapped) per method with each word in a box coloured as in the HTML."""
    figure = plt.figure(figsize=(PNG_WIDTH, 1))
    renderer = figure.canvas.get_renderer()
    font = FontProperties(size=PNG_FONT_SIZE)

    def measure(text):
        width, _, _ = renderer.get_text_width_height_descent(text, font, ismath=False)
        return width / figure.dpi

    items, height = _png_items(views, measure, title and png_word_line(title))
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
    return plots.figure_write(figure, path)


def png_word_line(title, limit=150):
    """A title that fits one PNG line (provenance lines can be long)."""
    title = title.replace('`', '')
    return title if len(title) <= limit else title[:limit - 1] + '\u2026'
