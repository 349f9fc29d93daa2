"""Training a text classifier into a result folder: data, vocabulary, model, trainer, report.

`train(config, out)` is what `train_text_classifier.py` runs and what experiments that
retrain (the removal experiment of Rajani et al.) call directly. A run writes into a
locked result folder: straight into a new or empty one (so an interrupted run can be
resumed), or, when `force` replaces an existing run, into a staging sibling swapped in
when training has finished, so a failed run leaves the old one untouched.

Files: best_model.npz (best dev accuracy), vocab.json, args.json, calib.json,
train_changes.json, log (per-epoch JSON), train.log, train_result.json and the trainer
snapshot used by `resume`.
"""
import dataclasses
import json
import os
import random
import shutil
import sys

import numpy as np
import threadpoolctl

import nets
import nlp_utils
import text_datasets
from deepknn.storage import manifest
from deepknn.models import model_setup
from deepknn.storage import result_folder
from deepknn.data import word_vectors
from deepknn.models.chainer_trainer import SNAPSHOT  # noqa: F401 (API)
from deepknn.models.chainer_trainer import epoch_model_files, make_trainer
from deepknn.data.splits import Splits
from nlp_utils import UserError


def seed_everything(seed, device):
    random.seed(seed)
    np.random.seed(seed)
    if device.xp is not np:
        device.xp.random.seed(seed)


def token_lists(examples):
    """Token lists of examples (both sentences of a pair)."""
    return [t for tokens, _ in examples for t in (tokens if isinstance(tokens, tuple) else (tokens,))]


def build_vocab_and_embeddings(config, splits):
    """Vocabulary and GloVe rows (prints coverage). The training split's words (seen
    min_freq times or with a pretrained vector); with vocab 'pretrained' also every
    word of the other splits that has a pretrained vector, as Kim (2014) does (no label
    is used), so fewer test words become <unk>. A transformer splits any word into word
    pieces, so its vocabulary is every word of every split (no <unk>, no vectors)."""
    train_lists = token_lists(splits.train)
    if model_setup.is_transformer(config):
        every_list = train_lists + token_lists(splits.dev + splits.calib + splits.test)
        return nlp_utils.make_vocab(every_list, min_freq=1), None
    if not config.word_vectors:
        return nlp_utils.make_vocab(train_lists, config.min_freq, config.max_vocab), None
    other_lists = (token_lists(splits.dev + splits.calib + splits.test)
                   if config.vocab == 'pretrained' else [])
    # One pass over the (possibly huge) vectors file for every word that may be kept.
    words = {t for tokens in train_lists + other_lists for t in tokens}
    vectors, dim = word_vectors.read_vectors(config.word_vectors, words)
    with_vectors = {t for t in words if word_vectors.vector_for(t, vectors) is not None}
    vocab = nlp_utils.make_vocab(train_lists, config.min_freq, config.max_vocab,
                                 keep=with_vectors)
    extra = nlp_utils.make_vocab([[t for t in tokens if t in with_vectors and t not in vocab]
                                  for tokens in other_lists], min_freq=1)
    for word in list(extra)[2:]:   # after '<eos>' and '<unk>', by falling frequency
        if config.max_vocab is not None and len(vocab) >= config.max_vocab:
            break
        vocab[word] = len(vocab)
    embeddings, coverage = word_vectors.embedding_matrix(vocab, vectors, dim, config.seed)
    print('word vectors: {} of {} vocabulary words found ({:.1%}), dimension {}; {} words '
          'only in dev/test with a vector'.format(
              round(coverage * (len(vocab) - 2)), len(vocab) - 2, coverage, embeddings.shape[1],
              len(extra) - 2))
    return vocab, embeddings


def split_digest(splits):
    return nlp_utils.examples_digest(splits.train, splits.dev, splits.calib, splits.test)


