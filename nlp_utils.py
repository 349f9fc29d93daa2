"""Vocabulary, batching, user errors and safe file output shared by every script."""
import collections
import hashlib
import json
import os
import tempfile
import zipfile
import zlib

import chainer
import numpy as np

from deepknn.storage import file_groups
from deepknn.storage import manifest

EOS = '<eos>'
UNK = '<unk>'
# Penn Treebank escapes in the SST/TREC files, and the characters they stand for.
PTB_ESCAPES = {'-lrb-': '(', '-rrb-': ')', '-lsb-': '[', '-rsb-': ']', '-lcb-': '{',
               '-rcb-': '}', '``': '"', "''": '"'}


def ptb_text(token):
    """What a PTB-escaped token stands for: '-lrb-' -> '(', 'and\\/or' -> 'and/or'."""
    return PTB_ESCAPES.get(token.lower(), token).replace('\\/', '/').replace('\\*', '*')


class UserError(Exception):
    """A problem with the user's input; the CLIs print its one-line message and exit 2.

    Library code names the parameters it means, never a command's flags: in backticks
    ("choose a smaller `k`"), or as the `parameter` it checked, with the message starting
    with that name (`parameter='tau'`: "tau must be in [0, 1]"). A command line shows the
    flags instead (deepknn.cli.command_line_message: --k, --tau)."""

    def __init__(self, message, parameter=None):
        super().__init__(message)
        self.parameter = parameter


# ---------------------------------------------------------------- atomic output
def atomic_write(path, write, mode):
    """Write through a temporary file in the same folder, then rename, so a crash
    never leaves a half-written `path` behind."""
    atomic_write_files([(path, write, mode)])


def atomic_write_files(writes):
    """writes: [(path, write(file), mode)]. Every file is written to a temporary sibling
    first and all are renamed only once every one succeeded; a rename that fails puts
    back the files already replaced (file_groups.replace_together), so a failure leaves all the old
    files as they were (a report and its data never end up half new). Files written
    below a result folder are recorded in its manifest (deepknn.storage.manifest). No writes:
    nothing happens."""
    if not writes:
        return
    file_groups.resolve_dead_journals([path for path, _, _ in writes])
    temporaries = []
    try:
        for path, write, mode in writes:
            folder = os.path.dirname(os.path.abspath(path))
            os.makedirs(folder, exist_ok=True)
            # The writer's pid in the name: what a killed writer left can be told apart
            # from a live one's (file_groups.sweep_dead_temporaries).
            fd, tmp = tempfile.mkstemp(dir=folder, prefix='.tmp-{}-'.format(os.getpid()),
                                       suffix=os.path.basename(path))
            temporaries.append(tmp)
            # mkstemp makes the file 0600; give it the mode a plain open() would.
            os.chmod(tmp, 0o666 & ~current_umask())
            # Text is always UTF-8 (the HTML pages say so), whatever the locale.
            with os.fdopen(fd, mode, **({} if 'b' in mode else {'encoding': 'utf-8'})) as f:
                write(f)
        file_groups.replace_together([path for path, _, _ in writes], temporaries)
    except BaseException:
        for tmp in temporaries:
            if os.path.exists(tmp):
                os.remove(tmp)
        raise
    manifest.record_outputs([path for path, _, _ in writes])


def is_number(text):
    """Whether `text` reads as a float ('1e-3', 'nan' included)."""
    try:
        float(text)
        return True
    except ValueError:
        return False


def count(n, noun):
    """'1 seed', '3 seeds': a count with its noun in the right number."""
    return '{} {}{}'.format(n, noun, '' if n == 1 else 's')


def current_umask():
    """The process's umask (os.umask can only be read by setting it)."""
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
    return path, lambda f: _write_npz(f, arrays), 'wb'


def save_chainer_npz(file, target):
    """chainer.serializers.save_npz (compressed, as it writes) of a link, optimizer or
    trainer, or of the {name: array} Chainer's snapshot extensions serialize them to,
    into a path or binary file, without pickle and with _write_npz's single error on a
    full disk. Also the `savefun` of those extensions."""
    arrays = target
    if not isinstance(target, dict):
        serializer = chainer.serializers.DictionarySerializer()
        serializer.save(target)
        arrays = serializer.target
    if not isinstance(file, str):
        _write_npz(file, arrays, zipfile.ZIP_DEFLATED)
        return
    with open(file, 'wb') as f:
        _write_npz(f, arrays, zipfile.ZIP_DEFLATED)


