"""k-means per task (scikit-learn's Lloyd with k-means++ seeding)."""

from __future__ import annotations

from sklearn.cluster import KMeans as SklearnKMeans

from mtc.methods.base import PerTaskClusterer, PooledClusterer, SingleFit, seed_from


class KMeansClusterer(PerTaskClusterer):
    """k-means on each task; the trace holds the final inertia (sklearn keeps no trace)."""

    def __init__(self, n_clusters=2, n_init=10, max_iter=300, tol=1e-4, random_state=None):
        self.n_clusters = n_clusters
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _fit_one(self, X, k, rng) -> SingleFit:
        km = SklearnKMeans(
            n_clusters=k, n_init=self.n_init, max_iter=self.max_iter, tol=self.tol,
            random_state=seed_from(rng),
        ).fit(X)
        return SingleFit(km.labels_, [km.inertia_], km.n_iter_, km.n_iter_ < self.max_iter)


class PooledKMeans(PooledClusterer, KMeansClusterer):
    """A-kmeans: k-means on the union of all tasks."""
