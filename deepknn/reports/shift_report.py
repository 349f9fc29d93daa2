"""The shift study's report: a Markdown page of tables (scorers x sets, each cell a value
and its 95% interval), the long CSV of every row, and three figures (risk-coverage
curves per set, misclassification AUROC per scorer with intervals, conformal coverage
against alpha under shift).
"""
import matplotlib.pyplot as plt
import numpy as np

from deepknn.reports import plots, tables

CSV_COLUMNS = ['run', 'set', 'role', 'scorer', 'measure', 'value', 'low', 'high', 'n']
# (measure, what it says, higher is better)
MEASURES = (
    ('auroc', 'misclassification detection: AUROC of right vs wrong softmax predictions', True),
    ('aupr_error', 'misclassification detection: AUPR of finding the wrong predictions', True),
    ('aurc', 'selective prediction: area under the risk-coverage curve', False),
    ('accuracy@80%', 'selective prediction: accuracy on the 80% most trusted', True),
    ('accuracy@90%', 'selective prediction: accuracy on the 90% most trusted', True),
    ('ood_auroc', 'out-of-distribution detection: AUROC of the test set vs the other task', True),
    ('fpr@95%tpr', 'out-of-distribution detection: FPR at 95% TPR', False),
    ('ece', 'calibration: expected calibration error (15 bins)', False))
# temperature ranks as msp does (T > 0), so its curve would hide msp's.
CURVE_SCORERS = ('msp', 'mahalanobis', 'knn-sun-k50', 'dknn-credibility',
                 'dknn-selected')


def interval_cell(row):
    return '{:.3f} [{:.3f}, {:.3f}]'.format(row['value'], row['low'], row['high']) \
        if row['n'] else ''


def measure_table(rows, measure, scorers):
    """Markdown: one row per scorer, one column per set, of one measure ('' if none)."""
    found = [r for r in rows if r['measure'] == measure and r['scorer'] in scorers]
    if not found:
        return ''
    sets = list(dict.fromkeys(r['set'] for r in found))
    cells = {(r['scorer'], r['set']): interval_cell(r) for r in found}
    table = [dict({'scorer': s}, **{name: cells.get((s, name), '') for name in sets})
             for s in scorers if any((s, name) in cells for name in sets)]
    return tables.markdown_table(table, ['scorer'] + sets)


def conformal_table(rows):
    """Markdown: coverage and set size per set, way of calibrating and alpha."""
    found = [r for r in rows if r['measure'].startswith(('coverage', 'set_size'))]
    measures = list(dict.fromkeys(r['measure'] for r in found))
    keys = list(dict.fromkeys((r['set'], r['scorer']) for r in found))
    cells = {(r['set'], r['scorer'], r['measure']): interval_cell(r) for r in found}
    table = [dict({'set': s, 'calibrated': way}, **{m: cells.get((s, way, m), '')
                                                   for m in measures}) for s, way in keys]
    return tables.markdown_table(table, ['set', 'calibrated'] + measures) if table else ''


def layer_table(rows, n_layers, layer_aurocs, selected):
    """Markdown: per DkNN layer, misclassification AUROC on each set of the layer's
    Mahalanobis, relative Mahalanobis and one-layer DkNN credibility, and the layer's
    AUROC on the calibration split's second half (how dknn-selected chose)."""
    found = {(r['scorer'], r['set']): interval_cell(r) for r in rows if r['measure'] == 'auroc'}
    sets = list(dict.fromkeys(r['set'] for r in rows if r['measure'] == 'auroc'))
    table = []
    for layer in range(n_layers):
        for kind in ('mahalanobis', 'relative-mahalanobis', 'dknn-layer'):
            label = '{}@{}'.format(kind, layer)
            table.append(dict({'layer': layer, 'scorer': kind, 'calibration half': (
                '{:.3f}'.format(layer_aurocs[layer]) if kind == 'dknn-layer' else '') + (
                ' (chosen)' if kind == 'dknn-layer' and layer in selected else '')},
                **{s: found.get((label, s), '') for s in sets}))
    return tables.markdown_table(table, ['layer', 'scorer', 'calibration half'] + sets)


