"""Entropy regularisation on reduced inputs (Feng et al. 2018, section 4): the library.

Fine-tune a trained model on Eq. 2,

    sum_(x, y) log f(y | x) + lambda * sum_(x~ reduced) H(f(. | x~)),

by alternating batches: a step on the NLL of regular training examples, then a step
on -lambda * the mean entropy of reduced training examples (every minimum-length
reduction beam search found, as the paper collects them). The reduced training set
is made once with input_reduction and cached as JSON next to the parent model.
The fine-tuned model is written as a normal result folder by `write_finetuned_folder`.
"""
import os
import shutil

import chainer
import chainer.functions as F
import numpy as np
import tqdm

from deepknn.storage import manifest
from deepknn.neighbors import dknn as dknn_lib
from deepknn.models import model_setup
from deepknn.feng import input_reduction
from deepknn.interpret import leave_one_out
import nlp_utils
from deepknn.storage import result_folder
from nlp_utils import UserError

# The paper gives no values for these; ours (docs/feng.md): lambda 1, Adam 1e-4, 3 epochs.
DEFAULT_LAMBDA = 1.0
DEFAULT_LR = 1e-4
DEFAULT_EPOCHS = 3
RECORD = 'finetune_entropy.json'   # settings and loss history of the fine-tuning


def entropy(logits):
    """Entropy of softmax(logits) per row: Variable (B,), in nats."""
    log_p = F.log_softmax(logits)
    return -F.sum(F.exp(log_p) * log_p, axis=1)


def check_lambda(lam):
    if not lam >= 0:
        raise UserError('lambda must be >= 0 (it weighs the entropy that is maximised), '
                        'got {}'.format(lam), 'lambda')


# ---------------------------------------------------------------- reduced training set
def reduced_inputs(reductions):
    """Reductions -> token-level inputs of every minimum-length version (pairs keep
    their premise): the negative set X~ of section 4.1."""
    return [tokens if r.premise is None else (r.premise, tokens)
            for r in reductions for tokens in r.all_reduced]


def reduced_training_set(setup, importance='gradient', beam=input_reduction.DEFAULT_BEAM,
                         limit=None, batchsize=256):
    """X~ for the setup's training split (first `limit` examples), cached in
    <result_dir>/reduced_train_<importance>_beam<k>[_limit<N>].json while the model
    file and split are unchanged. Returns token-level inputs (lists, or pairs).

    The reduction takes an hour or more on a CPU, so the beam search's state is saved
    after every step (the same name, .partial.json) and a rerun resumes from it."""
    name = 'reduced_train_{}_beam{}{}'.format(
        importance, beam, '' if limit is None else '_limit{}'.format(limit))
    path = os.path.join(setup.result_dir, name + '.json')
    key = dknn_lib.activation_key(setup)
    if os.path.exists(path):
        cache = nlp_utils.read_json(path, 'reduced training set', dict)
        if cache.get('key') == key:
            return cached_inputs(cache, path, setup.model.pair)
    examples = setup.splits.train[:limit]
    lengths = [len(leave_one_out.split_example(tokens, setup.model.pair)[1])
               for tokens, _ in examples]
    checkpoint = ReductionCheckpoint(os.path.join(setup.result_dir, name + '.partial.json'),
                                     key, lengths)
    reducer = input_reduction.make_reducer(importance, setup, None, beam, batchsize)
    try:
        reductions = reducer.reduce(examples, progress='reducing train',
                                    resume=checkpoint.load(), on_step=checkpoint.save)
    except KeyboardInterrupt:   # Ctrl-C: one line saying that a rerun resumes
        if not os.path.exists(checkpoint.path):
            raise
        raise KeyboardInterrupt('the reduction of the training set stopped; its last step '
                                'is saved in {}, and the same command resumes from it'.format(
                                    checkpoint.path)) from None
    inputs = reduced_inputs(reductions)
    # Locked only while writing: the reduction takes long and other analyses of the
    # parent folder should not wait for it (a concurrent twin would write the same file).
    with result_folder.lock(setup.result_dir, 'reduced training set'):
        nlp_utils.atomic_write_json(path, {'key': key, 'importance': importance, 'beam': beam,
                                           'inputs': [list(x) if isinstance(x, tuple) else x
                                                      for x in inputs]})
    checkpoint.remove()
    return inputs


def cached_inputs(cache, path, pair):
    """The token-level inputs of a reduced training set file (lists of words, for pairs
    (premise, hypothesis)); a UserError naming the file when they are something else."""
    def words(value):
        return isinstance(value, list) and all(isinstance(w, str) for w in value)
    inputs = cache.get('inputs')
    if not isinstance(inputs, list) or not all(
            (isinstance(x, list) and len(x) == 2 and all(map(words, x))) if pair else words(x)
            for x in inputs):
        raise UserError('reduced training set {} holds no list of {}; delete it to reduce '
                        'the training set again'.format(
                            path, 'word-list pairs' if pair else 'word lists'))
    return [tuple(x) for x in inputs] if pair else inputs


