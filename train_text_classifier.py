"""Train a CNN / BiLSTM / RNN / BOW text classifier (or an SNLI pair model).

    python train_text_classifier.py --dataset stsa.binary --model cnn \
        --word_vectors ../shared/data/glove/glove.6B.50d.txt.gz --data-dir ../shared/data

Writes results/<dataset>_<model>/: best_model.npz (best dev accuracy), vocab.json,
args.json, calib.json, log (per-epoch JSON), train.log and train_result.json.
"""
import dataclasses
import json
import os
import random
import shutil
import sys

import chainer
import chainer.links as L
import numpy as np
from chainer import training
from chainer.training import extensions

from deepknn import data_files
from deepknn import model_setup
import nets
import nlp_utils
from deepknn import result_folder
import text_datasets
from deepknn import word_vectors
from nlp_utils import UserError

SNAPSHOT = 'snapshot_latest.npz'


def parse_args(argv=None):
    parser = nlp_utils.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dataset', '-data', default='stsa.binary',
                        choices=sorted(text_datasets.DATASETS), help='dataset name')
    parser.add_argument('--model', '-model', default='cnn', choices=nets.MODELS,
                        help='encoder: cnn (Kim 2014), bilstm, rnn or bow')
    parser.add_argument('--word_vectors', '--word-vectors', default=None,
                        help='GloVe/word2vec text file (.txt, .gz or .zip)')
    parser.add_argument('--embed-dim', type=nlp_utils.positive_int, default=300,
                        help='embedding size without --word_vectors (with them, their size)')
    parser.add_argument('--batchsize', '-b', type=nlp_utils.positive_int, default=64,
                        help='examples per training batch')
    parser.add_argument('--epoch', '-e', type=nlp_utils.positive_int, default=30,
                        help='epochs; the model with the best dev accuracy is kept')
    parser.add_argument('--unit', '-u', type=nlp_utils.positive_int, default=300,
                        help='size of filters (CNN: unit // 3 per width), LSTMs and FC layers')
    parser.add_argument('--layer', '-l', type=nlp_utils.positive_int, default=3, help='recurrent layers')
    parser.add_argument('--dropout', '-d', type=nlp_utils.fraction, default=0.4,
                        help='dropout rate, in [0, 1)')
    parser.add_argument('--gpu', '-g', type=int, default=-1, help='GPU id, negative for CPU')
    parser.add_argument('--out', '-o', default=None,
                        help='result folder (default results/<dataset>_<model>)')
    parser.add_argument('--char-based', action='store_true', help='characters as tokens')
    parser.add_argument('--seed', type=nlp_utils.non_negative_int, default=777,
                        help='seeds data splits, initialisation and batch order')
    parser.add_argument('--data-dir', default=None,
                        help='local data folder (default: $DKNN_DATA_DIR, else download)')
    parser.add_argument('--train-file', default=None,
                        help='training data in place of the dataset\'s (custom: required)')
    parser.add_argument('--dev-file', default=None,
                        help='dev data (default: the official dev split, else a seeded part of train)')
    parser.add_argument('--test-file', default=None,
                        help='test data in place of the dataset\'s (custom: required)')
    parser.add_argument('--n-calib', type=nlp_utils.non_negative_int, default=1000,
                        help='held-out training examples for DkNN calibration')
    parser.add_argument('--dev-fraction', type=nlp_utils.fraction, default=0.1,
                        help='part of train used as dev where there is no official dev split')
    parser.add_argument('--min-freq', type=nlp_utils.positive_int, default=2,
                        help='rarer words become <unk> unless they have a pretrained vector')
    parser.add_argument('--vocab', choices=('pretrained', 'train'), default='pretrained',
                        help='pretrained: training words plus every word of the data that has '
                             'a pretrained vector (Kim 2014; labels unused); train: training '
                             'words only (the original code)')
    parser.add_argument('--max-vocab', type=nlp_utils.positive_int, default=None,
                        help='largest vocabulary, <eos> and <unk> included')
    parser.add_argument('--select-on-test', action='store_true',
                        help='pick the best epoch on the test set, as the original code did')
    parser.add_argument('--skip-bad-lines', action='store_true',
                        help='skip malformed lines (counted and reported) instead of stopping')
    parser.add_argument('--allow-unseen-labels', action='store_true',
                        help='custom data: accept dev/test labels that the training file lacks')
    parser.add_argument('--snli-majority', action='store_true',
                        help="keep SNLI pairs with gold label '-' using the annotator majority")
    parser.add_argument('--exclude-train', type=os.path.abspath, default=None,
                        help='JSON list of training-split indices to drop (removal experiment)')
    parser.add_argument('--label-noise', type=nlp_utils.fraction, default=0.0,
                        help='fraction of training labels to flip, in [0, 1)')
    parser.add_argument('--label-noise-seed', type=nlp_utils.non_negative_int, default=0,
                        help='seed choosing the flipped examples and their new labels')
    existing = parser.add_mutually_exclusive_group()
    existing.add_argument('--force', action='store_true',
                          help='replace an existing result folder of this tool once the new run '
                               'has finished (the old one is kept if it fails)')
    existing.add_argument('--resume', action='store_true',
                          help='continue the run in --out from its last snapshot (e.g. with a '
                               'larger --epoch); never deletes anything')
    return parser.parse_args(argv)