def write_setup(out, config, vocab, splits, dataset):
    config.vocab_digest = nlp_utils.vocab_digest(vocab)
    config.data_digest = split_digest(splits)
    nlp_utils.atomic_write_json(os.path.join(out, 'vocab.json'), vocab)
    nlp_utils.atomic_write_json(os.path.join(out, 'calib.json'), {
        'calib_indices': list(map(int, splits.calib_indices)),
        'dev_indices': None if splits.dev_indices is None else list(map(int, splits.dev_indices)),
        'n_train_pool': len(dataset.train_pool), 'seed': config.seed})
    model_setup.write_config(out, config)
    model_setup.write_train_changes(out, splits)


@dataclasses.dataclass
class Run:
    """Everything a training run needs, validated before any folder is touched."""
    config: model_setup.RunConfig
    dataset: text_datasets.Dataset
    splits: Splits
    vocab: dict
    embeddings: object      # float32 (n_vocab, embed_dim) pretrained rows, or None
    device: object


def prepare(config, gpu, vocab=None):
    """Load data, vocabulary and vectors for `config` (a new run's, or a resumed run's
    with its saved `vocab`); every bad input fails here, before any output exists."""
    device = model_setup.get_device(gpu)
    seed_everything(config.seed, device)
    dataset, splits = model_setup.load_data(config)
    print('{}: {} train, {} dev, {} calibration, {} test examples, {} classes'.format(
        config.dataset, len(splits.train), len(splits.dev), len(splits.calib),
        len(splits.test), len(dataset.label_names)))
    for count, what in ((dataset.n_bad_lines, 'malformed lines (skip_bad_lines)'),
                        (dataset.n_empty_lines, 'lines with a label but no text'),
                        (dataset.n_no_gold, "pairs without a gold label ('-')")):
        if count:
            print('skipped {} {}'.format(count, what))
    for path, count in dataset.fallback_lines.items():
        print('read {} line(s) of {} as Windows-1252: they are not UTF-8'.format(count, path))
    embeddings = None
    if vocab is None:
        vocab, embeddings = build_vocab_and_embeddings(config, splits)
        if embeddings is not None:
            config.embed_dim = embeddings.shape[1]
        config.n_class, config.pair = len(dataset.label_names), dataset.pair
        config.label_names, config.n_vocab = dataset.label_names, len(vocab)
        if model_setup.is_transformer(config):
            model_setup.describe_transformer(config)
    return Run(config, dataset, splits, vocab, embeddings, device)


def fit(run, folder, resume=False):
    """Train `run` in `folder` (continuing its snapshot when `resume`), then report."""
    config = run.config
    if resume:
        model_setup.write_config(folder, config)
    else:
        write_setup(folder, config, run.vocab, run.splits, run.dataset)
    model = model_setup.build_model(config, run.vocab, run.embeddings)
    model.to_device(run.device)
    train_ids, dev, test = (nlp_utils.encode_examples(part, run.vocab)
                            for part in (run.splits.train, run.splits.dev, run.splits.test))
    if model_setup.is_transformer(config):
        truncated = model.count_truncated([ids for ids, _ in train_ids])
        if truncated:
            print('{} training inputs are longer than max_length {} word pieces and are '
                  'truncated'.format(truncated, config.max_length))
    trainer = make_trainer(config, model, train_ids, dev, run.device, folder)
    # Chainer's writers do not go through nlp_utils, so their files are recorded here.
    manifest.record(folder, [config.model_path, SNAPSHOT, 'log']
                    + epoch_model_files(config))
    if resume:
        nlp_utils.load_npz_safely(os.path.join(folder, SNAPSHOT), trainer, 'snapshot')
    trainer.run(show_loop_exception_msg=False)   # errors are one line (run_cli)
    report(config, folder, model, dev, test)


