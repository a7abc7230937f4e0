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
    relatedness: dict[str, tuple[np.ndarray, list[str], list[str]]]  # name -> (matrix, row, column labels)
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


def relatedness_by_class(dataset: MultiTaskDataset, labels: list[np.ndarray], matrices: dict) -> dict:
    """Each G^(t,s) with rows and columns mapped from clusters to the classes they match
    (MTCMRL Sec. 4.6), named "G_<task t>__<task s>"; an unmatched cluster is "cluster<c>"."""

    def ordered(task_index, size):
        task = dataset.tasks[task_index]
        order, classes = clusters_in_class_order(task.y, labels[task_index], size)
        names = [task.class_names[k] if k >= 0 else f"cluster{c}" for c, k in zip(order, classes)]
        return order, names

    named = {}
    for (t, s), G in matrices.items():
        (rows, row_names), (cols, col_names) = ordered(t, G.shape[0]), ordered(s, G.shape[1])
        named[f"G_{dataset.tasks[t].name}__{dataset.tasks[s].name}"] = (G[np.ix_(rows, cols)], row_names, col_names)
    return named


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
    })
    labels = [np.asarray(l) for l in solver.labels_]
    return TrialOutcome(metrics, trace, labels, relatedness_by_class(dataset, labels, solver.cluster_relatedness()),
                        solver.diagnostics(), bool(solver.converged_))
