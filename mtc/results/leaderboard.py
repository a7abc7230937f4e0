"""A leaderboard: methods the papers never ran, set beside each paper's methods (as we run
them) and its published numbers, benchmark by benchmark (``python -m mtc.reproduce <study>
--with METHOD``; mtc.protocols plans its sweeps).

For every paper, benchmark and added method it tables the method's accuracy and NMI (mean ±
std over seeds of the mean over tasks) at its best grid point by accuracy (the papers'
selection rule, as in compare), its rank among the paper's methods as we run them and among
the published numbers, and a Wilcoxon signed-rank test against each paper method on the same
cells (pairs: every task x seed or draw; Holm-corrected over the paper's methods, statsmodels);
per paper, the Friedman test over its (benchmark, task) cells with Nemenyi's critical
difference and, where the cells allow it (mtc.results.significance.cd_refusal), the diagram;
and one figure of where each added method stands on every benchmark. The cells, per-seed
values, pair test and Friedman test are compare's own (mtc.results.compare.read_comparison,
mtc.results.cells.seed_values, mtc.results.significance).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from mtc.results.cells import PUBLISHED, SECOND_METRIC, load_published, seed_values
from mtc.results.reading import BEST
from mtc.results.rendering import (
    FIGURE_DPI,
    benchmark_title,
    draw_cd_diagram,
    machines_paragraph,
    markdown_table,
    mean_std,
)
from mtc.results.significance import ALPHA, cd_refusal, friedman_frames, rank_table, wilcoxon_pair

METRICS = (BEST, SECOND_METRIC)  # accuracy and the papers' NMI
KIND = "leaderboard"  # the MLflow run's name and mtc.kind tag
SCORE_COLUMNS = ["paper", "benchmark", "method", "metric", "point", "mean", "std", "n", "degenerate", "rank_ours",
                 "of_ours", "rank_published", "of_published", "best_ours", "best_published"]
TEST_COLUMNS = ["paper", "benchmark", "method", "other", "metric", "method_mean", "other_mean", "n_pairs",
                "statistic", "p", "p_holm", "note"]


def task_means(frame: pd.DataFrame) -> pd.Series:
    """Published numbers of one benchmark and metric, per method: its ``mean`` task where the
    paper prints one, else the mean over its tasks."""
    printed = frame[frame.task == "mean"].set_index("method").paper_mean
    over_tasks = frame[frame.task != "mean"].groupby("method").paper_mean.mean()
    return printed.combine_first(over_tasks)


def rank(value: float, others: pd.Series) -> int:
    """1 + how many of ``others`` are higher (ties share the better rank)."""
    return int(1 + (others.dropna() > value).sum())


def score_rows(paper: str, benchmark: str, method: str, paper_methods: tuple[str, ...], cells: pd.DataFrame,
               published: pd.DataFrame) -> list[dict]:
    """The method's row per metric on one benchmark: its score at its best point and its ranks."""
    rows = []
    chosen = cells[(cells.selection == BEST) & (cells.task == "mean") & (cells.benchmark == benchmark)]
    for metric in METRICS:
        at = chosen[chosen.metric == metric].set_index("method")
        if method not in at.index:
            continue
        mine = at.loc[method]
        ours = at["mean"].reindex(list(paper_methods))
        printed = task_means(published[(published.benchmark == benchmark) & (published.metric == metric)])
        rows.append({"paper": paper, "benchmark": benchmark, "method": method, "metric": metric, "point": mine.point,
                     "mean": mine["mean"], "std": mine["std"], "n": mine.n, "degenerate": mine.degenerate,
                     "rank_ours": rank(mine["mean"], ours), "of_ours": int(ours.notna().sum()) + 1,
                     "rank_published": rank(mine["mean"], printed) if len(printed) else np.nan,
                     "of_published": len(printed) + 1 if len(printed) else np.nan,
                     "best_ours": ours.max(), "best_published": printed.max() if len(printed) else np.nan})
    return rows


def holm(p: pd.Series) -> pd.Series:
    """Holm's step-down adjustment of the tested p-values (statsmodels); NaN stays NaN."""
    from statsmodels.stats.multitest import multipletests

    tested = p.dropna()
    adjusted = pd.Series(np.nan, index=p.index)
    if len(tested):
        adjusted[tested.index] = multipletests(tested.to_numpy(), alpha=ALPHA, method="holm")[1]
    return adjusted


