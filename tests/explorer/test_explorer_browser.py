"""explore.py in a real browser: headless Chromium (Debian's chromium and chromium-driver,
installed by .ci/run) driven by selenium over a tiny trained model.

The same code takes the README's screenshots of a real run:

    EXPLORER_SCREENSHOTS=docs/images EXPLORER_RUN=results/stsa.binary_cnn/args.json \
        .venv/bin/python -m pytest -q tests/explorer/test_explorer_browser.py -k screenshots
"""
import os

import numpy as np
import pytest

from deepknn.explorer import session as explorer
from deepknn.explorer.browser import CHROMEDRIVER, CHROMIUM, Server, chromium, wait_for
from deepknn.neighbors.dknn_settings import DkNNSettings
import explore
import run_dknn
from tests.commands.test_end_to_end import data_files, train  # noqa: F401 (data_files is a fixture)

webdriver = pytest.importorskip('selenium.webdriver', reason='selenium is not installed')
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason='no chromium and chromedriver on PATH; .ci/run installs them with apt-get install '
           'chromium chromium-driver (as root)')
K = 5
SENTENCE = 'The movie was GREAT <b>zzz</b>'


def type_and_predict(driver, base, text):
    driver.get(base + '#/input')
    box = wait_for(driver, '#input-text')
    box.clear()
    box.send_keys(text)
    driver.find_element(By.ID, 'predict-button').click()
    return wait_for(driver, '#maps')


