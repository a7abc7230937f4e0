"""Own data you can trust: tables scaled by a declared, measured default (data.params.scale),
input needs refused before Ray, and every method on the data in one study whose label-free
choices never take a degenerate (collapsed) clustering."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from mtc import reproduce
from mtc.cli import compose_config
from mtc.config import settings
from mtc.data import load_dataset
from mtc.data.scaling import DEFAULT_SCALE, scaled
from mtc.errors import InputError

OWN_DATA_STUDY = str(Path(__file__).parent / "studies" / "own_data.yaml")


@pytest.fixture(scope="module")
def breast_cancer(tmp_path_factory):
    """scikit-learn's breast-cancer table as two tasks (stratified halves), labelled and not."""
    folder = tmp_path_factory.mktemp("breast_cancer")
    frame = load_breast_cancer(as_frame=True).frame.rename(columns={"target": "label"})
    halves = train_test_split(frame, test_size=0.5, stratify=frame.label, random_state=0)
    for i, half in enumerate(halves, 1):
        half.to_csv(folder / f"t{i}.csv", index=False)
        half.drop(columns="label").to_csv(folder / f"u{i}.csv", index=False)
    return folder


def files_overrides(folder, names, *extra):
    paths = ",".join(str(folder / name) for name in names)
    return ["data=files", f"data.params.paths=[{paths}]", "data.name=bc", *extra]


