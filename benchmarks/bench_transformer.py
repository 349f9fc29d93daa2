"""Transformer costs: training and inference speed, batched leave-one-out, DkNN search.

    python benchmarks/bench_transformer.py --model-setup results/RUN/args.json --limit 500

On a trained transformer run (--model minilm or transformer), in one run, each
measured --repeats times (median and min-max; the two sides of a ratio are measured
back to back in each repeat and the ratio taken per repeat):
  - fine-tuning: forward + backward + Adam update (training's optimizer and hooks) on
    --train-steps batches of --train-batchsize training examples, in examples/s; then
    inference (predict_logits) on the test split's first --limit inputs, in examples/s;
  - conformity leave-one-out on the first --sentences test sentences: batched as
    interpretations.py runs it (saliency.interpret_all: the variants of many sentences
    in one model batch and one DkNN query), against each variant through the model and
    the DkNN alone; the speed-up and the largest difference in importance;
  - the DkNN search (predict_from_activations) against the transformer forward pass
    that gives its activations (layer_activations), on the same --limit test inputs.
Writes a Markdown table to --out (an existing file is replaced only with --overwrite).
The fine-tuning steps change the weights in memory only; they run last and the weights
are restored.
"""
import os
import statistics
import sys
import time

import chainer
import chainer.links as L
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from deepknn import cli  # noqa: E402
from deepknn.neighbors import dknn as dknn_lib  # noqa: E402
from deepknn.interpret import leave_one_out  # noqa: E402
from deepknn.models import model_setup  # noqa: E402
from deepknn.interpret import saliency  # noqa: E402
from deepknn.models import chainer_trainer  # noqa: E402
import nlp_utils  # noqa: E402
from nlp_utils import UserError  # noqa: E402

LOO_SPEEDUP_TARGET = 10.0      # batched leave-one-out at least this much faster
SEARCH_COST_TARGET = 0.2       # DkNN search at most this fraction of the forward pass
FLOAT_ERROR = 1e-9             # "identical up to float error" for the importances


def parse_args(argv=None):
    parser = cli.parser(__doc__)
    cli.add_model_setup(parser)
    cli.add_dknn(parser)
    cli.add_batchsize(parser, leave_one_out.DEFAULT_BATCHSIZE,
                      'inputs (leave-one-out rows) per model batch and DkNN query')
    cli.add_device(parser)
    cli.add_repeats(parser)
    cli.add_limit(parser, help='inference and DkNN search on the first N test inputs only')
    parser.add_argument('--sentences', type=cli.positive_int, default=10,
                        help='leave-one-out on the first N test sentences')
    parser.add_argument('--train-batchsize', type=cli.positive_int, default=32,
                        help='training examples per fine-tuning step')
    parser.add_argument('--train-steps', type=cli.positive_int, default=3,
                        help='timed fine-tuning steps per repeat (after one untimed step)')
    cli.add_benchmark_outputs(parser, 'bench_transformer')
    return parser.parse_args(argv)


def seconds(function, *args):
    """(result, wall seconds) of function(*args)."""
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


# ---------------------------------------------------------------- measurements
def conformity_one_at_a_time(setup, dknn, examples):
    """Conformity leave-one-out with every input (full, then each variant) through the
    model and the DkNN alone: Eq. 1 as saliency's ConformityLOO, without batching."""
    results = []
    for tokens, label in examples:
        premise, words = leave_one_out.split_example(tokens, setup.model.pair)
        outputs = [dknn.predict_from_activations(setup.model.layer_activations([row], 1))
                   for row in leave_one_out.LeaveOneOutInputs(premise, words, setup.vocab)]
        results.append(leave_one_out.loo_interpretation(
            np.concatenate([o['conformity'] for o in outputs]),
            np.concatenate([o['prediction'] for o in outputs]), words, label, premise))
    return results


def conformity_batched(setup, dknn, examples, batchsize):
    """Conformity leave-one-out as interpretations.py runs it."""
    return saliency.interpret_all(setup, ['conformity'], examples, dknn, batchsize,
                                  progress=False)['conformity']


