"""The explorer as a static folder: examples of a split with every answer precomputed.

    DIR/index.html        the explorer's page (opens from disk: no server, no CDN)
    DIR/static/           explorer.js and explorer.css, as the server ships them, and
                          data.js (window.EXPLORER_DATA = the answers)
    DIR/data.json         the same answers as JSON, for other tools

The page runs the same explorer.js, which reads data.js instead of the API: each
exported example's input view (predictions, every map, the neighbours in every layer)
and the dataset view of the exported rows (filtered, sorted and paged in the browser).
Typed text, input reduction and the training-set view need the running explore.py.
The folder is built in a staging sibling and swapped in whole (result_folder.staged).
"""
import json
import os
import shutil

import tqdm

from deepknn.storage import manifest
from deepknn.storage import result_folder
from deepknn.explorer import app
from deepknn.explorer import metrics
from deepknn.explorer import queries
from nlp_utils import UserError

STATIC_FILES = ('explorer.js', 'dataset.js', 'metrics.js', 'editor.js', 'embedding.js',
                'compare.js', 'explorer.css')


def check_export_folder(folder, overwrite):
    """UserError before any work when `folder` exists and may not be replaced: it needs
    overwrite, and then it must be a folder this tool made (never a user's folder)."""
    if not os.path.lexists(folder):
        return
    if not os.path.isdir(folder) or os.path.islink(folder):
        raise UserError('export {} exists and is not a folder; choose another'.format(folder),
                        'export')
    if not overwrite:
        raise UserError('export {} exists; it is replaced only with overwrite set, or '
                        'choose another folder'.format(folder), 'export')
    if not result_folder.is_result_folder(folder):
        raise UserError('export {} was not made by this tool (it has no {} marker); it is '
                        'never replaced: choose another folder'.format(
                            folder, result_folder.MARKER), 'export')
    result_folder.check_replaceable(folder, '`overwrite`', 'choose another `export` folder')


def export_data(session, split, limit, produced_by):
    """{'info', 'examples': {split: {index: input view}}, 'rows': {split: [rows]},
    'metrics': {split: metrics panel}, 'embedding'} of the first `limit` examples of
    `split`."""
    if split not in session.examples:
        raise UserError('split must be one of {}, got {!r}'.format(
            ', '.join(session.examples), split), 'split')
    examples = session.examples[split][:limit]
    if not examples:
        raise UserError('split {} has no examples to export'.format(split), 'split')
    table = queries.SplitTable.evaluate(split, examples, session.setup, session.dknn,
                                       session.settings.dknn.batchsize)
    answers = {index: session.predict({'split': split, 'index': index}, all_layers=True)
               for index in tqdm.trange(len(examples), desc='exporting', unit='example')}
    return {'info': dict(session.info(), produced_by=produced_by),
            'examples': {split: answers},
            'rows': {split: [table.row(i) for i in range(len(examples))]},
            'metrics': {split: metrics.split_metrics(table)},
            'embedding': exported_embedding(session, split, len(examples))}


def exported_embedding(session, split, n_examples):
    """{'points' (the last hidden DkNN layer's embedding.points), 'queries': {index:
    {'point', 'neighbors'}}} of the exported examples, or None without a DkNN."""
    if session.dknn is None:
        return None
    layer = session.dknn.n_layers - 2 if session.dknn.n_layers > 1 else 0
    return {'points': session.embedding(layer), 'queries': {
        index: session.embed_query({'split': split, 'index': index}, layer)
        for index in range(n_examples)}}


def write_export(folder, data, created_by='explorer'):
    """The static folder of `data` (export_data), swapped in whole and marked as made by
    `created_by`; the caller holds no other lock on it."""
    text = json.dumps(data, ensure_ascii=True)
    with result_folder.lock(folder, created_by):
        with result_folder.staged(folder, created_by) as staging:
            os.makedirs(os.path.join(staging, 'static'))
            shutil.copyfile(os.path.join(app.STATIC, 'index.html'),
                            os.path.join(staging, 'index.html'))
            for name in STATIC_FILES:
                shutil.copyfile(os.path.join(app.STATIC, name),
                                os.path.join(staging, 'static', name))
            with open(os.path.join(staging, 'static', 'data.js'), 'w', encoding='utf-8') as f:
                f.write('window.EXPLORER_DATA = {};\n'.format(text))
            with open(os.path.join(staging, 'data.json'), 'w', encoding='utf-8') as f:
                f.write(text + '\n')
            # The folder's manifest names them all, so overwrite may replace it later.
            manifest.record(staging, ['index.html', 'data.json'] + [
                'static/' + name for name in STATIC_FILES + ('data.js',)])
    return os.path.join(folder, 'index.html')
