"""Kernel k-means with a Gaussian kernel (scikit-learn has none).

Distances to cluster means in feature space come from the kernel alone:
||phi(x_i) - m_c||^2 = K_ii - 2/|c| sum_{j in c} K_ij + 1/|c|^2 sum_{j,l in c} K_jl,
computed for all (i, c) at once from K H, H the n x k one-hot assignment matrix.

K H is the whole cost of an iteration (it reads all of K). Between iterations only the samples
that changed cluster change it: K H_new = K H_old + K[:, moved] (H_new - H_old)[moved], which
reads |moved| columns of K. Lloyd's later iterations move a few samples, so K H is updated that
way while fewer than half the samples moved (``incremental=True``, the default), else computed
again; the iterates equal the full recomputation's to rounding (tests/test_baselines.py).

The Lloyd loop and the seeding read K through three operations (its diagonal, some of its
columns, its products with assignment matrices), so the same code runs on K held as an n x n
array (``DenseKernel``, the paper's method) and on Nyström features Phi with K ~ Phi Phi'
(``FactoredKernel``, ``route="nystroem"``: an approximation of the kernel, not the paper's,
off by default), where n x n is never formed.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import StrOptions

from mtc.methods.base import AT_LEAST_ONE, POSITIVE, MultiTaskClusterer, PerTaskClusterer
from mtc.numerics.affinity import WIDTH_MODES, gaussian_affinity, nystroem_features
from mtc.numerics.cache import Cache, fingerprint
from mtc.numerics.convergence import SingleFit


def cluster_kernel_sums(K: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """K H: n x k, sum_{j in c} K_ij for every sample i and cluster c."""
    n = K.shape[0]
    H = sp.csr_matrix((np.ones(n), (np.arange(n), labels)), shape=(n, k))
    return np.asarray(H.T @ K).T


def distances_from_sums(diag: np.ndarray, KH: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """n x k squared feature-space distances from every sample to every cluster mean, from K's
    diagonal and K H (cluster_kernel_sums); an empty cluster is infinitely far."""
    sizes = np.bincount(labels, minlength=k).astype(float)
    safe = np.maximum(sizes, 1.0)
    within = np.bincount(labels, weights=KH[np.arange(len(labels)), labels], minlength=k)  # sum_{j,l in c} K_jl
    dist = diag[:, None] - 2.0 * KH / safe + within / safe**2
    dist[:, sizes == 0] = np.inf
    return dist


class DenseKernel:
    """The kernel as an n x n array ``K``."""

    def __init__(self, K: np.ndarray):
        self.K = K
        self.n = K.shape[0]
        self.diagonal = np.diag(K)

    def columns(self, index) -> np.ndarray:
        return self.K[:, index]

    def cluster_sums(self, labels: np.ndarray, k: int) -> np.ndarray:
        return cluster_kernel_sums(self.K, labels, k)

    def moved_sums(self, moved: np.ndarray, change: np.ndarray) -> np.ndarray:
        """K[:, moved] change; K is symmetric (to rounding): the moved samples' rows are their
        columns, read contiguously."""
        return self.K[moved].T @ change


class FactoredKernel:
    """The kernel as ``Phi Phi'`` from features ``Phi`` (n x m); no n x n array is formed."""

    def __init__(self, Phi: np.ndarray):
        self.Phi = Phi
        self.n = Phi.shape[0]
        self.diagonal = np.einsum("ij,ij->i", Phi, Phi)

    def columns(self, index) -> np.ndarray:
        return self.Phi @ self.Phi[index].T

    def cluster_sums(self, labels: np.ndarray, k: int) -> np.ndarray:
        H = sp.csr_matrix((np.ones(self.n), (np.arange(self.n), labels)), shape=(self.n, k))
        return self.Phi @ np.asarray(H.T @ self.Phi).T

    def moved_sums(self, moved: np.ndarray, change: np.ndarray) -> np.ndarray:
        return self.Phi @ (self.Phi[moved].T @ change)


