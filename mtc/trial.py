"""One trial: fit a solver on a dataset with one (grid point, seed), score every task, and
turn its fit record into named, renderable results. Generic over methods: nothing here
names a method or a matrix. Data without labels gets the label-free scores only (no
accuracy, NMI, ARI or purity), clusters named by index and no reference matrix."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np
from sklearn.base import clone

from mtc.config import Trial, reserved_params
from mtc.fitted import SHARED_FIT_STEP, Fitted
from mtc.methods.base import MultiTaskClusterer
from mtc.methods.validation import DegenerateFitWarning
from mtc.metrics import (BALANCE, METRIC_NAMES, UNMOVED, cluster_balance, clusters_in_class_order, cosine_silhouette,
                         score_task)
from mtc.numerics.cache import Cache, blas_threads, library_versions
from mtc.numerics.heap import keep_freed_memory
from mtc.record import LabelledMatrix
from mtc.tasks import MultiTaskDataset


@dataclass(frozen=True)
class NamedMatrix:
    """A LabelledMatrix with every axis entry named for people: blocks in display order,
    names and a group label (a task name, or "") per block row and block column."""

    blocks: dict[tuple[int, int], np.ndarray]
    row_names: dict[int, list[str]]
    col_names: dict[int, list[str]]
    row_groups: dict[int, str]
    col_groups: dict[int, str]
    title: str


@dataclass(frozen=True)
class TrialOutcome:
    """What one fit produced, ready for tracking."""

    metrics: dict[str, float]  # "<metric>/<task>", "<metric>/mean", "objective/final", fit scalars
    objective_trace: np.ndarray
    traces: dict[str, np.ndarray]  # per-iteration diagnostics, per-task ones as "<name>/<task>"
    labels: list[np.ndarray]
    matrices: dict[str, NamedMatrix]
    converged: bool
    n_samples: dict[str, int]  # samples per task: facts about the input, logged as params, not scores
    cluster_names: list[list[str]]  # per task, the name of each cluster id (AxisNamer.names_by_id)


def task_metrics(dataset: MultiTaskDataset, labels: list[np.ndarray]) -> dict[str, float]:
    """Per-task scores keyed "<metric>/<task>" plus their means over tasks "<metric>/mean"."""
    per_task = [score_task(task.y, pred) for task, pred in zip(dataset.tasks, labels)]
    metrics = {}
    for name in METRIC_NAMES:
        for task, scores in zip(dataset.tasks, per_task):
            metrics[f"{name}/{task.name}"] = scores[name]
        metrics[f"{name}/mean"] = float(np.mean([scores[name] for scores in per_task]))
    return metrics


SILHOUETTE_SAMPLES = 2000  # silhouette on at most this many samples per task (O(n^2) distances)


def label_free_metrics(dataset: MultiTaskDataset, labels: list[np.ndarray], trace: np.ndarray,
                       seed: int) -> dict[str, float]:
    """Scores that use no class labels, to choose a grid point without them:
    ``silhouette/<task>`` (cosine silhouette of the predicted clusters on the task's input
    matrix, at most SILHOUETTE_SAMPLES samples drawn with the trial's seed as scikit-learn's
    silhouette_score draws them: mtc.metrics.cosine_silhouette; NaN when a task has a single
    cluster) with its mean over tasks; ``balance/<task>`` (its smallest cluster as a share of
    an even split: mtc.metrics.cluster_balance) with its mean; and ``objective/relative``, the
    final objective over the first (scale-free, unlike the final objective, which grows with
    weights such as lambda and alpha)."""
    metrics = {}
    for task, X, pred in zip(dataset.tasks, dataset.matrices, labels):
        metrics[f"silhouette/{task.name}"] = cosine_silhouette(X, pred, min(X.shape[0], SILHOUETTE_SAMPLES), seed)
        metrics[f"{BALANCE}/{task.name}"] = cluster_balance(pred, task.n_clusters)
    for name in ("silhouette", BALANCE):
        metrics[f"{name}/mean"] = float(np.mean([metrics[f"{name}/{t}"] for t in dataset.task_names]))
    metrics["objective/relative"] = float(trace[-1] / trace[0]) if trace[0] != 0 else float("nan")
    return metrics


def scalar_metrics(name: str, value, task_names: list[str]) -> dict[str, float]:
    """A record scalar as metrics: one number as it is, a length-T array as "<name>/<task>"."""
    value = np.asarray(value, float)
    if value.ndim == 0:
        return {name: float(value)}
    if value.shape != (len(task_names),):
        raise ValueError(f"record scalar {name!r} has shape {value.shape}; expected () or ({len(task_names)},)")
    return {f"{name}/{task}": float(v) for task, v in zip(task_names, value)}


def trace_metrics(name: str, values, task_names: list[str]) -> dict[str, np.ndarray]:
    """A record trace as step metrics: 1-D as it is, iterations x T as "<name>/<task>"."""
    values = np.asarray(values, float)
    if values.ndim == 1:
        return {name: values}
    if values.ndim != 2 or values.shape[1] != len(task_names):
        raise ValueError(f"record trace {name!r} has shape {values.shape}; expected (n,) or (n, {len(task_names)})")
    return {f"{name}/{task}": values[:, t] for t, task in enumerate(task_names)}


class AxisNamer:
    """Names the entries of record axes from the dataset and the predicted labels: clusters
    are mapped to the classes they match (Hungarian, as the accuracy; MTCMRL Sec. 4.6) and
    ordered by class; samples are named "<index>:<class>". Without labels clusters keep their
    order and names (``cluster0``, ...) and samples are named by their index."""

    def __init__(self, dataset: MultiTaskDataset, labels: list[np.ndarray]):
        self.dataset = dataset
        self.orders, self.cluster_names = [], []
        for task, pred, k in zip(dataset.tasks, labels, dataset.n_clusters):
            k = max(k, int(pred.max()) + 1)  # a pooled solver gives every task max_t k_t clusters
            if not task.labelled:
                self.orders.append(np.arange(k))
                self.cluster_names.append([*task.class_names, *(f"cluster{i}" for i in range(len(task.class_names), k))])
                continue
            order, classes = clusters_in_class_order(task.y, pred, k)
            self.orders.append(order)
            self.cluster_names.append([task.class_names[c] if c >= 0 else f"cluster{i}" for i, c in zip(order, classes)])

    def names_by_id(self, index: int) -> list[str]:
        """Task ``index``'s cluster names indexed by cluster id (the predicted labels), the
        names its matrix axes use."""
        names = [""] * len(self.orders[index])
        for cluster, name in zip(self.orders[index], self.cluster_names[index]):
            names[cluster] = name
        return names

    def order(self, axis, index: int, size: int) -> np.ndarray:
        return self.orders[index] if axis == "cluster" else np.arange(size)

    def names(self, axis, index: int) -> list[str]:
        if isinstance(axis, tuple):
            return list(axis)
        if axis == "task":
            return self.dataset.task_names
        if axis == "cluster":
            return self.cluster_names[index]
        task = self.dataset.tasks[index]
        if not task.labelled:
            return [str(i) for i in range(task.n_samples)]
        return [f"{i}:{task.class_names[c]}" for i, c in enumerate(task.y)]

    def group(self, axis, index: int) -> str:
        return self.dataset.task_names[index] if axis in ("cluster", "sample") else ""

    def name(self, matrix: LabelledMatrix) -> NamedMatrix:
        blocks, row_names, col_names, row_groups, col_groups = {}, {}, {}, {}, {}
        for (i, j), block in sorted(matrix.blocks.items()):
            blocks[(i, j)] = block[np.ix_(self.order(matrix.rows, i, block.shape[0]),
                                          self.order(matrix.cols, j, block.shape[1]))]
            row_names[i], col_names[j] = self.names(matrix.rows, i), self.names(matrix.cols, j)
            row_groups[i], col_groups[j] = self.group(matrix.rows, i), self.group(matrix.cols, j)
        return NamedMatrix(blocks, row_names, col_names, row_groups, col_groups, matrix.title)


def with_reference_matrices(matrices: dict[str, LabelledMatrix], dataset: MultiTaskDataset) -> dict:
    """A learned task x task matrix is shown beside the relatedness the labels imply (with labels)."""
    if dataset.labelled and any(m.rows == m.cols == "task" for m in matrices.values()):
        return {**matrices, "ideal_task_weights": LabelledMatrix.single(
            dataset.ideal_task_relatedness(), "task", "task",
            "ideal task relatedness from the labels (share of samples in shared categories)")}
    return matrices


def trial_solver(prototype: MultiTaskClusterer, trial: Trial, cache: Cache | None,
                 points: tuple[dict, ...] = ()) -> MultiTaskClusterer:
    """A fresh copy of the validated prototype with the trial's grid values and seed. With a
    cache, a solver that can decide the fits of other grid points (``grid_siblings``: its
    parameter -> the grid parameter whose other values it takes, mtc.methods.mkc.SMKC) gets the
    values of that parameter in the sweep's ``points`` that differ from the trial's in it alone."""
    solver = clone(prototype).set_params(**trial.point, random_state=trial.seed)
    if cache is not None and "cache" in solver.get_params():
        solver.set_params(cache=cache)
        for parameter, varied in getattr(solver, "grid_siblings", {}).items():
            solver.set_params(**{parameter: sibling_values(points, trial.point, varied)})
    return solver


def sibling_values(points: tuple[dict, ...], point: dict, name: str) -> tuple:
    """The other values of grid parameter ``name`` among ``points`` that equal ``point`` in every
    other parameter, in the order they first appear."""
    if name not in point:
        return ()
    values = []
    for other in points:
        if (other.keys() == point.keys() and other[name] != point[name] and other[name] not in values
                and all(other[key] == value for key, value in point.items() if key != name)):
            values.append(other[name])
    return tuple(values)


def computed_fits(prototype: MultiTaskClusterer, trials) -> int:
    """How many of a sweep's ``trials`` (grid point and seed each) compute a fit when run with the
    sweep's points (trial_solver): one per group differing in the grid parameters a solver's
    ``grid_siblings`` take alone (S-MKC: one path per seed for all its lambda_ values), each of
    the others reads the fit that group's first left; every trial for any other solver."""
    varied = set(getattr(prototype, "grid_siblings", {}).values())
    return len({(tuple((key, repr(value)) for key, value in sorted(trial.point.items()) if key not in varied), trial.seed)
                for trial in trials})


