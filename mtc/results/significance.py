"""The tests of a comparison: Wilcoxon signed-rank tests of the best method against each other
one per (benchmark, task), the rank table of the methods that share results, the Friedman test
with Nemenyi's post-hoc p-values and critical difference, and whether a critical-difference
diagram can be drawn (``cd_refusal``)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import scikit_posthocs
from scipy import stats

from mtc.results.cells import not_an_answer, task_order
from mtc.results.reading import BEST

ALPHA = 0.05  # the Nemenyi test's level (the critical-difference diagram's bars)
MIN_CD_CELLS = 10  # fewer (benchmark, task) cells: no critical-difference diagram (cd_refusal)
MIN_PAIRS = 2  # fewer paired seeds than this: no Wilcoxon test
PERMUTATION_MAX = 13  # scipy's wilcoxon: an exact permutation test up to this many pairs with zeros or ties
FRIEDMAN_COLUMNS = ["method", "average_rank", "statistic", "p", "n_cells", "n_methods", "critical_difference"]


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
        statistic, p = signed_rank_test(paired.iloc[:, 0], paired.iloc[:, 1])
    nonzero = int((differences != 0).sum())
    notes = [" ".join(str(w.message).split()) for w in caught]
    if 2.0 / 2 ** nonzero > ALPHA:
        notes.append(f"{nonzero} non-zero difference(s): p cannot go below {2.0 / 2 ** nonzero:.3g}")
    return {"n_pairs": n, "statistic": statistic, "p": p, "note": "; ".join(notes)}


def signed_rank_test(first, second) -> tuple[float, float]:
    """``scipy.stats.wilcoxon(first, second)``'s statistic and p-value, the same floats. Where
    scipy runs its exact permutation test (zeros or tied differences among at most
    ``PERMUTATION_MAX`` pairs), it calls the statistic once per sign flip in Python, 2**13 calls
    and half a second a test; here the same ``scipy.stats.permutation_test`` gets the statistic
    for all flips at once (``positive_rank_sum``, vectorised)."""
    differences = np.asarray(first, dtype=float) - np.asarray(second, dtype=float)
    magnitudes = np.abs(differences[differences != 0])
    if len(differences) > PERMUTATION_MAX or len(np.unique(magnitudes)) == len(differences):
        result = stats.wilcoxon(first, second)
        return float(result.statistic), float(result.pvalue)
    statistic = min(positive_rank_sum(differences), positive_rank_sum(-differences))
    p = stats.permutation_test((differences,), positive_rank_sum, permutation_type="samples", vectorized=True,
                               alternative="two-sided").pvalue
    return float(statistic), float(p)


def positive_rank_sum(differences: np.ndarray, axis: int = -1) -> np.ndarray:
    """The Wilcoxon statistic R+ along ``axis``: the sum of the ranks of the positive
    differences among the non-zero ones by magnitude (ties share their average rank; zeros
    dropped, scipy's ``zero_method="wilcox"``)."""
    differences = np.moveaxis(np.asarray(differences, dtype=float), axis, -1)
    ranks = stats.rankdata(np.where(differences == 0, np.nan, np.abs(differences)), axis=-1, nan_policy="omit")
    return np.sum(np.where(differences > 0, ranks, 0.0), axis=-1)


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
    have results; a point whose score is not its method's answer (mtc.results.cells.not_an_answer:
    collapsed or never moved) has no result."""
    chosen = cells[(cells.selection == selection) & (cells.metric == metric) & (cells.task != "mean")]
    chosen = chosen[~not_an_answer(chosen)]  # a collapse or an unmoved start is no answer to rank
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