def test_rows(paper: str, benchmark: str, method: str, paper_methods: tuple[str, ...], values: dict) -> list[dict]:
    """Wilcoxon signed-rank tests of ``method`` against each paper method on one benchmark,
    paired on every (task, seed) both have, Holm-corrected over the paper's methods."""
    rows = []
    for metric in METRICS:
        frame = values[metric]
        here = frame[(frame.benchmark == benchmark) & (frame.task != "mean")].set_index(["task", "seed"])
        if method not in set(here.method):
            continue
        mine = here[here.method == method].value
        tests = []
        for other in paper_methods:
            theirs = here[here.method == other].value
            if theirs.empty:
                continue
            tests.append({"paper": paper, "benchmark": benchmark, "method": method, "other": other, "metric": metric,
                          "method_mean": mine.mean(), "other_mean": theirs.mean(), **wilcoxon_pair(mine, theirs)})
        if tests:
            frame_tests = pd.DataFrame(tests)
            frame_tests["p_holm"] = holm(frame_tests.p)
            rows += frame_tests.to_dict("records")
    return rows


def verdict(tests: pd.DataFrame) -> tuple[str, str]:
    """The paper methods the added method beats and trails significantly (Holm p < ALPHA)."""
    significant = tests[tests.p_holm < ALPHA]
    better = significant[significant.method_mean > significant.other_mean].other
    worse = significant[significant.method_mean < significant.other_mean].other
    return ", ".join(better), ", ".join(worse)


def standing_figure(scores: pd.DataFrame, ours: pd.DataFrame, published: pd.DataFrame, path: Path) -> None:
    """Where each added method stands on every benchmark: per (paper, benchmark) row, the mean
    accuracy over tasks of the paper's methods as we run them (grey dots), the published ones
    (open diamonds) and each added method (a coloured star)."""
    acc = scores[scores.metric == BEST]
    rows = list(dict.fromkeys(zip(acc.paper, acc.benchmark)))
    fig = Figure(figsize=(12, max(3.0, 0.5 * len(rows) + 1.8)), dpi=FIGURE_DPI)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    colours = dict(zip(dict.fromkeys(acc.method), ["tab:red", "tab:blue", "tab:green", "tab:purple", "tab:orange",
                                                   "tab:brown", "tab:pink", "tab:olive", "tab:cyan"] * 10))
    for y, (paper, benchmark) in enumerate(rows):
        mine = ours[(ours.paper == paper) & (ours.benchmark == benchmark)]["mean"]
        printed = published[(published.paper == paper) & (published.benchmark == benchmark)]["mean"]
        ax.scatter(mine, [y] * len(mine), color="grey", s=30, label="the paper's methods, ours" if y == 0 else None)
        ax.scatter(printed, [y] * len(printed), facecolors="none", edgecolors="black", marker="D", s=40,
                   label="the paper's methods, published" if y == 0 else None)
    for method, colour in colours.items():
        these = acc[acc.method == method]
        ax.scatter(these["mean"], [rows.index(key) for key in zip(these.paper, these.benchmark)], color=colour,
                   marker="*", s=180, label=method, zorder=3)
    ax.set_yticks(range(len(rows)), [f"{paper}: {benchmark_title(benchmark)}" for paper, benchmark in rows])
    ax.invert_yaxis()
    ax.set_xlabel("accuracy, mean over tasks at the best grid point")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.2 / max(len(rows), 1)), ncol=4, frameon=False)
    fig.tight_layout()
    fig.savefig(path)


def paper_section(paper: str, scores: pd.DataFrame, tests: pd.DataFrame, friedman: pd.DataFrame,
                  cd_figure: Path | None, why_no_cd: str | None) -> list[str]:
    """One paper's part of leaderboard.md."""
    parts = [f"## {paper}", ""]
    table = []
    for (benchmark, method), rows in scores.groupby(["benchmark", "method"], sort=False):
        by_metric = rows.set_index("metric")
        first = by_metric.loc[BEST] if BEST in by_metric.index else by_metric.iloc[0]
        better, worse = verdict(tests[(tests.benchmark == benchmark) & (tests.method == method)
                                      & (tests.metric == BEST)])
        table.append({"benchmark": benchmark, "method": method, "point": first.point,
                      **{metric: mean_std(by_metric.loc[metric, "mean"], by_metric.loc[metric, "std"])
                         for metric in METRICS if metric in by_metric.index},
                      "rank (ours)": f"{first.rank_ours} of {first.of_ours}",
                      "best acc (ours)": "" if pd.isna(first.best_ours) else f"{first.best_ours:.4f}",
                      "rank (published)": "" if pd.isna(first.rank_published) else
                      f"{first.rank_published:.0f} of {first.of_published:.0f}",
                      "best acc (published)": "" if pd.isna(first.best_published) else f"{first.best_published:.4f}",
                      "beats (Holm p < 0.05)": better, "trails": worse})
    parts += [markdown_table(pd.DataFrame(table)), ""]
    if len(friedman):
        row = friedman.iloc[0]
        ranks = ", ".join(f"{m} {r:.2f}" for m, r in zip(friedman.method, friedman.average_rank))
        parts += [f"Friedman test over {row.n_cells} (benchmark, task) cells of {row.n_methods} methods: "
                  f"statistic {row.statistic:.3f}, p = {row.p:.3g}; average ranks (1 = best) {ranks}; Nemenyi's "
                  f"critical difference {row.critical_difference:.2f}.", ""]
        parts += [f"![critical difference, {paper}]({cd_figure.name})", ""] if cd_figure else [why_no_cd or "", ""]
    else:
        parts += ["No Friedman test: fewer than three methods share two or more cells with results.", ""]
    return parts


