"""The command lines' plumbing: the parser, argument types, run_cli, output paths and checks.

deepknn/cli/__init__.py re-exports all of it beside the shared flags, so a command imports only
`cli`. Library messages name parameters and commands in backticks; `run_cli` shows a
command-line user the flags and command lines instead (PARAMETER_FLAGS, STEP_COMMANDS).
"""
import argparse
import errno
import math
import os
import re
import sys
import time

import numpy as np

import nlp_utils

CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The flag that sets each library parameter. Library messages name parameters, never
# flags ("choose a smaller `k`"), so that a Python caller reads the name it passed;
# run_cli shows a command-line user the flag instead (command_line_message).
PARAMETER_FLAGS = {
    'activations': '--activations', 'backend': '--backend', 'batchsize': '--batchsize',
    'beam': '--beam', 'compare': '--compare', 'data_dir': '--data-dir', 'dataset': '--dataset',
    'dev_fraction': '--dev-fraction', 'dtype': '--activation-dtype', 'engine': '--engine',
    'exclude_train': '--exclude-train', 'export': '--export', 'force': '--force',
    'gpu': '--gpu', 'keep_epochs': '--keep-epochs', 'importance': '--methods', 'k': '--k', 'kind': '--faiss-kind',
    'label_noise': '--label-noise', 'lambda': '--lambda',
    'last_layer_only': '--last-layer-only', 'layer': '--layer', 'limit': '--limit',
    'lr': '--lr', 'methods': '--methods', 'model_setup': '--model-setup', 'trust': '--trust',
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
STEP_COMMANDS = {'paper_results': 'python paper_results.py', 'scaling': 'python scaling.py',
                 'knn_cv_loss': 'python scripts/knn_cv_loss.py', 'run_dknn': 'python run_dknn.py',
                 'lds_retrains': 'python scripts/lds_retrains.py'}


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


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends '(default: X)' to a flag's help, except where X is None (a required flag,
    or one whose absence means something the help explains) or the help already says its
    default in words: '(default: None)' tells a reader nothing."""

    def _get_help_string(self, action):
        help_text = action.help or ''
        if action.default is None or 'default' in help_text.lower():
            return help_text
        return super()._get_help_string(action)


class ArgumentParser(argparse.ArgumentParser):
    """argparse for every CLI here: --help shows each flag's default, and a bad flag is
    one line on stderr (exit status 2) naming the flag, like every other user error."""

    def __init__(self, **kwargs):
        kwargs.setdefault('formatter_class', DefaultsHelpFormatter)
        super().__init__(**kwargs)

    def error(self, message):
        sys.stderr.write('error: {} (see {} --help)\n'.format(message, self.prog))
        sys.exit(2)


def positive_int(text):
    """argparse type: an integer >= 1, with a one-line usage error otherwise."""
    return _bounded(text, int, 1, None, 'an integer >= 1')


def port_number(text):
    """argparse type: a TCP port, 1 to 65535."""
    return _bounded(text, int, 1, 65535, 'a port number from 1 to 65535')


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


# Suffixes an old output-path spelling may end with; dropped to get its stem.
OUTPUT_SUFFIXES = ('.md', '.csv', '.html', '.json', '.jsonl', '.png')


def output_stem(args, default_dir, default_name, out_was_path=False):
    """The path DIR/STEM (no suffix) a command writes its outputs under, from add_outputs'
    flags: --out DIR and --name STEM, else the defaults. An old spelling gives the path
    it always gave: a hidden --table/--output PATH, or (`out_was_path`: the command's
    --out used to be a path) --out PATH without --name where PATH is no folder; a known
    suffix (.md, .html, ...) is dropped."""
    flag, old = getattr(args, 'old_output_path', None) or ('--out', None)
    if old is not None and (args.out is not None or args.name is not None):
        raise nlp_utils.UserError('{} is the old spelling of --out DIR --name STEM; pass one or '
                                  'the other'.format(flag))
    if old is None and out_was_path and args.name is None and args.out is not None \
            and not os.path.isdir(args.out) and not args.out.endswith(('/', os.sep)):
        old = args.out
    if old is not None:
        check_output_path(old, flag)
        stem = old[:-len(old.rsplit('.', 1)[-1]) - 1] if old.endswith(OUTPUT_SUFFIXES) else old
        check_output_stem(stem, flag)
        return stem
    name = args.name if args.name is not None else default_name
    if not name or os.path.basename(name) != name or name in ('.', '..'):
        raise nlp_utils.UserError('--name {!r} is not a file stem; give a name without a folder '
                                  '(the folder goes in --out)'.format(name))
    out = args.out if args.out is not None else default_dir
    check_output_folder(out, '--out')
    return os.path.join(out, name)


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
    """check_new_outputs for a command whose default --out is a study folder of committed
    tables: with an explicit --out the user chose the place."""
    if out is None:
        check_new_outputs(paths, overwrite)


# ---------------------------------------------------------------- benchmarks
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


def timed(function):
    """Wall seconds of function()."""
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def median_and_range(values, form):
    """'12.3 (11.9-14.0)': the median and range of repeated timings, each in `form`."""
    return '{} ({}-{})'.format(form.format(np.median(values)), form.format(min(values)),
                               form.format(max(values)))
