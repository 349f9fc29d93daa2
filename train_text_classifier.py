"""Train a CNN / BiLSTM / RNN / BOW text classifier (or an SNLI pair model).

    python train_text_classifier.py --dataset stsa.binary --model cnn \
        --word_vectors ../shared/data/glove/glove.6B.50d.txt.gz --data-dir ../shared/data

Writes results/<dataset>_<model>/: best_model.npz (best dev accuracy), vocab.json,
args.json, calib.json, log (per-epoch JSON), train.log and train_result.json.
"""
import argparse
import json
import os
import random
import shutil

import chainer
import chainer.links as L
import numpy as np
from chainer import training
from chainer.training import extensions

import model_setup
import nets
import nlp_utils
import text_datasets
from nlp_utils import UserError

SNAPSHOT = 'snapshot_latest.npz'


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dataset', '-data', default='stsa.binary',
                        choices=sorted(text_datasets.DATASETS), help='dataset name')
    parser.add_argument('--model', '-model', default='cnn', choices=nets.MODELS)
    parser.add_argument('--word_vectors', '--word-vectors', default=None,
                        help='GloVe/word2vec text file (.txt, .gz or .zip)')
    parser.add_argument('--embed-dim', type=int, default=300,
                        help='embedding size without --word_vectors (with them, their size)')
    parser.add_argument('--batchsize', '-b', type=nlp_utils.positive_int, default=64)
    parser.add_argument('--epoch', '-e', type=nlp_utils.positive_int, default=30)
    parser.add_argument('--unit', '-u', type=nlp_utils.positive_int, default=300,
                        help='size of filters (CNN: unit // 3 per width), LSTMs and FC layers')
    parser.add_argument('--layer', '-l', type=nlp_utils.positive_int, default=3, help='recurrent layers')
    parser.add_argument('--dropout', '-d', type=float, default=0.4)
    parser.add_argument('--gpu', '-g', type=int, default=-1, help='GPU id, negative for CPU')
    parser.add_argument('--out', '-o', default=None,
                        help='result folder (default results/<dataset>_<model>)')
    parser.add_argument('--char-based', action='store_true')
    parser.add_argument('--seed', type=int, default=777)
    parser.add_argument('--data-dir', default=None,
                        help='local data folder (default: $DKNN_DATA_DIR, else download)')
    parser.add_argument('--train-file', default=None)
    parser.add_argument('--dev-file', default=None)
    parser.add_argument('--test-file', default=None)
    parser.add_argument('--n-calib', type=int, default=1000,
                        help='held-out training examples for DkNN calibration')
    parser.add_argument('--dev-fraction', type=float, default=0.1,
                        help='part of train used as dev where there is no official dev split')
    parser.add_argument('--min-freq', type=int, default=2,
                        help='rarer words become <unk> unless they have a pretrained vector')
    parser.add_argument('--max-vocab', type=int, default=None)
    parser.add_argument('--select-on-test', action='store_true',
                        help='pick the best epoch on the test set, as the original code did')
    parser.add_argument('--skip-bad-lines', action='store_true')
    parser.add_argument('--snli-majority', action='store_true',
                        help="keep SNLI pairs with gold label '-' using the annotator majority")
    parser.add_argument('--exclude-train', type=os.path.abspath, default=None,
                        help='JSON list of training-split indices to drop (removal experiment)')
    parser.add_argument('--label-noise', type=float, default=0.0,
                        help='fraction of training labels to flip, in [0, 1)')
    parser.add_argument('--label-noise-seed', type=int, default=0,
                        help='seed choosing the flipped examples and their new labels')
    parser.add_argument('--force', action='store_true', help='overwrite an existing result folder')
    parser.add_argument('--resume', action='store_true', help='continue from the last snapshot')
    return parser.parse_args(argv)


def absolute(path):
    return os.path.abspath(path) if path else None


def make_config(args):
    """The args.json dict: everything load_setup needs to rebuild model and data.
    Paths inside the result folder are relative so the folder can be moved."""
    config = {k: v for k, v in vars(args).items() if k not in ('force', 'resume', 'gpu', 'out')}
    config.update(data_dir=absolute(text_datasets.resolve_data_dir(args.data_dir)),
                  word_vectors=absolute(args.word_vectors), train_file=absolute(args.train_file),
                  dev_file=absolute(args.dev_file), test_file=absolute(args.test_file),
                  vocab_path='vocab.json', model_path='best_model.npz')
    return config