def kernel_kmeanspp(kernel: DenseKernel | FactoredKernel, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding in kernel space; returns the initial labels."""
    diag, n = kernel.diagonal, kernel.n
    centres = [int(rng.integers(n))]
    closest = diag - 2 * kernel.columns(centres[0]) + diag[centres[0]]
    for _ in range(1, k):
        weights = np.maximum(closest, 0.0)
        total = weights.sum()
        nxt = int(rng.choice(n, p=weights / total)) if total > 0 else int(rng.integers(n))
        centres.append(nxt)
        closest = np.minimum(closest, diag - 2 * kernel.columns(nxt) + diag[nxt])
    to_centres = diag[:, None] - 2 * kernel.columns(centres) + diag[centres][None, :]
    return np.argmin(to_centres, axis=1)


def kernel_kmeans_lloyd(kernel: DenseKernel | FactoredKernel, labels, k, max_iter, incremental=True):
    """Lloyd iterations in kernel space; the objective (sum of distances) never rises. With
    ``incremental`` K H is updated from the columns of K of the samples that moved (module
    docstring), else computed again every iteration."""
    diag, rows = kernel.diagonal, np.arange(len(labels))
    KH = kernel.cluster_sums(labels, k)
    trace = []
    for it in range(1, max_iter + 1):
        dist = distances_from_sums(diag, KH, labels, k)
        trace.append(float(dist[rows, labels].sum()))
        new = np.argmin(dist, axis=1)
        fit = dist[rows, new]
        for empty in np.setdiff1d(np.arange(k), new):  # refill an empty cluster with the worst-fit sample
            worst = np.argmax(fit)
            new[worst], fit[worst] = empty, -np.inf
        if np.array_equal(new, labels):
            return SingleFit(labels, trace, it, True)
        moved = np.flatnonzero(new != labels)
        if incremental and 2 * moved.size < len(labels):
            change = np.zeros((moved.size, k))
            change[np.arange(moved.size), new[moved]] = 1.0
            change[np.arange(moved.size), labels[moved]] = -1.0
            KH += kernel.moved_sums(moved, change)
        else:
            KH = kernel.cluster_sums(new, k)
        labels = new
    return SingleFit(labels, trace, max_iter, False)


class KernelKMeans(PerTaskClusterer):
    """Kernel k-means (KKM) with a Gaussian kernel of bandwidth width * median distance, or
    of bandwidth width itself (``width_mode="absolute"``, the AAAI-13 paper's sigma grid).

    Parameters
    ----------
    n_clusters : int or list of int, default=2
        Clusters per task.
    kernel_width : float, default=1.0
        sigma = kernel_width x the median pairwise distance of the task's samples
        (``width_mode="relative"``), or sigma = kernel_width (``"absolute"``).
    width_mode : {"relative", "absolute"}, default="relative"
        How ``kernel_width`` sets sigma.
    n_init : int, default=10
        Kernel k-means++ restarts; the lowest final objective wins.
    max_iter : int, default=300
        Lloyd iterations per restart.
    route : {"dense", "nystroem"}, default="dense"
        ``"dense"``: the n x n kernel, as the paper's method (of sparse rows, from their
        sparse products: no dense copy of the rows; gaussian_affinity). ``"nystroem"``: **not the
        paper's method**, an approximation for large n: kernel k-means on the Nyström
        approximation Phi Phi' of the kernel from ``n_components`` rows drawn at random
        (mtc.numerics.affinity.nystroem_features; with a relative width, sigma from the median
        distance among those rows): O(n m) memory and time per iteration instead of O(n^2).
    n_components : int, default=500
        Rows the Nyström route draws per task (all of them when a task has fewer).
    cache : mtc.numerics.cache.Cache or None, default=None
        Keeps each task's dense kernel by (data, ``kernel_width``, ``width_mode``): it depends
        on no seed, so the seeds of a grid point compute it once (a sweep's trial runner gives
        its workers one); the same bits as without it.
    random_state : int, Generator or None, default=None
        Seed of every random choice.

    Attributes
    ----------
    labels_ : list of ndarray of shape (n_t,)
        Cluster of every sample, per task.
    objective_trace_ : ndarray of shape (n_iter_,)
        Summed within-cluster feature-space distances over tasks, per iteration.
    task_objective_traces_ : list of ndarray
        The winning restart's trace per task (never rises).
    n_iter_ : int
        Most iterations over tasks.
    converged_ : bool
        Whether every task's assignment stopped changing before ``max_iter``.
    record_ : FitRecord
        Empty.
    """

    _parameter_constraints = {
        **MultiTaskClusterer._parameter_constraints,
        "kernel_width": [POSITIVE], "width_mode": [StrOptions(set(WIDTH_MODES))], "n_init": [AT_LEAST_ONE],
        "max_iter": [AT_LEAST_ONE], "route": [StrOptions({"dense", "nystroem"})], "n_components": [AT_LEAST_ONE],
        "cache": [None, Cache],
    }

    def __init__(self, n_clusters=2, kernel_width=1.0, width_mode="relative", n_init=10, max_iter=300,
                 route="dense", n_components=500, cache=None, random_state=None):
        self.n_clusters = n_clusters
        self.kernel_width = kernel_width
        self.width_mode = width_mode
        self.n_init = n_init
        self.max_iter = max_iter
        self.route = route
        self.n_components = n_components
        self.cache = cache
        self.random_state = random_state

    def _fit(self, matrices, n_clusters, rng):
        self._store([self._fit_one(X, k, rng, len(matrices)) for X, k in zip(matrices, n_clusters)])

    def _fit_one(self, X, k, rng, n_tasks: int = 1) -> SingleFit:
        """``n_init`` runs of Lloyd's iterations from kernel k-means++ starts on the task's
        kernel; the lowest final objective wins."""
        kernel = self._kernel(X, rng, n_tasks)
        runs = [
            kernel_kmeans_lloyd(kernel, kernel_kmeanspp(kernel, k, rng), k, self.max_iter)
            for _ in range(self.n_init)
        ]
        return min(runs, key=lambda run: run.trace[-1])

    def _kernel(self, X, rng, n_tasks: int) -> DenseKernel | FactoredKernel:
        """The task's kernel; a dense one kept in ``cache`` with the fit's other tasks' (ng3's
        three, ``n_tasks``: 3.6 s of a 7.4 s fit, one thread)."""
        if self.route == "nystroem":
            return FactoredKernel(nystroem_features(X, self.kernel_width, self.width_mode, self.n_components, rng))

        def compute():
            return gaussian_affinity(X, self.kernel_width, self.width_mode)

        if self.cache is None:
            return DenseKernel(compute())
        key = (fingerprint(X), float(self.kernel_width), self.width_mode)
        return DenseKernel(self.cache.get("gaussian_kernel", key, compute, keep=n_tasks))
