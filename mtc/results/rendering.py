"""What a comparison shows: the figures (grid heatmaps, the critical-difference diagram), the
markdown tables and ``compare.md``, and the files ``mtc.results.compare`` writes to ``--out``
(``write_outputs``).

The figures name methods in the papers' terms (a method config's ``display``, e.g. A-Ncut; a
variant keeps its label), print ranks with two decimals and name a pooled benchmark in words.
A grid heatmap's colours span a stated range (0 to 1 for the scores), its title names the
parameters with no effect, and a red box marks the cell of the point the tables use."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import scikit_posthocs
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from mtc.config import method_display_names
from mtc.metrics import METRIC_NAMES
from mtc.results.cells import NOT_AN_ANSWER, SECOND_METRIC, answer_marks, not_an_answer, task_order
from mtc.results.reading import BEST, NO_LABELS_BEST, POOL_MARK, Sweep
from mtc.results.recommend import recommendation_lines
from mtc.results.report import SELECTIONS
from mtc.results.significance import ALPHA, cd_refusal
from mtc.results.size_curves import draw_size_curves, size_table

if TYPE_CHECKING:
    from mtc.results.compare import Comparison

LABEL_FREE = tuple(selection for selection in SELECTIONS if selection != BEST)
NO_EFFECT = 5e-4  # a grid parameter whose points' means differ by no more: "no effect" (half the 3rd decimal)
BOUNDED_SCORES = (*METRIC_NAMES, "silhouette")  # scores within [-1, 1]; the heatmaps' colours span 0 to 1 (or -1 to 1)
FIGURE_DPI = 100  # every figure is at least 12 inches wide: >= 1200 px


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


def store_description(uri: str, folder: Path) -> str:
    """A store as a generated page names it: a SQLite file relative to the page's folder, any
    other store by its kind (no machine's path or address in a committed page)."""
    if uri.startswith("sqlite:///"):
        return f"the SQLite store {os.path.relpath(uri[len('sqlite:///'):], folder)}"
    return "a tracking server" if uri.startswith(("http://", "https://")) else "a database store"


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
    published number beside every task for which some method has one; a ``not an answer`` column
    marks the methods with degenerate or unmoved trials at their point, when one has any
    (mtc.results.cells.answer_marks)."""
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
    marks = answer_marks(first)
    marked = {"not an answer": marks} if marks.astype(bool).any() else {}  # answer_marks, cells.not_an_answer
    return pd.DataFrame({"point": first.point, **marked, **columns}).fillna("").reset_index()


def overview_table(cells: pd.DataFrame, metric: str, selection: str = BEST) -> pd.DataFrame:
    """Benchmarks x methods: the mean of ``metric`` over tasks at each method's point of
    ``selection``, "mean ± std" over seeds, the highest of each benchmark's answers in bold (ties
    all bold); a point that is no answer (mtc.results.cells.not_an_answer: collapsed or never
    moved) is marked in brackets and never bold."""
    chosen = cells[(cells.selection == selection) & (cells.metric == metric) & (cells.task == "mean")]
    chosen = chosen.assign(answer=~not_an_answer(chosen), mark=answer_marks(chosen))
    means, stds, marks, answers = (chosen.pivot(index="benchmark", columns="method", values=column)
                                   for column in ("mean", "std", "mark", "answer"))
    text = pd.DataFrame({method: [mean_std(m, s) + (f" ({mark})" if isinstance(mark, str) and mark else "")
                                  for m, s, mark in zip(means[method], stds[method], marks[method])]
                         for method in means.columns}, index=means.index)
    answers = answers.fillna(False).astype(bool)
    ranked = means.where(answers)
    best = ranked.eq(ranked.max(axis=1), axis=0)
    return text.where(~best, "**" + text + "**").reset_index()


def held_back_table(comparison: Comparison) -> pd.DataFrame:
    """Per sweep with anything not in its answer: its failed trials, the grid points it left out
    before Ray (the method cannot fit the data) and what is wrong at its chosen point
    (answer_marks); empty when every sweep's trials all finished as answers."""
    chosen = comparison.cells[(comparison.cells.selection == comparison.criterion) & (comparison.cells.task == "mean")]
    marks = chosen.assign(mark=answer_marks(chosen)).drop_duplicates(["benchmark", "method"]).set_index(
        ["benchmark", "method"])["mark"]
    rows = [{"benchmark": s.benchmark, "method": s.method, "failed trials": s.failed,
             "grid points left out": len(s.left_out), "at the chosen point": marks.get((s.benchmark, s.method), ""),
             "why left out": "; ".join(dict.fromkeys(s.left_out.values()))}
            for s in comparison.sweeps]
    table = pd.DataFrame(rows, columns=["benchmark", "method", "failed trials", "grid points left out",
                                        "at the chosen point", "why left out"])
    kept = (table["failed trials"] > 0) | (table["grid points left out"] > 0) | table["at the chosen point"].astype(bool)
    return table[kept]


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
    """The lines of compare.md on one benchmark: its score tables (per task, beside the published
    numbers), its sample-size curve and its grid heatmaps; the long tables are in
    ``benchmark_details``."""
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
    for sweep in comparison.sweeps:
        if sweep.benchmark == benchmark:
            figure = figures.get((sweep.method, benchmark))
            parts += [f"![{sweep.method} on {benchmark}]({figure.name})" if figure else
                      f"{sweep.method} on {benchmark}: no grid (one point), no heatmap", ""]
    return parts


