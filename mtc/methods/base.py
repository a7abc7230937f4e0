"""Solver base classes following scikit-learn's estimator conventions.

A solver takes its hyper-parameters in ``__init__`` and is fitted on a list of task
matrices: ``fit(tasks) -> self``. Fitted attributes: ``labels_`` (one array per task),
``objective_trace_`` (one value per iteration), ``n_iter_``, ``converged_``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClusterMixin

from mtc.methods.validation import check_n_clusters, check_tasks


class MultiTaskClusterer(ClusterMixin, BaseEstimator):
    """Base of every solver. Subclasses implement ``_fit(matrices, n_clusters, rng)``."""

    requires_nonnegative = False

    def fit(self, tasks, y=None):
        matrices = check_tasks(tasks, nonnegative=self.requires_nonnegative)
        n_clusters = check_n_clusters(self.n_clusters, matrices)
        self._fit(matrices, n_clusters, np.random.default_rng(self.random_state))
        return self

    def fit_predict(self, tasks, y=None):
        return self.fit(tasks).labels_

    def cluster_relatedness(self) -> dict[tuple[int, int], np.ndarray]:
        """Learned cluster relatedness between task pairs, {(t, s): h_t x h_s} (none here)."""
        return {}

    def task_relatedness(self) -> np.ndarray | None:
        """Learned T x T task relatedness (MTCFIR's task weights), or None."""
        return None

    def summary_metrics(self) -> dict[str, float]:
        """Scalar diagnostics of the fit logged beside the scores, e.g. {"mmd/after": ...}."""
        return {}

    def diagnostics(self) -> dict[str, np.ndarray]:
        """Per-iteration diagnostics besides the objective, {name: trace} (none here)."""
        return {}


class SingleFit(NamedTuple):
    """What a single-task fit returns."""

    labels: np.ndarray
    trace: np.ndarray
    n_iter: int
    converged: bool


class PerTaskClusterer(MultiTaskClusterer):
    """A single-task method applied to every task independently.

    Subclasses implement ``_fit_one(X, k, rng) -> SingleFit``; the combined
    ``objective_trace_`` is the sum over tasks, each task's trace held at its final value
    after it stopped; ``task_objective_traces_`` keeps them apart.
    """

    def _fit(self, matrices, n_clusters, rng):
        fits = [self._fit_one(X, k, rng) for X, k in zip(matrices, n_clusters)]
        self._store(fits)

    def _store(self, fits: list[SingleFit]):
        self.labels_ = [fit.labels for fit in fits]
        self.task_objective_traces_ = [np.asarray(fit.trace, float) for fit in fits]
        self.objective_trace_ = summed_traces(self.task_objective_traces_)
        self.n_iter_ = max(fit.n_iter for fit in fits)
        self.converged_ = all(fit.converged for fit in fits)


class PooledClusterer(PerTaskClusterer):
    """The "all-task" variant (A-kmeans, A-NMF, A-Ncut): cluster the union of all tasks
    into max_t k_t clusters, then score each task on its own rows."""

    def _fit(self, matrices, n_clusters, rng):
        pooled = sp.vstack(matrices, format="csr") if any(map(sp.issparse, matrices)) else np.vstack(matrices)
        fit = self._fit_one(pooled, max(n_clusters), rng)
        self._store([fit])
        bounds = np.cumsum([X.shape[0] for X in matrices])[:-1]
        self.labels_ = np.split(fit.labels, bounds)


def summed_traces(traces: list[np.ndarray]) -> np.ndarray:
    """Sum traces of unequal length, padding each with its last value."""
    length = max(len(trace) for trace in traces)
    padded = [np.pad(trace, (0, length - len(trace)), mode="edge") for trace in traces]
    return np.sum(padded, axis=0)


def seed_from(rng: np.random.Generator) -> int:
    """An integer seed for libraries that take one (scikit-learn), drawn from rng."""
    return int(rng.integers(2**31 - 1))