def largest_difference(one, batched):
    """Largest |importance difference| over all words (NaN, for one-word inputs, must
    be NaN on both sides), and whether every DkNN prediction agrees."""
    largest, same = 0.0, True
    for a, b in zip(one, batched):
        if not np.array_equal(np.isnan(a.scores), np.isnan(b.scores)):
            return float('inf'), False
        if not np.all(np.isnan(a.scores)):
            largest = max(largest, float(np.nanmax(np.abs(a.scores - b.scores))))
        same = same and a.prediction == b.prediction
    return largest, same


class FineTuning:
    """Training steps as train_text_classifier.py takes them (L.Classifier, training's
    optimizer and hooks, convert_seq), on fixed batches cycling through the training
    split; `restore` puts the weights of before back."""

    def __init__(self, setup, batchsize, steps):
        train = setup.splits.train
        if not train:
            raise UserError('the training split is empty')
        self.model, self.device = setup.model, setup.device
        self.saved = {name: p.array.copy() for name, p in self.model.namedparams()}
        self.classifier = L.Classifier(self.model, label_key='ys')
        self.optimizer, hooks, _ = chainer_trainer.make_optimizer(setup.config, len(train))
        self.optimizer.setup(self.classifier)
        for hook in hooks:
            self.optimizer.add_hook(hook)
        self.batches = [nlp_utils.convert_seq(setup.encode(
            [train[(step * batchsize + i) % len(train)] for i in range(batchsize)]),
            self.device) for step in range(steps)]
        self.examples = batchsize * steps
        self.step(self.batches[0])   # Adam allocates its state on the first update

    def step(self, batch):
        with chainer.using_config('train', True):
            self.optimizer.update(self.classifier, **batch)

    def run(self):
        for batch in self.batches:
            self.step(batch)
        float(self.model.classifier.b.array[0])   # waits for a GPU to finish

    def restore(self):
        for name, p in self.model.namedparams():
            p.array[...] = self.saved[name]


def measure(args, setup, dknn):
    """{name: list over repeats} of every measured quantity, and the facts of the run."""
    test = setup.splits.test
    inputs = [x for x, _ in setup.encode(test[:args.limit])]
    sentences = test[:args.sentences]
    if not inputs:
        raise UserError('the test split is empty')
    model, runs = setup.model, {}

    def record(name, value):
        runs.setdefault(name, []).append(value)

    for repeat in range(args.repeats):
        print('repeat {}/{}: inference and DkNN search'.format(repeat + 1, args.repeats),
              file=sys.stderr)
        _, inference = seconds(model.predict_logits, inputs, args.batchsize)
        activations, forward = seconds(model.layer_activations, inputs, args.batchsize)
        _, search = seconds(dknn.predict_from_activations, activations)
        record('inference', len(inputs) / inference)
        record('forward', forward)
        record('search', search)
        record('search_ratio', search / forward)
        print('repeat {}/{}: leave-one-out'.format(repeat + 1, args.repeats), file=sys.stderr)
        one, one_seconds = seconds(conformity_one_at_a_time, setup, dknn, sentences)
        batched, batched_seconds = seconds(conformity_batched, setup, dknn, sentences,
                                           args.batchsize)
        record('loo_one', one_seconds)
        record('loo_batched', batched_seconds)
        record('loo_speedup', one_seconds / batched_seconds)
    difference, same_predictions = largest_difference(one, batched)

    print('fine-tuning', file=sys.stderr)
    tuning = FineTuning(setup, args.train_batchsize, args.train_steps)
    try:
        for _ in range(args.repeats):
            _, tuning_seconds = seconds(tuning.run)
            record('training', tuning.examples / tuning_seconds)
    finally:
        tuning.restore()
    rows = sum(len(leave_one_out.LeaveOneOutInputs(*leave_one_out.split_example(
        tokens, model.pair), setup.vocab)) for tokens, _ in sentences)
    facts = {'inputs': len(inputs), 'sentences': len(sentences), 'rows': rows,
             'difference': difference, 'same_predictions': same_predictions,
             'n_layers': len(activations)}
    return runs, facts


