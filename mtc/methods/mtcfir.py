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
from numbers import Real

import numpy as np
from sklearn.preprocessing import normalize
from sklearn.utils._param_validation import Interval

from mtc.methods.base import AT_LEAST_ONE, NON_NEGATIVE, SNMF_UPDATE, STOPPING, MultiTaskClusterer
from mtc.numerics.affinity import cosine_operator
from mtc.numerics.cache import Cache, cached, fingerprint
from mtc.numerics.consistent_similarity import (consistent_similarity, distance_matrices, distances_use_relations,
                                                kept_relations, task_weights)
from mtc.numerics.convergence import summed_traces
from mtc.numerics.msda import kept_msda_features
from mtc.numerics.seeding import initial_indicator, kept_kmeans_coordinates
from mtc.numerics.snmf import snmf
from mtc.numerics.stacking import row_counts, split_rows, stack_rows
from mtc.record import LabelledMatrix


def mean_embedding_mmd(features: list) -> float:
    """Mean over task pairs of the linear-kernel MMD^2 = ||mean(Z^t) - mean(Z^s)||^2, rows
    L2-normalised first (the cosine geometry the method works in), so feature sets of
    different scale and width (X vs [X, h^1, ..., h^g]) are comparable."""
    means = [np.asarray(normalize(Z).mean(axis=0)).ravel() for Z in features]
    pairs = [(t, s) for t in range(len(means)) for s in range(t + 1, len(means))]
    return float(np.mean([np.sum((means[t] - means[s]) ** 2) for t, s in pairs])) if pairs else 0.0


