"""A result folder's args.json: the one typed RunConfig, read and written here.

Every field a command needs to rebuild a run's model and data; validated once when read,
so a folder written by any earlier version loads with the defaults it had.
"""
import dataclasses
import os
from typing import Optional

import nlp_utils
from nlp_utils import UserError

_REQUIRED = object()   # marks the fields every args.json has had since the first version


@dataclasses.dataclass
class RunConfig:
    """A result folder's args.json: everything needed to rebuild its model and data.

    Validated once when read (`from_json`); a field added after the first version has
    the default that folders written before it had, so old folders load unchanged.
    Fields this class does not know (those a derived run adds, e.g. an entropy
    fine-tuning's settings) are kept in `extra` and written back.
    """
    dataset: str = _REQUIRED
    model: str = _REQUIRED
    unit: int = _REQUIRED
    layer: int = _REQUIRED
    dropout: float = _REQUIRED
    embed_dim: int = _REQUIRED
    n_class: int = _REQUIRED
    seed: int = _REQUIRED
    n_calib: int = _REQUIRED
    char_based: bool = _REQUIRED
    pair: bool = _REQUIRED
    vocab_path: str = _REQUIRED
    model_path: str = _REQUIRED
    batchsize: int = 64
    epoch: int = 30
    data_dir: Optional[str] = None
    word_vectors: Optional[str] = None
    train_file: Optional[str] = None
    dev_file: Optional[str] = None
    test_file: Optional[str] = None
    dev_fraction: float = 0.1
    min_freq: int = 2
    vocab: str = 'train'            # folders from before --vocab kept training words only
    max_vocab: Optional[int] = None
    select_on_test: bool = False
    # How the epoch's dev accuracy averages: 'examples' (each alike), or 'batches'
    # (Chainer's Evaluator, the mean of file-order batch means: the original code and
    # every run trained before 2026-11-26; older folders load as 'examples').
    dev_average: str = 'examples'
    skip_bad_lines: bool = False
    allow_unseen_labels: bool = False
    snli_majority: bool = False
    exclude_train: Optional[str] = None
    label_noise: float = 0.0
    label_noise_seed: int = 0
    # Keep the model of every epoch (model_epoch<N>.npz): TracIn's checkpoints.
    keep_epochs: bool = False
    label_names: Optional[list] = None
    n_vocab: Optional[int] = None
    vocab_digest: Optional[str] = None
    data_digest: Optional[str] = None
    # Pretrained transformers (model 'minilm' or 'transformer'):
    pretrained: Optional[str] = None       # checkpoint folder; None: the packaged MiniLM
    max_length: int = 128                  # word pieces per input, longer ones truncated
    lr: Optional[float] = None             # peak learning rate (None: Adam's default)
    warmup: float = 0.1                    # fraction of the steps with a rising rate
    weights_sha256: Optional[str] = None   # of the pretrained weights fine-tuned
    # sha256 of every file of the checkpoint (tokenizer.json, config.json, weights);
    # None in folders trained before it was recorded.
    pretrained_sha256: Optional[dict] = None
    extra: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def from_json(cls, values, source='model setup'):
        """A RunConfig from an args.json dict; UserError naming `source` and the field
        when a field every folder has is missing or a field has the wrong type."""
        known = {f.name: f for f in dataclasses.fields(cls) if f.name != 'extra'}
        missing = [name for name, f in known.items() if f.default is _REQUIRED
                   and name not in values]
        if missing:
            raise UserError('{} lacks fields {}; re-train the run'.format(source, missing))
        for name, value in values.items():
            if name in known and not _has_type(value, known[name].type):
                raise UserError('{}: field {!r} is {!r}, expected {}; restore the file or '
                                're-train'.format(source, name, value, _type_name(known[name].type)))
        if values.get('dev_average', 'examples') not in DEV_AVERAGES:
            raise UserError("{}: field 'dev_average' is {!r}, expected one of {}; restore the "
                            "file or re-train".format(source, values['dev_average'],
                                                      ', '.join(DEV_AVERAGES)))
        return cls(**{k: v for k, v in values.items() if k in known},
                   extra={k: v for k, v in values.items() if k not in known})

    def to_json(self):
        """The args.json dict (known fields, then `extra`)."""
        values = dataclasses.asdict(self)
        return dict(values, **values.pop('extra'))

    def replace(self, **changes):
        """A copy with `changes`; names this class does not know go into `extra` (which
        `extra=` replaces as a whole)."""
        known = {f.name for f in dataclasses.fields(self)}
        extra = dict(changes.pop('extra', self.extra),
                     **{k: v for k, v in changes.items() if k not in known})
        return dataclasses.replace(self, extra=extra,
                                   **{k: v for k, v in changes.items() if k in known})


DEV_AVERAGES = ('examples', 'batches')   # RunConfig.dev_average
_TYPES = {str: (str,), int: (int,), float: (int, float), bool: (bool,),
          Optional[str]: (str, type(None)), Optional[int]: (int, type(None)),
          Optional[float]: (int, float, type(None)), Optional[list]: (list, type(None)),
          Optional[dict]: (dict, type(None))}


def _type_name(annotation):
    return getattr(annotation, '__name__', None) or str(annotation).replace('typing.', '')


def _has_type(value, annotation):
    """Whether an args.json value fits a RunConfig annotation (True is no int here)."""
    kinds = _TYPES[annotation]
    return bool in kinds if isinstance(value, bool) else isinstance(value, kinds)


def read_config(args_path):
    """The RunConfig of an args.json file, validated."""
    return RunConfig.from_json(nlp_utils.read_json(args_path, 'model setup', dict),
                               'model setup {}'.format(args_path))


def write_config(result_dir, config):
    """args.json of `config` (a RunConfig) in `result_dir`, atomically."""
    nlp_utils.atomic_write_json(os.path.join(result_dir, 'args.json'), config.to_json())
