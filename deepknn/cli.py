"""The command lines' plumbing: parser, argument types, run_cli, output checks, shared flags.

Imported by the root scripts, `scripts/` and `benchmarks/` only; the library never reads
flags or sys.argv. A CLI builds its parser with `parser()` (an `ArgumentParser` whose
errors are one line), adds the shared flags with the `add_*` functions below, so a flag's
name, type, default and help are the same in every command, and runs its `main` through
`run_cli`, which prints a user error as one line.
"""
import argparse
import errno
import math
import os
import re
import sys

import nlp_utils
from deepknn import knn_index
from deepknn.distributed import engine as engine_lib

DEFAULT_K = 75            # DkNN neighbours per layer (the paper's k)
RAJANI_K = 16             # neighbours of Rajani et al.'s kNN backoff and retrieval
RESULTS = 'results'       # where result folders and committed tables live
CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The flag that sets each library parameter. Library messages name parameters, never
# flags ("choose a smaller `k`"), so that a Python caller reads the name it passed;
# run_cli shows a command-line user the flag instead (command_line_message).
PARAMETER_FLAGS = {
    'activations': '--activations', 'backend': '--backend', 'batchsize': '--batchsize',
    'beam': '--beam', 'data_dir': '--data-dir', 'dataset': '--dataset',
    'dev_fraction': '--dev-fraction', 'dtype': '--activation-dtype', 'engine': '--engine',
    'exclude_train': '--exclude-train', 'export': '--export', 'force': '--force',
    'gpu': '--gpu', 'importance': '--importance', 'k': '--k', 'kind': '--faiss-kind',
    'label_noise': '--label-noise', 'lambda': '--lambda',
    'last_layer_only': '--last-layer-only', 'layer': '--layer', 'limit': '--limit',
    'lr': '--lr', 'methods': '--methods', 'model_setup': '--model-setup',
    'n_calib': '--n-calib', 'n_validation': '--n-validation',
    'neighbor_labels': '--neighbor-labels', 'nprobe': '--nprobe', 'out': '--out',
    'overwrite': '--overwrite', 'pq_m': '--pq-m', 'ray_address': '--ray-address',
    'resume': '--resume', 'run': '--run', 'seed': '--seed', 'shards': '--shards',
    'skip_bad_lines': '--skip-bad-lines', 'split': '--split', 'storage': '--storage',
    'tau': '--tau', 'temperature': '--temperature', 'thresholds': '--thresholds',
    'word_vectors': '--word_vectors', 'workers': '--workers'}
# The commands a library message may ask for, named in backticks like a parameter (the
# library never names a script): "run `scaling` `model_setup` RUN/args.json first" reads
# "run python scaling.py --model-setup RUN/args.json first" on the command line.
STEP_COMMANDS = {'paper_results': 'python paper_results.py', 'scaling': 'python scaling.py'}


def command_name(path):
    """How a user names the command whose `__file__` is `path` ('run_dknn.py',
    'scripts/knn_removal.py': its path below the checkout), for the markers and lock
    files the library writes on its behalf."""
    relative = os.path.relpath(os.path.abspath(path), CHECKOUT)
    return os.path.basename(path) if relative.startswith(os.pardir) else relative


def command_line_text(text):
    """`text` with each parameter named in backticks written as the flag that sets it
    (PARAMETER_FLAGS: 'choose a smaller `k`' -> 'choose a smaller --k'), and each command
    as the way to run it (STEP_COMMANDS: `scaling` -> python scaling.py). Another name
    stays as written, backticks included."""
    def shown(name):
        word = name.group(1)
        return PARAMETER_FLAGS.get(word) or STEP_COMMANDS.get(word) or name.group(0)
    return re.sub(r'`(\w+)`', shown, text)


def command_line_message(error):
    """What run_cli prints for UserError `error`: command_line_text of its message, and
    its `parameter` as the flag where the message starts with that word ('k must be >= 1'
    -> '--k must be >= 1', but 'kind ...' stays)."""
    message = str(error)
    leading = error.parameter
    if leading in PARAMETER_FLAGS and re.match(re.escape(leading) + r'\b', message):
        message = PARAMETER_FLAGS[leading] + message[len(leading):]
    return command_line_text(message)


