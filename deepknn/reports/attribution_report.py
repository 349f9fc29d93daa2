"""Tables, figure and example lists of the attribution study (deepknn/attribution/study.py):
per run, over runs (training seeds), noisy-label detection, and where methods disagree."""
import matplotlib.pyplot as plt
import numpy as np

from deepknn.evaluation.statistics import bootstrap_ci, paired_bootstrap_ci
from deepknn.reports.tables import interval_text, number, signed_interval

RUN_COLUMNS = ['run', 'method', 'identical_class', 'identical_subclass', 'lds',
               'lds_minus_reference', 'fit_s', 'per_input_s', 'per_input_vs_forward']
# measure -> the per-input array of a study row it is the mean of
MEASURES = {'identical_class': 'same_class', 'identical_subclass': 'same_subclass',
            'lds': 'lds'}
CSV_COLUMNS = ['run', 'method'] + [m + suffix for m in MEASURES
                                   for suffix in ('', '_low', '_high')] \
    + ['lds_n', 'fit_s', 'per_input_s', 'forward_per_input_s']
SEED_COLUMNS = ['method', 'runs', 'identical_class', 'identical_subclass', 'lds']
NOISY_COLUMNS = ['run', 'method', 'average_precision', 'auroc', 'precision_at_k']
NOISY_SEED_COLUMNS = ['method', 'runs', 'average_precision', 'auroc', 'precision_at_k']
REFERENCE = 'dknn-vote signed'    # the DkNN's own evidence: the paired differences' baseline
EXAMPLE_METHODS = ('knn l2, {penultimate}', 'dknn-vote signed', 'representer', 'tracin-last',
                   'trak')


def with_intervals(rows):
    """`rows` (the study's, one per variant), each given 'intervals': {measure: the
    bootstrap Interval over test inputs} of the MEASURES it has; computed once for the
    CSV, the Markdown table and the figure."""
    for row in rows:
        row['intervals'] = {measure: bootstrap_ci(np.asarray(row[key], dtype=np.float64))
                            for measure, key in MEASURES.items() if key in row}
    return rows


def long_rows(run, rows, forward_s):
    """CSV rows (numbers) of one run's measured variants (rows of with_intervals)."""
    out = []
    for row in rows:
        cells = {'run': run, 'method': row['variant'].label, 'fit_s': row['fit_s'],
                 'per_input_s': row['per_input_s'], 'forward_per_input_s': forward_s,
                 'lds_n': row['intervals']['lds'].n if 'lds' in row['intervals'] else 0}
        for measure in MEASURES:
            found = row['intervals'].get(measure)
            cells.update({measure: found.mean if found else '',
                          measure + '_low': found.low if found else '',
                          measure + '_high': found.high if found else ''})
        out.append(cells)
    return out


def run_table(run, rows, forward_s):
    """Markdown rows of one run (rows of with_intervals): intervals, the LDS paired with
    the reference method's, and the cost beside the forward pass."""
    reference = next((r for r in rows if r['variant'].label == REFERENCE), None)
    table = []
    for row in rows:
        paired = ''
        if 'lds' in row and reference is not None and row is not reference:
            d = paired_bootstrap_ci(row['lds'], reference['lds'])
            paired = signed_interval(d.mean, d.low, d.high)
        table.append({'run': run, 'method': row['variant'].label,
                      **{m: interval_text(row['intervals'][m]) if m in row['intervals']
                         else '' for m in MEASURES},
                      'lds_minus_reference': paired, 'fit_s': number(row['fit_s'], 2),
                      'per_input_s': '{:.2g}'.format(row['per_input_s']),
                      'per_input_vs_forward': '{:.1f}x'.format(row['per_input_s'] / forward_s)})
    return table


def _spread(values):
    """'0.612 [0.600, 0.630]': mean [min, max] over runs; '' without values."""
    values = [v for v in values if v != '' and not np.isnan(v)]
    if not values:
        return ''
    return '{} [{}, {}]'.format(number(np.mean(values)), number(min(values)), number(max(values)))


