"""Normalized cut / spectral clustering on a given affinity (scikit-learn's solver).

Routes (``route``). The dense route runs scikit-learn's ``spectral_clustering`` on the n x n
affinity W. The implicit route takes the same steps on W given only as products (the cosine
affinity of sparse rows as N (N'Y), mtc.numerics.affinity.CosineProduct), so no n x n array
exists: scipy's normalised Laplacian L = I - D^-1/2 A D^-1/2 with A = W less its diagonal
(isolated nodes of degree 1), its k smallest eigenvectors as the k largest of
D^-1/2 A D^-1/2 (ARPACK on a LinearOperator from scikit-learn's start vector, tol 0), scaled by
D^-1/2, the same sign flip, and k-means from the same RandomState: the same embedding to
rounding and the same labels (tested). "auto" takes it for sparse rows from
IMPLICIT_MIN_SAMPLES on; "knn" is an approximation, not the papers' affinity.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator, eigsh
from sklearn.cluster import k_means, spectral_clustering
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import StrOptions

from mtc.errors import InputError
from mtc.methods.base import (AFFINITY, AT_LEAST_ONE, POOLED_ATTRIBUTES, POSITIVE, MultiTaskClusterer, PerTaskClusterer,
                              PooledClusterer)
from mtc.numerics.affinity import ROUTES, route_affinity, route_problem
from mtc.numerics.convergence import SingleFit
from mtc.numerics.seeding import indicator, seed_from


def row_sums(W) -> np.ndarray:
    """W 1 of a dense or sparse matrix or of a product form."""
    return W.sum(axis=1) if isinstance(W, np.ndarray) else np.asarray(W @ np.ones(W.shape[0])).ravel()


def normalized_cut(W, labels: np.ndarray, k: int) -> float:
    """Ncut(A_1..A_k) = sum_c cut(A_c, V \\ A_c) / vol(A_c) = sum_c 1 - assoc(A_c) / vol(A_c)."""
    H = indicator(labels, k)
    volume = H.T @ row_sums(W)
    within = np.sum(H * np.asarray(W @ H), axis=0)
    used = volume > 0
    return float(np.sum(1.0 - within[used] / volume[used]))


def sign_flip(vectors: np.ndarray) -> np.ndarray:
    """Each row signed so that its entry of largest magnitude is positive (scikit-learn's
    deterministic sign flip)."""
    largest = np.argmax(np.abs(vectors), axis=1)
    return vectors * np.sign(vectors[np.arange(vectors.shape[0]), largest])[:, None]


def implicit_spectral_clustering(W, k: int, n_init: int, seed: int) -> np.ndarray:
    """scikit-learn's spectral_clustering(W, n_clusters=k, n_init, random_state=seed) for W
    given as products with a ``diagonal()`` (module docstring): no n x n array."""
    random_state = check_random_state(seed)
    n = W.shape[0]
    diagonal = W.diagonal()
    degree = row_sums(W) - diagonal  # scipy's Laplacian leaves the diagonal out
    dd = np.where(degree == 0, 1.0, np.sqrt(np.abs(degree)))

    def matmat(x):
        x = x.reshape(n, -1) / dd[:, None]
        return (np.asarray(W @ x) - diagonal[:, None] * x) / dd[:, None]

    operator = LinearOperator((n, n), matvec=matmat, matmat=matmat, dtype=np.float64)
    v0 = random_state.uniform(-1, 1, n)  # scikit-learn's _init_arpack_v0
    _, vectors = eigsh(operator, k=k, which="LA", tol=0, v0=v0)
    embedding = sign_flip(vectors.T[::-1] / dd)  # smallest of L first, as scikit-learn orders them
    _, labels, _ = k_means(embedding.T, k, random_state=random_state, n_init=n_init)
    return labels


class NormalizedCut(PerTaskClusterer):
    """Spectral clustering (Ng-Jordan-Weiss embedding + k-means) on each task's affinity.

    Parameters
    ----------
    n_clusters : int or list of int, default=2
        Clusters per task.
    affinity : {"cosine", "gaussian"}, default="cosine"
        Affinity between a task's samples.
    kernel_width : float, default=1.0
        Gaussian width as a multiple of the median pairwise distance (gaussian only).
    n_init : int, default=10
        k-means restarts on the spectral embedding.
    route : {"auto", "dense", "implicit", "knn"}, default="auto"
        dense: scikit-learn on the n x n affinity; implicit: the same steps on the cosine
        affinity as the product N (N'Y), never formed (cosine only; same labels, tested); auto:
        implicit for sparse rows, at least 5000 of them, else dense; knn: **not the paper's**,
        an approximation: the affinity kept on each row's ``n_neighbors`` nearest neighbours
        (sparse), off by default.
    n_neighbors : int, default=10
        Neighbours per row of the knn route (ignored by the others).
    random_state : int, Generator or None, default=None
        Seed of every random choice.

    Attributes
    ----------
    labels_ : list of ndarray of shape (n_t,)
        Cluster of every sample, per task.
    objective_trace_ : ndarray of shape (1,)
        Summed normalized cut of the partitions over tasks.
    task_objective_traces_ : list of ndarray of shape (1,)
        Normalized cut per task.
    n_iter_ : int
        Always 1 (one embedding and one k-means).
    converged_ : bool
        Always True.
    record_ : FitRecord
        Empty.
    """

    _parameter_constraints = {
        **MultiTaskClusterer._parameter_constraints,
        "affinity": [AFFINITY], "kernel_width": [POSITIVE], "n_init": [AT_LEAST_ONE],
        "route": [StrOptions({*ROUTES, "knn"})], "n_neighbors": [AT_LEAST_ONE],
    }

    def __init__(self, n_clusters=2, affinity="cosine", kernel_width=1.0, n_init=10, route="auto", n_neighbors=10,
                 random_state=None):
        self.n_clusters = n_clusters
        self.affinity = affinity
        self.kernel_width = kernel_width
        self.n_init = n_init
        self.route = route
        self.n_neighbors = n_neighbors
        self.random_state = random_state

    def _fit_one(self, X, k, rng) -> SingleFit:
        if problem := route_problem(self.affinity, self.route):
            raise InputError(problem)
        W = route_affinity(X, self.affinity, self.kernel_width, self.route, self.n_neighbors)
        seed = seed_from(rng)
        if isinstance(W, np.ndarray) or sp.issparse(W):
            labels = spectral_clustering(W, n_clusters=k, n_init=self.n_init, random_state=seed)
        else:  # a product form
            labels = implicit_spectral_clustering(W, k, self.n_init, seed)
        return SingleFit(labels, [normalized_cut(W, labels, k)], 1, True)


class PooledNormalizedCut(PooledClusterer, NormalizedCut):
    __doc__ = """A-Ncut: normalized cut on the affinity of the union of all tasks, scored per task.

    Parameters
    ----------
    n_clusters, affinity, kernel_width, n_init, route, n_neighbors, random_state
        As NormalizedCut; the pooled problem has max_t n_clusters[t] clusters.
""" + POOLED_ATTRIBUTES