class MTCFIR(MultiTaskClusterer):
    """MTCFIR (Algorithm 1) and, through its switches, MTCFIR-nF / -nI / -nR.

    Parameters
    ----------
    n_clusters : int or list of int, default=2
        k_t, clusters per task.
    neighbour_ratio : float in (0, 1], default=0.3
        lambda of Sec. 4.3: l_t = ceil(lambda n_t / k_t) neighbours.
    corruption : float in [0, 1), default=0.5
        mSDA feature corruption probability p (Eq. 5-6).
    n_layers : int, default=3
        mSDA layers g (Sec. 4.3: 3).
    common_features : bool, default=True
        Step 1 (mSDA); False is MTCFIR-nF.
    consistent : bool, default=True
        Step 2's consistent similarity; False is MTCFIR-nI (cosine of the new features).
    learned_weights : bool, default=True
        Task weights alpha of Eq. 20; False sets every alpha to 1 (MTCFIR-nR).
    update : {"sqrt", "plain", "damped", "quarter", "hals"}, default="sqrt"
        SNMF rule of step 3 (Eq. 25: sqrt; hals is not the paper's, see mtc.numerics.snmf).
    stopping : {"relative", "decrease"}, default="relative"
        SNMF stopping rule.
    tol : float, default=1e-5
        Tolerance of the stopping rule.
    max_iter : int, default=500
        SNMF iterations at most.
    cache : Cache or None, default=None
        Keeps the deterministic steps 1 and 2 for the next fit on the same data and
        parameters (the seeds of a grid point); per features (every neighbour ratio at one
        corruption), the relation matrices of step 2, the k-means seeding's coordinates and
        each seed's k-means labels; results are identical without it.
    random_state : int, Generator or None, default=None
        Seed of the k-means initialisation of SNMF.

    Attributes
    ----------
    labels_ : list of ndarray of shape (n_t,)
        Cluster of every sample, per task.
    task_weights_ : ndarray of shape (T, T)
        alpha_s^t scaled so that alpha_t^t = 1 (row t: the weights of every task for task t).
    n_neighbours_ : list of int
        l_t per task.
    mmd_before_, mmd_after_ : float
        Mean pairwise MMD^2 between the tasks before and after step 1.
    objective_trace_ : ndarray
        Summed SNMF objective over tasks per iteration.
    n_iter_ : int
        Most SNMF iterations over tasks.
    converged_ : bool
        Whether every task met the stopping rule before ``max_iter``.
    record_ : FitRecord
        Scalars ``mmd_before``, ``mmd_after``; matrix ``task_weights`` (task x task).
    """

    _parameter_constraints = {
        **MultiTaskClusterer._parameter_constraints,
        "neighbour_ratio": [Interval(Real, 0, 1, closed="right")], "corruption": [Interval(Real, 0, 1, closed="left")],
        "n_layers": [AT_LEAST_ONE], "common_features": ["boolean"], "consistent": ["boolean"],
        "learned_weights": ["boolean"], "update": [SNMF_UPDATE], "stopping": [STOPPING], "tol": [NON_NEGATIVE],
        "max_iter": [AT_LEAST_ONE], "cache": [None, Cache],
    }

    def __init__(self, n_clusters=2, neighbour_ratio=0.3, corruption=0.5, n_layers=3, common_features=True,
                 consistent=True, learned_weights=True, update="sqrt", stopping="relative", tol=1e-5,
                 max_iter=500, cache=None, random_state=None):
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
        self.cache = cache
        self.random_state = random_state

    def cannot_fit(self, shapes):
        for t, (n, l) in enumerate(zip(shapes.n, self._neighbours(shapes.n, shapes.k))):
            if l > n - 2:
                return f"task {t}: l = ceil(neighbour_ratio n_t / k_t) = {l} needs more than {n} samples"
        return None

    def _neighbours(self, sizes, n_clusters) -> list[int]:
        """l_t per task (Sec. 4.3): ceil(neighbour_ratio n_t / k_t), at least 1."""
        return [max(1, math.ceil(self.neighbour_ratio * n / k)) for n, k in zip(sizes, n_clusters)]

    def _fit(self, matrices, n_clusters, rng):
        neighbours = self._neighbours([X.shape[0] for X in matrices], n_clusters)
        self.mmd_before_ = mean_embedding_mmd(matrices)
        if self.common_features:  # step 1
            stacked = stack_rows(matrices)
            features_key = (fingerprint(stacked), tuple(row_counts(matrices)), float(self.corruption), int(self.n_layers))
            Z = kept_msda_features(stacked, self.corruption, self.n_layers, features_key, self.cache)
            features = split_rows(Z, row_counts(matrices))
        else:
            features, features_key = matrices, fingerprint(*matrices)
        # The features are named by what they are computed from (features_key), not hashed
        # again: 1.4 s of a 20NG trial hashed its 5,344 x 12,000 mSDA features five times.
        self.mmd_after_ = mean_embedding_mmd(features)
        key = (features_key, tuple(neighbours), self.consistent, self.learned_weights)
        alpha, similarities = cached(self.cache, "mtcfir_similarities", key,
                                     lambda: self._similarity_step(features, features_key, neighbours))
        self.task_weights_ = alpha / np.diag(alpha)[:, None]  # alpha_t^t = 1, as Tables 8-11
        # The k-means seeding's exact coordinates of each task's features (an eigendecomposition
        # when d > n: 1.1 s of a 20NG fit), once per features, not once per seed (and, as a file,
        # once per machine); None where they are the features themselves
        seeding = kept_kmeans_coordinates(features, features_key, self.cache, "mtcfir_seeding")
        fits = []
        for t, M in enumerate(similarities):  # step 3
            start = features[t] if seeding[t] is None else seeding[t]  # the same k-means labels (kmeans_coordinates)
            Y0 = initial_indicator(start, n_clusters[t], rng, cache=self.cache)  # labels shared by the grid
            start_labels = Y0.argmax(axis=1)  # before snmf, which may update Y0 in place
            _, fit = snmf(M, Y0, update=self.update, stopping=self.stopping, tol=self.tol, max_iter=self.max_iter)
            fits.append(fit._replace(start_labels=start_labels))
        self.labels_ = [fit.labels for fit in fits]
        self.start_labels_ = [fit.start_labels for fit in fits]
        self.objective_trace_ = summed_traces([np.asarray(fit.trace) for fit in fits])
        self.n_iter_ = max(fit.n_iter for fit in fits)
        self.converged_ = all(fit.converged for fit in fits)
        self.n_neighbours_ = neighbours
        self.record_.scalars.update(mmd_before=self.mmd_before_, mmd_after=self.mmd_after_)
        self.record_.matrices["task_weights"] = LabelledMatrix.single(
            self.task_weights_, "task", "task", "task weights alpha (row t: weights of every task s for task t)")

    def _similarity_step(self, features, features_key, neighbours) -> tuple[np.ndarray, list[np.ndarray]]:
        """Step 2: task weights alpha and one similarity matrix per task (no randomness, so
        kept in the cache: the seeds of a grid point share it)."""
        T = len(features)
        # the relations serve the learned weights (Eq. 20) and, for features wider than all tasks'
        # samples, the distances; MTCFIR-nR on Handdigits needs neither (3.3 s of its 9 s step).
        # They depend on the features alone, so the grid's neighbour ratios share them (9.2 s of
        # a 20NG point's 10.6 s step); one set kept (the grid's points run corruption by corruption),
        # and wide features' as a file that the other workers and MTCFIR-nR read
        needed = self.learned_weights or (self.consistent and distances_use_relations(features))
        relations = kept_relations(features, features_key, self.cache) if needed else None
        alpha = task_weights(relations, neighbours) if self.learned_weights else np.ones((T, T))
        if self.consistent:  # Algorithm 3, lines 6-10; Sec. 3.5. At most 2 l non-zeros per row: built
            # sparse from the l x n weights and kept sparse when that is under a quarter of the
            # entries, so that every SNMF product is O(nnz k) (Handdigits: l = 50 of n_t = 5000 at
            # lambda = 0.1); the numbers of the dense M, bit for bit.
            return alpha, [consistent_similarity(A, l)
                           for A, l in zip(distance_matrices(features, relations, alpha), neighbours)]
        return alpha, [cosine_operator(Z) for Z in features]  # product form where cheaper, same products


