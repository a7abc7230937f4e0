"""Normalized cut / spectral clustering on a given affinity (scikit-learn's solver)."""

from __future__ import annotations

import numpy as np
from sklearn.cluster import spectral_clustering

from mtc.methods.base import PerTaskClusterer, PooledClusterer, SingleFit, seed_from
from mtc.similarity import affinity_matrix


def normalized_cut(W: np.ndarray, labels: np.ndarray, k: int) -> float:
    """Ncut(A_1..A_k) = sum_c cut(A_c, V \\ A_c) / vol(A_c) = sum_c 1 - assoc(A_c) / vol(A_c)."""
    H = np.zeros((W.shape[0], k))
    H[np.arange(W.shape[0]), labels] = 1.0
    volume = H.T @ W.sum(axis=1)
    within = np.sum(H * (W @ H), axis=0)
    used = volume > 0
    return float(np.sum(1.0 - within[used] / volume[used]))


class NormalizedCut(PerTaskClusterer):
    """Spectral clustering (Ng-Jordan-Weiss embedding + k-means) on each task's affinity."""

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
    """A-Ncut: normalized cut on the affinity of the union of all tasks."""
