"""Data without labels, end to end: scikit-learn's wine data split into two CSV tasks without
the cultivar column, swept with ``data=files`` (``n_clusters=3``) by three methods. No child run
logs a label-based score, the report says the data has no labels and names the label-free
points, the parent holds label-free choices only, and ``mtc.results.compare`` ranks the methods
by the silhouette. Also one trial without labels, without Ray."""

import io
import re
from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.base import clone
from sklearn.datasets import load_wine
from sklearn.metrics import adjusted_rand_score, silhouette_score

from mtc.cli import compose_config
from mtc.config import Trial, settings
from mtc.metrics import METRIC_NAMES
from mtc.results.compare import compare, main
from mtc.results.report import NO_LABELS, SELECTIONS
from mtc.store import tracking
from mtc.sweep.driver import run_sweep, stop_kept_ray
from mtc.tasks import MultiTaskDataset, Task, cluster_names

METHODS = {"kmeans": [], "kkm": ["method.grid.kernel_width=[0.5,2.0]"], "snmf": []}
REPEATS = 3
TASKS = ["vineyard_a", "vineyard_b"]


def names_a_label_score(text: str) -> bool:
    """Whether ``text`` mentions accuracy or NMI, MLflow's run ids left out (32 hex digits, which
    may spell "acc": CI once drew e36d00fbacc646f5...)."""
    text = re.sub(r"\b[0-9a-f]{32}\b", "", text)
    return "acc" in text or "nmi" in text


def is_label_based(metric: str) -> bool:
    return metric.split("/")[0] in METRIC_NAMES


@pytest.fixture(scope="module")
def wine(tmp_path_factory):
    """The wine features scaled to [0, 1] (SNMF needs non-negative data), rows shuffled and
    split into two tasks, each written as a CSV without the label; returns the folder and the
    tasks' feature matrices."""
    tmp = tmp_path_factory.mktemp("label_free")
    features = load_wine(as_frame=True).data
    features = (features - features.min()) / (features.max() - features.min())
    halves = np.array_split(np.random.default_rng(0).permutation(len(features)), 2)
    for name, rows in zip(TASKS, halves):
        features.iloc[rows].to_csv(tmp / f"{name}.csv", index=False)
    return tmp, [features.iloc[rows].to_numpy() for rows in halves]


@pytest.fixture(scope="module")
def swept(wine):
    """One finished sweep per method on the unlabelled wine tasks, in one store."""
    tmp, _ = wine
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    paths = ",".join(str(tmp / f"{name}.csv") for name in TASKS)
    try:  # the sweeps on one local Ray, kept between them
        results = {method: run_sweep(settings(compose_config([
            f"output_dir={tmp / 'outputs'}", f"mlflow.tracking_uri={uri}", f"mlflow.artifact_root={tmp / 'artifacts'}",
            "ray.num_cpus=1", "sweep.verbose=0", f"sweep.repeats={REPEATS}", f"method={method}", "data=files",
            "data.name=wine", f"data.params.paths=[{paths}]", "data.params.n_clusters=3", *overrides])), keep_ray=True)
            for method, overrides in METHODS.items()}
    finally:
        stop_kept_ray()
    return tmp, uri, results, tracking.client_for(uri)


def children(client, result) -> list:
    return tracking.find_runs(client, result.experiment_id, **{tracking.PARENT_TAG: result.parent_run_id})


