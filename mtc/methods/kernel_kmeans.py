"""Kernel k-means with a Gaussian kernel (scikit-learn has none).

Distances to cluster means in feature space come from the kernel alone:
||phi(x_i) - m_c||^2 = K_ii - 2/|c| sum_{j in c} K_ij + 1/|c|^2 sum_{j,l in c} K_jl,
computed for all (i, c) at once from K H, H the n x k one-hot assignment matrix.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import StrOptions

from mtc.methods.base import AT_LEAST_ONE, POSITIVE, MultiTaskClusterer, PerTaskClusterer
from mtc.numerics.affinity import WIDTH_MODES, gaussian_affinity
from mtc.numerics.convergence import SingleFit


def kernel_distances(K: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """n x k squared feature-space distances from every sample to every cluster mean."""
    n = K.shape[0]
    H = sp.csr_matrix((np.ones(n), (np.arange(n), labels)), shape=(n, k))
    sizes = np.asarray(H.sum(axis=0)).ravel()
    safe = np.maximum(sizes, 1.0)
    KH = np.asarray(H.T @ K).T  # n x k: sum_{j in c} K_ij
    within = np.asarray((H.multiply(KH)).sum(axis=0)).ravel()  # sum_{j,l in c} K_jl
    dist = np.diag(K)[:, None] - 2.0 * KH / safe + within / safe**2
    dist[:, sizes == 0] = np.inf
    return dist


def kernel_kmeanspp(K: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding in kernel space; returns the initial labels."""
    diag = np.diag(K)
    centres = [int(rng.integers(K.shape[0]))]
    closest = diag - 2 * K[:, centres[0]] + diag[centres[0]]
    for _ in range(1, k):
        weights = np.maximum(closest, 0.0)
        total = weights.sum()
        nxt = int(rng.choice(K.shape[0], p=weights / total)) if total > 0 else int(rng.integers(K.shape[0]))
        centres.append(nxt)
        closest = np.minimum(closest, diag - 2 * K[:, nxt] + diag[nxt])
    to_centres = diag[:, None] - 2 * K[:, centres] + diag[centres][None, :]
    return np.argmin(to_centres, axis=1)


def kernel_kmeans_lloyd(K, labels, k, max_iter):
    """Lloyd iterations in kernel space; the objective (sum of distances) never rises."""
    trace = []
    for it in range(1, max_iter + 1):
        dist = kernel_distances(K, labels, k)
        trace.append(float(dist[np.arange(len(labels)), labels].sum()))
        new = np.argmin(dist, axis=1)
        fit = dist[np.arange(len(new)), new]
        for empty in np.setdiff1d(np.arange(k), new):  # refill an empty cluster with the worst-fit sample
            worst = np.argmax(fit)
            new[worst], fit[worst] = empty, -np.inf
        if np.array_equal(new, labels):
            return SingleFit(labels, trace, it, True)
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
        "max_iter": [AT_LEAST_ONE],
    }

    def __init__(self, n_clusters=2, kernel_width=1.0, width_mode="relative", n_init=10, max_iter=300,
                 random_state=None):
        self.n_clusters = n_clusters
        self.kernel_width = kernel_width
        self.width_mode = width_mode
        self.n_init = n_init
        self.max_iter = max_iter
        self.random_state = random_state

    def _fit_one(self, X, k, rng) -> SingleFit:
        K = gaussian_affinity(X, self.kernel_width, self.width_mode)
        runs = [
            kernel_kmeans_lloyd(K, kernel_kmeanspp(K, k, rng), k, self.max_iter)
            for _ in range(self.n_init)
        ]
        return min(runs, key=lambda run: run.trace[-1])
