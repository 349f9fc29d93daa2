"""The faithfulness report of a run (faithfulness/runs.py): a Markdown page, a long CSV
and a PNG of the mean deletion and insertion curves, written together.

The page: per classifier f, the headline measures (AOPC comprehensiveness and
sufficiency, deletion and insertion areas, the share of maps made for f's y) and the
per-bin comprehensiveness and sufficiency, each mean [95% bootstrap interval]; then the
paired differences (e.g. conformity - confidence) with their intervals and whether they
exclude 0; then the mean Kendall tau between the methods' importances. The CSV holds
every number of the page, one row each.
"""
import io

import numpy as np

from deepknn.faithfulness import curves as curve_stats
from deepknn.reports import plots
from deepknn.reports.tables import interval_text, markdown_table, number, signed_interval, verdict

CSV_COLUMNS = ['section', 'classifier', 'method', 'baseline', 'measure', 'mean', 'low',
               'high', 'n', 'excludes_zero']
HEADLINE_COLUMNS = ['aopc_comp', 'aopc_suff', 'deletion_auc', 'insertion_auc', 'same_y']
DIRECTIONS = ('Better rankings have higher comprehensiveness (aopc_comp: f(y|x) - f(y|x '
              'without the top-k words), lower sufficiency (aopc_suff: f(y|x) - f(y|only the '
              'top-k words)), a lower deletion area and a higher insertion area (curves over '
              'the fraction of words removed / kept). AOPC: the mean over the bins 1, 5, 10, '
              '20, 50% of the words. same_y: share of sentences whose map was made for the '
              "classifier's y. Each cell: mean [95% bootstrap interval over sentences].")


def _cells(summaries, classifier):
    """{method: {measure: Summary}} of one classifier."""
    cells = {}
    for row in summaries:
        if row.classifier == classifier:
            cells.setdefault(row.method, {})[row.measure] = row
    return cells


def _measure_table(cells, columns):
    rows = [dict({'method': method}, **{c: interval_text(found[c].interval) if c in found
                                        else '' for c in columns})
            for method, found in cells.items()]
    return markdown_table(rows, ['method'] + columns)


def markdown_text(run, summaries, differences, header):
    """The report page: `header`, then the three sections of the module docstring."""
    out = io.StringIO()
    out.write(header.rstrip('\n') + '\n\n')
    out.write('{} sentences ({:.1f} words on average), {} distinct variants through the model '
              'and the DkNN once each ({} rows), curves: {}.\n'.format(
                  len(run.lengths), float(np.mean(run.lengths)), run.n_variants, run.n_rows,
                  'yes' if run.curves else 'no (--no-curves)'))
    for note in run.notes:
        out.write('\nNote: {}\n'.format(note))
    out.write('\n' + DIRECTIONS + '\n')
    for name, measured in run.classifiers.items():
        cells = _cells(summaries, name)
        out.write('\n## f = {}: {}\n\nf(y|x) on the full input: mean {}.\n\n'.format(
            name, measured.classifier.meaning, number(float(np.mean(
                measured.result.full_probability)))))
        columns = [c for c in HEADLINE_COLUMNS if any(c in found for found in cells.values())]
        out.write(_measure_table(cells, columns))
        bins = [m for m in next(iter(cells.values())) if '@' in m]
        out.write('\nPer bin (comp@k, suff@k):\n\n' + _measure_table(cells, bins))
    out.write('\n## Paired differences (same sentences resampled for both methods)\n\n')
    rows = [{'classifier': d.classifier, 'difference': '{} - {}'.format(d.method, d.baseline),
             'measure': d.measure, 'mean [95% interval]': interval_text(d.interval),
             'excludes 0': 'yes' if d.interval.excludes_zero else 'no'} for d in differences]
    out.write(markdown_table(rows, list(rows[0])) if rows else
              'None: the run lacks conformity or its comparison methods.\n')
    out.write('\n## Agreement: mean Kendall tau between the methods\' importances\n\n'
              'Over the sentences where tau is defined (n: at least two words, no NaN, not '
              'constant).\n\n')
    rows = []
    for a in run.methods:
        row = {'method': a}
        for b in run.methods:
            pair = run.agreement.get((a, b)) or run.agreement.get((b, a))
            row[b] = '1' if a == b else '{} (n={})'.format(number(pair.mean), pair.n_used)
        rows.append(row)
    out.write(markdown_table(rows, ['method'] + list(run.methods)))
    return out.getvalue()


def csv_rows(run, summaries, differences):
    """Every number of the page, one row each (CSV_COLUMNS)."""
    def row(section, summary):
        i = summary.interval
        return {'section': section, 'classifier': summary.classifier, 'method': summary.method,
                'baseline': summary.baseline or '', 'measure': summary.measure,
                'mean': i.mean, 'low': i.low, 'high': i.high, 'n': i.n,
                'excludes_zero': i.excludes_zero if section == 'difference' else ''}
    rows = [row('measure', s) for s in summaries] + [row('difference', d) for d in differences]
    for (a, b), pair in run.agreement.items():
        rows.append({'section': 'agreement', 'classifier': '', 'method': a, 'baseline': b,
                     'measure': 'kendall_tau', 'mean': pair.mean, 'low': '', 'high': '',
                     'n': pair.n_used, 'excludes_zero': ''})
    return rows


