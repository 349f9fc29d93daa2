"""Rendering for kNN representations: explanation records (JSON), their HTML page and
the mislabeled-detection recall figure (the table rows are in knn_tables.py).

Reuses saliency_report.py's page style and text helpers; every text is escaped.
"""
import html

import numpy as np

from deepknn.reports import saliency_report
import nlp_utils
from deepknn.reports import plots  # noqa: I100 (selects the headless backend before pyplot is imported)
import matplotlib.pyplot as plt  # noqa: E402


def explanation_records(examples, positions, model_proba, neighbors, knn_proba, train_examples,
                        label_names, vocab):
    """One JSON-ready dict per explained example: its text, gold label, model and kNN
    predictions, the kNN vote per label and its k nearest training examples.

    examples: token-level (tokens, label) of the split; positions: the explained rows
    (M,); model_proba, knn_proba (M, C); neighbors: Neighbors (M, k)."""
    text = lambda tokens: saliency_report.example_text(tokens, vocab)
    records = []
    for row, position in enumerate(positions):
        tokens, gold = examples[position]
        records.append({
            'example': int(position), 'text': text(tokens), 'gold': label_names[gold],
            'model_prediction': label_names[int(model_proba[row].argmax())],
            'model_probability': float(model_proba[row].max()),
            'knn_prediction': label_names[int(knn_proba[row].argmax())],
            'knn_vote': {name: float(p) for name, p in zip(label_names, knn_proba[row])},
            'neighbors': [{'train_index': int(i), 'text': text(train_examples[i][0]),
                           'label': label_names[int(label)], 'sq_distance': float(d)}
                          for i, label, d in zip(neighbors.indices[row], neighbors.labels[row],
                                                 neighbors.sq_distances[row])]})
    return records


def _prediction_html(record):
    """The model's and the kNN's predictions and the nearest training examples."""
    vote = ', '.join('{} {:.3f}'.format(saliency_report.isolated(name), p)
                     for name, p in record['knn_vote'].items())
    rows = ''.join('<tr><td>{}</td><td>{}</td><td class="prediction">{}</td>'
                   '<td class="prediction">{:.2f}</td></tr>'.format(
                       n + 1, saliency_report.isolated(item['text']),
                       saliency_report.isolated(item['label']),
                       item['sq_distance'])
                   for n, item in enumerate(record['neighbors']))
    return ('<table><tr><td class="method">model</td><td class="prediction">{} ({:.3f})</td></tr>'
            '<tr><td class="method">kNN vote</td><td class="prediction">{} ({})</td></tr></table>'
            '<div class="neighbors">Nearest training examples (label, squared distance):'
            '<table>{}</table></div>').format(
                saliency_report.isolated(record['model_prediction']), record['model_probability'],
                saliency_report.isolated(record['knn_prediction']), vote, rows)


def _example_html(record, body):
    return '<section><div>Example {} — gold: <b>{}</b></div><div>{}</div>{}</section>'.format(
        record['example'], saliency_report.isolated(record['gold']),
        saliency_report.isolated(record['text']), body)


def _page(title, body, note):
    """A self-contained HTML page in the style of the saliency maps; `note` (the models read
    and the command, as the tables carry them) goes under the title."""
    return ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title>'
            '<style>{style}</style></head>\n<body><h1>{title}</h1>\n<p class="settings">{note}'
            '</p>\n{body}\n</body></html>\n').format(
                title=html.escape(title), style=saliency_report.HTML_STYLE, body=body,
                note=html.escape(note.replace('`', '')))   # backticks: Markdown quoting


def explanation_html(records, title, note):
    """One section per explained example."""
    return _page(title, '\n'.join(_example_html(record, _prediction_html(record))
                                   for record in records), note)


def contrast_html(records, run_names, title, note):
    """records: per run, the explanation records of the same examples; one section per
    example with each run's predictions and neighbours (the paper's Tables 1 and 2)."""
    sections = []
    for same in zip(*records):
        body = ''.join('<h3>{}</h3>{}'.format(saliency_report.isolated(name), _prediction_html(r))
                       for name, r in zip(run_names, same))
        sections.append(_example_html(same[0], body))
    return _page(title, '\n'.join(sections), note)


def write_explanations(path_stem, records, title, note):
    nlp_utils.atomic_write_json(path_stem + '.json', records)
    nlp_utils.atomic_write_text(path_stem + '.html', explanation_html(records, title, note))


def recall_figure(path, fractions, curves, points, title):
    """The paper's Figure 4: recall of the flipped labels vs fraction of the training
    set inspected. curves: {ranking name: [(F,) recall per seed]} drawn as the seed
    mean with the seed range shaded; points: {flagging method: [(fraction, recall) per
    seed]} for methods that flag a set instead of ranking (the kNN rule, cleanlab)."""
    figure, axes = plt.subplots(figsize=(6, 6.5))
    for name, per_seed in curves.items():
        per_seed = np.asarray(per_seed)
        line, = axes.plot(fractions, per_seed.mean(axis=0), label='{} ranking (mean of {})'
                          .format(name, nlp_utils.count(len(per_seed), 'seed')))
        axes.fill_between(fractions, per_seed.min(axis=0), per_seed.max(axis=0),
                          color=line.get_color(), alpha=0.2)
    for (name, per_seed), marker in zip(points.items(), '*^sDv'):
        xs, ys = zip(*per_seed)
        axes.scatter(xs, ys, color='black', marker=marker, s=70, zorder=3,
                     label='{}: flagged set (one point per seed)'.format(name))
    axes.plot([0, 1], [0, 1], linestyle=':', color='gray', label='random ranking')
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1.02)
    axes.set_xlabel('fraction of the training set inspected')
    axes.set_ylabel('recall of the flipped labels')
    axes.set_title(title)
    # below the axes: inside, it would cover the curves' steep start
    axes.legend(loc='upper center', bbox_to_anchor=(0.5, -0.12), fontsize='small')
    plots.save_figure(figure, path)
