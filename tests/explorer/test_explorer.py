"""explore.py's app, with Starlette's test client, on tiny trained models: known answers."""
import concurrent.futures
import csv
import json
import os

import numpy as np
import pytest
from starlette.testclient import TestClient

from deepknn.evaluation import calibration
from deepknn.explorer import app as explorer_app
from deepknn.explorer import session as explorer
from deepknn.feng import input_reduction
from deepknn.neighbors.dknn_settings import DkNNSettings
import cli_helpers
import explore
import predict
import run_dknn
import run_knn_representations
from tests.models.test_transformer import write_tiny_checkpoint
from nlp_utils import UserError
from tests.commands.test_predict import drop_calibration_split
from tests.commands.test_end_to_end import data_files, train, train_snli_bilstm  # noqa: F401 (a fixture)

K = 5
METHODS = ('conformity', 'confidence', 'gradient', 'credibility')


@pytest.fixture(scope='module')
def run(tmp_path_factory, data_files):  # noqa: F811
    out = tmp_path_factory.mktemp('explorer') / 'custom_cnn'
    train(out, data_files)
    return str(out / 'args.json')


@pytest.fixture(scope='module')
def session(run):
    return explorer.ExplorerSession.open(run, explorer.Settings(DkNNSettings(k=K),
                                                                trust=('msp',)))


@pytest.fixture(scope='module')
def client(session):
    return TestClient(explorer_app.make_app(session))


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_the_app_gives_what_predict_py_gives(run, client, tmp_path):
    sentence = 'The movie was GREAT zzz'
    (tmp_path / 'one.txt').write_text(sentence + '\n')
    stem = str(tmp_path / 'pred')
    predict.main(['--model-setup', run, '--input', str(tmp_path / 'one.txt'), '--out', stem,
                  '--k', str(K), '--methods', ','.join(METHODS)])
    expected, = read_csv(stem + '.csv')
    answer = client.post('/api/predict', json={'text': sentence}).json()
    assert answer['input']['text'] == expected['text'] == 'the movie was great <zzz>'
    assert answer['input']['pieces'] is None          # whole words: nothing to show
    assert ' '.join(answer['input']['unknown']) == expected['unknown_words'] == 'zzz'
    assert answer['softmax']['prediction'] == expected['prediction'] == 'pos'
    top = max(v['value'] for v in answer['softmax']['probabilities'])
    assert top == pytest.approx(float(expected['softmax_probability']), abs=1e-4)
    assert answer['dknn']['prediction'] == expected['dknn_prediction']
    assert answer['dknn']['credibility'] == pytest.approx(float(expected['credibility']), abs=1e-4)
    assert answer['dknn']['confidence'] == pytest.approx(float(expected['dknn_confidence']),
                                                         abs=1e-4)
    # the session's trust scorer: max softmax, the softmax column of predict.py
    assert answer['dknn']['trust'] == {'msp': pytest.approx(top, abs=1e-9)}
    importances = read_csv(stem + '_importances.csv')
    assert [m['method'] for m in answer['maps']] == list(METHODS)
    for found in answer['maps']:
        rows = [r for r in importances if r['method'] == found['method']]
        assert [w['word'] for w in found['words']] == ['the', 'movie', 'was', 'great', '<zzz>']
        assert [w['unknown'] for w in found['words']] == [False] * 4 + [True]
        assert [w['importance'] for w in found['words']] == pytest.approx(
            [float(r['normalized_importance']) for r in rows], abs=1e-6)
        assert found['prediction'] == rows[0]['prediction']


def test_neighbours_are_the_nearest_training_examples_by_brute_force(session, client):
    answer = client.post('/api/predict', json={'split': 'test', 'index': 0,
                                               'all_layers': True}).json()
    setup = session.setup
    train_layers = setup.model.layer_activations([x for x, _ in setup.train])
    query = setup.model.layer_activations([setup.test[0][0]])
    assert [layer['layer'] for layer in answer['neighbors']] == list(range(len(train_layers)))
    prediction = answer['dknn']['prediction']
    for layer, train_layer, query_layer in zip(answer['neighbors'], train_layers, query):
        distances = np.sqrt(((train_layer - query_layer) ** 2).sum(axis=1))
        found = [item['index'] for item in layer['items']]
        assert len(found) == K          # k=5 neighbours found, 10 asked for
        assert [item['distance'] for item in layer['items']] == pytest.approx(
            np.sort(distances)[:K], rel=1e-3, abs=1e-4)
        assert distances[found] == pytest.approx(np.sort(distances)[:K], rel=1e-3, abs=1e-4)
        for item in layer['items']:
            label = setup.label_names[setup.splits.train[item['index']][1]]
            assert item['label'] == label and item['agrees'] == (label == prediction)
    assert answer['input']['source'] == {'split': 'test', 'index': 0}
    assert answer['input']['gold'] == setup.label_names[setup.splits.test[0][1]]
    last_only = client.post('/api/predict', json={'split': 'test', 'index': 0}).json()
    assert last_only['neighbors'] == answer['neighbors'][-1:]


