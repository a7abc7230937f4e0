"""An explicit cache for deterministic, seed-independent solver steps.

In a sweep, Ray reuses each worker process for many trials; trials that differ only in the
seed (or in a parameter a step does not use) repeat the same deterministic work. A solver
that takes a ``cache`` parameter keeps such a step's result in the Cache it is given (the
sweep's trial runner gives every fit of a worker process the same one); with ``cache=None``
everything is computed afresh, with the same result to the bit. Cached arrays are made
read-only, since several fits share them.

A Cache with a ``folder`` also keeps the results of steps asked to ``persist`` there, one
``.npy`` file per array result (``.npz`` for a list of arrays): the workers of a machine, and
later sweeps, then share them. A sweep gives its workers' caches a folder beside the processed
datasets (``steps/`` in ``data.cache_dir``) and persists the k-means labels of the seeding
(small, deterministic for a key that names everything they depend on:
mtc.numerics.seeding.kmeans_labels), mSDA's features (MTCFIR's step 1:
mtc.numerics.msda.kept_msda_features; 513 MB at one 20NG corruption), and MTCFIR's cosine
relations between its tasks' features and the seeding's coordinates of each task's features
(mtc.numerics.consistent_similarity.kept_relations, mtc.numerics.seeding.kept_kmeans_coordinates:
143 MB and 58 MB at one 20NG corruption; the ``mtcmrl`` study's 20NG sweeps spent 205.2 s and
116.8 s of their fits computing them per worker and sweep, 50.1 s and 23.3 s once kept as
files). Two workers fitting the same data with different methods or grid points (MTCFIR and its
ablations on one corruption, S-MKC and its AAAI-13 protocol on NG3) no longer run the same
k-means or mSDA each, nor at the same moment: one computes a result while the others wait on
its lock file, then read it, or, asking with ``wait=False``, compute another result meanwhile
(S-MKC's k-means coordinates, one file per task: two workers starting a sweep on NG3 compute
different tasks' at once, mtc.methods.mkc). A step can also leave results for other keys than the one it
computes (``put``, read with ``peek``): S-MKC's fit at one lambda leaves the fits its path
decides at the sweep's other lambdas (mtc.methods.mkc).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import socket
import time
import uuid
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import scipy
import scipy.sparse as sp


def fingerprint(*matrices) -> str:
    """sha1 over the shapes and entries of dense or sparse matrices."""
    digest = hashlib.sha1()
    for X in matrices:
        digest.update(str((X.shape, sp.issparse(X))).encode())
        parts = (X.indptr, X.indices, X.data) if sp.issparse(X) else (X,)
        for part in parts:
            digest.update(np.ascontiguousarray(part).tobytes())
    return digest.hexdigest()


class Cache:
    """The last ``size`` results of every step, by key (least recently used dropped first, before
    a new result is computed).

    Parameters
    ----------
    size : int, default=2
        Results kept per step name.
    folder : str or Path, optional
        Where the results of steps asked to ``persist`` are kept as files (none without it).

    Attributes
    ----------
    results : dict of str to OrderedDict
        Per step name, key -> result, most recently used last.
    compute_seconds : dict of str to float
        Per step name, the seconds spent computing its results (not those read from the cache
        or its folder) since the Cache was made; a step that asks for another while computing
        leaves out the other's computing seconds (counted as the other's), so the steps of a
        fit and the rest of it add up to its seconds. The trial runner records each fit's share
        (mtc.trial.run_trial, ``step_seconds/<step>``).
    """

    def __init__(self, size: int = 2, folder: str | Path | None = None):
        self.size = size
        self.folder = folder
        self.results: dict[str, OrderedDict] = {}
        self.compute_seconds: dict[str, float] = {}
        self._nested_seconds = 0.0  # seconds of the steps computed inside the step being computed

    def get(self, step: str, key, compute, keep: int | None = None, persist: bool = False, valid=None,
            wait: bool = True):
        """The result of ``step`` for ``key``, from ``compute()`` when not kept; ``keep``
        results of this step are kept (default: ``size``; more for small results that many
        trials of a worker share, such as k-means labels). With ``persist`` (an array result,
        or a list or dict of arrays, whose key's ``repr`` names everything it depends on) and a
        ``folder``, the result is also read from and written to a file there; a file whose
        result ``valid(result)`` rejects is computed again. With ``wait=False``, a persisted
        result that another worker is computing (its lock file held) is neither waited for nor
        computed: None is returned, and the caller can compute something else meanwhile."""
        kept = self.results.setdefault(step, OrderedDict())
        if key in kept:
            kept.move_to_end(key)
            return kept[key]
        while len(kept) >= (self.size if keep is None else keep):  # before the new result, not after
            kept.popitem(last=False)  # it: the dropped one's memory is free while the new one is computed
        path = self.path(step, key) if persist and self.folder is not None else None
        result = _read(path, valid)
        if result is None:
            with _one_computes(path, wait) as own:
                if not own:
                    return None
                result = _read(path, valid)  # another worker's, written while this one waited
                if result is None:
                    outer, self._nested_seconds = self._nested_seconds, 0.0
                    start = time.perf_counter()
                    try:
                        result = compute()
                    finally:
                        elapsed = time.perf_counter() - start
                        own = elapsed - self._nested_seconds
                        self._nested_seconds = outer + elapsed
                    self.compute_seconds[step] = self.compute_seconds.get(step, 0.0) + own
                    if path is not None:
                        _write(path, result)
        _freeze(result)
        kept[key] = result
        return result

    def peek(self, step: str, key, persist: bool = False):
        """The result kept for ``key`` (in memory, or with ``persist`` and a folder, as a file),
        or None: nothing is computed. For results that another key's computation produced
        (``put``)."""
        kept = self.results.get(step)
        if kept is not None and key in kept:
            kept.move_to_end(key)
            return kept[key]
        result = _read(self.path(step, key)) if persist and self.folder is not None else None
        _freeze(result)
        return result

    def put(self, step: str, key, result, keep: int | None = None, persist: bool = False) -> None:
        """Keep ``result`` for ``key``, computed while computing another key's (S-MKC's fit at one
        lambda decides its path's fits at the others): as a file with ``persist`` and a folder,
        else in memory, the last ``keep`` (default: ``size``) of this step."""
        if persist and self.folder is not None:
            _write(self.path(step, key), result)
            return
        kept = self.results.setdefault(step, OrderedDict())
        kept[key] = result
        kept.move_to_end(key)
        while len(kept) > (self.size if keep is None else keep):
            kept.popitem(last=False)
        _freeze(result)

    def computing(self, step: str, key, persist: bool = False):
        """A context in which this worker computes what ``key`` stands for: with ``persist`` and a
        folder, other workers entering it for the same key wait on its lock file until it ends
        (then ``peek`` what it ``put``)."""
        return _one_computes(self.path(step, key) if persist and self.folder is not None else None)

    def path(self, step: str, key) -> Path:
        """The file of a persisted result: ``<folder>/<step>/<sha1 of repr(key)>.npy``."""
        return Path(self.folder) / step / f"{hashlib.sha1(repr(key).encode()).hexdigest()}.npy"

    def __deepcopy__(self, memo):
        return self  # a handle: scikit-learn's clone shares it instead of copying its contents


def library_versions() -> tuple[str, str, str]:
    """What a persisted result's bits depend on beyond its inputs and code: the numpy and scipy
    versions (their BLAS and LAPACK builds) and the machine's architecture; a persisted step's
    key ends with them."""
    return np.__version__, scipy.__version__, platform.machine()


def blas_threads() -> int:
    """The most threads any loaded BLAS library runs on (1 inside a sweep's trials): a product's
    bits can depend on it, so a persisted result computed with BLAS names it in its key."""
    from threadpoolctl import threadpool_info

    return max((info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"), default=1)


def cached(cache: Cache | None, step: str, key, compute, keep: int | None = None):
    """``cache.get(step, key, compute, keep)``, or ``compute()`` when there is no cache."""
    return compute() if cache is None else cache.get(step, key, compute, keep)


def _read(path: Path | None, valid=None) -> np.ndarray | list | dict | None:
    """A persisted result (an array from ``path``, or a list or dict of arrays from its ``.npz``
    sibling), or None when there is none (no path, no file, or one that cannot be read or that
    ``valid`` rejects: it is computed again)."""
    if path is None:
        return None
    try:
        if path.exists():
            result = np.load(path, allow_pickle=False)
        else:
            with np.load(path.with_suffix(".npz"), allow_pickle=False) as arrays:
                if arrays.files and all(name.startswith("arr_") for name in arrays.files):
                    result = [arrays[f"arr_{i}"] for i in range(len(arrays.files))]
                else:
                    result = {name: arrays[name] for name in arrays.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):
        return None
    return None if valid is not None and not valid(result) else result


@contextlib.contextmanager
def _one_computes(path: Path | None, wait: bool = True):
    """While a persisted result is computed, other workers asking for it wait on its lock file
    (``<file>.lock``) and then read it, instead of computing it at once beside this one; a folder
    where no lock can be made (read-only) computes unlocked, as before. Yields whether this
    worker computes: False only with ``wait=False`` when another worker holds the lock."""
    if path is None:
        yield True
        return
    from filelock import FileLock, Timeout

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(f"{path}.lock")
        lock.acquire(timeout=-1 if wait else 0)
    except Timeout:  # before OSError, which it derives from
        yield False
        return
    except OSError:
        yield True
        return
    try:
        yield True
    finally:
        lock.release()


def _write(path: Path, result: np.ndarray | list | dict) -> None:
    """Keep ``result`` at ``path`` (a list, or a dict of named arrays, at its ``.npz`` sibling,
    uncompressed),
    atomically (a reader sees the whole file or none); a folder that cannot be written
    (read-only, full) only means it is not kept."""
    if isinstance(result, (list, tuple, dict)):
        path = path.with_suffix(".npz")
    temporary = path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temporary, "wb") as handle:
            if isinstance(result, dict):
                np.savez(handle, **result)
            elif path.suffix == ".npz":
                np.savez(handle, *result)
            else:
                np.save(handle, result, allow_pickle=False)
        os.replace(temporary, path)
    except OSError:
        temporary.unlink(missing_ok=True)


def _freeze(value) -> None:
    """Make every array (dense, or a sparse matrix's arrays) in a (nested) tuple/list result,
    or among a dict result's values, read-only."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif sp.issparse(value):
        for part in (value.data, value.indices, value.indptr):
            _freeze(part)
    elif isinstance(value, (tuple, list)):
        for item in value:
            _freeze(item)
    elif isinstance(value, dict):
        _freeze(list(value.values()))
