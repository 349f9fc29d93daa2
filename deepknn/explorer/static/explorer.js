// The explorer's views, drawn from the JSON API (explore.py) or, in a static export,
// from window.EXPLORER_DATA (data.js). Every text goes into the page as a text node
// inside <bdi> (escaped and direction-isolated); no HTML is built from strings.
'use strict';

const STATIC = window.EXPLORER_DATA || null;

// ------------------------------------------------------------------ DOM helpers
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === 'style') Object.assign(node.style, value);
    else if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? '' : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(typeof child === 'string' || typeof child === 'number'
      ? document.createTextNode(String(child)) : child);
  }
  return node;
}
const bdi = (text) => el('bdi', {}, text);
const fmt = (value) => (value === null || value === undefined ? '—' : value.toFixed(3));
const main = () => document.getElementById('view');

// An error goes under the view's form (or on top): what was typed or chosen stays.
function showError(message) {
  const view = main();
  view.querySelectorAll('#error, .busy').forEach((node) => node.remove());
  const line = el('p', {class: 'error', id: 'error', role: 'alert'}, bdi(message));
  const form = view.querySelector('form');
  if (form) form.after(line); else view.prepend(line);
}

// ------------------------------------------------------------------ data sources
async function request(path, body) {
  const options = body === undefined ? {} : {method: 'POST', body: JSON.stringify(body),
    headers: {'Content-Type': 'application/json'}};
  const response = await fetch(path, options);
  const answer = await response.json().catch(() => ({error: response.statusText}));
  if (!response.ok) throw new Error(answer.error || response.statusText);
  return answer;
}

const serverApi = {
  info: () => request('api/info'),
  predict: (body) => request('api/predict', body),
  reduce: (body) => request('api/reduce', body),
  edit: (body) => request('api/edit', body),
  dataset: (params) => request('api/dataset?' + new URLSearchParams(params)),
  training: (split) => request('api/training?' + new URLSearchParams({split})),
  metrics: (split) => request('api/metrics?' + new URLSearchParams({split})),
  embedding: (layer) => request('api/embedding?' + new URLSearchParams({layer})),
  embed: (body) => request('api/embed', body),
};

// The static export holds a few examples with every answer precomputed.
const staticApi = {
  info: async () => STATIC.info,
  predict: async (body) => {
    const found = body.split !== undefined && (STATIC.examples[body.split] || {})[body.index];
    if (!found) throw new Error('this static export holds only its exported examples; '
                                + 'run explore.py to explore others or your own text');
    return found;
  },
  reduce: async () => { throw new Error('input reduction needs the running explore.py'); },
  edit: async () => { throw new Error('an edited text needs the running explore.py'); },
  dataset: async (params) => pageOf(STATIC.rows[params.split] || [], params, params.split),
  training: async () => { throw new Error('the training-set view needs the running explore.py'); },
  embedding: async () => {
    if (!STATIC.embedding) throw new Error('this export has no embedding (its run has no DkNN)');
    return STATIC.embedding.points;
  },
  embed: async () => { throw new Error('placing typed text needs the running explore.py'); },
  metrics: async (split) => {
    if (!(STATIC.metrics || {})[split]) throw new Error('this export holds the metrics of '
      + Object.keys(STATIC.metrics || {}).join(', ') + ' only');
    return STATIC.metrics[split];
  },
};
const api = STATIC ? staticApi : serverApi;

// While the server evaluates a split, `line` says how far it is (every half second).
const pollProgress = (split, line) => setInterval(() => request('api/progress?'
  + new URLSearchParams({split})).then((p) => {
  if (p && p.total) line.textContent = 'evaluating ' + split + ': block ' + p.done + ' of ' + p.total + '…';
}).catch(() => {}), 500);

// ------------------------------------------------------------------ routing
let INFO = null;

function route() {
  const [path, query] = (location.hash.slice(1) || (STATIC ? '/dataset' : '/input')).split('?');
  const params = Object.fromEntries(new URLSearchParams(query || ''));
  const parts = path.split('/').filter(Boolean);
  document.querySelectorAll('nav a').forEach((a) =>
    a.classList.toggle('active', a.dataset.view === parts[0]));
  if (parts[0] === 'example') return inputView({split: parts[1], index: Number(parts[2])});
  if (parts[0] === 'dataset') return datasetView(params);
  if (parts[0] === 'training') return trainingView(params);
  if (parts[0] === 'metrics') return metricsView(params);
  if (parts[0] === 'embedding') return embeddingView(params);
  if (parts[0] === 'compare') return compareView(params);
  return inputView(params.text !== undefined || params.hypothesis !== undefined ? params : null);
}

