"""The settings of a DkNN built over a trained model, validated once: DkNNSettings.

    settings = DkNNSettings(k=75, backend='faiss', neighbor_labels='gold')
    dknn = dknn.dknn_from_setup(setup, settings)

Every error is one line naming the parameter (`k`, `backend`, ...), never a flag: the
command lines map their flags onto these fields (deepknn/cli/__init__.py `dknn_settings`).
"""
import dataclasses
import numbers
from typing import Optional

from deepknn.neighbors import knn_index
from deepknn.distributed import engine as engine_lib
from nlp_utils import UserError

NEIGHBOR_LABELS = ('gold', 'predicted')


@dataclasses.dataclass(frozen=True)
class DkNNSettings:
    """How a DkNN is built over a trained model.

    k: neighbours per layer. backend: one of knn_index.BACKENDS. neighbor_labels: the
    training labels the neighbours vote with ('gold', or the model's 'predicted' ones).
    last_layer_only: search only the last layer. index_options: the backend's options
    (faiss kind, nprobe, ...). batchsize: inputs per model batch. engine: None for one
    process, or a distributed.engine.RayEngine (extraction and faiss shards on Ray).
    """
    k: int = 75
    backend: str = 'faiss'
    neighbor_labels: str = 'gold'
    last_layer_only: bool = False
    index_options: dict = dataclasses.field(default_factory=dict)
    batchsize: int = 64
    engine: Optional[engine_lib.RayEngine] = None

    def __post_init__(self):
        for name in ('k', 'batchsize'):
            _check_positive_int(name, getattr(self, name))
        _check_choice('backend', self.backend, knn_index.BACKENDS)
        _check_choice('neighbor_labels', self.neighbor_labels, NEIGHBOR_LABELS)
        if not isinstance(self.last_layer_only, bool):
            raise UserError('last_layer_only must be True or False, got {!r}'.format(
                self.last_layer_only), parameter='last_layer_only')
        if not isinstance(self.index_options, dict):
            raise UserError('index_options must be a dict of the backend\'s options, got {!r}'
                            .format(self.index_options), parameter='index_options')
        knn_index.make_index(self.backend, **self.index_options)   # unknown options fail here
        if self.engine is not None:
            self._check_engine()

    def _check_engine(self):
        if not isinstance(self.engine, engine_lib.RayEngine):
            raise UserError('engine must be None or a RayEngine, got {!r}'.format(self.engine),
                            parameter='engine')
        if self.backend != 'faiss':
            raise UserError('backend must be faiss with a Ray engine (it searches faiss '
                            'shards), got {!r}'.format(self.backend), parameter='backend')

    def with_k(self, k):
        """The same settings with another k (validated)."""
        return dataclasses.replace(self, k=k)


def _check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise UserError('{} must be a positive integer, got {!r}'.format(name, value),
                        parameter=name)


def _check_choice(name, value, choices):
    if value not in choices:
        raise UserError('{} must be one of {}, got {!r}'.format(name, ', '.join(choices), value),
                        parameter=name)
