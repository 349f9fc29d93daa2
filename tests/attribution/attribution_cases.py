"""Constructed inputs the attribution tests share: random Representations with every
array a method can read, and a softmax-regression (linear) model trained by SGD."""
import numpy as np

from deepknn.attribution.base import Checkpoint, Representations
from deepknn.evaluation.calibration import softmax

N_CLASS = 3


def random_representations(n, seed, n_class=N_CLASS, dims=(5, 4), n_checkpoints=2,
                           projected=6, labels=None):
    """n rows: layers of `dims` plus logits (float32, the penultimate after a ReLU), and
    `n_checkpoints` checkpoints with learning rates 0.5, 0.25, ... and random projected
    loss and margin gradients of width `projected`."""
    rng = np.random.default_rng(seed)
    layers = [rng.normal(size=(n, d)).astype(np.float32) for d in dims]
    layers[-1] = np.maximum(layers[-1], 0)
    layers.append((2 * rng.normal(size=(n, n_class))).astype(np.float32))
    checkpoints = [Checkpoint(np.maximum(rng.normal(size=(n, dims[-1])), 0),
                              softmax(2 * rng.normal(size=(n, n_class))), 0.5 ** (k + 1),
                              rng.normal(size=(n, projected)), rng.normal(size=(n, projected)))
                   for k in range(n_checkpoints)]
    if labels is None:
        labels = rng.integers(n_class, size=n)
    return Representations.from_layers(layers, labels, checkpoints,
                                       loss_gradients=rng.normal(size=(n, projected)),
                                       margin_gradients=rng.normal(size=(n, projected)))


def cross_entropy(weight, bias, x, label):
    """Softmax cross-entropy of one input x (D,) under logits W x + b."""
    logits = weight @ x + bias
    top = logits.max()
    return top + np.log(np.sum(np.exp(logits - top))) - logits[label]


def sgd_softmax_regression(x, labels, rates, n_class=N_CLASS, seed=0):
    """Train logits = W x + b by plain SGD, one epoch per learning rate (examples in a
    seeded order). Returns [(W, b, rate)]: the parameters at the start of each epoch."""
    rng = np.random.default_rng(seed)
    weight = 0.1 * rng.normal(size=(n_class, x.shape[1]))
    bias = np.zeros(n_class)
    checkpoints = []
    for rate in rates:
        checkpoints.append((weight.copy(), bias.copy(), rate))
        for i in rng.permutation(len(x)):
            residual = softmax((weight @ x[i] + bias)[None])[0] - np.eye(n_class)[labels[i]]
            weight -= rate * np.outer(residual, x[i])
            bias -= rate * residual
    return checkpoints


def numerical_gradient(weight, bias, x, label, step=1e-6):
    """Central-difference gradient of cross_entropy with respect to (W, b), flattened as
    W row-major then b: (C * (D + 1),)."""
    params = np.concatenate([weight.ravel(), bias])
    grad = np.empty_like(params)
    for j in range(len(params)):
        up, down = params.copy(), params.copy()
        up[j] += step
        down[j] -= step
        value = [cross_entropy(p[:weight.size].reshape(weight.shape), p[weight.size:], x, label)
                 for p in (up, down)]
        grad[j] = (value[0] - value[1]) / (2 * step)
    return grad