def benchmark_details(benchmark: str, comparison: Comparison, metrics: list[str]) -> list[str]:
    """The long tables of one benchmark, at the end of compare.md: the accuracy at the
    label-free points (with the criterion acc) and the Wilcoxon tests."""
    cells = comparison.cells[comparison.cells.benchmark == benchmark]
    parts = accuracy_loss_parts(benchmark, cells) if comparison.criterion == BEST else []
    tests = comparison.wilcoxon[comparison.wilcoxon.benchmark == benchmark]
    if len(tests):
        parts += [f"### Wilcoxon signed-rank tests of {metrics[0]} (two-sided, paired by seed; best method against "
                  "each other, not corrected for multiple tests)", "", markdown_table(wilcoxon_markdown(tests)), ""]
    return [f"## {benchmark}: label-free points and tests", "", *parts] if parts else []


def friedman_section(comparison: Comparison, metric: str, cd_figure: Path | None) -> list[str]:
    """The lines of compare.md on the Friedman test over all benchmarks: the test, the average
    ranks (two decimals) and the critical-difference diagram, or why there is none (``cd_refusal``:
    then no critical difference is shown). Its cells and Nemenyi's p-values are in
    ``friedman_details``."""
    parts = [f"## Friedman test of {metric} over (benchmark, task) cells", ""]
    if not len(comparison.friedman):
        return parts + ["No Friedman test: it needs a set of at least 3 methods with results in at least 2 "
                        "(benchmark, task) cells, not all tied in every cell.", ""]
    first = comparison.friedman.iloc[0]
    average = comparison.friedman[["method", "average_rank"]].assign(
        average_rank=comparison.friedman.average_rank.map("{:.2f}".format))
    refusal = cd_refusal(comparison.friedman)
    parts += [f"Methods with results in every cell used: {', '.join(comparison.rank_table.columns)}; "
              f"{first.n_cells} cells (the best point's mean per task; the task mean is not a cell). "
              f"Friedman chi-square = {first.statistic:.4g}, p = {first.p:.4g}.", "",
              "Average ranks" + ("" if refusal else f" (Nemenyi's critical difference at {ALPHA}: "
                                                      f"{first.critical_difference:.2f})") + ":", "",
              markdown_table(average), ""]
    parts += [refusal, ""] if refusal else [f"![critical-difference diagram]({cd_figure.name})", ""]
    return parts


def friedman_details(comparison: Comparison) -> list[str]:
    """The Friedman test's cells (means with their rank in the cell) and Nemenyi's p-values."""
    if not len(comparison.friedman):
        return []
    ranks = comparison.rank_table.rank(axis=1, ascending=False)
    shown = comparison.rank_table.map("{:.4f}".format) + ranks.map(" ({:.2f})".format)
    return ["## Friedman test: its cells and Nemenyi's p-values", "",
            "Means (rank in the cell, 1 = best):", "", markdown_table(shown.reset_index()), "",
            "Nemenyi post-hoc p-values:", "", markdown_table(comparison.nemenyi.round(4).reset_index()), ""]


MACHINE_SEPARATOR = " | "  # between a sweep's machine lines in sweeps.csv


def sweeps_frame(comparison: Comparison) -> pd.DataFrame:
    """``sweeps.csv``: every sweep read, its parent run, its point of each selection and the
    machines that fitted its trials."""
    return pd.DataFrame([{"benchmark": s.benchmark, "method": s.method, "parent_run": s.run_id,
                          "seeds_at_best": s.points[comparison.criterion].n_runs,
                          **{f"point_{sel}": s.points[sel].point if sel in s.points else "" for sel in SELECTIONS
                             if sel != BEST or comparison.criterion == BEST},
                          "machines": MACHINE_SEPARATOR.join(s.machines)} for s in comparison.sweeps],
                        columns=["benchmark", "method", "parent_run", "seeds_at_best",
                                 *(f"point_{sel}" for sel in SELECTIONS if sel != BEST or comparison.criterion == BEST),
                                 "machines"])