def views(driver, base, sentence, folder=None):
    """Walk every view (taking a screenshot of each into `folder`, when given) and
    return what the checks need."""
    seen = {}
    type_and_predict(driver, base, sentence)
    seen['softmax'] = driver.find_element(By.ID, 'softmax-prediction').text
    seen['header'] = driver.find_element(By.ID, 'run').text
    seen['credibility'] = driver.find_element(By.ID, 'credibility').text
    seen['trust'] = [e.text for e in driver.find_elements(By.CSS_SELECTOR, 'tr.trust th')]
    seen['maps'] = [e.text for e in driver.find_elements(By.CSS_SELECTOR, 'tr.map td.method')]
    seen['coloured'] = len(driver.find_elements(By.CSS_SELECTOR, 'tr.map span.w'))
    seen['injected'] = len(driver.find_elements(By.CSS_SELECTOR, '#maps b, #prediction bdi b'))
    seen['neighbors'] = [e.text for e in driver.find_elements(
        By.CSS_SELECTOR, '#neighbors a.example-link')]
    seen['attribution'] = [e.text for e in driver.find_elements(
        By.CSS_SELECTOR, '#attribution a.example-link')]
    driver.find_element(By.ID, 'reduce').click()
    seen['reduction_steps'] = len(wait_for(driver, 'table.reduction').find_elements(
        By.CSS_SELECTOR, 'tr')) - 1
    if folder:
        driver.save_screenshot(os.path.join(folder, 'explorer_input.png'))
    driver.find_element(By.ID, 'all-layers').click()
    WebDriverWait(driver, 60).until(lambda d: len(d.find_elements(By.CSS_SELECTOR,
                                                                  '#neighbors h3')) > 1)
    seen['layers'] = len(driver.find_elements(By.CSS_SELECTOR, '#neighbors h3'))
    driver.find_element(By.CSS_SELECTOR, '#neighbors a.example-link').click()
    wait_for(driver, '#maps')
    seen['followed'] = driver.find_element(By.CSS_SELECTOR, '#prediction p').text
    driver.get(base + '#/example/test/3')
    wait_for(driver, '#maps')
    box = driver.find_element(By.ID, 'input-text')
    seen['filled'] = box.get_attribute('value')
    box.send_keys(' awful awful')
    driver.find_element(By.ID, 'predict-button').click()
    wait_for(driver, '#diff')
    seen['diff'] = {name: driver.find_element(By.ID, 'diff-' + name).text for name in (
        'softmax-before', 'softmax-after', 'dknn-before', 'dknn-after')}
    seen['added'] = [e.text for e in driver.find_elements(By.CSS_SELECTOR, '#diff-words ins')]
    if folder:
        driver.save_screenshot(os.path.join(folder, 'explorer_editor.png'))
    driver.get(base + '#/dataset?split=test')
    wait_for(driver, '#dataset-table tr.row')
    seen['first_page'] = driver.find_element(By.ID, 'dataset-count').text
    driver.find_element(By.ID, 'next-page').click()
    WebDriverWait(driver, 30).until(lambda d: 'page 2 of' in d.find_element(
        By.ID, 'dataset-count').text)
    seen['second_page'] = driver.find_element(By.ID, 'dataset-count').text
    Select(driver.find_element(By.ID, 'filter-wrong')).select_by_value('either')
    WebDriverWait(driver, 30).until(lambda d: 'wrong=either' in d.current_url
                                    and d.find_elements(By.ID, 'dataset-count'))
    seen['wrong_only'] = driver.find_element(By.ID, 'dataset-count').text
    seen['wrong_rows'] = len(driver.find_elements(By.CSS_SELECTOR, '#dataset-table tr.row'))
    driver.find_element(By.ID, 'slice-name').send_keys('wrong ones')
    driver.find_element(By.ID, 'save-slice').click()
    Select(wait_for(driver, '#filter-per_page')).select_by_value('10')
    WebDriverWait(driver, 30).until(lambda d: 'per_page=10' in d.current_url
                                    and d.find_elements(By.ID, 'dataset-count'))
    seen['per_page'] = len(driver.find_elements(By.CSS_SELECTOR, '#dataset-table tr.row'))
    search = driver.find_element(By.ID, 'filter-search')
    search.send_keys('great')
    driver.find_element(By.ID, 'search-button').click()
    WebDriverWait(driver, 30).until(lambda d: 'search=great' in d.current_url
                                    and d.find_elements(By.ID, 'dataset-count'))
    seen['searched'] = [e.text for e in driver.find_elements(
        By.CSS_SELECTOR, '#dataset-table a.example-link')]
    seen['csv_link'] = driver.find_element(By.ID, 'download-csv').get_attribute('href')
    driver.get(base + '#/dataset?split=nosuch')
    seen['bad_split'] = wait_for(driver, '#error').text
    seen['controls_kept'] = len(driver.find_elements(By.ID, 'filter-wrong'))
    driver.refresh()
    slice_link = wait_for(driver, '#slices a.slice')
    seen['slice'] = slice_link.text
    slice_link.click()
    WebDriverWait(driver, 30).until(lambda d: 'wrong=either' in d.current_url
                                    and d.find_elements(By.ID, 'dataset-count'))
    seen['slice_count'] = driver.find_element(By.ID, 'dataset-count').text
    if folder:
        driver.get(base + '#/dataset?split=test&sort=credibility&order=asc')
        wait_for(driver, '#dataset-table tr.row')
        driver.save_screenshot(os.path.join(folder, 'explorer_dataset.png'))
    driver.get(base + '#/training?split=test')
    wait_for(driver, '#most-retrieved li', 900)      # minutes on a real run's 70k examples
    seen['most_retrieved'] = len(driver.find_elements(By.CSS_SELECTOR, '#most-retrieved > ol > li'))
    Select(driver.find_element(By.ID, 'training-split')).select_by_value('dev')
    WebDriverWait(driver, 900).until(lambda d: 'split=dev' in d.current_url
                                    and d.find_elements(By.CSS_SELECTOR, '#most-retrieved li'))
    seen['training_split'] = driver.find_element(By.CSS_SELECTOR, '#most-retrieved p').text
    if folder:
        driver.save_screenshot(os.path.join(folder, 'explorer_training.png'))
    driver.get(base + '#/metrics?split=test')
    wait_for(driver, '#accuracy-dknn', 900)
    seen['accuracy'] = {name: driver.find_element(By.ID, 'accuracy-' + name).text
                        for name in ('softmax', 'dknn')}
    seen['reliability'] = len(driver.find_elements(By.CSS_SELECTOR, 'canvas.reliability'))
    if folder:
        driver.save_screenshot(os.path.join(folder, 'explorer_metrics.png'))
    seen['embedding'] = place_in_embedding(driver, base, sentence)
    if folder:
        driver.save_screenshot(os.path.join(folder, 'explorer_embedding.png'))
    return seen


