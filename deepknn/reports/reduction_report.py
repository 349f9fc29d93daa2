"""Rendering of input reduction results: JSON lines, the paper's Figures 3 and 4, HTML.

Takes input_reduction.Reduction lists and the `before_after` view (dict of (N,)
arrays); computes nothing about the model.
"""
import html
import json

import numpy as np

import nlp_utils
from deepknn.reports import plots
from deepknn.reports import saliency_report
import matplotlib.pyplot as plt  # noqa: E402 (plots chose the backend)


def records(reductions, view, label_names, vocab):
    """One JSON-ready dict per reduction: texts (unknown words as '<word>'), the
    prediction kept, softmax confidence (and DkNN credibility) before and after."""
    shown = lambda tokens: ' '.join(saliency_report.display_tokens(tokens, vocab))
    rows = []
    for i, r in enumerate(reductions):
        row = {'original': shown(r.original), 'reduced': shown(r.reduced),
               'all_reduced': [shown(tokens) for tokens in r.all_reduced],
               'original_length': len(r.original), 'reduced_length': len(r.reduced),
               'prediction': label_names[r.prediction],
               'gold': None if r.label is None else label_names[r.label],
               'score_before': r.score_before, 'score_after': r.score_after}
        if r.premise is not None:
            row['premise'] = shown(r.premise)
        for key, value in view.items():
            value = value[i].item()
            row[key] = label_names[value] if key.endswith('prediction_before') or \
                key.endswith('prediction_after') else value
        rows.append(row)
    return rows


def jsonl_write(path, rows):
    """(path, write, mode) of the records as JSON lines, for nlp_utils.atomic_write_files."""
    text = ''.join(json.dumps(row, sort_keys=True) + '\n' for row in rows)
    return path, lambda f: f.write(text), 'w'


def length_histogram(path, reductions, title):
    """Figure 3: how many inputs have each length, before and after reduction; (path,
    write, mode) of the PNG for nlp_utils.atomic_write_files."""
    before = [len(r.original) for r in reductions]
    after = [len(r.reduced) for r in reductions]
    bins = np.arange(0.5, max(before) + 1.5)
    figure, axes = plt.subplots(figsize=(6, 3.5))
    axes.hist(before, bins=bins, alpha=0.6, label='original (mean {:.2f})'.format(np.mean(before)))
    axes.hist(after, bins=bins, alpha=0.6, label='reduced (mean {:.2f})'.format(np.mean(after)))
    axes.set_xlabel('input length (words)')
    axes.set_ylabel('inputs')
    axes.set_title(title)
    axes.legend(**plots.LEGEND_OUTSIDE)
    return plots.figure_write(figure, path)


def confidence_density(path, view, title):
    """Figure 4: density of the softmax confidence (and DkNN credibility) before and
    after reduction, as normalised step histograms over [0, 1]; (path, write, mode) of
    the PNG for nlp_utils.atomic_write_files."""
    figure, axes = plt.subplots(figsize=(6, 3.5))
    bins = np.linspace(0, 1, 21)
    for key, colour in (('confidence', 'tab:blue'), ('credibility', 'tab:green')):
        if key + '_before' not in view:
            continue
        for when, style in (('before', '-'), ('after', '--')):
            values = view['{}_{}'.format(key, when)]
            axes.hist(values, bins=bins, density=True, histtype='step', color=colour,
                      linestyle=style, linewidth=1.5, label='{} {} (mean {:.2f})'.format(
                          'softmax confidence' if key == 'confidence' else 'DkNN credibility',
                          'original' if when == 'before' else 'reduced', np.mean(values)))
    axes.set_xlabel('confidence / credibility')
    axes.set_ylabel('density')
    axes.set_title(title)
    axes.legend(fontsize='small', **plots.LEGEND_OUTSIDE)
    return plots.figure_write(figure, path)


REPORT_STYLE = saliency_report.HTML_STYLE + """
td.text { max-width: 40em; }
.removed { color: #999; text-decoration: line-through; }
th { text-align: left; padding: .25em .6em; border-bottom: 1px solid #ccc; }
"""


def _original_html(reduction, vocab):
    """The original words, those the reduction removed struck through."""
    kept = set(reduction.kept)
    return ' '.join(saliency_report.isolated(shown) if i in kept else
                    '<span class="removed">{}</span>'.format(saliency_report.isolated(shown))
                    for i, shown in enumerate(saliency_report.display_tokens(reduction.original,
                                                                             vocab)))


def html_page(rows, reductions, vocab, title):
    """Self-contained page: per input the premise (pairs), original (removed words
    struck through) and reduced text, prediction, and the scores before -> after.
    rows: records(...) of the same reductions."""
    lines = ['<tr><th>#</th><th>original</th><th>reduced</th><th>prediction</th>'
             '<th>confidence</th><th>credibility</th></tr>']
    for number, (row, reduction) in enumerate(zip(rows, reductions), 1):
        premise = ('<div class="premise">Premise: {}</div>'.format(
                       saliency_report.isolated(row['premise']))
                   if 'premise' in row else '')
        credibility = ('{:.3f} &rarr; {:.3f}'.format(row['credibility_before'],
                                                     row['credibility_after'])
                       if 'credibility_before' in row else '')
        lines.append('<tr><td>{}</td><td class="text">{}{}</td><td class="text"><b>{}</b></td>'
                     '<td class="prediction">{}</td><td>{:.3f} &rarr; {:.3f}</td><td>{}</td>'
                     '</tr>'.format(number, premise, _original_html(reduction, vocab),
                                    saliency_report.isolated(row['reduced']),
                                    saliency_report.isolated(row['prediction']),
                                    row['confidence_before'], row['confidence_after'],
                                    credibility))
    return ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title>'
            '<style>{style}</style></head>\n<body><h1>{title}</h1>\n<p>Struck-through words '
            'were removed; the prediction is the same before and after. Confidence: softmax '
            'probability of the prediction; credibility: DkNN.</p>\n<table>\n{rows}\n'
            '</table>\n</body></html>\n').format(title=html.escape(title), style=REPORT_STYLE,
                                                 rows='\n'.join(lines))
