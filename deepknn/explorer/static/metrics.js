// The metrics panel (#/metrics): accuracy, confusion matrices and reliability diagrams
// of a split for the softmax and the DkNN, from /api/metrics or the export's data.js.
'use strict';

function confusionTable(classifier, labels) {
  const id = 'confusion-' + classifier.name.toLowerCase();
  return el('table', {class: 'confusion', id},
    el('tr', {}, el('th', {}, 'gold ↓ / predicted →'), labels.map((l) => el('th', {}, bdi(l)))),
    classifier.confusion.map((row, i) => el('tr', {}, el('th', {}, bdi(labels[i])),
      row.map((count, j) => el('td', {class: i === j ? 'diagonal' : ''}, String(count))))));
}

// Bars: accuracy per score bin; the diagonal is perfect calibration.
function reliabilityCanvas(classifier) {
  const size = 260, pad = 30, inner = size - 2 * pad;
  const canvas = el('canvas', {width: size, height: size, class: 'reliability',
    id: 'reliability-' + classifier.name.toLowerCase(),
    'aria-label': 'reliability diagram of ' + classifier.name});
  const g = canvas.getContext('2d');
  const x = (v) => pad + v * inner, y = (v) => size - pad - v * inner;
  g.strokeStyle = '#999'; g.strokeRect(pad, pad, inner, inner);
  g.beginPath(); g.moveTo(x(0), y(0)); g.lineTo(x(1), y(1)); g.stroke();
  g.fillStyle = 'rgba(33,102,172,0.75)';
  for (const bin of classifier.reliability.bins) {
    if (bin.accuracy === null) continue;
    g.fillRect(x(bin.low) + 1, y(bin.accuracy), x(bin.high) - x(bin.low) - 2,
               y(0) - y(bin.accuracy));
  }
  g.fillStyle = '#222'; g.font = '11px sans-serif';
  g.fillText('0', pad - 10, size - pad + 12); g.fillText('1', size - pad - 3, size - pad + 12);
  g.fillText(classifier.score, pad, size - 8);
  g.save(); g.translate(12, size - pad); g.rotate(-Math.PI / 2); g.fillText('accuracy', 0, 0);
  g.restore();
  return canvas;
}

function binTable(classifier) {
  return el('table', {class: 'bins'}, el('tr', {}, ['bin', 'examples', 'mean score',
    'accuracy'].map((h) => el('th', {}, h))),
  classifier.reliability.bins.filter((b) => b.count > 0).map((b) => el('tr', {},
    el('td', {}, '(' + b.low.toFixed(1) + ', ' + b.high.toFixed(1) + ']'),
    el('td', {}, String(b.count)), el('td', {}, fmt(b.mean_score)), el('td', {}, fmt(b.accuracy)))));
}

async function metricsView(params) {
  const splits = STATIC ? Object.keys(STATIC.metrics || {}) : Object.keys(INFO.splits);
  const split = params.split || (STATIC ? splits[0] : 'test');
  const controls = el('form', {class: 'controls', onsubmit: (e) => e.preventDefault()},
    'split ', el('select', {id: 'metrics-split', onchange: (e) =>
      go('#/metrics?' + new URLSearchParams({split: e.target.value}))},
    splits.map((s) => el('option', {value: s, selected: s === split}, s))));
  const busy = el('p', {class: 'busy', id: 'progress'}, 'loading ' + split + '…');
  main().replaceChildren(el('h2', {}, 'Metrics: ', bdi(split)), controls, busy);
  const stop = STATIC ? null : pollProgress(split, busy);
  let found;
  try { found = await api.metrics(split); } catch (problem) { return showError(problem.message); }
  finally { clearInterval(stop); }
  busy.remove();
  const summary = el('table', {class: 'metrics', id: 'metrics-summary'},
    el('tr', {}, ['', 'accuracy', 'correct', 'calibration error (ECE)', 'score binned']
      .map((h) => el('th', {}, h))),
    found.classifiers.map((c) => el('tr', {}, el('th', {}, c.name),
      el('td', {id: 'accuracy-' + c.name.toLowerCase()}, c.accuracy.toFixed(4)),
      el('td', {}, c.n_correct + ' of ' + found.n), el('td', {}, fmt(c.reliability.ece)),
      el('td', {}, c.score))));
  main().append(summary, ...found.classifiers.map((c) => el('section', {class: 'classifier'},
    el('h3', {}, c.name + ': confusion matrix and reliability diagram'),
    el('div', {class: 'side-by-side'}, confusionTable(c, found.labels), reliabilityCanvas(c),
       binTable(c)))));
}