GOLD_PIXELS = ('const c = document.getElementById("embedding-canvas");'
               'const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;'
               'let gold = 0, drawn = 0;'
               'for (let i = 0; i < d.length; i += 4) { if (d[i + 3]) drawn++;'
               '  if (d[i] === 255 && d[i + 1] === 215 && d[i + 2] === 0) gold++; }'
               'return [drawn, gold];')


def place_in_embedding(driver, base, sentence):
    """The embedding view's count line and (drawn, gold) pixels after placing `sentence`."""
    driver.get(base + '#/embedding')
    wait_for(driver, '#embedding-canvas', 900)
    box = driver.find_element(By.ID, 'embedding-text')
    box.send_keys(sentence)
    driver.find_element(By.ID, 'embed-button').click()
    WebDriverWait(driver, 60).until(lambda d: 'gold disc' in d.find_element(
        By.ID, 'embedding-count').text)
    return driver.find_element(By.ID, 'embedding-count').text, \
        driver.execute_script(GOLD_PIXELS)


@pytest.fixture(scope='module')
def run(tmp_path_factory, data_files):  # noqa: F811
    out = tmp_path_factory.mktemp('browser') / 'custom_cnn'
    train(out, data_files)
    return str(out / 'args.json')


def test_a_browser_walks_every_view_and_opens_the_export(run, tmp_path):
    session = explorer.ExplorerSession.open(run, explorer.Settings(DkNNSettings(k=K),
                                                                   trust=('energy',)))
    expected = session.predict({'text': SENTENCE})
    n_wrong = len(session.table('test').matching(
        explorer.queries.Query(wrong='either')))
    driver = chromium()
    try:
        with Server(session) as base:
            seen = views(driver, base, SENTENCE)
            driver.get(base + '#/input?text=' + 'x' * 1200)
            seen['too_long'] = wait_for(driver, '#error').text
            seen['kept_text'] = driver.find_element(By.ID, 'input-text').get_attribute('value')
        export = str(tmp_path / 'export')
        explore.main(['--model-setup', run, '--k', str(K), '--export', export, '--limit', '3'])
        driver.get('file://' + os.path.join(export, 'index.html') + '#/dataset?split=test')
        wait_for(driver, '#dataset-table tr.row')
        exported_rows = len(driver.find_elements(By.CSS_SELECTOR, '#dataset-table tr.row'))
        driver.find_element(By.CSS_SELECTOR, '#dataset-table a.example-link').click()
        wait_for(driver, '#maps')
        exported_layers = len(driver.find_elements(By.CSS_SELECTOR, '#neighbors h3'))
        exported_source = driver.find_element(By.CSS_SELECTOR, '#prediction p').text
        linked = [a.get_attribute('href').split('#')[1] for a in driver.find_elements(
            By.CSS_SELECTOR, '#neighbors a.example-link')]
        unlinked = len(driver.find_elements(By.CSS_SELECTOR, '#neighbors .example-unlinked'))
        driver.get('file://' + os.path.join(export, 'index.html') + '#/metrics')
        exported_accuracy = wait_for(driver, '#accuracy-softmax').text
        exported_canvases = len(driver.find_elements(By.CSS_SELECTOR, 'canvas.reliability'))
        driver.get('file://' + os.path.join(export, 'index.html') + '#/embedding?example=1')
        exported_embedding = wait_for(driver, '#embedding-canvas') and driver.find_element(
            By.ID, 'embedding-count').text, driver.execute_script(GOLD_PIXELS)
    finally:
        driver.quit()
    assert seen['softmax'] == expected['softmax']['prediction']
    assert float(seen['credibility']) == pytest.approx(expected['dknn']['credibility'], abs=5e-4)
    assert seen['trust'] == ['trust: energy'] and list(expected['dknn']['trust']) == ['energy']
    assert seen['maps'] == ['conformity', 'confidence', 'gradient', 'credibility']
    assert seen['coloured'] == 4 * 12       # the markup stays text: '<', 'b', '>' are words
    assert seen['injected'] == 0
    assert len(seen['neighbors']) == K
    assert seen['attribution'] == [item['text'] for item in expected['attribution']['items']]
    assert seen['layers'] == 4              # the CNN's DkNN layers
    expected_steps = len(session.reduce({'text': SENTENCE})['steps'])
    assert seen['reduction_steps'] == expected_steps > 1
    assert seen['followed'].startswith('Example ') and 'of train' in seen['followed']
    assert seen['first_page'] == '60 of 60 examples match; page 1 of 3'
    assert seen['second_page'] == '60 of 60 examples match; page 2 of 3'
    assert seen['wrong_only'].startswith('{} of 60 examples match'.format(n_wrong))
    assert seen['wrong_rows'] == min(n_wrong, 25)
    assert seen['most_retrieved'] == 25
    assert seen['training_split'].startswith('Each dev example')
    assert seen['per_page'] == min(n_wrong, 10)
    table = session.table('test')
    assert seen['searched'] == [table.texts[i] for i in table.matching(
        explorer.queries.Query(wrong='either', search='great'))][:10]
    assert 'api/dataset.csv?' in seen['csv_link'] and 'search=great' in seen['csv_link']
    assert seen['bad_split'].startswith('split must be one of') and seen['controls_kept'] == 1
    assert seen['slice'] == 'wrong ones'
    assert seen['slice_count'] == seen['wrong_only']
    report = run_dknn.evaluate_model(run_dknn.parse_args(
        ['--model-setup', run, '--k', str(K), '--split', 'test']))[0]
    assert seen['accuracy'] == {'softmax': '{:.4f}'.format(report['softmax_accuracy']),
                                'dknn': '{:.4f}'.format(report['dknn_accuracy'])}
    assert seen['reliability'] == 2
    assert 'test accuracy: softmax {:.4f}, DkNN {:.4f}'.format(
        report['softmax_accuracy'], report['dknn_accuracy']) in seen['header']
    before = session.predict({'split': 'test', 'index': 3})
    after = session.predict({'text': before['input']['editable']['text'] + ' awful awful'})
    assert seen['filled'] == before['input']['editable']['text']
    assert seen['diff'] == {'softmax-before': before['softmax']['prediction'],
                            'softmax-after': after['softmax']['prediction'],
                            'dknn-before': before['dknn']['prediction'],
                            'dknn-after': after['dknn']['prediction']}
    assert seen['added'] == ['awful', 'awful']
    assert 'more than the limit of 1000' in seen['too_long']
    assert seen['kept_text'] == 'x' * 1200          # the form and the text stay
    assert exported_rows == 3 and exported_layers == 4
    assert exported_source.startswith('Example 0 of test')
    # the export holds no training example: its neighbours are text, never dead links
    assert linked == [] and unlinked == 4 * K
    first_three = session.table('test')
    assert exported_accuracy == '{:.4f}'.format(float(np.mean(
        first_three.softmax_prediction[:3] == first_three.gold[:3])))
    assert exported_canvases == 2
    n_train = len(session.setup.train)
    count, (drawn, gold) = seen['embedding']
    assert count.startswith('{} training examples, layer 3 of 4'.format(n_train))
    assert '{} nearest training examples'.format(K) in count and drawn > n_train and gold > 50
    count, (drawn, gold) = exported_embedding
    assert count.startswith('{} training examples'.format(n_train)) and gold > 50


