"""Where the data files come from: a local data folder, or a download cache.

With a data dir (argument or $DKNN_DATA_DIR) each file is looked up at
`<data_dir>/<folder>/<file>` and `<data_dir>/<file>`, and never downloaded. Without one,
files live in `cache_dir()/<folder>/<file>` and are downloaded on first use (atomically,
md5-checked where the md5 is known; archives unpacked through a staging folder).
"""
import hashlib
import http.client
import os
import shutil
import tarfile
import tempfile
import urllib.request
import zipfile

from tqdm import tqdm

import nlp_utils
from nlp_utils import UserError, atomic_write


# ---------------------------------------------------------------- where files live
def resolve_data_dir(data_dir=None):
    """The data folder to read from: `data_dir`, else $DKNN_DATA_DIR, else None (use the cache)."""
    chosen = data_dir or os.environ.get('DKNN_DATA_DIR') or None
    if chosen is None:
        return None
    chosen = os.path.abspath(os.path.expanduser(chosen))
    if not os.path.isdir(chosen):
        raise UserError('data dir {} (from `data_dir` or DKNN_DATA_DIR) is not a folder; '
                        'point it at an existing folder or unset it to download'.format(chosen))
    return chosen


def cache_dir():
    """Folder for downloaded data: $DKNN_CACHE_DIR, else ~/.cache/deep-knn."""
    return os.path.abspath(os.path.expanduser(
        os.environ.get('DKNN_CACHE_DIR') or os.path.join('~', '.cache', 'deep-knn')))


def find_in_data_dir(name, spec, file, data_dir):
    """Path of `file` under `data_dir`, or UserError listing every path looked at."""
    candidates = [os.path.join(data_dir, spec['folder'], file), os.path.join(data_dir, file)]
    for path in candidates:
        if os.path.exists(path):
            return path
    raise UserError('{}: {} not found; looked at {}; get it from {}{} and put it in {}'.format(
        name, file, ', '.join(candidates), spec['urls'][file],
        ' (inside {})'.format(spec['archive']) if spec['archive'] else '',
        os.path.dirname(candidates[0])))


def find_in_cache(name, spec, file):
    """Path of `file` in the cache, downloading (and extracting) it on first use."""
    folder = os.path.join(cache_dir(), spec['folder'])
    path = os.path.join(folder, file)
    if os.path.exists(path):
        return path
    if spec['archive']:
        _download_and_extract(spec['urls'][file], os.path.join(cache_dir(), spec['archive']))
        _verify_md5s(folder, spec['md5'], spec['urls'][file])
        if not os.path.exists(path):
            raise UserError('{}: {} from {} has no {}; get the file yourself and pass '
                            'its folder as `data_dir`'.format(
                                name, spec['archive'], spec['urls'][file],
                                os.path.join(spec['folder'], file)))
    else:
        download(spec['urls'][file], path, spec['md5'].get(file))
    return path


# ---------------------------------------------------------------- downloading
def _verify_md5s(folder, expected_md5s, url):
    """Delete every file in `folder` whose md5 differs from `expected_md5s` (file -> md5;
    absent files are skipped), then raise naming them, so no bad file stays usable."""
    wrong = []
    for file, expected in expected_md5s.items():
        path = os.path.join(folder, file)
        if os.path.exists(path) and nlp_utils.file_digest(path) != expected:
            os.remove(path)
            wrong.append(path)
    if wrong:
        raise UserError('{} (from {}) did not have the expected md5; removed, run again to '
                        're-download'.format(', '.join(wrong), url))


def _copy_response(response, f, url, md5):
    """Stream `response` into `f` with a progress bar; check the length and md5."""
    length = response.headers.get('Content-Length')
    total = int(length) if length else None
    digest, received = hashlib.md5(), 0
    with tqdm(total=total, unit='B', unit_scale=True, desc=os.path.basename(url)) as progress:
        for chunk in iter(lambda: response.read(1 << 16), b''):
            f.write(chunk)
            digest.update(chunk)
            received += len(chunk)
            progress.update(len(chunk))
    if total is not None and received != total:
        raise UserError('download of {} stopped after {} of {} bytes; run again, or pass '
                        'a `data_dir` / set DKNN_DATA_DIR to a folder with the file'.format(
                            url, received, total))
    if md5 is not None and digest.hexdigest() != md5:
        raise UserError('download of {} has md5 {}, expected {}; the file was not kept'.format(
            url, digest.hexdigest(), md5))


def download(url, path, md5=None):
    """Download `url` to `path` atomically (nothing is left at `path` on any failure)."""
    def write(f):
        with urllib.request.urlopen(url, timeout=60) as response:
            _copy_response(response, f, url, md5)
    try:
        atomic_write(path, write, 'wb')
    except (OSError, http.client.HTTPException) as error:
        raise UserError('could not download {} ({}); download it yourself and pass its '
                        'folder as `data_dir` or set DKNN_DATA_DIR'.format(url, error))


def _extract_archive(archive, folder):
    """Unpack a .zip or .tar.gz `archive` into `folder`."""
    if archive.endswith('.zip'):
        with zipfile.ZipFile(archive) as z:
            z.extractall(folder)
    else:
        with tarfile.open(archive) as t:
            t.extractall(folder, filter='data')


def _move_missing(source, target):
    """Move `source` to `target`, or for folders only what `target` lacks, so a file
    removed after a failed checksum comes back on the next download."""
    if not os.path.exists(target):
        os.replace(source, target)
    elif os.path.isdir(source) and os.path.isdir(target):
        for entry in os.listdir(source):
            _move_missing(os.path.join(source, entry), os.path.join(target, entry))


def _download_and_extract(url, archive):
    """Fetch `archive` and unpack its top-level folders into the cache, then delete it.

    Unpacking goes to a temporary folder first so that an interrupted run never leaves a
    half-extracted dataset folder that would later be taken as complete.
    """
    if not os.path.exists(archive):
        download(url, archive)
    cache = os.path.dirname(archive)
    staging = tempfile.mkdtemp(dir=cache, prefix='.tmp-extract-')
    try:
        _extract_archive(archive, staging)
        for entry in os.listdir(staging):
            if entry != '__MACOSX':
                _move_missing(os.path.join(staging, entry), os.path.join(cache, entry))
    except (zipfile.BadZipFile, tarfile.TarError, EOFError) as error:
        os.remove(archive)
        raise UserError('archive {} from {} is corrupt ({}); removed it, run again to '
                        're-download'.format(archive, url, error))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    os.remove(archive)