def machines_paragraph(sweeps: list[Sweep]) -> list[str]:
    """Which machines fitted the trials read (their tag ``mtc.machine``), with how many trials
    and sweeps each: the last bits of a fit, and so a few cells, can follow the machine."""
    trials, sweep_counts = Counter(), Counter()
    for sweep in sweeps:
        trials.update(sweep.machines)
        sweep_counts.update(sweep.machines.keys())
    if not trials:
        return []
    lines = [f"- `{machine}`: {trials[machine]} trials of {sweep_counts[machine]} sweeps"
             for machine in sorted(trials, key=lambda m: (-trials[m], m))]
    which = "one machine" if len(trials) == 1 else f"{len(trials)} machines (sweeps.csv says which sweep on which)"
    return [f"The trials read were fitted on {which}; a fit's last bits, and so a cell's, can follow the "
            "machine (its CPU, BLAS kernels and library versions):", "", *lines, ""]


def compare_markdown(comparison: Comparison, metrics: list[str], figures: dict, cd_figure: Path | None,
                     source: str) -> str:
    """compare.md, what a reader looks for first: the overview, the ranks over every benchmark
    with their diagram, then per benchmark its tables beside the published numbers and its
    figures; the long tables (label-free points, tests, the Friedman cells, the sweeps read) at
    the end, the parent runs' ids in sweeps.csv."""
    sweeps = sweeps_frame(comparison)
    parts = [f"# Comparison of {len(comparison.sweeps)} sweeps ({source})", "",
             "Mean ± std (ddof = 1) over seeds. Published numbers: mtc/published_results.csv, matched on benchmark, "
             "method, task and metric (where several papers print a cell, the first row of the file; methods with "
             "no config of ours, `paper:*`, are not shown). The sweeps read, their parent runs, chosen points and the "
             "machines that fitted them: sweeps.csv and the last section.", ""]
    parts += [f"- {note}" for note in comparison.notes] + ([""] if comparison.notes else [])
    chosen_by = ("best grid point by mean accuracy" if comparison.criterion == BEST else
                 f"grid point of the {SELECTIONS[comparison.criterion]}")
    parts += [f"## Overview: mean {metrics[0]} over tasks at each method's {chosen_by}", "",
              "Mean ± std over seeds; the highest answer on each benchmark in bold. A method's chosen point is no "
              f"answer when at least {NOT_AN_ANSWER:.0%} of its trials there collapsed (a task in fewer clusters than "
              "asked) or never moved from their k-means start: it is marked in brackets, never bold, and left out of "
              "the Friedman ranks. The per-task tables, the published numbers and the tests are in the benchmark's "
              "section.", "",
              markdown_table(overview_table(comparison.cells, metrics[0], comparison.criterion)), ""]
    held_back = held_back_table(comparison)
    if len(held_back):
        parts += ["### Not in the answers: failed trials, grid points left out, collapses", "",
                  f"{int(held_back['failed trials'].sum())} failed trial(s) and "
                  f"{int(held_back['grid points left out'].sum())} grid point(s) left out before Ray (the method "
                  "cannot fit this data) in the sweeps read; every method's chosen point and score above is over its "
                  "finished trials only.", "", markdown_table(held_back), ""]
    parts += recommendation_lines(comparison.sweeps)
    parts += friedman_section(comparison, metrics[0], cd_figure)
    benchmarks = sorted(set(sweeps.benchmark))
    for benchmark in benchmarks:
        parts += benchmark_section(benchmark, comparison, metrics, figures)
    for benchmark in benchmarks:
        parts += benchmark_details(benchmark, comparison, metrics)
    parts += friedman_details(comparison)
    read = sweeps.drop(columns=["parent_run", "machines"]).rename(
        columns=lambda c: f"point: {c.removeprefix('point_')}" if c.startswith("point_") else c.replace("_", " "))
    parts += ["## The sweeps read", "", *machines_paragraph(comparison.sweeps), markdown_table(read), ""]
    return "\n".join(parts)


# --- the outputs -------------------------------------------------------------------------


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
    frames = {"cells.csv": comparison.cells, "sweeps.csv": sweeps_frame(comparison),
              "wilcoxon.csv": comparison.wilcoxon, "friedman.csv": comparison.friedman, "nemenyi.csv": comparison.nemenyi,
              **({"size_curves.csv": comparison.size_curves} if len(comparison.size_curves) else {})}
    for name, frame in frames.items():
        frame.to_csv(out / name, index=name == "nemenyi.csv")
    metrics = list(dict.fromkeys([metric, SECOND_METRIC])) if comparison.criterion == BEST else [metric]
    (out / "compare.md").write_text(compare_markdown(comparison, metrics, figures, cd_figure, source))
    figure_paths = [p for p in [*figures.values(), cd_figure] if p is not None]
    return [out / "compare.md", *(out / name for name in frames), *figure_paths]
