"""Symmetric NMF (Kuang, Ding & Park 2012) per task and pooled: min_{Y >= 0} ||M - Y Y^T||^2
on each task's affinity M, from the papers' initialisation (one-hot k-means labels of the
task's data plus 0.2). The update rules are in mtc.numerics.snmf.

Routes to M Y (``route``). The rules only ever multiply by M (MY, ||M||^2, max M), so the
cosine affinity of sparse rows is applied as N (N'Y) with N the unit rows
(mtc.numerics.affinity.CosineProduct), never formed: the same iterates to rounding, O(nnz k)
per product and no n x n array. "auto" takes it for sparse rows from IMPLICIT_MIN_SAMPLES on;
"dense" forms M (the papers' sizes); "knn" is an approximation, not the papers' rule."""

from __future__ import annotations

from sklearn.utils._param_validation import StrOptions

from mtc.errors import InputError
from mtc.methods.base import (AFFINITY, AT_LEAST_ONE, NON_NEGATIVE, POOLED_ATTRIBUTES, POSITIVE, SNMF_UPDATE, STOPPING,
                              MultiTaskClusterer, PerTaskClusterer, PooledClusterer)
from mtc.numerics.affinity import ROUTES, route_affinity, route_problem
from mtc.numerics.convergence import SingleFit
from mtc.numerics.seeding import initial_indicator
from mtc.numerics.snmf import snmf


class SymmetricNMF(PerTaskClusterer):
    """SNMF on each task's affinity matrix (cosine by default, as for documents).

    Parameters
    ----------
    n_clusters : int or list of int, default=2
        Clusters per task.
    affinity : {"cosine", "gaussian"}, default="cosine"
        Affinity M between a task's samples.
    kernel_width : float, default=1.0
        Gaussian width as a multiple of the median pairwise distance (gaussian only).
    update : {"sqrt", "plain", "damped", "quarter", "hals"}, default="sqrt"
        Multiplicative rule (mtc.numerics.snmf): sqrt is MTCFIR Eq. 25, plain MTCMRL Eq. 19
        with lambda = 0, quarter the monotone rule; hals is no paper's rule: Kuang et al.'s
        penalised SymNMF by alternating column updates, which converges in fewer iterations.
    stopping : {"relative", "decrease"}, default="relative"
        Stopping rule (mtc.numerics.convergence).
    tol : float, default=1e-5
        Tolerance of the stopping rule (1e-5: the value the MTCMRL and MTCFIR sweeps use).
    max_iter : int, default=500
        Iterations at most.
    route : {"auto", "dense", "implicit", "knn"}, default="auto"
        How M is applied. dense: the n x n matrix; implicit: the cosine affinity as the exact
        product N (N'Y), never formed (cosine only); auto: implicit for sparse rows, at least
        5000 of them, else dense (same fit to rounding, tested); knn: **not the paper's**, an
        approximation: M kept only on each row's ``n_neighbors`` nearest neighbours
        (symmetrised, sparse; mtc.numerics.affinity.knn_affinity), off by default.
    n_neighbors : int, default=10
        Neighbours per row of the knn route (ignored by the others).
    random_state : int, Generator or None, default=None
        Seed of the k-means initialisation.

    Attributes
    ----------
    labels_ : list of ndarray of shape (n_t,)
        argmax of every row of Y, per task.
    objective_trace_ : ndarray of shape (n_iter_ + 1,)
        Summed ||M - YY'||^2 over tasks, from the initial Y on.
    task_objective_traces_ : list of ndarray
        The trace per task.
    n_iter_ : int
        Most iterations over tasks.
    converged_ : bool
        Whether every task met the stopping rule before ``max_iter``.
    record_ : FitRecord
        Empty.
    """

    _parameter_constraints = {
        **MultiTaskClusterer._parameter_constraints,
        "affinity": [AFFINITY], "kernel_width": [POSITIVE], "update": [SNMF_UPDATE], "stopping": [STOPPING],
        "tol": [NON_NEGATIVE], "max_iter": [AT_LEAST_ONE], "route": [StrOptions({*ROUTES, "knn"})],
        "n_neighbors": [AT_LEAST_ONE],
    }

    def __init__(self, n_clusters=2, affinity="cosine", kernel_width=1.0, update="sqrt",
                 stopping="relative", tol=1e-5, max_iter=500, route="auto", n_neighbors=10, random_state=None):
        self.n_clusters = n_clusters
        self.affinity = affinity
        self.kernel_width = kernel_width
        self.update = update
        self.stopping = stopping
        self.tol = tol
        self.max_iter = max_iter
        self.route = route
        self.n_neighbors = n_neighbors
        self.random_state = random_state

    def _fit_one(self, X, k, rng) -> SingleFit:
        if problem := route_problem(self.affinity, self.route):
            raise InputError(problem)
        M = route_affinity(X, self.affinity, self.kernel_width, self.route, self.n_neighbors)
        start = initial_indicator(X, k, rng)
        start_labels = start.argmax(axis=1)  # before snmf, which may update its start in place
        _, fit = snmf(M, start, update=self.update, stopping=self.stopping, tol=self.tol, max_iter=self.max_iter)
        return fit._replace(start_labels=start_labels)


class PooledSymmetricNMF(PooledClusterer, SymmetricNMF):
    __doc__ = """A-NMF: SNMF on the affinity of the union of all tasks, scored per task.

    Parameters
    ----------
    n_clusters, affinity, kernel_width, update, stopping, tol, max_iter, route, n_neighbors, random_state
        As SymmetricNMF; the pooled problem has max_t n_clusters[t] clusters.
""" + POOLED_ATTRIBUTES
