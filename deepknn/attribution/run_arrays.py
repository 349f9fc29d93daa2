"""The arrays the attribution methods read, from a trained run: its DkNN layers, its
per-epoch checkpoints (TracIn's, TRAK's ensemble) and their projected gradients.

    arrays = RunArrays.of(setup, projection)          # setup: model_setup.Setup
    train = arrays.representations(train_xs, train_labels)
    test = arrays.representations(test_xs, explained_classes)

A run trained with --keep-epochs holds model_epoch<N>.npz for every epoch; each becomes
a Checkpoint with learning rate 1 (Adam's step size is constant in the Chainer recipe,
and a common factor changes no ranking, no correlation). Without them the final model
is the one checkpoint. The final model (the best epoch) is found among the checkpoints
by its parameters digest, so its projected gradients (grad-cos) are not computed twice. With a `projection` (gradients.GaussianProjection) every
checkpoint also carries the projected all-parameter gradients of the margin (TRAK) and
of the loss (TracIn): for two classes the loss's gradient is -(1 - p_y) times the
margin's (the loss is log(1 + exp(-margin))), and the projection is linear, so one
backward pass per input serves both; with more classes the loss takes its own pass.
"""
import dataclasses
import os
from typing import Optional

import numpy as np

import nlp_utils
from deepknn.attribution import gradients
from deepknn.attribution.base import Checkpoint, Representations
from deepknn.evaluation.calibration import softmax
from deepknn.models import model_setup
from deepknn.models.chainer_trainer import EPOCH_MODEL


def epoch_models(setup):
    """The run's per-epoch models in epoch order: [(epoch, model, parameters digest)]
    ([] without them)."""
    found = []
    for epoch in range(1, setup.config.epoch + 1):
        path = os.path.join(setup.result_dir, EPOCH_MODEL.format(epoch))
        if os.path.exists(path):
            model = model_setup.build_model(setup.config, setup.vocab)
            nlp_utils.load_npz_safely(path, model)
            model.to_device(setup.device)
            found.append((epoch, model, nlp_utils.npz_parameters_digest(path)))
    return found


def loss_from_margin(margin_gradients, probabilities, labels):
    """Two classes: the cross-entropy's gradient, -(1 - p_y) times the margin's (n, P)."""
    p_label = probabilities[np.arange(len(labels)), labels]
    return -(1.0 - p_label)[:, None] * margin_gradients


@dataclasses.dataclass
class RunArrays:
    """A run's final model and checkpoint models, and the projection of their gradients
    (None: last-layer methods only)."""
    model: object
    checkpoints: list                 # [(epoch, model)]
    projection: Optional[gradients.GaussianProjection] = None
    batchsize: int = 64
    final_checkpoint: Optional[int] = 0   # the checkpoint that is the final model, if any

    @classmethod
    def of(cls, setup, projection=None):
        """The run's checkpoints (its final model alone without per-epoch models); the
        final model is recognised among them by its parameters digest (the best epoch)."""
        found = epoch_models(setup)
        if not found:
            return cls(setup.model, [(None, setup.model)], projection, setup.config.batchsize)
        final = nlp_utils.npz_parameters_digest(
            os.path.join(setup.result_dir, setup.config.model_path))
        digests = [digest for _, _, digest in found]
        return cls(setup.model, [(epoch, model) for epoch, model, _ in found], projection,
                   setup.config.batchsize, digests.index(final) if final in digests else None)

    @property
    def epochs(self):
        return [epoch for epoch, _ in self.checkpoints]

    def checkpoint(self, model, xs, labels, name='final model'):
        """A Checkpoint of one model (`name` for the progress bars) on inputs xs at
        classes `labels` (n,)."""
        layers = model.layer_activations(xs, self.batchsize)
        probabilities = softmax(layers[-1])
        if self.projection is None:
            return Checkpoint(layers[-2], probabilities)
        margin = gradients.per_example_gradients(model, xs, labels, self.projection, 'margin',
                                                 progress='margin gradients, ' + name)
        if probabilities.shape[1] == 2:
            loss = loss_from_margin(margin, probabilities, labels)
        else:
            loss = gradients.per_example_gradients(model, xs, labels, self.projection, 'loss',
                                                   progress='loss gradients, ' + name)
        return Checkpoint(layers[-2], probabilities, loss_gradients=loss,
                          margin_gradients=margin)

    def representations(self, xs, labels, with_checkpoints=True):
        """Representations of inputs xs at classes `labels` (training labels, or the class
        a test input's attribution explains): the final model's DkNN layers, and one
        Checkpoint per checkpoint model (none where not `with_checkpoints`: the methods
        reading only the final model need none)."""
        labels = np.asarray(labels, dtype=np.int64)
        checkpoints = [self.checkpoint(model, xs, labels, 'epoch {}'.format(epoch))
                       for epoch, model in self.checkpoints] if with_checkpoints else []
        layers = self.model.layer_activations(xs, self.batchsize)
        final = {}
        if self.projection is not None:    # grad-cos of projected gradients reads them
            same = checkpoints[self.final_checkpoint] if checkpoints and \
                self.final_checkpoint is not None else self.checkpoint(self.model, xs, labels)
            final = {'loss_gradients': same.loss_gradients,
                     'margin_gradients': same.margin_gradients}
        return Representations.from_layers(layers, labels, checkpoints, **final)