def report(config, out, model, dev, test):
    """Reload the best model (by dev accuracy) and print dev/test accuracy."""
    nlp_utils.load_npz_safely(os.path.join(out, config.model_path), model)
    result = {'dev_accuracy': nets.accuracy(model, dev, config.batchsize),
              'test_accuracy': nets.accuracy(model, test, config.batchsize),
              'blas_threads': blas_threads()}
    line = 'dev accuracy {:.4f}  test accuracy {:.4f}'.format(
        result['dev_accuracy'], result['test_accuracy'])
    nlp_utils.atomic_write_json(os.path.join(out, 'train_result.json'), result)
    nlp_utils.atomic_write_text(os.path.join(out, 'train.log'), '{}\n{}\nBLAS threads {}\n'.format(
        json.dumps(config.to_json()), line, json.dumps(result['blas_threads'])))
    print(line)
    majority = majority_rate(dev)
    if result['dev_accuracy'] <= majority + 0.005:
        print('warning: dev accuracy {:.4f} is the majority-class rate {:.4f}: the model '
              'learned nothing (a MiniLM on a small subset: try `lr` 1e-4 and 2 epochs, '
              'docs/training.md)'.format(result['dev_accuracy'], majority), file=sys.stderr)


def majority_rate(examples):
    """The share of the most frequent label among (input, label) examples."""
    counts = np.bincount([label for _, label in examples])
    return float(counts.max() / counts.sum())


def blas_threads():
    """{BLAS library: threads} of this process (OMP_NUM_THREADS and the like): the same
    seed retrains a run to the bit only with the same counts, which set the order of
    float sums."""
    return {info['internal_api']: info['num_threads']
            for info in threadpoolctl.threadpool_info() if info['user_api'] == 'blas'}


# ---------------------------------------------------------------- the result folder
def check_new_out(out, force):
    """A new run may go into an absent or empty `out`; with `force` also replace a result
    folder of this tool (result_folder.check_new_out). An existing run is refused with
    what to do instead: `force`, or `resume` for an unfinished one."""
    if not force and os.path.isdir(out) and not os.path.islink(out) and os.listdir(out):
        if os.path.exists(os.path.join(out, 'train_result.json')):
            raise UserError('{} already holds a trained model; pass `force` to replace it (the '
                            'old one stays until the new run has finished) or another `out`'
                            .format(out))
        if os.path.exists(os.path.join(out, SNAPSHOT)):
            raise UserError('{} holds an unfinished run; pass `resume` to continue it or '
                            '`force` to start over'.format(out))
        raise UserError('{} is not empty; pass another `out` (or `force` if it is a result '
                        'folder of this tool)'.format(out))
    result_folder.check_new_out(out, force)


def start(config, out, gpu=-1, force=False, created_by='training'):
    """A new run: into `out` directly when it is absent or empty (so an interrupted run
    can be resumed), else (`force`) into a staging sibling swapped in when done; its
    marker names `created_by`."""
    check_new_out(out, force)
    run = prepare(config, gpu)
    if os.path.isdir(out) and os.listdir(out):
        with result_folder.staged(out, created_by) as staging:
            fit(run, staging)
        return
    created = not os.path.exists(out)
    result_folder.mark(out, created_by)
    try:
        fit(run, out)
    except BaseException as error:
        if not os.path.exists(os.path.join(out, SNAPSHOT)):
            remove_new_run(out, created)
            raise
        if isinstance(error, KeyboardInterrupt):   # run_cli: one line 'interrupted: ADVICE'
            raise KeyboardInterrupt(resume_advice(out)) from None
        error.add_note(resume_advice(out))   # run_cli: 'error: MESSAGE; ADVICE'
        raise


def resume_advice(out):
    return ('training stopped; rerun with `resume` and `out` {} to continue from the last '
            'finished epoch'.format(out))


def remove_new_run(out, created):
    """Undo a run that failed before its first snapshot: the folder when this run made
    it and nobody put files there meanwhile, else only the files this run wrote into it."""
    foreign = manifest.foreign_files(out)
    if created and not foreign:
        shutil.rmtree(out)   # made by this run a moment ago
        return
    for name in os.listdir(out):
        path = os.path.join(out, name)
        if name not in foreign and not any(f.startswith(name + os.sep) for f in foreign):
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)


