"""Putting a group of finished files in place together: all of them, or none.

nlp_utils.atomic_write_files writes every file of a group to a temporary first; this
renames them onto their paths, keeping each old file until all renames succeeded, so a
failed rename (a path that became a folder, a full file system) puts the old ones back.
A journal beside the first path lists the renames while they happen: when a kill -9
stops them half way, the next holder of the folder's lock finishes them
(sweep_dead_temporaries, which removes whatever else a killed writer's `.tmp-PID-...`
files left, calls `finish`), so the group ends up whole, and so does the next group
write of the same files (resolve_dead_journals).

Layer 0: the standard library only.
"""
import json
import os
import re
import shutil
import sys
import uuid

JOURNAL = 'group-'   # .tmp-PID-group-XXXXXXXX<name>: mkstemp's random part has no '-'
_TEMPORARY = re.compile(r'^\.tmp-(\d+)-')   # a temporary of this tool, by its writer's pid


def replace_together(paths, temporaries):
    """Rename each temporary onto its path. The old files are kept as hard links
    (.tmp-PID-... names) until all renames succeeded; when one fails, each path already
    replaced gets its old file back, or is removed if it had none."""
    journal = _write_journal(paths, temporaries)
    backups, replaced = {}, []
    try:
        for path, tmp in zip(paths, temporaries):
            if os.path.isfile(path) and not os.path.islink(path):
                backups[path] = linked_copy(path)
            os.replace(tmp, path)
            replaced.append(path)
    except BaseException:
        for path in reversed(replaced):
            if path in backups:
                os.replace(backups.pop(path), path)
            else:
                os.remove(path)
        raise
    finally:
        for backup in backups.values():
            os.remove(backup)
        os.remove(journal)


def _write_journal(paths, temporaries):
    """The journal of the renames about to happen, as JSON: [[temporary, path, the
    identity of the file at path now, the temporary's identity], ...]."""
    journal = temporary_name(paths[0], JOURNAL)
    with open(journal, 'w', encoding='utf-8') as f:
        json.dump([[os.path.abspath(t), os.path.abspath(p), identity(p), identity(t)]
                   for t, p in zip(temporaries, paths)], f)
    return journal


def identity(path):
    """[inode, size, mtime in ns] of the file at `path`, or None where there is none."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return [stat.st_ino, stat.st_size, stat.st_mtime_ns]


def alive(pid):
    """Whether process `pid` runs (another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def dead_journals(folder, paths):
    """Journals in `folder` of killed writers whose groups touch one of `paths`."""
    wanted = {os.path.abspath(p) for p in paths}
    found = []
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        match = _TEMPORARY.match(name)
        journal = os.path.join(folder, name)
        if match and is_journal(name) and not alive(int(match.group(1))) \
                and wanted & _targets(journal):
            found.append(journal)
    return found


def resolve_dead_journals(paths):
    """Finish (or, where stale, drop) the groups that killed writers left journals of in
    the folders of `paths` and that touch one of them, with the rest of those writers'
    temporaries of the group's files: a writer calls this before it writes `paths`, so
    it never leaves a killed group's journal behind for a later command to replay."""
    for folder in {os.path.dirname(os.path.abspath(p)) for p in paths}:
        for journal in dead_journals(folder, paths):
            sweep_dead_temporaries(folder, [os.path.basename(p) for p in _targets(journal)])


def sweep_dead_temporaries(folder, endings=None):
    """Remove the temporary files and folders of this tool (.tmp-PID-..., as
    nlp_utils.atomic_write_files and model extraction name them) in `folder` whose
    writer is no longer running: what a kill -9 in the middle of a write (an activation
    cache, a report) left. With `endings`, only those whose names end with one of them
    (the temporaries of those outputs). Called with a lock held. Returns the number
    removed."""
    dead = []
    for name in os.listdir(folder):
        match = _TEMPORARY.match(name)
        if match and (endings is None or name.endswith(tuple(endings))) and \
                not alive(int(match.group(1))) and not os.path.islink(os.path.join(folder, name)):
            dead.append(name)
    # First finish the renames a killed writer had begun, which use its temporaries.
    for name in [n for n in dead if is_journal(n)]:
        finish(os.path.join(folder, name))
    removed = 0
    for name in dead:
        path = os.path.join(folder, name)
        if os.path.lexists(path):
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
            removed += 1
    if removed:
        print('removed {} temporary file(s) left by a killed run in {}'.format(removed, folder),
              file=sys.stderr)
    return removed


def _targets(journal):
    """The paths a journal renames onto (none where it is torn)."""
    try:
        with open(journal, encoding='utf-8') as f:
            return {entry[1] for entry in json.load(f)}
    except (OSError, ValueError, TypeError, IndexError):
        return set()


def is_journal(name):
    """Whether file name `name` (.tmp-PID-...) is a journal of replace_together."""
    return name.split('-', 2)[-1].startswith(JOURNAL)


def finish(journal):
    """Complete the renames of a killed replace_together from its journal, when every
    path still holds either the file the group started from or the group's own: the
    renamed temporaries are gone, the others are renamed now. Where a later writer has
    replaced one of them since, the group is stale and its leftover temporaries are
    removed instead: a replay never puts old outputs over newer ones. The journal is
    removed; one torn by the kill is only removed (no rename had started then).
    -> whether the group was completed."""
    try:
        with open(journal, encoding='utf-8') as f:
            renames = json.load(f)
    except ValueError:
        renames = []
    current = all(len(entry) == 2 or identity(entry[1]) in (entry[2], entry[3])
                  for entry in renames)
    for entry in renames:
        temporary, path = entry[:2]
        try:
            if current:
                os.replace(temporary, path)
            else:
                os.remove(temporary)
        except OSError:   # renamed before the kill (or its path became a folder: swept)
            pass
    os.remove(journal)
    return current and bool(renames)


def temporary_name(path, infix=''):
    """A new name .tmp-PID-<infix>XXXXXXXX<name> beside `path` (not created)."""
    return os.path.join(os.path.dirname(os.path.abspath(path)), '.tmp-{}-{}{}{}'.format(
        os.getpid(), infix, uuid.uuid4().hex[:8], os.path.basename(path)))


def linked_copy(path):
    """A hard link to file `path` under a temporary name beside it (a copy where the
    file system has no hard links)."""
    backup = temporary_name(path)
    try:
        os.link(path, backup)
    except OSError:
        shutil.copy2(path, backup)
    return backup
