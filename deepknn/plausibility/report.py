"""The plausibility report of a run (plausibility/runs.py): a Markdown page, a long CSV and
a PNG of each method's measures, written together; and the summary across runs, with
the figure of plausibility against faithfulness.

The page: the rationale's size per threshold; per method (and the random baseline) the
headline measures at the first threshold, each mean [95% bootstrap interval]; the
threshold-dependent measures at every threshold; the paired differences (conformity -
confidence, conformity - gradient) with whether their interval excludes 0 and which
method it favours. The CSV holds every number of the page, one row each.
"""
import csv
import dataclasses
import io
import os
import re

import numpy as np

from deepknn.plausibility import measures as plausibility
from deepknn.reports import plots
from deepknn.reports import tables
from deepknn.reports.tables import interval_text, markdown_table, signed_interval, verdict
from nlp_utils import UserError

CSV_COLUMNS = ['section', 'method', 'baseline', 'measure', 'mean', 'low', 'high', 'n',
               'excludes_zero']
DEFINITIONS = (
    'Human rationale: the largest SST phrases people rated more polar than every part of '
    'them (docs/plausibility.md); a word is in the rationale at threshold t when that '
    'phrase\'s polarity |label - 2| / 2 >= t (0.5: any explanatory phrase, 1: very '
    'polar only). auprc: average precision of |importance| against the rationale (a '
    'constant or random map scores about the rationale\'s share of words); token_f1 / '
    'iou_f1: ERASER\'s F1 of the top-k words (k = rationale size) by token and by span '
    '(IOU > 0.5); highlight_recall: share of the rationale\'s words highlighted (below); '
    'spearman: rank correlation of the importance turned toward the gold label '
    'with the signed human score; highlighted_words: |normalised importance| > 0.05 '
    '(section 5.1); extraneous_words / extraneous_share: of those, the words in no polar '
    'phrase (people rated them neutral). Higher is better except for the extraneous '
    'measures. Each cell: mean [95% bootstrap interval over sentences].')
# The figure's panels: (measure at the first threshold or plain, axis label).
FIGURE_MEASURES = ('auprc', 'token_f1', 'iou_f1', 'spearman', 'highlight_recall',
                   'extraneous_share')


def headline_columns(thresholds):
    first = thresholds[0]
    return ([plausibility.measure_name(m, first) for m in plausibility.THRESHOLD_MEASURES]
            + list(plausibility.OTHER_MEASURES))


def _cells(summaries):
    cells = {}
    for row in summaries:
        cells.setdefault(row.method, {})[row.measure] = row.interval
    return cells


def _table(cells, columns):
    rows = [dict({'method': method}, **{c: interval_text(found[c]) if c in found else ''
                                        for c in columns}) for method, found in cells.items()]
    return markdown_table(rows, ['method'] + columns)


def favours(summary):
    """Which method a paired difference favours beyond its interval, or 'neither'."""
    interval = summary.interval
    higher = plausibility.HIGHER_IS_BETTER[plausibility.base_measure(summary.measure)]
    if not interval.excludes_zero or higher is None:
        return 'neither' if higher is not None else '(descriptive)'
    return summary.method if (interval.low > 0) == higher else summary.baseline


def markdown_text(run, summaries, differences, header):
    """The report page: `header`, then the sections of the module docstring."""
    out = io.StringIO()
    out.write(header.rstrip('\n') + '\n\n')
    out.write('{} of {} sentences aligned to their treebank tree ({} without a tree), {:.1f} '
              'words on average. Rationale share of the words: {}.\n'.format(
                  len(run.lengths), run.n_sentences, run.n_unaligned, float(np.mean(run.lengths)),
                  '; '.join('{:.3f} at t = {:g} ({} sentences with none)'.format(
                      float(share.mean()), t, int(np.sum(share == 0)))
                      for t, share in run.rationale_share.items())))
    for note in run.notes:
        out.write('\nNote: {}\n'.format(note))
    out.write('\n' + DEFINITIONS + '\n')
    cells = _cells(summaries)
    out.write('\n## Every method at t = {:g}\n\n'.format(run.thresholds[0]))
    out.write(_table(cells, headline_columns(run.thresholds)))
    out.write('\n## The threshold-dependent measures at every threshold\n\n')
    out.write(_table(cells, [plausibility.measure_name(m, t) for m in
                             plausibility.THRESHOLD_MEASURES for t in run.thresholds]))
    out.write('\n## Paired differences (same sentences resampled for both methods)\n\n')
    rows = [{'difference': '{} - {}'.format(d.method, d.baseline), 'measure': d.measure,
             'mean [95% interval]': interval_text(d.interval), 'n': d.interval.n,
             'excludes 0': 'yes' if d.interval.excludes_zero else 'no',
             'favours': favours(d)} for d in differences]
    out.write(markdown_table(rows, list(rows[0])) if rows else
              'None: the run lacks conformity or its comparison methods.\n')
    return out.getvalue()


