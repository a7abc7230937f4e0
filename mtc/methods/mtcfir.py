"""MTCFIR: multi-task clustering with feature and instance relation learning (CJC-19).

Algorithm 1 in three steps:
1. common features (mSDA over all tasks' data, Eq. 1-6, Algorithm 2; mtc.methods.msda):
   Z = [X, h^1, ..., h^g];
2. a consistent similarity matrix per task with learned task weights alpha (Eq. 7-20,
   Algorithm 3; mtc.methods.consistent_similarity), l_t = ceil(lambda n_t / k_t) neighbours;
3. symmetric NMF of each M^t (Eq. 21-25, square-root update), k-means + 0.2 initialisation.

Ablations (Sec. 4): ``common_features=False`` is MTCFIR-nF (step 1 skipped, Z = X);
``consistent=False`` is MTCFIR-nI (SNMF on the cosine similarity of each task's own new
features, no instance transfer); ``learned_weights=False`` is MTCFIR-nR (every alpha = 1).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import normalize

from mtc.methods.base import MultiTaskClusterer, summed_traces
from mtc.methods.memo import Memo, fingerprint
from mtc.methods.consistent_similarity import (adaptive_neighbours, distance_matrices, relation_matrices,
                                               rescale_and_symmetrise, task_weights)
from mtc.methods.msda import msda_features
from mtc.methods.snmf import kmeans_indicator, snmf
from mtc.similarity import cosine_affinity


def mean_embedding_mmd(features: list) -> float:
    """Mean over task pairs of the linear-kernel MMD^2 = ||mean(Z^t) - mean(Z^s)||^2, rows
    L2-normalised first (the cosine geometry the method works in), so feature sets of
    different scale and width (X vs [X, h^1, ..., h^g]) are comparable."""
    means = [np.asarray(normalize(Z).mean(axis=0)).ravel() for Z in features]
    pairs = [(t, s) for t in range(len(means)) for s in range(t + 1, len(means))]
    return float(np.mean([np.sum((means[t] - means[s]) ** 2) for t, s in pairs])) if pairs else 0.0


_SIMILARITIES = Memo(size=2)


class MTCFIR(MultiTaskClusterer):
    """MTCFIR (Algorithm 1) and, through its switches, MTCFIR-nF / -nI / -nR."""

    def __init__(self, n_clusters=2, neighbour_ratio=0.3, corruption=0.5, n_layers=3, common_features=True,
                 consistent=True, learned_weights=True, update="sqrt", stopping="relative", tol=1e-5,
                 max_iter=500, random_state=None):
        self.n_clusters = n_clusters
        self.neighbour_ratio = neighbour_ratio
        self.corruption = corruption
        self.n_layers = n_layers
        self.common_features = common_features
        self.consistent = consistent
        self.learned_weights = learned_weights
        self.update = update
        self.stopping = stopping
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state

    def _fit(self, matrices, n_clusters, rng):
        if not 0 < self.neighbour_ratio <= 1:
            raise ValueError(f"neighbour_ratio must be in (0, 1], got {self.neighbour_ratio}")
        neighbours = [max(1, math.ceil(self.neighbour_ratio * X.shape[0] / k)) for X, k in zip(matrices, n_clusters)]
        for t, (X, l) in enumerate(zip(matrices, neighbours)):
            if l > X.shape[0] - 2:
                raise ValueError(f"task {t}: l = ceil(neighbour_ratio n_t / k_t) = {l} needs more than {X.shape[0]} samples")
        self.mmd_before_ = mean_embedding_mmd(matrices)
        if self.common_features:  # step 1
            stacked = sp.vstack(matrices, format="csr") if any(map(sp.issparse, matrices)) else np.vstack(matrices)
            Z = msda_features(stacked, self.corruption, self.n_layers)
            features = np.split(Z, np.cumsum([X.shape[0] for X in matrices])[:-1])
        else:
            features = matrices
        self.mmd_after_ = mean_embedding_mmd(features)
        key = (fingerprint(*features), tuple(neighbours), self.consistent, self.learned_weights)
        alpha, similarities = _SIMILARITIES.get(key, lambda: self._similarity_step(features, neighbours))
        self.task_weights_ = alpha / np.diag(alpha)[:, None]  # alpha_t^t = 1, as Tables 8-11
        fits = []
        for t, M in enumerate(similarities):  # step 3
            _, fit = snmf(M, kmeans_indicator(features[t], n_clusters[t], rng), update=self.update,
                          stopping=self.stopping, tol=self.tol, max_iter=self.max_iter)
            fits.append(fit)
        self.labels_ = [fit.labels for fit in fits]
        self.objective_trace_ = summed_traces([np.asarray(fit.trace) for fit in fits])
        self.n_iter_ = max(fit.n_iter for fit in fits)
        self.converged_ = all(fit.converged for fit in fits)
        self.n_neighbours_ = neighbours

    def _similarity_step(self, features, neighbours) -> tuple[np.ndarray, list[np.ndarray]]:
        """Step 2: task weights alpha and one similarity matrix per task (no randomness, so
        memoised per process: the seeds of a grid point share it)."""
        T = len(features)
        relations = relation_matrices(features) if self.consistent or self.learned_weights else None
        alpha = task_weights(relations, neighbours) if self.learned_weights else np.ones((T, T))
        if self.consistent:
            return alpha, [rescale_and_symmetrise(adaptive_neighbours(A, l))  # Algorithm 3, lines 6-10; Sec. 3.5
                           for A, l in zip(distance_matrices(features, relations, alpha), neighbours)]
        return alpha, [cosine_affinity(Z) for Z in features]

    def task_relatedness(self) -> np.ndarray:
        return self.task_weights_

    def summary_metrics(self) -> dict[str, float]:
        return {"mmd/before": self.mmd_before_, "mmd/after": self.mmd_after_}


class MTCFIRnF(MTCFIR):
    """MTCFIR-nF: no common-feature step."""

    def __init__(self, n_clusters=2, neighbour_ratio=0.3, update="sqrt", stopping="relative", tol=1e-5,
                 max_iter=500, random_state=None):
        super().__init__(n_clusters=n_clusters, neighbour_ratio=neighbour_ratio, common_features=False,
                         update=update, stopping=stopping, tol=tol, max_iter=max_iter, random_state=random_state)


class MTCFIRnI(MTCFIR):
    """MTCFIR-nI: no consistent-similarity step (SNMF on the new features' own cosine similarity)."""

    def __init__(self, n_clusters=2, corruption=0.5, n_layers=3, update="sqrt", stopping="relative", tol=1e-5,
                 max_iter=500, random_state=None):
        super().__init__(n_clusters=n_clusters, corruption=corruption, n_layers=n_layers, consistent=False,
                         learned_weights=False, update=update, stopping=stopping, tol=tol, max_iter=max_iter,
                         random_state=random_state)


class MTCFIRnR(MTCFIR):
    """MTCFIR-nR: every task weight alpha = 1."""

    def __init__(self, n_clusters=2, neighbour_ratio=0.3, corruption=0.5, n_layers=3, update="sqrt",
                 stopping="relative", tol=1e-5, max_iter=500, random_state=None):
        super().__init__(n_clusters=n_clusters, neighbour_ratio=neighbour_ratio, corruption=corruption,
                         n_layers=n_layers, learned_weights=False, update=update, stopping=stopping, tol=tol,
                         max_iter=max_iter, random_state=random_state)