def test_the_attribution_column_is_grad_cos_over_the_training_layers(session, client):
    """The input view's training-data attribution (default grad-cos): the top training
    examples equal the cosine of closed-form last-layer gradients, computed here."""
    answer = client.post('/api/predict', json={'split': 'test', 'index': 0}).json()
    setup = session.setup
    assert answer['attribution']['method'] == 'grad-cos'
    train_layers = setup.model.layer_activations([x for x, _ in setup.train])
    query = setup.model.layer_activations([setup.test[0][0]])
    labels = np.array([label for _, label in setup.splits.train])
    prediction = int(np.argmax(query[-1][0]))

    def gradients(features, logits, classes):
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        p[np.arange(len(classes)), classes] -= 1
        with_bias = np.c_[features, np.ones(len(features))]
        return (p[:, :, None] * with_bias[:, None, :]).reshape(len(features), -1)
    g_train = gradients(train_layers[-2].astype(float), train_layers[-1].astype(float), labels)
    g_query = gradients(query[-2].astype(float), query[-1].astype(float), [prediction])[0]
    cosines = g_train @ g_query / np.linalg.norm(g_train, axis=1) / np.linalg.norm(g_query)
    items = answer['attribution']['items']
    found = [item['index'] for item in items]
    # The rule, not this machine's last bits: the ten highest cosines, best first, ties
    # (equal scores) by the smaller training index.
    assert cosines[found] == pytest.approx(np.sort(cosines)[::-1][:10], abs=1e-6)
    assert [item['score'] for item in items] == pytest.approx(cosines[found], abs=1e-6)
    assert all((a['score'], -a['index']) > (b['score'], -b['index'])
               for a, b in zip(items, items[1:]))
    for item in items:
        label = setup.label_names[labels[item['index']]]
        assert item['label'] == label
        assert item['agrees'] == (label == answer['softmax']['prediction'])


def test_dataset_pages_filter_sort_and_partition_the_split(session, client):
    setup = session.setup
    logits = setup.model.layer_activations([x for x, _ in setup.test])[-1]
    result = session.dknn.predict_from_activations(
        setup.model.layer_activations([x for x, _ in setup.test]))
    gold = np.array([y for _, y in setup.test])
    wrong = (logits.argmax(axis=1) != gold) | (result['prediction'] != gold)
    seen = []
    for page in (1, 2, 3):
        answer = client.get('/api/dataset', params={'split': 'test', 'page': page,
                                                    'per_page': 25}).json()
        seen += [row['index'] for row in answer['rows']]
    assert seen == list(range(len(setup.test))) and answer['n_pages'] == 3
    answer = client.get('/api/dataset', params={'split': 'test', 'wrong': 'either',
                                                'per_page': 200}).json()
    assert [row['index'] for row in answer['rows']] == list(np.flatnonzero(wrong))
    answer = client.get('/api/dataset', params={'split': 'test', 'sort': 'credibility',
                                                'order': 'desc', 'label': 'pos',
                                                'max_credibility': '0.5',
                                                'per_page': 200}).json()
    expected = [i for i in np.argsort(-result['credibility'], kind='stable')
                if gold[i] == 1 and result['credibility'][i] <= 0.5]
    assert [row['index'] for row in answer['rows']] == expected
    assert all(row['gold'] == 'pos' for row in answer['rows'])


@pytest.mark.parametrize('split', ['test', 'train'])
def test_training_view_counts_what_run_knn_representations_retrieved_counts(run, client,
                                                                            tmp_path, split):
    out = str(tmp_path / 'retrieved')
    run_knn_representations.main(['retrieved', '--model-setup', run, '--split', split,
                                  '--k', '16', '--top', '25', '--out', out])
    expected = read_csv(out + '.csv')
    view = client.get('/api/training', params={'split': split}).json()
    assert [(item['index'], item['times_retrieved']) for item in view['most_retrieved']] == \
        [(int(r['train_index']), int(r['times_retrieved'])) for r in expected]
    first = view['most_retrieved'][0]
    assert 0 < len(first['retrieved_by']) <= 5 and first['retrieved_by'][0]['split'] == split
    assert first['n_retrievers'] == first['times_retrieved']   # once per retrieving example
    assert all(r['index'] != first['index'] for r in first['retrieved_by'] if split == 'train')
    assert view['knn_rule'] is not None and view['cleanlab']['n_candidates'] >= 0


def test_reduction_steps_are_the_libraries_beam_search(session, client):
    text = 'the movie was a great plot and it'
    answer = client.post('/api/reduce', json={'text': text, 'importance': 'confidence'}).json()
    reducer = input_reduction.make_reducer('confidence', session.setup)
    reduction, = reducer.reduce([(text.split(), None)])
    assert answer['words'] == text.split()
    assert answer['steps'][0]['kept'] == list(range(8))
    assert answer['steps'][-1]['kept'] == list(reduction.kept)
    assert answer['steps'][-1]['score'] == pytest.approx(reduction.score_after)
    assert [len(s['kept']) for s in answer['steps']] == list(range(8, len(reduction.kept) - 1, -1))
    assert answer['prediction'] == session.setup.label_names[reduction.prediction]


