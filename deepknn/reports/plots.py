"""Shared matplotlib figures; every PNG is written atomically (temp file, then rename)."""
import matplotlib
matplotlib.use('Agg')  # scripts run headless; never needs a display
import matplotlib.pyplot as plt  # noqa: E402 (must follow the backend choice)
import numpy as np  # noqa: E402

import nlp_utils  # noqa: E402
from deepknn.reports import tables  # noqa: E402


# A legend right of the axes: inside, it would cover bars or curves (the figures are
# saved with bbox_inches='tight', so it stays in the picture).
LEGEND_OUTSIDE = {'loc': 'upper left', 'bbox_to_anchor': (1.02, 1.0), 'borderaxespad': 0.0}


def figure_write(figure, path, dpi=120):
    """(path, write, mode) that saves `figure` as a PNG and closes it, for
    nlp_utils.atomic_write_files (so a figure and its data are renamed together)."""
    def write(f):
        try:
            figure.savefig(f, dpi=dpi, format='png', bbox_inches='tight')
        finally:
            plt.close(figure)
    return path, write, 'wb'


def page_writes(stem, page, table, figure):
    """[(path, write, mode)] of STEM.md (the text `page`), STEM.csv (the text `table`) and
    STEM.png (`figure`), for nlp_utils.atomic_write_files (renamed into place together)."""
    return [(stem + '.md', lambda f: f.write(page), 'w'),
            (stem + '.csv', lambda f: f.write(table), 'w'),
            figure_write(figure, stem + '.png')]


def report_writes(report, run, summaries, differences, stem, header, title):
    """[(path, write, mode)] of STEM.md, STEM.csv and STEM.png of a measured `run`, for
    nlp_utils.atomic_write_files (renamed into place together). `report` draws them: a
    module (faithfulness_report, plausibility_report) with markdown_text(run, summaries,
    differences, header), csv_rows(run, summaries, differences) of its CSV_COLUMNS and
    figure(run, summaries, title)."""
    table = tables.csv_text(report.csv_rows(run, summaries, differences), report.CSV_COLUMNS)
    return page_writes(stem, report.markdown_text(run, summaries, differences, header), table,
                       report.figure(run, summaries, title))


def save_figure(figure, path, dpi=120):
    """Save `figure` as a PNG at `path` atomically, then close it."""
    try:
        nlp_utils.atomic_write_files([figure_write(figure, path, dpi)])
    finally:
        plt.close(figure)


def reliability_figure(curves, title):
    """A one-panel reliability diagram (a matplotlib figure to save).

    curves: list of calibration.reliability_curve(...) dicts (label, bins, ece), e.g. softmax
    confidence before/after temperature scaling, or DkNN credibility. Each curve is drawn
    as bars of accuracy per equal-width confidence bin, side by side within a bin,
    against the diagonal of perfect calibration; the legend gives each curve's ECE.
    """
    figure, axes = plt.subplots(figsize=(5, 5))
    n_bins = len(curves[0]['bins']['count'])
    bar_width = 1.0 / n_bins / max(1, len(curves))
    for position, curve in enumerate(curves):
        bins = curve['bins']
        # Empty bins have NaN accuracy; drawing them at height 0 shows "no data".
        heights = np.nan_to_num(bins['accuracy'], nan=0.0)
        axes.bar(bins['bin_lower'] + position * bar_width, heights, width=bar_width,
                 align='edge', alpha=0.75, edgecolor='black', linewidth=0.5,
                 label='{} (ECE {:.3f})'.format(curve['label'], curve['ece']))
    axes.plot([0, 1], [0, 1], linestyle='--', color='gray', label='perfect calibration')
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    axes.set_xlabel('confidence')
    axes.set_ylabel('accuracy')
    axes.set_title(title)
    axes.legend(fontsize='small', **LEGEND_OUTSIDE)
    return figure
