"""Aggregate trials into the papers' table: mean +- std over seeds at the best grid point.

Two choices of grid point, labelled as such in every table:
- ``acc``: the highest mean accuracy over tasks (uses labels; the papers' protocol);
- ``objective``: the lowest mean final objective (uses no labels).
The std is the sample standard deviation (ddof=1, as MATLAB's std) over the seeds.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import numpy as np

from mtc.metrics import METRIC_NAMES

SELECTIONS = {
    "acc": "best grid point by mean accuracy over tasks (uses labels: the papers' protocol)",
    "objective": "grid point chosen without labels: lowest mean final objective",
}


@dataclass(frozen=True)
class TrialRecord:
    """One trial as read back from its MLflow child run."""

    point: str
    seed: str
    status: str  # FINISHED, FAILED, ...
    metrics: dict[str, float]
    run_id: str


@dataclass
class PointSummary:
    point: str
    n_runs: int
    n_failed: int
    mean: dict[str, float]
    std: dict[str, float]


def summarize(records: list[TrialRecord]) -> list[PointSummary]:
    """Mean and std of every metric over the finished trials of each grid point."""
    by_point: dict[str, list[TrialRecord]] = {}
    for record in records:
        by_point.setdefault(record.point, []).append(record)
    summaries = []
    for point, group in sorted(by_point.items()):
        ok = [r.metrics for r in group if r.status == "FINISHED"]
        keys = sorted(set().union(*ok)) if ok else []
        values = {k: np.array([m[k] for m in ok if k in m]) for k in keys}
        summaries.append(PointSummary(
            point, len(ok), len(group) - len(ok),
            {k: float(v.mean()) for k, v in values.items()},
            {k: float(v.std(ddof=1)) if v.size > 1 else 0.0 for k, v in values.items()},
        ))
    return summaries


def best_point(summaries: list[PointSummary], selection: str) -> PointSummary:
    scored = [s for s in summaries if s.n_runs > 0]
    if not scored:
        raise ValueError("no finished trial to report on")
    if selection == "acc":
        return max(scored, key=lambda s: s.mean["acc/mean"])
    if selection == "objective":
        return min(scored, key=lambda s: s.mean["objective/final"])
    raise ValueError(f"unknown selection {selection!r}; choose one of {tuple(SELECTIONS)}")


def task_table(summary: PointSummary, task_names: list[str], metrics=METRIC_NAMES) -> str:
    """Markdown: one row per task (and the mean), one 'mean +- std' column per metric."""
    header = "| task | " + " | ".join(metrics) + " |"
    lines = [header, "|" + "---|" * (len(metrics) + 1)]
    for task in [*task_names, "mean"]:
        cells = [f"{summary.mean[f'{m}/{task}']:.4f} ± {summary.std[f'{m}/{task}']:.4f}" for m in metrics]
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def data_note(draw: str, datasets: dict) -> str:
    """The report's line on the data: samples per task (a range over draws) and how drawn."""
    sizes = np.array([[task.n_samples for task in d.tasks] for d in datasets.values()])
    names = datasets[min(datasets)].task_names
    counts = ", ".join(f"{name} {lo}" if lo == hi else f"{name} {lo}-{hi}"
                       for name, lo, hi in zip(names, sizes.min(axis=0), sizes.max(axis=0)))
    if draw == "per_seed":
        return f"samples per task: {counts}; a fresh random draw per seed ({len(datasets)} draws), means over draws"
    return f"samples per task: {counts}; one dataset for every seed"


def report_markdown(title: str, summaries: list[PointSummary], task_names: list[str], data_note: str = "") -> str:
    parts = [f"# {title}", ""] + ([data_note, ""] if data_note else [])
    for selection, label in SELECTIONS.items():
        best = best_point(summaries, selection)
        parts += [f"## {label}", "", f"grid point: `{best.point}` ({best.n_runs} runs)", "",
                  task_table(best, task_names), ""]
    failed = sum(s.n_failed for s in summaries)
    if failed:
        parts += [f"**{failed} trial(s) failed**; their errors are on the MLflow child runs (tag mtc.error).", ""]
    return "\n".join(parts)


def grid_csv(summaries: list[PointSummary]) -> str:
    """Every grid point: runs, failures, and mean/std of every metric."""
    keys = sorted(set().union(*(s.mean for s in summaries)))
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["point", "n_runs", "n_failed"] + [f"{k} {stat}" for k in keys for stat in ("mean", "std")])
    for s in summaries:
        writer.writerow([s.point, s.n_runs, s.n_failed] +
                        [f"{getattr(s, stat).get(k, float('nan')):.6g}" for k in keys for stat in ("mean", "std")])
    return out.getvalue()
