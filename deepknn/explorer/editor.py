"""The explorer's example editor: what an edit changes in predictions, maps and neighbours.

`diff(before, after)` compares two input views (session.predict answers: the stored
example and its edited text): each classifier's prediction and probabilities, the words
(aligned with difflib, so a kept word is compared with itself), each map's importance of
the kept words, and per layer the training neighbours that left, stayed and entered.
"""
import difflib

import nlp_utils


def editable_text(words):
    """A stored example's tokens as text to edit: tokenizing it again gives the tokens."""
    return ' '.join(nlp_utils.ptb_text(word) for word in words)


def aligned_words(before, after):
    """[(op, index before or None, index after or None)] of two word lists, op one of
    'same', 'removed', 'added', in reading order."""
    found = []
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == 'equal':
            found += [('same', i, j) for i, j in zip(range(i1, i2), range(j1, j2))]
            continue
        found += [('removed', i, None) for i in range(i1, i2)]
        found += [('added', None, j) for j in range(j1, j2)]
    return found


def prediction_change(before, after, key='probabilities'):
    """{'before', 'after', 'changed', 'values': [{'label', 'before', 'after', 'delta'}]} of
    one classifier's part of two answers (None where the run has no such classifier)."""
    if before is None or after is None:
        return None
    return {'before': before['prediction'], 'after': after['prediction'],
            'changed': before['prediction'] != after['prediction'],
            'values': [{'label': b['label'], 'before': b['value'], 'after': a['value'],
                        'delta': a['value'] - b['value']}
                       for b, a in zip(before[key], after[key])]}


def map_change(before, after):
    """One method's map of both answers: its prediction then and now, and per aligned
    word the normalised importance before and after (None where the word is absent)."""
    alignment = aligned_words([w['word'] for w in before['words']],
                              [w['word'] for w in after['words']])
    words = []
    for op, i, j in alignment:
        old = None if i is None else before['words'][i]
        new = None if j is None else after['words'][j]
        words.append({'op': op, 'word': (new or old)['word'],
                      'before': None if old is None else old['importance'],
                      'after': None if new is None else new['importance']})
    return {'method': before['method'], 'before': before['prediction'],
            'after': after['prediction'], 'words': words}


def neighbor_change(before, after):
    """Per layer: {'layer', 'name', 'stayed': [index], 'left': [item], 'entered': [item]}."""
    changes = []
    for old, new in zip(before, after):
        old_ids = [item['index'] for item in old['items']]
        new_ids = [item['index'] for item in new['items']]
        changes.append({'layer': new['layer'], 'name': new['name'],
                        'stayed': [i for i in new_ids if i in old_ids],
                        'left': [item for item in old['items'] if item['index'] not in new_ids],
                        'entered': [item for item in new['items'] if item['index'] not in old_ids]})
    return changes


def diff(before, after):
    """{'softmax', 'dknn', 'credibility', 'words', 'maps', 'neighbors'}: what changed
    from input view `before` to `after` ('words': the hypothesis of a pair)."""
    alignment = aligned_words(before['input']['words'], after['input']['words'])
    credibility = None if before['dknn'] is None else {
        'before': before['dknn']['credibility'], 'after': after['dknn']['credibility'],
        'delta': after['dknn']['credibility'] - before['dknn']['credibility']}
    return {'softmax': prediction_change(before['softmax'], after['softmax']),
            'dknn': prediction_change(before['dknn'], after['dknn'], 'p_values'),
            'credibility': credibility,
            'words': [{'op': op, 'word': after['input']['words'][j] if j is not None
                       else before['input']['words'][i]} for op, i, j in alignment],
            'maps': [map_change(b, a) for b, a in zip(before['maps'], after['maps'])],
            'neighbors': neighbor_change(before['neighbors'], after['neighbors'])}
