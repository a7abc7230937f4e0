"""Aggregate trials into the papers' table: mean +- std over seeds at the best grid point.

Choices of grid point, labelled as such in every table:
- ``acc``: the highest mean accuracy over tasks (uses labels; the papers' protocol);
- without labels: the lowest mean final objective (``objective``; it grows with weights
  such as lambda and alpha, so it favours their smallest values), the lowest final over
  first objective (``objective_relative``), the highest mean cosine silhouette of the
  clusters on the input (``silhouette``), the highest agreement (ARI) between the labels of
  different seeds (``stability``).
Data without labels has no accuracy: its report says so and shows the label-free choices only.
A trial that put a task into fewer clusters than asked is degenerate (``degenerate_tasks`` > 0):
every label-free criterion is taken over the other trials of a grid point, a point whose every
trial is degenerate is never chosen without labels, and the report counts them. A trial whose
labels are its starting point's partition in every task (``unmoved``: the fit never left its
k-means start) is counted and said too: its answer is the start's, not the method's.
Ties are broken by a stated rule (TIE_RULES) and reported. The std is the sample standard
deviation (ddof=1, as MATLAB's std) over the seeds.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

import numpy as np

from mtc.metrics import METRIC_NAMES, UNMOVED, pairwise_ari

SELECTIONS = {
    "acc": "best grid point by mean accuracy over tasks (uses labels: the papers' protocol)",
    "objective": "lowest mean final objective",
    "objective_relative": "lowest mean final / first objective",
    "silhouette": "highest mean cosine silhouette of the clusters on the input",
    "stability": "highest mean ARI between the labels of different seeds",
}
# selection -> (metric, +1 when higher is better)
CRITERIA = {"acc": ("acc/mean", 1), "objective": ("objective/final", -1), "objective_relative": ("objective/relative", -1),
            "silhouette": ("silhouette/mean", 1), "stability": ("stability/mean", 1)}
TIE_RULES = {"acc": "the higher mean nmi_max, then the first in grid order"}
TIE_RULE = "the first in grid order"
DEGENERATE = "degenerate_tasks"  # trial metric: tasks with fewer distinct clusters than asked
COLLAPSE_CAUSE = ("likely cause: the features' scale (one column much larger than the others; for your own tables "
                  "see data.params.scale) or values too small or too alike to separate")
NO_LABELS = ("The data has no labels (no accuracy, NMI, ARI or purity): grid points are chosen by the label-free "
             "criteria only.")


@dataclass(frozen=True)
class TrialRecord:
    """One trial as read back from its MLflow child run."""

    point: str
    seed: str
    status: str  # FINISHED, FAILED, ...
    metrics: dict[str, float]
    run_id: str
    artifact_uri: str = ""
    machine: str = ""  # the run's tracking.MACHINE_TAG ("" for a run from before the tag)


@dataclass
class PointSummary:
    """One grid point of a sweep: its finished, failed and degenerate trials, the mean and std
    (ddof=1) over seeds of every metric, and ``label_free``: the label-free criteria's means
    over its finished trials that are not degenerate (what those criteria choose by)."""

    point: str
    n_runs: int
    n_failed: int
    mean: dict[str, float]
    std: dict[str, float]
    n_degenerate: int = 0
    label_free: dict[str, float] = field(default_factory=dict)
    n_unmoved: int = 0  # finished trials whose labels are their starting point's (UNMOVED)


def is_degenerate(metrics: dict[str, float]) -> bool:
    """Whether a trial put a task into fewer clusters than asked (runs logged before the flag
    existed count as not degenerate)."""
    return metrics.get(DEGENERATE, 0.0) > 0


def summarize(records: list[TrialRecord]) -> list[PointSummary]:
    """Mean and std of every metric over the finished trials of each grid point; the
    label-free criteria also over its trials that are not degenerate."""
    by_point: dict[str, list[TrialRecord]] = {}
    for record in records:
        by_point.setdefault(record.point, []).append(record)
    label_free_keys = [key for selection, (key, _) in CRITERIA.items() if selection != "acc"]
    summaries = []
    for point, group in sorted(by_point.items()):
        ok = [r.metrics for r in group if r.status == "FINISHED"]
        kept = [m for m in ok if not is_degenerate(m)]
        keys = sorted(set().union(*ok)) if ok else []
        values = {k: np.array([m[k] for m in ok if k in m]) for k in keys}
        summaries.append(PointSummary(
            point, len(ok), len(group) - len(ok),
            {k: float(v.mean()) for k, v in values.items()},
            {k: float(v.std(ddof=1)) if v.size > 1 else 0.0 for k, v in values.items()},
            len(ok) - len(kept),
            {k: float(np.mean([m[k] for m in kept if k in m])) for k in label_free_keys
             if any(k in m for m in kept)},
            sum(m.get(UNMOVED, 0.0) > 0 for m in ok),
        ))
    return summaries


def criterion_value(summary: PointSummary, selection: str) -> float:
    """The value ``selection`` chooses by: the mean over every finished trial for ``acc``, over
    the trials that are not degenerate for a label-free criterion (NaN when there is none)."""
    key = CRITERIA[selection][0]
    return (summary.mean if selection == "acc" else summary.label_free).get(key, np.nan)


def ranked(summaries: list[PointSummary], selection: str) -> tuple[list[PointSummary], int]:
    """Grid points with a finished trial and a finite criterion, best first, and how many lead
    tied: values equal to the best's up to rounding (summation order over seeds) are a tie,
    ordered by the rule (accuracy: the higher NMI, equal up to rounding alike, then the grid
    point's name), so that the same runs read from another store choose the same point."""
    if selection not in CRITERIA:
        raise ValueError(f"unknown selection {selection!r}; choose one of {tuple(SELECTIONS)}")
    sign = CRITERIA[selection][1]
    value = {s.point: criterion_value(s, selection) for s in summaries}
    scored = [s for s in summaries if s.n_runs > 0 and np.isfinite(value[s.point])]
    order = {s.point: i for i, s in enumerate(summaries)}
    second = (lambda s: -s.mean.get("nmi_max/mean", 0.0)) if selection == "acc" else (lambda s: 0.0)
    by_value = sorted(scored, key=lambda s: (-sign * value[s.point], second(s), order[s.point]))
    top = [s for s in by_value if same_up_to_rounding(value[s.point], value[by_value[0].point])]
    best_second = min((second(s) for s in top), default=0.0)

    def tie_order(s):  # the rule's best up to rounding first, by name; then the rest by the rule
        return (0, 0.0, order[s.point]) if same_up_to_rounding(second(s), best_second) else \
            (1, second(s), order[s.point])

    return sorted(top, key=tie_order) + by_value[len(top):], len(top)


def same_up_to_rounding(a: float, b: float) -> bool:
    """Equal but for the order of a sum over seeds (relative 1e-12)."""
    return bool(np.isclose(a, b, rtol=1e-12, atol=0.0))


def best_point(summaries: list[PointSummary], selection: str) -> PointSummary:
    """The chosen grid point (KeyError-free: a criterion no run logged raises ValueError)."""
    candidates, _ = ranked(summaries, selection)
    if not candidates:
        raise ValueError(f"no finished trial with {CRITERIA[selection][0]} to choose a grid point by {selection!r}")
    return candidates[0]


def why_no_point(summaries: list[PointSummary], selection: str) -> str:
    """Why a label-free criterion chose no grid point: stability needs the labels of two
    seeds or more that clustered the same data; another criterion was either never logged
    (a sweep older than it) or is NaN in a run of every grid point (the silhouette of a task
    predicted as a single cluster)."""
    key = CRITERIA[selection][0]
    if collapsed(summaries):
        return "every trial is degenerate: fewer clusters than asked in a task"
    if selection == "stability":
        return "it needs the labels of two seeds or more of the same data at a grid point"
    if any(key in summary.mean for summary in summaries):
        return f"{key} is NaN in a run of every grid point" + (
            ": a task predicted as a single cluster" if selection == "silhouette" else "")
    return f"the runs do not log {key}"


def tied(summaries: list[PointSummary], selection: str) -> list[str]:
    """The grid points whose criterion equals the chosen one's (the chosen one first)."""
    candidates, n_tied = ranked(summaries, selection)
    return [s.point for s in candidates[:n_tied]]


def with_stability(summaries: list[PointSummary], labels: dict[str, list[list[np.ndarray]]]) -> list[PointSummary]:
    """Add ``stability/mean`` to each grid point's means: the mean over tasks of the mean ARI
    over all pairs of its seeds' labels (``labels[point]``: per seed, per task; all pairs of a
    task at once, mtc.metrics.pairwise_ari)."""
    for summary in summaries:
        runs = labels.get(summary.point, [])
        if len(runs) > 1:
            summary.mean["stability/mean"] = summary.label_free["stability/mean"] = float(np.mean(
                [np.mean(pairwise_ari([run[t] for run in runs])) for t in range(len(runs[0]))]))
            summary.std["stability/mean"] = 0.0
    return summaries


def collapsed(summaries: list[PointSummary]) -> bool:
    """Whether every finished trial of the sweep is degenerate (and there is one)."""
    runs = sum(s.n_runs for s in summaries)
    return runs > 0 and sum(s.n_degenerate for s in summaries) == runs


def degenerate_note(summaries: list[PointSummary], method: str = "the method") -> str:
    """The report's line on degenerate trials ("" when there is none)."""
    runs, degenerate = sum(s.n_runs for s in summaries), sum(s.n_degenerate for s in summaries)
    if not degenerate:
        return ""
    if degenerate == runs:
        return (f"**{method} collapsed on this data: all {runs} trials are degenerate** (a task in fewer clusters "
                f"than asked); no grid point is chosen without labels. {COLLAPSE_CAUSE[0].upper()}{COLLAPSE_CAUSE[1:]}.")
    return (f"**{degenerate} of {runs} trials degenerate** (a task in fewer clusters than asked): the label-free "
            f"choices leave them out (metric {DEGENERATE}, tag mtc.degenerate on their MLflow runs).")


def task_table(summary: PointSummary, task_names: list[str], metrics=METRIC_NAMES) -> str:
    """Markdown: one row per task (and the mean), one 'mean +- std' column per metric."""
    header = "| task | " + " | ".join(metrics) + " |"
    lines = [header, "|" + "---|" * (len(metrics) + 1)]
    for task in [*task_names, "mean"]:
        cells = [f"{summary.mean[f'{m}/{task}']:.4f} ± {summary.std[f'{m}/{task}']:.4f}" for m in metrics]
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def data_note(draw: str, datasets: dict) -> str:
    """The report's line on the data: samples per task (a range over draws), how drawn, and the
    scale applied to the user's files (mtc.data.scaling, by name)."""
    sizes = np.array([[task.n_samples for task in d.tasks] for d in datasets.values()])
    first = datasets[min(datasets)]
    counts = ", ".join(f"{name} {lo}" if lo == hi else f"{name} {lo}-{hi}"
                       for name, lo, hi in zip(first.task_names, sizes.min(axis=0), sizes.max(axis=0)))
    scale = scale_note(first.meta)
    if draw == "per_seed":
        return (f"samples per task: {counts}; a fresh random draw per seed ({len(datasets)} draws), means over draws; "
                f"no stability criterion (the seeds' labels are of different samples){scale}")
    return f"samples per task: {counts}; one dataset for every seed{scale}"


def scale_note(meta: dict) -> str:
    """``; features scaled: maxabs (fitted on the pooled tasks)`` for the user's files, by the
    scale applied (never ``auto``); empty for data without a scale."""
    if "scale" not in meta:
        return ""
    fitted = "" if meta["scale"] == "none" else f" (fitted {meta.get('scale_fit', 'pooled').replace('_', ' ')})"
    return f"; features scaled: {meta['scale']}{fitted}"


def tie_note(summaries: list[PointSummary], selection: str) -> str:
    points = tied(summaries, selection)
    if len(points) < 2:
        return ""
    return (f"tie: {', '.join(f'`{p}`' for p in points)} have the same {CRITERIA[selection][0]}; chosen by "
            f"{TIE_RULES.get(selection, TIE_RULE)}")


def label_free_table(summaries: list[PointSummary], labelled: bool = True) -> str:
    """Markdown: each label-free choice, its grid point and the accuracy it reaches; without
    labels its runs and its criterion's value (the mean over seeds; stability: over pairs of
    seeds) instead."""
    best = best_point(summaries, "acc").mean["acc/mean"] if labelled else None
    header = ("| chosen by | grid point | acc (mean over tasks) | below the best | nmi_max |" if labelled else
              "| chosen by | grid point | runs | criterion | value |")
    lines = [header, "|---|---|---|---|---|"]
    for selection, label in SELECTIONS.items():
        if selection == "acc":
            continue
        try:
            chosen = best_point(summaries, selection)
        except ValueError:
            lines.append(f"| {label} | (none: {why_no_point(summaries, selection)}) | | | |")
            continue
        if labelled:
            acc, spread = chosen.mean["acc/mean"], chosen.std["acc/mean"]
            lines.append(f"| {label} | `{chosen.point}` | {acc:.4f} ± {spread:.4f} | {best - acc:.4f} | "
                         f"{chosen.mean['nmi_max/mean']:.4f} |")
        else:
            key = CRITERIA[selection][0]
            lines.append(f"| {label} | `{chosen.point}` | {chosen.n_runs - chosen.n_degenerate} | {key} | "
                         f"{criterion_value(chosen, selection):.6g} |")
    return "\n".join(lines)


def accuracy_parts(summaries: list[PointSummary], task_names: list[str]) -> list[str]:
    """The report's lines on the grid point of the best accuracy and on the label-free choices."""
    best = best_point(summaries, "acc")
    parts = [f"## {SELECTIONS['acc']}", "", f"grid point: `{best.point}` ({best.n_runs} runs)", ""]
    parts += [f"{note}\n" for note in [tie_note(summaries, "acc")] if note] + [task_table(best, task_names), ""]
    return parts + ["## grid points chosen without labels", "", label_free_table(summaries), ""]


def label_free_parts(summaries: list[PointSummary], task_names: list[str]) -> list[str]:
    """The report's lines for data without labels: that it has none, the label-free choices and
    the silhouette per task at the point the silhouette chose."""
    parts = [NO_LABELS, "", "## grid points chosen without labels", "", label_free_table(summaries, labelled=False), ""]
    candidates, _ = ranked(summaries, "silhouette")
    if candidates:
        point = candidates[0]
        parts += [f"## silhouette per task at the point of the {SELECTIONS['silhouette']}: `{point.point}` "
                  f"({point.n_runs} runs)", "", task_table(point, task_names, ("silhouette",)), ""]
    return parts


def report_markdown(title: str, summaries: list[PointSummary], task_names: list[str], data_note: str = "",
                    labelled: bool = True, method: str = "the method", left_out: dict | None = None) -> str:
    """The sweep's report.md: the best point by accuracy and the label-free choices, or for
    data without labels (``labelled`` false) the label-free choices only, said in one line;
    first what is not among them: the grid points left out before Ray (``left_out``: label ->
    why the method cannot fit the data), the failed trials and the degenerate ones
    (``degenerate_note``)."""
    parts = [f"# {title}", ""] + ([data_note, ""] if data_note else [])
    if left_out:
        parts += [left_out_note(left_out), ""]
    failed = sum(s.n_failed for s in summaries)
    if failed:
        parts += [f"**{failed} of {sum(s.n_runs + s.n_failed for s in summaries)} trials failed**; their errors are on the MLflow "
                  "child runs (tag mtc.error).", ""]
    degenerate = degenerate_note(summaries, method)
    parts += [degenerate, ""] if degenerate else []
    unmoved = unmoved_note(summaries, method)
    parts += [unmoved, ""] if unmoved else []
    parts += accuracy_parts(summaries, task_names) if labelled else label_free_parts(summaries, task_names)
    parts += [note for note in (tie_note(summaries, s) for s in SELECTIONS if s != "acc") if note]
    return "\n".join(parts) + "\n"


def unmoved_note(summaries: list[PointSummary], method: str = "the method") -> str:
    """The report's line on the trials that never left their starting point ("" when none did)."""
    runs, unmoved = sum(s.n_runs for s in summaries), sum(s.n_unmoved for s in summaries)
    if not unmoved:
        return ""
    whole = f"**{method} never moved from its start on this data: in all {runs} trials" if unmoved == runs else \
        f"**{unmoved} of {runs} trials never moved from their start: in each"
    return (f"{whole}, every task's labels are its k-means start's** (metric {UNMOVED}): their scores are those of "
            "the start, not of the method.")


def left_out_note(left_out: dict, bold: str = "**") -> str:
    """One line on the grid points a sweep left out before Ray because its method cannot fit
    the data (``left_out``: label -> why), grouped by reason; ``bold``: Markdown's emphasis, or
    "" for a console line."""
    reasons: dict[str, int] = {}
    for why in left_out.values():
        reasons[why] = reasons.get(why, 0) + 1
    return (f"{bold}{len(left_out)} grid point(s) left out before Ray{bold} (the method cannot fit this data): "
            + "; ".join(f"{why} ({count} point{'s' if count > 1 else ''})" for why, count in reasons.items()))


def grid_csv(summaries: list[PointSummary]) -> str:
    """Every grid point: runs, failures, and mean/std of every metric."""
    keys = sorted(set().union(*(s.mean for s in summaries)))
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["point", "n_runs", "n_failed", "n_degenerate"] +
                    [f"{k} {stat}" for k in keys for stat in ("mean", "std")])
    for s in summaries:
        writer.writerow([s.point, s.n_runs, s.n_failed, s.n_degenerate] +
                        [f"{getattr(s, stat).get(k, float('nan')):.6g}" for k in keys for stat in ("mean", "std")])
    return out.getvalue()