def test_scales_are_scikit_learn_transformers_fitted_on_the_pooled_tasks_or_per_task():
    rng = np.random.default_rng(0)
    a, b = rng.normal(5, 2, (30, 3)), rng.normal(-1, 7, (20, 3))
    pooled = scaled([a, b], "standard")
    stacked = np.vstack(pooled)
    np.testing.assert_allclose(stacked.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(stacked.std(axis=0), 1, atol=1e-12)
    assert abs(pooled[0].mean()) > 0.1  # one map for both tasks: task a keeps its offset
    for task in scaled([a, b], "standard", "per_task"):
        np.testing.assert_allclose(task.mean(axis=0), 0, atol=1e-12)
    low, high = np.vstack(scaled([a, b], "minmax")).min(axis=0), np.vstack(scaled([a, b], "minmax")).max(axis=0)
    np.testing.assert_allclose(low, 0) and np.testing.assert_allclose(high, 1)
    np.testing.assert_allclose(np.linalg.norm(scaled([a, b], "l2")[1], axis=1), 1)
    np.testing.assert_array_equal(scaled([a, b], "none")[0], a)
    with pytest.raises(InputError, match="scale=log1p needs non-negative features"):
        scaled([a, b], "log1p")
    with pytest.raises(InputError, match="scale must be one of"):
        scaled([a, b], "zscore")
    counts = sp.random(10, 6, density=0.4, random_state=0, format="csr") * 5
    out = scaled([counts, counts], "standard")
    assert sp.issparse(out[0]) and out[0].nnz == counts.nnz  # no centring of sparse features


def test_the_scale_keys_the_cache_and_a_label_like_column_gets_a_note(breast_cancer, tmp_path, capsys):
    frame = pd.read_csv(breast_cancer / "t1.csv").rename(columns={"label": "class"})
    frame.to_csv(tmp_path / "a.csv", index=False)
    frame.to_csv(tmp_path / "b.csv", index=False)
    base = {"paths": [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")], "n_clusters": 2}
    raw = load_dataset("mine", "files", {**base, "scale": "none"}, cache_dir=str(tmp_path / "cache"))
    standard = load_dataset("mine", "files", {**base, "scale": "standard"}, cache_dir=str(tmp_path / "cache"))
    assert raw.meta["cache_key"] != standard.meta["cache_key"]
    assert raw.meta["scale"] == "none" and standard.meta["scale"] == "standard"
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 2
    assert raw.meta["notes"] == ["feature column(s) 'class' look like labels but are clustered as features; if they "
                                 "are the classes, set data.params.label_column=class"]


@pytest.mark.parametrize("method, needs", [("kmeans", "any"), ("snmf", "any"), ("smtnmf", "non_negative")])
def test_auto_scale_is_the_measured_default_for_the_method_input_needs(breast_cancer, method, needs):
    run = settings(compose_config([f"method={method}", *files_overrides(breast_cancer, ["t1.csv", "t2.csv"],
                                                                         "data.params.label_column=label")]))
    assert run.data.params["scale"] == DEFAULT_SCALE[needs]
    assert run.data.resolved["params"]["scale"] == DEFAULT_SCALE[needs]  # what every run records as its params


def test_input_a_method_was_not_derived_for_is_refused_before_ray_starts(breast_cancer, tmp_path):
    import ray

    import mtc.sweep

    with pytest.raises(InputError, match="SMTNMF needs non-negative data .* data.params.scale=minmax"):
        mtc.sweep.run("smtnmf", "files", *files_overrides(breast_cancer, ["t1.csv", "t2.csv"],
                                                          "data.params.label_column=label",
                                                          "data.params.scale=standard"),
                      f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}", f"output_dir={tmp_path / 'out'}")
    assert not ray.is_initialized()
    assert not (tmp_path / "mlflow.db").exists()


def test_snmf_on_breast_cancer_with_the_default_scale_beats_the_majority_by_ten_points(breast_cancer, tmp_path):
    from mtc.run import run_once

    run = settings(compose_config(["method=snmf", "seed=0", f"mlflow.tracking_uri=sqlite:///{tmp_path / 'm.db'}",
                                   *files_overrides(breast_cancer, ["t1.csv", "t2.csv"],
                                                    "data.params.label_column=label")]))
    metrics = run_once(run)
    majority = 357 / 569
    assert metrics["acc/mean"] >= majority + 0.10
    assert metrics["degenerate_tasks"] == 0
    raw = run_once(settings(compose_config(["method=snmf", "seed=0", f"mlflow.tracking_uri=sqlite:///{tmp_path / 'm.db'}",
                                            *files_overrides(breast_cancer, ["t1.csv", "t2.csv"],
                                                             "data.params.label_column=label",
                                                             "data.params.scale=none")])))
    assert raw["degenerate_tasks"] == 2 and raw["acc/mean"] == pytest.approx(majority, abs=0.01)  # the collapse


@pytest.mark.slow
def test_every_method_on_own_data_lists_what_cannot_run_and_never_chooses_a_collapse(breast_cancer, tmp_path):
    """Unlabelled breast cancer as read (scale=none: SNMF puts each task into one cluster), tasks of
    2 and 3 clusters (SMT-NMF shares its clusters across tasks: listed, not run)."""
    from mtc.sweep.driver import stop_kept_ray

    study = reproduce.load_study(OWN_DATA_STUDY)
    overrides = [*files_overrides(breast_cancer, ["u1.csv", "u2.csv"], "data.params.n_clusters=[2,3]",
                                  "data.params.scale=none"),
                 "sweep.repeats=2", "ray.num_cpus=1", f"output_dir={tmp_path / 'outputs'}",
                 f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}", f"mlflow.artifact_root={tmp_path / 'art'}"]
    not_run = {}
    plans = reproduce.plan_study(study, overrides, [], not_run)
    assert [plan.name for plan in plans] == ["kmeans-bc", "snmf-bc"]
    assert list(not_run) == ["smtnmf"] and "same number of clusters in every task" in not_run["smtnmf"]
    try:
        outcome = reproduce.run(OWN_DATA_STUDY, *overrides, compare_root=tmp_path)  # as from a notebook
    finally:
        stop_kept_ray()
    assert sorted(outcome["ran"]) == ["kmeans-bc", "snmf-bc"] and outcome["not_run"] == not_run
    folder = tmp_path / "compare_bc"
    assert list(csv.reader((folder / "not_run.csv").open()))[1][0] == "smtnmf"
    compare_md = (folder / "compare.md").read_text()
    assert "## methods that cannot run on this data" in compare_md
    report = (plans[1].output_dir / "report.md").read_text()
    assert "snmf collapsed on this data: all 4 trials are degenerate" in report
    assert "(none: every trial is degenerate" in report  # no label-free choice of a collapse
    grid = pd.read_csv(plans[1].output_dir / "grid.csv")
    assert (grid.n_degenerate == grid.n_runs).all()
    kmeans = pd.read_csv(plans[0].output_dir / "grid.csv")
    assert (kmeans.n_degenerate == 0).all()
    assert "kmeans" in compare_md and "silhouette" in compare_md


@pytest.mark.slow
def test_a_second_study_from_python_reuses_the_processes_ray(breast_cancer, tmp_path):
    """reproduce.run keeps the local Ray it started: the next call (here the same study, whose
    sweeps all finished: no Ray needed) and a new sweep from mtc.sweep.run find it running."""
    import ray

    import mtc.sweep
    from mtc.sweep.driver import stop_kept_ray

    store = [f"output_dir={tmp_path / 'outputs'}", f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
             f"mlflow.artifact_root={tmp_path / 'art'}", "ray.num_cpus=1"]
    try:
        first = reproduce.run(OWN_DATA_STUDY, *files_overrides(breast_cancer, ["t1.csv", "t2.csv"],
                                                               "data.params.label_column=label"),
                              "sweep.repeats=1", *store, only=("kmeans",), compare_root=tmp_path)
        assert first["ray_started"] and ray.is_initialized()
        assert first["compared"] == [(tmp_path / "compare_bc").resolve()]  # --only keeps own data's compare folder
        node = ray.get_runtime_context().get_node_id()
        mtc.sweep.run("kmeans", "synthetic", "sweep.repeats=1", *store)
        assert ray.is_initialized() and ray.get_runtime_context().get_node_id() == node
    finally:
        stop_kept_ray()
    assert not ray.is_initialized()