# ---------------------------------------------------------------- table
def spread(values, form):
    """'median' and 'min-max' cells of repeated values."""
    return (form.format(statistics.median(values)),
            '{}-{}'.format(form.format(min(values)), form.format(max(values))))


def table(args, setup, runs, facts):
    k_layers = facts['n_layers'] * args.k
    lines = ['# Transformer benchmark: {} {}'.format(setup.config.dataset, setup.config.model),
             '', cli.provenance(), '',
             'Run: {}. Device {} ({} at the start); k={}, {} '
             'search, batch {} inputs; {} repeats: median and min-max.'.format(
                 model_setup.run_description(setup), setup.device, facts['load'], args.k, args.backend, args.batchsize, args.repeats),
             '', '| measurement | median | min-max | target | met |',
             '| --- | --- | --- | --- | --- |']

    def row(name, cells, target='', met=''):
        lines.append('| {} | {} | {} | {} | {} |'.format(name, *cells, target, met))

    def met(ok):
        return 'yes' if ok else 'no'

    row('fine-tuning: forward + backward + Adam, {} steps of {} training examples '
        '(examples/s)'.format(args.train_steps, args.train_batchsize),
        spread(runs['training'], '{:.1f}'))
    row('inference: predict_logits on {} test inputs (examples/s)'.format(facts['inputs']),
        spread(runs['inference'], '{:.1f}'))
    row('conformity leave-one-out, one input at a time: {} sentences, {} rows (s)'.format(
        facts['sentences'], facts['rows']), spread(runs['loo_one'], '{:.2f}'))
    row('conformity leave-one-out, batched (saliency.interpret_all) (s)',
        spread(runs['loo_batched'], '{:.2f}'))
    row('leave-one-out speed-up, one at a time / batched',
        spread(runs['loo_speedup'], '{:.1f}x'), '>= {:.0f}x'.format(LOO_SPEEDUP_TARGET),
        met(statistics.median(runs['loo_speedup']) >= LOO_SPEEDUP_TARGET))
    row('largest absolute importance difference, one at a time vs batched (DkNN '
        'predictions {})'.format('identical' if facts['same_predictions'] else 'differ'),
        ('{:.2g}'.format(facts['difference']), '-'),
        '< {:.0e} (one changed neighbour: {:.1e})'.format(FLOAT_ERROR, 1 / k_layers),
        met(facts['difference'] < FLOAT_ERROR))
    row('transformer forward: layer_activations on {} test inputs (s)'.format(
        facts['inputs']), spread(runs['forward'], '{:.3f}'))
    row('DkNN search: predict_from_activations on them (s)', spread(runs['search'], '{:.3f}'))
    row('DkNN search / forward', spread(runs['search_ratio'], '{:.2g}x'),
        '<= {}x'.format(SEARCH_COST_TARGET),
        met(statistics.median(runs['search_ratio']) <= SEARCH_COST_TARGET))
    return '\n'.join(lines) + '\n'


def main(argv=None):
    args = parse_args(argv)
    path = cli.benchmark_table(args) + '.md'
    load = cli.machine_load()
    setup = model_setup.load_setup(args.model_setup, args.gpu, args.data_dir)
    if not model_setup.is_transformer(setup.config):
        raise UserError('{} is a {} run; this benchmark takes a transformer run (--model '
                        '{})'.format(args.model_setup, setup.config.model,
                                     ' or '.join(model_setup.TRANSFORMER_MODELS)))
    dknn = dknn_lib.dknn_from_setup(setup, cli.dknn_settings(args, setup.result_dir))
    runs, facts = measure(args, setup, dknn)
    facts['load'] = load
    text = table(args, setup, runs, facts)
    print(text)
    nlp_utils.atomic_write_text(path, text)


if __name__ == '__main__':
    cli.run_cli(main)