class ReductionCheckpoint:
    """The beam search's state of one reduction, in a JSON file beside its cache: saved
    after every step, read back when the same model (key) reduces the same number of
    examples again. lengths: the words each example's search moves."""

    def __init__(self, path, key, lengths):
        self.path, self.key, self.lengths = path, key, list(lengths)
        self.n_examples = len(self.lengths)

    def load(self):
        """The saved BeamState, or None when there is none for this model and split; a
        UserError naming the file when it is damaged."""
        if not os.path.exists(self.path):
            return None
        saved = nlp_utils.read_json(self.path, 'saved reduction state', dict)
        if saved.get('key') != self.key or saved.get('n_examples') != self.n_examples:
            return None
        try:
            state = input_reduction.BeamState.from_json(saved.get('state'), self.lengths)
        except ValueError as error:
            raise UserError('saved reduction state {} is damaged ({}); delete it to start '
                            'the reduction over'.format(self.path, error))
        print('resuming the reduction from {} ({} of {} examples left)'.format(
            self.path, len(state.active), self.n_examples))
        return state

    def save(self, state):
        # Atomic and unlocked: a step's state is only ever replaced by a later one.
        nlp_utils.atomic_write_json(self.path, {'key': self.key, 'n_examples': self.n_examples,
                                                'state': state.to_json()})

    def remove(self):
        if os.path.exists(self.path):
            os.remove(self.path)


# ---------------------------------------------------------------- fine-tuning
def finetune(model, train, reduced, lam=DEFAULT_LAMBDA, lr=DEFAULT_LR, epochs=DEFAULT_EPOCHS,
             batchsize=64, seed=0, progress=True):
    """Fine-tune `model` in place. train: [(ids, label)]; reduced: [ids] (pairs: id
    tuples). An epoch is one pass over `train`; each NLL batch is followed by an
    entropy batch drawn from `reduced` (cycled). Returns per-epoch
    {'epoch', 'nll', 'entropy'} means (dropout on, as in training)."""
    check_lambda(lam)
    if not reduced:
        raise UserError('the reduced training set is empty; nothing to regularise on')
    optimizer = chainer.optimizers.Adam(alpha=lr)
    optimizer.setup(model)
    rng = np.random.RandomState(seed)
    reduced_order, reduced_at = rng.permutation(len(reduced)), 0
    history = []
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(train))
        nll_sum, entropy_sum, n_batches = 0.0, 0.0, 0
        starts = tqdm.trange(0, len(train), batchsize, desc='epoch {}'.format(epoch),
                             unit='batch', disable=not progress, leave=False)
        for start in starts:
            batch = [train[i] for i in order[start:start + batchsize]]
            inputs = nlp_utils.convert_seq(batch, model.device)
            with chainer.using_config('train', True):
                nll = F.softmax_cross_entropy(model(inputs['xs']), inputs['ys'])
            model.cleargrads()
            nll.backward()
            optimizer.update()
            if reduced_at + batchsize > len(reduced):
                reduced_order, reduced_at = rng.permutation(len(reduced)), 0
            negative = nlp_utils.convert_seq(
                [(reduced[i], 0) for i in reduced_order[reduced_at:reduced_at + batchsize]],
                model.device)
            reduced_at += batchsize
            with chainer.using_config('train', True):
                mean_entropy = F.mean(entropy(model(negative['xs'])))
            model.cleargrads()
            (-lam * mean_entropy).backward()
            optimizer.update()
            nll_sum += float(nll.array)
            entropy_sum += float(mean_entropy.array)
            n_batches += 1
        history.append({'epoch': epoch, 'nll': nll_sum / n_batches,
                        'entropy': entropy_sum / n_batches})
    return history


# ---------------------------------------------------------------- result folder
def check_finite(model, history):
    """UserError when the fine-tuning diverged: a non-finite loss or parameter would
    make a model whose every later number is made up."""
    losses = [row[key] for row in history for key in ('nll', 'entropy')]
    if not np.all(np.isfinite(losses)) or not all(
            np.all(np.isfinite(p.array)) for p in model.params()):
        raise UserError('the fine-tuning diverged (a loss or parameter is not finite); lower '
                        'the learning rate (lr) or lambda')


def write_finetuned_folder(out, parent_setup, model, settings, history,
                           created_by='entropy fine-tuning'):
    """Write the fine-tuned model as a result folder load_setup reads: args.json (the
    parent's, plus 'finetuned_from' and `settings`), vocab.json and calib.json copied
    from the parent, best_model.npz, and RECORD with settings and loss history; its
    marker names `created_by`.

    Call while holding the lock of `out`, having checked that it may be (re)placed
    (result_folder.check_new_out): built in a marked staging sibling and swapped in."""
    check_finite(model, history)
    out = os.path.abspath(out)
    parent_dir = parent_setup.result_dir
    parent = os.path.relpath(parent_dir, out)
    config = parent_setup.config.replace(finetuned_from=parent, **settings)
    with result_folder.staged(out, created_by) as staging:
        for name in ('vocab.json', 'calib.json'):
            shutil.copyfile(os.path.join(parent_dir, name), os.path.join(staging, name))
        manifest.record(staging, ['vocab.json', 'calib.json'])
        model_setup.write_config(staging, config)
        nlp_utils.atomic_write(os.path.join(staging, config.model_path),
                               lambda f: nlp_utils.save_chainer_npz(f, model), 'wb')
        nlp_utils.atomic_write_json(os.path.join(staging, RECORD),
                                    {'parent': parent, 'settings': settings, 'history': history})
    return out
