// The embedding view (#/embedding): a 2-D PCA of a DkNN layer's training activations on a
// <canvas> (every point, 77,000 included), coloured by label, prediction or credibility;
// a typed sentence (or, in a static export, an exported example) and its nearest
// training examples in that layer light up.
'use strict';

const PALETTE = [[33, 102, 172], [178, 24, 43], [27, 120, 55], [118, 42, 131], [224, 130, 20],
                 [53, 151, 143], [140, 81, 10], [197, 27, 125]];
const CANVAS = {width: 900, height: 600, pad: 20};

// [r, g, b] of point i: its label's colour, or credibility from red (0) to blue (1).
function pointColour(points, colourBy, i) {
  if (colourBy === 'credibility' && points.credibility) {
    const c = points.credibility[i];
    return [Math.round(178 + (33 - 178) * c), Math.round(24 + (102 - 24) * c),
            Math.round(43 + (172 - 43) * c)];
  }
  const label = colourBy === 'prediction' ? points.prediction[i] : points.gold[i];
  return PALETTE[label % PALETTE.length];
}

// Pixel coordinates of the points: the data's bounding box fills the canvas.
function scaler(points) {
  let [x0, x1, y0, y1] = [Infinity, -Infinity, Infinity, -Infinity];
  for (let i = 0; i < points.n; i++) {
    x0 = Math.min(x0, points.x[i]); x1 = Math.max(x1, points.x[i]);
    y0 = Math.min(y0, points.y[i]); y1 = Math.max(y1, points.y[i]);
  }
  const w = CANVAS.width - 2 * CANVAS.pad, h = CANVAS.height - 2 * CANVAS.pad;
  return (x, y) => [CANVAS.pad + (x - x0) / ((x1 - x0) || 1) * w,
                    CANVAS.height - CANVAS.pad - (y - y0) / ((y1 - y0) || 1) * h];
}

// Every point as a 2x2 pixel square written into one ImageData (fast for 77k points).
function drawPoints(canvas, points, colourBy, toPixel) {
  const g = canvas.getContext('2d');
  const image = g.createImageData(canvas.width, canvas.height);
  for (let i = 0; i < points.n; i++) {
    const [px, py] = toPixel(points.x[i], points.y[i]).map(Math.round);
    const [r, gr, b] = pointColour(points, colourBy, i);
    for (const [dx, dy] of [[0, 0], [1, 0], [0, 1], [1, 1]]) {
      const at = ((py + dy) * canvas.width + px + dx) * 4;
      if (at < 0 || at >= image.data.length) continue;
      image.data[at] = r; image.data[at + 1] = gr; image.data[at + 2] = b; image.data[at + 3] = 160;
    }
  }
  g.putImageData(image, 0, 0);
}

function drawQuery(canvas, points, found, toPixel) {
  const g = canvas.getContext('2d');
  g.lineWidth = 2; g.strokeStyle = '#000';
  for (const i of found.neighbors) {
    const [px, py] = toPixel(points.x[i], points.y[i]);
    g.beginPath(); g.arc(px, py, 5, 0, 2 * Math.PI); g.stroke();
  }
  const [qx, qy] = toPixel(found.point[0], found.point[1]);
  g.fillStyle = '#ffd700'; g.beginPath(); g.arc(qx, qy, 8, 0, 2 * Math.PI); g.fill(); g.stroke();
}

function embeddingLegend(points, colourBy) {
  if (colourBy === 'credibility') {
    return el('p', {class: 'legend'}, 'credibility: ', el('span', {style: {background:
      'rgb(178,24,43)'}}, '0'), el('span', {style: {background: 'rgb(33,102,172)'}}, '1'));
  }
  return el('p', {class: 'legend'}, colourBy === 'prediction' ? 'prediction: ' : 'label: ',
    points.labels.map((label, i) => el('span', {style: {background: 'rgb('
      + PALETTE[i % PALETTE.length].join(',') + ')'}}, bdi(label))));
}

