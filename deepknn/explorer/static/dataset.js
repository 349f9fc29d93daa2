// The dataset view (#/dataset): a split as a table, filtered, searched, sorted and paged by
// the server (queries.py) or, in a static export, by pageOf over the exported rows; saved
// slices (in this browser's localStorage) and the current selection as CSV.
'use strict';

const DATASET_DEFAULTS = {split: 'test', page: '1', per_page: '25', sort: 'index',
                          order: 'asc', wrong: '', max_credibility: '1', label: '', search: ''};
const PER_PAGE = ['10', '25', '50', '100', '200'];
const LABEL_COLUMNS = ['gold', 'softmax_prediction', 'dknn_prediction'];

// The rows of the server's query (queries.py: filters, then a stable sort) over `rows`.
function selectionOf(rows, params) {
  const dknn = (r) => r.dknn_prediction || r.softmax_prediction;
  const wrongs = {
    '': () => true,
    softmax: (r) => r.softmax_prediction !== r.gold,
    dknn: (r) => dknn(r) !== r.gold,
    either: (r) => r.softmax_prediction !== r.gold || dknn(r) !== r.gold,
  };
  const maxCred = Number(params.max_credibility || 1);
  const search = (params.search || '').toLowerCase();
  const found = rows.filter((r) => wrongs[params.wrong || ''](r)
    && (r.credibility === null || maxCred >= 1 || r.credibility <= maxCred)
    && (!params.label || r.gold === params.label)
    && (!search || r.text.toLowerCase().includes(search)));
  const key = params.sort || 'index';
  // Labels sort by their id (their place in the run's label list), as on the server.
  const value = (r) => (key === 'credibility' && r.credibility === null ? r.softmax_probability
    : key === 'dknn_prediction' ? INFO.labels.indexOf(dknn(r))
      : LABEL_COLUMNS.includes(key) ? INFO.labels.indexOf(r[key]) : r[key]);
  const sign = params.order === 'desc' ? -1 : 1;
  return found.map((r, i) => [r, i]).sort(([a, i], [b, j]) =>
    (value(a) < value(b) ? -sign : value(a) > value(b) ? sign : i - j)).map(([r]) => r);
}

function pageOf(rows, params, split) {
  const found = selectionOf(rows, params);
  const perPage = Number(params.per_page || 25);
  const nPages = Math.max(1, Math.ceil(found.length / perPage));
  const page = Math.min(Number(params.page || 1), nPages);
  return {split, n_total: rows.length, n_matching: found.length, page, n_pages: nPages,
          per_page: perPage, rows: found.slice((page - 1) * perPage, page * perPage)};
}

// ------------------------------------------------------------------ CSV (selection.py's rules)
const CSV_COLUMNS = ['index', 'text', 'gold', 'softmax_prediction', 'softmax_probability',
                     'dknn_prediction', 'credibility'];

// Text cells that a spreadsheet reads as a formula get an apostrophe; numbers 6 decimals.
function safeCell(value) {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return /^[=+\-@\t\r]/.test(value) ? "'" + value : value;
  return value.toFixed(6);
}

