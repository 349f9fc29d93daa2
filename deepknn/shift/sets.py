"""The evaluation sets of a shift study: the run's own test split, and the shifted sets
of its task, each with its role and its gold labels in the model's label ids.

    sets = study_sets(setup, data_dir, limit=3000)     # [ShiftSet], in-distribution first

A sentiment run (SST-2) meets the same task in other domains (CR customer reviews,
MPQA opinion phrases) and other tasks whose inputs it should flag (TREC questions, SUBJ
plot and review sentences; unlabelled for the model). An NLI run meets ANLI's three dev
rounds and HANS-like. A user's file joins as a named set, labelled when its labels are
the model's. Sets larger than `limit` keep a seeded sample of `limit` examples.
"""
import dataclasses
import os
import re
from typing import Optional

import numpy as np

import text_datasets
from deepknn.data import eval_sets
from nlp_utils import UserError

IN_DISTRIBUTION = 'in-distribution'
SAME_TASK = 'same task, other domain'
OTHER_TASK = 'other task'
NAMED_FILE = 'named file'
ROLES = (IN_DISTRIBUTION, SAME_TASK, OTHER_TASK, NAMED_FILE)
# (set name, dataset of text_datasets, role): the shifted sets of a sentiment run. The
# test split of each (the original code's seeded 10% of a single-file dataset).
SENTIMENT_SHIFTS = (('cr', 'custrev', SAME_TASK), ('mpqa', 'mpqa', SAME_TASK),
                    ('trec', 'TREC', OTHER_TASK), ('subj', 'subj', OTHER_TASK))
SAMPLE_SEED = 0     # which examples a set larger than `limit` keeps


@dataclasses.dataclass
class ShiftSet:
    """One evaluation set: examples [(tokens, label id)] in the run's tokenization (label
    0 where unlabelled), `gold` (n,) model label ids or None when the model's labels do
    not apply, and for HANS-like `collapse` (C,) mapping a model label to 0 entailment /
    1 non-entailment, the gold labels' space."""
    name: str
    role: str
    examples: list
    gold: Optional[np.ndarray]
    collapse: Optional[np.ndarray] = None

    def correct(self, predictions):
        """(n,) bool: each prediction (n,) model label ids right, in the gold's space."""
        if self.gold is None:
            raise UserError('set {} has no labels the model knows'.format(self.name))
        mapped = predictions if self.collapse is None else self.collapse[predictions]
        return mapped == self.gold


def sampled(examples, limit, seed=SAMPLE_SEED):
    """The examples, or a seeded sample of `limit` of them in their file order."""
    if limit is None or len(examples) <= limit:
        return list(examples)
    rows = np.sort(np.random.default_rng(seed).choice(len(examples), limit, replace=False))
    return [examples[i] for i in rows]


def _labelled(setup, name, role, records, limit):
    """A ShiftSet of (tokens, label name) records, labelled where every label name is
    one of the model's readable (or raw) label names."""
    records = sampled(records, limit)
    own = [list(setup.label_names), list(setup.dataset.label_names)]
    names = next((names for names in own if {label for _, label in records} <= set(names)),
                 None)
    examples = [(setup.retokenize(tokens), names.index(label) if names else 0)
                for tokens, label in records]
    gold = None if names is None else np.array([y for _, y in examples], dtype=np.int64)
    return ShiftSet(name, role, examples, gold)


def sentiment_sets(setup, data_dir, limit):
    """The shifted sets of a sentiment run (SENTIMENT_SHIFTS), other tasks unlabelled."""
    found = []
    for name, dataset, role in SENTIMENT_SHIFTS:
        loaded = text_datasets.load_dataset(dataset, data_dir)
        readable = loaded.readable_label_names
        records = [(tokens, readable[y] if role == SAME_TASK else None)
                   for tokens, y in loaded.test]
        if role == SAME_TASK:
            found.append(_labelled(setup, name, role, records, limit))
        else:
            found.append(ShiftSet(name, role, [(setup.retokenize(t), 0)
                                               for t, _ in sampled(records, limit)], None))
    return found


def nli_sets(setup, data_dir, limit):
    """ANLI's dev rounds (one set each) and HANS-like, for an NLI run."""
    if 'entailment' not in setup.label_names:
        raise UserError('an NLI shift study needs a model with an entailment label; this '
                        'one has {}'.format(', '.join(setup.label_names)), 'model_setup')
    anli = eval_sets.load_eval_set('anli', data_dir=data_dir)
    found = []
    for round_name in sorted(set(anli.groups)):
        records = [r for r, g in zip(anli.records, anli.groups) if g == round_name]
        found.append(_labelled(setup, 'anli-' + round_name.lower(), SAME_TASK, records,
                               limit))
    hans = eval_sets.load_eval_set('hans-like', data_dir=data_dir)
    records = sampled(hans.records, limit)
    collapse = np.array([0 if name == 'entailment' else 1 for name in setup.label_names])
    gold = np.array([list(eval_sets.HANS_LABELS).index(label) for _, label in records])
    found.append(ShiftSet('hans-like', SAME_TASK, [(setup.retokenize(t), 0) for t, _ in records],
                          gold, collapse))
    return found


def unlabelled_set(setup, path, limit):
    """A ShiftSet of a file of unlabelled inputs (one per line; premise TAB hypothesis for
    a pair model), named after the file."""
    stem = os.path.splitext(os.path.basename(path))[0]
    inputs = sampled([tokens for _, tokens in setup.new_inputs(path)], limit)
    return ShiftSet('file-' + re.sub(r'[^A-Za-z0-9_.-]+', '_', stem), NAMED_FILE,
                    [(tokens, 0) for tokens in inputs], None)


def study_sets(setup, data_dir=None, limit=None, eval_files=(), unlabelled_files=()):
    """[ShiftSet]: the run's test split (in-distribution), the shifted sets of its task
    (sentiment: two labels named negative and positive; NLI: a pair model), then each of
    `eval_files` read in the run's format with its labels, then each of
    `unlabelled_files`."""
    test = sampled(setup.splits.test, limit)
    found = [ShiftSet('test', IN_DISTRIBUTION, test,
                      np.array([y for _, y in test], dtype=np.int64))]
    if setup.config.pair:
        found += nli_sets(setup, data_dir, limit)
    elif list(setup.label_names) == text_datasets.SENTIMENT:
        found += sentiment_sets(setup, data_dir, limit)
    for path in eval_files:
        name, examples = setup.evaluation_examples(eval_file=path)
        examples = sampled(examples, limit)
        found.append(ShiftSet(name, NAMED_FILE, examples,
                              np.array([y for _, y in examples], dtype=np.int64)))
    return found + [unlabelled_set(setup, path, limit) for path in unlabelled_files]
