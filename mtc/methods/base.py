"""Solver base classes following scikit-learn's estimator conventions.

A solver takes its hyper-parameters in ``__init__`` and declares what each may be in
``_parameter_constraints`` (scikit-learn's constraint language: ``Interval``,
``StrOptions``, ``"boolean"``, types; subclasses and ablations inherit them). ``fit(tasks)``
checks the parameters and the data, then calls ``_fit(matrices, n_clusters, rng)``, which
sets the fitted attributes and fills ``record_`` (mtc.record.FitRecord). The sweep driver
checks every grid point against the same constraints before anything runs.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils._param_validation import Interval, StrOptions

from mtc.errors import InputError
from mtc.methods.memory import Shapes, check_fit_memory
from mtc.methods.validation import (check_n_clusters, check_objective_finite, check_solver_takes, check_tasks,
                                   degenerate_tasks, unmoved_tasks, warn_degenerate)
from mtc.numerics.affinity import AFFINITIES
from mtc.numerics.convergence import STOPPING_RULES, SingleFit, summed_traces
from mtc.numerics.snmf import UPDATE_RULES
from mtc.numerics.stacking import row_counts, split_rows, stack_rows
from mtc.record import FitRecord

# Constraints that several solvers share.
POSITIVE = Interval(Real, 0, None, closed="neither")
NON_NEGATIVE = Interval(Real, 0, None, closed="left")
AT_LEAST_ONE = Interval(Integral, 1, None, closed="left")
MAX_SEED = 2**32 - 1
STOPPING = StrOptions(set(STOPPING_RULES))
AFFINITY = StrOptions(set(AFFINITIES))
SNMF_UPDATE = StrOptions(set(UPDATE_RULES))


class MultiTaskClusterer(ClusterMixin, BaseEstimator):
    """Base of every solver. Subclasses implement ``_fit(matrices, n_clusters, rng)``.

    Set by the platform, never by a method config: ``n_clusters`` (from the dataset) and
    ``random_state`` (the trial's seed).

    Every fit sets ``degenerate_`` (one bool per task: fewer distinct clusters in its labels
    than asked, e.g. every sample in one cluster), records it as the per-task scalar
    ``degenerate`` and warns (``DegenerateFitWarning``) when any task is.
    """

    _parameter_constraints: dict = {
        "n_clusters": [Interval(Integral, 2, None, closed="left"), "array-like"],
        # scikit-learn's and numpy's legacy seeding (silhouette sampling, k-means starts) take 0 .. 2**32 - 1
        "random_state": [None, Interval(Integral, 0, MAX_SEED, closed="both"), np.random.Generator],
    }
    # What input the solver's derivation needs, from INPUT_NEEDS (e.g. "non_negative"): fit refuses
    # data without it, and a sweep refuses it before Ray starts, naming the scale that gives it.
    input_needs: frozenset[str] = frozenset()
    # Why the solver needs the same number of clusters in every task ("" if it does not): said in
    # the InputError that fit raises, and that a sweep raises on its data before it runs.
    equal_clusters_reason = ""
    # Whether the solver relates the tasks (shared centroids or features, cross-task terms, one pooled
    # problem): tasks on scales too far apart are then refused (check_task_scales).
    relates_tasks = True

    def cannot_fit(self, shapes: Shapes) -> str | None:
        """Why these parameters cannot fit data of ``shapes`` (mtc.methods.memory.Shapes: samples
        and clusters per task, features), known before a fit runs, or None when they can (the
        default). fit refuses such data with this reason; a sweep leaves such grid points out
        before Ray starts and says which and why (mtc.sweep.driver.runnable)."""
        return None

    def fit(self, tasks, y=None):
        """Fit on a list of task matrices (rows = samples, one shared feature space)."""
        self._validate_params()
        matrices = check_tasks(tasks)
        check_solver_takes(type(self), matrices)
        n_clusters = check_n_clusters(self.n_clusters, matrices, type(self).__name__, self.equal_clusters_reason)
        shapes = Shapes.of(matrices, n_clusters)
        problem = self.cannot_fit(shapes)
        if problem:
            raise InputError(problem)
        check_fit_memory(self, shapes)  # refused in one line before it allocates
        self.record_ = FitRecord()
        self.__dict__.pop("start_labels_", None)  # set by a fit that starts from labels
        self._fit(matrices, n_clusters, np.random.default_rng(self.random_state))
        check_objective_finite(type(self).__name__, self.objective_trace_, matrices)
        self.degenerate_ = self._degenerate_tasks(n_clusters)
        self.record_.scalars["degenerate"] = self.degenerate_.astype(float)  # metrics degenerate/<task>
        starts = getattr(self, "start_labels_", None)
        if starts is not None and len(starts) == len(self.labels_):  # metrics unmoved/<task>
            self.record_.scalars["unmoved"] = unmoved_tasks(self.labels_, starts).astype(float)
        warn_degenerate(type(self).__name__, self.degenerate_, self.labels_, n_clusters)
        return self

    def fit_predict(self, tasks, y=None):
        return self.fit(tasks).labels_

    def _degenerate_tasks(self, n_clusters: list[int]) -> np.ndarray:
        """Per task, whether its labels use fewer distinct clusters than it was asked for."""
        return degenerate_tasks(self.labels_, n_clusters)


class PerTaskClusterer(MultiTaskClusterer):
    """A single-task method applied to every task independently.

    Subclasses implement ``_fit_one(X, k, rng) -> SingleFit``; the combined
    ``objective_trace_`` is the sum over tasks, each task's trace held at its final value
    after it stopped; ``task_objective_traces_`` keeps them apart.
    """

    relates_tasks = False

    def _fit(self, matrices, n_clusters, rng):
        self._store([self._fit_one(X, k, rng) for X, k in zip(matrices, n_clusters)])

    def _store(self, fits: list[SingleFit]):
        self.labels_ = [fit.labels for fit in fits]
        if all(fit.start_labels is not None for fit in fits):
            self.start_labels_ = [fit.start_labels for fit in fits]
        self.task_objective_traces_ = [np.asarray(fit.trace, float) for fit in fits]
        self.objective_trace_ = summed_traces(self.task_objective_traces_)
        self.n_iter_ = max(fit.n_iter for fit in fits)
        self.converged_ = all(fit.converged for fit in fits)


POOLED_ATTRIBUTES = """
    Attributes
    ----------
    labels_ : list of ndarray of shape (n_t,)
        The pooled clustering's labels, split back by task.
    objective_trace_ : ndarray
        The pooled problem's trace.
    task_objective_traces_ : list of one ndarray
        The same trace (one pooled problem).
    n_iter_ : int
        Iterations of the pooled problem.
    converged_ : bool
        Whether the pooled problem converged.
    record_ : FitRecord
        Empty.
    """  # the Attributes section of every pooled solver's docstring


class PooledClusterer(PerTaskClusterer):
    """The "all-task" variant (A-kmeans, A-NMF, A-Ncut): cluster the union of all tasks
    into max_t k_t clusters, then score each task on its own rows."""

    relates_tasks = True  # one problem over every task's rows

    def _fit(self, matrices, n_clusters, rng):
        fit = self._fit_one(stack_rows(matrices), max(n_clusters), rng)
        self._store([fit])
        self.labels_ = split_rows(fit.labels, row_counts(matrices))
        if fit.start_labels is not None:
            self.start_labels_ = split_rows(fit.start_labels, row_counts(matrices))

    def _degenerate_tasks(self, n_clusters: list[int]) -> np.ndarray:
        """The pooled problem is asked for max_t k_t clusters of the union, not k_t per task: a
        task that meets fewer of them is the pooling's answer (tasks with private classes share
        the pooled clusters), not a collapse. Degenerate: a task in one cluster, or every task
        when the pooled clustering left a cluster empty."""
        pooled_empty = np.unique(np.concatenate(self.labels_)).size < max(n_clusters)
        return np.array([pooled_empty or np.unique(labels).size < 2 for labels in self.labels_])
