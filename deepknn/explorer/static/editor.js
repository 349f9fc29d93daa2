// The example editor: an example's text fills the form; an edit of it is shown with what
// changed (predictions, words, maps, neighbours) against the example (/api/edit).
'use strict';

const signed = (value) => (value === null || value === undefined ? '—'
  : (value >= 0 ? '+' : '') + value.toFixed(3));

function changeRow(name, id, change, extra) {
  const top = (side) => Math.max(...change.values.map((v) => v[side]));
  return el('tr', {class: change.changed ? 'changed' : ''}, el('th', {}, name),
    el('td', {id: id + '-before'}, bdi(change.before)), el('td', {}, fmt(top('before'))),
    el('td', {id: id + '-after'}, bdi(change.after)), el('td', {}, fmt(top('after'))),
    el('td', {}, change.changed ? el('b', {class: 'wrong'}, 'prediction changed') : 'same',
       extra || null));
}

function wordDiff(words) {
  return words.map((w) => [w.op === 'same' ? bdi(w.word)
    : el(w.op === 'removed' ? 's' : 'ins', {class: 'w-' + w.op}, bdi(w.word)), ' ']);
}

function mapDiff(map) {
  return el('tr', {class: 'map-diff'}, el('td', {class: 'method'}, map.method),
    el('td', {class: 'prediction'}, bdi(map.before), ' → ', bdi(map.after)),
    el('td', {}, map.words.map((w) => [el('span', {class: 'w-' + w.op,
      title: 'importance before ' + fmt(w.before) + ', after ' + fmt(w.after)}, bdi(w.word),
      w.op === 'same' ? el('sub', {}, signed(w.after - w.before)) : null), ' '])));
}

function neighborDiff(layer) {
  const list = (items) => items.map((item) => [exampleLink('train', item.index,
    bdi(item.text)), ' (', bdi(item.label), ')', el('br', {})]);
  return el('tr', {class: 'neighbor-diff'}, el('td', {}, layer.name),
    el('td', {}, String(layer.stayed.length)), el('td', {class: 'left'}, list(layer.left)),
    el('td', {class: 'entered'}, list(layer.entered)));
}

function diffPanel(result, source) {
  const diff = result.diff;
  const rows = [changeRow('softmax', 'diff-softmax', diff.softmax)];
  if (diff.dknn) {
    rows.push(changeRow('DkNN', 'diff-dknn', diff.dknn, el('span', {id: 'diff-credibility'},
      ' credibility ' + fmt(diff.credibility.before) + ' → ' + fmt(diff.credibility.after)
      + ' (' + signed(diff.credibility.delta) + ')')));
  }
  return el('section', {id: 'diff'},
    el('h2', {}, 'Your edit of ', exampleLink(source.split, source.index,
      'example ' + source.index + ' of ', bdi(source.split)), ': what changed'),
    el('p', {id: 'diff-words'}, wordDiff(diff.words)),
    el('table', {class: 'diff-predictions'}, el('tr', {}, ['', 'example', 'probability',
      'edit', 'probability', ''].map((h) => el('th', {}, h))), rows),
    el('h3', {}, 'Maps (subscript: change of the normalised importance)'),
    el('table', {}, diff.maps.map(mapDiff)),
    el('h3', {}, 'Nearest training examples'),
    el('table', {class: 'neighbors-diff'}, el('tr', {}, ['layer', 'stayed', 'left',
      'entered'].map((h) => el('th', {}, h))), diff.neighbors.map(neighborDiff)));
}

// The fields of a form filled with a stored example's text, remembered as the edit's source.
function fillForm(form, answer) {
  const editable = answer.input.editable;
  for (const [name, value] of Object.entries(editable || {})) {
    if (form.elements[name]) form.elements[name].value = value;
  }
  if (answer.input.source) {
    form.dataset.fromSplit = answer.input.source.split;
    form.dataset.fromIndex = String(answer.input.source.index);
  }
}