# Identical curves (two methods with the same ranking, or a method and its reversal on
# one-word sentences) would hide each other: the rankings drawn first get wider lines,
# and each ranking its own marker shape and marker positions along the curve.
MARKERS = ('o', 's', '^', 'D', 'v', 'P', 'X', '*', 'h', '<', '>')
WIDEST_LINE = 3.2
NARROWEST_LINE = 1.0
OVERLAP_NOTE = ('wider lines drawn first and markers\nat staggered points, so identical '
                'curves\nstay visible')


def _style(run, ranking):
    """Matplotlib keywords of a ranking's curve: a method's colour, dashed when reversed
    (hollow markers), the random baseline black and dotted; width, marker and marker
    positions (markevery) by its place among the rankings, so no curve hides another."""
    colours = plots.plt.get_cmap('tab10')
    names = list(run.rankings)
    order, n = names.index(ranking), len(names)
    style = {'linewidth': NARROWEST_LINE + (WIDEST_LINE - NARROWEST_LINE) * (n - 1 - order)
             / max(n - 1, 1), 'marker': MARKERS[order % len(MARKERS)], 'markersize': 4.5,
             'markevery': (order, max(n, 5)) if run.curves else None}   # bins: every point
    if ranking == 'random':
        return dict(style, color='black', linestyle=':')
    method = ranking[len('reversed '):] if ranking.startswith('reversed ') else ranking
    index = run.methods.index(method) if method in run.methods else len(run.methods)
    reversed_ = ranking != method
    return dict(style, color=colours(index % 10), linestyle='--' if reversed_ else '-',
                markerfacecolor='none' if reversed_ else colours(index % 10))


def figure(run, summaries, title):
    """Mean deletion (top) and insertion (bottom) curves per ranking, one column per
    classifier; without curves, the comprehensiveness and sufficiency at the bins (all
    read from `run`; `summaries` is the report's, unused here)."""
    names = list(run.classifiers)
    figure, axes = plots.plt.subplots(2, len(names), figsize=(4.2 * len(names), 7.2),
                                      squeeze=False)
    kinds = (('deletion', 'insertion') if run.curves else ('comprehensiveness', 'sufficiency'))
    for column, name in enumerate(names):
        result = run.classifiers[name].result
        for row, kind in enumerate(kinds):
            ax = axes[row, column]
            for ranking in run.rankings:
                scores = result.methods[ranking]
                if run.curves:
                    curves = getattr(scores, kind + '_curves')
                    x, y = curve_stats.DEFAULT_GRID, curve_stats.mean_curve(curves)
                else:
                    x, y = result.fractions, getattr(scores, kind).mean(axis=0)
                ax.plot(x, y, label=ranking, **_style(run, ranking))
            ax.set_title('f = {}: {}'.format(name, kind), fontsize='medium')
            ax.set_xlabel('fraction of words {}'.format(
                {'deletion': 'removed', 'insertion': 'kept'}.get(kind, 'in the top-k')))
            ax.set_ylabel('mean f(y | variant)' if run.curves
                          else 'mean {}'.format(kind))
            ax.grid(alpha=0.3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    figure.legend(handles, labels, loc='center left', bbox_to_anchor=(1.0, 0.5),
                  fontsize='small', title='ranking ({})'.format(OVERLAP_NOTE),
                  title_fontsize='small')
    figure.suptitle(title, fontsize='medium')
    figure.tight_layout()
    return figure




# ---------------------------------------------------------------- across runs
# Which sign of a difference means the first method is the more faithful one.
HIGHER_IS_BETTER = {'aopc_comp': True, 'aopc_suff': False, 'deletion_auc': False,
                    'insertion_auc': True}
SUMMARY_COLUMNS = ['run', 'f', 'difference', 'n'] + list(HIGHER_IS_BETTER) + ['verdict']
# The cell of a measure a run's CSV lacks (a --no-curves run has no curve areas).
NOT_MEASURED = 'not measured'


def summary_rows(run_name, csv_rows_of_run):
    """One row per classifier f and paired difference (e.g. conformity - confidence) of
    one run's faithfulness CSV (CSV_COLUMNS, as read back: strings), with the four
    headline differences (mean [95% interval], NOT_MEASURED where the CSV has none) and
    the verdict of those it has."""
    grouped = {}
    for row in csv_rows_of_run:
        if row['section'] == 'difference' and row['measure'] in HIGHER_IS_BETTER:
            key = (row['classifier'], '{} - {}'.format(row['method'], row['baseline']))
            grouped.setdefault(key, {})[row['measure']] = row
    rows = []
    for (classifier, difference), measures in grouped.items():
        values = {m: tuple(float(r[k]) for k in ('mean', 'low', 'high'))
                  for m, r in measures.items()}
        rows.append(dict({'run': run_name, 'f': classifier, 'difference': difference,
                          'n': next(iter(measures.values()))['n'],
                          'verdict': verdict(values, HIGHER_IS_BETTER)},
                         **{m: signed_interval(*values[m]) if m in values else NOT_MEASURED
                            for m in HIGHER_IS_BETTER}))
    return rows
