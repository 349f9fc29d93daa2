"""Which engine runs the DkNN's expensive steps, and the connection to a Ray cluster.

    engine = RayEngine(storage='/shared/dknn', shards=4, workers=2, address='auto')
    connect(engine)      # ray.init once per process: a running cluster, or a local one

The settings are plain values: the command lines make them from their flags
(deepknn/cli/__init__.py), the library only reads them.
"""
import dataclasses
import logging
import os
import socket

from nlp_utils import UserError

DTYPES = ('float32', 'float16')
INDEX_KINDS = ('flat', 'ivf', 'ivfpq')


@dataclasses.dataclass(frozen=True)
class RayEngine:
    """Ray settings of a DkNN.

    storage: folder for activation shards and shard indexes (local disk for one machine,
      a shared file system seen at the same path by every node of a cluster).
    shards: index shards per layer, each held by one search actor.
    workers: actors of the extraction pool (each loads the model once).
    address: None starts a local Ray with `num_cpus` CPUs; 'auto' or 'HOST:PORT' joins
      a running cluster (`ray start --head`).
    dtype: how activations are stored ('float16' halves the disk; search is float32).
    kind: 'flat' (exact), 'ivf' or 'ivfpq' (one coarse quantizer and PQ codebook
      trained on a sample, shared by every shard); nlist/nprobe/pq_m as in FaissIndex.
    part_rows: rows per activation part, the unit extraction resumes by.
    """
    storage: str
    shards: int = 2
    workers: int = 2
    address: str = None
    num_cpus: int = None
    dtype: str = 'float32'
    kind: str = 'flat'
    nlist: int = None
    nprobe: int = 16
    pq_m: int = None
    part_rows: int = 10000

    def __post_init__(self):
        for name in ('shards', 'workers', 'part_rows'):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UserError('{} must be a positive integer, got {!r}'.format(name, value),
                                parameter=name)
        if self.dtype not in DTYPES:
            raise UserError('dtype must be one of {}, got {!r}'.format(', '.join(DTYPES),
                                                                     self.dtype), parameter='dtype')
        if self.kind not in INDEX_KINDS:
            raise UserError('kind must be one of {}, got {!r}'.format(', '.join(INDEX_KINDS),
                                                                    self.kind), parameter='kind')
        if not self.storage:
            raise UserError('storage must name a folder for the shards', parameter='storage')

    def description(self):
        """'ray: 2 shards (flat), 2 workers, cluster auto, storage /x' for reports."""
        return 'ray: {} shards ({}), {} workers, cluster {}, storage {}'.format(
            self.shards, self.kind, self.workers, self.address or 'local',
            os.path.abspath(self.storage))

    def index_options(self):
        """The index settings, as recorded in reports and index manifests."""
        return {'kind': self.kind, 'nlist': self.nlist, 'nprobe': self.nprobe,
                'pq_m': self.pq_m, 'shards': self.shards}


def connect(engine):
    """ray.init once per process: join engine.address, or start a local Ray. Workers
    import this project from the interpreter's site-packages (`make venv` installs it
    in editable mode; on a cluster, every node needs that venv at the same path)."""
    import ray
    if ray.is_initialized():
        return
    # Ray's INFO lines would bury the progress bars; warnings still show.
    quiet = dict(log_to_driver=False, logging_level=logging.WARNING)
    check_reachable(engine.address)
    try:
        if engine.address:
            ray.init(address=engine.address, **quiet)
        else:
            # 'local': a new Ray of this process's own, even where `ray start` left one.
            ray.init(address='local', num_cpus=engine.num_cpus, include_dashboard=False,
                     **quiet)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise UserError('ray_address {}: no Ray cluster to join ({}); start one with `ray '
                        'start --head`, or leave the address out for a local Ray; a head '
                        'with token authentication also needs RAY_AUTH_MODE=token and its '
                        'token here (docs/ray.md)'.format(
                            engine.address, str(error).splitlines()[0] if str(error) else
                            type(error).__name__), parameter='ray_address')


def check_reachable(address, timeout_s=5.0):
    """A UserError unless HOST:PORT accepts a TCP connection within `timeout_s` (ray.init
    itself keeps retrying an unreachable head for minutes). None and 'auto' pass."""
    if not address or address == 'auto':
        return
    host, _, port = address.rpartition(':')
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s) as connection:
            grpc = _answers_http2(connection)
    except (OSError, ValueError) as error:
        raise UserError('ray_address {}: no Ray head answers there ({}); start one with '
                        '`ray start --head` and pass its address, or auto'.format(
                            address, error), parameter='ray_address')
    if not grpc:
        raise UserError('ray_address {}: something accepts connections there but it is no Ray '
                        'head (it does not answer as a gRPC server); pass the address `ray '
                        'start --head` printed, or auto'.format(address), parameter='ray_address')


def _answers_http2(connection):
    """Whether the server on `connection` answers an HTTP/2 client preface with a SETTINGS
    frame, as every gRPC server (a Ray head's GCS) does at once; a socket.timeout when it
    says nothing."""
    connection.sendall(b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
    head = b''
    while len(head) < 9:
        chunk = connection.recv(9 - len(head))
        if not chunk:
            break
        head += chunk
    return len(head) == 9 and head[3] == 4      # the frame type: SETTINGS


def user_error_inside(error):
    """The UserError that a Ray task or actor raised, unwrapped from Ray's exceptions
    (RayTaskError.cause, __cause__, __context__), or None. A RayTaskError(UserError)
    is a UserError too, but its text is the remote traceback: its cause is the one."""
    from ray.exceptions import RayError
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, UserError) and not isinstance(error, RayError):
            return error
        seen.add(id(error))
        error = getattr(error, 'cause', None) or error.__cause__ or error.__context__
    return None


def get(refs):
    """ray.get(refs), with a UserError raised inside a task raised as itself, and any
    other failure of Ray (an actor that could not be placed, a node lost) as one line."""
    import ray
    try:
        return ray.get(refs)
    except ray.exceptions.RayError as error:
        inside = user_error_inside(error)
        if inside is not None:
            raise inside
        raise UserError('Ray failed: {} ({}); check the cluster with `ray status` and run '
                        'the command again (finished activation parts and shards are kept)'
                        .format(type(error).__name__, (str(error).strip().splitlines() or
                                                       [''])[0][:300])) from error
