"""Vocabulary, word vectors, batching and safe file output shared by every script."""
import collections
import gzip
import hashlib
import io
import json
import os
import tempfile
import zipfile

import chainer
import numpy as np

EOS = '<eos>'
UNK = '<unk>'


class UserError(Exception):
    """A problem with the user's input; the CLIs print its one-line message and exit 2."""


def run_cli(main):
    """Run `main()`, turning a UserError into one line on stderr and exit status 2."""
    import sys
    try:
        main()
    except UserError as error:
        sys.stderr.write('error: {}\n'.format(error))
        sys.exit(2)


# ---------------------------------------------------------------- atomic output
def atomic_write(path, write, mode):
    """Write through a temporary file in the same folder, then rename, so a crash
    never leaves a half-written `path` behind."""
    atomic_write_files([(path, write, mode)])


def atomic_write_files(writes):
    """writes: [(path, write(file), mode)]. Every file is written to a temporary sibling
    first and all are renamed only once every one succeeded, so a failure leaves all
    the old files as they were (a report and its data never end up half new)."""
    temporaries = []
    try:
        for path, write, mode in writes:
            folder = os.path.dirname(os.path.abspath(path))
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix='.tmp-', suffix=os.path.basename(path))
            temporaries.append(tmp)
            # mkstemp makes the file 0600; give it the mode a plain open() would.
            os.chmod(tmp, 0o666 & ~_umask())
            # Text is always UTF-8 (the HTML pages say so), whatever the locale.
            with os.fdopen(fd, mode, **({} if 'b' in mode else {'encoding': 'utf-8'})) as f:
                write(f)
        for (path, _, _), tmp in zip(writes, temporaries):
            os.replace(tmp, path)
    except BaseException:
        for tmp in temporaries:
            if os.path.exists(tmp):
                os.remove(tmp)
        raise


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path, text):
    atomic_write(path, lambda f: f.write(text), 'w')


def atomic_write_json(path, obj):
    atomic_write_files([json_write(path, obj)])


def atomic_savez(path, **arrays):
    """np.savez without pickle: object arrays are refused at write time too."""
    atomic_write_files([savez_write(path, arrays)])


def savez_write(path, arrays):
    """(path, write, mode) of an npz without pickle, for atomic_write_files."""
    for name, array in arrays.items():
        if np.asarray(array).dtype == object:
            raise ValueError('refusing to save object array {!r} (would need pickle)'.format(name))
    return path, lambda f: np.savez(f, **arrays), 'wb'


def json_write(path, obj):
    """(path, write, mode) of a JSON file, for atomic_write_files."""
    return path, lambda f: f.write(json.dumps(obj, indent=2, sort_keys=True) + '\n'), 'w'


