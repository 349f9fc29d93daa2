"""Activation extraction as a Ray Data pipeline, resumable part by part.

    parts = extract_split(engine, setup, 'train', activation_key)   # -> shards.ActivationParts

The pipeline is `map_batches` over the ids of the parts still missing, on a pool of
`engine.workers` actors; each actor loads the model (and its splits) once from the result
folder and writes each part it is given into the storage folder. A part is written
atomically, so a worker that dies leaves no half part; Ray Data gives its part to another
actor, and a job that dies altogether resumes with the parts still missing.
"""
import logging
import os
import resource

import numpy as np
import tqdm

from deepknn.models import model_setup
import nets
from deepknn.distributed import engine as engine_lib
from deepknn.distributed import shards
from nlp_utils import UserError

SPLITS = ('train', 'calib', 'dev', 'test')


class PartExtractor:
    """Ray Data callable class: one per actor, holding the loaded model. A batch holds
    part ids; each part's activations go straight to storage, the batch returns its ids."""

    def __init__(self, args_path, data_dir, split, parts_settings, batchsize):
        self.setup = model_setup.load_setup(args_path, -1, data_dir)
        self.examples = getattr(self.setup.splits, split)
        self.parts = shards.ActivationParts(*parts_settings)
        self.batchsize = batchsize

    def __call__(self, batch):
        problems = []
        for part in batch['part']:
            try:
                self.extract(int(part))
                problems.append('')
            except UserError as error:   # sent as data: Ray Data's wrapping drops its type
                problems.append(str(error))
        # Who did it and at what memory cost (peak resident MiB of this actor's process).
        peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        return {'part': batch['part'], 'pid': np.full(len(batch['part']), os.getpid()),
                'peak_mib': np.full(len(batch['part']), peak_mib),
                'problem': np.array(problems)}

    def extract(self, part):
        start, stop = self.parts.ranges[part]
        # The canonical blocks around the part (nets.BatchedInference): a part's rows get
        # the bytes one process gives them, wherever the part boundaries fall.
        first, last = nets.block_rows(start, stop, len(self.examples))
        blocks = self.setup.encode(self.examples[first:last])
        encoded = blocks[start - first:stop - first]
        layers = [layer[start - first:stop - first] for layer in
                  self.setup.model.layer_activations([x for x, _ in blocks], self.batchsize)]
        for i, layer in enumerate(layers):
            if not np.all(np.isfinite(layer)):
                raise UserError('layer {} of rows {}-{} contains NaN or inf: the model gives '
                                'non-finite values on these inputs; re-train it'.format(
                                    i, start, stop - 1))
        gold = np.array([y for _, y in encoded], dtype=np.int64)
        self.parts.write(part, layers, gold, layers[-1].argmax(axis=1))


def extract_split(engine, setup, split, activation_key, batchsize=64, progress=True,
                  extractor=PartExtractor):
    """The split's activations in engine.storage, extracting the parts not there yet.
    `extractor`: the pipeline's callable class (a failing one in the fault tests).

    -> shards.ActivationParts whose parts are all present (rows in split order), with
    `worker_peak_mib`: {actor pid: peak resident MiB} of this call's actors ({} when every
    part was there already)."""
    if split not in SPLITS:
        raise UserError('split must be one of {}, got {!r}'.format(', '.join(SPLITS), split))
    n_rows = len(getattr(setup.splits, split))
    folder = os.path.join(shards.model_folder(engine.storage, activation_key), split)
    # Training parts are grouped into index shards; other splits are only read back.
    min_parts = engine.shards if split == 'train' else 1
    parts = shards.ActivationParts(folder, n_rows, engine.part_rows, min_parts,
                                   engine.dtype).start()
    missing = parts.missing()
    if missing:
        engine_lib.connect(engine)
        parts.worker_peak_mib = run_pipeline(engine, missing, dict(
            args_path=os.path.join(setup.result_dir, 'args.json'),
            data_dir=setup.config.data_dir, split=split, parts_settings=parts.settings,
            batchsize=batchsize), '{} activations ({})'.format(split, engine.description())
            if progress else None, extractor)
    still_missing = parts.missing()
    if still_missing:
        raise UserError('parts {} of {} were not written; run the same command again to '
                        'extract them'.format(still_missing, folder))
    return parts


def run_pipeline(engine, part_ids, extractor_kwargs, progress, extractor=PartExtractor):
    """map_batches of `extractor` over `part_ids` on an actor pool; waits for the end.
    -> {actor pid: peak resident MiB}."""
    import ray
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False     # one tqdm bar instead of Ray's own
    logging.getLogger('ray.data').setLevel(logging.WARNING)   # and no INFO lines
    dataset = ray.data.from_items([{'part': part} for part in part_ids],
                                  override_num_blocks=len(part_ids))
    extracted = dataset.map_batches(
        extractor, batch_size=1, num_cpus=1, fn_constructor_kwargs=extractor_kwargs,
        compute=ray.data.ActorPoolStrategy(size=min(engine.workers, len(part_ids))))
    peaks = {}
    with tqdm.tqdm(total=len(part_ids), desc=progress, unit='part',
                   disable=progress is None) as bar:
        for batch in extracted.iter_batches(batch_size=None):
            problems = [problem for problem in batch['problem'] if problem]
            if problems:
                raise UserError(problems[0])
            bar.update(len(batch['part']))
            peaks.update(zip(batch['pid'].tolist(), batch['peak_mib'].tolist()))
    return peaks