def resume(out, epoch=None, gpu=-1):
    """Continue the run in `out` from its last snapshot up to `epoch` epochs (None: the
    number it was started with); the saved setup wins, only the number of epochs may
    change (and is recorded in args.json)."""
    if not os.path.exists(os.path.join(out, 'args.json')):
        raise UserError('nothing to resume: {} holds no run (no args.json); train without '
                        '`resume` first'.format(out))
    config = model_setup.read_config(os.path.join(out, 'args.json'))
    if not os.path.exists(os.path.join(out, SNAPSHOT)):
        raise UserError('nothing to resume in {}: {} is missing'.format(out, SNAPSHOT))
    config.epoch = epoch or config.epoch
    run = prepare(config, gpu, model_setup.read_vocab(out, config))
    if config.data_digest not in (None, split_digest(run.splits)):
        raise UserError('the data of {} changed since training started (the splits differ); '
                        'restore the data, or start the run over (move it away, or train '
                        'it again with `force`)'.format(out))
    fit(run, out, resume=True)


# The fields a user sets (flags); the others are derived from the data and checkpoint.
SETTINGS = ('dataset', 'model', 'word_vectors', 'batchsize', 'epoch', 'seed', 'n_calib',
            'train_file', 'dev_file', 'test_file', 'dev_fraction', 'min_freq', 'vocab',
            'max_vocab', 'char_based', 'select_on_test', 'dev_average', 'snli_majority',
            'exclude_train', 'label_noise', 'label_noise_seed', 'pretrained', 'max_length', 'lr',
            'warmup', 'keep_epochs')
CHAINER_SETTINGS = ('unit', 'layer', 'dropout')   # a transformer's come from its checkpoint


def check_same_settings(saved, wanted, out):
    """UserError when the run saved in `out` was trained with other settings than
    `wanted`: a folder name is never reused for another model."""
    names = SETTINGS + (() if model_setup.is_transformer(wanted) else CHAINER_SETTINGS)
    differ = [n for n in names if getattr(saved, n) != getattr(wanted, n)]
    if differ:
        raise UserError('{} holds a run trained with other settings ({}); move it away or '
                        'choose another folder'.format(out, ', '.join(
                            '{} {!r} not {!r}'.format(n, getattr(saved, n), getattr(wanted, n))
                            for n in differ)))


def train(config, out, gpu=-1, force=False, created_by='training'):
    """Train a new run of `config` (a RunConfig) into result folder `out`, holding its
    lock; `force` replaces an existing result folder of this tool once done. The folder's
    marker names `created_by` (the command, for one)."""
    with result_folder.lock(out, 'training'):
        result_folder.sweep_stale(out)
        start(config, out, gpu, force, created_by)


def continue_training(out, epoch=None, gpu=-1):
    """Resume the run in `out` up to `epoch` epochs, holding its lock."""
    with result_folder.lock(out, 'training'):
        result_folder.sweep_stale(out)
        try:
            resume(out, epoch, gpu)
        except KeyboardInterrupt:   # the snapshot stays: it can be resumed again
            raise KeyboardInterrupt(resume_advice(out)) from None


def ensure_trained(config, out, created_by='training', other='move the folder away'):
    """Train `config` into `out` unless it holds that run finished. An unfinished run of
    the same settings continues from its last snapshot (a run stopped with the session
    loses at most an epoch); a run trained with other settings is refused, never reused
    or replaced, and so is a folder holding files this tool did not write (`created_by`
    and the way out, `other`, go into that message)."""
    args_path = os.path.join(out, 'args.json')
    if os.path.exists(os.path.join(out, 'train_result.json')):
        check_same_settings(model_setup.read_config(args_path), config, out)
    elif os.path.exists(os.path.join(out, SNAPSHOT)) and os.path.exists(args_path):
        check_same_settings(model_setup.read_config(args_path), config, out)
        print('resuming', out, flush=True)
        continue_training(out)
    else:
        result_folder.check_replaceable(out, created_by, other)
        print('training', out, flush=True)
        train(config, out, force=os.path.exists(out), created_by=created_by)
