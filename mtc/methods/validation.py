"""Input checks shared by every solver: one clear InputError (a ValueError) per kind of bad input."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from mtc.errors import InputError


MAX_ABS_VALUE = 1e100  # squares and inner products of larger values overflow float64 (1.8e308)
# A task whose largest |x| is below this underflows in the solvers' products of products (X X^T X ~ 1e-150,
# squared reconstructions ~ 1e-100 and their eps guards of 1e-10 to 1e-16 swamp them): every sample looks alike.
MIN_ABS_VALUE = 1e-50
# Tasks whose largest |x| differ by more than this cannot be related in one feature space: the smaller
# task's squared terms (ratio^2 times smaller) fall below float64's precision (2.2e-16) beside the larger
# task's in every shared sum, and it collapses into one cluster. 1e8 = about 1/sqrt(eps).
MAX_TASK_SCALE_RATIO = 1e8
OBJECTIVE_LIMIT = 1e300  # an objective this large is one product away from overflow: its iterates are not to be trusted


def check_tasks(tasks, *, accept_sparse: bool = True, names: Sequence[str] | None = None) -> list:
    """Validate a list of task matrices (rows = samples) that share one feature space; a bad
    task is named by its index, or by ``names`` (a sweep's check before Ray: the task's name and
    file).

    Returns float64 matrices (CSR when sparse and `accept_sparse`, dense otherwise).
    """
    if isinstance(tasks, np.ndarray) or sp.issparse(tasks) or not isinstance(tasks, Sequence):
        raise InputError("tasks must be a list of 2-D matrices, one per task")
    if len(tasks) == 0:
        raise InputError("tasks is empty: need at least one task matrix")
    checked = []
    for t, X in enumerate(tasks):
        task = f"task {t}" if names is None else f"task {names[t]}"
        if np.iscomplexobj(X.data if sp.issparse(X) else np.asarray(X)):
            raise InputError(f"{task}: complex values; the solvers need real matrices (take .real or abs() "
                             "yourself if that is what you mean)")
        if sp.issparse(X):
            X = sp.csr_matrix(X, dtype=np.float64) if accept_sparse else X.toarray()
        else:
            X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise InputError(f"{task}: expected a 2-D matrix, got {X.ndim}-D")
        if X.shape[0] == 0 or X.shape[1] == 0:
            raise InputError(f"{task}: empty matrix of shape {X.shape}")
        values = X.data if sp.issparse(X) else X
        if not np.isfinite(values).all():
            raise InputError(f"{task}: data contains NaN or infinite values")
        if values.size and np.abs(values).max() > MAX_ABS_VALUE:
            raise InputError(f"{task}: values up to {np.abs(values).max():.3g} overflow float64 in the solvers' "
                             f"products (X X^T, W H); rescale the data (|x| <= {MAX_ABS_VALUE:.0e})")
        largest = float(np.abs(values).max()) if values.size else 0.0
        if largest < MIN_ABS_VALUE:
            raise InputError(f"{task}: " + ("every entry is 0: nothing to cluster" if largest == 0 else
                             f"the largest |x| is {largest:.3g}: the solvers' products underflow float64 at that "
                             f"scale and every sample looks alike; rescale the data (e.g. divide each task by its "
                             f"largest entry, or data.params.scale=maxabs for files)"))
        checked.append(X)
    dims = [X.shape[1] for X in checked]
    if len(set(dims)) != 1:
        raise InputError(f"ragged feature dimensions across tasks: {dims}")
    return checked


def check_task_scales(matrices: list) -> None:
    """One InputError when the tasks' largest |x| differ by more than MAX_TASK_SCALE_RATIO: a
    solver that relates tasks (shared centroids, cross-task similarities, one pooled problem)
    then sees the smaller task as zeros, and clusters it into one cluster with converged_=True."""
    largest = [float(np.abs(X.data if sp.issparse(X) else X).max()) for X in matrices]
    big, small = int(np.argmax(largest)), int(np.argmin(largest))
    if largest[big] > MAX_TASK_SCALE_RATIO * largest[small]:
        raise InputError(f"task {big}'s largest |x| is {largest[big]:.3g} and task {small}'s {largest[small]:.3g}, "
                         f"{largest[big] / largest[small]:.2g} times apart (more than {MAX_TASK_SCALE_RATIO:.0e}): "
                         f"in one feature space the smaller task's terms fall below float64's precision beside the "
                         f"larger's and it collapses into one cluster; rescale each task on its own (divide it by "
                         f"its largest entry, or data.params.scale_fit=per_task for files)")


# What a solver's derivation may need of its input (MultiTaskClusterer.input_needs): the test a
# task matrix must pass, what it means, and the data.params.scale that gives it to a table.
INPUT_NEEDS = {
    "non_negative": (lambda values: not (values < 0).any(), "non-negative data", "minmax"),
}


def check_solver_takes(solver: type, matrices: list) -> None:
    """What ``solver`` (its class) needs of the data beyond check_tasks, in fit and in a sweep
    before Ray starts: tasks on close enough scales if it relates them (check_task_scales), and
    its input needs (check_input_needs)."""
    if solver.relates_tasks:
        check_task_scales(matrices)
    check_input_needs(solver, matrices)


def check_input_needs(solver: type, matrices: list) -> None:
    """One InputError naming the first task that lacks an input need of ``solver`` (its class)
    and the scale that would give it; also run by a sweep on its data before Ray starts."""
    for need in sorted(solver.input_needs):
        test, meaning, scale = INPUT_NEEDS[need]
        for t, X in enumerate(matrices):
            if not test(X.data if sp.issparse(X) else np.asarray(X)):
                raise InputError(f"task {t}: {solver.__name__} needs {meaning} (its derivation assumes it), which "
                                 f"this task is not; for your own tables set data.params.scale={scale}")


def check_n_clusters(n_clusters, matrices: list, solver: str = "", equal: str = "") -> list[int]:
    """Expand an int or per-task sequence of cluster counts and check each against n_t; with
    ``equal`` (why ``solver`` needs it) they must be equal in every task (check_equal_clusters)."""
    if isinstance(n_clusters, (int, np.integer)):
        counts = [int(n_clusters)] * len(matrices)
    else:
        entries = list(np.ravel(n_clusters))
        if not all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in entries):
            raise InputError(f"n_clusters must be an integer or a list of integers, one per task; got {n_clusters!r}")
        counts = [int(k) for k in entries]
        if len(counts) != len(matrices):
            raise InputError(
                f"n_clusters has {len(counts)} entries but there are {len(matrices)} tasks"
            )
    for t, (k, X) in enumerate(zip(counts, matrices)):
        if k < 2:
            raise InputError(f"task {t}: n_clusters must be at least 2, got {k}")
        if X.shape[0] < k:
            raise InputError(f"task {t}: {X.shape[0]} samples is fewer than n_clusters={k}")
    check_equal_clusters(counts, solver, equal)
    return counts


def check_equal_clusters(counts: list[int], solver: str, reason: str) -> None:
    """One InputError when a solver that needs the same cluster count in every task (``reason``
    says why; "" for any other solver) is given different ones; also checked by a sweep on its
    data before anything runs."""
    if reason and len(set(counts)) > 1:
        raise InputError(f"{solver} needs the same number of clusters in every task ({reason}), got {counts}")


def check_objective_finite(solver: str, trace, matrices: list) -> None:
    """Refuse a fit whose objective overflowed (NaN, inf, or within a product of it) instead of
    returning its labels silently.

    The input checks bound each entry (MAX_ABS_VALUE), but a method's products of products
    (e.g. MTCMRL's X X^T X, SMT-NMF's squared reconstruction) can still overflow float64 for
    entries far above 1; the fitted labels are then meaningless.
    """
    trace = np.asarray(trace, dtype=np.float64)
    bad = np.flatnonzero(~(np.abs(trace) < OBJECTIVE_LIMIT))  # NaN fails every comparison
    if bad.size:
        largest = max(float(np.abs(X.data if sp.issparse(X) else X).max()) for X in matrices)
        raise InputError(f"{solver}: the objective became {trace[bad[0]]:.3g} at iteration {bad[0]} (largest |x| in the "
                         f"data is {largest:.3g}): this method's products overflow float64 at that scale; "
                         "rescale the data (e.g. divide by its largest entry)")


class DegenerateFitWarning(UserWarning):
    """A fit put a task into fewer clusters than asked (``degenerate_``)."""


def degenerate_tasks(labels: list, n_clusters: list[int]) -> np.ndarray:
    """Per task, whether its labels use fewer distinct clusters than it was asked for: one
    cluster for every sample (constant labels), or some clusters left empty. Such a
    clustering scores like chance and must never be chosen as an answer."""
    return np.array([np.unique(np.asarray(pred)).size < k for pred, k in zip(labels, n_clusters)])


def unmoved_tasks(labels: list, start_labels: list) -> np.ndarray:
    """Per task, whether its labels are the partition its starting point gave (the same
    clusters, whatever their numbering): the fit did not move from its start (k-means + 0.2),
    and its answer is the start's, not the method's."""
    return np.array([same_partition(np.asarray(a), np.asarray(b)) for a, b in zip(labels, start_labels)])


def same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two labelings of the same samples group them alike: each cluster of one is a
    cluster of the other (as many distinct label pairs as distinct labels on each side)."""
    pairs = np.unique(np.stack([a, b]), axis=1).shape[1]
    return pairs == np.unique(a).size == np.unique(b).size


def warn_degenerate(solver: str, degenerate: np.ndarray, labels: list, n_clusters: list[int]) -> None:
    """One DegenerateFitWarning naming the degenerate tasks and their cluster counts."""
    if degenerate.any():
        found = ", ".join(f"task {t}: {np.unique(labels[t]).size} of {n_clusters[t]}"
                          for t in np.flatnonzero(degenerate))
        warnings.warn(f"{solver}: degenerate clustering, fewer clusters than asked ({found}); its scores are "
                      "those of a collapse (check the data's scale)", DegenerateFitWarning, stacklevel=3)
