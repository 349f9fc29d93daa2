"""predict.py: new, unlabelled sentences get predictions, credibility and maps."""
import csv

import pytest

from deepknn import calibration
from deepknn import model_setup
from deepknn import text_readers
import nlp_utils
import predict
from nlp_utils import UserError
from test_end_to_end import data_files, train  # noqa: F401 (data_files is a fixture)


@pytest.fixture(scope='module')
def run(tmp_path_factory, data_files):  # noqa: F811
    out = tmp_path_factory.mktemp('predict') / 'custom_cnn'
    train(out, data_files)
    return str(out / 'args.json')


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_tokenizing_new_text_like_the_training_data():
    assert text_readers.tokenize_new_text("It isn't Moore's film.") == \
        ['It', 'is', "n't", 'Moore', "'s", 'film', '.']
    assert text_readers.tokenize_new_text("isn't it", raw_style=True) == ['isn', "'", 't', 'it']
    vocab = {'great': 0, 'The': 1}
    assert nlp_utils.fold_case(['The', 'GREAT', 'Zebra'], vocab) == ['The', 'great', 'Zebra']
    assert nlp_utils.fold_case((['GREAT'], ['The']), vocab) == (['great'], ['The'])


def test_predictions_are_the_models_own_and_maps_are_written(run, tmp_path):
    (tmp_path / 'new.txt').write_text('The movie was GREAT\n\nit was awful zzz\n')
    stem = str(tmp_path / 'pred')
    predict.main(['--model-setup', run, '--input', str(tmp_path / 'new.txt'), '--out', stem,
                  '--k', '5', '--methods', 'conformity,gradient'])
    rows = read_csv(stem + '.csv')
    assert [r['line'] for r in rows] == ['1', '3']                 # the blank line skipped
    assert [r['prediction'] for r in rows] == ['pos', 'neg']       # the keyword decides
    assert rows[0]['text'] == 'the movie was great' and rows[1]['unknown_words'] == 'zzz'
    setup = model_setup.load_setup(run)
    ids = setup.encode([(['the', 'movie', 'was', 'great'], None)])[0][0]
    softmax = calibration.softmax(setup.model.layer_activations([ids])[-1])[0]
    assert float(rows[0]['softmax_probability']) == pytest.approx(softmax.max(), abs=1e-4)
    assert 0 <= float(rows[0]['credibility']) <= 1 and rows[0]['dknn_prediction'] in ('pos', 'neg')
    importances = read_csv(stem + '_importances.csv')
    assert {r['method'] for r in importances} == {'conformity', 'gradient'}
    assert {r['gold'] for r in importances} == {''}                 # unknown, not invented
    page = open(stem + '.html').read()
    assert 'gold: <b><bdi>unknown</bdi></b>' in page
    with pytest.raises(UserError, match='pred.csv exists; pass --overwrite'):
        predict.main(['--model-setup', run, '--input', str(tmp_path / 'new.txt'), '--out', stem])


def drop_calibration_split(monkeypatch):
    """Make model_setup.load_setup return runs as if trained with --n-calib 0."""
    real = model_setup.load_setup

    def without_calibration(*args, **kwargs):
        setup = real(*args, **kwargs)
        setup.splits.calib = []
        return setup
    monkeypatch.setattr(model_setup, 'load_setup', without_calibration)


def test_a_model_without_calibration_split_gives_softmax_only(run, tmp_path, monkeypatch):
    (tmp_path / 'new.txt').write_text('the movie was great\n')
    drop_calibration_split(monkeypatch)
    flags = ['--model-setup', run, '--input', str(tmp_path / 'new.txt')]
    with pytest.raises(UserError) as error:
        predict.main(flags + ['--out', str(tmp_path / 'a')])
    assert error.value.for_command_line().startswith('--methods conformity')
    predict.main(flags + ['--out', str(tmp_path / 'b'), '--methods', 'none'])
    row, = read_csv(str(tmp_path / 'b.csv'))
    assert row['prediction'] == 'pos' and 'credibility' not in row
    assert 'softmax only' in open(str(tmp_path / 'b.md')).read()


@pytest.mark.parametrize('text, message', [
    ('good\tbad\n', 'line 1: a tab in the text'), ('\n  \n', 'has no sentences'),
    ('ok\n\x00\n', 'line 2: control character')])
def test_bad_input_files_are_one_line_errors(run, tmp_path, text, message):
    (tmp_path / 'bad.txt').write_text(text)
    with pytest.raises(UserError, match=message):
        predict.main(['--model-setup', run, '--input', str(tmp_path / 'bad.txt'),
                      '--out', str(tmp_path / 'x'), '--methods', 'none'])
    assert not (tmp_path / 'x.csv').exists()


def test_a_missing_input_names_the_flag(run, tmp_path):
    with pytest.raises(UserError, match='--input .*not a file'):
        predict.main(['--model-setup', run, '--input', str(tmp_path / 'nope.txt'),
                      '--out', str(tmp_path / 'x')])


def test_pair_lines_need_one_tab(tmp_path):
    (tmp_path / 'pairs.txt').write_text('a man sleeps\tnobody sleeps\nno tab here\n')
    with pytest.raises(UserError, match='line 2: a pair model needs a premise, one tab'):
        text_readers.read_new_inputs(str(tmp_path / 'pairs.txt'), pair=True, raw_style=True)
    (tmp_path / 'pairs.txt').write_text("a man sleeps\tnobody isn't\n")
    (number, tokens), = text_readers.read_new_inputs(str(tmp_path / 'pairs.txt'), True,
                                                      raw_style=True)
    assert number == 1 and tokens == (['a', 'man', 'sleeps'], ['nobody', 'isn', "'", 't'])