function csvText(rows) {
  const line = (cells) => cells.map((c) => '"' + String(c).replace(/"/g, '""') + '"').join(',');
  return [line(CSV_COLUMNS)].concat(rows.map((r) => line(CSV_COLUMNS.map((name) =>
    (name === 'index' ? String(r.index) : safeCell(r[name])))))).join('\r\n') + '\r\n';
}

function downloadLink(params) {
  const query = Object.assign({}, params);
  delete query.page; delete query.per_page;
  if (!STATIC) {
    return el('a', {id: 'download-csv', href: 'api/dataset.csv?' + new URLSearchParams(query),
                    download: params.split + '_selection.csv'}, 'Download the selection (CSV)');
  }
  return el('a', {id: 'download-csv', href: '#', onclick: (e) => {
    e.preventDefault();
    const text = csvText(selectionOf(STATIC.rows[params.split] || [], params));
    const link = el('a', {href: URL.createObjectURL(new Blob([text], {type: 'text/csv'})),
                          download: params.split + '_selection.csv'});
    link.click();
    URL.revokeObjectURL(link.href);
  }}, 'Download the selection (CSV)');
}

// ------------------------------------------------------------------ saved slices
const SLICES_KEY = 'deep-knn-explorer-slices';

function readSlices() {
  try { return JSON.parse(localStorage.getItem(SLICES_KEY) || '{}') || {}; } catch (e) { return {}; }
}

function slicesPanel(params) {
  const slices = readSlices();
  const save = (name, query) => {
    const found = readSlices();
    if (query === null) delete found[name]; else found[name] = query;
    localStorage.setItem(SLICES_KEY, JSON.stringify(found));
    route();
  };
  const query = Object.assign({}, params, {page: '1'});
  const name = el('input', {id: 'slice-name', size: 20, maxlength: 60,
                            placeholder: 'name of this slice'});
  return el('p', {id: 'slices'}, 'Slices: ', Object.entries(slices).map(([title, saved]) => [
    el('a', {href: '#/dataset?' + new URLSearchParams(saved), class: 'slice'}, bdi(title)),
    el('button', {class: 'delete-slice', title: 'forget this slice',
                  onclick: () => save(title, null)}, '×'), ' ']),
  name, ' ', el('button', {id: 'save-slice', onclick: () => {
    if (name.value.trim()) save(name.value.trim(), query);
  }}, 'Save slice'), ' (kept in this browser only)');
}

// ------------------------------------------------------------------ the view
function datasetControls(params) {
  const change = (update) => go('#/dataset?' + new URLSearchParams(
    Object.assign({}, params, {page: '1'}, update)));
  const select = (name, options) => el('select', {id: 'filter-' + name, onchange: (e) =>
    change({[name]: e.target.value})}, options.map(([value, label]) =>
    el('option', {value, selected: params[name] === value}, label)));
  const splits = STATIC ? Object.keys(STATIC.rows) : Object.keys(INFO.splits);
  const search = el('input', {id: 'filter-search', type: 'search', size: 24, dir: 'auto',
                              maxlength: 200, value: params.search, placeholder: 'words in the text'});
  return el('form', {class: 'controls', onsubmit: (e) => {
    e.preventDefault(); change({search: search.value});
  }},
  'split ', select('split', splits.map((s) => [s, s])),
  ' show ', select('wrong', [['', 'all'], ['softmax', 'softmax wrong'],
                             ['dknn', 'DkNN wrong'], ['either', 'either wrong']]),
  ' gold ', select('label', [['', 'any']].concat(INFO.labels.map((l) => [l, l]))),
  ' credibility ≤ ', el('input', {id: 'filter-credibility', type: 'number', min: 0, max: 1,
    step: 0.05, value: params.max_credibility,
    onchange: (e) => change({max_credibility: e.target.value})}),
  ' search ', search, el('button', {type: 'submit', id: 'search-button'}, 'Search'),
  ' rows per page ', select('per_page', PER_PAGE.map((n) => [n, n])));
}

function datasetTable(page, params, change) {
  const header = (column, label) => el('th', {}, el('a', {href: '#', class: 'sort',
    'data-column': column, onclick: (e) => { e.preventDefault(); change({sort: column, order:
      params.sort === column && params.order === 'asc' ? 'desc' : 'asc'}); }},
    label + (params.sort === column ? (params.order === 'asc' ? ' ▲' : ' ▼') : '')));
  return el('table', {class: 'dataset', id: 'dataset-table'},
    el('tr', {}, header('index', '#'), header('text', 'text'), header('gold', 'gold'),
       header('softmax_prediction', 'softmax'), header('softmax_probability', 'probability'),
       header('dknn_prediction', 'DkNN'), header('credibility', 'credibility')),
    page.rows.map((row) => el('tr', {class: 'row'},
      el('td', {}, String(row.index)),
      el('td', {}, exampleLink(page.split, row.index, bdi(row.text))),
      el('td', {}, bdi(row.gold)),
      el('td', {class: row.softmax_prediction === row.gold ? '' : 'wrong'},
         bdi(row.softmax_prediction)),
      el('td', {}, fmt(row.softmax_probability)),
      el('td', {class: row.dknn_prediction === null || row.dknn_prediction === row.gold
        ? '' : 'wrong'}, bdi(row.dknn_prediction || '—')),
      el('td', {}, fmt(row.credibility)))));
}

async function datasetView(given) {
  const params = Object.assign({}, DATASET_DEFAULTS, given);
  if (STATIC && !given.split) params.split = Object.keys(STATIC.rows)[0];
  const view = main();
  const busy = el('p', {class: 'busy', id: 'progress'}, 'loading ' + params.split + '…');
  // The controls come first, so an error (a mistyped split) keeps them.
  view.replaceChildren(el('h2', {}, 'Dataset: ', bdi(params.split)), datasetControls(params),
                       slicesPanel(params), busy);
  const polling = STATIC ? null : pollProgress(params.split, busy);
  let page;
  try { page = await api.dataset(params); } catch (problem) { return showError(problem.message); }
  finally { clearInterval(polling); }
  const change = (update) => go('#/dataset?' + new URLSearchParams(
    Object.assign({}, params, {page: '1'}, update)));
  const turn = (page_, label, id) => el('button', {id, disabled: page_ < 1
    || page_ > page.n_pages, onclick: () => go('#/dataset?' + new URLSearchParams(
      Object.assign({}, params, {page: String(page_)})))}, label);
  busy.replaceWith(
    el('p', {id: 'dataset-count'}, page.n_matching + ' of ' + page.n_total
       + ' examples match; page ' + page.page + ' of ' + page.n_pages),
    el('p', {}, downloadLink(params)),
    datasetTable(page, params, change),
    el('p', {}, turn(page.page - 1, '← previous', 'previous-page'), ' ',
       turn(page.page + 1, 'next →', 'next-page')));
}
