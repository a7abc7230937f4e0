"""On-disk cache of processed datasets, keyed by the raw files' checksums and the data config.

A cache file is an uncompressed ``.npz`` whose zip comment, its last 64 bytes, is the sha256
(hex) of every byte before it, so any damaged byte is detected, even one the zip format itself
would not notice (a flipped digit in an array's shape, a date in the zip directory). A file that
fails the check or does not parse is reported in one line on stderr, removed and rebuilt.
Caches written before the checksum (``CACHE_VERSION`` 1) are not read: their keys differ, so
the datasets are rebuilt once and the old files are left alone. A task's labels are stored as
``y<i>`` when it has them; a task without (``y`` None) has no ``y<i>``.

Beside a cache file, ``<file>.hash`` remembers the dataset's content hash with the stamp of the
bytes it was computed from, so a sweep's key (which holds the hash of its data) is known
without reading the dataset: a finished sweep is found in the store without loading its draws.

Writes are atomic (a temporary file in the same folder, then ``os.replace``): a reader sees
no file or a whole one, an interrupted writer leaves its old file, and of two concurrent
writers the last one wins with a whole file.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mtc.data.sources import configured_dir
from mtc.errors import InputError
from mtc.tasks import MultiTaskDataset, Task

CACHE_VERSION = 2  # bump when the file format or a builder's output changes for the same config
STAMP = 64  # bytes of the sha256 hex digest that ends every cache file (its zip comment)
HASH_VERSION = "1"  # of the remembered content hash (<file>.hash): bump when MultiTaskDataset.content_hash changes


class CorruptCacheError(ValueError):
    """A cache file whose bytes do not match the checksum stamped at its end."""


# what reading a damaged .npz can raise; np.load reads lazily, so only while reading every array
DAMAGE = (CorruptCacheError, zipfile.BadZipFile, zlib.error, struct.error, EOFError, KeyError, OSError,
          ValueError, NotImplementedError)


def cache_dir(configured: str | None = None) -> Path:
    return configured_dir(configured, "MTC_CACHE_DIR", "~/.cache/mtc/processed")


def cache_key(name: str, builder: str, params: dict, checksums: dict[str, str]) -> str:
    blob = json.dumps([CACHE_VERSION, name, builder, params, sorted(checksums.items())], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def save(dataset: MultiTaskDataset, path: Path) -> None:
    """Write ``dataset`` to ``path`` atomically, stamped with the file's sha256."""
    arrays = {"meta": np.array(json.dumps({"name": dataset.name, "meta": dataset.meta,
                                           "tasks": [[t.name, list(t.class_names)] for t in dataset.tasks]}))}
    for i, task in enumerate(dataset.tasks):
        if task.labelled:
            arrays[f"y{i}"] = task.y
        if sp.issparse(task.X):
            X = sp.csr_matrix(task.X)
            arrays.update({f"data{i}": X.data, f"indices{i}": X.indices, f"indptr{i}": X.indptr,
                           f"shape{i}": np.array(X.shape)})
        else:
            arrays[f"dense{i}"] = task.X
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.comment = b"0" * STAMP  # placeholder, so the bytes before it are final
    body = buffer.getbuffer()[:-STAMP]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".part", delete=False)
    try:
        with tmp:
            tmp.write(body)
            tmp.write(hashlib.sha256(body).hexdigest().encode())
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp.name, path)
    except BaseException:
        Path(tmp.name).unlink(missing_ok=True)
        raise


class CacheFolderError(InputError):
    """The processed-data folder is not a folder, or takes no files."""


def check_folder(folder: Path, write: bool) -> None:
    """``folder`` is (or can be made) a folder, and with ``write`` takes files; nothing is
    created. A file there, or a read-only folder, is one line naming the setting."""
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    try:
        if not existing.is_dir():
            raise NotADirectoryError(f"{existing} is not a folder")
        if write:
            with tempfile.TemporaryFile(dir=existing):  # the real test: access(2) says yes to root on any mode
                pass
    except OSError as error:
        raise CacheFolderError(f"cannot {'write' if write else 'read'} processed datasets in {folder} "
                               f"({error.strerror or error}); set data.cache_dir (or MTC_CACHE_DIR) to a writable "
                               "folder") from None


def hash_memo_path(path: Path) -> Path:
    return path.with_name(path.name + ".hash")


def remembered_hash(path: Path) -> str | None:
    """The content hash (MultiTaskDataset.content_hash) remembered for the cache file at
    ``path`` while its bytes are those it was computed from (the stamp at the file's end is
    stored beside it), read without reading the dataset; None when there is none or the file
    changed since."""
    try:
        version, stamp, content_hash = hash_memo_path(path).read_text().split()
        with path.open("rb") as cached:
            cached.seek(-STAMP, os.SEEK_END)
            same = version == HASH_VERSION and cached.read(STAMP).decode() == stamp
        return content_hash if same else None
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def remember_hash(path: Path, content_hash: str) -> None:
    """Keep ``content_hash`` beside the cache file at ``path`` (``<file>.hash``: its stamp and
    the hash), atomically; a folder that takes no files keeps none."""
    try:
        with path.open("rb") as cached:
            cached.seek(-STAMP, os.SEEK_END)
            stamp = cached.read(STAMP).decode()
        memo = hash_memo_path(path)
        tmp = memo.with_name(f".{memo.name}.{os.getpid()}.part")
        try:
            tmp.write_text(f"{HASH_VERSION} {stamp} {content_hash}\n")
            os.replace(tmp, memo)
        finally:
            tmp.unlink(missing_ok=True)
    except (OSError, UnicodeDecodeError):
        pass


def load(path: Path) -> MultiTaskDataset:
    """The dataset cached at ``path``; a damaged file raises one of ``DAMAGE``."""
    return _parse(path.read_bytes())


def load_or_none(path: Path) -> MultiTaskDataset | None:
    """The dataset cached at ``path``, or None when there is none or it is corrupt; a corrupt
    file is reported in one line on stderr and removed, for the caller to rebuild."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return _parse(data)
    except DAMAGE as error:
        reason = (str(error).splitlines() or ["no message"])[0][:120]
        print(f"mtc: processed cache {path} is corrupt ({type(error).__name__}: {reason}); rebuilding it",
              file=sys.stderr)
        path.unlink(missing_ok=True)
        return None


def _parse(data: bytes) -> MultiTaskDataset:
    """The dataset in the bytes of a cache file, checked against its stamp and read eagerly."""
    body, stamp = memoryview(data)[:-STAMP], data[-STAMP:]
    if len(data) <= STAMP or hashlib.sha256(body).hexdigest().encode() != stamp:
        raise CorruptCacheError(f"the sha256 of its {len(data)} bytes does not match the stamp at its end")
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        info = json.loads(str(archive["meta"]))
        tasks = []
        for i, (task_name, classes) in enumerate(info["tasks"]):
            if f"dense{i}" in archive:
                X = archive[f"dense{i}"]
            else:
                X = sp.csr_matrix((archive[f"data{i}"], archive[f"indices{i}"], archive[f"indptr{i}"]),
                                  shape=tuple(archive[f"shape{i}"]))
            tasks.append(Task(task_name, X, archive[f"y{i}"] if f"y{i}" in archive else None, tuple(classes)))
    return MultiTaskDataset(info["name"], tuple(tasks), info["meta"])
