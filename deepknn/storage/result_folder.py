"""Result folders that never cost the user data: a marker, a lock, staging and swapping.

A result folder is recognisably this tool's by its marker file (written when the folder
is created). Only a marked folder is ever replaced or removed, and only whole: a new run
is built in a hidden staging sibling (`.NAME.staging-PID`) and swapped in when it has
finished, so a failed run leaves the old one untouched. Every writer of a result folder
holds its lock (`.NAME.lock` beside it, an flock), so two processes never interleave
their files; the second one gets a one-line error naming the holder. Temporary files
that a killed process left behind are swept by the next holder of the lock.
"""
import contextlib
import datetime
import errno
import fcntl
import json
import os
import re
import shutil
import socket
import sys
import time

from deepknn.storage import file_groups
from deepknn.storage import manifest
from nlp_utils import UserError

MARKER = manifest.MARKER
# Chainer's snapshot and log writers stage a file in a folder tmp<name>XXXXXXXX (group
# 2: that file's name) / log<8 chars> (holding log.json).
_STALE_IN_FOLDER = re.compile(r'^(\.tmp-.*|tmp((snapshot_latest|best_model)\.npz)\w+|(log)\w{8})$')


def _sibling(folder, kind):
    """Hidden sibling path `.NAME.<kind>` of `folder` (the parent is created if needed)."""
    folder = os.path.abspath(folder)
    parent, name = os.path.split(folder.rstrip(os.sep)) if folder != os.sep else ('/', 'root')
    try:
        os.makedirs(parent, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UserError('cannot create the lock file beside {}: {} is not a folder; pass '
                        'another `out`'.format(folder, parent))
    return os.path.join(parent, '.{}.{}'.format(name, kind))


def is_result_folder(path):
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, MARKER))


def mark(folder, created_by):
    """Create `folder` (if needed) and write its marker and an empty manifest."""
    os.makedirs(folder, exist_ok=True)
    manifest.start(folder)
    with open(os.path.join(folder, MARKER), 'w', encoding='utf-8') as f:
        json.dump({'created_by': created_by, 'tool': 'deep-knn'}, f)
        f.write('\n')


# Folders whose lock this process holds (realpath -> pid): `lock_for_caches` of a folder
# whose lock a caller of this very process already holds goes on without taking it.
_HELD_HERE = {}


@contextlib.contextmanager
def lock(folder, purpose, wait=None):
    """Hold the exclusive lock of result folder `folder` (which may not exist yet) for
    the duration; a second holder gets a UserError naming the first, or with `wait` =
    (purpose, seconds) waits that long for a holder of that purpose. The lock file
    `.NAME.lock` beside the folder exists only while it is held."""
    key = os.path.realpath(folder)
    with _held(_sibling(folder, 'lock'), folder, purpose, wait):
        _HELD_HERE[key] = os.getpid()
        try:
            if os.path.isdir(folder):
                file_groups.sweep_dead_temporaries(folder)
            yield
        finally:
            _HELD_HERE.pop(key, None)


def held_by_this_process(folder):
    """Whether this process (not a forked child of it) holds `folder`'s lock now."""
    return _HELD_HERE.get(os.path.realpath(folder)) == os.getpid()


# How long a cache writer waits for another process writing the same caches.
CACHE_WAIT_SECONDS = 1800


def lock_for_caches(folder, purpose, wait_seconds=None):
    """The lock a writer of `folder`'s caches holds while it writes them: the folder's
    lock, or nothing more where this process holds it already (a command that locked
    the run folder for its own outputs, then builds the run's DkNN). Where another
    process holds it for the same `purpose` (building these caches), this one waits for
    it (saying so once, at most `wait_seconds`, default CACHE_WAIT_SECONDS) and the
    caller then finds its caches; any other holder is refused at once."""
    if held_by_this_process(folder):
        return contextlib.nullcontext()
    return lock(folder, purpose, wait=(purpose, CACHE_WAIT_SECONDS
                                       if wait_seconds is None else wait_seconds))


@contextlib.contextmanager
def lock_outputs(stem, paths, purpose):
    """Hold the lock of one command's output files `paths` (`.STEM.outputs.lock` beside
    `stem`, their common path without suffix), as `lock` does for a folder, so two
    commands never write the same outputs; what killed writers left in the outputs'
    folders is removed first: their temporaries (of any outputs) and output lock files
    no one holds."""
    with _held(_sibling(stem, 'outputs.lock'), 'the outputs ' + stem + '.*', purpose):
        for folder in {os.path.dirname(os.path.abspath(path)) for path in paths}:
            if os.path.isdir(folder):
                file_groups.sweep_dead_temporaries(folder)
                _sweep_free_output_locks(folder)
        yield


_OUTPUT_LOCK = re.compile(r'^\..+\.outputs\.lock$')


