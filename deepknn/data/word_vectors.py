"""Pretrained word vectors (GloVe / word2vec text, plain, .gz or .zip) for a vocabulary."""
import collections
import gzip
import io
import itertools
import os
import sys
import zipfile
import zlib

import numpy as np

import nlp_utils
from nlp_utils import EOS, UNK, UserError


def _open_vectors(path):
    """Open a GloVe/word2vec text file, plain, .gz, or the single .txt inside a .zip."""
    if not os.path.exists(path):
        raise UserError('word vectors file {} does not exist; pass an existing '
                        '`word_vectors` file (e.g. ../shared/data/glove/glove.6B.50d.txt.gz)'
                        .format(path))
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
    lowercase form of one (uncased GloVe serves cased data). Returns (vectors, dim).

    The dimension is the one a word2vec header declares, else the most common one of the
    first rows. Rows with fewer numbers, or with extra numeric fields, are skipped and
    reported; extra non-numeric fields are a word with spaces (a few GloVe 840B words).
    A NaN or infinite value in a wanted word's row is an error naming the line."""
    wanted = set(words) | {w.lower() for w in words}
    vectors, skipped = {}, []
    try:
        with _open_vectors(path) as f:
            rows = _numbered_rows(f)
            dim, rows = _vector_dimension(path, rows)
            for line_number, parts in rows:
                word = _vector_word(parts, dim)
                if word is None:
                    skipped.append(line_number)
                elif word in wanted:
                    vectors[word] = _vector_values(path, line_number, word, parts[-dim:])
    except (EOFError, zlib.error, gzip.BadGzipFile, zipfile.BadZipFile) as error:
        raise UserError('word vectors file {} is truncated or not a valid {} file ({}); '
                        'download it again'.format(path, os.path.splitext(path)[1], error))
    if words and not vectors:
        # A binary word2vec file read as text decodes to garbage that matches no word.
        raise UserError('word vectors file {} has a vector for none of the {} words of the '
                        'data: is it a binary word2vec file? Pass a text file (`word v1 ... '
                        'vD` lines; gensim converts binary ones)'.format(path, len(set(words))))
    if skipped:
        print('word vectors: skipped {} row(s) of {} without exactly {} numbers (first at '
              'line {})'.format(len(skipped), path, dim, skipped[0]), file=sys.stderr)
    return vectors, dim


def _numbered_rows(lines):
    for line_number, line in enumerate(lines, 1):
        parts = line.rstrip('\r\n').rstrip(' ').split(' ')
        if parts != ['']:
            yield line_number, parts


def _vector_dimension(path, rows):
    """(dim, the rows including the ones looked at): from a word2vec "count dim" header,
    else the most common field count of the first 100 rows."""
    head = list(itertools.islice(rows, 100))
    if not head:
        raise UserError('word vectors file {} is empty'.format(path))
    first = head[0][1]
    if len(first) == 2 and all(p.isdigit() for p in first):
        return int(first[1]), itertools.chain(head[1:], rows)
    dim = collections.Counter(len(parts) - 1 for _, parts in head).most_common(1)[0][0]
    if dim < 1:
        raise UserError('{} line 1: expected a word and numbers; is this a GloVe/word2vec '
                        'text file?'.format(path))
    return dim, itertools.chain(head, rows)


def _vector_word(parts, dim):
    """The word of a row of `dim` numbers, or None when the row does not fit."""
    if len(parts) - 1 < dim:
        return None
    extra = parts[:-dim][1:]
    if any(nlp_utils.is_number(p) for p in extra):
        return None   # numbers before the vector: a row with too many values
    return ' '.join(parts[:-dim])


def _vector_values(path, line_number, word, fields):
    try:
        vector = np.asarray(fields, dtype=np.float32)
    except ValueError:
        raise UserError('{} line {}: a vector value is not a number'.format(path, line_number))
    if not np.all(np.isfinite(vector)):
        raise UserError('{} line {}: the vector of {!r} has NaN or infinite values; fix or '
                        'remove the row'.format(path, line_number, word))
    return vector


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