@pytest.mark.slow
def test_no_child_run_logs_a_label_based_score_and_the_silhouette_is_sklearns(wine, swept):
    _, matrices = wine
    _, _, results, client = swept
    for method, result in results.items():
        runs = children(client, result)
        assert len(runs) == REPEATS * {"kmeans": 1, "kkm": 2, "snmf": 2}[method]  # grid points x seeds
        assert all(run.info.status == "FINISHED" for run in runs)
        for run in runs:
            assert not [key for key in run.data.metrics if is_label_based(key)], method
            assert {"objective/final", "objective/relative", "silhouette/mean", *(f"silhouette/{t}" for t in TASKS),
                    "balance/mean", *(f"balance/{t}" for t in TASKS)} <= set(run.data.metrics)
        run = runs[0]
        labels = tracking.load_labels(client, run.info.run_id, run.info.artifact_uri, TASKS)
        seed = int(run.data.params["seed"])
        for task, X, predicted in zip(TASKS, matrices, labels):
            assert predicted.shape == (X.shape[0],) and set(np.unique(predicted)) <= {0, 1, 2}
            expected = silhouette_score(X, predicted, metric="cosine", sample_size=X.shape[0], random_state=seed)
            assert run.data.metrics[f"silhouette/{task}"] == pytest.approx(expected, rel=1e-9)
            assert run.data.metrics[f"balance/{task}"] == np.bincount(predicted, minlength=3).min() * 3 / X.shape[0]


@pytest.mark.slow
def test_the_report_says_there_are_no_labels_and_names_label_free_points(swept):
    from pathlib import Path

    _, _, results, client = swept
    result = results["kkm"]
    out = Path(result.output_dir)
    report = (out / "report.md").read_text()
    assert NO_LABELS in report.splitlines()
    assert not names_a_label_score(report.replace("no accuracy", ""))
    means = {s.point: s.mean for s in result.summaries}
    assert sorted(means) == ["kernel_width=0.5", "kernel_width=2.0"]
    by_silhouette = max(means, key=lambda p: means[p]["silhouette/mean"])
    by_objective = min(means, key=lambda p: means[p]["objective/final"])
    assert result.best["silhouette"].point == by_silhouette and result.best["objective"].point == by_objective
    assert f"| {SELECTIONS['objective']} | `{by_objective}` | {REPEATS} | objective/final | " \
           f"{means[by_objective]['objective/final']:.6g} |" in report
    assert f"| {SELECTIONS['silhouette']} | `{by_silhouette}` | {REPEATS} | silhouette/mean | " \
           f"{means[by_silhouette]['silhouette/mean']:.6g} |" in report
    assert f"## silhouette per task at the point of the {SELECTIONS['silhouette']}: `{by_silhouette}`" in report
    chosen = result.best["silhouette"]
    for task in [*TASKS, "mean"]:
        key = f"silhouette/{task}"
        assert f"| {task} | {chosen.mean[key]:.4f} ± {chosen.std[key]:.4f} |" in report
    # stability: the mean over tasks of the mean ARI over pairs of seeds, from the seeds' labels
    runs = [r for r in children(client, result) if r.data.tags[tracking.POINT_TAG] == result.best["stability"].point]
    labels = [tracking.load_labels(client, r.info.run_id, r.info.artifact_uri, TASKS) for r in runs]
    expected = np.mean([np.mean([adjusted_rand_score(a[t], b[t]) for a, b in combinations(labels, 2)])
                        for t in range(len(TASKS))])
    assert result.best["stability"].mean["stability/mean"] == pytest.approx(expected, rel=1e-12)
    assert sorted(result.best) == ["objective", "objective_relative", "silhouette", "stability"]
    parent = client.get_run(result.parent_run_id)
    assert parent.info.status == "FINISHED"
    assert not [key for key in parent.data.metrics if "acc" in key or is_label_based(key.split("/", 1)[-1])]
    assert parent.data.metrics["best_by_silhouette/silhouette/mean"] == means[by_silhouette]["silhouette/mean"]
    assert parent.data.tags["mtc.best_by_objective"] == by_objective and "mtc.best_by_acc" not in parent.data.tags
    header = (out / "grid.csv").read_text().splitlines()[0].split(",")
    assert "silhouette/mean mean" in header and not [column for column in header if is_label_based(column)]
    assert (out / "convergence_best_by_objective.png").is_file()
    assert not (out / "convergence_best_by_acc.png").exists()