def _sweep_free_output_locks(folder):
    """Remove the output lock files in `folder` that no process holds (a killed holder's
    stays behind), as their holder would on release: flocked, then unlinked."""
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if not _OUTPUT_LOCK.match(name) or os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, 'a+', encoding='utf-8') as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue                            # held: a live writer's
            if os.path.exists(path) and os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                os.remove(path)


@contextlib.contextmanager
def _held(path, what, purpose, wait=None):
    """Hold the flock of lock file `path` (guarding `what`) for the duration."""
    handle = _acquire(path, what, wait)
    with handle:
        handle.seek(0)
        handle.truncate()
        handle.write('pid {} on {} ({}, since {})\n'.format(
            os.getpid(), socket.gethostname(), purpose,
            datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S')))
        handle.flush()
        try:
            yield
        finally:
            # Unlinked while still held: a process that opened the old file meanwhile
            # sees (in _acquire) that the path no longer leads to it and retries.
            os.remove(path)
            fcntl.flock(handle, fcntl.LOCK_UN)


def _acquire(path, folder, wait=None):
    """Open and flock `path` -> the open file. A holder is waited for when `wait` =
    (purpose, seconds) and its line names that purpose; otherwise, or past that time,
    a UserError names `folder` (what the lock guards) and the holder."""
    deadline, told, unwritten_polls = None, False, 0
    while True:
        try:
            handle = open(path, 'a+', encoding='utf-8')
        except OSError as error:
            raise UserError('cannot create the lock file {} ({}); choose an `out` in a '
                            'folder you can write'.format(path, error.strerror))
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            if not holder and unwritten_polls < _UNWRITTEN_POLLS:
                # A holder writes its line just after it took the lock: read it again.
                unwritten_polls += 1
                time.sleep(_POLL_SECONDS)
                continue
            holder = holder or 'another process'
            if holder.startswith('pid {} '.format(os.getpid())):
                holder += ', this very command: is the same folder given twice?'
            elif wait and '({},'.format(wait[0]) in holder:
                deadline = deadline or time.monotonic() + wait[1]
                if time.monotonic() < deadline:
                    if not told:
                        print('waiting for {} ({})'.format(folder, holder), file=sys.stderr)
                        told = True
                    time.sleep(_POLL_SECONDS)
                    continue
                raise UserError('{} is still in use by {} after {:g} s; run the command '
                                'again when it has finished'.format(folder, holder, wait[1]))
            raise UserError('{} is in use by {}; wait for it to finish or use another '
                            'folder'.format(folder, holder))
        try:
            if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                return handle
        except FileNotFoundError:
            pass
        handle.close()   # the holder released and removed it between our open and flock


_POLL_SECONDS = 0.2
_UNWRITTEN_POLLS = 25      # how long (x _POLL_SECONDS) a holder may take to write its line


def _siblings(folder, kind):
    """{pid: path} of the marked `.NAME.<kind>-PID` siblings of `folder`."""
    prefix = os.path.basename(_sibling(folder, kind + '-'))
    parent = os.path.dirname(_sibling(folder, 'lock'))
    found = {}
    for name in os.listdir(parent):
        path = os.path.join(parent, name)
        if name.startswith(prefix) and name[len(prefix):].isdigit() and is_result_folder(path):
            found[int(name[len(prefix):])] = path
    return found


def recover_interrupted_swap(folder):
    """Put back the run a swap killed between its two renames left without a `folder`:
    the finished new run (its staging sibling, swapped in only once complete), whose
    swap is completed (the run it replaced is removed, as `force` had asked), or, with no
    staging of that swap, the old run. Says which; call while holding the lock."""
    if os.path.lexists(folder):
        return
    replaced, staging = _siblings(folder, 'replaced'), _siblings(folder, 'staging')
    for pid in sorted(replaced, key=lambda p: os.stat(replaced[p]).st_mtime, reverse=True):
        if pid in staging:
            os.replace(staging[pid], folder)
            shutil.rmtree(replaced[pid])
            print('finished replacing {} that a killed run (pid {}) had begun: its new, '
                  'complete run is in place and the run it replaced was removed'.format(
                      folder, pid), file=sys.stderr)
        else:
            os.replace(replaced[pid], folder)
            print('put back the run of {} that a killed run (pid {}) had moved aside to '
                  'replace it'.format(folder, pid), file=sys.stderr)
        return


def sweep_stale(folder):
    """Remove what killed runs left: staging or replaced siblings of `folder` (marked,
    so ours) and temporary files inside it, after putting back a run that an interrupted
    swap left aside (recover_interrupted_swap). Call only while holding the folder's
    lock. Returns the number of paths removed."""
    recover_interrupted_swap(folder)
    removed = 0
    parent = os.path.dirname(_sibling(folder, 'lock'))
    prefixes = tuple(os.path.basename(_sibling(folder, kind)) for kind in ('staging-', 'replaced-'))
    for name in os.listdir(parent):
        path = os.path.join(parent, name)
        if name.startswith(prefixes) and is_result_folder(path):
            shutil.rmtree(path)   # a folder this tool created and marked
            removed += 1
    if is_result_folder(folder):
        for name in os.listdir(folder):
            if _is_stale(os.path.join(folder, name)):
                path = os.path.join(folder, name)
                shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
                removed += 1
    if removed:
        print('removed {} temporary file(s) left by an interrupted run of {}'.format(
            removed, folder), file=sys.stderr)
    return removed


def _is_stale(path):
    """Whether `path` is a temporary a killed run left in its result folder: ours by
    name (.tmp-...), or a folder of Chainer's writers holding at most the one file
    it was staging (a user's folder of the same name pattern holds more)."""
    match = _STALE_IN_FOLDER.match(os.path.basename(path))
    if not match or os.path.islink(path):
        return False
    staged = match.group(2) or ('log.json' if match.group(4) else None)
    if staged is None:
        return True
    return os.path.isdir(path) and set(os.listdir(path)) <= {staged}


def check_replaceable(folder, replacer='`force`', other='pass another `out`'):
    """UserError unless `folder` is absent or a marked result folder of this tool that
    holds only files this tool wrote (manifest.foreign_files); `replacer` (what would
    replace it) and `other` (the way out) go into the message."""
    if not os.path.lexists(folder):
        return
    if not os.path.isdir(folder) or os.path.islink(folder):
        raise UserError('{} is not a folder; {}'.format(folder, other))
    if not is_result_folder(folder):
        legacy = os.path.exists(os.path.join(folder, 'args.json'))
        raise UserError('{} is not a result folder made by this tool (it has no {} marker); '
                        '{} only replaces such folders: {}{}'.format(
                            folder, MARKER, replacer, other,
                            ' (if an older version of this tool made it: touch {})'.format(
                                os.path.join(folder, MARKER)) if legacy else ''))
    foreign = manifest.foreign_files(folder)
    if foreign:
        shown = ', '.join(foreign[:3]) + (' and {} more'.format(len(foreign) - 3)
                                          if len(foreign) > 3 else '')
        raise UserError('{} holds files this tool did not write ({}); {} replaces only a '
                        'folder of its own outputs: move them elsewhere or {} (if this tool '
                        'wrote them, add their names to {})'.format(
                            folder, shown, replacer, other,
                            os.path.join(folder, manifest.MANIFEST)))


def new_staging(folder, created_by):
    """A fresh, marked, hidden staging sibling of `folder` to build a run in."""
    staging = _sibling(folder, 'staging-{}'.format(os.getpid()))
    if is_result_folder(staging):
        shutil.rmtree(staging)   # ours (marked), left by an earlier failure
    elif os.path.lexists(staging):
        raise UserError('{} exists and is not a staging folder of this tool; move it away'
                        .format(staging))
    mark(staging, created_by)
    return staging


def swap_in(staging, folder):
    """Replace `folder` (absent or a marked result folder) by the finished `staging`:
    the old one is renamed aside first, so at every moment one complete run exists."""
    check_replaceable(folder)
    old = None
    if os.path.exists(folder):
        old = _sibling(folder, 'replaced-{}'.format(os.getpid()))
        os.replace(folder, old)
    os.replace(staging, folder)
    if old is not None:
        shutil.rmtree(old)   # the marked run that --force replaced


def discard(staging):
    """Remove a staging folder after a failure (only a marked one)."""
    if is_result_folder(staging):
        shutil.rmtree(staging)


@contextlib.contextmanager
def staged(folder, created_by):
    """Build a run of `folder` in a marked staging sibling (the yielded path) and swap it
    in when the block finishes; on any failure the staging folder is removed and
    `folder` is left as it was. Call while holding the folder's lock."""
    recover_interrupted_swap(folder)
    staging = new_staging(folder, created_by)
    try:
        yield staging
        swap_in(staging, folder)
    except BaseException:
        discard(staging)   # never left beside the folder, finished or not
        raise


def check_new_out(out, force):
    """A new run may go to an absent or empty `out`; an existing one is refused unless
    `force`, and then only a marked result folder of this tool is replaced."""
    if os.path.lexists(out) and (not os.path.isdir(out) or os.path.islink(out)):
        raise UserError('`out` {} exists and is not a folder; pass another `out`'.format(out))
    if not os.path.isdir(out) or not os.listdir(out):
        return
    if not force:
        raise UserError('`out` {} already exists; pass `force` to replace it (the old one '
                        'stays until the new run has finished) or another `out`'.format(out))
    check_replaceable(out)


def check_not_nested(out, parent):
    """UserError when result folder `out` is `parent` itself, inside it or holds it: a
    run derived from another never replaces or lives inside its parent."""
    out, parent = os.path.realpath(out), os.path.realpath(parent)
    if out == parent or out.startswith(parent + os.sep) or parent.startswith(out + os.sep):
        raise UserError('`out` {} is, contains or lies inside the parent run {}; pass a '
                        'folder of its own'.format(out, parent))
