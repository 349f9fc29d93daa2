"""Putting a group of finished files in place together: all of them, or none.

nlp_utils.atomic_write_files writes every file of a group to a temporary first; this
renames them onto their paths, keeping each old file until all renames succeeded, so a
failed rename (a path that became a folder, a full file system) puts the old ones back.
A journal beside the first path lists the renames while they happen: when a kill -9
stops them half way, the next holder of the folder's lock finishes them
(result_folder.sweep_dead_temporaries calls `finish`), so the group ends up whole.

Layer 0: the standard library only.
"""
import json
import os
import shutil
import uuid

JOURNAL = 'group-'   # .tmp-PID-group-XXXXXXXX<name>: mkstemp's random part has no '-'


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
    """The journal of the renames about to happen: [[temporary, path], ...] as JSON."""
    journal = temporary_name(paths[0], JOURNAL)
    with open(journal, 'w', encoding='utf-8') as f:
        json.dump([[os.path.abspath(t), os.path.abspath(p)] for t, p in zip(temporaries, paths)], f)
    return journal


def is_journal(name):
    """Whether file name `name` (.tmp-PID-...) is a journal of replace_together."""
    return name.split('-', 2)[-1].startswith(JOURNAL)


def finish(journal):
    """Complete the renames of a killed replace_together from its journal (the renamed
    temporaries are gone, the others are renamed now); remove the journal. A journal
    torn by the kill is only removed: no rename had started then."""
    try:
        with open(journal, encoding='utf-8') as f:
            renames = json.load(f)
    except ValueError:
        renames = []
    for temporary, path in renames:
        try:
            os.replace(temporary, path)
        except OSError:   # renamed before the kill (or its path became a folder: swept)
            pass
    os.remove(journal)


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