# Dataset-view queries: several filters, sorts and pages, as the URL carries them.
QUERIES = [{}, {'sort': 'credibility'}, {'sort': 'credibility', 'order': 'desc'},
           {'sort': 'softmax_probability', 'order': 'desc', 'wrong': 'either'},
           {'sort': 'text'}, {'sort': 'gold', 'order': 'desc', 'per_page': '7', 'page': '2'},
           {'wrong': 'softmax', 'per_page': '5', 'page': '2'},
           {'max_credibility': '0.5', 'sort': 'credibility', 'order': 'desc'},
           {'label': 'LABEL1', 'sort': 'text', 'order': 'desc'}, {'wrong': 'dknn', 'page': '9'},
           {'search': 'GREAT', 'sort': 'credibility'}, {'search': 'the m', 'per_page': '3'},
           {'sort': 'softmax_prediction', 'order': 'desc'}, {'sort': 'dknn_prediction'},
           {'sort': 'dknn_prediction', 'order': 'desc', 'wrong': 'either'}]


def test_the_static_export_pages_rows_as_the_server_does(run, tmp_path):
    """queries.py (the server) and pageOf in explorer.js (the static export) give the same
    row ids, counts and pages for the same query over the same exported rows."""
    session = explorer.ExplorerSession.open(run, explorer.Settings(DkNNSettings(k=K)))
    limit = 30
    table = explorer.queries.SplitTable.evaluate(
        'test', session.examples['test'][:limit], session.setup, session.dknn,
        session.settings.dknn.batchsize)
    labels = table.label_names
    queries = [dict(q, label=labels[-1]) if 'label' in q else q for q in QUERIES]
    export = str(tmp_path / 'export')
    explore.main(['--model-setup', run, '--k', str(K), '--export', export,
                  '--limit', str(limit)])
    driver = chromium()
    try:
        driver.get('file://' + os.path.join(export, 'index.html') + '#/dataset?split=test')
        wait_for(driver, '#dataset-table tr.row')
        from_js = [driver.execute_script(
            'const p = pageOf(STATIC.rows.test, arguments[0], "test");'
            'return [p.rows.map((r) => r.index), p.n_matching, p.page, p.n_pages];', query)
            for query in queries]
        csv_from_js = [driver.execute_script(
            'return csvText(selectionOf(STATIC.rows.test, arguments[0]));', query)
            for query in queries]
    finally:
        driver.quit()
    from_python = []
    for query in queries:
        page = table.page(explorer.queries.Query.from_params(query, labels))
        from_python.append([[row['index'] for row in page['rows']], page['n_matching'],
                            page['page'], page['n_pages']])
    assert from_js == from_python
    assert csv_from_js == [table.csv(explorer.queries.Query.from_params(query, labels))
                           for query in queries]
    assert len({str(ids) for ids, *_ in from_python}) > 5    # the queries differ