def _write_npz(f, arrays, compression=zipfile.ZIP_STORED):
    """What np.savez writes (one .npy member per array, uncompressed; np.savez_compressed
    with ZIP_DEFLATED), in name order and reproducible byte for byte, except that a
    failed write (a full disk) raises once: np.savez leaves its ZipFile open, and its
    finaliser later fails again on the closed file with a second traceback."""
    archive = zipfile.ZipFile(f, mode='w', compression=compression, allowZip64=True)
    try:
        # Members in name order with a fixed time stamp: the same arrays give the same
        # bytes on every save (Chainer's own order follows the process's hash seed).
        for name in sorted(arrays):
            info = zipfile.ZipInfo(name + '.npy', date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = compression
            with archive.open(info, 'w', force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(arrays[name]),
                                          allow_pickle=False)
    except BaseException:
        archive.fp = None     # nothing more to write into a failing file, now or at exit
        raise
    archive.close()


def parameters_digest(arrays):
    """sha256 (hex) of {name: array} in name order: each name, dtype, shape and the
    array's bytes. Equal for equal weights, however the file holding them was laid out."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(json.dumps([name, array.dtype.str, list(array.shape)]).encode('utf-8'))
        digest.update(array.tobytes())
    return digest.hexdigest()


def npz_parameters_digest(path, what='model file', fix='re-train'):
    """parameters_digest of the arrays of an npz file (read with pickle off); a file
    that is no readable npz is a UserError naming it."""
    check_npz(path, what, fix)
    try:
        with np.load(path, allow_pickle=False) as npz:
            return parameters_digest({name: npz[name] for name in npz.files})
    except (OSError, ValueError, zipfile.BadZipFile, zlib.error) as error:
        raise UserError('{} {} is not a readable npz file ({}); {}'.format(what, path, error, fix))


def check_whole(path, what, fix):
    """UserError when `path` belongs to a group of files (a report and its predictions)
    whose write a killed command left half done: read now, the pair would not match."""
    if file_groups.dead_journals(os.path.dirname(os.path.abspath(path)), [path]):
        raise UserError('{} {} is one of a group of files whose replacement a killed command '
                        'left half done; {} (any command that writes into its folder also '
                        'finishes it)'.format(what, path, fix))


def read_npz_arrays(path, names, what, fix):
    """{name: array} of `names` in an npz file (read with pickle off); a file that is no
    readable npz, lacks one of them or is half of an unfinished group write is a
    UserError naming it and `fix`."""
    check_npz(path, what, fix)
    check_whole(path, what, fix)
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [name for name in names if name not in npz.files]
            if missing:
                raise UserError('{} {} lacks {}; {}'.format(what, path, ', '.join(missing), fix))
            return {name: npz[name] for name in names}
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as error:
        raise UserError('{} {} is not a readable npz file ({}); {}'.format(what, path, error, fix))


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
    check_npz(path, what, 're-train')
    try:
        with np.load(path, allow_pickle=False) as npz:
            chainer.serializers.NpzDeserializer(npz).load(target)
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:   # damaged bytes
        raise UserError('{} {} is not a readable npz file ({}); re-train'.format(what, path, e))
    except TypeError:   # numpy hands back the raw bytes of a member that is no .npy
        raise UserError('{} {} is not a readable npz file (a member is not a numpy array); '
                        're-train'.format(what, path))
    except (KeyError, ValueError) as e:
        if 'pickle' in str(e):
            raise UserError('{} {} is not a plain npz (it holds pickled data, which is refused '
                            'because loading it could run code); re-train'.format(what, path))
        raise UserError('{} {} does not match the architecture/vocabulary in args.json '
                        '({}: {})'.format(what, path, type(e).__name__, e))


def check_npz(path, what, fix):
    """UserError unless `path` is a non-empty zip archive (what every .npz is), so that
    numpy never guesses that other bytes are pickled data."""
    try:
        with open(path, 'rb') as f:
            head = f.read(4)
    except FileNotFoundError:
        raise UserError('{} {} does not exist; {}'.format(what, path, fix))
    except IsADirectoryError:
        raise UserError('{} {} is a folder, not an npz file; {}'.format(what, path, fix))
    if not head:
        raise UserError('{} {} is empty (0 bytes); {}'.format(what, path, fix))
    if head != b'PK\x03\x04':
        raise UserError('{} {} is not an npz file (it is not a zip archive); {}'.format(
            what, path, fix))


def read_json(path, what='file', expect=None):
    """Load JSON with a one-line error naming the file when it is missing, malformed,
    or (with `expect`, a type such as dict or list) of another kind."""
    try:
        with open(path, encoding='utf-8') as f:
            value = json.load(f)
    except FileNotFoundError:
        raise UserError('{} {} does not exist'.format(what, path))
    except IsADirectoryError:
        raise UserError('{} {} is a folder, not a JSON file'.format(what, path))
    except (ValueError, UnicodeDecodeError) as e:
        raise UserError('{} {} is not valid JSON ({}); re-create it'.format(what, path, e))
    if expect is not None and not isinstance(value, expect):
        raise UserError('{} {} holds a JSON {}, expected a JSON {}; re-create it'.format(
            what, path, _json_kind(value), _json_kind(expect())))
    return value


def _json_kind(value):
    return {dict: 'object', list: 'list', str: 'string'}.get(type(value), type(value).__name__)


def vocab_digest(vocab):
    """md5 of a vocabulary's (word, id) pairs, independent of the JSON formatting."""
    return hashlib.md5(json.dumps(sorted(vocab.items())).encode('utf-8')).hexdigest()


def examples_digest(*parts):
    """md5 of lists of (tokens, label) examples: a data file changed since training, even
    with the same number of lines, changes it."""
    digest = hashlib.md5()
    for part in parts:
        digest.update(json.dumps(part).encode('utf-8'))
    return digest.hexdigest()


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


def fold_case(tokens, vocab):
    """Tokens (or a (premise, hypothesis) pair) with each word the vocabulary lacks
    replaced by its lower case where the vocabulary has that (lower-cased training data
    meets a user's 'This movie ...')."""
    if isinstance(tokens, tuple):
        return tuple(fold_case(part, vocab) for part in tokens)
    return [t if t in vocab or t.lower() not in vocab else t.lower() for t in tokens]


def example_to_ids(tokens, vocab):
    """Like to_ids, but also takes a (premise, hypothesis) pair of token lists."""
    if isinstance(tokens, tuple):
        return tuple(to_ids(part, vocab) for part in tokens)
    return to_ids(tokens, vocab)


def encode_examples(examples, vocab):
    """[(tokens, label)] -> [(ids, label)] with ids from example_to_ids."""
    return [(example_to_ids(tokens, vocab), label) for tokens, label in examples]


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
