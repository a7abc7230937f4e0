"""k-means per task (scikit-learn's Lloyd with k-means++ seeding, or random rows)."""

from __future__ import annotations

from sklearn.cluster import KMeans as SklearnKMeans
from sklearn.utils._param_validation import StrOptions

from mtc.methods.base import (AT_LEAST_ONE, NON_NEGATIVE, POOLED_ATTRIBUTES, MultiTaskClusterer, PerTaskClusterer,
                              PooledClusterer)
from mtc.numerics.convergence import SingleFit
from mtc.numerics.seeding import seed_from


class KMeansClusterer(PerTaskClusterer):
    """k-means on each task; the trace holds the final inertia (scikit-learn keeps no trace).

    Parameters
    ----------
    n_clusters : int or list of int, default=2
        Clusters per task (one count for all tasks, or one per task).
    n_init : int, default=10
        Restarts; the lowest inertia wins.
    init : {"k-means++", "random"}, default="k-means++"
        How each restart picks its first centres: k-means++ seeding, or ``k`` random rows
        (MATLAB's ``kmeans`` before R2014a, ``'Start','sample'``; a reading of the papers'
        baseline, conf/experiment/kmeans_random_start.yaml).
    max_iter : int, default=300
        Lloyd iterations per restart.
    tol : float, default=1e-4
        scikit-learn's relative tolerance on the centre shift.
    random_state : int, Generator or None, default=None
        Seed of every random choice.

    Attributes
    ----------
    labels_ : list of ndarray of shape (n_t,)
        Cluster of every sample, per task.
    objective_trace_ : ndarray of shape (1,)
        Summed final inertia over tasks.
    task_objective_traces_ : list of ndarray of shape (1,)
        Final inertia per task.
    n_iter_ : int
        Most Lloyd iterations over tasks.
    converged_ : bool
        Whether every task stopped before ``max_iter``.
    record_ : FitRecord
        Empty: k-means learns nothing beyond its labels.
    """

    _parameter_constraints = {
        **MultiTaskClusterer._parameter_constraints,
        "n_init": [AT_LEAST_ONE], "init": [StrOptions({"k-means++", "random"})], "max_iter": [AT_LEAST_ONE],
        "tol": [NON_NEGATIVE],
    }

    def __init__(self, n_clusters=2, n_init=10, init="k-means++", max_iter=300, tol=1e-4, random_state=None):
        self.n_clusters = n_clusters
        self.n_init = n_init
        self.init = init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _fit_one(self, X, k, rng) -> SingleFit:
        km = SklearnKMeans(
            n_clusters=k, n_init=self.n_init, init=self.init, max_iter=self.max_iter, tol=self.tol,
            random_state=seed_from(rng),
        ).fit(X)
        return SingleFit(km.labels_, [km.inertia_], km.n_iter_, km.n_iter_ < self.max_iter)


class PooledKMeans(PooledClusterer, KMeansClusterer):
    __doc__ = """A-kmeans: k-means on the union of all tasks into max_t k_t clusters, scored per task.

    Parameters
    ----------
    n_clusters, n_init, init, max_iter, tol, random_state
        As KMeansClusterer; the pooled problem has max_t n_clusters[t] clusters.
""" + POOLED_ATTRIBUTES
