"""Chainer's trainer for one training run: the optimizer and its schedule, the dev
evaluation that picks the epoch, the snapshots and the stop on a non-finite loss.
`training` builds a run and calls make_trainer.
"""
import sys

import chainer
import chainer.links as L
import numpy as np
from chainer import training
from chainer.training import extensions

import nlp_utils
from deepknn.evaluation import calibration
from deepknn.models import model_setup
from nlp_utils import UserError

SNAPSHOT = 'snapshot_latest.npz'
EPOCH_MODEL = 'model_epoch{}.npz'   # with keep_epochs: the model after epoch N (1-based)


def epoch_model_files(config):
    """The per-epoch model files a run of `config` writes ([] without keep_epochs)."""
    return [EPOCH_MODEL.format(e) for e in range(1, config.epoch + 1)] if config.keep_epochs \
        else []
TRANSFORMER_WEIGHT_DECAY = 0.01   # BERT's, applied in proportion to the scheduled rate
TRANSFORMER_GRADIENT_CLIP = 1.0


def make_optimizer(config, n_train):
    """Adam (its default rate, or lr) with weight decay 1e-4 (the paper's models), or for
    a transformer Adam with the BERT recipe: the rate warms up linearly over the first
    `warmup` fraction of the steps, then decays linearly to 0, decoupled weight decay
    0.01 x the scheduled rate and gradients clipped at norm 1.

    Chainer's Adam decays by eta * weight_decay_rate per step (not by the rate), so the
    schedule runs through eta and weight_decay_rate is 0.01 x the peak rate: a plain
    0.01 would shrink every weight by 1% a step and the model collapses to chance."""
    if not model_setup.is_transformer(config):
        optimizer = (chainer.optimizers.Adam(alpha=config.lr) if config.lr
                     else chainer.optimizers.Adam())
        return optimizer, [chainer.optimizer_hooks.WeightDecay(1e-4)], None
    optimizer = chainer.optimizers.Adam(alpha=config.lr,
                                        weight_decay_rate=TRANSFORMER_WEIGHT_DECAY * config.lr)
    total = max(1, config.epoch * -(-n_train // config.batchsize))
    warmup = max(1, int(round(config.warmup * total)))

    @training.make_extension(trigger=(1, 'iteration'), priority=training.PRIORITY_WRITER + 1)
    def schedule(trainer):
        step = trainer.updater.iteration + 1     # the update about to happen
        optimizer.eta = min(step / warmup, max(0.0, (total - step) / max(1, total - warmup)))

    optimizer.eta = 1.0 / warmup
    return optimizer, [chainer.optimizer_hooks.GradientClipping(TRANSFORMER_GRADIENT_CLIP)], schedule


def make_trainer(config, model, train, dev, device, out):
    """A Chainer Trainer that fits `model` on the [(ids, label)] examples `train` for
    config.epoch epochs, keeps the best epoch by `dev` accuracy in config.model_path and
    a snapshot of the last epoch (SNAPSHOT) in `out`, and with config.keep_epochs every
    epoch's model (EPOCH_MODEL)."""
    classifier = L.Classifier(model, label_key='ys')
    optimizer, hooks, schedule = make_optimizer(config, len(train))
    optimizer.setup(classifier)
    for hook in hooks:
        optimizer.add_hook(hook)
    train_iter = chainer.iterators.SerialIterator(train, config.batchsize)
    updater = training.updaters.StandardUpdater(
        train_iter, optimizer, converter=nlp_utils.convert_seq, device=device)
    trainer = training.Trainer(updater, (config.epoch, 'epoch'), out=out)
    if schedule is not None:
        trainer.extend(schedule)
    trainer.extend(dev_evaluation(config, classifier, dev, device))
    trainer.extend(extensions.LogReport())
    # nlp_utils.save_chainer_npz: Chainer's own writer leaves a ZipFile open on a full
    # disk, whose finaliser prints a second traceback after the one-line error.
    trainer.extend(extensions.snapshot_object(model, config.model_path,
                                              savefun=nlp_utils.save_chainer_npz),
                   trigger=training.triggers.MaxValueTrigger('validation/main/accuracy'))
    if config.keep_epochs:
        trainer.extend(extensions.snapshot_object(
            model, EPOCH_MODEL.format('{.updater.epoch}'), savefun=nlp_utils.save_chainer_npz),
            trigger=(1, 'epoch'))
    trainer.extend(RandomStream())
    trainer.extend(extensions.snapshot(filename=SNAPSHOT, savefun=nlp_utils.save_chainer_npz),
                   trigger=(1, 'epoch'))
    trainer.extend(extensions.PrintReport(
        ['epoch', 'main/loss', 'validation/main/loss', 'main/accuracy',
         'validation/main/accuracy', 'elapsed_time']))
    trainer.extend(stop_on_non_finite_loss, trigger=(1, 'iteration'))
    trainer.extend(extensions.ProgressBar(update_interval=10))
    return trainer


class RandomStream(training.Extension):
    """Carries numpy's global random stream, which draws the dropout masks and the next
    epoch's shuffle, in the trainer's snapshot: a resumed run then continues the stream
    an uninterrupted one would have drawn from and ends as the same model. (Without it,
    resuming reseeded the stream and gave another model.) A snapshot written before
    this extension holds no stream; resuming it keeps the reseeded one. On a GPU the
    dropout masks come from cupy's generator, which has no state to save."""

    @staticmethod
    def trigger(trainer):
        """Never fires: the snapshot serializes the stream. (A function, unlike Chainer's
        interval triggers, has no state of its own to miss in an older snapshot.)"""
        return False

    # np.random.get_state() after its first item, the generator's name 'MT19937'
    FIELDS = ('keys', 'position', 'has_gauss', 'cached_gaussian')

    def serialize(self, serializer):
        if isinstance(serializer, chainer.serializer.Serializer):
            for name, value in zip(self.FIELDS, np.random.get_state()[1:]):
                serializer(name, np.asarray(value))
            return
        try:
            keys, position, has_gauss, cached_gaussian = [serializer(name, None)
                                                          for name in self.FIELDS]
        except KeyError:            # an older snapshot: the stream stays reseeded
            print('warning: this snapshot holds no random stream (written before it was '
                  'saved): the resumed run draws other dropout masks and batch orders, and '
                  'ends as another model than an uninterrupted run', file=sys.stderr)
            return
        try:
            np.random.set_state(('MT19937', np.asarray(keys, dtype=np.uint32), int(position),
                                 int(has_gauss), float(cached_gaussian)))
        except (ValueError, TypeError, IndexError) as error:
            raise UserError("the snapshot's random stream is damaged ({}); resume from an "
                            'intact snapshot or re-train with `force`'.format(error))


def dev_losses(model, dev, batchsize):
    """(mean cross-entropy, accuracy) over the [(ids, label)] examples `dev`, every
    example weighted alike (Chainer's Evaluator averages batch means, which over-weights
    the last, short batch)."""
    logits = model.predict_logits([x for x, _ in dev], batchsize)
    labels = np.array([y for _, y in dev])
    return calibration.nll(logits, labels), float(np.mean(logits.argmax(axis=1) == labels))


def dev_evaluation(config, classifier, dev, device):
    """The end-of-epoch dev evaluation that picks the epoch, reported as
    validation/main/loss and /accuracy, averaged as `config.dev_average` says.

    'examples' batches inputs by length (nets.BatchedInference): the dev pass is most of
    a small fine-tune's epoch (cad-snli's 1,666 pairs against SNLI dev's 9,842), and
    MiniLM evaluated 1,024 SNLI dev pairs 1.6x faster than in file order (one thread).
    An empty dev split reports nothing, as Chainer's Evaluator did."""
    if config.dev_average == 'batches':
        batches = chainer.iterators.SerialIterator(dev, config.batchsize, repeat=False,
                                                   shuffle=False)
        return extensions.Evaluator(batches, classifier, converter=nlp_utils.convert_seq,
                                    device=device)

    @training.make_extension(trigger=(1, 'epoch'), priority=training.PRIORITY_WRITER)
    def evaluate(trainer):
        if not dev:
            return
        loss, accuracy = dev_losses(classifier.predictor, dev, config.batchsize)
        chainer.reporter.report({'validation/main/loss': loss,
                                 'validation/main/accuracy': accuracy})
    return evaluate


def stop_on_non_finite_loss(trainer):
    """A NaN or infinite training loss would leave a broken model with made-up
    accuracies: stop with an error instead."""
    loss = trainer.observation.get('main/loss')
    if loss is not None and not np.isfinite(float(getattr(loss, 'array', loss))):
        raise UserError('the training loss became {} in epoch {}, iteration {}; check the '
                        'word vectors and data, or lower the learning rate / unit, or raise '
                        'dropout'.format(float(loss.array), trainer.updater.epoch + 1,
                                         trainer.updater.iteration))
