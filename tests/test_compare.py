"""python -m mtc.results.compare on a real MLflow store: three tiny sweeps (kmeans, kernel k-means, symmetric
NMF on hard synthetic data) run in-process, then the comparison's numbers recomputed from the
child runs with scipy and scikit-posthocs."""

import re
import shutil
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import scikit_posthocs
from matplotlib.image import imread
from matplotlib.patches import Rectangle
from scipy import stats

from mtc.cli import compose_config
from mtc.config import settings
from mtc.results.compare import (
    MIN_CD_CELLS,
    cell_frame,
    compare,
    display_names,
    grid_statistics,
    heatmap_figure,
    main,
    parse_point,
    without_effect,
)
from mtc.results.reading import NOT_RECORDED, Sweep, machine_counts, newest_per_pair
from mtc.results.rendering import machines_paragraph
from mtc.results.report import PointSummary, TrialRecord
from mtc.store import tracking
from mtc.sweep.driver import run_sweep, stop_kept_ray

pytestmark = pytest.mark.slow

METHODS = {"kmeans": [], "kkm": ["++method.grid.kernel_width=[0.5,2.0]"],
           "snmf": ["++method.grid.update=[sqrt,quarter]", "++method.grid.tol=[1e-3,1e-5]",
                    "++method.grid.kernel_width=[0.5,1.0]"]}  # kernel_width: unused by the cosine affinity
REPEATS = 4


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """An MLflow SQLite store holding three finished sweeps on the same benchmark."""
    tmp = tmp_path_factory.mktemp("compare")
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    try:
        for method, overrides in METHODS.items():  # on one local Ray, kept between the sweeps
            run_sweep(settings(compose_config([
                f"output_dir={tmp / 'outputs'}", f"mlflow.tracking_uri={uri}", f"mlflow.artifact_root={tmp / 'artifacts'}",
                "ray.num_cpus=1", "sweep.verbose=0", "data=synthetic", "data.params.samples_per_cluster=10",
                "data.params.separation=0.7", f"sweep.repeats={REPEATS}", f"method={method}", *overrides])),
                keep_ray=True)
    finally:
        stop_kept_ray()
    return tmp, uri


