"""predict.py: new, unlabelled sentences get predictions, credibility and maps."""
import csv
import os
import subprocess
import types

import numpy as np
import pytest

from deepknn.evaluation import calibration
from deepknn.cli import command_line_message
from deepknn.models import model_setup
from deepknn.storage import result_folder
from deepknn.reports import saliency_report
from deepknn.data import text_readers
import nlp_utils
import predict
from nlp_utils import UserError
from tests.commands.test_end_to_end import data_files, train  # noqa: F401 (data_files is a fixture)


@pytest.fixture(scope='module')
def run(tmp_path_factory, data_files):  # noqa: F811
    out = tmp_path_factory.mktemp('predict') / 'custom_cnn'
    train(out, data_files)
    return str(out / 'args.json')


def RAW(text):
    return text_readers.tokenize_new_text(text, raw_style=True)


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_tokenizing_new_text_like_the_training_data():
    assert text_readers.tokenize_new_text("It isn't Moore's film.") == \
        ['It', 'is', "n't", 'Moore', "'s", 'film', '.']
    # The audit's cases: one token each in the SST files, so kept whole.
    assert text_readers.tokenize_new_text("an old-fashioned -lrb- and\\/or -rrb- tale ...") \
        == ['an', 'old-fashioned', '-lrb-', 'and\\/or', '-rrb-', 'tale', '...']
    assert text_readers.tokenize_new_text('mr. smith ends.') == ['mr', '.', 'smith', 'ends', '.']
    assert text_readers.tokenize_new_text("mr. smith said it's over.", known={'mr.', "it's"}) \
        == ['mr.', 'smith', 'said', "it's", 'over', '.']
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
    assert [r['example'] for r in importances if r['method'] == 'gradient'] == \
        ['1'] * 4 + ['3'] * 4                                      # by line, not by order
    page = open(stem + '.html').read()
    assert 'gold: <b><bdi>unknown</bdi></b>' in page
    assert '<div>Line 3 — gold' in page and 'Example 2' not in page
    assert 'Note: 1 blank line of {} skipped'.format(tmp_path / 'new.txt') in \
        open(stem + '.md').read()
    with pytest.raises(UserError, match='pred.csv exists; pass --overwrite'):
        predict.main(['--model-setup', run, '--input', str(tmp_path / 'new.txt'), '--out', stem])


def predict_argv(run, tmp_path, stem, *extra):
    (tmp_path / 'new.txt').write_text('the movie was great\n')
    return ['--model-setup', run, '--input', str(tmp_path / 'new.txt'), '--out', stem,
            '--k', '5', '--methods', 'confidence'] + list(extra)


def outputs_of(stem):
    return [stem + suffix for suffix in ('.csv', '.md', '.html', '_importances.csv')]


def test_a_second_run_into_the_same_out_stops_while_the_first_writes(run, tmp_path):
    stem = str(tmp_path / 'pred')
    with result_folder.lock_outputs(stem, outputs_of(stem), 'predict.py'):
        with pytest.raises(UserError, match=r'the outputs .*pred\.\* is in use by pid'):
            predict.main(predict_argv(run, tmp_path, stem))
    assert sorted(os.listdir(str(tmp_path))) == ['new.txt']


def test_outputs_that_appear_during_a_run_are_not_replaced(run, tmp_path, monkeypatch):
    """An earlier run into the same --out finished while this one loaded its model."""
    stem = str(tmp_path / 'pred')
    real = predict.input_notes

    def earlier_run_finishes(*args):
        with open(stem + '.csv', 'w') as f:
            f.write('the earlier run\n')
        return real(*args)
    monkeypatch.setattr(predict, 'input_notes', earlier_run_finishes)
    with pytest.raises(UserError, match='pred.csv exists; pass --overwrite'):
        predict.main(predict_argv(run, tmp_path, stem))
    assert open(stem + '.csv').read() == 'the earlier run\n'