// Going to the current address again (the same sentence twice) redraws it.
const go = (hash) => { if (location.hash === hash) route(); else location.hash = hash; };
// In a static export only the exported examples have an input view: others are plain text.
const exampleLink = (split, index, ...children) =>
  (STATIC && !(STATIC.examples[split] || {})[index]
    ? el('span', {class: 'example-unlinked', title: 'not in this export'}, ...children)
    : el('a', {href: '#/example/' + encodeURIComponent(split) + '/' + index,
               class: 'example-link'}, ...children));

// ------------------------------------------------------------------ input view
function inputForm(input) {
  const fields = INFO.pair ? ['premise', 'hypothesis'] : ['text'];
  const form = el('form', {id: 'input-form'},
    fields.map((name) => el('label', {}, name + ' ',
      el('input', {name, id: 'input-' + name, dir: 'auto', maxlength: INFO.max_characters,
                   size: 80, value: (input && input[name]) || ''}))),
    el('button', {type: 'submit', id: 'predict-button', disabled: STATIC !== null},
       'Predict'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const params = new URLSearchParams();
    fields.forEach((name) => params.set(name, form.elements[name].value));
    if (form.dataset.fromSplit !== undefined) {    // an edit of a stored example
      params.set('from_split', form.dataset.fromSplit);
      params.set('from_index', form.dataset.fromIndex);
    }
    go('#/input?' + params);
  });
  if (input && input.from_split !== undefined) {
    form.dataset.fromSplit = input.from_split;
    form.dataset.fromIndex = input.from_index;
  }
  return form;
}

async function inputView(input) {
  const view = main();
  const form = inputForm(input && input.split === undefined ? input : null);
  view.replaceChildren(form);
  if (!input) return;
  view.appendChild(el('p', {class: 'busy'}, 'computing…'));
  const edited = input.from_split !== undefined;
  // What is asked: the input without the edit's source (from_split, from_index).
  const asked = Object.fromEntries(Object.entries(input).filter(([name]) =>
    !name.startsWith('from_')));
  let answer, edit;
  try {
    if (edited) {
      edit = await api.edit({original: {split: input.from_split, index: Number(input.from_index)},
                             edited: asked, all_layers: STATIC !== null});
      answer = edit.after;
    } else answer = await api.predict(Object.assign({}, asked, {all_layers: STATIC !== null}));
  } catch (problem) { return showError(problem.message); }
  view.querySelector('.busy').remove();
  if (input.split !== undefined) fillForm(form, answer);
  if (edited) view.appendChild(diffPanel(edit, {split: input.from_split, index: input.from_index}));
  view.appendChild(predictionPanel(answer));
  view.appendChild(mapsPanel(answer));
  view.appendChild(neighborsPanel(answer, asked));
  if (answer.attribution) view.appendChild(attributionPanel(answer.attribution));
  if (!STATIC) view.appendChild(reductionPanel(asked));
}

function probabilityList(values) {
  return values.map((v) => el('span', {class: 'probability'}, bdi(v.label), ' ',
                              fmt(v.value))).reduce((a, b) => [a, ' · ', b]);
}

// A transformer reads word pieces: each word's pieces, a word split in several outlined.
function piecesLine(input) {
  const groups = (words, pieces) => words.map((word, i) => [el('span', {
    class: 'pieces' + (pieces[i].length > 1 ? ' split' : ''), title: word},
  pieces[i].map((piece) => el('span', {class: 'piece'}, bdi(piece)))), ' ']);
  return el('p', {id: 'word-pieces'}, 'Word pieces the model reads (a split word outlined): ',
    input.premise_pieces ? [groups(input.premise, input.premise_pieces), ' ‖ '] : null,
    groups(input.words, input.pieces));
}

function predictionPanel(answer) {
  const input = answer.input;
  const rows = [el('tr', {}, el('th', {}, 'softmax'),
    el('td', {id: 'softmax-prediction'}, el('b', {}, bdi(answer.softmax.prediction))),
    el('td', {}, probabilityList(answer.softmax.probabilities)))];
  if (answer.calibrated) {
    rows.push(el('tr', {}, el('th', {}, 'temperature-scaled (T = '
                                + answer.calibrated.temperature.toFixed(2) + ')'),
      el('td', {}, bdi(answer.calibrated.prediction)),
      el('td', {}, probabilityList(answer.calibrated.probabilities))));
  }
  if (answer.dknn) {
    rows.push(el('tr', {}, el('th', {}, 'DkNN'),
      el('td', {id: 'dknn-prediction'}, el('b', {}, bdi(answer.dknn.prediction))),
      el('td', {}, 'credibility ', el('span', {id: 'credibility'}, fmt(answer.dknn.credibility)),
         ', confidence ', fmt(answer.dknn.confidence), ' · p-values: ',
         probabilityList(answer.dknn.p_values))));
    // Trust scorers of the shift study (docs/shift.md), higher = more trusted.
    for (const [name, score] of Object.entries(answer.dknn.trust || {})) {
      rows.push(el('tr', {class: 'trust'}, el('th', {}, 'trust: ', bdi(name)), el('td', {}),
        el('td', {}, el('span', {class: 'trust-score'}, fmt(score)))));
    }
  }
  const source = input.source;
  return el('section', {id: 'prediction'},
    el('h2', {}, 'Prediction'),
    source ? el('p', {}, 'Example ', String(source.index), ' of ', bdi(source.split),
                ', gold: ', el('b', {}, bdi(input.gold))) : null,
    input.premise ? el('p', {class: 'premise'}, 'Premise: ', bdi(input.premise.join(' '))) : null,
    el('p', {}, input.premise ? 'Hypothesis: ' : 'Input: ', bdi(input.words.join(' '))),
    input.pieces ? piecesLine(input) : null,
    input.unknown.length ? el('p', {class: 'unknown', id: 'unknown-words'},
      'Not in the vocabulary (shown in angle brackets): ', bdi(input.unknown.join(' '))) : null,
    el('table', {class: 'predictions'}, rows));
}