@pytest.mark.skipif(not os.environ.get('EXPLORER_SCREENSHOTS'),
                    reason='README screenshots: set EXPLORER_SCREENSHOTS=folder and '
                           'EXPLORER_RUN=args.json of a trained run (EXPLORER_COMPARE=args.json '
                           'of a second run of its dataset adds the Compare view)')
def test_screenshots_of_a_real_run():
    folder = os.environ['EXPLORER_SCREENSHOTS']
    os.makedirs(folder, exist_ok=True)
    session = explorer.ExplorerSession.open(os.environ['EXPLORER_RUN'], explorer.Settings())
    other = explorer.ExplorerSession.open(os.environ['EXPLORER_COMPARE'], explorer.Settings()) \
        if os.environ.get('EXPLORER_COMPARE') else None
    sentence = 'A gripping, beautifully acted film , if a bit too long .'
    driver = chromium(1200, 2000)
    try:
        with Server(session, other) as base:
            seen = views(driver, base, sentence, folder)
            if other:
                driver.get(base + '#/compare?text=' + sentence)
                wait_for(driver, '#compare-count', 600)
                driver.save_screenshot(os.path.join(folder, 'explorer_compare.png'))
    finally:
        driver.quit()
    assert seen['most_retrieved'] > 0


def test_a_transformer_runs_word_pieces_are_shown(tmp_path, data_files):  # noqa: F811
    from tests.models.test_transformer import write_tiny_checkpoint
    checkpoint = write_tiny_checkpoint(tmp_path / 'bert')
    out = tmp_path / 'custom_transformer'
    train(out, data_files, '--model', 'transformer', '--pretrained', str(checkpoint),
          '--epoch', '1', '--max-length', '32')
    session = explorer.ExplorerSession.open(str(out / 'args.json'),
                                            explorer.Settings(DkNNSettings(k=K)))
    driver = chromium()
    try:
        with Server(session) as base:
            type_and_predict(driver, base, 'the cat was unbelievable')
            groups = [[p.text for p in group.find_elements(By.CSS_SELECTOR, 'span.piece')]
                      for group in driver.find_elements(By.CSS_SELECTOR, '#word-pieces .pieces')]
            split = [g.get_attribute('title') for g in driver.find_elements(
                By.CSS_SELECTOR, '#word-pieces .pieces.split')]
    finally:
        driver.quit()
    expected = session.predict({'text': 'the cat was unbelievable'})['input']['pieces']
    assert groups == expected and groups[-1] == ['un', '##believ', '##able']
    assert 'unbelievable' in split and 'cat' not in split