def absolute(path):
    return os.path.abspath(path) if path else None


def make_config(args):
    """The args.json dict: everything load_setup needs to rebuild model and data.
    Paths inside the result folder are relative so the folder can be moved."""
    config = {k: v for k, v in vars(args).items() if k not in ('force', 'resume', 'gpu', 'out')}
    config.update(data_dir=absolute(data_files.resolve_data_dir(args.data_dir)),
                  word_vectors=absolute(args.word_vectors), train_file=absolute(args.train_file),
                  dev_file=absolute(args.dev_file), test_file=absolute(args.test_file),
                  vocab_path='vocab.json', model_path='best_model.npz')
    return config


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
    --min-freq times or with a pretrained vector); with --vocab pretrained also every
    word of the other splits that has a pretrained vector, as Kim (2014) does (no label
    is used), so fewer test words become <unk>."""
    train_lists = token_lists(splits.train)
    if not config['word_vectors']:
        return nlp_utils.make_vocab(train_lists, config['min_freq'], config['max_vocab']), None
    other_lists = (token_lists(splits.dev + splits.calib + splits.test)
                   if config.get('vocab', 'train') == 'pretrained' else [])
    # One pass over the (possibly huge) vectors file for every word that may be kept.
    words = {t for tokens in train_lists + other_lists for t in tokens}
    vectors, dim = word_vectors.read_vectors(config['word_vectors'], words)
    with_vectors = {t for t in words if word_vectors.vector_for(t, vectors) is not None}
    vocab = nlp_utils.make_vocab(train_lists, config['min_freq'], config['max_vocab'],
                                 keep=with_vectors)
    extra = nlp_utils.make_vocab([[t for t in tokens if t in with_vectors and t not in vocab]
                                  for tokens in other_lists], min_freq=1)
    for word in list(extra)[2:]:   # after '<eos>' and '<unk>', by falling frequency
        if config['max_vocab'] is not None and len(vocab) >= config['max_vocab']:
            break
        vocab[word] = len(vocab)
    embeddings, coverage = word_vectors.embedding_matrix(vocab, vectors, dim, config['seed'])
    print('word vectors: {} of {} vocabulary words found ({:.1%}), dimension {}; {} words '
          'only in dev/test with a vector'.format(
              round(coverage * (len(vocab) - 2)), len(vocab) - 2, coverage, embeddings.shape[1],
              len(extra) - 2))
    return vocab, embeddings


def split_digest(splits):
    return nlp_utils.examples_digest(splits.train, splits.dev, splits.calib, splits.test)


def write_setup(out, config, vocab, splits, dataset):
    config.update(vocab_digest=nlp_utils.vocab_digest(vocab),
                  data_digest=split_digest(splits))
    nlp_utils.atomic_write_json(os.path.join(out, 'vocab.json'), vocab)
    nlp_utils.atomic_write_json(os.path.join(out, 'calib.json'), {
        'calib_indices': list(map(int, splits.calib_indices)),
        'dev_indices': None if splits.dev_indices is None else list(map(int, splits.dev_indices)),
        'n_train_pool': len(dataset.train_pool), 'seed': config['seed']})
    nlp_utils.atomic_write_json(os.path.join(out, 'args.json'), config)
    model_setup.write_train_changes(out, splits)


def make_trainer(config, model, train, dev, device, out):
    classifier = L.Classifier(model, label_key='ys')
    optimizer = chainer.optimizers.Adam()
    optimizer.setup(classifier)
    optimizer.add_hook(chainer.optimizer_hooks.WeightDecay(1e-4))
    train_iter = chainer.iterators.SerialIterator(train, config['batchsize'])
    dev_iter = chainer.iterators.SerialIterator(dev, config['batchsize'], repeat=False,
                                                shuffle=False)
    updater = training.updaters.StandardUpdater(
        train_iter, optimizer, converter=nlp_utils.convert_seq, device=device)
    trainer = training.Trainer(updater, (config['epoch'], 'epoch'), out=out)
    trainer.extend(extensions.Evaluator(dev_iter, classifier, converter=nlp_utils.convert_seq,
                                        device=device))
    trainer.extend(extensions.LogReport())
    trainer.extend(extensions.snapshot_object(model, config['model_path']),
                   trigger=training.triggers.MaxValueTrigger('validation/main/accuracy'))
    trainer.extend(extensions.snapshot(filename=SNAPSHOT), trigger=(1, 'epoch'))
    trainer.extend(extensions.PrintReport(
        ['epoch', 'main/loss', 'validation/main/loss', 'main/accuracy',
         'validation/main/accuracy', 'elapsed_time']))
    trainer.extend(stop_on_non_finite_loss, trigger=(1, 'iteration'))
    trainer.extend(extensions.ProgressBar(update_interval=10))
    return trainer


def stop_on_non_finite_loss(trainer):
    """A NaN or infinite training loss would leave a broken model with made-up
    accuracies: stop with an error instead."""
    loss = trainer.observation.get('main/loss')
    if loss is not None and not np.isfinite(float(getattr(loss, 'array', loss))):
        raise UserError('the training loss became {} in epoch {}, iteration {}; check the '
                        'word vectors and data, or lower --unit / raise --dropout'.format(
                            float(loss.array), trainer.updater.epoch + 1,
                            trainer.updater.iteration))


def resumed_config(args, out):
    """With --resume, the saved setup wins; only the number of epochs may change (and
    is recorded in args.json)."""
    if not os.path.exists(os.path.join(out, 'args.json')):
        raise UserError('nothing to resume: {} holds no run (no args.json); train without '
                        '--resume first'.format(out))
    config = model_setup.read_config(os.path.join(out, 'args.json'))
    if not os.path.exists(os.path.join(out, SNAPSHOT)):
        raise UserError('nothing to resume in {}: {} is missing'.format(out, SNAPSHOT))
    config['epoch'] = args.epoch
    return config


@dataclasses.dataclass
class Run:
    """Everything a training run needs, validated before any folder is touched."""
    config: dict
    dataset: text_datasets.Dataset
    splits: text_datasets.Splits
    vocab: dict
    embeddings: object      # float32 (n_vocab, embed_dim) pretrained rows, or None
    device: object


def prepare(config, gpu, vocab=None):
    """Load data, vocabulary and vectors for `config` (a new run's, or a resumed run's
    with its saved `vocab`); every bad input fails here, before any output exists."""
    device = model_setup.get_device(gpu)
    seed_everything(config['seed'], device)
    dataset, splits = model_setup.load_data(config)
    print('{}: {} train, {} dev, {} calibration, {} test examples, {} classes'.format(
        config['dataset'], len(splits.train), len(splits.dev), len(splits.calib),
        len(splits.test), len(dataset.label_names)))
    for count, what in ((dataset.n_bad_lines, 'malformed lines (--skip-bad-lines)'),
                        (dataset.n_empty_lines, 'lines with a label but no text'),
                        (dataset.n_no_gold, "pairs without a gold label ('-')")):
        if count:
            print('skipped {} {}'.format(count, what))
    for path, count in dataset.fallback_lines.items():
        print('read {} line(s) of {} as Windows-1252: they are not UTF-8'.format(count, path))
    embeddings = None
    if vocab is None:
        vocab, embeddings = build_vocab_and_embeddings(config, splits)
        config.update(embed_dim=embeddings.shape[1] if embeddings is not None
                      else config['embed_dim'], n_class=len(dataset.label_names),
                      pair=dataset.pair, label_names=dataset.label_names, n_vocab=len(vocab))
    return Run(config, dataset, splits, vocab, embeddings, device)


def train(run, folder, resume=False):
    """Train `run` in `folder` (continuing its snapshot when `resume`), then report."""
    config = run.config
    if resume:
        nlp_utils.atomic_write_json(os.path.join(folder, 'args.json'), config)
    else:
        write_setup(folder, config, run.vocab, run.splits, run.dataset)
    model = nets.build_model(config, len(run.vocab), config['n_class'], config['pair'],
                             run.embeddings)
    model.to_device(run.device)
    train_ids, dev, test = (nlp_utils.encode_examples(part, run.vocab)
                            for part in (run.splits.train, run.splits.dev, run.splits.test))
    trainer = make_trainer(config, model, train_ids, dev, run.device, folder)
    if resume:
        nlp_utils.load_npz_safely(os.path.join(folder, SNAPSHOT), trainer, 'snapshot')
    trainer.run(show_loop_exception_msg=False)   # errors are one line (run_cli)
    report(config, folder, model, dev, test)


def check_new_out(args, out):
    """A new run may go into an absent or empty --out; with --force also replace a result
    folder of this tool. Anything else is refused with what to do instead."""
    if os.path.lexists(out) and (not os.path.isdir(out) or os.path.islink(out)):
        raise UserError('--out {} exists and is not a folder; pass another --out'.format(out))
    if not os.path.isdir(out) or not os.listdir(out):
        return
    if args.force:
        result_folder.check_replaceable(out)
        return
    if os.path.exists(os.path.join(out, 'train_result.json')):
        raise UserError('{} already holds a trained model; pass --force to replace it (the '
                        'old one stays until the new run has finished) or another --out'
                        .format(out))
    if os.path.exists(os.path.join(out, SNAPSHOT)):
        raise UserError('{} holds an unfinished run; pass --resume to continue it or --force '
                        'to start over'.format(out))
    raise UserError('{} is not empty; pass another --out (or --force if it is a result folder '
                    'of this tool)'.format(out))


def start(args, out):
    """A new run: into `out` directly when it is absent or empty (so an interrupted run
    can be resumed), else (--force) into a staging sibling swapped in when done."""
    check_new_out(args, out)
    run = prepare(make_config(args), args.gpu)
    if os.path.isdir(out) and os.listdir(out):
        with result_folder.staged(out, 'train_text_classifier.py') as staging:
            train(run, staging)
        return
    created = not os.path.exists(out)
    result_folder.mark(out, 'train_text_classifier.py')
    try:
        train(run, out)
    except BaseException:
        if os.path.exists(os.path.join(out, SNAPSHOT)):
            print('training stopped; rerun with --resume --out {} to continue from the last '
                  'finished epoch'.format(out), file=sys.stderr)
        else:
            remove_new_run(out, created)
        raise


def remove_new_run(out, created):
    """Undo a run that failed before its first snapshot: the folder when this run made
    it, else only the files this run wrote into the (empty) folder the user gave."""
    if created:
        shutil.rmtree(out)
        return
    for name in os.listdir(out):
        path = os.path.join(out, name)
        shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)


def resume(args, out):
    config = resumed_config(args, out)
    vocab = model_setup.read_vocab(out, config)
    run = prepare(config, args.gpu, vocab)
    if config.get('data_digest') not in (None, split_digest(run.splits)):
        raise UserError('the data of {} changed since training started (the splits differ); '
                        'restore the data or start over with --force'.format(out))
    train(run, out, resume=True)


def main(argv=None):
    args = parse_args(argv)
    out = args.out or os.path.join('results', '{}_{}'.format(args.dataset, args.model))
    with result_folder.lock(out, 'training'):
        result_folder.sweep_stale(out)
        (resume if args.resume else start)(args, out)


def report(config, out, model, dev, test):
    """Reload the best model (by dev accuracy) and print dev/test accuracy."""
    nlp_utils.load_npz_safely(os.path.join(out, config['model_path']), model)
    result = {'dev_accuracy': nets.accuracy(model, dev, config['batchsize']),
              'test_accuracy': nets.accuracy(model, test, config['batchsize'])}
    line = 'dev accuracy {:.4f}  test accuracy {:.4f}'.format(
        result['dev_accuracy'], result['test_accuracy'])
    nlp_utils.atomic_write_json(os.path.join(out, 'train_result.json'), result)
    nlp_utils.atomic_write_text(os.path.join(out, 'train.log'), json.dumps(config) + '\n' + line + '\n')
    print(line)


if __name__ == '__main__':
    nlp_utils.run_cli(main)
