// The Compare view (#/compare, explore.py --compare): one sentence in both runs side by
// side, and the examples of a split that the two runs predict differently.
'use strict';

const compareApi = {
  predict: (body) => request('api/compare/predict', body),
  disagreements: (params) => request('api/compare/disagreements?' + new URLSearchParams(params)),
};

function compareColumn(id, info, answer) {
  return el('div', {class: 'compare-column', id},
    el('h3', {}, bdi(info.model)), predictionPanel(answer), mapsPanel(answer),
    neighborsPanel(answer, null));
}

async function compareSentence(params, view) {
  const busy = el('p', {class: 'busy'}, 'computing in both runs…');
  view.appendChild(busy);
  let both;
  try { both = await compareApi.predict({text: params.text}); }
  catch (problem) { return showError(problem.message); }
  busy.replaceWith(el('div', {class: 'side-by-side', id: 'compare-both'},
    compareColumn('compare-a', INFO, both.a), compareColumn('compare-b', INFO.compare, both.b)));
}

function disagreementTable(found) {
  const cell = (row, name) => el('td', {class: row[name] === null || row[name] === row.gold
    ? '' : 'wrong'}, bdi(row[name] || '—'));
  return el('table', {class: 'dataset', id: 'disagreements'},
    el('tr', {}, ['#', 'text', 'gold', 'A softmax', 'B softmax', 'A DkNN', 'B DkNN',
                  'A credibility', 'B credibility'].map((h) => el('th', {}, h))),
    found.rows.map((r) => el('tr', {class: 'row'}, el('td', {}, String(r.index)),
      el('td', {}, exampleLink(found.split, r.index, bdi(r.text))), el('td', {}, bdi(r.gold)),
      cell(Object.assign({}, r.a, {gold: r.gold}), 'softmax_prediction'),
      cell(Object.assign({}, r.b, {gold: r.gold}), 'softmax_prediction'),
      cell(Object.assign({}, r.a, {gold: r.gold}), 'dknn_prediction'),
      cell(Object.assign({}, r.b, {gold: r.gold}), 'dknn_prediction'),
      el('td', {}, fmt(r.a.credibility)), el('td', {}, fmt(r.b.credibility)))));
}

async function compareDisagreements(params, view) {
  const query = {split: params.split || 'test', kind: params.kind || 'softmax',
                 page: params.page || '1', per_page: '25'};
  const change = (update) => go('#/compare?' + new URLSearchParams(Object.assign({},
    params, {page: '1'}, update)));
  const section = el('section', {id: 'compare-disagreements'},
    el('h2', {}, 'Where the runs disagree'),
    el('form', {class: 'controls', onsubmit: (e) => e.preventDefault()}, 'split ',
      el('select', {id: 'compare-split', onchange: (e) => change({split: e.target.value})},
        Object.keys(INFO.splits).map((s) => el('option', {value: s, selected: s === query.split},
          s))), ' predictions of ',
      el('select', {id: 'compare-kind', onchange: (e) => change({kind: e.target.value})},
        [['softmax', 'the softmax'], ['dknn', 'the DkNN']].map(([v, l]) =>
          el('option', {value: v, selected: v === query.kind}, l)))),
    el('p', {class: 'busy', id: 'progress'}, 'evaluating ' + query.split + ' in both runs…'));
  view.appendChild(section);
  let found;
  try { found = await compareApi.disagreements(query); }
  catch (problem) { return showError(problem.message); }
  const turn = (page, label, id) => el('button', {id, disabled: page < 1 || page > found.n_pages,
    onclick: () => go('#/compare?' + new URLSearchParams(Object.assign({}, params,
      {page: String(page)})))}, label);
  section.querySelector('.busy').replaceWith(
    el('p', {id: 'compare-count'}, found.n_matching + ' of ' + found.n_total + ' ' + found.split
       + ' examples (softmax: ' + found.n_softmax + ', DkNN: ' + found.n_dknn
       + ' disagree); page ' + found.page + ' of ' + found.n_pages),
    disagreementTable(found),
    el('p', {}, turn(found.page - 1, '← previous', 'compare-previous'), ' ',
       turn(found.page + 1, 'next →', 'compare-next')));
}

async function compareView(params) {
  if (!INFO.compare) {
    return showError('no second run: start explore.py with --compare RUN/args.json');
  }
  const view = main();
  const box = el('input', {id: 'compare-text', size: 80, dir: 'auto', value: params.text || '',
                           maxlength: INFO.max_characters});
  view.replaceChildren(el('h2', {}, 'Compare: A ', bdi(INFO.model), ' · B ',
    bdi(INFO.compare.model)),
  el('form', {id: 'compare-form', onsubmit: (e) => {
    e.preventDefault();
    go('#/compare?' + new URLSearchParams(Object.assign({}, params, {text: box.value})));
  }}, 'text ', box, ' ', el('button', {type: 'submit', id: 'compare-button'}, 'Predict in both')));
  if (params.text) await compareSentence(params, view);
  await compareDisagreements(params, view);
}