@pytest.mark.slow
def test_compare_ranks_by_the_silhouette_when_no_sweep_has_accuracy(swept, capsys):
    tmp, uri, results, client = swept
    done = compare(uri, "mtc", tmp / "compare", log=False)
    comparison = done["comparison"]
    assert comparison.criterion == "silhouette"
    assert comparison.notes[0] == ("no sweep has accuracy (data without labels): points chosen and methods ranked by "
                                   f"silhouette, the {SELECTIONS['silhouette']} (--criterion)")
    cells = pd.read_csv(tmp / "compare" / "cells.csv")
    assert set(cells.metric) == {"silhouette"} and sorted(set(cells.method)) == sorted(METHODS)
    for method, result in results.items():  # the cells are the child runs' mean and std at the silhouette point
        point = result.best["silhouette"].point
        values = pd.DataFrame([r.data.metrics for r in children(client, result)
                               if r.data.tags[tracking.POINT_TAG] == point])
        chosen = cells[(cells.method == method) & (cells.selection == "silhouette")].set_index("task")
        assert sorted(chosen.index) == sorted([*TASKS, "mean"]) and set(chosen.point) == {point}
        for task in [*TASKS, "mean"]:
            assert chosen.loc[task, "mean"] == pytest.approx(values[f"silhouette/{task}"].mean(), rel=1e-9)
            assert chosen.loc[task, "std"] == pytest.approx(values[f"silhouette/{task}"].std(ddof=1), rel=1e-6)
    table = comparison.rank_table  # (wine, task) x method: the silhouette means, and Friedman's test on them
    assert list(table.index) == [("wine", t) for t in TASKS] and sorted(table.columns) == sorted(METHODS)
    friedman = pd.read_csv(tmp / "compare" / "friedman.csv")
    assert friedman.statistic[0] == pytest.approx(stats.friedmanchisquare(*table.to_numpy().T).statistic)
    wilcoxon = pd.read_csv(tmp / "compare" / "wilcoxon.csv")
    assert set(wilcoxon.metric) == {"silhouette"} and set(wilcoxon.task) == {*TASKS, "mean"}
    page = (tmp / "compare" / "compare.md").read_text()
    assert f"### silhouette at the {SELECTIONS['silhouette']}" in page
    overview = f"## Overview: mean silhouette over tasks at each method's grid point of the {SELECTIONS['silhouette']}"
    assert overview in page
    assert not names_a_label_score(page.replace("no sweep has accuracy", ""))
    # the command: the same files with --criterion silhouette, and the note printed
    before = (tmp / "compare" / "cells.csv").read_bytes()
    main(["--tracking-uri", uri, "--out", str(tmp / "again"), "--no-log", "--criterion", "silhouette"])
    assert (tmp / "again" / "cells.csv").read_bytes() == before
    main(["--tracking-uri", uri, "--out", str(tmp / "again"), "--no-log"])
    assert comparison.notes[0] in capsys.readouterr().out.splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["--criterion", "acc"], "error: no sweep of experiment 'mtc' has a point to compare: kkm on wine ("),
    (["--criterion", "objective"], "error: --criterion objective: each method minimises its own objective, whose "
                                   "values do not compare across methods; choose one of acc, silhouette"),
    (["--criterion", "stability"], "error: --criterion stability: it is one value per grid point (the ARI between "
                                   "pairs of seeds), no score per seed and task; choose one of acc, silhouette"),
    (["--criterion", "bogus"], "error: unknown --criterion 'bogus'; choose one of acc, silhouette"),
    (["--metric", "nmi"], "error: --metric nmi needs --criterion acc (labels); by silhouette the tables show "
                          "silhouette/mean"),
])
def test_compare_without_labels_refuses_what_needs_them_in_one_line(swept, capsys, args, message):
    tmp, uri, _, _ = swept
    with pytest.raises(SystemExit) as exit_:
        main(["--tracking-uri", uri, "--out", str(tmp / "refused"), "--no-log", *args])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(message), err
    assert not (tmp / "refused").exists()