def run_cli(main):
    """Run `main()`, turning a UserError, or an OSError of the machine (a read-only
    folder, a full disk, a path that is a folder), into one line on stderr and exit
    status 2, and Ctrl-C (KeyboardInterrupt) into one line 'interrupted' (with what to do
    next, where the interrupted code gave it as the exception's argument) and exit
    status 130, as shells report SIGINT. The line starts on a line of its own, never
    glued to a progress bar, and names flags where the library named parameters
    (command_line_message); what the library added to the error as notes (what to do
    next) follows on the same line."""
    import tqdm
    try:
        main()
    except (nlp_utils.UserError, OSError, KeyboardInterrupt) as error:
        for bar in list(getattr(tqdm.tqdm, '_instances', [])):
            bar.close()
        if isinstance(error, KeyboardInterrupt):
            advice = [command_line_text(str(a)) for a in error.args[:1]]
            line, status = ': '.join(['interrupted'] + advice), 130
        else:
            message = (command_line_message(error) if isinstance(error, nlp_utils.UserError)
                       else _os_error_message(error))
            notes = [command_line_text(note) for note in getattr(error, '__notes__', ())]
            line, status = 'error: ' + '; '.join([message] + notes), 2
        sys.stderr.write(('\n' if sys.stderr.isatty() else '') + line + '\n')
        sys.exit(status)


def _os_error_message(error):
    """One line for an OSError, naming the path and what to do."""
    path = error.filename2 or error.filename or 'a file'   # os.replace: the target
    hints = {errno.EACCES: 'choose a folder you can write, or fix its permissions',
             errno.EROFS: 'the file system is read-only; choose another folder',
             errno.ENOSPC: 'the disk is full; free space or choose another folder',
             errno.EISDIR: 'it is a folder; pass a file path',
             errno.ENOTDIR: 'a part of the path is a file, not a folder; pass another path',
             errno.ENOENT: 'it does not exist; check the path'}
    return 'cannot use {} ({}); {}'.format(
        path, error.strerror or error, hints.get(error.errno, 'check the path and the disk'))


class ArgumentParser(argparse.ArgumentParser):
    """argparse for every CLI here: --help shows each flag's default, and a bad flag is
    one line on stderr (exit status 2) naming the flag, like every other user error."""

    def __init__(self, **kwargs):
        kwargs.setdefault('formatter_class', argparse.ArgumentDefaultsHelpFormatter)
        super().__init__(**kwargs)

    def error(self, message):
        sys.stderr.write('error: {} (see {} --help)\n'.format(message, self.prog))
        sys.exit(2)


def positive_int(text):
    """argparse type: an integer >= 1, with a one-line usage error otherwise."""
    return _bounded(text, int, 1, None, 'an integer >= 1')


def non_negative_int(text):
    """argparse type: an integer >= 0 (a seed, a count that may be zero)."""
    return _bounded(text, int, 0, None, 'an integer >= 0')


def seed(text):
    """argparse type: a random seed, an integer in [0, 2**32 - 1] (numpy's range)."""
    return _bounded(text, int, 0, 2 ** 32 - 1, 'an integer from 0 to 2**32 - 1')


def positive_number(text):
    """argparse type: a finite number > 0 (a time budget, a temperature)."""
    value = _bounded(text, float, 0.0, None, 'a number > 0')
    if value == 0:
        raise argparse.ArgumentTypeError('must be a number > 0, got {!r}'.format(text))
    return value


def fraction(text):
    """argparse type: a number in [0, 1) (dropout, a held-out fraction)."""
    value = _bounded(text, float, 0.0, None, 'a number in [0, 1)')
    if value >= 1:
        raise argparse.ArgumentTypeError('must be a number in [0, 1), got {!r}'.format(text))
    return value


def _bounded(text, kind, minimum, maximum, what):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError('must be {}, got {!r}'.format(what, text))
    # An int is finite at any size (math.isfinite would overflow converting it to float).
    if (kind is float and not math.isfinite(value)) or value < minimum or (
            maximum is not None and value > maximum):
        raise argparse.ArgumentTypeError('must be {}, got {!r}'.format(what, text))
    return value