def headline(scorers):
    """The scorers of the headline tables: all but the per-layer ones ('name@layer')."""
    return [s for s in scorers if '@' not in s]


def markdown_text(rows, header, scorers, n_layers, layer_aurocs, selected):
    """The report page: the header, then a table per measure, conformal, per layer."""
    parts = [header]
    for measure, meaning, higher in MEASURES:
        table = measure_table(rows, measure, headline(scorers))
        if table:
            parts.append('## {} ({} is better)\n\n{}'.format(
                meaning, 'higher' if higher else 'lower', table))
    parts.append('## Conformal prediction sets of the DkNN: coverage (target 1 - alpha) and '
                 'mean set size\n\n' + conformal_table(rows))
    parts.append('## Per layer: misclassification AUROC\n\n' + layer_table(
        rows, n_layers, layer_aurocs, selected))
    return '\n'.join(parts)


def _grid(n_panels, width=4.2, height=3.4):
    columns = min(n_panels, 3)
    n_rows = -(-n_panels // columns)
    figure, axes = plt.subplots(n_rows, columns, figsize=(width * columns, height * n_rows),
                                squeeze=False)
    for axis in axes.ravel()[n_panels:]:
        axis.set_visible(False)
    return figure, axes.ravel()


def risk_coverage_figure(curves, title):
    """curves {set: {scorer: (coverage, risk)}} -> one panel per set."""
    figure, axes = _grid(len(curves))
    for axis, (name, by_scorer) in zip(axes, curves.items()):
        for scorer, (coverage, risk) in by_scorer.items():
            axis.step(coverage, risk, where='post', label=scorer)
        axis.set(title=name, xlabel='coverage', ylabel='risk (error rate)', xlim=(0, 1))
    axes[0].legend(**plots.LEGEND_OUTSIDE) if len(curves) == 1 else \
        figure.legend(*axes[0].get_legend_handles_labels(), loc='upper left',
                      bbox_to_anchor=(1.0, 0.95))
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def auroc_figure(rows, scorers, title, measure='auroc'):
    """Horizontal bars of a measure per scorer with its interval, a panel per set."""
    sets = list(dict.fromkeys(r['set'] for r in rows if r['measure'] == measure))
    figure, axes = _grid(len(sets), 4.2, 0.3 * len(scorers) + 1.2)
    for axis, name in zip(axes, sets):
        found = {r['scorer']: r for r in rows if r['measure'] == measure and r['set'] == name}
        shown = [s for s in scorers if s in found]
        values = np.array([found[s]['value'] for s in shown])
        errors = np.array([[found[s]['value'] - found[s]['low'] for s in shown],
                           [found[s]['high'] - found[s]['value'] for s in shown]])
        axis.barh(range(len(shown)), values, xerr=errors, color='tab:blue', capsize=2)
        axis.axvline(0.5, color='grey', linestyle=':', linewidth=1)
        axis.set(yticks=range(len(shown)), yticklabels=shown, title=name, xlabel=measure,
                 xlim=(0, 1))
        axis.invert_yaxis()
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def coverage_figure(curves, alphas, title):
    """curves {set: {way: coverage (len(alphas),)}} -> coverage against alpha per set,
    with the 1 - alpha target."""
    figure, axes = _grid(len(curves))
    for axis, (name, by_way) in zip(axes, curves.items()):
        axis.plot(alphas, 1 - np.asarray(alphas), color='black', linestyle=':',
                  label='target 1 - alpha')
        for way, coverage in by_way.items():
            axis.plot(alphas, coverage, label='DkNN, ' + way)
        axis.set(title=name, xlabel='alpha', ylabel='coverage')
    figure.legend(*axes[0].get_legend_handles_labels(), loc='upper left',
                  bbox_to_anchor=(1.0, 0.95))
    figure.suptitle(title)
    figure.tight_layout()
    return figure

SEED_COLUMNS = ['set', 'role', 'scorer', 'measure', 'mean', 'min', 'max', 'runs',
                'vs msp: better / worse / overlapping']


def seed_rows(rows, scorers, measures=('auroc', 'aurc', 'ood_auroc', 'ece')):
    """Over the runs of one recipe (rows carry 'run'): per set, scorer and measure, the
    mean, min and max of the value and in how many runs its 95% interval lies wholly on
    the better side of max softmax's, wholly on the worse side, or overlaps it."""
    better_high = {measure: higher for measure, _, higher in MEASURES}
    found = {}
    for row in rows:
        if row['measure'] in measures and row['scorer'] in scorers and row['n']:
            found.setdefault((row['set'], row['scorer'], row['measure']), []).append(row)
    out = []
    for (name, scorer, measure), runs in found.items():
        values = np.array([r['value'] for r in runs])
        counts = [0, 0, 0]
        for r in runs:
            msp = next((m for m in found.get((name, 'msp', measure), [])
                        if m['run'] == r['run']), None)
            if msp is None or scorer == 'msp':
                continue
            above, below = r['low'] > msp['high'], r['high'] < msp['low']
            counts[0 if (above if better_high[measure] else below) else
                   1 if (below if better_high[measure] else above) else 2] += 1
        out.append({'set': name, 'role': runs[0]['role'], 'scorer': scorer, 'measure': measure,
                    'mean': '{:.3f}'.format(values.mean()), 'min': '{:.3f}'.format(values.min()),
                    'max': '{:.3f}'.format(values.max()), 'runs': len(runs),
                    'vs msp: better / worse / overlapping': '' if scorer == 'msp'
                    else '{} / {} / {}'.format(*counts)})
    return out


SUMMARY_COLUMNS = ['pair', 'set', 'role', 'measure', 'runs', 'msp', 'dknn-credibility',
                   'credibility vs msp', 'best scorer', 'best', 'best vs msp']


def summary_rows(pair_rows, measures=('auroc', 'ood_auroc')):
    """pair_rows {pair name: rows of its _seeds table (strings, as read back)} -> one row
    per pair, set and measure: max softmax's and DkNN credibility's mean [min, max] over
    the runs, the scorer of the best mean (higher AUROC) and each against max softmax
    (runs better / worse / overlapping, by 95% intervals)."""
    cell = lambda r: '{} [{}, {}]'.format(r['mean'], r['min'], r['max'])
    out = []
    for pair, rows in pair_rows.items():
        keys = list(dict.fromkeys((r['set'], r['role'], r['measure']) for r in rows
                                  if r['measure'] in measures))
        for name, role, measure in keys:
            found = {r['scorer']: r for r in rows
                     if (r['set'], r['measure']) == (name, measure)}
            if 'msp' not in found or 'dknn-credibility' not in found:
                continue
            best = max(found.values(), key=lambda r: float(r['mean']))
            out.append({'pair': pair, 'set': name, 'role': role, 'measure': measure,
                        'runs': found['msp']['runs'], 'msp': cell(found['msp']),
                        'dknn-credibility': cell(found['dknn-credibility']),
                        'credibility vs msp': found['dknn-credibility'][SEED_COLUMNS[-1]],
                        'best scorer': best['scorer'], 'best': cell(best),
                        'best vs msp': best[SEED_COLUMNS[-1]] or 'is msp'})
    return out


CONFORMAL_COLUMNS = ['pair', 'set', 'calibrated', 'runs', 'coverage@alpha=0.1',
                     'set_size@alpha=0.1', 'coverage@alpha=0.05', 'set_size@alpha=0.05']


def conformal_summary_rows(pair_rows):
    """pair_rows {pair: rows of its long CSV (strings, every run)} -> per pair, set and
    way of calibrating: each conformal measure's mean [min, max] over the runs."""
    out = []
    for pair, rows in pair_rows.items():
        found = {}
        for r in rows:
            if r['measure'] in CONFORMAL_COLUMNS and r['n'] not in ('', '0'):
                found.setdefault((r['set'], r['scorer']), {}).setdefault(
                    r['measure'], []).append(float(r['value']))
        for (name, way), measures in found.items():
            out.append(dict({'pair': pair, 'set': name, 'calibrated': way,
                             'runs': len(next(iter(measures.values())))},
                            **{m: '{:.3f} [{:.3f}, {:.3f}]'.format(np.mean(v), min(v), max(v))
                               for m, v in measures.items()}))
    return out
