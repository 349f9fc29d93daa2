"""Rendering saliency maps: a self-contained HTML page (every text escaped), PNG pages
(saliency_png.py), and the raw importances as CSV, from the plain Interpretations of
saliency.py.

Unknown words are shown in angle brackets, as in the paper; PTB tokens (-lrb-, ...)
as the characters they stand for.
"""
import csv
import dataclasses
import html
from typing import Optional

import numpy as np

from deepknn.evaluation import calibration
from deepknn.interpret import saliency
from deepknn.reports.saliency_png import (PALETTE_NAMES, PALETTES, normalizations_used,
                                          png_writes, word_colour)
from nlp_utils import ptb_text
from deepknn.interpret.saliency_scores import DEFAULT_NORMALIZATION, NORMALIZATIONS, normalize


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
    heading: str = ''           # 'Example 3', or 'Line 7' of a user's input file

    @property
    def pair(self):
        return self.premise is not None


def example_text(tokens, vocab):
    """Token-level input -> one display string ('premise || hypothesis' for pairs)."""
    if isinstance(tokens, tuple):
        return ' || '.join(example_text(part, vocab) for part in tokens)
    return ' '.join(display_tokens(tokens, vocab))


def example_headings(n, line_numbers=None):
    """The heading of each of n examples: 'Line L' by their line numbers in a user's file
    (blank lines skipped there, so these need not be 1..n), else 'Example 1'..'Example n'."""
    if line_numbers is None:
        return ['Example {}'.format(i) for i in range(1, n + 1)]
    return ['Line {}'.format(number) for number in line_numbers]


def build_views(results, vocab, label_names, neighbors=None,
                normalization=DEFAULT_NORMALIZATION, line_numbers=None):
    """{method: [Interpretation]} (as from interpret_all) -> [ExampleView].
    neighbors: per example a list of training (tokens, label), or None;
    normalization: a key of NORMALIZATIONS; line_numbers: per example its line in the
    input file, for the headings (example_headings), or None."""
    methods = list(results)
    headings = example_headings(len(results[methods[0]]), line_numbers)
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
            None if first.label is None else label_names[first.label], maps, analogies,
            headings[i]))
    return views


def importance_rows(results, vocab, label_names, normalization=DEFAULT_NORMALIZATION,
                    line_numbers=None):
    """One row per (example, method, token) with the raw and the normalised importance,
    for users' own statistics: [dict]. 'example' numbers the examples from 1, or is
    the example's line in the input file where `line_numbers` are given."""
    rows = []
    for method, interpretations in results.items():
        numbers = line_numbers or range(1, len(interpretations) + 1)
        for number, found in zip(numbers, interpretations):
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


def _html_example(view):
    parts = ['<section>', '<div>{} — gold: <b><bdi>{}</bdi></b></div>'.format(
        html.escape(view.heading), html.escape(view.gold if view.gold is not None
                                               else 'unknown'))]
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
    body = '\n'.join(map(_html_example, views))
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
    DkNN's k and backend where one is used, the temperature where one is read.
    `methods`: names or a saliency.MethodPlan (whose temperature is used as read)."""
    plan = saliency.plan_methods(methods, setup.result_dir)
    uses_dknn = neighbors or plan.needs_dknn
    return {'model': '{} {}'.format(setup.config.dataset, setup.config.model),
            'k': k if uses_dknn else None, 'backend': backend if uses_dknn else None,
            'temperature': (None if plan.temperature is None
                            else '{:.3f}'.format(plan.temperature))}


def map_writes(results, setup, paths, title, settings, normalization=DEFAULT_NORMALIZATION,
               neighbors=None, line_numbers=None):
    """(path, write, mode) of the maps of interpret_all's `results`: paths = {'html':
    page, 'csv': raw importances, 'png': optional figure (None for none)}, to be renamed
    together with nlp_utils.atomic_write_files. line_numbers: each example's line in
    the input file (numbering the maps), or None to number them 1..n."""
    views = build_views(results, setup.vocab, setup.label_names, neighbors, normalization,
                        line_numbers)
    rows = importance_rows(results, setup.vocab, setup.label_names, normalization,
                           line_numbers)
    writes = [html_write(views, paths['html'], title, settings),
              importances_write(rows, paths['csv'])]
    if paths.get('png'):
        writes += png_writes(views, paths['png'], title)
    return writes
