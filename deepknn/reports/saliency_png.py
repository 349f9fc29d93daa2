"""Saliency maps as PNG images: every word in a box coloured by its importance (the
colours of the HTML page too), long sets of examples split into pages of
PNG_PAGE_EXAMPLES each.
"""
import os

import matplotlib
matplotlib.use('Agg')  # headless: the figure is only ever saved
import matplotlib.pyplot as plt  # noqa: E402 (must follow the backend choice)
import numpy as np  # noqa: E402
from matplotlib.font_manager import FontProperties  # noqa: E402

from deepknn.reports import plots  # noqa: E402


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


def normalizations_used(views):
    return sorted({m.normalization for view in views for m in view.maps})


# ---------------------------------------------------------------- drawing
PNG_FONT_SIZE = 10
PNG_WIDTH = 12.0          # inches
PNG_LABEL_WIDTH = 2.6     # inches kept for the method / prediction column
PNG_LINE_HEIGHT = 0.3     # inches
PNG_WORD_GAP = 0.06       # inches between coloured boxes, beyond a space, so none touch
PNG_MAX_CHARS = 40        # longer tokens are cut (a 5,000-character token stays one box)
# Examples per PNG: 20 SST sentences with 4 methods made one image 5,801 px tall; 8 keep
# a page near 2,400 px, readable without zooming.
PNG_PAGE_EXAMPLES = 8


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

    for view in views:
        gold = view.gold if view.gold is not None else 'unknown'
        items.append((0.0, y, '{} (gold: {})'.format(view.heading, gold), None, True))
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


def png_pages(path, n_views, per_page=PNG_PAGE_EXAMPLES):
    """[(page path, slice of the views)]: `path` itself for up to `per_page` examples,
    else STEM_1.png, STEM_2.png, ... of `per_page` examples each (the last one fewer)."""
    if n_views <= per_page:
        return [(path, slice(0, n_views))]
    stem, suffix = os.path.splitext(path)
    return [('{}_{}{}'.format(stem, page, suffix or '.png'),
             slice(start, min(start + per_page, n_views)))
            for page, start in enumerate(range(0, n_views, per_page), 1)]


def png_writes(views, path, title=None, per_page=PNG_PAGE_EXAMPLES):
    """[(path, write, mode)] of the maps as PNG pages (png_pages), for
    nlp_utils.atomic_write_files; more than one page each says which it is."""
    pages = png_pages(path, len(views), per_page)
    if len(pages) == 1:
        return [png_write(views, path, title)]
    return [png_write(views[part], page_path, '{} (page {} of {}: {} to {})'.format(
        png_word_line(title) if title else 'Maps', number, len(pages),
        views[part][0].heading, views[part][-1].heading))
        for number, (page_path, part) in enumerate(pages, 1)]


def png_write(views, path, title=None):
    """(path, write, mode) of the maps as one PNG, for nlp_utils.atomic_write_files: a
    title, the colour legend, then per example a header, the premise (SNLI) and one line
    (or more, wrapped) per method with each word in a box coloured as in the HTML."""
    figure = plt.figure(figsize=(PNG_WIDTH, 1))
    renderer = figure.canvas.get_renderer()
    font = FontProperties(size=PNG_FONT_SIZE)

    def measure(text):
        width, _, _ = renderer.get_text_width_height_descent(text, font, ismath=False)
        return width / figure.dpi

    items, height = _png_items(views, measure, title and png_word_line(title, 200))
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