def leaderboard_markdown(title: str, source: str, sections: list[str], not_run: dict[str, str],
                         tests: pd.DataFrame, machines: list[str]) -> str:
    """leaderboard.md: the papers' sections, then what could not run, the machines that fitted
    the trials read (``machines``: rendering.machines_paragraph) and every test."""
    parts = [f"# {title}", "",
             "Each added method at its best grid point by accuracy under each paper's protocol (its data, seeds or "
             "draws and sizes; the method's own grid), mean ± std over seeds of the mean over tasks, beside the "
             "paper's methods as we run them and the published numbers (mtc/published_results.csv, the mean over "
             "tasks where the paper prints none). Ranks: 1 = highest accuracy. Beats / trails: Wilcoxon "
             "signed-rank tests on the same (task, seed) cells, Holm-corrected over the paper's methods. "
             f"Read from {source}.", "", "![where each method stands](standing.png)", "", *sections]
    if not_run:
        parts += ["## Benchmarks a method cannot run on", "", "| where | reason |", "|---|---|"]
        parts += [f"| {where} | {why.replace('|', '/')} |" for where, why in not_run.items()] + [""]
    if machines:
        parts += ["## The machines that fitted the trials", "", *machines]
    if len(tests):
        shown = tests.assign(p=tests.p.map("{:.3g}".format), p_holm=tests.p_holm.map("{:.3g}".format),
                             method_mean=tests.method_mean.map("{:.4f}".format),
                             other_mean=tests.other_mean.map("{:.4f}".format))
        parts += ["## Every test", "", markdown_table(shown[["paper", "benchmark", "method", "other", "metric",
                                                             "method_mean", "other_mean", "n_pairs", "p", "p_holm"]]),
                  ""]
    return "\n".join(parts)