def check_output_path(path, flag):
    """UserError, before any work, when output file `path` (from `flag`) is a folder or
    lies below a file."""
    if path is None:
        return
    if os.path.isdir(path):
        raise nlp_utils.UserError('{} {} is a folder; pass a file path'.format(flag, path))
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise nlp_utils.UserError('{} {}: {} is a file, not a folder; pass another path'.format(
            flag, path, parent))


def check_output_folder(path, flag):
    """UserError, before any work, when output folder `path` (from `flag`) is a file."""
    if path is not None and os.path.exists(path) and not os.path.isdir(path):
        raise nlp_utils.UserError('{} {} is a file; pass a folder'.format(flag, path))


def parser(doc):
    """An ArgumentParser described by the first line of a module docstring."""
    return ArgumentParser(description=doc.split('\n')[0])


def add_model_setup(parser, nargs=None, help='args.json of a trained run (or its folder)',
                    required=True):
    parser.add_argument('--model-setup', nargs=nargs, required=required, help=help,
                        type=model_setup_path)


def model_setup_path(text):
    """argparse type of --model-setup: the args.json of a trained run, given as the file
    or its folder. Another file of a run (its vocab.json, its weights) is refused when
    the flags are read, before any output is looked at; a path that does not exist is
    left to the loader, which names it."""
    path = os.path.join(text, 'args.json') if os.path.isdir(text) else text
    if os.path.isfile(path) and os.path.basename(path) != 'args.json':
        raise argparse.ArgumentTypeError(
            '{} is not the args.json of a run; pass RUN/args.json or the run folder RUN '
            '(made by train_text_classifier.py)'.format(text))
    return path


def add_k(parser, default=DEFAULT_K, help='DkNN neighbours per layer'):
    parser.add_argument('--k', type=positive_int, default=default, help=help)


def add_backend(parser, help='nearest-neighbour search (faiss flat: exact, the fastest here)'):
    parser.add_argument('--backend', choices=knn_index.BACKENDS, default='faiss', help=help)


def add_dknn(parser):
    """--k and --backend, the DkNN's two settings."""
    add_k(parser)
    add_backend(parser)


# Every command's --split takes the same four names; one that cannot use a split says so.
SPLITS = ('train', 'dev', 'calib', 'test')


def add_split(parser, default='test', help='the split to read'):
    parser.add_argument('--split', choices=SPLITS, default=default, help=help)


def add_limit(parser, default=None, help='only the first N examples (default: all)'):
    parser.add_argument('--limit', type=positive_int, default=default, help=help)


def add_seed(parser, default=0, help='random seed'):
    parser.add_argument('--seed', type=seed, default=default, help=help)


def add_engine(parser):
    """--engine and the Ray flags: where a DkNN's activations and indexes are made
    (docs/ray.md). Read back with `engine(args, result_dir)`."""
    group = parser.add_argument_group('engine (docs/ray.md)')
    group.add_argument('--engine', choices=('local', 'ray'), default='local',
                       help='local: one process (default); ray: activations extracted by a '
                            'Ray Data actor pool, faiss shards searched by shard actors')
    group.add_argument('--ray-address', default=None,
                       help="with --engine ray: join a running cluster ('auto' or HOST:PORT; "
                            'default: start a local Ray on this machine)')
    group.add_argument('--shards', type=positive_int, default=None,
                       help='with --engine ray: index shards per layer (default 2)')
    group.add_argument('--workers', type=positive_int, default=None,
                       help='with --engine ray: extraction actors, each loading the model '
                            'once (default 2)')
    group.add_argument('--storage', default=None,
                       help='with --engine ray: folder for activation parts and index shards, '
                            'seen at the same path by every node (default: '
                            '<result folder>/ray_storage)')
    group.add_argument('--activation-dtype', choices=engine_lib.DTYPES, default=None,
                       help='with --engine ray: stored activations (default float32; float16 '
                            'halves the disk, search stays float32)')


RAY_FLAGS = ('ray_address', 'shards', 'workers', 'storage', 'activation_dtype')