@pytest.mark.parametrize('method, path, body, status, message', [
    ('post', '/api/predict', {'text': 'x' * 1001}, 400, 'text has 1001 characters, more than'),
    ('post', '/api/predict', {'text': '  '}, 400, 'text is missing'),
    ('post', '/api/predict', {'text': 'good\tbad'}, 400, 'text holds a tab'),
    ('post', '/api/predict', {'premise': 'a'}, 400, 'text is missing'),
    ('post', '/api/predict', {'split': 'test', 'index': 60}, 400, 'index must be an integer'),
    ('post', '/api/predict', {'split': '../args.json', 'index': 0}, 400, 'split must be one of'),
    ('post', '/api/predict', {'text': 'good', 'all_layers': 'yes'}, 400, 'all_layers must be'),
    ('post', '/api/predict', [1, 2], 400, 'request body must be a JSON object'),
    ('post', '/api/reduce', {'text': 'good', 'importance': 'magic'}, 400, 'importance must be'),
    ('get', '/api/dataset?page=0', None, 400, 'page must be an integer'),
    ('get', '/api/dataset?split=/etc/passwd', None, 400, 'split must be one of'),
    ('get', '/api/dataset?sort=evil', None, 400, 'sort must be one of'),
    ('get', '/api/dataset?max_credibility=nan', None, 400, 'max_credibility must be'),
    ('get', '/api/predict', None, 405, 'Method Not Allowed'),
    ('get', '/static/../args.json', None, 404, None),
    ('get', '/nothing', None, 404, 'Not Found: /nothing'),
])
def test_bad_requests_are_4xx_with_one_line(client, method, path, body, status, message):
    response = getattr(client, method)(path, **({} if body is None else {'json': body}))
    assert response.status_code == status, response.text
    if message:
        error = response.json()['error']
        assert message in error and '\n' not in error and 'Traceback' not in error


def test_a_bad_body_and_a_huge_one_are_refused(client):
    response = client.post('/api/predict', content=b'{not json')
    assert response.status_code == 400 and 'not JSON' in response.json()['error']
    response = client.post('/api/predict', content=b'x' * (explorer_app.MAX_BODY_BYTES + 1))
    assert response.status_code == 413
    assert response.json() == {'error': 'request body over 65536 bytes; send a shorter text'}


def test_the_page_forbids_scripts_from_elsewhere(client):
    response = client.get('/')
    assert response.status_code == 200
    assert "default-src 'self'" in response.headers['content-security-policy']
    page = response.text
    assert 'static/explorer.js' in page and 'http' not in page.replace('http-equiv', '')
    assert client.get('/static/explorer.js').status_code == 200


def test_concurrent_requests_get_their_own_answers(client):
    sentences = ['the movie was good', 'the plot was awful', 'a dull movie', 'superb plot',
                 'it was poor', 'very fine'] * 2
    alone = [client.post('/api/predict', json={'text': s}).json() for s in sentences]
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        together = list(pool.map(
            lambda s: client.post('/api/predict', json={'text': s}).json(), sentences))
    assert together == alone
    assert {a['softmax']['prediction'] for a in alone} == {'pos', 'neg'}


def test_an_unexpected_failure_is_one_line_without_traceback(session, monkeypatch, capsys):
    monkeypatch.setattr(session, 'info', lambda: 1 / 0)
    response = TestClient(explorer_app.make_app(session), raise_server_exceptions=False) \
        .get('/api/info')
    assert response.status_code == 500
    assert response.json() == {'error': 'internal error (ZeroDivisionError); the server log '
                                        'has the details'}
    assert 'ZeroDivisionError' in capsys.readouterr().err


def test_only_local_host_names_are_answered(session):
    local = TestClient(explorer_app.make_app(session, ['127.0.0.1', 'localhost']),
                       base_url='http://localhost')
    assert local.get('/api/info').status_code == 200
    rebound = TestClient(explorer_app.make_app(session, ['127.0.0.1', 'localhost']),
                         base_url='http://attacker.example')
    assert rebound.get('/api/info').status_code == 400


def test_remote_binding_needs_a_flag(run):
    with pytest.raises(UserError, match='--host 0.0.0.0 lets other machines use the model; '
                                        'pass --allow-remote'):
        explore.main(['--model-setup', run, '--host', '0.0.0.0'])


