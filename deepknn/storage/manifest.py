"""What this tool wrote into a result folder: the marker and the manifest of its files.

A result folder carries the marker `.deep-knn-result` from its creation and the manifest
`.deep-knn-files`, one JSON string per line: the path (relative to the folder) of every
file this tool wrote there. nlp_utils.atomic_write_files records each file it writes
below a marked folder; training records the files Chainer's writers make (model,
snapshot, log). Lines are only ever appended (one small O_APPEND write each time), so
writers need no lock and a reader never sees a torn list.

A folder is this tool's to replace only when every file in it is its own (`foreign_files`
is empty). A folder marked before manifests existed counts as its own the files with
the names the tool itself writes there (LEGACY_OWN); the first file recorded into such a
folder starts its manifest with them, after which only the manifest counts.

Layer 0: the standard library only (nlp_utils records through it).
"""
import json
import os
import re

MARKER = '.deep-knn-result'
MANIFEST = '.deep-knn-files'
# Names the tool writes into a result folder: training (and train_and_dknn.sh's
# time.txt), run_dknn, scaling, the DkNN, kNN, reduction and entropy caches, the demo's maps.
LEGACY_OWN = re.compile(
    r'^(args\.json|vocab\.json|calib\.json|train_changes\.json|train\.log|train_result\.json'
    r'|log|time\.txt|best_model\.npz|snapshot_latest\.npz|temperature\.json|calibration_.+\.json'
    r'|reliability_temperature(_.+)?\.png|dknn_.+\.(json|npz)|knn_.+\.(json|html|md|csv)'
    r'|entropy_measures\.json|finetune_entropy\.json|reduced_train_.+\.json'
    r'|interpretations(_.+)?\.(html|csv|png))$')
# Always the tool's by their names: its bookkeeping, the temporaries of
# atomic_write_files (.tmp-PID-...) and lock files of outputs placed inside.
_BOOKKEEPING = re.compile(r'^(\.deep-knn-result|\.deep-knn-files|\.tmp-\d+-.*|\..+\.lock)$')


def marked_root(path):
    """(folder, relative path) of the nearest marked folder above file `path`, or None."""
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    while True:
        if os.path.isfile(os.path.join(folder, MARKER)):
            return folder, os.path.relpath(path, folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def record_outputs(paths):
    """Record files `paths` in the manifest of the marked folder above each (if any)."""
    by_root = {}
    for path in paths:
        found = marked_root(path)
        if found:
            by_root.setdefault(found[0], []).append(found[1])
    for root, names in by_root.items():
        record(root, names)


# manifest path -> (its identity after our last append, names this process appended):
# a checkpoint saved at every step of a long search is recorded once, not once a step.
# Any change by another process (or a new file in its place) changes the identity.
_APPENDED = {}


def record(folder, names):
    """Append `names` (paths relative to marked `folder`) to its manifest; a folder
    marked before manifests existed first gets its legacy files (LEGACY_OWN)."""
    path = os.path.join(folder, MANIFEST)
    try:
        identity = _identity(os.stat(path))
    except FileNotFoundError:
        identity, names = None, _legacy_files(folder) + list(names)
    known = _APPENDED.get(path, (None, set()))
    done = known[1] if identity is not None and known[0] == identity else set()
    new = [name for name in dict.fromkeys(names) if name not in done]
    if not new:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        os.write(fd, ''.join(json.dumps(name) + '\n' for name in new).encode('utf-8'))
        _APPENDED[path] = (_identity(os.fstat(fd)), done | set(new))
    finally:
        os.close(fd)


def _identity(stat):
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def start(folder):
    """An empty manifest for a newly marked `folder`: only recorded files are its own."""
    open(os.path.join(folder, MANIFEST), 'a').close()


def _legacy_files(folder):
    return sorted(name for name in os.listdir(folder)
                  if LEGACY_OWN.match(name) and os.path.isfile(os.path.join(folder, name)))


def recorded(folder):
    """The set of relative paths this tool wrote into marked `folder`: its manifest's
    (a line that does not parse is skipped: that file then counts as foreign), or for
    a folder without one the legacy names present."""
    path = os.path.join(folder, MANIFEST)
    if not os.path.exists(path):
        return set(_legacy_files(folder))
    names = set()
    with open(path, encoding='utf-8', errors='replace') as f:
        for line in f:
            try:
                name = json.loads(line)
            except ValueError:
                continue
            if isinstance(name, str):
                names.add(os.path.normpath(name))
    return names


def foreign_files(folder):
    """Sorted relative paths of the files (and links) under marked `folder` that this
    tool did not write: a user's notes, another tool's outputs."""
    own = recorded(folder)
    foreign = []
    for parent, dirnames, filenames in os.walk(folder):
        links = [d for d in dirnames if os.path.islink(os.path.join(parent, d))]
        for name in sorted(filenames + links):
            relative = os.path.relpath(os.path.join(parent, name), folder)
            if relative not in own and not _BOOKKEEPING.match(name):
                foreign.append(relative)
    return sorted(foreign)