def prepare_out(args, out):
    if os.path.exists(os.path.join(out, 'args.json')) and not (args.force or args.resume):
        raise UserError('{} already holds a trained model; pass --force to overwrite it or '
                        '--resume to continue training'.format(out))
    if args.force and os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out, exist_ok=True)


def seed_everything(seed, device):
    random.seed(seed)
    np.random.seed(seed)
    if device.xp is not np:
        device.xp.random.seed(seed)


def build_vocab_and_embeddings(config, train):
    """Vocabulary from the training split; GloVe rows where available (prints coverage)."""
    token_lists = [t for tokens, _ in train
                   for t in (tokens if isinstance(tokens, tuple) else (tokens,))]
    if not config['word_vectors']:
        return nlp_utils.make_vocab(token_lists, config['min_freq'], config['max_vocab']), None
    # One pass over the (possibly huge) vectors file for every training word.
    train_words = {t for tokens in token_lists for t in tokens}
    vectors, dim = nlp_utils.read_vectors(config['word_vectors'], train_words)
    with_vectors = {t for t in train_words if nlp_utils.vector_for(t, vectors) is not None}
    vocab = nlp_utils.make_vocab(token_lists, config['min_freq'], config['max_vocab'],
                                 keep=with_vectors)
    embeddings, coverage = nlp_utils.embedding_matrix(vocab, vectors, dim, config['seed'])
    print('word vectors: {} of {} vocabulary words found ({:.1%}), dimension {}'.format(
        round(coverage * (len(vocab) - 2)), len(vocab) - 2, coverage, embeddings.shape[1]))
    return vocab, embeddings


def write_setup(out, config, vocab, splits, dataset):
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
    trainer.extend(extensions.ProgressBar(update_interval=10))
    return trainer


def accuracy(model, examples, batchsize):
    if not examples:
        return float('nan')
    logits = model.predict_logits([x for x, _ in examples], batchsize)
    return float(np.mean(logits.argmax(axis=1) == np.array([y for _, y in examples])))


def resumed_config(args, out):
    """With --resume, the saved setup wins; only the number of epochs may change."""
    config = model_setup.read_config(os.path.join(out, 'args.json'))
    if not os.path.exists(os.path.join(out, SNAPSHOT)):
        raise UserError('nothing to resume in {}: {} is missing'.format(out, SNAPSHOT))
    config['epoch'] = args.epoch
    return config


def main(argv=None):
    args = parse_args(argv)
    out = args.out or os.path.join('results', '{}_{}'.format(args.dataset, args.model))
    prepare_out(args, out)
    config = resumed_config(args, out) if args.resume else make_config(args)
    device = model_setup.get_device(args.gpu)
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
    if args.resume:
        vocab, embeddings = nlp_utils.read_json(os.path.join(out, 'vocab.json')), None
    else:
        vocab, embeddings = build_vocab_and_embeddings(config, splits.train)
        config.update(embed_dim=embeddings.shape[1] if embeddings is not None else args.embed_dim,
                      n_class=len(dataset.label_names), pair=dataset.pair,
                      label_names=dataset.label_names, n_vocab=len(vocab))
        write_setup(out, config, vocab, splits, dataset)
    model = nets.build_model(config, len(vocab), config['n_class'], config['pair'], embeddings)
    model.to_device(device)
    train, dev, test = (nlp_utils.encode_examples(part, vocab)
                        for part in (splits.train, splits.dev, splits.test))
    trainer = make_trainer(config, model, train, dev, device, out)
    if args.resume:
        nlp_utils.load_npz_safely(os.path.join(out, SNAPSHOT), trainer, 'snapshot')
    trainer.run()
    report(config, out, model, dev, test)


def report(config, out, model, dev, test):
    """Reload the best model (by dev accuracy) and print dev/test accuracy."""
    nlp_utils.load_npz_safely(os.path.join(out, config['model_path']), model)
    result = {'dev_accuracy': accuracy(model, dev, config['batchsize']),
              'test_accuracy': accuracy(model, test, config['batchsize'])}
    line = 'dev accuracy {:.4f}  test accuracy {:.4f}'.format(
        result['dev_accuracy'], result['test_accuracy'])
    nlp_utils.atomic_write_json(os.path.join(out, 'train_result.json'), result)
    nlp_utils.atomic_write_text(os.path.join(out, 'train.log'), json.dumps(config) + '\n' + line + '\n')
    print(line)


if __name__ == '__main__':
    nlp_utils.run_cli(main)
