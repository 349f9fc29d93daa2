"""Per-example gradients of a Chainer text classifier, projected by a seeded Gaussian
matrix, and the Representations / Checkpoints of a model for the attribution methods.

per_example_gradients(model, xs, labels, projection) -> (n, P): for each input alone
(dropout off), the gradient of its loss (or margin) with respect to every parameter,
flattened in the order of the parameters' sorted names, times a D x P Gaussian
matrix R / sqrt(P), so that E[<R^T g / sqrt(P), R^T h / sqrt(P)>] = <g, h>
(Johnson-Lindenstrauss). projection=None returns the exact (n, D) gradients.

R is never held whole (a 3M-parameter model with P = 512 would need 6 GB): its rows for
row r of parameter `name` (the parameter reshaped to (shape[0], -1)) are drawn, when
needed, from a generator keyed (seed, crc32(name), r). The same seed gives the same R
whatever the inputs, their order or the chunk size; and a row whose gradient is zero for
every input of a chunk (embeddings of absent words) is skipped, which is exact.

Cost: drawing R's rows dominates (each nonzero row's width x P normals, per chunk of
inputs, less what GaussianProjection keeps); on 2 CPU cores a 6.5M-parameter CNN
(20k x 300 embeddings) took 0.11-0.17 s per 20-token input at P = 512, a tiny one 5 ms.
"""
import zlib

import chainer
import chainer.functions as F
import numpy as np
import tqdm

from deepknn.evaluation.calibration import softmax
from deepknn.attribution.base import Checkpoint, Representations, require

DEFAULT_DIMENSION = 512
DEFAULT_CACHE_BYTES = 1 << 30
OUTPUTS = ('loss', 'margin')


class GaussianProjection:
    """A seeded Gaussian projection of a model's flattened parameters to `dim` numbers
    (module docstring); entries N(0, 1) / sqrt(dim).

    Drawing R's rows costs more than the gradients (D x P normals per chunk of inputs),
    so rows once drawn are kept, up to `cache_bytes` (default 1 GiB; rows beyond it are
    drawn again each time): the dense layers' rows are reused by every chunk."""

    def __init__(self, dim=DEFAULT_DIMENSION, seed=0, cache_bytes=DEFAULT_CACHE_BYTES):
        require(not isinstance(dim, bool) and isinstance(dim, (int, np.integer)) and dim >= 1,
                'dim', 'must be a positive integer, got {!r}'.format(dim))
        # SeedSequence keys must keep a fixed width: a seed of one 32-bit word.
        require(not isinstance(seed, bool) and isinstance(seed, (int, np.integer))
                and 0 <= seed < 2 ** 32, 'seed',
                'must be an integer in [0, 2**32), got {!r}'.format(seed))
        require(cache_bytes >= 0, 'cache_bytes', 'must be at least 0, got {!r}'.format(
            cache_bytes))
        self.dim, self.seed, self.cache_bytes = int(dim), int(seed), cache_bytes
        self._cache, self._cached_bytes = {}, 0

    def rows(self, name, row, width):
        """R's rows for row `row` of parameter `name`: (width, dim) float32, unscaled."""
        block = self._cache.get((name, int(row)))
        if block is not None and len(block) == width:
            return block
        key = [self.seed, zlib.crc32(name.encode('utf-8')), int(row)]
        block = np.random.default_rng(key).standard_normal((width, self.dim), dtype=np.float32)
        if self._cached_bytes + block.nbytes <= self.cache_bytes:
            self._cache[name, int(row)] = block
            self._cached_bytes += block.nbytes
        return block

    def project(self, name, row_ids, values):
        """values (n, len(row_ids), width): the gradients' rows `row_ids` of parameter
        `name` -> their projection (n, dim) float64, scaled by 1/sqrt(dim)."""
        out = np.zeros((values.shape[0], self.dim))
        for j, row in enumerate(row_ids):
            out += values[:, j, :] @ self.rows(name, row, values.shape[2])
        return out / np.sqrt(self.dim)


def named_parameters(model):
    """[(name, Parameter)] of `model`, sorted by name: the flattening order."""
    return sorted(model.namedparams(), key=lambda pair: pair[0])


def _send(model, x):
    if isinstance(x, tuple):
        return tuple(model.device.send(part) for part in x)
    return model.device.send(x)


def _output(logits, label, output):
    """The scalar whose gradient is taken: the cross-entropy at `label`, or the margin
    z_y - logsumexp over the other classes = log(p_y / (1 - p_y))."""
    if output == 'loss':
        return F.softmax_cross_entropy(logits, logits.xp.asarray([label], dtype=np.int32))
    others = F.concat([logits[:, :label], logits[:, label + 1:]], axis=1)
    return logits[0, label] - F.logsumexp(others, axis=1)[0]