function legend() {
  return el('p', {class: 'legend'}, 'Colour legend: ',
    INFO.legend.map((item) => el('span', {style: {background: item.colour}},
                                 item.name + ': ' + item.meaning)),
    ' — opacity is proportional to the normalised importance (', INFO.normalization, ').');
}

function mapsPanel(answer) {
  return el('section', {id: 'maps'}, el('h2', {}, 'Word importance, every method'), legend(),
    el('table', {}, answer.maps.map((map) => el('tr', {class: 'map'},
      el('td', {class: 'method', title: 'score: ' + map.score_meaning}, map.method),
      el('td', {class: 'prediction'}, bdi(map.prediction), ' (' + fmt(map.score) + ')',
         map.correct === false ? el('span', {class: 'wrong'}, ' ✗ wrong') : null),
      el('td', {}, map.words.map((w) => [el('span', {
        class: 'w' + (w.unknown ? ' oov' : ''),
        title: 'normalised importance ' + (w.importance === null ? 'undefined'
          : (w.importance >= 0 ? '+' : '') + w.importance.toFixed(3)),
        style: {background: w.colour, color: w.light_text ? '#fff' : '#000'}},
        w.word), ' '])))),
    ));
}

function neighborsPanel(answer, input) {
  const section = el('section', {id: 'neighbors'}, el('h2', {}, 'Nearest training examples'),
    el('p', {class: 'note'}, 'Agrees: the training label is the DkNN prediction. '
       + 'Distances are Euclidean in the layer\'s activations.'));
  for (const layer of answer.neighbors) {
    section.appendChild(el('h3', {}, layer.name));
    section.appendChild(trainingTable(layer.items, 'distance'));
  }
  if (!STATIC && input && answer.neighbors.length === 1) {
    section.appendChild(el('button', {id: 'all-layers', onclick: async () => {
      try {
        const all = await api.predict(Object.assign({}, input, {all_layers: true}));
        section.replaceWith(neighborsPanel(all, input));
      } catch (problem) { showError(problem.message); }
    }}, 'Show every layer'));
  }
  if (!answer.neighbors.length) section.appendChild(el('p', {}, 'No DkNN for this run.'));
  return section;
}

function attributionPanel(attribution) {
  return el('section', {id: 'attribution'},
    el('h2', {}, 'Training examples the prediction rests on (' + attribution.method + ')'),
    el('p', {class: 'note'}, 'The training examples that most support the softmax prediction '
       + 'by training-data attribution (docs/attribution.md); agrees: the training label is '
       + 'the prediction.'),
    trainingTable(attribution.items, 'score'));
}

// Ranked training examples: rank, text (a link to its view), label, `value` (the
// item's distance or score) and whether the label agrees with the prediction.
function trainingTable(items, value) {
  return el('table', {class: 'neighbors'},
    el('tr', {}, ['', 'text', 'label', value, 'agrees'].map((h) => el('th', {}, h))),
    items.map((item, rank) => el('tr', {class: item.agrees ? 'agrees' : 'disagrees'},
      el('td', {}, String(rank + 1)),
      el('td', {}, exampleLink('train', item.index, bdi(item.text))),
      el('td', {}, bdi(item.label)), el('td', {}, fmt(item[value])),
      el('td', {}, item.agrees ? 'yes' : 'no'))));
}

