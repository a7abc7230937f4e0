"""End to end: Hydra config -> Ray Tune trials -> MLflow runs -> report (local Ray)."""

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from mtc import tracking
from mtc.cli import CONF_DIR
from mtc.sweep import run_sweep

pytestmark = pytest.mark.slow


def sweep_config(tmp, *overrides):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=[
            f"output_dir={tmp / 'outputs'}", f"mlflow.tracking_uri=sqlite:///{tmp / 'mlflow.db'}",
            f"mlflow.artifact_root={tmp / 'artifacts'}", "ray.num_cpus=2", "sweep.verbose=0",
            "method=kkm", "method.grid.kernel_width=[1.0,-1.0]", "sweep.repeats=2",
            "data.params.n_tasks=2", "data.params.samples_per_cluster=20", *overrides,
        ])


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    cfg = sweep_config(tmp)
    result = run_sweep(cfg)
    client = tracking.client_for(result["tracking_uri"])
    return cfg, tmp, result, client


def children(client, result):
    return tracking.find_runs(client, result["experiment_id"], **{tracking.PARENT_TAG: result["parent_run_id"]})


def test_one_parent_and_one_child_per_trial(finished_sweep):
    _, _, result, client = finished_sweep
    parent = client.get_run(result["parent_run_id"])
    assert parent.info.status == "FINISHED"
    assert parent.data.params["method.name"] == "kkm" and parent.data.params["sweep.repeats"] == "2"
    runs = children(client, result)
    keys = sorted(run.data.tags[tracking.TRIAL_KEY_TAG] for run in runs)
    assert keys == [f"kernel_width={w}|seed={s}" for w in (-1.0, 1.0) for s in (0, 1)]
    assert all(run.data.tags[tracking.DATASET_HASH_TAG] == parent.data.tags[tracking.DATASET_HASH_TAG] for run in runs)


def test_finished_child_has_metrics_trace_params_and_artifacts(finished_sweep):
    _, _, result, client = finished_sweep
    run = next(r for r in children(client, result) if r.data.tags[tracking.TRIAL_KEY_TAG] == "kernel_width=1.0|seed=1")
    assert run.info.status == "FINISHED"
    for metric in ("acc", "nmi", "nmi_max", "ari", "purity"):
        assert run.data.metrics[f"{metric}/task0"] == 1.0 and run.data.metrics[f"{metric}/mean"] == 1.0
    assert run.data.params["params.kernel_width"] == "1.0" and run.data.params["seed"] == "1"
    history = client.get_metric_history(run.info.run_id, "objective")
    assert [m.step for m in history] == list(range(len(history))) and len(history) >= 1
    assert history[-1].value == pytest.approx(run.data.metrics["objective/final"])
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"labels.npz", "config.json", "objective_trace.csv"} <= names
    assert "convergence.png" not in names  # drawn once per best grid point, on the parent
    labels = np.load(client.download_artifacts(run.info.run_id, "labels.npz"))
    assert sorted(labels.files) == ["task0", "task1"] and labels["task0"].shape == (80,)


def test_failing_trials_are_recorded_and_do_not_stop_the_sweep(finished_sweep):
    _, tmp, result, client = finished_sweep
    failed = [r for r in children(client, result) if r.info.status == "FAILED"]
    assert len(failed) == 2
    assert all("kernel_width must be positive" in r.data.tags["mtc.error"] for r in failed)
    best = result["best"]["acc"]
    assert best.point == "kernel_width=1.0" and best.n_runs == 2 and best.mean["acc/mean"] == 1.0
    report = (tmp / "outputs" / "kkm-synthetic" / "report.md").read_text()
    assert "2 trial(s) failed" in report and "| task0 | 1.0000 ± 0.0000 |" in report
    parent_artifacts = {a.path for a in client.list_artifacts(result["parent_run_id"])}
    assert {"report.md", "grid.csv", "convergence_best_by_acc.png", "convergence_best_by_objective.png"} <= parent_artifacts
    assert client.get_run(result["parent_run_id"]).data.metrics["best_by_acc/acc/mean"] == 1.0


def test_resume_keeps_finished_runs_and_retries_only_the_rest(finished_sweep):
    cfg, _, result, client = finished_sweep
    before = {r.data.tags[tracking.TRIAL_KEY_TAG]: r.info.run_id for r in children(client, result)}
    again = run_sweep(cfg)
    assert again["parent_run_id"] == result["parent_run_id"]
    after = {r.data.tags[tracking.TRIAL_KEY_TAG]: r.info.run_id for r in children(client, result)}
    assert sorted(after) == sorted(before)  # still exactly one child run per trial
    for key in ("kernel_width=1.0|seed=0", "kernel_width=1.0|seed=1"):
        assert after[key] == before[key]  # finished: not run again
    for key in ("kernel_width=-1.0|seed=0", "kernel_width=-1.0|seed=1"):
        assert after[key] != before[key]  # failed: retried in a fresh run


def test_seeds_of_a_grid_point_can_share_one_tune_trial(tmp_path):
    result = run_sweep(sweep_config(tmp_path, "sweep.seeds_per_trial=2"))
    assert result["trials_run"] == 4 and result["tune_trials"] == 2  # one Tune trial per grid point
    client = tracking.client_for(result["tracking_uri"])
    runs = {r.data.tags[tracking.TRIAL_KEY_TAG]: r for r in children(client, result)}
    assert len(runs) == 4  # still one MLflow child run per (grid point, seed)
    for seed in (0, 1):
        assert runs[f"kernel_width=1.0|seed={seed}"].info.status == "FINISHED"
        failed = runs[f"kernel_width=-1.0|seed={seed}"]
        assert failed.info.status == "FAILED" and "kernel_width must be positive" in failed.data.tags["mtc.error"]
    assert result["best"]["acc"].n_runs == 2 and result["best"]["acc"].mean["acc/mean"] == 1.0