@pytest.fixture(scope="module")
def compared(store):
    """The command run as a user runs it; its output folder and what it printed."""
    tmp, uri = store
    out = tmp / "out"
    done = subprocess.run([sys.executable, "-m", "mtc.results.compare", "--tracking-uri", uri, "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return out, done.stdout


def child_values(uri: str) -> pd.DataFrame:
    """Every finished child run's acc per task at its sweep's best point, read straight from MLflow."""
    client = tracking.client_for(uri)
    experiment = client.get_experiment_by_name("mtc").experiment_id
    rows = []
    for parent in client.search_runs([experiment], "tags.`mtc.sweep_key` LIKE '%'"):
        best = parent.data.tags["mtc.best_by_acc"]
        assert parent.data.tags["mtc.label"] == parent.data.tags["mtc.method"]  # no variant: labelled by its method
        for run in tracking.find_runs(client, experiment, **{tracking.PARENT_TAG: parent.info.run_id}):
            if run.info.status == "FINISHED" and run.data.tags[tracking.POINT_TAG] == best:
                rows += [{"method": parent.data.tags["mtc.method"], "seed": run.data.params["seed"],
                          "task": key.split("/", 1)[1], "value": value}
                         for key, value in run.data.metrics.items() if key.startswith("acc/")]
    return pd.DataFrame(rows)


def test_cells_are_the_child_runs_means_and_stds(store, compared):
    _, uri = store
    out, _ = compared
    cells = pd.read_csv(out / "cells.csv")
    assert list(cells.columns) == ["benchmark", "method", "task", "metric", "selection", "point", "mean", "std", "n",
                                   "degenerate", "unmoved", "paper_mean", "paper_std", "paper_table"]
    best = cells[(cells.selection == "acc") & (cells.metric == "acc")].set_index(["method", "task"]).sort_index()
    expected = child_values(uri).groupby(["method", "task"]).value.agg(["mean", "std", "size"]).sort_index()
    assert list(best.index) == list(expected.index) and len(expected) == 3 * 4  # 3 methods x (3 tasks + mean)
    np.testing.assert_allclose(best["mean"], expected["mean"], rtol=1e-12)
    np.testing.assert_allclose(best["std"], expected["std"], rtol=1e-12)
    assert (best.n == REPEATS).all() and (best.benchmark == "synthetic").all()
    assert {"nmi_max", "acc"} <= set(cells.metric) and {"acc", "objective"} <= set(cells.selection)
    assert cells.paper_mean.isna().all()  # no paper reports the synthetic data


def test_wilcoxon_p_values_are_scipys_on_the_seed_pairs(store, compared):
    _, uri = store
    out, _ = compared
    tests = pd.read_csv(out / "wilcoxon.csv")
    cells = pd.read_csv(out / "cells.csv")
    table_means = cells[(cells.selection == "acc") & (cells.metric == "acc")].set_index(["task", "method"])["mean"]
    values = child_values(uri)
    assert len(tests) == 4 * 2  # (3 tasks + mean) x the best method against the 2 others
    for row in tests.itertuples():
        by_seed = values[values.task == row.task].pivot(index="seed", columns="method", values="value")
        means = by_seed.mean()
        assert row.best == means.idxmax() and row.best_mean == pytest.approx(means.max())
        assert (row.best_mean, row.other_mean) == (table_means[row.task, row.best], table_means[row.task, row.other])
        paired = by_seed[[row.best, row.other]].dropna()
        assert row.n_pairs == len(paired) == REPEATS
        if (paired[row.best] == paired[row.other]).all():
            assert row.p == 1.0 and row.note == "all differences zero"
        else:
            expected = stats.wilcoxon(paired[row.best], paired[row.other])
            assert row.p == pytest.approx(expected.pvalue) and row.statistic == pytest.approx(expected.statistic)
    assert (tests.p < 1).any()  # the data is hard enough that the methods differ somewhere


def test_friedman_and_nemenyi_are_the_libraries_on_the_rank_table(store, compared):
    _, uri = store
    out, _ = compared
    table = child_values(uri).query("task != 'mean'").groupby(["task", "method"]).value.mean().unstack("method")
    friedman = pd.read_csv(out / "friedman.csv")
    expected = stats.friedmanchisquare(*table.to_numpy().T)
    assert friedman.statistic.iloc[0] == pytest.approx(expected.statistic)
    assert friedman.p.iloc[0] == pytest.approx(expected.pvalue)
    assert (friedman.n_cells == 3).all() and (friedman.n_methods == 3).all()
    ranks = table.rank(axis=1, ascending=False).mean()
    assert dict(zip(friedman.method, friedman.average_rank)) == pytest.approx(ranks.to_dict())
    nemenyi = pd.read_csv(out / "nemenyi.csv", index_col="method")
    expected_p = scikit_posthocs.posthoc_nemenyi_friedman(table.to_numpy())
    np.testing.assert_allclose(nemenyi.loc[table.columns, table.columns].to_numpy(), expected_p.to_numpy())


def test_the_silhouette_criterion_ranks_labelled_sweeps_by_their_silhouette(store, tmp_path):
    """--criterion silhouette on labelled sweeps: every table, test and rank is of the silhouette
    at its point, and nothing about accuracy is shown."""
    _, uri = store
    result = compare(uri, "mtc", tmp_path / "out", log=False, criterion="silhouette")
    comparison = result["comparison"]
    assert comparison.criterion == "silhouette" and len(comparison.sweeps) == 3
    assert not [note for note in comparison.notes if note.startswith("no sweep has accuracy")]
    cells = comparison.cells
    assert set(cells.metric) == {"silhouette"}
    for sweep in comparison.sweeps:
        point = sweep.points["silhouette"]
        chosen = cells[(cells.method == sweep.method) & (cells.selection == "silhouette")].set_index("task")
        assert set(chosen.point) == {point.point} and len(chosen) == 4  # 3 tasks + mean
        assert chosen["mean"].to_dict() == {task: point.mean[f"silhouette/{task}"] for task in chosen.index}
    expected = cells[(cells.selection == "silhouette") & (cells.task != "mean")].pivot_table(
        index=["benchmark", "task"], columns="method", values="mean")
    pd.testing.assert_frame_equal(comparison.rank_table, expected)
    assert set(comparison.wilcoxon.metric) == {"silhouette"}
    page = (tmp_path / "out" / "compare.md").read_text()
    assert "### silhouette at the highest mean cosine silhouette of the clusters on the input" in page
    assert "point: acc" not in page and "acc at the label-free point" not in page and "### acc" not in page


def test_outputs_exist_and_figures_are_wide(compared):
    out, stdout = compared
    markdown = (out / "compare.md").read_text()
    for heading in ("## Overview: mean acc over tasks", "## synthetic", "### acc at the best grid point",
                    "### nmi_max at the best grid point",
                    "### acc at the label-free point `objective`", "### Wilcoxon signed-rank tests of acc",
                    "## Friedman test of acc",
                    "![kkm on synthetic](grid_kkm_synthetic.png)", "kmeans on synthetic: no grid"):
        assert heading in markdown
    for name in ("grid_kkm_synthetic.png", "grid_snmf_synthetic.png"):
        assert imread(out / name).shape[1] >= 1000
    assert not (out / "grid_kmeans_synthetic.png").exists()  # no grid parameter
    assert stdout.strip().splitlines()[-1].startswith("MLflow compare run: ")


def test_compare_md_reads_summary_first_and_keeps_run_ids_in_a_csv(compared):
    """The overview and the ranks first, then each benchmark's tables and figures, the long
    tables last; the parent runs' ids in sweeps.csv, not on the page; the store named relative
    to the folder, never by an absolute path."""
    out, _ = compared
    markdown = (out / "compare.md").read_text()
    order = [markdown.index(heading) for heading in (
        "## Overview: mean acc over tasks", "## Friedman test of acc", "## synthetic\n",
        "![kkm on synthetic](grid_kkm_synthetic.png)", "## synthetic: label-free points and tests",
        "### Wilcoxon signed-rank tests of acc", "## Friedman test: its cells and Nemenyi's p-values",
        "## The sweeps read")]
    assert order == sorted(order)
    sweeps = pd.read_csv(out / "sweeps.csv")
    assert sorted(sweeps.method) == ["kkm", "kmeans", "snmf"] and sweeps.parent_run.str.fullmatch("[0-9a-f]{32}").all()
    assert not any(run_id in markdown for run_id in sweeps.parent_run)
    first_line = markdown.splitlines()[0]
    assert "of the SQLite store " in first_line and "sqlite:" not in first_line and str(out.parent) not in first_line


def test_sweeps_csv_and_compare_md_name_the_machine_that_fitted_the_trials(compared, store):
    """Each sweep's machines in sweeps.csv (its child runs' tag mtc.machine: this machine's line,
    every trial having run here) and, in the last section, the machine with its trials and sweeps."""
    out, _ = compared
    _, uri = store
    sweeps = pd.read_csv(out / "sweeps.csv")
    assert (sweeps.machines == tracking.machine_description()).all()
    client = tracking.client_for(uri)
    experiment = client.get_experiment_by_name("mtc").experiment_id
    finished = [run for parent in sweeps.parent_run
                for run in tracking.find_runs(client, experiment, **{tracking.PARENT_TAG: parent})
                if run.info.status == "FINISHED"]
    section = (out / "compare.md").read_text().split("## The sweeps read")[1]
    assert section.startswith("\n\nThe trials read were fitted on one machine;")
    assert f"- `{tracking.machine_description()}`: {len(finished)} trials of 3 sweeps\n" in section


def test_machine_counts_name_runs_from_before_the_tag_and_list_every_machine_once():
    """The finished trials per machine, the most first (then by name); a run without the tag is "not recorded";
    the paragraph sums each machine over the sweeps and says that there are several."""
    records = [TrialRecord("p", str(seed), status, {}, f"r{seed}", "", machine)
               for seed, (status, machine) in enumerate([("FINISHED", "b"), ("FINISHED", "a"), ("FINISHED", "a"),
                                                         ("FAILED", "c"), ("FINISHED", "")])]
    counts = machine_counts(records)
    assert counts == {"a": 2, "b": 1, NOT_RECORDED: 1} and list(counts) == ["a", "b", NOT_RECORDED]
    sweeps = [Sweep("d", m, "run", {}, pd.DataFrame(), m, machines) for m, machines in
              [("m1", counts), ("m2", {"b": 3})]]
    paragraph = "\n".join(machines_paragraph(sweeps))
    assert paragraph.startswith("The trials read were fitted on 3 machines (sweeps.csv says which sweep on which)")
    assert paragraph.index("- `b`: 4 trials of 2 sweeps") < paragraph.index("- `a`: 2 trials of 1 sweeps") \
        < paragraph.index(f"- `{NOT_RECORDED}`: 1 trials of 1 sweeps")
    assert machines_paragraph([Sweep("d", "m", "run", {}, pd.DataFrame(), "m")]) == []


def test_no_critical_difference_diagram_below_the_minimum_of_cells_and_compare_md_says_why(compared):
    """3 (benchmark, task) cells: the Friedman and Nemenyi CSVs are written, but no diagram, and
    no critical difference is presented as if it meant something."""
    out, _ = compared
    friedman = pd.read_csv(out / "friedman.csv")
    assert (friedman.n_cells == 3).all() and 3 < MIN_CD_CELLS and (out / "nemenyi.csv").exists()
    assert not (out / "critical_difference.png").exists()
    markdown = (out / "compare.md").read_text()
    cd = friedman.critical_difference.iloc[0]
    assert (f"No critical-difference diagram: 3 (benchmark, task) cells, fewer than the {MIN_CD_CELLS} it needs "
            "(Demšar 2006, Sec. 3.2.2") in markdown
    assert f"Nemenyi's critical difference would be {cd:.2f} ranks, of the 2 by which two average ranks can " \
           "differ at most (3 methods)." in markdown
    assert "critical-difference diagram](" not in markdown and "Nemenyi's critical difference at" not in markdown
    ranks = markdown.split("Average ranks:")[1].split("Nemenyi post-hoc")[0]
    assert all(f"| {rank:.2f} |" in ranks for rank in friedman.average_rank)  # two decimals
    means = markdown.split("Means (rank in the cell, 1 = best):")[1].split("Nemenyi post-hoc")[0]
    assert re.findall(r"\((\d+(?:\.\d+)?)\)", means) and all(
        re.fullmatch(r"\d\.\d\d", rank) for rank in re.findall(r"\((\d+(?:\.\d+)?)\)", means))


def test_grid_heatmaps_state_their_colour_range_idle_parameters_and_the_chosen_point(store, tmp_path):
    """On the real sweeps: colours over 0 to 1, said in the colour bar; snmf's kernel_width (unused by
    the cosine affinity) named as having no effect; a red box on the cell of the best point by
    accuracy; the method as the papers name it."""
    _, uri = store
    result = compare(uri, "mtc", tmp_path / "out", log=False)
    sweeps = {sweep.method: sweep for sweep in result["comparison"].sweeps}
    names = display_names(list(sweeps.values()))
    assert names == {"kmeans": "k-means", "kkm": "KKM", "snmf": "SNMF"}
    assert heatmap_figure(sweeps["kmeans"], "acc", "acc", names["kmeans"]) is None  # one point, no grid
    for method in ("kkm", "snmf"):
        sweep = sweeps[method]
        figure = heatmap_figure(sweep, "acc", "acc", names[method])
        heatmap, bar = figure.axes
        assert heatmap.images[0].get_clim() == (0.0, 1.0)
        assert bar.get_ylabel() == "mean acc (colour range 0 to 1)"
        title = heatmap.get_title()
        assert title.startswith(f"{names[method]} on synthetic: mean acc over tasks")
        assert "red box: the best grid point by mean accuracy" in title
        (box,) = [patch for patch in heatmap.patches if isinstance(patch, Rectangle)]
        assert box.get_edgecolor()[:3] == (1.0, 0.0, 0.0)
        row, column = round(box.get_y() + box.get_height() / 2), round(box.get_x() + box.get_width() / 2)
        mean, _, averaged = grid_statistics(sweep.trials, "acc/mean")
        best = parse_point(sweep.points["acc"].point)
        assert str(mean.columns[column]) == best[mean.columns.name]
        assert mean.index.name is None or str(mean.index[row]) == best[mean.index.name]
        idle = without_effect(sweep.trials, "acc/mean")
        if method == "snmf":
            assert idle == ["kernel_width"] and averaged == ["update"]
            assert "kernel_width has no effect: the means along it agree within 0.0005" in title
            assert f"(update={best['update']} in its cell)" in title
            at = sweep.trials.groupby("point")["acc/mean"].mean()
            for point, value in at.items():  # the same point with the other kernel_width: exactly the same
                twin = point.replace("kernel_width=0.5", "kernel_width=1.0") if "kernel_width=0.5" in point else \
                    point.replace("kernel_width=1.0", "kernel_width=0.5")
                assert at[twin] == value
        else:
            assert idle == [] and "no effect" not in title
    assert imread(tmp_path / "out" / "grid_snmf_synthetic.png").shape[1] >= 1200



def test_the_convergence_figure_counts_the_curves_one_sees_on_real_traces(store):
    """The objective traces of each sweep's best point, read back from the store: one line per group
    of runs that coincide on the plot, the title counting runs and curves; a run differing from
    seed 0 by one part in 1e9 is one more run but no more curve, and the title says so."""
    from mtc.results.plots import convergence_figure, overlapping_traces, same_traces

    _, uri = store
    client = tracking.client_for(uri)
    experiment = client.get_experiment_by_name("mtc").experiment_id
    checked = 0
    for parent in client.search_runs([experiment], "tags.`mtc.sweep_key` LIKE '%'"):
        best = parent.data.tags["mtc.best_by_acc"]
        runs = [run for run in tracking.find_runs(client, experiment, **{tracking.PARENT_TAG: parent.info.run_id})
                if run.data.tags[tracking.POINT_TAG] == best]
        traces = {f"seed {run.data.params['seed']}": tracking.load_objective_trace(client, run.info.run_id,
                                                                                    run.info.artifact_uri)
                  for run in runs}
        groups = overlapping_traces(traces)
        ax = convergence_figure(traces, "t").axes[0]
        assert len(ax.lines) == len(groups) and len(traces) == REPEATS
        curves = f"{len(groups)} visibly distinct curve{'s' if len(groups) > 1 else ''}"
        assert ax.get_title().split("\n")[1].startswith(f"{REPEATS} runs, {curves}")
        plotted = np.concatenate([np.log10(t) if ax.get_yscale() == "log" else t for t in traces.values()])
        if np.ptp(plotted) < 1e-6:  # a flat axis would show a change of one part in 1e9
            continue
        nudged = {**traces, "seed 9": traces["seed 0"] * (1 + 1e-9)}
        assert "seed 9" in next(group for group in overlapping_traces(nudged) if "seed 0" in group)
        title = convergence_figure(nudged, "t").axes[0].get_title()
        assert f"{REPEATS + 1} runs, {curves}" in title and "9 overlap" in title
        assert f"({len(same_traces(nudged))} exactly distinct traces)" in title
        checked += 1
    assert checked >= 2

def test_the_compare_run_holds_the_files(store, compared):
    _, uri = store
    _, stdout = compared
    run_id = stdout.strip().splitlines()[-1].split(": ")[1]
    client = tracking.client_for(uri)
    run = client.get_run(run_id)
    assert run.info.run_name == "compare" and run.data.tags["mtc.kind"] == "compare" and run.info.status == "FINISHED"
    assert {a.path for a in client.list_artifacts(run_id)} == {
        "compare.md", "cells.csv", "sweeps.csv", "wilcoxon.csv", "friedman.csv", "nemenyi.csv",
        "grid_kkm_synthetic.png", "grid_snmf_synthetic.png"}  # 3 cells: no critical-difference diagram


def test_published_numbers_are_matched(store, tmp_path):
    _, uri = store
    published = tmp_path / "published.csv"
    published.write_text("paper,table,benchmark,method,task,metric,mean,std,note\n"
                         "p1,Table 2,synthetic,kmeans,task1,acc,0.5,0.1,\n"
                         "p2,Table 9,synthetic,kmeans,task1,acc,0.9,0.2,a later paper: not shown\n"
                         "p1,Table 2,synthetic,paper:other,task1,acc,0.7,0.1,no config of ours\n"
                         "p1,Table 2,synthetic,kkm,task2,nmi_max,0.25,,\n")
    result = compare(uri, "mtc", tmp_path / "out", log=False, published=published)
    cells = result["comparison"].cells.set_index(["method", "task", "metric", "selection"])
    assert cells.loc[("kmeans", "task1", "acc", "acc"), ["paper_mean", "paper_std", "paper_table"]].tolist() == \
        [0.5, 0.1, "p1 Table 2"]
    assert cells.loc[("kkm", "task2", "nmi_max", "acc"), "paper_mean"] == 0.25
    points = {sweep.method: len(sweep.points) for sweep in result["comparison"].sweeps}
    assert cells.paper_mean.notna().sum() == points["kmeans"] + points["kkm"]  # at every selection's point
    assert "paper:other" not in set(cells.index.get_level_values("method"))
    markdown = (tmp_path / "out" / "compare.md").read_text()
    assert "| task1 (paper) |" in markdown and "| 0.5000 ± 0.1000 |" in markdown and "| 0.2500 |" in markdown
    assert result["run_id"] is None


def test_an_unfinished_sweep_is_named_in_the_notes_not_silently_dropped(store, tmp_path):
    import shutil

    tmp, _ = store
    shutil.copy(tmp / "mlflow.db", tmp_path / "mlflow.db")  # the shared store stays as it is
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = tracking.client_for(uri)
    experiment = client.get_experiment_by_name("mtc").experiment_id
    (kkm,) = client.search_runs([experiment], "tags.`mtc.method` = 'kkm' and tags.`mtc.sweep_key` LIKE '%'")
    client.set_terminated(kkm.info.run_id, "KILLED")  # as an interrupted sweep leaves its parent
    result = compare(uri, "mtc", tmp_path / "out", log=False)
    assert {sweep.method for sweep in result["comparison"].sweeps} == {"kmeans", "snmf"}
    note = (f"kkm on synthetic: the newest sweep ({kkm.info.run_id}, KILLED) did not finish and is left out; "
            "the same sweep command resumes it")
    assert result["comparison"].notes == [note]
    assert f"- {note}" in (tmp_path / "out" / "compare.md").read_text()


def test_a_pooled_benchmark_reads_every_sample_size_sweep_as_one(tmp_path):
    """SMT-NMF's Table 5 averages four sample sizes x 30 draws: ``<data>@<n1>+<n2>`` pools the
    sweeps ``<data>-n<n1>``, ``<data>-n<n2>``; a method short of a size is left out, said so."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    results = {}
    try:
        for method, sizes in {"kmeans": (10, 20), "snmf": (10,)}.items():
            for size in sizes:
                results[method, size] = run_sweep(settings(compose_config([
                    f"output_dir={tmp_path / 'outputs'}", f"mlflow.tracking_uri={uri}", "ray.num_cpus=1",
                    f"mlflow.artifact_root={tmp_path / 'artifacts'}", "sweep.verbose=0", "data=synthetic",
                    "+data.draw=per_seed", f"data.params.samples_per_cluster={size}", "sweep.repeats=3",
                    f"method={method}", f"sweep.name={method}-synthetic-n{size}"])), keep_ray=True)
    finally:
        stop_kept_ray()
    result = compare(uri, "mtc", tmp_path / "out", benchmarks=["synthetic@10+20"], log=False)
    (sweep,) = result["comparison"].sweeps
    assert (sweep.benchmark, sweep.method) == ("synthetic@10+20", "kmeans")
    assert sweep.run_id == " + ".join(results["kmeans", size].parent_run_id for size in (10, 20))
    assert sorted(sweep.trials.seed) == ["n10/0", "n10/1", "n10/2", "n20/0", "n20/1", "n20/2"]
    assert sweep.points["acc"].n_runs == 6 and "stability" not in sweep.points
    client = tracking.client_for(uri)
    experiment = client.get_experiment_by_name("mtc").experiment_id
    children = [run for size in (10, 20) for run in tracking.find_runs(
        client, experiment, **{tracking.PARENT_TAG: results["kmeans", size].parent_run_id})]
    assert len(children) == 6
    cells = result["comparison"].cells.set_index(["task", "metric", "selection"])
    for task in ("task0", "task1", "task2"):  # the cell is the mean and std over all six runs
        values = [run.data.metrics[f"acc/{task}"] for run in children]
        assert cells.loc[(task, "acc", "acc"), "mean"] == pytest.approx(np.mean(values), abs=1e-12)
        assert cells.loc[(task, "acc", "acc"), "std"] == pytest.approx(np.std(values, ddof=1), abs=1e-12)
    assert "snmf on synthetic@10+20: no finished sweep of synthetic-n20; left out" in result["comparison"].notes
    curves = result["comparison"].size_curves.set_index("size")  # per size: the mean over tasks, over that size's runs
    assert list(curves.index) == [10, 20] and set(curves.point) == {sweep.points["acc"].point}
    for size in (10, 20):
        values = [run.data.metrics["acc/mean"] for run in tracking.find_runs(
            client, experiment, **{tracking.PARENT_TAG: results["kmeans", size].parent_run_id})
            if run.data.tags[tracking.POINT_TAG] == sweep.points["acc"].point]
        assert curves.loc[size, "n"] == len(values) == 3
        assert curves.loc[size, "mean"] == pytest.approx(np.mean(values), abs=1e-12)
        assert curves.loc[size, "std"] == pytest.approx(np.std(values, ddof=1), abs=1e-12)
    assert pd.read_csv(tmp_path / "out" / "size_curves.csv").shape == (2, 7)
    figure = imread(tmp_path / "out" / "size_curves_synthetic@10+20.png")
    assert figure.shape[1] >= 1200
    markdown = (tmp_path / "out" / "compare.md").read_text()
    assert "![acc against the sample size on synthetic@10+20](size_curves_synthetic@10+20.png)" in markdown
    assert "| method | n = 10 | n = 20 |" in markdown
    # the figure: the benchmark in words, the method as the papers name it, a band of +- 1 std over draws
    from mtc.results.compare import benchmark_title
    from mtc.results.size_curves import draw_size_curves

    curves = result["comparison"].size_curves
    ax = draw_size_curves(curves, "synthetic@10+20", "acc", title=benchmark_title("synthetic@10+20"),
                          names=display_names(result["comparison"].sweeps)).axes[0]
    assert ax.get_title().startswith("synthetic, 10 and 20 samples per task, pooled\n") and "@" not in ax.get_title()
    assert "± 1 std over draws (band)" in ax.get_title()
    assert [text.get_text() for text in ax.get_legend().get_texts()] == ["k-means"]
    (band,) = ax.collections
    edge = band.get_paths()[0].vertices
    assert edge[:, 1].min() == pytest.approx((curves["mean"] - curves["std"]).min())
    assert edge[:, 1].max() == pytest.approx((curves["mean"] + curves["std"]).max())


def test_size_curves_order_sizes_numerically_and_skip_unpooled_sweeps():
    from mtc.results.size_curves import size_curve_frame, size_of

    trials = pd.DataFrame({"point": "a=1", "seed": ["n100/0", "n100/1", "n20/0", "n20/1"],
                           "acc/mean": [0.9, 0.7, 0.5, 0.6]})
    best = {"acc": SimpleNamespace(point="a=1")}
    pooled = SimpleNamespace(benchmark="d@20+100", method="m", points=best, trials=trials)
    single = SimpleNamespace(benchmark="d", method="m", points=best, trials=trials.assign(seed=["0", "1", "2", "3"]))
    frame = size_curve_frame([pooled, single], "acc", "acc")
    assert list(frame["size"]) == [20, 100] and list(frame.benchmark) == ["d@20+100"] * 2
    assert frame["mean"].tolist() == pytest.approx([0.55, 0.8])
    with pytest.raises(ValueError, match="expected n<size>"):
        size_of("x20")


def test_an_unfinished_sweep_newer_than_a_finished_one_is_named_beside_it():
    from mtc.results.reading import unfinished_notes

    def run(run_id, start, status):
        return SimpleNamespace(info=SimpleNamespace(run_id=run_id, run_name="kkm-synthetic", start_time=start,
                                                    status=status),
                               data=SimpleNamespace(tags={"mtc.method": "kkm", "mtc.data": "synthetic"}))

    done, stale, running = run("done", 2, "FINISHED"), run("stale", 1, "FAILED"), run("running", 3, "RUNNING")
    read = {("synthetic", "kkm"): done}
    assert unfinished_notes([stale, done], read) == []  # an older failure under a finished sweep: nothing to say
    assert unfinished_notes([stale, done, running], read) == [
        "kkm on synthetic: the newest sweep (running, RUNNING) did not finish; the older finished one (done) is read"]


@pytest.mark.parametrize("args, message", [
    (["--metric", "bogus"], "unknown --metric 'bogus'; choose one of acc, nmi, nmi_max, ari, purity"),
    (["--experiment", "nope"], "no experiment 'nope'"),
    (["--methods", "mtcmrl"], "no finished sweep matching --benchmarks/--methods in experiment 'mtc'"),
])
def test_bad_input_is_one_line_and_exit_2(store, capsys, args, message):
    _, uri = store
    with pytest.raises(SystemExit) as exit_:
        main(["--tracking-uri", uri, "--no-log", *args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_an_empty_or_missing_store_is_one_line_and_exit_2(tmp_path, capsys):
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    tracking.open_store(empty, "mtc", str(tmp_path / "artifacts"))  # the schema and the experiment, no run
    capsys.readouterr()  # MLflow's lines on creating the schema
    for uri, message in [(empty, "no finished sweep in experiment 'mtc'"),
                         (f"sqlite:///{tmp_path / 'none.db'}", f"no tracking store at {tmp_path / 'none.db'}")]:
        with pytest.raises(SystemExit) as exit_:
            main(["--tracking-uri", uri, "--out", str(tmp_path / "out")])
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err
    assert not (tmp_path / "none.db").exists() and not (tmp_path / "out").exists()


def test_the_newest_of_several_sweeps_is_read_and_named():
    def run(run_id, name, start, method="kkm", data="synthetic", label=None):
        tags = {"mtc.method": method, "mtc.data": data, **({"mtc.label": label} if label else {})}
        return SimpleNamespace(info=SimpleNamespace(run_id=run_id, run_name=name, start_time=start),
                               data=SimpleNamespace(tags=tags))

    runs = [run("old", "kkm-synthetic", 1), run("new", "kkm-synthetic", 5),
            run("x", "kkm-reuters5000", 2, data="reuters"), run("named", "my-sweep", 3, method="snmf"),
            run("variant", "smbc_sequential-reuters5000", 4, method="smbc", data="reuters", label="smbc_sequential"),
            run("plain", "smbc-reuters5000", 2, method="smbc", data="reuters", label="smbc")]
    newest, notes = newest_per_pair(runs)
    assert {pair: r.info.run_id for pair, r in newest.items()} == {
        ("synthetic", "kkm"): "new", ("reuters5000", "kkm"): "x", ("synthetic", "snmf"): "named",
        ("reuters5000", "smbc_sequential"): "variant", ("reuters5000", "smbc"): "plain"}
    assert notes == ["kkm on synthetic: 2 finished sweeps; the newest (new) is read, not old"]


def test_a_variant_is_shown_under_its_label_beside_its_methods_published_number():
    point = PointSummary("lambda_=0.5", 3, 0, {"acc/t1": 0.6}, {"acc/t1": 0.1})
    sweeps = [Sweep("webkb4", label, label, {"acc": point}, pd.DataFrame(), "smbc")
              for label in ("smbc", "smbc_sequential")]
    published = pd.DataFrame({"benchmark": ["webkb4"], "method": ["smbc"], "task": ["t1"], "metric": ["acc"],
                              "paper_mean": [0.58], "paper_std": [0.08], "paper_table": ["p Table 2"]})
    cells = cell_frame(sweeps, ["acc"], published)
    assert cells.method.tolist() == ["smbc", "smbc_sequential"] and cells.paper_mean.tolist() == [0.58, 0.58]
    assert "published_as" not in cells.columns


def test_grid_points_parse_and_extra_parameters_are_averaged_per_seed():
    assert parse_point("candidates=[a,b],lambda_=0.1") == {"candidates": "[a,b]", "lambda_": "0.1"}
    assert parse_point("defaults") == {}
    points = [f"a={a},b={b},c={c}" for a in (1, 10, 2) for b in ("x", "y") for c in (0, 1)]
    trials = pd.DataFrame([{"point": p, "seed": str(s), "acc/mean": 0.1 * i + s} for i, p in enumerate(points)
                           for s in (0, 1)])
    mean, std, averaged = grid_statistics(trials, "acc/mean")
    assert averaged == ["c"] and mean.columns.name == "a" and list(mean.columns) == ["1", "2", "10"]
    assert mean.index.name == "b" and list(mean.index) == ["x", "y"]
    # a=2,b=y: points 10 and 11 (c=0, 1): per seed the mean over c, then mean and std over seeds
    assert mean.loc["y", "2"] == pytest.approx(1.55)
    assert std.loc["y", "2"] == pytest.approx(np.std([1.05, 2.05], ddof=1))
    one = grid_statistics(trials.assign(point=[f"a={p.split(',')[0][2:]}" for p in trials.point]), "acc/mean")[0]
    assert one.shape == (1, 3)


def test_a_sweep_of_one_grid_point_gets_no_heatmap(tmp_path):
    from mtc.results.compare import sweep_heatmap

    trials = pd.DataFrame({"point": ["a=1,b=2"] * 3 + ["a=2,b=2"] * 3, "seed": list("012") * 2,
                           "acc/mean": [0.5, 0.6, 0.7, 0.8, 0.8, 0.9]})
    grid = Sweep("data", "m", "run", {}, trials, "m")
    assert sweep_heatmap(grid, "acc", tmp_path) == tmp_path / "grid_m_data.png"
    assert (tmp_path / "grid_m_data.png").stat().st_size > 0
    for one_point in (trials[trials.point == "a=1,b=2"], trials.assign(point="defaults")):
        assert sweep_heatmap(Sweep("data", "n", "run", {}, one_point, "n"), "acc", tmp_path) is None
    assert not (tmp_path / "grid_n_data.png").exists()


def test_the_label_free_criteria_are_ranked_by_the_accuracy_they_lose():
    import pandas as pd

    from mtc.results.compare import criteria_table

    rows = [("a", "acc", 0.9), ("a", "silhouette", 0.9), ("a", "objective", 0.7),
            ("b", "acc", 0.8), ("b", "silhouette", 0.75), ("b", "objective", 0.8)]
    cells = pd.DataFrame([{"benchmark": "x", "method": m, "task": "mean", "metric": "acc", "selection": s, "mean": v}
                          for m, s, v in rows])
    table = criteria_table(cells)
    assert list(table.criterion) == ["silhouette", "objective"]  # losses 0.025 and 0.1 on average
    assert table.iloc[0]["mean loss"] == "0.0250" and table.iloc[1]["largest loss"] == "0.2000"
    assert list(table["finds the best accuracy"]) == ["1", "1"]


def test_the_overview_shows_each_benchmarks_task_mean_with_the_highest_in_bold():
    from mtc.results.compare import overview_table

    rows = [("x", "a", 0.9, 0.01), ("x", "b", 0.8, 0.02), ("y", "a", 0.5, 0.1), ("y", "b", 0.5, 0.0)]
    cells = pd.DataFrame([{"benchmark": bench, "method": m, "task": task, "metric": "acc", "selection": "acc",
                           "mean": v if task == "mean" else 0.0, "std": s}
                          for bench, m, v, s in rows for task in ("task1", "mean")])
    table = overview_table(cells, "acc").set_index("benchmark")
    assert table.loc["x", "a"] == "**0.9000 ± 0.0100**" and table.loc["x", "b"] == "0.8000 ± 0.0200"
    assert table.loc["y", "a"] == "**0.5000 ± 0.1000**" and table.loc["y", "b"] == "**0.5000 ± 0.0000**"  # a tie


def fake_sweep(benchmark: str, label: str, published_as: str, tasks: list[str], level: float, seeds: int = 3) -> Sweep:
    """A sweep of one grid point whose acc and nmi_max per task are ``level`` plus the task's index
    times 0.001 (so that methods rank the same way in every cell), slightly varied over seeds."""
    rng = np.random.default_rng(len(label))
    rows = [{"point": "defaults", "seed": str(seed),
             **{f"{metric}/{task}": level + 0.001 * index + 0.001 * rng.random()
                for metric in ("acc", "nmi_max") for index, task in enumerate(tasks)}} for seed in range(seeds)]
    trials = pd.DataFrame(rows)
    for metric in ("acc", "nmi_max"):
        trials[f"{metric}/mean"] = trials[[f"{metric}/{task}" for task in tasks]].mean(axis=1)
    summary = PointSummary("defaults", seeds, 0, trials.mean(numeric_only=True).to_dict(),
                           trials.std(numeric_only=True).to_dict())
    return Sweep(benchmark, label, "run", {"acc": summary}, trials, published_as)


def test_a_critical_difference_diagram_from_the_minimum_of_cells_names_methods_as_the_papers_do(tmp_path):
    """MIN_CD_CELLS cells: the diagram is drawn, its methods in the papers' terms (a variant keeps its
    label; two configs both called A-Ncut keep their labels beside it), its ranks with two decimals."""
    from mtc.results.compare import build_comparison, draw_cd_diagram, write_outputs

    tasks = [f"task{index:02d}" for index in range(MIN_CD_CELLS)]
    sweeps = [fake_sweep("bench", label, config, tasks, level) for label, config, level in (
        ("a_ncut", "a_ncut", 0.8), ("smtnmf_a_ncut", "smtnmf_a_ncut", 0.7), ("mtcmrl_printed", "mtcmrl", 0.6),
        ("mtcfir_nf", "mtcfir_nf", 0.5))]
    names = display_names(sweeps)
    assert names == {"a_ncut": "A-Ncut (a_ncut)", "smtnmf_a_ncut": "A-Ncut (smtnmf_a_ncut)",
                     "mtcmrl_printed": "mtcmrl_printed", "mtcfir_nf": "MTCFIR-nF"}
    unpublished = pd.DataFrame(columns=["benchmark", "method", "task", "metric", "paper_mean", "paper_std",
                                        "paper_table"])
    comparison = build_comparison(sweeps, [], "acc", unpublished)
    assert comparison.friedman.n_cells.iloc[0] == MIN_CD_CELLS
    paths = write_outputs(comparison, "acc", tmp_path / "out", "fake")
    assert tmp_path / "out" / "critical_difference.png" in paths
    markdown = (tmp_path / "out" / "compare.md").read_text()
    cd = comparison.friedman.critical_difference.iloc[0]
    assert f"Average ranks (Nemenyi's critical difference at 0.05: {cd:.2f}):" in markdown
    assert "![critical-difference diagram](critical_difference.png)" in markdown
    assert "No critical-difference" not in markdown
    figure = draw_cd_diagram(comparison.friedman, comparison.nemenyi, "acc", names=names)
    assert {text.get_text() for text in figure.axes[0].texts} == {
        "A-Ncut (a_ncut) (1.00)", "A-Ncut (smtnmf_a_ncut) (2.00)", "(3.00) mtcmrl_printed", "(4.00) MTCFIR-nF"}
    assert f"critical difference {cd:.2f}" in figure.texts[0].get_text()
    # the cells CSV keeps the configs' names
    assert set(pd.read_csv(tmp_path / "out" / "cells.csv").method) == set(names)
    # one cell fewer: no diagram, and the stale one is removed
    fewer = build_comparison([fake_sweep("bench", s.method, s.published_as, tasks[:-1], level)
                              for s, level in zip(sweeps, (0.8, 0.7, 0.6, 0.5))], [], "acc", unpublished)
    write_outputs(fewer, "acc", tmp_path / "out", "fake")
    assert not (tmp_path / "out" / "critical_difference.png").exists()
    assert f"{MIN_CD_CELLS - 1} (benchmark, task) cells, fewer than the {MIN_CD_CELLS}" in \
        (tmp_path / "out" / "compare.md").read_text()


def test_a_pooled_benchmark_is_titled_in_words():
    from mtc.results.compare import benchmark_title

    assert benchmark_title("webkb_pp@20+40+60+80") == "webkb_pp, 20, 40, 60 and 80 samples per task, pooled"
    assert benchmark_title("d@20") == "d, 20 samples per task, pooled"
    assert benchmark_title("reuters") == "reuters"


def test_a_store_on_a_read_only_filesystem_is_compared_and_said_unlogged(store, tmp_path):
    """compare on a SQLite store bind-mounted read-only (the store of a finished study on a
    read-only share): the outputs are written and one note says nothing was logged; before,
    MLflow's writes of the compare run failed with three tracebacks."""
    tmp, _ = store
    shared = tmp_path / "share"
    shared.mkdir()
    shutil.copy(tmp / "mlflow.db", shared / "mlflow.db")
    probe = f"mount --bind {shared} {shared} && mount -o remount,bind,ro {shared} {shared}"
    if subprocess.run(["unshare", "--mount", "sh", "-c", f"{probe} && ! touch {shared}/x"]).returncode:
        pytest.skip("needs unshare --mount and mount --bind (root)")
    out = tmp_path / "out"
    done = subprocess.run(["unshare", "--mount", "sh", "-c",
                           f"{probe} && exec {sys.executable} -m mtc.results.compare --tracking-uri "
                           f"sqlite:///{shared / 'mlflow.db'} --out {out}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert f"not logged to MLflow: {shared / 'mlflow.db'} is read-only; the outputs are in {out}" in done.stdout
    assert (out / "compare.md").exists() and "MLflow compare run" not in done.stdout