def csv_rows(run, summaries, differences):
    """Every number of the page, one row each (CSV_COLUMNS; `run` unused here)."""
    def row(section, summary):
        i = summary.interval
        return {'section': section, 'method': summary.method,
                'baseline': summary.baseline or '', 'measure': summary.measure,
                'mean': i.mean, 'low': i.low, 'high': i.high, 'n': i.n,
                'excludes_zero': i.excludes_zero if section == 'difference' else ''}
    return [row('measure', s) for s in summaries] + [row('difference', d) for d in differences]


def figure(run, summaries, title):
    """One panel per FIGURE_MEASURES (threshold measures at the first threshold): each
    method's mean with its 95% interval; on the AUPRC panel the rationale's share of
    words, what a constant map scores."""
    cells = _cells(summaries)
    methods = list(cells)
    size = (3.2 * len(FIGURE_MEASURES), 0.5 * len(methods) + 1.8)
    figure, axes = plots.plt.subplots(1, len(FIGURE_MEASURES), figsize=size, sharey=True,
                                      squeeze=False)
    colours = plots.plt.get_cmap('tab10')
    for ax, measure in zip(axes[0], FIGURE_MEASURES):
        name = (plausibility.measure_name(measure, run.thresholds[0])
                if measure in plausibility.THRESHOLD_MEASURES else measure)
        for position, method in enumerate(methods):
            i = cells[method][name]
            ax.errorbar([i.mean], [position], xerr=[[i.mean - i.low], [i.high - i.mean]],
                        fmt='o', color='black' if method == 'random' else colours(position % 10),
                        capsize=3)
        if measure == 'auprc':
            ax.axvline(float(run.rationale_share[run.thresholds[0]].mean()), color='gray',
                       linestyle='--', linewidth=1, label='rationale share')
            ax.legend(fontsize='x-small', loc='lower right')
        ax.set_title(name, fontsize='medium')
        ax.grid(alpha=0.3, axis='x')
    axes[0, 0].set_yticks(range(len(methods)), methods)
    axes[0, 0].invert_yaxis()
    figure.suptitle(title, fontsize='medium')
    figure.tight_layout()
    return figure




# ---------------------------------------------------------------- across runs
SUMMARY_MEASURES = plausibility.THRESHOLD_MEASURES + ('spearman', 'extraneous_share',
                                                      'extraneous_words')
SUMMARY_COLUMNS = ['run', 'difference', 'threshold', 'n'] + list(SUMMARY_MEASURES) + ['verdict']


def summary_rows(run_name, rows, threshold):
    """One row per paired difference of one run's plausibility CSV (CSV_COLUMNS, as read
    back: strings): the SUMMARY_MEASURES (those of a threshold at `threshold`) as mean
    [95% interval], and the verdict over them."""
    names = {plausibility.measure_name(m, threshold if m in plausibility.THRESHOLD_MEASURES
                                       else None): m for m in SUMMARY_MEASURES}
    grouped = {}
    for row in rows:
        if row['section'] == 'difference' and row['measure'] in names:
            grouped.setdefault('{} - {}'.format(row['method'], row['baseline']),
                               {})[names[row['measure']]] = row
    out = []
    for difference, measures in grouped.items():
        values = {m: tuple(float(r[k]) for k in ('mean', 'low', 'high'))
                  for m, r in measures.items()}
        n = measures['auprc']['n'] if 'auprc' in measures else ''
        out.append(dict({'run': run_name, 'difference': difference,
                         'threshold': '{:g}'.format(threshold), 'n': n,
                         'verdict': verdict(
                             values, plausibility.HIGHER_IS_BETTER, 'more plausible')},
                        **{m: signed_interval(*values[m]) if m in values
                           else '' for m in SUMMARY_MEASURES}))
    return out


def method_means(rows, measure):
    """{method: (mean, low, high)} of one measure in a plausibility or faithfulness CSV's
    'measure' rows (for faithfulness, rows already of one classifier)."""
    return {row['method']: tuple(float(row[k]) for k in ('mean', 'low', 'high'))
            for row in rows if row['section'] == 'measure' and row['measure'] == measure}


def plausibility_vs_faithfulness(points, threshold):
    """One panel per classifier f: each (run, method)'s AUPRC at `threshold` (y, with its
    interval) against its AOPC comprehensiveness under f (x). points: {f: [(run,
    method, x, (y, low, high))]}; colour by method, marker by run."""
    panels = list(points)
    figure, axes = plots.plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.4),
                                      squeeze=False)
    everything = [p for panel in points.values() for p in panel]
    methods = list(dict.fromkeys(method for _, method, _, _ in everything))
    runs = list(dict.fromkeys(run for run, _, _, _ in everything))
    colours, markers = plots.plt.get_cmap('tab10'), 'osD^v<>'
    for ax, panel in zip(axes[0], panels):
        for run, method, x, (y, low, high) in points[panel]:
            ax.errorbar([x], [y], yerr=[[y - low], [high - y]], capsize=2,
                        marker=markers[runs.index(run) % len(markers)], linestyle='none',
                        color=colours(methods.index(method) % 10))
        ax.set_title('faithfulness under f = {}'.format(panel), fontsize='medium')
        ax.set_xlabel('AOPC comprehensiveness (faithfulness_RUN_test)')
        ax.set_ylabel('AUPRC at t = {:g} (plausibility_RUN)'.format(threshold))
        ax.grid(alpha=0.3)
    handles = ([plots.plt.Line2D([], [], color=colours(i % 10), marker='o', linestyle='none',
                                 label=m) for i, m in enumerate(methods)]
               + [plots.plt.Line2D([], [], color='gray', marker=markers[i % len(markers)],
                                   linestyle='none', label=r) for i, r in enumerate(runs)])
    axes[0, -1].legend(handles=handles, fontsize='small', **plots.LEGEND_OUTSIDE)
    figure.suptitle('Plausibility (SST rationales) against faithfulness (ERASER)',
                    fontsize='medium')
    figure.tight_layout()
    return figure


