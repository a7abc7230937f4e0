"""Compare methods across finished sweeps: ``python -m mtc.results.compare``.

Every FINISHED parent run of the experiment is one sweep of one method on one benchmark:
the method is the sweep's label (tag ``mtc.label``, ``sweep.label``: the method's config
name unless an experiment names a variant, e.g. ``smbc_sequential``), the benchmark the run
name without its ``<label>-`` prefix, else the tag ``mtc.data``; of several sweeps of the
same (benchmark, method) the newest is read. A variant is matched with the published
numbers of its method (tag ``mtc.method``). A benchmark ``<data>@<n1>+<n2>+...`` asked for
with ``--benchmarks`` pools the sweeps ``<data>-n<n1>``, ... of each method, as a paper's
table averages over sample sizes (``mtc.results.reading.pool_members``; mtc.results reads the sweeps
back, this module compares them). For each sweep the grid points
of every selection of ``mtc.results.report.SELECTIONS`` are found (the best by accuracy, which
uses labels, and the label-free ones), and this module writes to ``--out``:

- ``compare.md``: per benchmark, methods x tasks "mean ± std" over seeds at the best grid
  point beside the published numbers (``mtc/published_results.csv``), the accuracy at each
  label-free point with its gap to the best point, Wilcoxon signed-rank tests (paired by
  seed) of the best method against each other one, grid heatmaps; over all benchmarks, the
  Friedman test, average ranks, Nemenyi post-hoc p-values and, from MIN_CD_CELLS cells on, a
  critical-difference diagram (below, compare.md says why there is none: ``cd_refusal``);
- for a pooled benchmark, the mean accuracy over tasks per sample size at each method's best
  point over all sizes, as a table and a figure (mtc.results.size_curves: the papers' accuracy against
  the number of samples);
- ``cells.csv``, ``wilcoxon.csv``, ``friedman.csv``, ``nemenyi.csv``, ``size_curves.csv`` (with a
  pooled benchmark) and the PNGs;

and logs the same files to an MLflow run of their own (run name ``compare``, tag
``mtc.kind=compare``) unless ``--no-log``. Bad input (no store, no finished sweep, an
unknown metric) is one line and exit 2.

The figures name methods in the papers' terms (a method config's ``display``, e.g. A-Ncut; a
variant keeps its label), print ranks with two decimals and name a pooled benchmark in words.
A grid heatmap's colours span a stated range (0 to 1 for the scores), its title names the
parameters with no effect, and a red box marks the cell of the point the tables use.

``--criterion`` says what chooses each sweep's point and ranks the methods: ``acc`` (the
default) or the label-free ``silhouette``, then the tables, tests and ranks are of the
silhouette at its point and nothing about accuracy is shown. It is used, with a note, when no
sweep has accuracy (data without labels). The objectives do not compare across methods and
the stability has no value per seed and task, so neither ranks methods.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import scikit_posthocs
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from scipy import stats

from mtc.cli import fail
from mtc.config import method_display_names
from mtc.errors import InputError
from mtc.metrics import METRIC_NAMES
from mtc.results.reading import (
    BEST,
    NO_LABELS_BEST,
    POOL_MARK,
    Sweep,
    comparison_criterion,
    finished_sweeps,
    open_experiment,
)
from mtc.results.report import CRITERIA, SELECTIONS
from mtc.results.size_curves import draw_size_curves, size_curve_frame, size_table
from mtc.store import preflight

PUBLISHED = Path(__file__).parents[1] / "published_results.csv"  # the papers' numbers, mtc/published_results.csv
PUBLISHED_COLUMNS = ("paper", "table", "benchmark", "method", "task", "metric", "mean", "std")
LABEL_FREE = tuple(selection for selection in SELECTIONS if selection != BEST)
RANKING = (BEST, NO_LABELS_BEST)  # the selections that can rank methods (--criterion)
NOT_RANKING = {  # why the other selections cannot
    "objective": "each method minimises its own objective, whose values do not compare across methods",
    "objective_relative": "each method minimises its own objective, whose values do not compare across methods",
    "stability": "it is one value per grid point (the ARI between pairs of seeds), no score per seed and task",
}
SECOND_METRIC = "nmi_max"  # tabled beside --metric (the papers' NMI)
KIND_TAG = "mtc.kind"
ALPHA = 0.05  # the Nemenyi test's level (the critical-difference diagram's bars)
MIN_CD_CELLS = 10  # fewer (benchmark, task) cells: no critical-difference diagram (cd_refusal)
NO_EFFECT = 5e-4  # a grid parameter whose points' means differ by no more: "no effect" (half the 3rd decimal)
BOUNDED_SCORES = (*METRIC_NAMES, "silhouette")  # scores within [-1, 1]; the heatmaps' colours span 0 to 1 (or -1 to 1)
MIN_PAIRS = 2  # fewer paired seeds than this: no Wilcoxon test
FIGURE_DPI = 100  # every figure is at least 12 inches wide: >= 1200 px
FRIEDMAN_COLUMNS = ["method", "average_rank", "statistic", "p", "n_cells", "n_methods", "critical_difference"]


@dataclass(frozen=True)
class Comparison:
    """Everything ``compare.md`` shows; each frame is also written as a CSV.

    Attributes
    ----------
    sweeps : list of Sweep
        The sweeps compared.
    cells, wilcoxon, friedman, nemenyi, rank_table, size_curves : pandas.DataFrame
        The tables (``cells.csv``, ``wilcoxon.csv``, ...).
    notes : list of str
        What was left out or is worth knowing.
    criterion : str
        The selection of the points that the tables, tests and ranks use (``acc``, or
        ``silhouette`` for data without labels).
    metric : str
        The score the tables, tests and ranks compare (``acc``, ``nmi_max``, ...; the
        criterion's own metric for a label-free criterion).
    """

    sweeps: list[Sweep]
    cells: pd.DataFrame
    wilcoxon: pd.DataFrame
    friedman: pd.DataFrame
    nemenyi: pd.DataFrame
    rank_table: pd.DataFrame
    size_curves: pd.DataFrame
    notes: list[str]
    criterion: str = BEST
    metric: str = BEST


# --- tables ------------------------------------------------------------------------------


def load_published(path: Path) -> pd.DataFrame:
    """Published numbers, one row per (benchmark, method, task, metric): where several papers
    print the same cell the first row of the file is kept. Methods of ours only (a ``paper:``
    method has no config here).

    Raises
    ------
    InputError
        The file is missing or not a CSV of PUBLISHED_COLUMNS: a column missing, a row without
        its benchmark, method, task or metric, a mean or std that is not a number.
    """
    if not Path(path).is_file():
        raise InputError(f"--published {path}: missing file")
    try:
        published = pd.read_csv(path, dtype={"benchmark": str, "method": str, "task": str, "metric": str})
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise InputError(f"--published {path}: not a readable CSV ({' '.join(str(error).split())})") from None
    missing = [column for column in PUBLISHED_COLUMNS if column not in published.columns]
    values = published.reindex(columns=["mean", "std"])
    numbers = values.apply(pd.to_numeric, errors="coerce")
    bad = (published.reindex(columns=["benchmark", "method", "task", "metric"]).isna().any(axis=1)
           | numbers["mean"].isna() | (numbers["std"].isna() & values["std"].notna()))
    if missing or bad.any():
        where = f"no column {', '.join(missing)}" if missing else \
            f"line {bad.to_numpy().argmax() + 2} lacks a name or a number"
        raise InputError(f"--published {path}: {where}; expected the columns {', '.join(PUBLISHED_COLUMNS)}, "
                         "a number in mean and a number or nothing in std")
    published = published[~published.method.str.startswith("paper:")]
    published = published.drop_duplicates(["benchmark", "method", "task", "metric"], keep="first")
    return published.assign(paper_table=published.paper + " " + published.table).rename(
        columns={"mean": "paper_mean", "std": "paper_std"})[
        ["benchmark", "method", "task", "metric", "paper_mean", "paper_std", "paper_table"]]


def task_order(tasks) -> list[str]:
    """Task names sorted, their mean last."""
    return sorted(set(tasks), key=lambda task: (task == "mean", task))


def summary_rows(sweep: Sweep, selection: str, metric: str) -> list[dict]:
    """One row per task (and the mean) of ``metric`` at the sweep's point of ``selection``."""
    point = sweep.points[selection]
    prefix = f"{metric}/"
    tasks = task_order(key[len(prefix):] for key in point.mean if key.startswith(prefix))
    return [{"benchmark": sweep.benchmark, "method": sweep.method, "published_as": sweep.published_as,
             "task": task, "metric": metric,
             "selection": selection, "point": point.point, "mean": point.mean[f"{prefix}{task}"],
             "std": point.std[f"{prefix}{task}"], "n": point.n_runs, "degenerate": point.n_degenerate}
            for task in tasks]


def cell_frame(sweeps: list[Sweep], metrics: list[str], published: pd.DataFrame) -> pd.DataFrame:
    """``cells.csv``: mean, std and number of seeds of every metric, task and selection of
    every sweep, with the published number of the same benchmark, method (a variant: its
    method's), task and metric."""
    rows = [row for sweep in sweeps for selection in sweep.points for metric in metrics
            for row in summary_rows(sweep, selection, metric)]
    cells = pd.DataFrame(rows, columns=["benchmark", "method", "published_as", "task", "metric", "selection",
                                        "point", "mean", "std", "n", "degenerate"])
    published = published.rename(columns={"method": "published_as"})
    return cells.merge(published, on=["benchmark", "published_as", "task", "metric"], how="left").drop(
        columns="published_as")


def seed_values(sweeps: list[Sweep], metric: str, selection: str = BEST) -> pd.DataFrame:
    """Per-seed values of ``metric`` at each sweep's point of ``selection`` (the best by
    accuracy): benchmark, method, task, seed, value."""
    frames = []
    for sweep in sweeps:
        at_best = sweep.trials[sweep.trials.point == sweep.points[selection].point].set_index("seed")
        columns = [c for c in at_best.columns if c.startswith(f"{metric}/")]
        long = at_best[columns].rename(columns=lambda c: c.split("/", 1)[1]).rename_axis(columns="task")
        frames.append(long.stack().rename("value").reset_index().assign(benchmark=sweep.benchmark,
                                                                        method=sweep.method))
    return pd.concat(frames, ignore_index=True)


def wilcoxon_pair(best: pd.Series, other: pd.Series) -> dict:
    """Wilcoxon signed-rank test of two methods' per-seed values (indexed by seed), on the
    seeds present for both.

    Returns
    -------
    dict
        ``n_pairs``, ``statistic``, ``p`` (NaN when not tested) and ``note`` (why not
        tested, all differences zero, or scipy's warnings, e.g. a normal approximation).
    """
    paired = pd.concat([best, other], axis=1, join="inner").dropna()
    n = len(paired)
    if n < MIN_PAIRS:
        return {"n_pairs": n, "statistic": np.nan, "p": np.nan,
                "note": f"{n} seed(s) with results for both: too few for a test (needs {MIN_PAIRS})"}
    differences = paired.iloc[:, 0] - paired.iloc[:, 1]
    if not differences.any():
        return {"n_pairs": n, "statistic": np.nan, "p": 1.0, "note": "all differences zero"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = stats.wilcoxon(paired.iloc[:, 0], paired.iloc[:, 1])
    nonzero = int((differences != 0).sum())
    notes = [" ".join(str(w.message).split()) for w in caught]
    if 2.0 / 2 ** nonzero > ALPHA:
        notes.append(f"{nonzero} non-zero difference(s): p cannot go below {2.0 / 2 ** nonzero:.3g}")
    return {"n_pairs": n, "statistic": float(result.statistic), "p": float(result.pvalue), "note": "; ".join(notes)}


def wilcoxon_frame(values: pd.DataFrame, metric: str, cells: pd.DataFrame, selection: str = BEST) -> pd.DataFrame:
    """``wilcoxon.csv``: per benchmark and task, the best method (highest mean over its seeds)
    against each other method, paired by seed. The means are the score tables' (``cells``
    at the point of ``selection``), so that both print the same digits."""
    at_best = cells[(cells.selection == selection) & (cells.metric == metric)]
    at_best = at_best.set_index(["benchmark", "task", "method"]).sort_index()
    rows = []
    for (benchmark, task), cell in values.groupby(["benchmark", "task"], sort=True):
        by_seed = cell.pivot(index="seed", columns="method", values="value")
        means = at_best.loc[(benchmark, task), "mean"].reindex(by_seed.columns)
        means = means.sort_index().sort_values(ascending=False, kind="stable")
        best = means.index[0]
        rows += [{"benchmark": benchmark, "task": task, "metric": metric, "best": best, "other": other,
                  "best_mean": means[best], "other_mean": means[other],
                  **wilcoxon_pair(by_seed[best], by_seed[other])} for other in means.index[1:]]
    tests = pd.DataFrame(rows, columns=["benchmark", "task", "metric", "best", "other", "best_mean", "other_mean",
                                        "n_pairs", "statistic", "p", "note"])
    order = {task: i for i, task in enumerate(task_order(tests.task))}
    return tests.sort_values(["benchmark", "task"], key=lambda c: c.map(order) if c.name == "task" else c,
                             kind="stable", ignore_index=True)


def shared_methods(present: pd.DataFrame) -> list[str]:
    """Of a (cells x methods) table of which method has a result where, the set of >= 3
    methods that all have results in the most cells (most results used: methods x cells; a tie
    goes to more methods). Candidates are the sets of methods found together in one cell."""
    patterns = np.unique(present.to_numpy(bool), axis=0)
    patterns = patterns[patterns.sum(axis=1) >= 3]
    if not len(patterns):
        return []
    covered = (present.to_numpy(bool)[None, :, :] >= patterns[:, None, :]).all(axis=2).sum(axis=1)
    sizes = patterns.sum(axis=1)
    best = np.lexsort((-sizes, -(covered * sizes)))[0]
    return list(present.columns[patterns[best]])


def rank_table(cells: pd.DataFrame, metric: str, selection: str = BEST) -> pd.DataFrame:
    """(benchmark, task) x method means of ``metric`` at the point of ``selection``, real tasks
    only (not their mean), restricted to the shared methods and the cells where all of them
    have results."""
    chosen = cells[(cells.selection == selection) & (cells.metric == metric) & (cells.task != "mean")]
    table = chosen.pivot_table(index=["benchmark", "task"], columns="method", values="mean")
    methods = shared_methods(table.notna())
    return table[methods].dropna() if methods else table.iloc[:0, :0]


def critical_difference(n_methods: int, n_cells: int) -> float:
    """Nemenyi's critical difference of average ranks at level ALPHA (Demsar 2006): the
    studentized range quantile (scipy) over sqrt(2), times sqrt(k (k + 1) / (6 N))."""
    q = stats.studentized_range.ppf(1 - ALPHA, n_methods, np.inf) / np.sqrt(2)
    return float(q * np.sqrt(n_methods * (n_methods + 1) / (6 * n_cells)))


def friedman_frames(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Friedman test over the cells of ``table`` and Nemenyi's post-hoc p-values.

    Parameters
    ----------
    table : pandas.DataFrame
        (benchmark, task) x method, a mean score in every entry; at least 3 methods and 2 cells.

    Returns
    -------
    friedman : pandas.DataFrame
        One row per method: its average rank (1 = highest score; ties share the mean rank)
        and, on every row, the test's statistic, p, number of cells and methods, and the
        critical difference.
    nemenyi : pandas.DataFrame
        method x method p-values (scikit-posthocs' posthoc_nemenyi_friedman).
    """
    result = stats.friedmanchisquare(*table.to_numpy().T)
    ranks = table.rank(axis=1, ascending=False).mean().sort_values()
    friedman = pd.DataFrame({"method": ranks.index, "average_rank": ranks.to_numpy(),
                             "statistic": result.statistic, "p": result.pvalue, "n_cells": len(table),
                             "n_methods": table.shape[1],
                             "critical_difference": critical_difference(table.shape[1], len(table))},
                            columns=FRIEDMAN_COLUMNS)
    nemenyi = scikit_posthocs.posthoc_nemenyi_friedman(table.to_numpy())
    nemenyi.index = nemenyi.columns = table.columns
    return friedman, nemenyi.rename_axis(index="method", columns=None)


# --- figures -----------------------------------------------------------------------------


def parse_point(label: str) -> dict[str, str]:
    """A grid point label ``"k1=v1,k2=v2"`` as ``{k1: v1, k2: v2}`` (a value may hold commas,
    as a list does); ``"defaults"`` (no grid) is ``{}``."""
    if label == "defaults":
        return {}
    return dict(part.split("=", 1) for part in re.split(r",(?=[A-Za-z_]\w*=)", label))


def value_order(values: pd.Series) -> list[str]:
    """Distinct values of a grid parameter, numerically ordered when all are numbers."""
    distinct = values.unique()
    numbers = pd.to_numeric(pd.Series(distinct), errors="coerce")
    return list(distinct[np.argsort(numbers.to_numpy())]) if numbers.notna().all() else sorted(distinct)


def grid_statistics(trials: pd.DataFrame, column: str) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Mean and std over seeds of ``column`` on the grid of the two grid parameters with the
    most values (columns: the one with more; rows: the other, or one row), averaged per seed over
    any other parameter.

    Returns
    -------
    mean, std : pandas.DataFrame
        rows x columns of the grid.
    averaged : list of str
        The parameters averaged over.
    """
    params = pd.DataFrame([parse_point(p) for p in trials.point], index=trials.index)
    counts = params.nunique().sort_values(ascending=False, kind="stable")
    main, averaged = list(counts.index[:2]), list(counts.index[2:])
    keys = pd.DataFrame({"col": params[main[0]], "row": params[main[1]] if len(main) > 1 else "",
                         "seed": trials.seed, "value": trials[column]})
    per_seed = keys.groupby(["row", "col", "seed"]).value.mean()
    grouped = per_seed.groupby(["row", "col"])
    rows = value_order(keys.row) if len(main) > 1 else [""]
    columns = value_order(keys.col)
    shape = {"index": rows, "columns": columns}
    mean = grouped.mean().unstack("col").reindex(**shape)
    std = grouped.std().unstack("col").reindex(**shape)
    return mean.rename_axis(index=main[1] if len(main) > 1 else None, columns=main[0]), std, averaged


def benchmark_title(benchmark: str) -> str:
    """A benchmark as a figure names it: a pooled one (``webkb_pp@20+40+60+80``,
    ``mtc.results.reading.pool_members``) in words, "webkb_pp, 20, 40, 60 and 80 samples per
    task, pooled"; any other as it is."""
    if POOL_MARK not in benchmark:
        return benchmark
    data, sizes = benchmark.split(POOL_MARK, 1)
    sizes = sizes.split("+")
    said = sizes[0] if len(sizes) == 1 else f"{', '.join(sizes[:-1])} and {sizes[-1]}"
    return f"{data}, {said} samples per task, pooled"


def display_names(sweeps: list[Sweep]) -> dict[str, str]:
    """Each sweep label's name in the figures: a method config's name in the papers' terms (its
    YAML's ``display``, ``mtc.config.method_display_names``), a variant's label (``sweep.label``,
    e.g. ``mtcmrl_printed``) as it is. Two labels that would show the same name keep their label
    in brackets. Tables and CSVs keep the labels."""
    known = method_display_names()
    names = {s.method: known.get(s.method, s.method) if s.method == s.published_as else s.method for s in sweeps}
    counts = Counter(names.values())
    return {label: name if counts[name] == 1 or name == label else f"{name} ({label})"
            for label, name in names.items()}


def colour_range(metric: str, values: np.ndarray) -> tuple[float, float]:
    """The stated colour range of a heatmap of ``metric``: 0 to 1 for the scores (BOUNDED_SCORES),
    -1 to 1 when one is negative (ARI, silhouette); any other metric spans its values."""
    finite = values[np.isfinite(values)]
    if metric in BOUNDED_SCORES:
        return (-1.0 if finite.size and finite.min() < 0 else 0.0), 1.0
    if not finite.size:
        return 0.0, 1.0
    low, high = float(finite.min()), float(finite.max())
    return (low, high) if high > low else (low - 0.5, high + 0.5)


def without_effect(trials: pd.DataFrame, column: str, tolerance: float = NO_EFFECT) -> list[str]:
    """The grid parameters that change nothing: of two values or more, and at every setting of the
    other parameters (with two or more of its values there) the means over seeds of ``column`` at
    its values differ by at most ``tolerance`` (NO_EFFECT: the cells print the same 3 decimals,
    or differ by one in the last). Judged per grid point, so parameters averaged over in the
    heatmap count too."""
    means = trials.groupby("point")[column].mean()
    points = pd.DataFrame([parse_point(p) for p in means.index], index=means.index)
    found = []
    for name in points.columns:
        if points[name].nunique() < 2:
            continue
        others = [c for c in points.columns if c != name]
        keys = points[others].astype(str).agg("|".join, axis=1) if others else pd.Series("", index=points.index)
        spread = means.groupby(keys).agg(["max", "min", "size"])
        spread = spread[spread["size"] > 1]
        if len(spread) and ((spread["max"] - spread["min"]) <= tolerance).all():
            found.append(name)
    return found


def draw_heatmap(mean: pd.DataFrame, std: pd.DataFrame, title: str, colorbar: str, path: Path | None = None,
                 limits: tuple[float, float] | None = None, chosen: tuple[int, int] | None = None) -> Figure:
    """A heatmap of ``mean`` with "mean\\n± std" written in every cell, its colours spanning
    ``limits`` (by default the values' own range), a red box around the cell ``chosen``
    (row, column); saved at ``path`` when given."""
    width = max(12.0, 1.3 * mean.shape[1] + 4)
    fig = Figure(figsize=(width, max(3.5, 1.0 * mean.shape[0] + 2.5)), dpi=FIGURE_DPI)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    values = mean.to_numpy(float)
    shown = {"vmin": limits[0], "vmax": limits[1]} if limits else {}
    image = ax.imshow(values, cmap="viridis", aspect="auto", **shown)
    low, high = image.get_clim()
    for (i, j), value in np.ndenumerate(values):
        if np.isnan(value):  # a grid that is not a full product of its values
            continue
        spread = std.iat[i, j]
        text = f"{value:.3f}" + ("" if np.isnan(spread) else f"\n± {spread:.3f}")
        dark = high == low or (value - low) / (high - low) < 0.6
        ax.text(j, i, text, ha="center", va="center", fontsize=13, color="white" if dark else "black")
    if chosen is not None:
        ax.add_patch(Rectangle((chosen[1] - 0.46, chosen[0] - 0.46), 0.92, 0.92, fill=False, edgecolor="red", lw=4,
                               label="chosen point"))  # inside its cell: not clipped at the axes' edge
    ax.set_xticks(range(mean.shape[1]), [str(c) for c in mean.columns], fontsize=13)
    rows = [str(r) for r in mean.index] if mean.index.name else []  # one unnamed row: no tick
    ax.set_yticks(range(len(rows)), rows, fontsize=13)
    ax.set_xlabel(mean.columns.name, fontsize=14)
    ax.set_ylabel(mean.index.name or "", fontsize=14)
    ax.set_title(title, fontsize=14)
    fig.colorbar(image, ax=ax).set_label(colorbar, fontsize=13)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path)
    return fig


CHOSEN_BY = {BEST: "the best grid point by mean accuracy", NO_LABELS_BEST: "the grid point of highest mean silhouette"}


def chosen_cell(sweep: Sweep, criterion: str, mean: pd.DataFrame, averaged: list[str]) -> tuple[tuple[int, int] | None,
                                                                                                 str]:
    """(row, column) of the heatmap cell holding the sweep's point of ``criterion`` and the title
    line saying so; (None, "") when the sweep has no such point."""
    if criterion not in sweep.points:
        return None, ""
    values = parse_point(sweep.points[criterion].point)
    row = values.get(mean.index.name, "") if mean.index.name else ""
    column = values.get(mean.columns.name)
    if column not in list(mean.columns) or row not in list(mean.index):
        return None, ""
    within = ", ".join(f"{name}={values[name]}" for name in averaged if name in values)
    line = f"red box: {CHOSEN_BY.get(criterion, f'the grid point chosen by {criterion}')}"
    return (list(mean.index).index(row), list(mean.columns).index(column)), line + (f" ({within} in its cell)"
                                                                                     if within else "")


def heatmap_figure(sweep: Sweep, metric: str, criterion: str = BEST, name: str | None = None) -> Figure | None:
    """The grid heatmap of ``<metric>/mean`` of one sweep (``name``: the method as the figure
    says it); None for a sweep of one grid point (no grid parameter, or one value of each): its
    one cell is the tables' number.

    The colours span a stated range (``colour_range``: 0 to 1 for the scores, said in the colour
    bar's label), the title names the parameters with no effect (``without_effect``) and the
    cell of the point the comparison uses (``criterion``) has a red box."""
    if sweep.trials.point.nunique() == 1:
        return None
    column = f"{metric}/mean"
    mean, std, averaged = grid_statistics(sweep.trials, column)
    limits = colour_range(metric, mean.to_numpy(float))
    lines = [f"{name or sweep.method} on {benchmark_title(sweep.benchmark)}: mean {metric} over tasks, "
             "mean ± std over seeds"]
    if averaged:
        lines.append(f"(averaged over {', '.join(averaged)})")
    idle = without_effect(sweep.trials, column)
    if idle:
        lines.append(f"{' and '.join(idle)} {'has' if len(idle) == 1 else 'have'} no effect: the means along "
                     f"{'it' if len(idle) == 1 else 'each'} agree within {NO_EFFECT:g}")
    chosen, line = chosen_cell(sweep, criterion, mean, averaged)
    if line:
        lines.append(line)
    colorbar = f"mean {metric} (colour range {limits[0]:g} to {limits[1]:g})"
    return draw_heatmap(mean, std, "\n".join(lines), colorbar, limits=limits, chosen=chosen)


def sweep_heatmap(sweep: Sweep, metric: str, out: Path, criterion: str = BEST, name: str | None = None
                  ) -> Path | None:
    """``heatmap_figure`` as ``grid_<label>_<benchmark>.png`` in ``out``; None (nothing written)
    for a sweep of one grid point."""
    figure = heatmap_figure(sweep, metric, criterion, name)
    if figure is None:
        return None
    path = out / f"grid_{sweep.method}_{sweep.benchmark}.png"
    figure.savefig(path)
    return path


def cd_refusal(friedman: pd.DataFrame) -> str | None:
    """Why no critical-difference diagram is drawn for these Friedman results, None when one is.

    The diagram needs MIN_CD_CELLS (benchmark, task) cells. Demšar (2006, "Statistical
    comparisons of classifiers over multiple data sets", JMLR 7, Sec. 3.2.2) takes the
    chi-square approximation of Friedman's statistic as sound, as a rule of thumb, for N > 10
    data sets and k > 5 methods, and points to exact tables for fewer (scipy's
    ``friedmanchisquare`` notes the same n > 10); Nemenyi's critical difference rests on the
    same kind of large-sample approximation (the studentized range with infinitely many
    degrees of freedom). We draw from ten cells on, the boundary of that rule; below, the
    critical difference is a large part of the rank range, or wider than all of it
    (compare_handdigits: 2 cells of 6 methods, 5.33 where average ranks differ by 5 at most),
    and the diagram separates next to nothing. The Friedman and Nemenyi CSVs are written all
    the same, and compare.md says why there is no diagram."""
    first = friedman.iloc[0]
    if first.n_cells >= MIN_CD_CELLS:
        return None
    width = first.n_methods - 1
    cd = first.critical_difference
    against = (f"more than the {width:g} by which two average ranks can differ at most ({first.n_methods} methods): "
               "it could separate no pair" if cd >= width else
               f"of the {width:g} by which two average ranks can differ at most ({first.n_methods} methods)")
    return (f"No critical-difference diagram: {first.n_cells} (benchmark, task) cells, fewer than the "
            f"{MIN_CD_CELLS} it needs (Demšar 2006, Sec. 3.2.2: the large-sample approximations behind Friedman's "
            f"test and Nemenyi's critical difference want more than about ten data sets). Nemenyi's critical "
            f"difference would be {cd:.2f} ranks, {against}.")


def draw_cd_diagram(friedman: pd.DataFrame, nemenyi: pd.DataFrame, metric: str, path: Path | None = None,
                    names: dict[str, str] | None = None) -> Figure:
    """The critical-difference diagram (scikit-posthocs) of the average ranks (two decimals),
    methods named by ``names`` (label -> name in the figures); saved at ``path`` when given.
    Only drawn when ``cd_refusal`` finds none."""
    names = names or {}
    ranks = friedman.set_index("method").average_rank.rename(lambda m: names.get(m, m))
    significance = nemenyi.rename(index=lambda m: names.get(m, m), columns=lambda m: names.get(m, m))
    first = friedman.iloc[0]
    fig = Figure(figsize=(12, max(3.5, 0.45 * len(ranks) + 2.5)), dpi=FIGURE_DPI)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    scikit_posthocs.critical_difference_diagram(ranks, significance, ax=ax, label_props={"fontsize": 14},
                                                label_fmt_left="{label} ({rank:.2f})",
                                                label_fmt_right="({rank:.2f}) {label}")
    ax.tick_params(labelsize=13)
    fig.suptitle(f"average rank of {metric} over {first.n_cells} (benchmark, task) cells (1 = best)\nbars join "
                 f"methods Nemenyi does not separate (p >= {ALPHA}); "
                 f"critical difference {first.critical_difference:.2f}", fontsize=13)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path)
    return fig


# --- compare.md --------------------------------------------------------------------------


def markdown_table(frame: pd.DataFrame) -> str:
    """A data frame as a markdown table (index not shown)."""
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * frame.shape[1]]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def mean_std(mean: float, std: float) -> str:
    """Format as "mean ± std" (4 decimals): "" when there is no mean, the mean alone without a std."""
    if pd.isna(mean):
        return ""
    return f"{mean:.4f}" if pd.isna(std) else f"{mean:.4f} ± {std:.4f}"


def score_table(cells: pd.DataFrame, metric: str, selection: str = BEST) -> pd.DataFrame:
    """Methods x tasks (and mean): "mean ± std" at the point of ``selection``, and the
    published number beside every task for which some method has one; a ``degenerate`` column
    marks the methods with degenerate trials at their point, when one has any."""
    chosen = cells[(cells.selection == selection) & (cells.metric == metric)]
    tasks = task_order(chosen.task)
    ours = chosen.assign(text=[mean_std(m, s) for m, s in zip(chosen["mean"], chosen["std"])])
    paper = chosen.assign(text=[mean_std(m, s) for m, s in zip(chosen.paper_mean, chosen.paper_std)])
    table = ours.pivot(index="method", columns="task", values="text")
    papers = paper.pivot(index="method", columns="task", values="text")
    columns = {}
    for task in tasks:
        columns[task] = table.get(task)
        if task in papers and papers[task].astype(bool).any():
            columns[f"{task} (paper)"] = papers[task]
    first = chosen.drop_duplicates("method").set_index("method")
    marked = {"degenerate": degenerate_marks(first)} if first.get("degenerate", pd.Series(0)).fillna(0).any() else {}
    return pd.DataFrame({"point": first.point, **marked, **columns}).fillna("").reset_index()


def degenerate_marks(first: pd.DataFrame) -> pd.Series:
    """Per method, how many of its trials at the chosen point are degenerate (a task in fewer
    clusters than asked): "collapsed" when all are, "" when none is."""
    return pd.Series(["" if not d else "collapsed" if d >= n else f"{int(d)} of {int(n)}"
                      for d, n in zip(first.degenerate.fillna(0), first.n)], index=first.index)


def overview_table(cells: pd.DataFrame, metric: str, selection: str = BEST) -> pd.DataFrame:
    """Benchmarks x methods: the mean of ``metric`` over tasks at each method's point of
    ``selection``, "mean ± std" over seeds, the highest of each benchmark in bold (ties all bold)."""
    chosen = cells[(cells.selection == selection) & (cells.metric == metric) & (cells.task == "mean")]
    means = chosen.pivot(index="benchmark", columns="method", values="mean")
    stds = chosen.pivot(index="benchmark", columns="method", values="std")
    text = pd.DataFrame({method: [mean_std(m, s) for m, s in zip(means[method], stds[method])]
                         for method in means.columns}, index=means.index)
    best = means.eq(means.max(axis=1), axis=0)
    return text.where(~best, "**" + text + "**").reset_index()


def label_free_table(cells: pd.DataFrame, selection: str) -> pd.DataFrame:
    """Methods x tasks (and mean): accuracy at the point of ``selection`` and, in brackets, its
    gap to the accuracy at the best point."""
    acc = cells[cells.metric == "acc"].set_index(["method", "task", "selection"])
    here = acc.xs(selection, level="selection")
    gap = here["mean"] - acc.xs(BEST, level="selection")["mean"].reindex(here.index)
    text = pd.Series([f"{mean_std(m, s)} ({g:+.4f})" for m, s, g in zip(here["mean"], here["std"], gap)],
                     index=here.index).unstack("task")
    tasks = task_order(text.columns)
    points = here.point.groupby(level="method").first()
    return pd.DataFrame({"point": points, **{task: text[task] for task in tasks}}).fillna("").reset_index()


def criteria_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Which label-free criterion comes closest to the best point on one benchmark: per
    criterion, over the methods that logged it, the mean and the largest loss of mean
    accuracy against the best point, and on how many methods it found the best point's
    accuracy."""
    acc = cells[(cells.metric == "acc") & (cells.task == "mean")].set_index(["method", "selection"])["mean"]
    best = acc.xs(BEST, level="selection")
    rows = []
    for selection in LABEL_FREE:
        if selection not in acc.index.get_level_values("selection"):
            continue
        loss = best.reindex(acc.xs(selection, level="selection").index) - acc.xs(selection, level="selection")
        rows.append({"criterion": selection, "methods": len(loss), "mean loss": f"{loss.mean():.4f}",
                     "largest loss": f"{loss.max():.4f}", "finds the best accuracy": f"{int((loss <= 1e-12).sum())}"})
    table = pd.DataFrame(rows)
    return table.sort_values("mean loss", kind="stable") if len(table) else table


def wilcoxon_markdown(tests: pd.DataFrame) -> pd.DataFrame:
    """wilcoxon.csv rows of one benchmark, formatted for compare.md."""
    return pd.DataFrame({
        "task": tests.task, "best": [f"{b} ({m:.4f})" for b, m in zip(tests.best, tests.best_mean)],
        "other": [f"{o} ({m:.4f})" for o, m in zip(tests.other, tests.other_mean)], "seeds": tests.n_pairs,
        "statistic": tests.statistic.map(lambda v: "" if pd.isna(v) else f"{v:g}"),
        "p": tests.p.map(lambda v: "" if pd.isna(v) else f"{v:.4g}"), "note": tests.note.fillna("")})


def accuracy_loss_parts(benchmark: str, cells: pd.DataFrame) -> list[str]:
    """The lines of compare.md on the accuracy at the label-free points of one benchmark's sweeps."""
    parts = []
    criteria = criteria_table(cells)
    if len(criteria):
        closest = criteria.iloc[0]
        parts += ["### choosing the grid point without labels: how much accuracy each criterion loses", "",
                  markdown_table(criteria), "",
                  f"Closest to the best point on {benchmark}: `{closest.criterion}` (mean loss {closest['mean loss']} "
                  f"over {closest.methods} methods).", ""]
    for selection in LABEL_FREE:
        if (cells.selection == selection).any():
            parts += [f"### acc at the label-free point `{selection}`: {SELECTIONS[selection]} (in brackets: minus "
                      "the best point's acc)", "",
                      markdown_table(label_free_table(cells, selection)), ""]
    return parts


def benchmark_section(benchmark: str, comparison: Comparison, metrics: list[str], figures: dict) -> list[str]:
    """The lines of compare.md on one benchmark (with the criterion acc, also the accuracy at
    the label-free points)."""
    cells = comparison.cells[comparison.cells.benchmark == benchmark]
    criterion = comparison.criterion
    parts = [f"## {benchmark}", ""]
    for metric in metrics:
        parts += [f"### {metric} at the {SELECTIONS[criterion]}", "",
                  markdown_table(score_table(cells, metric, criterion)), ""]
    curves = comparison.size_curves[comparison.size_curves.benchmark == benchmark]
    if len(curves):
        parts += [f"### mean {metrics[0]} over tasks per sample size, at each method's best point over all sizes "
                  "(mean ± std over draws (number of draws); the highest per size in bold)", "",
                  markdown_table(size_table(curves)), "",
                  f"![{metrics[0]} against the sample size on {benchmark}]({figures[None, benchmark].name})", ""]
    if criterion == BEST:
        parts += accuracy_loss_parts(benchmark, cells)
    tests = comparison.wilcoxon[comparison.wilcoxon.benchmark == benchmark]
    if len(tests):
        parts += [f"### Wilcoxon signed-rank tests of {metrics[0]} (two-sided, paired by seed; best method against "
                  "each other, not corrected for multiple tests)", "", markdown_table(wilcoxon_markdown(tests)), ""]
    for sweep in comparison.sweeps:
        if sweep.benchmark == benchmark:
            figure = figures.get((sweep.method, benchmark))
            parts += [f"![{sweep.method} on {benchmark}]({figure.name})" if figure else
                      f"{sweep.method} on {benchmark}: no grid (one point), no heatmap", ""]
    return parts


def friedman_section(comparison: Comparison, metric: str, cd_figure: Path | None) -> list[str]:
    """The lines of compare.md on the Friedman and Nemenyi tests over all benchmarks (ranks with
    two decimals); without a diagram (``cd_refusal``) it says why, and shows no critical
    difference."""
    parts = [f"## Friedman test of {metric} over (benchmark, task) cells", ""]
    if not len(comparison.friedman):
        return parts + ["No Friedman test: it needs a set of at least 3 methods with results in at least 2 "
                        "(benchmark, task) cells, not all tied in every cell.", ""]
    first = comparison.friedman.iloc[0]
    ranks = comparison.rank_table.rank(axis=1, ascending=False)
    shown = comparison.rank_table.map("{:.4f}".format) + ranks.map(" ({:.2f})".format)
    average = comparison.friedman[["method", "average_rank"]].assign(
        average_rank=comparison.friedman.average_rank.map("{:.2f}".format))
    refusal = cd_refusal(comparison.friedman)
    parts += [f"Methods with results in every cell used: {', '.join(comparison.rank_table.columns)}; "
              f"{first.n_cells} cells (the best point's mean per task; the task mean is not a cell). "
              f"Friedman chi-square = {first.statistic:.4g}, p = {first.p:.4g}.", "",
              "Means (rank in the cell, 1 = best):", "", markdown_table(shown.reset_index()), "",
              "Average ranks" + ("" if refusal else f" (Nemenyi's critical difference at {ALPHA}: "
                                                      f"{first.critical_difference:.2f})") + ":", "",
              markdown_table(average), "",
              "Nemenyi post-hoc p-values:", "", markdown_table(comparison.nemenyi.round(4).reset_index()), ""]
    parts += [refusal, ""] if refusal else [f"![critical-difference diagram]({cd_figure.name})", ""]
    return parts


def compare_markdown(comparison: Comparison, metrics: list[str], figures: dict, cd_figure: Path | None,
                     source: str) -> str:
    """compare.md: the sweeps read, notes, one section per benchmark, the Friedman section."""
    sweeps = pd.DataFrame([{"benchmark": s.benchmark, "method": s.method, "parent run": s.run_id,
                            "seeds at best": s.points[comparison.criterion].n_runs,
                            **{f"point: {sel}": s.points[sel].point if sel in s.points else "" for sel in SELECTIONS
                               if sel != BEST or comparison.criterion == BEST}}
                           for s in comparison.sweeps])
    parts = [f"# Comparison of {len(comparison.sweeps)} sweeps ({source})", "",
             "Mean ± std (ddof = 1) over seeds. Published numbers: mtc/published_results.csv, matched on benchmark, "
             "method, task and metric (where several papers print a cell, the first row of the file; methods with "
             "no config of ours, `paper:*`, are not shown).", "",
             markdown_table(sweeps), ""]
    parts += [f"- {note}" for note in comparison.notes] + ([""] if comparison.notes else [])
    chosen_by = ("best grid point by mean accuracy" if comparison.criterion == BEST else
                 f"grid point of the {SELECTIONS[comparison.criterion]}")
    parts += [f"## Overview: mean {metrics[0]} over tasks at each method's {chosen_by}", "",
              "Mean ± std over seeds; the highest on each benchmark in bold; the per-task tables, the published "
              "numbers and the tests are in the benchmark's section.", "",
              markdown_table(overview_table(comparison.cells, metrics[0], comparison.criterion)), ""]
    for benchmark in sorted(set(sweeps.benchmark)):
        parts += benchmark_section(benchmark, comparison, metrics, figures)
    return "\n".join(parts + friedman_section(comparison, metrics[0], cd_figure))


# --- the command ----------------------------------------------------------------------


def check_metric(metric: str) -> None:
    """Raise InputError unless ``metric`` is one of the per-task scores (METRIC_NAMES)."""
    if metric not in METRIC_NAMES:
        raise InputError(f"unknown --metric {metric!r}; choose one of {', '.join(METRIC_NAMES)}")


def check_criterion(criterion: str | None) -> None:
    """Raise InputError unless ``criterion`` is None (chosen by the sweeps) or one of RANKING."""
    if criterion is None or criterion in RANKING:
        return
    why = f"--criterion {criterion}: {NOT_RANKING[criterion]}" if criterion in NOT_RANKING else \
        f"unknown --criterion {criterion!r}"
    raise InputError(f"{why}; choose one of {', '.join(RANKING)}")


def criterion_metric(criterion: str, metric: str) -> str:
    """The score the tables show: ``metric`` at the best point by accuracy, else the label-free
    criterion's own (``silhouette``).

    Raises
    ------
    InputError
        A ``metric`` other than acc with a label-free criterion.
    """
    if criterion == BEST:
        return metric
    if metric != "acc":
        raise InputError(f"--metric {metric} needs --criterion acc (labels); by {criterion} the tables show "
                         f"{CRITERIA[criterion][0]}")
    return CRITERIA[criterion][0].split("/")[0]


def build_comparison(sweeps: list[Sweep], notes: list[str], metric: str, published: pd.DataFrame,
                     criterion: str = BEST) -> Comparison:
    """Cells, tests and ranks of the sweeps for ``metric`` at the points of ``criterion`` (and
    acc and nmi_max in cells when the criterion is accuracy)."""
    tabled = [metric, "acc", SECOND_METRIC] if criterion == BEST else [metric]
    cells = cell_frame(sweeps, list(dict.fromkeys(tabled)), published)
    table = rank_table(cells, metric, criterion)
    if table.shape[1] >= 3 and len(table) >= 2 and (table.nunique(axis=1) > 1).any():
        friedman, nemenyi = friedman_frames(table)
    else:
        friedman, nemenyi = pd.DataFrame(columns=FRIEDMAN_COLUMNS), pd.DataFrame(index=pd.Index([], name="method"))
    return Comparison(sweeps, cells, wilcoxon_frame(seed_values(sweeps, metric, criterion), metric, cells, criterion),
                      friedman, nemenyi, table, size_curve_frame(sweeps, criterion, metric), notes, criterion, metric)


def read_comparison(client, experiment_id: str, metric: str = BEST, benchmarks: list[str] | None = None,
                    methods: list[str] | None = None, criterion: str | None = None,
                    published: Path = PUBLISHED) -> Comparison:
    """The comparison of the experiment's newest finished sweeps, in memory (what ``compare``
    writes and ``mtc.results.comparison`` returns); ``criterion`` None: accuracy, or silhouette
    when no sweep has accuracy (``comparison_criterion``)."""
    numbers = load_published(published)  # a bad file is found before the sweeps are read
    sweeps, notes = finished_sweeps(client, experiment_id, benchmarks, methods, criterion)
    criterion = criterion or comparison_criterion([sweep.points for sweep in sweeps])
    metric = criterion_metric(criterion, metric)
    return build_comparison(sweeps, notes, metric, numbers, criterion)


def write_outputs(comparison: Comparison, metric: str, out: Path, source: str) -> list[Path]:
    """Write compare.md, the CSVs and the PNGs to ``out``; returns their paths. Figures name the
    methods in the papers' terms (``display_names``); a critical-difference diagram is drawn
    only when ``cd_refusal`` finds no reason against it (a stale one in ``out`` is removed)."""
    out.mkdir(parents=True, exist_ok=True)
    names = display_names(comparison.sweeps)
    figures = {(s.method, s.benchmark): sweep_heatmap(s, metric, out, comparison.criterion, names[s.method])
               for s in comparison.sweeps}
    for benchmark, curves in comparison.size_curves.groupby("benchmark"):
        figures[None, benchmark] = out / f"size_curves_{benchmark}.png"
        draw_size_curves(curves, benchmark, metric, figures[None, benchmark], title=benchmark_title(benchmark),
                         names=names)
    cd_figure = out / "critical_difference.png"
    if len(comparison.friedman) and cd_refusal(comparison.friedman) is None:
        draw_cd_diagram(comparison.friedman, comparison.nemenyi, metric, cd_figure, names)
    else:
        cd_figure.unlink(missing_ok=True)
        cd_figure = None
    frames = {"cells.csv": comparison.cells, "wilcoxon.csv": comparison.wilcoxon,
              "friedman.csv": comparison.friedman, "nemenyi.csv": comparison.nemenyi,
              **({"size_curves.csv": comparison.size_curves} if len(comparison.size_curves) else {})}
    for name, frame in frames.items():
        frame.to_csv(out / name, index=name == "nemenyi.csv")
    metrics = list(dict.fromkeys([metric, SECOND_METRIC])) if comparison.criterion == BEST else [metric]
    (out / "compare.md").write_text(compare_markdown(comparison, metrics, figures, cd_figure, source))
    figure_paths = [p for p in [*figures.values(), cd_figure] if p is not None]
    return [out / "compare.md", *(out / name for name in frames), *figure_paths]


def log_run(client, experiment_id: str, paths: list[Path], metric: str, sweeps: list[Sweep],
            criterion: str = BEST) -> str:
    """A new MLflow run "compare" (tag mtc.kind=compare) holding the files; returns its id."""
    run = client.create_run(experiment_id, run_name="compare", tags={KIND_TAG: "compare"})
    run_id = run.info.run_id
    client.log_param(run_id, "metric", metric)
    client.log_param(run_id, "criterion", criterion)
    client.log_param(run_id, "sweeps", len(sweeps))
    for path in paths:
        client.log_artifact(run_id, str(path))
    client.set_terminated(run_id, "FINISHED")
    return run_id


def compare(tracking_uri: str, experiment: str, out: Path, metric: str = "acc", benchmarks: list[str] | None = None,
            methods: list[str] | None = None, log: bool = True, published: Path = PUBLISHED,
            criterion: str | None = None) -> dict:
    """Compare the finished sweeps of an experiment; write and (when ``log``) log the outputs.

    Parameters
    ----------
    tracking_uri, experiment : str
        The MLflow store and experiment holding the sweeps.
    out : pathlib.Path
        Folder for compare.md, the CSVs and the PNGs.
    metric : str
        The score of the tables, tests and ranks (one of METRIC_NAMES) with the criterion acc.
    benchmarks, methods : list of str, optional
        Keep only these (all when not given).
    log : bool
        Log the files to a new MLflow run "compare".
    published : pathlib.Path
        The CSV of published numbers.
    criterion : str, optional
        What chooses each sweep's point and ranks the methods: ``acc`` or ``silhouette``
        (RANKING); by default acc, or silhouette, with a note, when no sweep has accuracy.

    Returns
    -------
    dict
        ``comparison`` (Comparison), ``paths`` (files written), ``run_id`` (None without ``log``).

    Raises
    ------
    InputError
        Unknown metric or criterion, a metric other than acc with a label-free criterion, no
        store, no such experiment, no finished sweep (after the filters).
    """
    check_metric(metric)
    check_criterion(criterion)
    client, experiment_id = open_experiment(tracking_uri, experiment)
    comparison = read_comparison(client, experiment_id, metric, benchmarks, methods, criterion, published)
    paths = write_outputs(comparison, comparison.metric, out, f"experiment `{experiment}` of {tracking_uri}")
    run_id = log_run(client, experiment_id, paths, comparison.metric, comparison.sweeps,
                     comparison.criterion) if log else None
    return {"comparison": comparison, "paths": paths, "run_id": run_id}


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line of ``python -m mtc.results.compare``."""
    parser = argparse.ArgumentParser(prog="python -m mtc.results.compare", description=__doc__.splitlines()[0])
    parser.add_argument("--tracking-uri", default="sqlite:///mlflow.db", help="the sweeps' MLflow store")
    parser.add_argument("--experiment", default="mtc")
    parser.add_argument("--out", type=Path, default=Path("outputs/compare"), help="folder for the outputs")
    parser.add_argument("--metric", default="acc", help=f"one of {', '.join(METRIC_NAMES)} (with --criterion acc)")
    parser.add_argument("--criterion", help=f"what chooses each sweep's grid point and ranks the methods: "
                                            f"{' or '.join(RANKING)} (label-free; the tables then show it); default: "
                                            "acc, or silhouette when no sweep has accuracy (data without labels)")
    parser.add_argument("--benchmarks", nargs="+",
                        help="only these benchmarks; <data>@<n1>+<n2> pools the sweeps <data>-n<n1>, <data>-n<n2>")
    parser.add_argument("--methods", nargs="+", help="only these methods (sweep labels, e.g. smbc_sequential)")
    parser.add_argument("--published", type=Path, default=PUBLISHED, help="CSV of published numbers")
    parser.add_argument("--no-log", action="store_true", help="do not log the outputs to an MLflow run")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run the command; bad input is one line on stderr and exit 2."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    preflight.process_env()
    try:
        result = compare(args.tracking_uri, args.experiment, args.out, args.metric, args.benchmarks, args.methods,
                         not args.no_log, args.published, args.criterion)
    except InputError as error:
        fail(error)
    comparison = result["comparison"]
    for note in comparison.notes:
        print(note)
    print(f"compared {len(comparison.sweeps)} sweeps: {result['paths'][0]}")
    if result["run_id"]:
        print(f"MLflow compare run: {result['run_id']}")


if __name__ == "__main__":
    main()