def run_trial(dataset: MultiTaskDataset, prototype: MultiTaskClusterer, trial: Trial, cache: Cache | None,
              points: tuple[dict, ...] = (), shared_fit: str | None = None) -> TrialOutcome:
    """Fit one (grid point, seed) and score it; solvers with a ``cache`` parameter keep their
    seed-independent steps in ``cache`` (None: computed afresh, the same result to the bit),
    and may decide the fits of the sweep's other grid ``points`` there (trial_solver). A
    ``shared_fit`` key (mtc.sweep.shared_fits: another sweep of the study has the same fit)
    keeps the fitted state in the cache's folder, or reads it from there (mtc.fitted).
    Freed memory is kept for the next arrays from here on (mtc.numerics.heap)."""
    keep_freed_memory()
    solver = trial_solver(prototype, trial, cache, points)
    steps_before = {} if cache is None else dict(cache.compute_seconds)
    start = time.perf_counter()
    fitted, read = fit_or_read(solver, dataset, cache, shared_fit)
    fit_seconds = time.perf_counter() - start
    trace, labels, record, names = fitted.objective_trace, fitted.labels, fitted.record, dataset.task_names
    metrics = task_metrics(dataset, labels) if dataset.labelled else {}
    metrics.update(label_free_metrics(dataset, labels, trace, trial.seed))
    metrics.update({"objective/final": float(trace[-1]), "n_iter": float(fitted.n_iter),
                    "degenerate_tasks": float(np.count_nonzero(fitted.degenerate)),
                    "converged": float(fitted.converged), "fit_seconds": fit_seconds})
    metrics.update(step_seconds(cache, steps_before))
    if read is not None:
        metrics["fit_read"] = float(read)  # 1: another sweep's trial kept this fit (its fit_seconds is the reading)
    for name, value in record.scalars.items():
        metrics.update(scalar_metrics(name, value, names))
    if "unmoved" in record.scalars:  # 1: every task's labels are its starting point's partition
        metrics[UNMOVED] = float(np.all(record.scalars["unmoved"]))
    traces = {key: values for name, trace in record.traces.items() for key, values in trace_metrics(name, trace, names).items()}
    namer = AxisNamer(dataset, labels)
    matrices = {name: namer.name(matrix) for name, matrix in with_reference_matrices(record.matrices, dataset).items()}
    return TrialOutcome(metrics, trace, traces, labels, matrices, fitted.converged,
                        {task.name: task.n_samples for task in dataset.tasks},
                        [namer.names_by_id(t) for t in range(len(names))])