def test_two_runs_side_by_side_and_their_disagreements(run, tmp_path, data_files):  # noqa: F811
    second = tmp_path / 'custom_cnn_seed3'
    train(second, data_files, '--seed', '3', '--unit', '12')
    runs = [run, str(second / 'args.json')]
    sessions = [explorer.ExplorerSession.open(path, explorer.Settings(DkNNSettings(k=K)))
                for path in runs]
    predicted = []
    for path in runs:
        report = run_dknn.evaluate_model(run_dknn.parse_args(
            ['--model-setup', path, '--k', str(K), '--split', 'test']))[1]
        with np.load(report.replace('dknn_', 'dknn_predictions_', 1)[:-5] + '.npz') as saved:
            predicted.append(saved['softmax_probability'].argmax(axis=1))
    expected = np.flatnonzero(predicted[0] != predicted[1])[:25].tolist()
    driver = chromium(1600, 1200)
    try:
        with Server(*sessions) as base:
            driver.get(base + '#/compare?text=' + 'a great movie')
            wait_for(driver, '#compare-count', 120)
            columns = [driver.find_element(By.CSS_SELECTOR, '#compare-{} #softmax-prediction'
                                           .format(side)).text for side in 'ab']
            rows = [int(tr.find_element(By.TAG_NAME, 'td').text) for tr in
                    driver.find_elements(By.CSS_SELECTOR, '#disagreements tr.row')]
            count = driver.find_element(By.ID, 'compare-count').text
            driver.save_screenshot(str(tmp_path / 'compare.png'))
    finally:
        driver.quit()
    assert columns == [s.predict({'text': 'a great movie'})['softmax']['prediction']
                       for s in sessions]
    assert rows == expected and count.startswith('{} of 60 test examples'.format(
        int((predicted[0] != predicted[1]).sum())))


def test_the_page_shows_an_evaluations_progress(run, monkeypatch):
    import threading
    session = explorer.ExplorerSession.open(run, explorer.Settings(DkNNSettings(k=K),
                                                                   reuse_evaluations=False))
    evaluate = explorer.split_cache.evaluate
    release = threading.Event()

    def paused(setup, dknn, examples, batchsize, progress):
        progress(2, 5)             # as evaluate reports after its second of 5 blocks
        release.wait(60)
        return evaluate(setup, dknn, examples, batchsize, progress)
    monkeypatch.setattr(explorer.split_cache, 'evaluate', paused)
    driver = chromium()
    try:
        with Server(session) as base:
            driver.get(base + '#/dataset?split=dev')
            WebDriverWait(driver, 30).until(lambda d: 'block 2 of 5' in d.find_element(
                By.ID, 'progress').text)
            shown = driver.find_element(By.ID, 'progress').text
            release.set()
            wait_for(driver, '#dataset-table tr.row')
            gone = driver.find_elements(By.ID, 'progress')
    finally:
        release.set()
        driver.quit()
    assert shown == 'evaluating dev: block 2 of 5…' and gone == []