def _example_rows(model, params, x, label, output):
    """One input's gradient, per parameter: (nonzero row ids, their values (r, width))."""
    with chainer.using_config('train', False), chainer.using_config('enable_backprop', True):
        value = _output(model.forward([_send(model, x)]), int(label), output)
        grads = chainer.grad([value], params)
    rows = []
    for param, grad in zip(params, grads):
        shape = (param.shape[0], -1) if param.ndim else (1, 1)
        g = (np.zeros(param.shape, np.float32) if grad is None
             else chainer.backend.CpuDevice().send(grad.array)).reshape(shape)
        ids = np.flatnonzero(np.any(g != 0, axis=1))
        rows.append((ids, g[ids]))
    return rows


def _project_chunk(names, chunk_rows, projection):
    """Per-example rows of a chunk of inputs -> (len(chunk), P) projected gradients."""
    out = np.zeros((len(chunk_rows), projection.dim))
    for p, name in enumerate(names):
        ids = np.unique(np.concatenate([rows[p][0] for rows in chunk_rows]))
        if not len(ids):
            continue
        width = chunk_rows[0][p][1].shape[1]
        values = np.zeros((len(chunk_rows), len(ids), width), np.float32)
        for e, rows in enumerate(chunk_rows):
            values[e, np.searchsorted(ids, rows[p][0])] = rows[p][1]
        out += projection.project(name, ids, values)
    return out


def _flatten(params, rows):
    """One input's rows -> its exact gradient (D,) float64 in flattening order."""
    parts = []
    for param, (ids, values) in zip(params, rows):
        dense = np.zeros((param.shape[0] if param.ndim else 1, values.shape[1]))
        dense[ids] = values
        parts.append(dense.ravel())
    return np.concatenate(parts)


def per_example_gradients(model, xs, labels, projection=None, output='loss', chunk=32,
                          progress=None):
    """(n, P) float64: each input's gradient of `output` ('loss': the cross-entropy at
    its label; 'margin': log(p / (1 - p)) of its label) with respect to all parameters,
    dropout off, projected by `projection` (a GaussianProjection), or exact (n, D) for
    projection=None. `chunk` inputs share each generation of R's rows; `progress`: a
    description to show a progress bar over the inputs with, or None. `model`: a
    Chain with forward(list of inputs) -> logits (B, C) and n_class (a TextClassifier);
    its parameters and their .grad are left untouched."""
    require(output in OUTPUTS, 'output', 'must be one of {}, got {!r}'.format(OUTPUTS, output))
    require(len(labels) == len(xs), 'labels', 'must have one label per input ({}), got {}'
            .format(len(xs), len(labels)))
    require(not len(labels) or 0 <= min(labels) <= max(labels) < model.n_class, 'labels',
            'must be classes in [0, {})'.format(model.n_class))
    require(not isinstance(chunk, bool) and isinstance(chunk, (int, np.integer)) and chunk >= 1,
            'chunk', 'must be a positive integer, got {!r}'.format(chunk))
    names, params = zip(*named_parameters(model)) if len(xs) else ((), ())
    blocks = []
    bar = tqdm.tqdm(total=len(xs), desc=progress, unit='input', disable=progress is None)
    for start in range(0, len(xs), int(chunk)):
        chunk_rows = [_example_rows(model, params, x, label, output)
                      for x, label in zip(xs[start:start + chunk], labels[start:start + chunk])]
        if projection is None:
            blocks.append(np.stack([_flatten(params, rows) for rows in chunk_rows]))
        else:
            blocks.append(_project_chunk(names, chunk_rows, projection))
        bar.update(len(chunk_rows))
    bar.close()
    width = projection.dim if projection is not None else sum(
        p.size for _, p in named_parameters(model))
    return np.concatenate(blocks) if blocks else np.zeros((0, width))


def checkpoint_of(model, xs, labels, learning_rate=1.0, projection=None,
                  outputs=OUTPUTS, batchsize=64):
    """A Checkpoint of `model` on inputs `xs`: features (layers[-2]), probabilities and,
    where `projection` is given, projected gradients of each of `outputs` at `labels`
    (training labels, or for test inputs the class explained)."""
    layers = model.layer_activations(xs, batchsize)
    gradients = {}
    if projection is not None:
        for output in outputs:
            gradients[output + '_gradients'] = per_example_gradients(
                model, xs, labels, projection, output)
    return Checkpoint(layers[-2], softmax(layers[-1]), learning_rate, **gradients)


def representations_of(model, xs, labels=None, checkpoints=(), batchsize=64):
    """Representations of inputs `xs` under `model` (its DkNN layers and final
    checkpoint). labels=None -> the model's predictions (the class explained)."""
    layers = model.layer_activations(xs, batchsize)
    return Representations.from_layers(layers, labels, checkpoints)