function reductionPanel(input) {
  const section = el('section', {id: 'reduction'}, el('h2', {}, 'Input reduction (Feng et al.)'));
  const choice = el('select', {id: 'importance'}, ['gradient', 'confidence', 'conformity']
    .filter((i) => i !== 'conformity' || INFO.has_dknn).map((i) => el('option', {}, i)));
  section.appendChild(el('p', {}, 'Importance ', choice, ' ', el('button', {id: 'reduce',
    onclick: async () => {
      try {
        const answer = await api.reduce(Object.assign({}, input, {importance: choice.value}));
        section.appendChild(reductionSteps(answer));
      } catch (problem) { showError(problem.message); }
    }}, 'Reduce step by step')));
  return section;
}

function reductionSteps(answer) {
  return el('table', {class: 'reduction'},
    el('tr', {}, el('th', {}, 'step'), el('th', {}, 'words kept (removed ones struck out)'),
       el('th', {}, 'f(' + answer.prediction + ')')),
    answer.steps.map((step, number) => el('tr', {},
      el('td', {}, String(number)),
      el('td', {}, answer.words.map((w, i) => [step.kept.includes(i) ? bdi(w)
        : el('s', {class: 'removed'}, bdi(w)), ' '])),
      el('td', {}, fmt(step.score)))));
}

// ------------------------------------------------------------------ training-set view
function trainingList(title, id, note, items) {
  return el('section', {id}, el('h2', {}, title), el('p', {class: 'note'}, note),
    el('ol', {}, items.map((item) => el('li', {},
      exampleLink('train', item.index, bdi(item.text)), ' ', el('i', {}, '(', bdi(item.label),
      ')'), ' — retrieved ' + item.times_retrieved + ' times',
      item.flipped ? el('b', {class: 'wrong'}, ' (label flipped by --label-noise)') : null,
      item.retrieved_by.length ? el('ul', {class: 'retrievers'}, item.retrieved_by.map((r) =>
        el('li', {}, exampleLink(r.split, r.index, bdi(r.text)), ' gold ', bdi(r.gold),
           ', predicted ', bdi(r.softmax_prediction))), item.n_retrievers
           > item.retrieved_by.length ? el('li', {class: 'note'}, 'and '
           + (item.n_retrievers - item.retrieved_by.length) + ' more') : null) : null))));
}

async function trainingView(params) {
  const split = params.split || 'test';
  const splits = Object.keys(INFO.splits).filter((s) => INFO.splits[s] > 0);
  const busy = el('p', {class: 'busy', id: 'progress'}, 'computing retrievals…');
  main().replaceChildren(el('form', {class: 'controls', onsubmit: (e) => e.preventDefault()},
    'retrievals of the split ', el('select', {id: 'training-split', onchange: (e) =>
      go('#/training?' + new URLSearchParams({split: e.target.value}))},
    splits.map((s) => el('option', {value: s, selected: s === split}, s)))), busy);
  const polling = STATIC ? null : pollProgress(split, busy);
  let view;
  try { view = await api.training(split); } catch (problem) { return showError(problem.message); }
  finally { clearInterval(polling); }
  const sections = [trainingList('Most retrieved training examples', 'most-retrieved',
    'Each ' + split + ' example\'s ' + view.k + ' nearest training examples in the last '
    + 'hidden layer (Rajani et al. 2020); under each, the ' + split + ' examples that retrieved '
    + 'it, those that have it nearest first.',
    view.most_retrieved)];
  if (view.knn_rule) {
    sections.push(trainingList('Candidate mislabeled: kNN rule (' + view.knn_rule.n_candidates
      + ')', 'knn-rule', 'The nearest training example of a dev example whose prediction '
      + 'differs from that example\'s label; under each, the dev examples that flagged it.',
      view.knn_rule.items));
  }
  sections.push(trainingList('Candidate mislabeled: cleanlab (' + view.cleanlab.n_candidates
    + ')', 'cleanlab', 'cleanlab\'s confident learning on the vote of each training '
    + 'example\'s 10 nearest others, most suspicious first.', view.cleanlab.items));
  busy.replaceWith(...sections);
}

// ------------------------------------------------------------------ start
async function start() {
  try { INFO = await api.info(); } catch (problem) { return showError(problem.message); }
  document.getElementById('run').replaceChildren(bdi(INFO.model), ' · ',
    INFO.has_dknn ? 'DkNN k=' + INFO.k + ' (' + INFO.backend + ')' : 'no DkNN (no calibration split)',
    el('span', {id: 'header-accuracy'}, Object.entries(INFO.accuracy || {}).map(([split, a]) =>
      [' · ', bdi(split), ' accuracy: softmax ' + a.softmax.toFixed(4),
       a.dknn === null ? '' : ', DkNN ' + a.dknn.toFixed(4)])),
    STATIC ? ' · static export. ' + (INFO.produced_by || '') : '');
  if (STATIC) document.querySelector('nav a[data-view="training"]').remove();
  if (!INFO.compare) document.querySelector('nav a[data-view="compare"]').remove();
  window.addEventListener('hashchange', route);
  route();
}
start();