class MTCFIRnF(MTCFIR):
    """MTCFIR-nF: MTCFIR without the common-feature step (features Z = X).

    Parameters
    ----------
    n_clusters, neighbour_ratio, update, stopping, tol, max_iter, cache, random_state
        As MTCFIR (no mSDA, so no corruption or n_layers).

    Attributes
    ----------
    labels_, task_weights_, n_neighbours_, objective_trace_, n_iter_, converged_, record_
        As MTCFIR.
    mmd_before_, mmd_after_ : float
        Equal: the features are not changed.
    """

    def __init__(self, n_clusters=2, neighbour_ratio=0.3, update="sqrt", stopping="relative", tol=1e-5,
                 max_iter=500, cache=None, random_state=None):
        super().__init__(n_clusters=n_clusters, neighbour_ratio=neighbour_ratio, common_features=False,
                         update=update, stopping=stopping, tol=tol, max_iter=max_iter, cache=cache,
                         random_state=random_state)


class MTCFIRnI(MTCFIR):
    """MTCFIR-nI: no consistent-similarity step (SNMF on the new features' own cosine
    similarity).

    Parameters
    ----------
    n_clusters, corruption, n_layers, update, stopping, tol, max_iter, cache, random_state
        As MTCFIR (no neighbours, so no neighbour_ratio).

    Attributes
    ----------
    labels_, mmd_before_, mmd_after_, n_neighbours_, objective_trace_, n_iter_, converged_, record_
        As MTCFIR.
    task_weights_ : ndarray of shape (T, T)
        All ones (no instance transfer).
    """

    def __init__(self, n_clusters=2, corruption=0.5, n_layers=3, update="sqrt", stopping="relative", tol=1e-5,
                 max_iter=500, cache=None, random_state=None):
        super().__init__(n_clusters=n_clusters, corruption=corruption, n_layers=n_layers, consistent=False,
                         learned_weights=False, update=update, stopping=stopping, tol=tol, max_iter=max_iter,
                         cache=cache, random_state=random_state)


class MTCFIRnR(MTCFIR):
    """MTCFIR-nR: MTCFIR with every task weight alpha = 1.

    Parameters
    ----------
    n_clusters, neighbour_ratio, corruption, n_layers, update, stopping, tol, max_iter, cache, random_state
        As MTCFIR.

    Attributes
    ----------
    labels_, mmd_before_, mmd_after_, n_neighbours_, objective_trace_, n_iter_, converged_, record_
        As MTCFIR.
    task_weights_ : ndarray of shape (T, T)
        All ones.
    """

    def __init__(self, n_clusters=2, neighbour_ratio=0.3, corruption=0.5, n_layers=3, update="sqrt",
                 stopping="relative", tol=1e-5, max_iter=500, cache=None, random_state=None):
        super().__init__(n_clusters=n_clusters, neighbour_ratio=neighbour_ratio, corruption=corruption,
                         n_layers=n_layers, learned_weights=False, update=update, stopping=stopping, tol=tol,
                         max_iter=max_iter, cache=cache, random_state=random_state)