def seed_table(long, columns, measures):
    """One row per method: each measure's mean [min, max] over the runs that have it."""
    methods = list(dict.fromkeys(r['method'] for r in long))
    table = []
    for method in methods:
        found = [r for r in long if r['method'] == method]
        row = {'method': method, 'runs': len(found)}
        row.update({m: _spread([r[m] for r in found]) for m in measures})
        table.append({c: row[c] for c in columns})
    return table


def noisy_long_rows(run, rows):
    return [{'run': run, 'method': r['variant'].label,
             **{m: r[m] for m in ('average_precision', 'auroc', 'precision_at_k')}}
            for r in rows]


def noisy_table(long):
    return [dict(r, **{m: number(r[m]) for m in ('average_precision', 'auroc',
                                                 'precision_at_k')}) for r in long]


FIGURE_PANELS = (('lds', 'LDS (Spearman)'), ('identical_class', 'identical class (share)'),
                 ('identical_subclass', 'identical subclass (share)'))


def measures_figure(rows, title):
    """Horizontal bars per method, one panel per measure the rows have (LDS, identical
    class, identical subclass): the mean over test inputs with its 95% interval, one run
    (rows of with_intervals)."""
    panels = [(key, label) for key, label in FIGURE_PANELS if key in rows[0]['intervals']]
    figure, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels) + 2.5,
                                                         0.28 * len(rows) + 1.5),
                                sharey=True, squeeze=False)
    for axis, (key, label) in zip(axes[0], panels):
        intervals = [r['intervals'][key] for r in rows]
        means = np.array([i.mean for i in intervals])
        errors = np.array([[i.mean - i.low for i in intervals],
                           [i.high - i.mean for i in intervals]])
        axis.barh(range(len(rows)), means, xerr=errors, color='tab:blue', capsize=2)
        axis.axvline(0, color='grey', linewidth=1)
        axis.set(yticks=range(len(rows)), yticklabels=[r['variant'].label for r in rows],
                 xlabel=label)
    axes[0, 0].invert_yaxis()
    figure.suptitle(title)
    figure.tight_layout()
    return figure


def example_methods(rows):
    """The labels of the methods the example lists compare, as they appear in `rows`."""
    labels = [r['variant'].label for r in rows]
    penultimate = next((lab.split(', ', 1)[1] for lab in labels
                        if lab.startswith('knn l2, ') and 'penultimate' in lab), '')
    wanted = [m.format(penultimate=penultimate) for m in EXAMPLE_METHODS]
    return [m for m in wanted if m in labels]


def disagreements(rows, n_examples=3):
    """Positions (in the test sample) of up to n_examples inputs on which the compared
    methods' top training rows differ most (most distinct top-1 rows, then the first)."""
    chosen = example_methods(rows)
    by_label = {r['variant'].label: r for r in rows}
    tops = np.stack([by_label[m]['top'][:, 0] for m in chosen], axis=1)
    distinct = np.array([len(set(t)) for t in tops])
    return np.lexsort((np.arange(len(distinct)), -distinct))[:n_examples], chosen


def examples_page(rows, test_texts, test_labels, predictions, train_texts, train_labels,
                  label_names, header, n_top=3):
    """Markdown: for inputs where the methods disagree, each method's top training
    examples (text, label), as the explorer lists neighbours."""
    positions, chosen = disagreements(rows)
    by_label = {r['variant'].label: r for r in rows}
    lines = [header]
    for p in positions:
        lines.append('## "{}"\n\ngold {}, predicted {}\n'.format(
            test_texts[p], label_names[test_labels[p]], label_names[predictions[p]]))
        for method in chosen:
            lines.append('**{}**\n'.format(method))
            for i in by_label[method]['top'][p, :n_top]:
                lines.append('1. [{}] {}'.format(label_names[train_labels[i]],
                                                 train_texts[i].replace('\n', ' ')))
            lines.append('')
    return '\n'.join(lines) + '\n'