def build_leaderboard(client, experiment_id: str, boards: list, methods: list[str], out: Path,
                      not_run: dict[str, str], source: str, published_path: Path = PUBLISHED) -> dict:
    """Read every paper's cells (compare's reading, at the best point by accuracy), table the
    added methods' scores, ranks and tests, and write the leaderboard folder ``out``.

    Each file is written whole in a folder of its own inside ``out``, then moved over the one
    in ``out`` (os.replace): another leaderboard of the same folder running meanwhile (two
    commands a few seconds apart both find every sweep finished) logs and leaves complete
    files, never one the other is rewriting in place.

    Returns
    -------
    dict
        ``scores``, ``tests`` (DataFrames, as leaderboard.csv and tests.csv), ``friedman``
        (paper -> DataFrame) and ``paths`` (the files written).
    """
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".writing-", dir=out))
    try:
        built = write_leaderboard(client, experiment_id, boards, methods, staging, not_run, source, published_path)
        for path in built["paths"]:
            os.replace(path, out / path.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return {**built, "paths": [out / path.name for path in built["paths"]]}


def write_leaderboard(client, experiment_id: str, boards: list, methods: list[str], out: Path,
                      not_run: dict[str, str], source: str, published_path: Path) -> dict:
    """build_leaderboard's reading and tables, its files written in ``out``; what it returns."""
    from mtc.results.compare import read_comparison

    published = load_published(published_path)
    scores, tests, sections, friedmans, ours_rows, printed_rows, paths = [], [], [], {}, [], [], []
    sweeps_read = {}  # parent run -> Sweep: a sweep several papers read counted once
    for board in boards:
        benchmarks = list(board.benchmarks)
        wanted = sorted({m for paper_methods in board.benchmarks.values() for m in paper_methods} | set(methods))
        comparison = read_comparison(client, experiment_id, BEST, benchmarks, wanted, BEST, published_path)
        values = {metric: seed_values(comparison.sweeps, metric, BEST) for metric in METRICS}
        sweeps_read.update((sweep.run_id, sweep) for sweep in comparison.sweeps)
        paper_scores, paper_tests = [], []
        for benchmark, paper_methods in board.benchmarks.items():
            for method in methods:
                paper_scores += score_rows(board.paper, benchmark, method, paper_methods, comparison.cells, published)
                paper_tests += test_rows(board.paper, benchmark, method, paper_methods, values)
            chosen = comparison.cells[(comparison.cells.selection == BEST) & (comparison.cells.task == "mean")
                                      & (comparison.cells.metric == BEST) & (comparison.cells.benchmark == benchmark)]
            ours_rows.append(chosen[chosen.method.isin(paper_methods)].assign(paper=board.paper)[
                ["paper", "benchmark", "method", "mean"]])
            printed = task_means(published[(published.benchmark == benchmark) & (published.metric == BEST)])
            printed_rows.append(pd.DataFrame({"paper": board.paper, "benchmark": benchmark, "mean": printed.to_numpy()}))
        paper_scores = pd.DataFrame(paper_scores, columns=SCORE_COLUMNS)
        paper_tests = pd.DataFrame(paper_tests, columns=TEST_COLUMNS)
        scores.append(paper_scores)
        tests.append(paper_tests)
        table = rank_table(comparison.cells, BEST, BEST)
        friedman = pd.DataFrame()
        cd_figure, why_no_cd = None, None
        if table.shape[1] >= 3 and len(table) >= 2 and (table.nunique(axis=1) > 1).any():
            friedman, nemenyi = friedman_frames(table)
            friedmans[board.paper] = friedman
            for name, frame in ((f"friedman_{board.paper}.csv", friedman), (f"nemenyi_{board.paper}.csv", nemenyi)):
                frame.to_csv(out / name, index=name.startswith("nemenyi"))
                paths.append(out / name)
            why_no_cd = cd_refusal(friedman)
            if why_no_cd is None:
                cd_figure = out / f"critical_difference_{board.paper}.png"
                draw_cd_diagram(friedman, nemenyi, BEST, cd_figure)
                paths.append(cd_figure)
            if not set(methods) & set(table.columns):
                why_no_cd = (why_no_cd or "") + " The added methods are not among the methods with results in every " \
                                                "cell of the test (a benchmark they did not run on)."
        sections += paper_section(board.paper, paper_scores, paper_tests, friedman, cd_figure, why_no_cd)
    scores = pd.concat(scores, ignore_index=True)
    tests = pd.concat(tests, ignore_index=True)
    scores.to_csv(out / "leaderboard.csv", index=False)
    tests.to_csv(out / "tests.csv", index=False)
    pd.DataFrame(list(not_run.items()), columns=["where", "reason"]).to_csv(out / "not_run.csv", index=False)
    standing_figure(scores, pd.concat(ours_rows, ignore_index=True), pd.concat(printed_rows, ignore_index=True),
                    out / "standing.png")
    title = f"Leaderboard: {', '.join(methods)} against {', '.join(board.paper for board in boards)}"
    (out / "leaderboard.md").write_text(leaderboard_markdown(title, source, sections, not_run, tests,
                                                             machines_paragraph(list(sweeps_read.values()))))
    paths = [out / "leaderboard.md", out / "leaderboard.csv", out / "tests.csv", out / "not_run.csv",
             out / "standing.png", *paths]
    return {"scores": scores, "tests": tests, "friedman": friedmans, "paths": paths}


def log_leaderboard(client, experiment_id: str, study: str, methods: list[str], paths: list[Path]) -> str:
    """One MLflow run (name and tag mtc.kind ``leaderboard``) holding the folder's files; its id.
    Stopped or failed while logging (Ctrl-C, SIGTERM: the command's stop signals raise), the run
    is closed KILLED, not left RUNNING."""
    run = client.create_run(experiment_id, run_name=KIND, tags={"mtc.kind": KIND})
    run_id = run.info.run_id
    try:
        client.log_param(run_id, "study", study)
        client.log_param(run_id, "methods", ",".join(methods))
        for path in paths:
            client.log_artifact(run_id, str(path))
    except BaseException:
        client.set_terminated(run_id, "KILLED")
        raise
    client.set_terminated(run_id, "FINISHED")
    return run_id
