"""The explorer's parts of one input's answer as JSON: probabilities, maps, legend, word pieces.

Plain functions of the loaded run's outputs (session.py calls them under its lock, or
after): the colours are the static pages' (saliency_report.py).
"""
import numpy as np

from deepknn.interpret import saliency
from deepknn.reports import saliency_report


def word_pieces(model, words):
    """[[piece, ...] per word] of a transformer run's tokenizer (an unseen word's
    split shown), None for a model of whole words."""
    pieces = getattr(model, 'wordpieces', None)
    if pieces is None:
        return None
    return [[pieces.tokenizer.id_to_token(i) for i in pieces.pieces(word)] for word in words]


def layer_name(layer, n_layers):
    return 'logits (last DkNN layer)' if layer == n_layers - 1 else \
        'layer {} of {}'.format(layer + 1, n_layers)


def probabilities(values, names, key='probabilities'):
    """{'prediction': the argmax's name, key: [{'label', 'value'}]} of one (C,) vector."""
    return {'prediction': names[int(np.argmax(values))],
            key: [{'label': name, 'value': float(v)} for name, v in zip(names, values)]}


def map_views(results, setup, names):
    """{method: [Interpretation]} of one input -> a list of JSON maps, words with the
    static pages' colours."""
    if not results:
        return []
    view, = saliency_report.build_views(results, setup.vocab, names)
    maps = []
    for method_map, (method, (found,)) in zip(view.maps, results.items()):
        words = []
        for word, token, value in zip(method_map.words, found.tokens, method_map.importance):
            r, g, b, alpha = saliency_report.word_colour(value, view.pair)
            words.append({'word': word, 'unknown': token not in setup.vocab,
                          'importance': None if np.isnan(value) else float(value),
                          'colour': 'rgba({},{},{},{:.3f})'.format(r, g, b, alpha),
                          'light_text': bool(alpha > 0.6)})
        maps.append({'method': method, 'prediction': method_map.prediction,
                     'score': float(method_map.score),
                     'score_meaning': saliency.REGISTRY[method].score_meaning,
                     'correct': method_map.correct, 'words': words})
    return maps


def legend(pair):
    """The static pages' colour legend: [{'colour', 'name', 'meaning'}]."""
    return [{'colour': 'rgb({},{},{})'.format(*rgb), 'name': name, 'meaning': meaning}
            for rgb, name, meaning in saliency_report.legend_items(pair)]


def attribution_view(method, indices, scores, prediction, train, setup):
    """{'method', 'items': [{index, text, label, score, agrees}]} of one input's top
    training examples by an attribution method; agrees: the example's label is the
    softmax prediction the method explains."""
    items = []
    for index, score in zip(indices, scores):
        tokens, label = train[int(index)]
        items.append({'index': int(index), 'label': setup.label_names[label],
                      'text': saliency_report.example_text(tokens, setup.vocab),
                      'score': float(score), 'agrees': int(label) == prediction})
    return {'method': method, 'items': items}