def engine(args, result_dir):
    """The RayEngine that add_engine's flags ask for, or None for --engine local. The
    index follows --faiss-kind/--nprobe/--pq-m where the command has them (flat else)."""
    if args.engine == 'local':
        given = [name for name in RAY_FLAGS if getattr(args, name) is not None]
        if given:
            raise nlp_utils.UserError('--{} needs --engine ray'.format(given[0].replace('_', '-')))
        return None
    if getattr(args, 'backend', 'faiss') != 'faiss':
        raise nlp_utils.UserError('--engine ray searches faiss shards; pass --backend faiss')
    kind = getattr(args, 'faiss_kind', 'flat')
    if kind not in engine_lib.INDEX_KINDS:
        raise nlp_utils.UserError('--engine ray shards flat, ivf or ivfpq indexes, not --faiss-kind '
                                  '{}'.format(kind))
    engine_lib.check_reachable(args.ray_address)
    return engine_lib.RayEngine(
        storage=args.storage or os.path.join(result_dir, 'ray_storage'),
        shards=args.shards or 2, workers=args.workers or 2, address=args.ray_address,
        dtype=args.activation_dtype or 'float32', kind=kind,
        nprobe=getattr(args, 'nprobe', 16), pq_m=getattr(args, 'pq_m', None))


def add_batchsize(parser, default=64, help='inputs per model batch'):
    parser.add_argument('--batchsize', '-b', type=positive_int, default=default,
                        help=help)


def add_device(parser):
    """--gpu and --data-dir: where the model runs and where its data is read from."""
    parser.add_argument('--gpu', '-g', type=int, default=-1,
                        help='GPU id, negative for the CPU')
    parser.add_argument('--data-dir', default=None,
                        help='data folder (default: $DKNN_DATA_DIR, else the one used in '
                             'training, else download)')


def add_skip_bad_lines(parser):
    parser.add_argument('--skip-bad-lines', action='store_true',
                        help='skip malformed lines of data files (counted and reported) '
                             'instead of stopping')


def add_table_output(parser, default=None):
    """--out and --overwrite of a command writing tables into results/: committed
    tables there are only replaced when asked."""
    parser.add_argument('--out', default=default,
                        help='where tables and figures go (default: {}/, where existing files '
                             'are only replaced with --overwrite)'.format(RESULTS))
    parser.add_argument('--overwrite', action='store_true',
                        help='replace existing tables and figures in {}/'.format(RESULTS))


def add_overwrite(parser):
    parser.add_argument('--overwrite', action='store_true',
                        help='replace existing tables and figures of the same names')


def check_new_outputs(paths, overwrite, flag='--out'):
    """UserError before any work when an existing output (a committed table, say) would
    be replaced unasked: an existing `paths` file needs --overwrite."""
    if overwrite:
        return
    for path in paths:
        if os.path.exists(path):
            raise nlp_utils.UserError('{} exists; pass --overwrite to replace it or another {} '
                                      'to write elsewhere'.format(path, flag))


def check_output_stem(stem, flag='--out'):
    """UserError when output path `stem` (written as STEM.csv, STEM.md, ...) names a
    folder: `--out DIR/` would write hidden files DIR/.csv."""
    if os.path.basename(stem) in ('', '.', '..'):
        raise nlp_utils.UserError('{} {} names a folder; give a path without suffix inside it, '
                                  'e.g. {}'.format(flag, stem, os.path.join(stem, 'predictions')))


def check_table_outputs(out, overwrite, paths):
    """check_new_outputs for a command whose default --out is results/: with an explicit
    --out the user chose the place."""
    if out is None:
        check_new_outputs(paths, overwrite)


def machine_load():
    """'2 CPUs, 0 other processes running, load average 1.8': how busy the machine is as
    a benchmark starts. The running count (of /proc/loadavg, less this process) is the
    instant's; the 1-minute load average lags, so it still reads high just after other
    work was paused."""
    average = os.getloadavg()[0]
    try:
        with open('/proc/loadavg', encoding='ascii') as handle:
            running = int(handle.read().split()[3].split('/')[0]) - 1
        others = '{} other processes running, '.format(running)
    except (OSError, ValueError, IndexError):   # not Linux: the average alone
        others = ''
    return '{} CPUs, {}load average {:.1f}'.format(os.cpu_count(), others, average)


def provenance(argv=None):
    """'Produced by: `python script.py --flags`', the line every written table carries."""
    argv = sys.argv if argv is None else argv
    return 'Produced by: `python {}`'.format(' '.join([os.path.relpath(argv[0])] + argv[1:])
                                             if argv else '')
