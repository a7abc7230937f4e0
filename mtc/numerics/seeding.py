"""Initial cluster indicators (n x k, non-negative) and integer seeds for libraries.

``kmeans``: the one-hot k-means assignment of the task's data plus ``offset`` (0.2 in the
MTCMRL and MTCFIR papers' SNMF initialisation). ``random``: uniform entries in [0, 1)
plus ``offset``.

k-means labels depend only on the data, k and the integer seed drawn from the fit's
generator, not on the method's other parameters; with a ``cache`` they are kept by those
three (the data as the solver passes it: its exact row-space coordinates when a solver keeps
them, kmeans_coordinates, or the data itself with a function giving them, which S-MKC calls
only when a seed's labels are not kept), so the grid points of a sweep that share features (MTCFIR: every
neighbour ratio at one corruption) run each seed's k-means once per worker. The generator is
drawn from in the same way either way, so the labels and everything after them are the same to
the bit. A cache with a folder (a sweep's workers) also keeps them as files, by a key that adds
what else the labels depend on: the versions of scikit-learn, numpy and scipy, the machine's
architecture and KMEANS_VERSION (bumped when this module computes them otherwise). Only labels
computed on one OpenMP thread (a sweep's trials, by default) are kept as files: with several,
scikit-learn's k-means adds its threads' partial sums in the order they finish, so a
computation is not repeatable to the bit and no file could stand for it.
"""

from __future__ import annotations

import numpy as np
import sklearn
from sklearn.cluster import KMeans
from sklearn.utils._openmp_helpers import _openmp_effective_n_threads  # the threads KMeans itself runs on
from threadpoolctl import threadpool_limits

from mtc.numerics.cache import Cache, fingerprint, library_versions
from mtc.numerics.linalg import gram_svd, row_space_coordinates

SEEDINGS = ("kmeans", "random")
KMEANS_KEPT = 128  # labels kept per worker: 10 seeds x up to 6 tasks x 2 feature sets, a few MiB at n = 5000
KMEANS_VERSION = 1  # of the kept labels' files: bump when kmeans_labels computes them differently
COORDINATES_VERSION = 1  # of kept_kmeans_coordinates' files: bump when kmeans_coordinates computes them differently


def seed_from(rng: np.random.Generator) -> int:
    """An integer seed for libraries that take one (scikit-learn), drawn from rng."""
    return int(rng.integers(2**31 - 1))


def seeding_svd(X) -> tuple[np.ndarray, np.ndarray]:
    """``gram_svd(X)`` on one BLAS thread, whatever the caller's: the k-means seeding's
    coordinates must not depend on how many threads a fit runs on. On 20NG's tasks the
    coordinates computed on 1 and 2 threads are 1e-13 apart, and k-means on them gave another
    partition for 6-9 of 10 seeds (a sweep's fits run on one thread, so they are its numbers)."""
    with threadpool_limits(limits=1, user_api="blas"):
        return gram_svd(X)


def kmeans_coordinates(X, svd=None):
    """X itself, or the exact row-space coordinates of its rows when d > n: k-means on them is
    k-means on X (every distance kept) at O(n r) per step. Seed-independent: a solver with a
    cache may keep it and pass it to kmeans_labels instead of X (same labels). ``svd``:
    ``seeding_svd(X)`` when the caller has it already; computed so otherwise."""
    if X.shape[1] <= X.shape[0]:
        return X
    return row_space_coordinates(X, seeding_svd(X) if svd is None else svd)


def coordinates_file_key(key) -> tuple:
    """The key of k-means coordinates kept as a file: ``key``, naming the data, and what else the
    coordinates depend on (COORDINATES_VERSION, the library versions)."""
    return (key, COORDINATES_VERSION, *library_versions())


def kept_kmeans_coordinates(matrices, key, cache: Cache | None, step: str) -> list:
    """``kmeans_coordinates`` of each matrix, or None where they are the matrix itself (which
    the cache would freeze), kept in ``cache`` as ``step`` by ``key`` (which must name the
    matrices) and, when every matrix is wider than its rows, as a file in the cache's folder:
    one worker of a machine computes them (an eigendecomposition per matrix), the others and
    later sweeps on the same matrices read it. The same bits either way: seeding_svd runs on
    one thread whatever the caller's, and the file's key names the library versions."""
    def compute():
        return [None if C is X else C for X, C in ((X, kmeans_coordinates(X)) for X in matrices)]

    if cache is None:
        return compute()
    wide = all(X.shape[1] > X.shape[0] for X in matrices)  # every entry an array: a list of arrays to keep
    file_key = coordinates_file_key(key)
    rows = [X.shape[0] for X in matrices]
    return cache.get(step, file_key, compute, persist=wide,
                     valid=lambda kept: [C.shape[0] for C in kept] == rows and all(C.dtype == np.float64 for C in kept))


def kmeans_labels(X, k: int, rng: np.random.Generator, n_init: int = 10, cache: Cache | None = None,
                  coordinates=None) -> np.ndarray:
    """k-means labels of the rows of X, in exact row-space coordinates when d > n; kept in
    ``cache`` by (X, k, n_init, the seed drawn from rng). ``coordinates``: a function giving
    ``kmeans_coordinates(X)``, for a caller that keeps them for its seeds (S-MKC); called only
    when the labels are not kept, so a fit whose labels another sweep left as files computes
    no eigendecomposition (62 s a worker on NG3)."""
    seed = seed_from(rng)

    def compute():
        return KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit_predict(
            kmeans_coordinates(X) if coordinates is None else coordinates())

    if cache is None:
        return compute()
    threads = _openmp_effective_n_threads()
    data = (fingerprint(X), COORDINATES_VERSION) if X.shape[1] > X.shape[0] else fingerprint(X)  # labels of X's coordinates
    key = (data, k, n_init, seed, threads, KMEANS_VERSION, sklearn.__version__, *library_versions())
    return cache.get("kmeans_labels", key, compute, keep=KMEANS_KEPT, persist=threads == 1,
                     valid=lambda labels: labels.shape == (X.shape[0],) and labels.dtype.kind == "i"
                     and 0 <= labels.min() and labels.max() < k)


def indicator(labels: np.ndarray, k: int, offset: float = 0.0) -> np.ndarray:
    """n x k one-hot matrix of ``labels`` plus ``offset`` everywhere."""
    Y = np.full((labels.shape[0], k), offset)
    Y[np.arange(labels.shape[0]), labels] += 1.0
    return Y


def initial_indicator(X, k: int, rng: np.random.Generator, seeding: str = "kmeans",
                      offset: float = 0.2, cache: Cache | None = None, coordinates=None) -> np.ndarray:
    """n x k starting point of an indicator factor by the named ``seeding`` strategy
    (k-means labels kept in ``cache``, when given; ``coordinates`` as kmeans_labels)."""
    if seeding == "kmeans":
        return indicator(kmeans_labels(X, k, rng, cache=cache, coordinates=coordinates), k, offset)
    if seeding == "random":
        return rng.random((X.shape[0], k)) + offset
    raise ValueError(f"unknown seeding {seeding!r}; choose one of {SEEDINGS}")
