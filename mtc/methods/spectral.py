"""Normalized cut / spectral clustering on a given affinity (scikit-learn's solver)."""

from __future__ import annotations

import numpy as np
from sklearn.cluster import spectral_clustering

from mtc.methods.base import (AFFINITY, AT_LEAST_ONE, POOLED_ATTRIBUTES, POSITIVE, MultiTaskClusterer, PerTaskClusterer,
                              PooledClusterer)
from mtc.numerics.affinity import affinity_matrix
from mtc.numerics.convergence import SingleFit
from mtc.numerics.seeding import indicator, seed_from


def normalized_cut(W: np.ndarray, labels: np.ndarray, k: int) -> float:
    """Ncut(A_1..A_k) = sum_c cut(A_c, V \\ A_c) / vol(A_c) = sum_c 1 - assoc(A_c) / vol(A_c)."""
    H = indicator(labels, k)
    volume = H.T @ W.sum(axis=1)
    within = np.sum(H * (W @ H), axis=0)
    used = volume > 0
    return float(np.sum(1.0 - within[used] / volume[used]))


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
    }

    def __init__(self, n_clusters=2, affinity="cosine", kernel_width=1.0, n_init=10, random_state=None):
        self.n_clusters = n_clusters
        self.affinity = affinity
        self.kernel_width = kernel_width
        self.n_init = n_init
        self.random_state = random_state

    def _fit_one(self, X, k, rng) -> SingleFit:
        W = affinity_matrix(X, self.affinity, self.kernel_width)
        labels = spectral_clustering(W, n_clusters=k, n_init=self.n_init, random_state=seed_from(rng))
        return SingleFit(labels, [normalized_cut(W, labels, k)], 1, True)


class PooledNormalizedCut(PooledClusterer, NormalizedCut):
    __doc__ = """A-Ncut: normalized cut on the affinity of the union of all tasks, scored per task.

    Parameters
    ----------
    n_clusters, affinity, kernel_width, n_init, random_state
        As NormalizedCut; the pooled problem has max_t n_clusters[t] clusters.
""" + POOLED_ATTRIBUTES