def fit_or_read(solver: MultiTaskClusterer, dataset: MultiTaskDataset, cache: Cache | None,
                shared_fit: str | None) -> tuple[Fitted, bool | None]:
    """The solver fitted on the dataset, and whether it was read: with a ``shared_fit`` key and a
    cache that keeps files, the fit another sweep's trial kept under that key (with the
    libraries and BLAS threads that computed it; True), fitted and kept here when none is (step
    ``shared_fit``; False); else fitted (None)."""
    fitted_here = []

    def fit() -> Fitted:
        with warnings.catch_warnings():  # recorded as degenerate/<task> and degenerate_tasks instead
            warnings.simplefilter("ignore", DegenerateFitWarning)
            solver.fit(dataset.matrices)
        fitted_here.append(True)
        return Fitted.of(solver)

    if shared_fit is None or cache is None or cache.folder is None:
        return fit(), None
    key = (shared_fit, library_versions(), blas_threads())
    arrays = cache.get(SHARED_FIT_STEP, key, lambda: fit().arrays(), keep=1, persist=True)
    return Fitted.from_arrays(arrays), not fitted_here


def step_seconds(cache: Cache | None, before: dict[str, float]) -> dict[str, float]:
    """``step_seconds/<step>``: the seconds this fit spent computing each cached step (k-means
    starts, affinities, eigendecompositions: mtc.numerics.cache), for the steps it computed
    rather than read; the rest of ``fit_seconds`` is the solver's own work. Nothing without a
    cache (a single fit: nothing is shared)."""
    if cache is None:
        return {}
    return {f"step_seconds/{step}": seconds - before.get(step, 0.0) for step, seconds in cache.compute_seconds.items()
            if seconds > before.get(step, 0.0)}


def trial_params(method: str, prototype: MultiTaskClusterer, trial: Trial, data_config: dict) -> dict:
    """What a trial records as its config: the solver's parameters under their own names
    (filter on ``params.alpha``), the seed, the method and the data config (``data``)."""
    reserved = reserved_params(prototype)
    params = {key: value for key, value in prototype.get_params().items() if key not in reserved}
    return {**params, **trial.point, "method": method, "seed": trial.seed, "data": data_config}