def test_a_table_is_never_written_without_its_maps(run, tmp_path, monkeypatch):
    stem = str(tmp_path / 'pred')

    def failing_page(f):
        raise OSError(28, 'No space left on device')
    monkeypatch.setattr(saliency_report, 'map_writes',
                        lambda *args, **kwargs: [(stem + '.html', failing_page, 'w')])
    with pytest.raises(OSError):
        predict.main(predict_argv(run, tmp_path, stem))
    assert sorted(os.listdir(str(tmp_path))) == ['new.txt']


def test_what_a_killed_run_left_beside_its_outputs_is_removed(run, tmp_path):
    dead = subprocess.Popen(['true'])                # a pid that no longer runs
    dead.wait()
    left = tmp_path / '.tmp-{}-abcd1234pred.csv'.format(dead.pid)
    other = tmp_path / '.tmp-{}-abcd1234other.csv'.format(dead.pid)   # another output's
    left.write_text('half a table')
    other.write_text('half another table')
    predict.main(predict_argv(run, tmp_path, str(tmp_path / 'pred')))
    assert not left.exists() and not other.exists() and (tmp_path / 'pred.csv').exists()


def test_an_old_style_out_naming_a_folder_is_refused(run, tmp_path):
    """--out DIR/. (the old path spelling) would write the hidden files DIR/.csv."""
    with pytest.raises(UserError, match='names a folder; give a path without suffix'):
        predict.main(predict_argv(run, tmp_path, str(tmp_path) + '/out/.'))
    assert sorted(os.listdir(str(tmp_path))) == ['new.txt']


def test_an_out_folder_gets_the_default_name(run, tmp_path):
    """--out DIR/ (and --out of an existing folder) is a folder: DIR/predictions.*."""
    predict.main(predict_argv(run, tmp_path, str(tmp_path / 'out') + '/'))
    assert sorted(os.listdir(str(tmp_path / 'out'))) == [
        'predictions.csv', 'predictions.html', 'predictions.md', 'predictions_importances.csv']


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
    assert command_line_message(error.value).startswith('--methods conformity')
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
        text_readers.read_new_inputs(str(tmp_path / 'pairs.txt'), True, RAW)
    (tmp_path / 'pairs.txt').write_text("a man sleeps\tnobody isn't\n")
    (number, tokens), = text_readers.read_new_inputs(str(tmp_path / 'pairs.txt'), True, RAW)
    assert number == 1 and tokens == (['a', 'man', 'sleeps'], ['nobody', 'isn', "'", 't'])


def test_inputs_longer_than_a_transformers_max_length_are_named(tmp_path):
    """A stand-in transformer of max_length 4 word pieces (one word = one piece, 2 taken
    by [CLS] and [SEP]): the line of 3 words is truncated, the lines of 2 are not."""
    (tmp_path / 'in.txt').write_text('a b\n\n \nb a b\n')
    vocab = {'a': 0, 'b': 1, '<eos>': 2, '<unk>': 3}
    setup = types.SimpleNamespace(
        config=types.SimpleNamespace(model='minilm', max_length=4, pair=False), vocab=vocab,
        dataset=types.SimpleNamespace(label_names=['0', '1']), label_names=['neg', 'pos'],
        encode=lambda examples: nlp_utils.encode_examples(examples, vocab),
        model=types.SimpleNamespace(count_truncated=lambda xs: sum(len(x) - 1 > 2 for x in xs)))
    inputs = [(1, ['a', 'b']), (4, ['b', 'a', 'b'])]
    assert predict.input_notes(setup, inputs, str(tmp_path / 'in.txt')) == [
        '2 blank lines of {} skipped; the outputs are numbered by their line in the '
        'file.'.format(tmp_path / 'in.txt'),
        '1 input longer than max_length 4 word pieces, read truncated (the words past it do '
        'not count): line 4.']