@dataclasses.dataclass
class SummaryInputs:
    """What the summary across runs shows: its table (rows, columns), the figure's
    points ({f: [(run, method, aopc_comp, (auprc, low, high))]}) and, per run, the
    weights its tables read (weights: lines)."""
    rows: list
    columns: list
    points: dict
    weights: list


def read_rows(path, how):
    """The rows of a CSV written by an earlier command; UserError naming `how` to make it
    (a subcommand of `paper_results`, with its parameters in backticks)."""
    if not os.path.exists(path):
        raise UserError('{} does not exist; make it with `paper_results` {}'.format(path, how))
    with open(path, newline='', encoding='utf-8') as f:
        return list(csv.DictReader(f))


def table_weights(folder, stem):
    """The 'model sha256 ...' that FOLDER/STEM.md names, or tables.NOT_RECORDED."""
    try:
        with open(os.path.join(folder, stem + '.md'), encoding='utf-8') as f:
            found = re.search(r'model sha256 ([0-9a-f]+)', f.read())
    except OSError:
        found = None
    return found.group(1) if found else tables.NOT_RECORDED


def sentences(rows):
    """The sentences a plausibility or faithfulness CSV measured: the largest n of its
    'measure' rows."""
    return max(int(row['n']) for row in rows if row['section'] == 'measure')


def gather_summary(folder, runs, thresholds, classifiers=('softmax', 'conformity')):
    """SummaryInputs of FOLDER/plausibility_RUN.csv per run, a row per difference and
    threshold, with the points (AUPRC at the first threshold) of the runs that also have
    FOLDER/faithfulness_RUN_test.csv (under each of `classifiers`)."""
    rows, points, weights = [], {}, []
    auprc = plausibility.measure_name('auprc', thresholds[0])
    text = ','.join('{:g}'.format(t) for t in thresholds)
    for run in runs:
        stem = 'plausibility_{}'.format(run)
        table = read_rows(os.path.join(folder, stem + '.csv'), 'plausibility `run` ' + run)
        try:
            rows += [row for t in thresholds for row in summary_rows(run, table, t)]
            plausible = method_means(table, auprc)
            if not plausible:
                raise KeyError(auprc)
        except (KeyError, ValueError) as error:
            raise UserError('{}.csv is not a plausibility table at thresholds '
                            '{} ({}: {}); remake it with `paper_results` `overwrite` '
                            'plausibility `run` {} `thresholds` {}'.format(
                                stem, text, type(error).__name__, error, run, text))
        weights.append('{}: plausibility {} ({} sentences)'.format(
            run, table_weights(folder, stem), sentences(table)))
        faithful_stem = 'faithfulness_{}_test'.format(run)
        if not os.path.exists(os.path.join(folder, faithful_stem + '.csv')):
            continue
        faithful = read_rows(os.path.join(folder, faithful_stem + '.csv'), '')
        weights[-1] += ', faithfulness {} ({} sentences)'.format(
            table_weights(folder, faithful_stem), sentences(faithful))
        for f in classifiers:
            means = method_means([r for r in faithful if r['classifier'] == f], 'aopc_comp')
            points.setdefault(f, []).extend((run, m, means[m][0], plausible[m])
                                            for m in plausible if m in means)
    return SummaryInputs(rows, SUMMARY_COLUMNS, points, weights)


def summary_header(thresholds, weights, produced):
    return ('# Plausibility across models: conformity leave-one-out minus confidence '
            'leave-one-out and minus the gradient\n\nEach cell: the paired difference on the '
            'same test sentences, mean [95% bootstrap interval], at each rationale threshold '
            '(the figure: t = {:g}); n: the sentences with a rationale at t; '
            'verdict: on how many measures conformity is more (less) plausible beyond the '
            'interval (lower is better for the extraneous measures). Per run: '
            'plausibility_RUN.md. The figure plausibility_summary.png sets each method\'s AUPRC '
            'against its faithfulness (AOPC comprehensiveness) from faithfulness_RUN_test; the '
            'two tables may have read different weights of a run (model sha256): {}.\n{}\n'
            .format(thresholds[0], '; '.join(weights), produced))