// The training point nearest a click (within 6 pixels), or -1.
function pointAt(points, toPixel, x, y) {
  let best = -1, bestDistance = 36;
  for (let i = 0; i < points.n; i++) {
    const [px, py] = toPixel(points.x[i], points.y[i]);
    const d = (px - x) ** 2 + (py - y) ** 2;
    if (d < bestDistance) { best = i; bestDistance = d; }
  }
  return best;
}

function embeddingControls(params, layers) {
  const change = (update) => go('#/embedding?' + new URLSearchParams(Object.assign({}, params,
    update)));
  const select = (id, name, options) => el('select', {id, onchange: (e) =>
    change({[name]: e.target.value})}, options.map(([value, label]) =>
    el('option', {value, selected: String(params[name]) === value}, label)));
  const box = STATIC
    ? select('embedding-example', 'example', [['', 'an exported example…']].concat(
      Object.keys(STATIC.embedding.queries).map((i) => [i, 'example ' + i])))
    : el('input', {id: 'embedding-text', size: 50, dir: 'auto', value: params.text || '',
                   maxlength: INFO.max_characters, placeholder: 'a sentence to place'});
  return el('form', {class: 'controls', onsubmit: (e) => {
    e.preventDefault(); if (!STATIC) change({text: box.value});
  }}, 'layer ', select('embedding-layer', 'layer', layers.map((name, i) => [String(i), name])),
  ' colour by ', select('embedding-colour', 'colour', [['label', 'label'],
    ['prediction', 'prediction'], ['credibility', 'credibility']]), ' ', box,
  STATIC ? null : el('button', {type: 'submit', id: 'embed-button'}, 'Place it'));
}

async function embeddingView(given) {
  if (!INFO.has_dknn) return showError('the embedding view needs a DkNN (a calibration split)');
  const layers = STATIC ? [STATIC.embedding.points.name] : INFO.layers;
  const params = Object.assign({layer: String(STATIC ? 0 : layers.length - 2),
                                colour: 'label'}, given);
  const busy = el('p', {class: 'busy', id: 'progress'}, 'projecting the training set…');
  main().replaceChildren(el('h2', {}, 'Embedding: PCA of a layer\'s training activations'),
                         embeddingControls(params, layers), busy);
  const polling = STATIC ? null : pollProgress('train', busy);
  let points, found = null;
  try {
    points = await api.embedding(params.layer);
    if (params.text) found = await api.embed({text: params.text, layer: Number(params.layer)});
    if (STATIC && params.example) found = STATIC.embedding.queries[params.example];
  } catch (problem) { return showError(problem.message); }
  finally { clearInterval(polling); }
  const canvas = el('canvas', {id: 'embedding-canvas', width: CANVAS.width,
                               height: CANVAS.height, 'aria-label': 'PCA of ' + points.name});
  const toPixel = scaler(points);
  const started = performance.now();
  drawPoints(canvas, points, params.colour, toPixel);
  if (found) drawQuery(canvas, points, found, toPixel);
  canvas.dataset.drawMs = String(Math.round(performance.now() - started));
  const picked = el('p', {id: 'embedding-picked', class: 'note'},
    'Click a point to open its training example.');
  canvas.addEventListener('click', (e) => {
    const box = canvas.getBoundingClientRect();
    const i = pointAt(points, toPixel, e.clientX - box.left, e.clientY - box.top);
    if (i >= 0) picked.replaceChildren(exampleLink('train', i, 'training example ' + i),
      ' · label ', bdi(points.labels[points.gold[i]]));
  });
  busy.replaceWith(el('p', {id: 'embedding-count'}, points.n + ' training examples, ',
    bdi(points.name), found ? ' · the gold disc is the input, circled points its '
      + found.neighbors.length + ' nearest training examples in this layer' : ''),
  embeddingLegend(points, params.colour), canvas, picked,
  el('p', {class: 'note'}, 'PCA fitted on at most 10,000 training examples, every one drawn; '
     + 'UMAP is not available in this installation.'));
}