def file_digest(path, algorithm='md5'):
    """Hex digest of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.new(algorithm)
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def load_npz_safely(path, target, what='model file'):
    """Load a Chainer npz (model or trainer snapshot) into `target` with pickle off:
    chainer.serializers.load_npz allows pickle, so a crafted file could run code."""
    import zipfile
    try:
        with np.load(path, allow_pickle=False) as npz:
            chainer.serializers.NpzDeserializer(npz).load(target)
    except FileNotFoundError:
        raise UserError('{} {} does not exist; train first'.format(what, path))
    except (OSError, zipfile.BadZipFile) as e:
        raise UserError('{} {} is not a readable npz file ({}); re-train'.format(what, path, e))
    except (KeyError, ValueError) as e:
        if 'pickle' in str(e):
            raise UserError('{} {} is not a plain npz (it holds pickled data, which is refused '
                            'because loading it could run code); re-train'.format(what, path))
        raise UserError('{} {} does not match the architecture/vocabulary in args.json '
                        '({}: {})'.format(what, path, type(e).__name__, e))


def positive_int(text):
    """argparse type: an integer >= 1, with a one-line usage error otherwise."""
    import argparse
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError('must be an integer >= 1, got {!r}'.format(text))
    return value


def read_json(path, what='file'):
    """Load JSON with a one-line error naming the file when it is missing or malformed."""
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise UserError('{} {} does not exist'.format(what, path))
    except ValueError as e:
        raise UserError('{} {} is not valid JSON ({}); re-create it'.format(what, path, e))


# ---------------------------------------------------------------- vocabulary
def make_vocab(token_lists, min_freq=2, max_size=None, keep=()):
    """Map tokens to ids: '<eos>' is 0 and '<unk>' is 1, then tokens by falling frequency.

    Tokens seen fewer than `min_freq` times are dropped unless they are in `keep`
    (used for words that have a pretrained vector). Ties are broken alphabetically
    so the same data always gives the same vocabulary.
    """
    counts = collections.Counter(t for tokens in token_lists for t in tokens)
    keep = set(keep)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    vocab = {EOS: 0, UNK: 1}
    for token, count in ranked:
        if max_size is not None and len(vocab) >= max_size:
            break
        if (count >= min_freq or token in keep) and token not in vocab:
            vocab[token] = len(vocab)
    return vocab


def to_ids(tokens, vocab):
    """Token list -> int32 array of ids with '<eos>' appended, shape (len(tokens) + 1,)."""
    unk = vocab[UNK]
    ids = [vocab.get(t, unk) for t in tokens]
    ids.append(vocab[EOS])
    return np.asarray(ids, dtype=np.int32)


def example_to_ids(tokens, vocab):
    """Like to_ids, but also takes a (premise, hypothesis) pair of token lists."""
    if isinstance(tokens, tuple):
        return tuple(to_ids(part, vocab) for part in tokens)
    return to_ids(tokens, vocab)


def encode_examples(examples, vocab):
    """[(tokens, label)] -> [(ids, label)] with ids from example_to_ids."""
    return [(example_to_ids(tokens, vocab), label) for tokens, label in examples]


# ---------------------------------------------------------------- word vectors
def _open_vectors(path):
    """Open a GloVe/word2vec text file, plain, .gz, or the single .txt inside a .zip."""
    if not os.path.exists(path):
        raise UserError('word vectors file {} does not exist; pass --word_vectors PATH '
                        '(e.g. ../shared/data/glove/glove.6B.50d.txt.gz)'.format(path))
    if path.endswith('.gz'):
        return io.TextIOWrapper(gzip.open(path), encoding='utf-8', errors='replace')
    if path.endswith('.zip'):
        archive = zipfile.ZipFile(path)
        members = [n for n in archive.namelist() if n.endswith(('.txt', '.vec'))]
        if len(members) != 1:
            raise UserError('{} must contain exactly one .txt/.vec file, found {}'.format(
                path, members))
        return io.TextIOWrapper(archive.open(members[0]), encoding='utf-8', errors='replace')
    return open(path, encoding='utf-8', errors='replace')


def read_vectors(path, words):
    """{file word: float32 vector} for the file's words that are in `words` or are the
    lowercase form of one (uncased GloVe serves cased data). Returns (vectors, dim)."""
    wanted = set(words) | {w.lower() for w in words}
    vectors, dim = {}, None
    with _open_vectors(path) as f:
        for line_number, line in enumerate(f, 1):
            parts = line.rstrip().split(' ')
            if line_number == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                continue  # word2vec text header "n_words dim"
            if dim is None:
                dim = len(parts) - 1
            if len(parts) - 1 < dim or dim < 1:
                raise UserError('{} line {}: expected a word and {} numbers, got {} fields; '
                                'is this a GloVe/word2vec text file?'.format(
                                    path, line_number, dim, len(parts)))
            # A few GloVe 840B words contain spaces: the last `dim` fields are the vector.
            word = ' '.join(parts[:-dim])
            if word in wanted:
                try:
                    vectors[word] = np.asarray(parts[-dim:], dtype=np.float32)
                except ValueError:
                    raise UserError('{} line {}: a vector value is not a number'.format(
                        path, line_number))
    if dim is None:
        raise UserError('word vectors file {} is empty'.format(path))
    return vectors, dim


def vector_for(word, vectors):
    """The exact form's vector, else the lowercase form's, else None."""
    return vectors.get(word, vectors.get(word.lower()))


def embedding_matrix(vocab, vectors, dim, seed=0):
    """(matrix float32 (len(vocab), dim), coverage): pretrained rows where a vector
    exists, small random values elsewhere; coverage = fraction of vocabulary words
    (not '<eos>'/'<unk>') that got a pretrained vector."""
    matrix = np.random.RandomState(seed).normal(0, 0.1, (len(vocab), dim)).astype(np.float32)
    covered = 0
    for word, index in vocab.items():
        vector = vector_for(word, vectors)
        if vector is not None:
            matrix[index] = vector
            covered += word not in (EOS, UNK)
    return matrix, covered / max(1, len(vocab) - 2)


def load_word_vectors(path, vocab, seed=0):
    """Pretrained vectors for `vocab` (see embedding_matrix): (matrix, coverage)."""
    vectors, dim = read_vectors(path, vocab)
    return embedding_matrix(vocab, vectors, dim, seed)


# ---------------------------------------------------------------- batching
@chainer.dataset.converter()
def convert_seq(batch, device=None):
    """Trainer converter: [(ids or (premise_ids, hypothesis_ids), label)] ->
    {'xs': list of device arrays (or pairs), 'ys': int32 array (B,)}."""
    def send(x):
        if isinstance(x, tuple):
            return tuple(send(part) for part in x)
        return x if device is None else device.send(x)

    xs = [send(x) for x, _ in batch]
    ys = np.asarray([y for _, y in batch], dtype=np.int32)
    return {'xs': xs, 'ys': ys if device is None else device.send(ys)}
