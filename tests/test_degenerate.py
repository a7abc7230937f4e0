"""Degenerate clusterings (a task in fewer clusters than asked) are flagged by every solver,
counted in reports, and never chosen by a label-free criterion; tiny values are refused."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from mtc.config import method_configs
from mtc.data.scaling import SCALES
from mtc.errors import InputError
from mtc.methods.base import PerTaskClusterer, PooledClusterer
from mtc.methods.validation import DegenerateFitWarning, degenerate_tasks
from mtc.results.report import (TrialRecord, best_point, degenerate_note, grid_csv, label_free_table, report_markdown,
                                summarize, why_no_point, with_stability)

METHODS = method_configs()
# Families that put a task of identical samples into one cluster (their starts are k-means of the rows)
COLLAPSING = ("kmeans", "a_kmeans", "snmf", "a_nmf", "mtcmrl", "snmf_lr", "mbc", "smbc", "mkc", "smkc", "mtcfir",
              "mtcfir_nf", "mtcfir_ni", "mtcfir_nr", "a_ncut")


def planted_and_identical():
    X, _ = make_blobs(60, 5, centers=3, random_state=0, cluster_std=0.5)
    same = np.tile(np.random.default_rng(0).random(5) + 0.1, (60, 1))  # every sample the same
    return np.abs(X) + 0.1, same


def fitted(name, tasks):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        solver = METHODS[name](n_clusters=3, random_state=0).fit(tasks)
    return solver, [w for w in caught if issubclass(w.category, DegenerateFitWarning)]


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_solver_flags_a_task_in_fewer_clusters_than_asked(name):
    solver, warned = fitted(name, list(planted_and_identical()))
    used = [np.unique(labels).size for labels in solver.labels_]
    if isinstance(solver, PooledClusterer):  # asked for 3 clusters of the union: one task may meet fewer
        pooled = np.unique(np.concatenate(solver.labels_)).size
        assert solver.degenerate_.tolist() == [k < 2 or pooled < 3 for k in used]
    else:
        assert solver.degenerate_.tolist() == [k < 3 for k in used]
    np.testing.assert_array_equal(solver.record_.scalars["degenerate"], solver.degenerate_.astype(float))
    assert len(warned) == int(solver.degenerate_.any())
    if name in COLLAPSING:
        assert solver.degenerate_.tolist() == [False, True]
        assert "task 1: 1 of 3" in str(warned[0].message)


def test_planted_clusters_are_not_degenerate():
    X, _ = planted_and_identical()
    for name in ("kmeans", "snmf", "mtcmrl", "mbc"):
        solver, warned = fitted(name, [X, X[::-1].copy()])
        assert not solver.degenerate_.any() and not warned


def test_a_pooled_task_that_meets_fewer_pooled_clusters_is_not_a_collapse():
    """Three tasks of two shared and two private clusters each: A-kmeans asks for 4 clusters of the
    union (8 true groups), so a task may meet only 3 of them; that is pooling, not a collapse."""
    from mtc.data.synthetic import make_synthetic

    data = make_synthetic(n_tasks=3, n_clusters=4, n_shared=2, samples_per_cluster=50, n_features=40, support=10,
                          separation=3.0, noise=1.0, seed=0)
    solver = METHODS["a_kmeans"](n_clusters=data.n_clusters, random_state=0).fit(data.matrices)
    assert min(np.unique(labels).size for labels in solver.labels_) == 3
    assert not solver.degenerate_.any()


def test_degenerate_tasks_counts_distinct_labels_against_the_asked_clusters():
    labels = [np.array([0, 0, 0]), np.array([0, 2, 2, 1]), np.array([1, 1, 0])]
    assert degenerate_tasks(labels, [2, 3, 3]).tolist() == [True, False, True]


@pytest.mark.parametrize("name", sorted(METHODS))
@pytest.mark.parametrize("scale", [1e-300, 1e-60, 0.0])
def test_tiny_values_are_refused_in_one_line(name, scale):
    X, _ = planted_and_identical()
    with pytest.raises(InputError, match="task 0: (every entry is 0|the largest .x. is .*rescale)") as refused:
        METHODS[name](n_clusters=3, random_state=0).fit([X * scale, X])
    named = re.findall(r"data\.params\.scale=(\w+)", str(refused.value))
    assert set(named) <= set(SCALES)  # the scale it names is one that exists


@pytest.mark.parametrize("name", sorted(METHODS))
def test_tasks_on_scales_too_far_apart_are_refused_by_a_solver_that_relates_them(name):
    """One task around 1e30, one around 1: a solver that relates the tasks saw the second as
    zeros and put it in one cluster with converged_=True (about 15 solvers); it now refuses the
    data in one line naming both tasks and the fix. A per-task solver clusters each task on its
    own and takes it. Tasks 1e6 apart are taken by every solver (fitted; whether a task collapses
    then is the geometry of one feature space, not float64's precision: A-kmeans, LSSMTC and
    MBC put the smaller task into one cluster from 100 apart on these tasks, flagged degenerate)."""
    X, _ = planted_and_identical()
    solver = METHODS[name]
    if solver.relates_tasks:
        with pytest.raises(InputError, match=r"^task 1's largest \|x\| is 1.02e\+31 and task 0's 10.2, 1e\+30 times "
                                             r"apart \(more than 1e\+08\): .*scale_fit=per_task for files\)$"):
            solver(n_clusters=3, random_state=0).fit([X, X * 1e30])
    else:
        assert not solver(n_clusters=3, random_state=0).fit([X, X * 1e30]).degenerate_.any()
    fitted = solver(n_clusters=3, random_state=0).fit([X * 1e6, X])
    assert fitted.degenerate_.shape == (2,)


def test_only_the_per_task_solvers_leave_tasks_unrelated():
    unrelated = {name for name, solver in METHODS.items() if not solver.relates_tasks}
    assert unrelated == {name for name, solver in METHODS.items()
                         if issubclass(solver, PerTaskClusterer) and not issubclass(solver, PooledClusterer)}
    assert {"kmeans", "snmf", "ncut"} <= unrelated and not unrelated & {"a_kmeans", "mtcmrl", "lssmtc", "smkc"}


def record(point, seed, silhouette, objective, degenerate, labels=None):
    metrics = {"silhouette/mean": silhouette, "objective/final": objective, "objective/relative": objective / 10,
               "acc/mean": 0.5 + silhouette / 10, "nmi_max/mean": 0.1, "degenerate_tasks": float(degenerate)}
    return TrialRecord(point, str(seed), "FINISHED", metrics, f"{point}-{seed}")


def collapsing_sweep():
    """Point `a` collapses in every seed with the best criteria a collapse can have; point `b`
    collapses in one seed of three; point `c` never."""
    return ([record("a", s, 0.9, 0.1, 1) for s in range(3)]
            + [record("b", 0, 0.95, 0.05, 1), record("b", 1, 0.3, 2.0, 0), record("b", 2, 0.4, 2.0, 0)]
            + [record("c", s, 0.5, 1.0, 0) for s in range(3)])


def test_label_free_criteria_leave_degenerate_trials_out():
    summaries = summarize(collapsing_sweep())
    by_point = {s.point: s for s in summaries}
    assert [by_point[p].n_degenerate for p in "abc"] == [3, 1, 0]
    assert by_point["b"].label_free["silhouette/mean"] == pytest.approx(0.35)  # seeds 1 and 2 only
    assert by_point["b"].mean["silhouette/mean"] == pytest.approx(0.55)  # the table still shows every trial
    assert "a" not in {s.point for s in summaries if s.label_free}
    assert best_point(summaries, "silhouette").point == "c"
    assert best_point(summaries, "objective").point == "c"
    assert best_point(summaries, "objective_relative").point == "c"


def test_stability_of_a_point_that_only_collapses_is_never_chosen():
    summaries = summarize(collapsing_sweep())
    one = [np.zeros(6, int)]  # constant labels agree perfectly across seeds
    spread = [np.array([0, 0, 1, 1, 2, 2])]
    noisy = [np.array([0, 1, 1, 2, 2, 0])]
    # as reading.point_summaries passes them: the labels of seeds that are not degenerate
    with_stability(summaries, {"b": [spread, noisy], "c": [spread, spread, noisy]})
    assert best_point(summaries, "stability").point == "c"
    with_stability(summaries, {"a": [one, one, one]})  # were a's labels counted, a would win
    assert best_point(summaries, "stability").point == "a"


def test_a_sweep_whose_every_trial_collapsed_chooses_nothing_and_says_why():
    records = [record(p, s, 0.9, 0.1, 1) for p in "ab" for s in range(2)]
    summaries = summarize(records)
    for selection in ("silhouette", "objective", "objective_relative"):
        with pytest.raises(ValueError):
            best_point(summaries, selection)
        assert "every trial is degenerate" in why_no_point(summaries, selection)
    markdown = report_markdown("snmf on mine", summaries, [], labelled=False, method="snmf")
    assert "snmf collapsed on this data: all 4 trials are degenerate" in markdown
    assert "scale" in markdown
    assert "(none: every trial is degenerate" in label_free_table(summaries, labelled=False)


def test_the_report_counts_degenerate_trials():
    summaries = summarize(collapsing_sweep())
    assert degenerate_note(summaries).startswith("**4 of 9 trials degenerate**")
    assert "n_degenerate" in grid_csv(summaries).splitlines()[0]
    assert grid_csv(summaries).splitlines()[1].startswith("a,3,0,3,")


def test_compare_marks_the_methods_with_degenerate_trials_at_their_point():
    import pandas as pd

    from mtc.results.compare import score_table

    cells = pd.DataFrame([
        {"benchmark": "mine", "method": method, "task": task, "metric": "acc", "selection": "acc", "point": "defaults",
         "mean": mean, "std": 0.01, "n": 10, "degenerate": degenerate, "paper_mean": None, "paper_std": None}
        for method, mean, degenerate in (("kmeans", 0.9, 0), ("snmf", 0.63, 10), ("mtcmrl", 0.8, 3))
        for task in ("t1", "mean")])
    table = score_table(cells, "acc").set_index("method")
    assert table["not an answer"].to_dict() == {"kmeans": "", "mtcmrl": "3 of 10 degenerate", "snmf": "collapsed"}
    assert table.loc["snmf", "mean"] == "0.6300 ± 0.0100"  # its scores shown, marked
    assert "not an answer" not in score_table(cells.assign(degenerate=0), "acc")