def test_a_port_in_use_is_refused_before_loading(run):
    import socket
    with socket.create_server(('127.0.0.1', 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(UserError, match='--port {} on 127.0.0.1 cannot be used'.format(port)):
            explore.main(['--model-setup', run, '--port', str(port)])


def test_export_is_a_self_contained_folder_replaced_only_when_asked(run, tmp_path):
    out = str(tmp_path / 'export')
    flags = ['--model-setup', run, '--k', str(K), '--export', out, '--split', 'test',
             '--limit', '4']
    explore.main(flags)
    assert sorted(os.listdir(out)) == ['.deep-knn-files', '.deep-knn-result', 'data.json',
                                       'index.html', 'static']
    with open(os.path.join(out, 'data.json')) as f:
        data = json.load(f)
    assert sorted(data['examples']['test']) == ['0', '1', '2', '3']
    assert [row['index'] for row in data['rows']['test']] == [0, 1, 2, 3]
    assert data['info']['produced_by'].startswith('Produced by:')
    with open(os.path.join(out, 'static', 'data.js')) as f:
        assert json.loads(f.read()[len('window.EXPLORER_DATA = '):-2]) == data
    with pytest.raises(UserError, match='export exists; pass --overwrite'):
        explore.main(flags)
    explore.main(flags + ['--overwrite'])
    mine = tmp_path / 'mine'
    mine.mkdir()
    (mine / 'notes.txt').write_text('keep')
    with pytest.raises(UserError, match='was not made by this tool'):
        explore.main(flags[:-4] + ['--export', str(mine), '--overwrite'])
    assert (mine / 'notes.txt').read_text() == 'keep'


def test_an_export_holding_a_users_file_is_refused_before_any_work(run, tmp_path, capsys,
                                                                     monkeypatch):
    out = tmp_path / 'export'
    flags = ['--model-setup', run, '--k', str(K), '--export', str(out), '--limit', '2']
    explore.main(flags)
    (out / 'notes.txt').write_text('mine')
    monkeypatch.setattr(explore.export, 'export_data', lambda *a: pytest.fail('computed first'))
    status, err = cli_helpers.cli(explore.main, flags + ['--overwrite'], capsys)
    assert status == 2 and len(err) == 1 and 'notes.txt' in err[0]
    assert '--force' not in err[0] and '--out' not in err[0] and '--overwrite' in err[0]
    assert sorted(os.listdir(str(tmp_path))) == ['export'] and (out / 'notes.txt').exists()


def test_a_pair_bilstm_takes_premise_and_hypothesis(tmp_path):
    out = train_snli_bilstm(tmp_path)
    session = explorer.ExplorerSession.open(str(out / 'args.json'), explorer.Settings(DkNNSettings(k=K)))
    client = TestClient(explorer_app.make_app(session))
    assert client.get('/api/info').json()['pair'] is True
    answer = client.post('/api/predict', json={'premise': 'A man sits outside today.',
                                               'hypothesis': 'A man sleeps outside'}).json()
    assert answer['input']['premise'] == ['a', 'man', 'sits', 'outside', 'today', '.']
    assert answer['input']['words'] == ['a', 'man', 'sleeps', 'outside']
    ids = session.setup.encode([((answer['input']['premise'], answer['input']['words']),
                                 None)])[0][0]
    logits = session.setup.model.layer_activations([ids])[-1]
    assert max(v['value'] for v in answer['softmax']['probabilities']) == pytest.approx(
        calibration.softmax(logits).max(), abs=1e-5)
    assert client.post('/api/predict', json={'hypothesis': 'a man'}).json()['error'] \
        .startswith('premise is missing')
    assert client.get('/api/dataset', params={'split': 'test'}).json()['n_total'] == 30


def test_a_pretrained_transformer_run_is_explored_like_a_cnn(tmp_path, data_files):  # noqa: F811
    checkpoint = write_tiny_checkpoint(tmp_path / 'bert')
    out = tmp_path / 'custom_transformer'
    train(out, data_files, '--model', 'transformer', '--pretrained', str(checkpoint),
          '--epoch', '1', '--max-length', '32')
    session = explorer.ExplorerSession.open(str(out / 'args.json'), explorer.Settings(DkNNSettings(k=K)))
    client = TestClient(explorer_app.make_app(session))
    answer = client.post('/api/predict', json={'text': 'the movie was good',
                                               'all_layers': True}).json()
    ids = session.setup.encode([(['the', 'movie', 'was', 'good'], None)])[0][0]
    logits = session.setup.model.layer_activations([ids])[-1]
    assert [v['value'] for v in answer['softmax']['probabilities']] == pytest.approx(
        calibration.softmax(logits)[0].tolist(), abs=1e-6)
    assert len(answer['neighbors']) == len(session.setup.model.layer_activations([ids]))
    assert [m['method'] for m in answer['maps']] == list(METHODS)
    word_pieces = session.setup.model.wordpieces
    typed = client.post('/api/predict', json={'text': 'the movie was unbelievable'}).json()['input']
    assert typed['words'] == ['the', 'movie', 'was', 'unbelievable']
    assert typed['pieces'] == [[word_pieces.tokenizer.id_to_token(i)
                                for i in word_pieces.tokenizer.encode(
                                    word, add_special_tokens=False).ids] or ['[UNK]']
                               for word in typed['words']]
    assert typed['pieces'][-1] == ['un', '##believ', '##able']   # the split is shown
    steps = client.post('/api/reduce', json={'text': 'the movie was good'}).json()['steps']
    assert steps[0]['kept'] == [0, 1, 2, 3] and len(steps[-1]['kept']) >= 1


def test_a_run_without_calibration_split_is_explored_softmax_only(run, monkeypatch):
    drop_calibration_split(monkeypatch)
    session = explorer.ExplorerSession.open(run, explorer.Settings(DkNNSettings(k=K)))
    client = TestClient(explorer_app.make_app(session))
    info = client.get('/api/info').json()
    assert info['has_dknn'] is False and info['methods'] == ['confidence', 'gradient']
    answer = client.post('/api/predict', json={'text': 'the movie was good'}).json()
    assert answer['dknn'] is None and answer['neighbors'] == []
    assert [m['method'] for m in answer['maps']] == ['confidence', 'gradient']
    rows = client.get('/api/dataset', params={'split': 'test', 'wrong': 'dknn',
                                              'per_page': 200}).json()['rows']
    assert rows and all(r['credibility'] is None and r['softmax_prediction'] != r['gold']
                        for r in rows)
    error = client.post('/api/reduce', json={'text': 'good', 'importance': 'conformity'})
    assert error.json()['error'] == ("importance must be one of confidence, gradient, got "
                                     "'conformity'")


def test_an_evaluation_file_is_shown_beside_the_splits(run, data_files):  # noqa: F811
    session = explore.open_session(explore.parse_args(
        ['--model-setup', run, '--k', str(K), '--eval-file', data_files[1]]))
    assert len(session.examples['file-test']) == 60
    client = TestClient(explorer_app.make_app(session))
    assert client.get('/api/info').json()['splits']['file-test'] == 60
    page = client.get('/api/dataset', params={'split': 'file-test', 'per_page': 200}).json()
    split = client.get('/api/dataset', params={'split': 'test', 'per_page': 200}).json()
    assert page['rows'] == split['rows']        # the same file as the run's test split


@pytest.mark.parametrize('backend', ['faiss', 'kdtree'])
def test_the_folder_is_locked_only_while_a_cache_is_written(run, backend):
    explorer.ExplorerSession.open(run, explorer.Settings(DkNNSettings(k=K, backend=backend)))  # caches now
    folder = os.path.dirname(run)
    with cli_helpers.held_by_another_process(folder, 'another command'):
        session = explorer.ExplorerSession.open(run, explorer.Settings(DkNNSettings(k=K, backend=backend)))
        assert session.dknn is not None
        os.remove(os.path.join(folder, 'dknn_cache.npz'))
        with pytest.raises(UserError, match='another command'):
            explorer.ExplorerSession.open(run, explorer.Settings(DkNNSettings(k=K, backend=backend)))
    explorer.ExplorerSession.open(run, explorer.Settings(DkNNSettings(k=K, backend=backend)))
    assert os.path.exists(os.path.join(folder, 'dknn_cache.npz'))


def test_a_run_retrained_under_the_explorer_is_refused_never_mixed(tmp_path, data_files):  # noqa: F811
    out = tmp_path / 'custom_cnn'
    train(out, data_files, '--epoch', '2')
    stale = TestClient(explorer_app.make_app(explorer.ExplorerSession.open(
        str(out / 'args.json'), explorer.Settings(DkNNSettings(k=K)))))
    assert stale.post('/api/predict', json={'text': 'a fine film'}).status_code == 200
    train(out, data_files, '--epoch', '2', '--seed', '3', '--force')   # predict.py's new model
    for answer in (stale.post('/api/predict', json={'text': 'a fine film'}),
                   stale.get('/api/info'), stale.get('/api/dataset?split=test')):
        assert answer.status_code == 409
        assert answer.json()['error'] == (
            '{} was retrained or replaced after the explorer loaded it; restart the '
            'explorer to explore the run it holds now'.format(out))


@pytest.mark.parametrize('request_kind', ['surrogate', 'nested', 'superscript page'])
def test_odd_requests_are_a_4xx_with_one_line_never_a_500(client, request_kind):
    if request_kind == 'superscript page':
        answer = client.get('/api/dataset?split=test&page=\u00b2')
    else:
        body = ('{"text": "a \\ud800 film"}' if request_kind == 'surrogate'
                else '[' * 30000 + ']' * 30000)     # under the 64 KiB limit
        answer = client.post('/api/predict', content=body.encode('utf-8'),
                             headers={'content-type': 'application/json'})
    assert 400 <= answer.status_code < 500, answer.text
    assert '\n' not in answer.json()['error']


def test_a_split_evaluation_is_cached_on_disk_and_reused_after_a_restart(run, monkeypatch):
    first = explorer.ExplorerSession.open(run, explorer.Settings(DkNNSettings(k=K)))
    rows = first.table('dev').page(explorer.queries.Query(per_page=200))
    folder = os.path.dirname(run)
    assert any(name.startswith('explorer_split_dev_') for name in os.listdir(folder))
    monkeypatch.setattr(explorer.split_cache, 'evaluate',
                        lambda *a, **k: pytest.fail('evaluated again'))
    again = explorer.ExplorerSession.open(run, explorer.Settings(DkNNSettings(k=K)))
    assert again.table('dev').page(explorer.queries.Query(per_page=200)) == rows
    other_k = explorer.ExplorerSession.open(run, explorer.Settings(DkNNSettings(k=K - 1)))
    with pytest.raises(pytest.fail.Exception, match='evaluated again'):
        other_k.table('dev')     # other DkNN settings: another key, computed anew


def test_run_dknn_predictions_are_reused_where_settings_match(run, monkeypatch):
    run_dknn.main(['--model-setup', run, '--k', '3', '--split', 'test'])
    folder = os.path.dirname(run)
    saved = np.load(os.path.join(folder, 'dknn_predictions_test_faiss_k3.npz'))
    monkeypatch.setattr(explorer.split_cache, 'evaluate',
                        lambda *a, **k: pytest.fail('evaluated again'))
    session = explorer.ExplorerSession.open(run, explorer.Settings(DkNNSettings(k=3)))
    table = session.table('test')
    assert np.array_equal(table.dknn_prediction, saved['prediction'])
    assert np.array_equal(table.credibility, saved['credibility'])
    assert np.array_equal(table.softmax, saved['softmax_probability'])
    expected = session.setup.model.layer_activations([x for x, _ in session.setup.test])[-2]
    assert table.hidden == pytest.approx(expected, abs=1e-5)   # computed when first needed
    kdtree = explorer.ExplorerSession.open(run, explorer.Settings(DkNNSettings(
        k=3, backend='kdtree')))
    with pytest.raises(pytest.fail.Exception, match='evaluated again'):
        kdtree.table('test')     # another backend: run_dknn.py's file is not reused


def test_evaluation_reports_progress_block_by_block(session, client):
    seen = []
    examples = session.examples['test']
    columns = explorer.split_cache.evaluate(session.setup, session.dknn, examples, 7,
                                            lambda done, total: seen.append((done, total)))
    assert seen[-1][0] == seen[-1][1] == len(seen) and len(columns['softmax']) == len(examples)
    assert client.get('/api/progress', params={'split': 'test'}).json() is None   # idle


@pytest.mark.parametrize('flags, fragment', [
    (['--port', '80000'], 'port number from 1 to 65535'),
    (['--neighbors', '0'], '--neighbors'),
    (['--split', 'nosuch'], '--split'),
    (['--eval-file', 'missing.txt'], '--eval-file missing.txt is not a file'),
])
def test_a_bad_flag_is_one_line_before_the_model_loads(run, capsys, monkeypatch, flags,
                                                       fragment):
    monkeypatch.setattr(explorer.model_setup, 'load_setup',
                        lambda *a: pytest.fail('loaded the model first'))
    status, err = cli_helpers.cli(explore.main, ['--model-setup', run] + flags, capsys)
    cli_helpers.assert_one_line_error(status, err, fragment)


def test_the_metrics_panel_gives_run_dknns_accuracy_and_sklearns_confusion(run, client):
    from sklearn.metrics import confusion_matrix
    report_path = run_dknn.evaluate_model(run_dknn.parse_args(
        ['--model-setup', run, '--k', str(K), '--split', 'test']))[1]
    with open(report_path) as f:
        report = json.load(f)
    saved = np.load(report_path.replace('dknn_', 'dknn_predictions_', 1)[:-5] + '.npz')
    found = client.get('/api/metrics', params={'split': 'test'}).json()
    softmax, dknn = found['classifiers']
    assert found['n'] == report['n_examples'] == 60
    assert softmax['accuracy'] == pytest.approx(report['softmax_accuracy'], abs=1e-12)
    assert dknn['accuracy'] == pytest.approx(report['dknn_accuracy'], abs=1e-12)
    gold = saved['label']
    assert dknn['confusion'] == confusion_matrix(gold, saved['prediction']).tolist()
    assert softmax['confusion'] == confusion_matrix(
        gold, saved['softmax_probability'].argmax(axis=1)).tolist()
    bins = calibration.reliability_bins(saved['credibility'], saved['prediction'] == gold, 10)
    assert [b['count'] for b in dknn['reliability']['bins']] == bins['count'].tolist()
    assert [b['accuracy'] for b in dknn['reliability']['bins'] if b['count']] == pytest.approx(
        bins['accuracy'][bins['count'] > 0].tolist())
    header = client.get('/api/info').json()['accuracy']['test']      # shown in the header
    assert header == {'softmax': softmax['accuracy'], 'dknn': dknn['accuracy']}
    assert client.get('/api/metrics', params={'split': 'nope'}).status_code == 400


def test_the_editors_diff_is_that_of_two_predict_calls(session, client):
    original = {'split': 'test', 'index': 3}
    before = session.predict(original, all_layers=True)
    text = before['input']['editable']['text']
    assert session.setup.tokenize(text) == session.examples['test'][3][0]   # opens as typed
    edited = {'text': 'not ' + text + ' awful awful'}
    after = session.predict(edited, all_layers=True)
    found = client.post('/api/edit', json={'original': original, 'edited': edited,
                                           'all_layers': True}).json()
    assert found['before'] == before and found['after'] == after
    diff = found['diff']
    assert diff['softmax']['before'] == before['softmax']['prediction']
    assert diff['softmax']['after'] == after['softmax']['prediction']
    assert [v['delta'] for v in diff['softmax']['values']] == pytest.approx(
        [a['value'] - b['value'] for a, b in zip(after['softmax']['probabilities'],
                                                 before['softmax']['probabilities'])])
    assert diff['credibility']['after'] - diff['credibility']['before'] == pytest.approx(
        after['dknn']['credibility'] - before['dknn']['credibility'])
    ops = [w['op'] for w in diff['words']]
    assert ops == ['added'] + ['same'] * len(before['input']['words']) + ['added'] * 2
    for layer, old, new in zip(diff['neighbors'], before['neighbors'], after['neighbors']):
        old_ids = {i['index'] for i in old['items']}
        new_ids = {i['index'] for i in new['items']}
        assert {i['index'] for i in layer['entered']} == new_ids - old_ids
        assert {i['index'] for i in layer['left']} == old_ids - new_ids
        assert set(layer['stayed']) == old_ids & new_ids
    first_map = diff['maps'][0]
    kept = [w for w in first_map['words'] if w['op'] == 'same']
    assert [w['before'] for w in kept] == [w['importance'] for w in before['maps'][0]['words']]
    assert client.post('/api/edit', json={'original': original}).json()['error'].startswith(
        'request: send a JSON object')


def test_search_and_prediction_sorts_select_what_a_direct_computation_selects(session, client):
    table = session.table('test')
    answer = client.get('/api/dataset', params={'split': 'test', 'search': 'GREAT',
                                                'per_page': 200}).json()
    assert [r['index'] for r in answer['rows']] == [
        i for i, text in enumerate(table.texts) if 'great' in text.lower()]
    assert 0 < answer['n_matching'] < 60
    for column, values in (('softmax_prediction', table.softmax_prediction),
                           ('dknn_prediction', table.dknn_prediction)):
        answer = client.get('/api/dataset', params={'split': 'test', 'sort': column,
                                                    'order': 'desc', 'per_page': 200}).json()
        assert [r['index'] for r in answer['rows']] == list(np.argsort(-values, kind='stable'))
    too_long = client.get('/api/dataset', params={'split': 'test', 'search': 'x' * 201})
    assert too_long.status_code == 400 and too_long.json()['error'].startswith('search has 201')


def test_the_selection_downloads_as_csv_with_formulas_neutralised(session, client):
    response = client.get('/api/dataset.csv', params={'split': 'test', 'wrong': 'either',
                                                      'sort': 'credibility', 'page': '2'})
    assert response.status_code == 200 and response.headers['content-type'].startswith('text/csv')
    assert 'test_selection.csv' in response.headers['content-disposition']
    rows = list(csv.DictReader(response.text.splitlines()))
    table = session.table('test')
    expected = table.matching(explorer.queries.Query(wrong='either', sort='credibility'))
    assert [int(r['index']) for r in rows] == list(expected)        # every page, in order
    assert [float(r['credibility']) for r in rows] == pytest.approx(
        table.credibility[expected], abs=1e-6)
    assert [r['text'] for r in rows] == [table.texts[i] for i in expected]
    evil = {'index': 0, 'text': '=HYPERLINK("http://x")', 'gold': '+1', 'softmax_prediction': '@a',
            'softmax_probability': 0.5, 'dknn_prediction': None, 'credibility': None}
    text = explorer_app.queries.selection.csv_text([evil, dict(evil, text='-2+3', gold='ok')])
    assert text.splitlines()[1] == ('"0","\'=HYPERLINK(""http://x"")","\'+1","\'@a",'
                                    '"0.500000","",""')
    assert list(csv.reader(text.splitlines()))[2][1:3] == ["'-2+3", 'ok']


def test_the_embedding_is_sklearns_pca_and_places_a_query_by_it(session, client, run,
                                                                 monkeypatch):
    from sklearn.decomposition import PCA
    layer = 2
    points = client.get('/api/embedding', params={'layer': str(layer)}).json()
    train = session.setup.model.layer_activations([x for x, _ in session.setup.train])[layer]
    expected = PCA(n_components=2).fit_transform(train.astype(np.float64))
    found = np.array([points['x'], points['y']]).T
    signs = np.sign((found * expected).sum(axis=0))     # each axis up to its sign
    assert found == pytest.approx(expected * signs, abs=2e-4)
    assert points['n'] == len(session.setup.train) and points['name'] == 'layer 3 of 4'
    assert points['gold'] == [y for _, y in session.setup.splits.train]
    assert points['prediction'] == session.table('train').dknn_prediction.tolist()
    answer = client.post('/api/embed', json={'text': 'the movie was great', 'layer': layer}).json()
    query = session.setup.model.layer_activations([session.setup.encode(
        [(['the', 'movie', 'was', 'great'], None)])[0][0]])[layer]
    pca = PCA(n_components=2).fit(train.astype(np.float64))
    assert answer['point'] == pytest.approx((pca.transform(query)[0] * signs).tolist(), abs=2e-4)
    view = session.predict({'text': 'the movie was great'}, all_layers=True)
    assert answer['neighbors'] == [i['index'] for i in view['neighbors'][layer]['items']]
    monkeypatch.setattr(explorer.embedding, 'fit_projection',
                        lambda *a: pytest.fail('fitted again'))
    again = explorer.ExplorerSession.open(run, explorer.Settings(DkNNSettings(k=K)))
    assert again.embedding(layer)['x'] == points['x']            # read from the run folder
    bad = client.get('/api/embedding', params={'layer': '9'})
    assert bad.status_code == 400 and bad.json()['error'].startswith('layer must be an integer')


def test_the_pca_is_fitted_on_a_seeded_sample_and_projects_every_row():
    rng = np.random.RandomState(0)
    vectors = rng.normal(size=(500, 6)) * [5, 3, 1, 1, 1, 1]
    mean, components = explorer.embedding.fit_projection(vectors, sample=200)
    again = explorer.embedding.fit_projection(vectors, sample=200)
    assert np.array_equal(mean, again[0]) and np.array_equal(components, again[1])
    assert explorer.embedding.project(vectors, mean, components).shape == (500, 2)
    assert abs(components[0][0]) > 0.9 and abs(components[1][1]) > 0.9   # the wide axes


@pytest.fixture(scope='module')
def second_run(tmp_path_factory, data_files):  # noqa: F811
    out = tmp_path_factory.mktemp('explorer') / 'custom_cnn_seed3'
    train(out, data_files, '--seed', '3', '--unit', '12')
    return str(out / 'args.json')


def test_compare_gives_the_disagreements_of_the_two_runs_prediction_files(run, second_run,
                                                                         session):
    other = explorer.ExplorerSession.open(second_run, explorer.Settings(DkNNSettings(k=K)))
    client = TestClient(explorer_app.make_app(session, other=other))
    saved = []
    for args in (run, second_run):
        report_path = run_dknn.evaluate_model(run_dknn.parse_args(
            ['--model-setup', args, '--k', str(K), '--split', 'test']))[1]
        saved.append(np.load(report_path.replace('dknn_', 'dknn_predictions_', 1)[:-5] + '.npz'))
    expected = {'softmax': np.flatnonzero(saved[0]['softmax_probability'].argmax(axis=1)
                                          != saved[1]['softmax_probability'].argmax(axis=1)),
                'dknn': np.flatnonzero(saved[0]['prediction'] != saved[1]['prediction'])}
    assert len(expected['softmax']) + len(expected['dknn']) > 0     # the runs differ
    for kind, rows in expected.items():
        found = client.get('/api/compare/disagreements', params={
            'split': 'test', 'kind': kind, 'per_page': 200}).json()
        assert [r['index'] for r in found['rows']] == rows.tolist()
        assert found['n_matching'] == len(rows) and found['n_' + kind] == len(rows)
        for r in found['rows']:
            assert r['a']['softmax_prediction'] == session.setup.label_names[
                saved[0]['softmax_probability'][r['index']].argmax()]
    both = client.post('/api/compare/predict', json={'text': 'a great movie'}).json()
    assert both['a'] == session.predict({'text': 'a great movie'})
    assert both['b'] == other.predict({'text': 'a great movie'})
    assert client.get('/api/info').json()['compare']['model'] == other.description
    bad = client.get('/api/compare/disagreements', params={'kind': 'both'})
    assert bad.status_code == 400 and bad.json()['error'].startswith('kind must be one of')
    assert TestClient(explorer_app.make_app(session)).post(
        '/api/compare/predict', json={'text': 'a'}).status_code == 404
    fewer = explorer.queries.SplitTable.evaluate('test', session.examples['test'][:10],
                                                 other.setup, other.dknn)
    with pytest.raises(UserError, match='split test differs between the two runs'):
        explorer_app.compare.disagreements(session.table('test'), fewer, 'softmax',
                                       explorer.queries.Query())


def test_compare_refuses_runs_of_other_labels_in_one_line(run, tmp_path, capsys, monkeypatch):
    out = train_snli_bilstm(tmp_path)
    status, err = cli_helpers.cli(explore.main, ['--model-setup', run, '--compare',
                                                 str(out / 'args.json'), '--k', str(K)], capsys)
    # the runs load first (their progress bars), then one error line
    errors = [line for line in err if line.startswith('error')]
    assert status == 2 and errors == err[-1:] and 'has labels' in err[-1]
    assert err[-1].startswith('error: --compare: ') and err[-1].endswith('of the same dataset')
    status, err = cli_helpers.cli(explore.main, ['--model-setup', run, '--compare', run,
                                                 '--export', str(tmp_path / 'x')], capsys)
    cli_helpers.assert_one_line_error(status, err, '--compare serves two runs')


def test_the_input_view_reuses_the_maps_query_only_for_the_same_input(session):
    setup = session.setup
    layers = setup.model.layer_activations([setup.encode([(['a', 'fine', 'plot'], None)])[0][0]])
    direct = session.dknn.predict_from_activations(layers)
    other = setup.model.layer_activations([setup.encode([(['awful'], None)])[0][0]])
    first = explorer.searching.FirstQuery(session.dknn)
    first.predict_from_activations([np.concatenate([a, b]) for a, b in zip(layers, other)])
    reused = first.full_input(layers)
    assert np.array_equal(reused['neighbors'], direct['neighbors'])
    assert reused['credibility'] == pytest.approx(direct['credibility'])
    mismatched = explorer.searching.FirstQuery(session.dknn)
    mismatched.predict_from_activations(other)         # another input first: not reused
    assert np.array_equal(mismatched.full_input(layers)['neighbors'], direct['neighbors'])


def test_the_progress_endpoint_follows_an_evaluation_block_by_block(run, monkeypatch):
    import threading
    session = explorer.ExplorerSession.open(run, explorer.Settings(DkNNSettings(k=K),
                                                                   reuse_evaluations=False))
    client = TestClient(explorer_app.make_app(session))
    evaluate = explorer.split_cache.evaluate
    halfway, release = threading.Event(), threading.Event()

    def paused(setup, dknn, examples, batchsize, progress):
        progress(1, 3)            # as evaluate reports after its first of 3 blocks
        halfway.set()
        release.wait(60)
        return evaluate(setup, dknn, examples, batchsize, progress)
    monkeypatch.setattr(explorer.split_cache, 'evaluate', paused)
    opening = threading.Thread(target=lambda: client.get('/api/dataset', params={'split': 'dev'}))
    opening.start()
    assert halfway.wait(60)
    assert client.get('/api/progress', params={'split': 'dev'}).json() == {'done': 1, 'total': 3}
    release.set()
    opening.join(60)
    assert client.get('/api/progress', params={'split': 'dev'}).json() is None   # done