@pytest.mark.parametrize("method", ["mtcmrl", "mtcfir"])
def test_a_trial_without_labels_has_the_label_free_scores_and_clusters_named_by_index(method):
    """The same fit with and without the labels: the same clusters and label-free scores; no
    label-based score, no reference matrix from labels, clusters in their own order."""
    from mtc.data.synthetic import make_synthetic
    from mtc.methods.mtcfir import MTCFIR
    from mtc.methods.mtcmrl import MTCMRL
    from mtc.trial import run_trial

    labelled = make_synthetic(n_tasks=2, n_clusters=3, n_shared=1, samples_per_cluster=12, n_features=20, seed=1)
    unlabelled = MultiTaskDataset("u", tuple(Task(t.name, t.X, None, cluster_names(t.n_clusters))
                                             for t in labelled.tasks))
    prototype = {"mtcmrl": MTCMRL, "mtcfir": MTCFIR}[method](n_clusters=[3, 3], max_iter=20)
    with_labels = run_trial(labelled, prototype, Trial({}, 0), None)
    without = run_trial(unlabelled, prototype, Trial({}, 0), None)
    assert all(np.array_equal(a, b) for a, b in zip(with_labels.labels, without.labels))
    assert not [key for key in without.metrics if is_label_based(key)]
    assert {key: value for key, value in with_labels.metrics.items()
            if not is_label_based(key) and key != "fit_seconds"} == \
        pytest.approx({key: value for key, value in without.metrics.items() if key != "fit_seconds"}, nan_ok=True)
    assert "acc/mean" in with_labels.metrics
    record = clone(prototype).set_params(random_state=0).fit(unlabelled.matrices).record_
    for name, matrix in without.matrices.items():
        raw = record.matrices[name]
        for (i, j), block in matrix.blocks.items():
            np.testing.assert_array_equal(block, raw.blocks[(i, j)])  # clusters (and samples) in their own order
            for axis, names in ((raw.rows, matrix.row_names[i]), (raw.cols, matrix.col_names[j])):
                if axis == "cluster":
                    assert names == ["cluster0", "cluster1", "cluster2"]
                elif axis == "sample":
                    assert names == [str(k) for k in range(block.shape[0])]
    assert "ideal_task_weights" not in without.matrices
    assert ("ideal_task_weights" in with_labels.matrices) == (method == "mtcfir")


def test_the_notebook_frames_read_a_store_without_labels(swept, tmp_path):
    import mtc.results

    _, uri, results, _ = swept
    trials = mtc.results.trials(uri)
    assert len(trials) == REPEATS * (1 + 2 + 2) and not [c for c in trials.columns if is_label_based(c)]
    chosen = mtc.results.chosen(uri)
    assert "acc" not in set(chosen.selection) and set(chosen.method) == set(METHODS)
    comparison = mtc.results.comparison(uri)
    assert comparison.criterion == "silhouette" and comparison.metric == "silhouette"
    compare(uri, "mtc", tmp_path, log=False)
    written = pd.read_csv(tmp_path / "cells.csv")
    pd.testing.assert_frame_equal(pd.read_csv(io.StringIO(comparison.cells.to_csv(index=False))), written)
    silhouette = chosen[chosen.selection == "silhouette"].set_index("method")["silhouette/mean"]
    for method, result in results.items():
        assert silhouette[method] == pytest.approx(result.best["silhouette"].mean["silhouette/mean"], rel=1e-12)


def test_one_fit_without_labels_from_the_command_line(wine, tmp_path):
    import subprocess
    import sys

    folder, _ = wine
    paths = ",".join(str(folder / f"{name}.csv") for name in TASKS)
    done = subprocess.run([sys.executable, "-m", "mtc.run", "method=kmeans", "data=files", "data.name=wine",
                           f"data.params.paths=[{paths}]", "data.params.n_clusters=3",
                           f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
                           f"mlflow.artifact_root={tmp_path / 'artifacts'}", f"output_dir={tmp_path / 'out'}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = {line.split(":")[0].strip(): line for line in done.stdout.splitlines() if "silhouette=" in line}
    assert set(lines) == {*TASKS, "mean"} and "acc=" not in done.stdout
