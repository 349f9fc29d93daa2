"""The storage folder: activation parts and faiss index shards, written atomically and
checked when read (a missing or corrupt file is a one-line UserError naming it).

    STORAGE/<model key>/<split>/plan.json          rows, parts, dtype, layer widths
    STORAGE/<model key>/<split>/part_00003.npz     layer_0.., rows, gold, predicted
    STORAGE/<model key>/index-<settings>/manifest.json
    STORAGE/<model key>/index-<settings>/layer_0/shard_001.faiss   faiss's own format

The model key digests model file, vocabulary and training examples, so two models never
share a folder. A part is the unit extraction resumes by: written in one atomic rename
(an npz whose members carry CRC32s), it is either complete or absent, so a worker that
dies mid-part leaves nothing that is counted, and the part is extracted again.
"""
import hashlib
import json
import math
import os
import zipfile

import numpy as np

import nlp_utils
from nlp_utils import UserError

_PART = 'part_{:05d}.npz'


def model_folder(storage, activation_key):
    """STORAGE/<12 hex digits of the activation key>."""
    return os.path.join(storage, hashlib.sha256(activation_key.encode()).hexdigest()[:12])


def plan_parts(n_rows, part_rows, min_parts):
    """Contiguous (start, stop) row ranges: at most `part_rows` rows each, and at least
    `min_parts` of them (the index shards, so that each gets whole parts)."""
    if n_rows < min_parts:
        raise UserError('shards={} is more than the {} rows to shard; choose fewer shards'
                        .format(min_parts, n_rows), parameter='shards')
    count = max(min_parts, math.ceil(n_rows / part_rows))
    bounds = [n_rows * i // count for i in range(count + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


def shard_parts(n_parts, shards):
    """Part ids of each index shard: consecutive runs, as even as they come."""
    bounds = [n_parts * s // shards for s in range(shards + 1)]
    return [list(range(bounds[s], bounds[s + 1])) for s in range(shards)]


class ActivationParts:
    """The activation parts of one split in `folder`; `plan` fixes their row ranges.
    `settings` (the constructor's arguments) rebuild it in another process."""

    def __init__(self, folder, n_rows, part_rows, min_parts, dtype):
        self.settings = (folder, n_rows, part_rows, min_parts, dtype)
        self.folder = folder
        self.worker_peak_mib = {}     # {actor pid: peak MiB} of the call that extracted them
        self.plan = {'n_rows': int(n_rows), 'dtype': dtype,
                     'parts': [list(r) for r in plan_parts(n_rows, part_rows, min_parts)]}

    @property
    def ranges(self):
        return [tuple(r) for r in self.plan['parts']]

    def path(self, part):
        return os.path.join(self.folder, _PART.format(part))

    def start(self):
        """Write plan.json, or check it against an earlier run's: parts of another plan
        would double or drop rows when resumed."""
        plan_path = os.path.join(self.folder, 'plan.json')
        if os.path.exists(plan_path):
            earlier = nlp_utils.read_json(plan_path, 'activation plan')
            if earlier != self.plan:
                raise UserError('storage {} holds parts of another plan ({} rows in {} parts, '
                                '{}); pass the same shards and dtype, or another storage folder'
                                .format(self.folder, earlier.get('n_rows'),
                                        len(earlier.get('parts', [])), earlier.get('dtype')),
                                parameter='storage')
        else:
            nlp_utils.atomic_write_json(plan_path, self.plan)
        return self

    def missing(self):
        """Ids of the parts not written yet (those a resumed run extracts)."""
        return [i for i in range(len(self.ranges)) if not os.path.exists(self.path(i))]

    def write(self, part, layers, gold, predicted):
        """Store part `part`: layers (list of (rows, D_l) float32), labels (rows,)."""
        start, stop = self.ranges[part]
        if any(len(layer) != stop - start for layer in layers):
            raise ValueError('part {} needs {} rows'.format(part, stop - start))
        arrays = {'layer_{}'.format(i): layer.astype(self.plan['dtype'])
                  for i, layer in enumerate(layers)}
        nlp_utils.atomic_savez(self.path(part), rows=np.arange(start, stop, dtype=np.int64),
                               gold=gold.astype(np.int64),
                               predicted=predicted.astype(np.int64), **arrays)

    def read(self, part, names):
        """{name: array} of part `part`, each checked: present, readable (CRC), one row
        per planned row; layers come back as float32."""
        path = self.path(part)
        start, stop = self.ranges[part]
        if not os.path.exists(path):
            raise UserError('activation part {} is missing; run the same command again to '
                            'extract it'.format(path))
        try:
            with np.load(path, allow_pickle=False) as saved:
                arrays = {name: saved[name] for name in names + ['rows']}
        except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile) as error:
            raise UserError('activation part {} is corrupt ({}); delete it and run the same '
                            'command again to extract it'.format(path, error))
        if not np.array_equal(arrays.pop('rows'), np.arange(start, stop)):
            raise UserError('activation part {} does not hold rows {}-{} of the plan; delete it '
                            'and run the same command again'.format(path, start, stop - 1))
        return {name: array.astype(np.float32) if name.startswith('layer_') else array
                for name, array in arrays.items()}

    def column(self, name, parts=None):
        """One array over `parts` (default all), rows in order: a layer (float32) or labels."""
        parts = range(len(self.ranges)) if parts is None else parts
        return np.concatenate([self.read(part, [name])[name] for part in parts])

    def layer_widths(self):
        """Width of every layer, read from the first part."""
        with np.load(self.path(0), allow_pickle=False) as saved:
            return [saved['layer_{}'.format(i)].shape[1]
                    for i in range(sum(n.startswith('layer_') for n in saved.files))]


# ---------------------------------------------------------------- faiss files
def write_faiss(index, path):
    """faiss.write_index through a temporary sibling and a rename; -> sha256 of the file."""
    import faiss
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = os.path.join(os.path.dirname(path), '.tmp-{}-{}'.format(
        os.getpid(), os.path.basename(path)))
    try:
        faiss.write_index(index, temporary)
        digest = nlp_utils.file_digest(temporary, 'sha256')
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    return digest


def read_faiss(path, sha256):
    """The faiss index at `path` after checking its bytes against the manifest's sha256."""
    import faiss
    if not os.path.exists(path):
        raise UserError('index shard {} is missing; delete its folder {} and run the same '
                        'command again to rebuild the shards'.format(path, index_root(path)))
    if nlp_utils.file_digest(path, 'sha256') != sha256:
        raise UserError('index shard {} is corrupt (its sha256 differs from the manifest); '
                        'delete its folder {} and run the same command again'.format(
                            path, index_root(path)))
    try:
        return faiss.read_index(path)
    except RuntimeError as error:
        raise UserError('index shard {} cannot be read by faiss ({}); delete its folder {} '
                        'and run the same command again'.format(
                            path, str(error).splitlines()[0], index_root(path)))


def index_root(shard_path):
    """The index-<settings> folder of a shard file (two levels up)."""
    return os.path.dirname(os.path.dirname(shard_path))


def index_folder(model_dir, settings):
    """<model folder>/index-<12 hex digits of the index settings>."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    return os.path.join(model_dir, 'index-' + digest)


def shard_path(folder, layer, shard):
    return os.path.join(folder, 'layer_{}'.format(layer), 'shard_{:03d}.faiss'.format(shard))


def read_manifest(folder, settings):
    """manifest.json of an index folder when complete and made with `settings`, else None."""
    path = os.path.join(folder, 'manifest.json')
    if not os.path.exists(path):
        return None
    manifest = nlp_utils.read_json(path, 'index manifest')
    if manifest.get('settings') != settings:
        raise UserError('index manifest {} was made with other settings; delete {} to '
                        'rebuild it'.format(path, folder))
    return manifest