def test_a_labelled_file_is_noted_not_read_silently(run, tmp_path, capsys):
    path = str(tmp_path / 'labelled.txt')
    with open(path, 'w') as f:
        f.write('pos the movie was great\nneg the movie was awful\n')
    predict.main(['--model-setup', run, '--input', path, '--out',
                  str(tmp_path / 'pred'), '--k', '5'])
    err = capsys.readouterr().err
    assert 'note: every line of {} starts with a label of the model (neg, pos)'.format(
        path) in err and 'run_dknn.py --eval-file' in err
    (tmp_path / 'plain.txt').write_text('pos is a word here\nthe movie was great\n')
    predict.main(['--model-setup', run, '--input', str(tmp_path / 'plain.txt'), '--out',
                  str(tmp_path / 'plain'), '--k', '5'])
    assert 'starts with a label' not in capsys.readouterr().err


def test_trust_scores_stand_beside_credibility(run, tmp_path):
    """--trust msp,energy: max softmax equals the softmax column (a known answer), energy
    is logsumexp of the logits; the default is the study's Mahalanobis; 'none' drops them."""
    (tmp_path / 'new.txt').write_text('The movie was GREAT\nit was awful zzz\n')
    stem = str(tmp_path / 'trusted')
    predict.main(['--model-setup', run, '--input', str(tmp_path / 'new.txt'), '--out', stem,
                  '--k', '5', '--methods', 'none', '--trust', 'msp,energy'])
    rows = read_csv(stem + '.csv')
    assert [r['trust_msp'] for r in rows] == [r['softmax_probability'] for r in rows]
    setup = model_setup.load_setup(run)
    logits = setup.model.predict_logits([x for x, _ in setup.encode(
        [(tokens, None) for _, tokens in setup.new_inputs(str(tmp_path / 'new.txt'))])])
    energy = [float(np.log(np.exp(row.astype(np.float64)).sum())) for row in logits]
    assert [float(r['trust_energy']) for r in rows] == pytest.approx(energy, abs=1e-4)
    predict.main(['--model-setup', run, '--input', str(tmp_path / 'new.txt'), '--out',
                  stem + '_default', '--k', '5', '--methods', 'none'])
    assert [c for c in read_csv(stem + '_default.csv')[0] if c.startswith('trust_')] == [
        'trust_mahalanobis']
    predict.main(['--model-setup', run, '--input', str(tmp_path / 'new.txt'), '--out',
                  stem + '_none', '--k', '5', '--methods', 'none', '--trust', 'none'])
    assert not any(c.startswith('trust_') for c in read_csv(stem + '_none.csv')[0])


def test_run_dknn_writes_trust_scores_and_their_auroc_beside_credibility(run, tmp_path,
                                                                       capsys):
    """run_dknn.py --trust msp: the scores equal the saved softmax maximum, and each AUROC
    of right vs wrong softmax predictions is scikit-learn's; --activations refuses it."""
    import sklearn.metrics
    import run_dknn
    out = str(tmp_path / 'report')
    run_dknn.main(['--model-setup', run, '--k', '5', '--trust', 'msp', '--out', out])
    report = nlp_utils.read_json(os.path.join(out, 'dknn_test_faiss_k5.json'), 'report')
    saved = np.load(os.path.join(out, 'dknn_predictions_test_faiss_k5.npz'))
    np.testing.assert_allclose(saved['trust_msp'], saved['softmax_probability'].max(axis=1),
                               rtol=1e-6)
    right = saved['softmax_probability'].argmax(axis=1) == saved['label']
    for name, scores in (('msp', saved['trust_msp']), ('credibility', saved['credibility'])):
        if right.all() or not right.any():
            assert np.isnan(report['trust'][name]['auroc_right_vs_wrong'])
        else:
            assert report['trust'][name]['auroc_right_vs_wrong'] == pytest.approx(
                sklearn.metrics.roc_auc_score(right, scores))
    assert 'AUROC of right vs wrong softmax predictions, msp:' in capsys.readouterr().out
    with pytest.raises(SystemExit):
        run_dknn.parse_args(['--activations', str(tmp_path), '--trust', 'msp'])
    assert '--trust needs --model-setup' in capsys.readouterr().err
