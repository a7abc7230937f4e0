"""One trial: fit a solver on a dataset with one (parameters, seed) and score every task."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from mtc.methods import build_solver
from mtc.metrics import METRIC_NAMES, clusters_in_class_order, score_task
from mtc.tasks import MultiTaskDataset


@dataclass
class TrialOutcome:
    metrics: dict[str, float]  # "<metric>/<task>", "<metric>/mean", "objective/final", ...
    objective_trace: np.ndarray
    labels: list[np.ndarray]
    relatedness: dict[tuple[int, int], np.ndarray]  # G^(t,s), rows/columns in matched-class order
    cluster_names: list[list[str]]  # per task: the class each row/column of its blocks matched
    task_relatedness: np.ndarray | None  # learned task weights (MTCFIR's alpha), T x T
    ideal_task_relatedness: np.ndarray | None  # from the labels (MTCFIR Tables 6-7), beside a learned one
    diagnostics: dict[str, np.ndarray]
    converged: bool


def task_metrics(dataset: MultiTaskDataset, labels: list[np.ndarray]) -> dict[str, float]:
    """Per-task scores keyed "<metric>/<task>" plus their means over tasks "<metric>/mean"."""
    per_task = [score_task(task.y, pred) for task, pred in zip(dataset.tasks, labels)]
    metrics = {}
    for name in METRIC_NAMES:
        for task, scores in zip(dataset.tasks, per_task):
            metrics[f"{name}/{task.name}"] = scores[name]
        metrics[f"{name}/mean"] = float(np.mean([scores[name] for scores in per_task]))
    return metrics


def relatedness_by_class(dataset: MultiTaskDataset, labels: list[np.ndarray], matrices: dict
                         ) -> tuple[dict[tuple[int, int], np.ndarray], list[list[str]]]:
    """Map every G^(t,s)'s clusters to the classes they match (Hungarian, as the accuracy;
    MTCMRL Sec. 4.6): rows and columns reordered by class, plus each task's cluster names
    (the matched class, or "cluster<c>" for a cluster matched to none)."""
    if not matrices:
        return {}, []
    orders, names = [], []
    for task, pred, k in zip(dataset.tasks, labels, dataset.n_clusters):
        order, classes = clusters_in_class_order(task.y, pred, k)
        orders.append(order)
        names.append([task.class_names[c] if c >= 0 else f"cluster{i}" for i, c in zip(order, classes)])
    return {(t, s): G[np.ix_(orders[t], orders[s])] for (t, s), G in matrices.items()}, names


def run_trial(dataset: MultiTaskDataset, method: str, params: dict, seed: int) -> TrialOutcome:
    solver = build_solver(method, params, n_clusters=dataset.n_clusters, random_state=seed)
    start = time.perf_counter()
    solver.fit(dataset.matrices)
    fit_seconds = time.perf_counter() - start
    trace = np.asarray(solver.objective_trace_, dtype=float)
    metrics = task_metrics(dataset, solver.labels_)
    metrics.update({
        "objective/final": float(trace[-1]),
        "n_iter": float(solver.n_iter_),
        "converged": float(solver.converged_),
        "fit_seconds": fit_seconds,
        **solver.summary_metrics(),
    })
    labels = [np.asarray(l) for l in solver.labels_]
    relatedness, cluster_names = relatedness_by_class(dataset, labels, solver.cluster_relatedness())
    learned = solver.task_relatedness()
    ideal = dataset.ideal_task_relatedness() if learned is not None else None
    return TrialOutcome(metrics, trace, labels, relatedness, cluster_names, learned, ideal,
                        solver.diagnostics(), bool(solver.converged_))
