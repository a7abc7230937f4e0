"""The cells of a comparison (``cells.csv``): the published numbers of
``mtc/published_results.csv``, each sweep's mean, std and number of seeds per task, metric and
selection beside them, and the per-seed values the tests pair. ``mtc.results.compare`` builds a
comparison from these; ``mtc.results.fidelity`` reads the published rows beside the committed
cells."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from mtc.errors import InputError
from mtc.results.reading import BEST, Sweep

PUBLISHED = Path(__file__).parents[1] / "published_results.csv"  # the papers' numbers, mtc/published_results.csv
PUBLISHED_COLUMNS = ("paper", "table", "benchmark", "method", "task", "metric", "mean", "std")
SECOND_METRIC = "nmi_max"  # tabled beside --metric (the papers' NMI)


def read_published(path: Path) -> pd.DataFrame:
    """Every row of a CSV of published numbers, as the file has them (``load_published`` keeps
    one row per cell, of methods of ours).

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
    return published


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
    published = read_published(path)
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
             "std": point.std[f"{prefix}{task}"], "n": point.n_runs, "degenerate": point.n_degenerate,
             "unmoved": point.n_unmoved}
            for task in tasks]


NOT_AN_ANSWER = 0.5  # the share of a point's trials that collapsed, or never moved, from which its score is no answer


def is_answer(degenerate, unmoved, n):
    """Whether a point of ``n`` finished trials, ``degenerate`` of them collapsed (a task in
    fewer clusters than asked) and ``unmoved`` of them left at their k-means start, gives the
    method's answer: fewer than NOT_AN_ANSWER of its trials did either (numbers or arrays)."""
    n = np.maximum(n, 1)
    return (np.asarray(degenerate) < NOT_AN_ANSWER * n) & (np.asarray(unmoved) < NOT_AN_ANSWER * n)


def trial_counts(cells: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``cells``: its point's degenerate, unmoved and finished trials (a frame without
    those columns, e.g. built by hand: 0, 0 and 1)."""
    def column(name, default):
        return cells[name].fillna(default).to_numpy() if name in cells else np.full(len(cells), default)

    return column("degenerate", 0), column("unmoved", 0), column("n", 1)


def not_an_answer(cells: pd.DataFrame) -> pd.Series:
    """Per row of ``cells``: whether its point's score is not the method's answer (is_answer);
    such a point is marked, never bolded and not ranked (mtc.results.rendering,
    mtc.results.significance.rank_table)."""
    return pd.Series(~is_answer(*trial_counts(cells)), index=cells.index)


def answer_marks(cells: pd.DataFrame) -> pd.Series:
    """Per row of ``cells``: what is wrong with its point's trials, in words ("" when nothing):
    "collapsed" when every trial is degenerate, "k of n degenerate", "never moved" when every
    trial kept its k-means start's labels, "k of n never moved"."""
    def mark(count, n, whole, part):
        return "" if not count else whole if count >= n else f"{int(count)} of {int(n)} {part}"

    return pd.Series(["; ".join(filter(None, (mark(d, n, "collapsed", "degenerate"), mark(u, n, "never moved",
                                                                                           "never moved"))))
                      for d, u, n in zip(*trial_counts(cells))], index=cells.index)


def cell_frame(sweeps: list[Sweep], metrics: list[str], published: pd.DataFrame) -> pd.DataFrame:
    """``cells.csv``: mean, std and number of seeds of every metric, task and selection of
    every sweep, with the published number of the same benchmark, method (a variant: its
    method's), task and metric."""
    rows = [row for sweep in sweeps for selection in sweep.points for metric in metrics
            for row in summary_rows(sweep, selection, metric)]
    cells = pd.DataFrame(rows, columns=["benchmark", "method", "published_as", "task", "metric", "selection",
                                        "point", "mean", "std", "n", "degenerate",
                                        "unmoved"])
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
