import time

import numpy as np

from mtc import tracking
from mtc.config import Trial
from mtc.data.synthetic import make_synthetic
from mtc.methods import MTCMRL
from mtc.trial import run_trial


def logged_artifacts(tmp_path, **plots):
    dataset = make_synthetic(n_tasks=2, n_clusters=3, n_shared=1, samples_per_cluster=10, seed=0)
    outcome = run_trial(dataset, MTCMRL(n_clusters=dataset.n_clusters, alpha=1.0, max_iter=5), Trial({}, 0))
    client = tracking.client_for(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = tracking.ensure_experiment(client, "t", str(tmp_path / "artifacts"))
    run = client.create_run(experiment)
    config = {"alpha": 1.0, "method": "mtcmrl", "seed": 0, "data": {"name": "synthetic"}}
    tracking.log_trial(client, run.info.run_id, outcome, config, dataset.task_names, {"mtc.node_id": "n1"}, **plots)
    logged = client.get_run(run.info.run_id)
    assert logged.data.tags["mtc.node_id"] == "n1" and logged.data.params["alpha"] == "1.0"
    history = client.get_metric_history(run.info.run_id, "w_norm/task1")
    assert [m.step for m in history] == list(range(len(outcome.objective_trace)))
    G = outcome.matrices["G"]
    g = np.load(client.download_artifacts(run.info.run_id, "G_task0__task1.npy"))
    np.testing.assert_allclose(g, G.blocks[(0, 1)])
    header = open(client.download_artifacts(run.info.run_id, "G_task0__task1.csv")).readline().strip()
    assert header == "row," + ",".join(G.col_names[1])
    return {a.path for a in client.list_artifacts(run.info.run_id)}


def test_trial_artifacts_with_plots(tmp_path):
    names = logged_artifacts(tmp_path)
    assert {"labels.npz", "config.json", "objective_trace.csv", "convergence.png", "G.png",
            "G_task0__task1.npy", "G_task1__task0.csv"} <= names


def test_trial_plots_can_be_switched_off(tmp_path):
    names = logged_artifacts(tmp_path, heatmaps=False, convergence=False)
    assert "convergence.png" not in names and "G.png" not in names
    assert {"labels.npz", "G_task0__task1.npy"} <= names


def test_a_trial_whose_artifacts_cannot_be_written_ends_failed_with_its_error(tmp_path):
    from mtc.sweep import fit_and_log

    (tmp_path / "a-file").write_text("not a folder")
    dataset = make_synthetic(n_tasks=2, n_clusters=3, n_shared=1, samples_per_cluster=10, seed=0)
    client = tracking.client_for(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = tracking.ensure_experiment(client, "t", str(tmp_path / "a-file" / "artifacts"))
    run_id = client.create_run(experiment).info.run_id
    prototype = MTCMRL(n_clusters=dataset.n_clusters, alpha=1.0, max_iter=5)
    metrics = fit_and_log(client, Trial({}, 0, run_id), dataset, prototype, "mtcmrl", {"name": "synthetic"}, 1,
                          heatmaps=False)
    assert metrics is None
    run = client.get_run(run_id)
    assert run.info.status == "FAILED"  # not left RUNNING by a second failure in the failure path
    assert run.data.tags["mtc.error"].split(":")[0] in ("NotADirectoryError", "FileExistsError", "OSError")
    assert run.data.tags["mtc.error_txt"].startswith("not written: ")


def test_a_trial_run_is_created_as_its_fit_starts_and_a_retry_keeps_finished_runs_and_replaces_started_ones(tmp_path):
    client = tracking.client_for(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = tracking.ensure_experiment(client, "t", str(tmp_path / "artifacts"))
    parent = client.create_run(experiment).info.run_id
    trial = Trial({"a": 1}, 0)
    pending, finished = tracking.prepare_child_runs(client, experiment, parent, [trial])
    assert pending == [trial] and finished == []
    assert [r.info.run_id for r in tracking.find_runs(client, experiment)] == [parent]  # no run before the fit starts
    before = int(time.time() * 1000)
    run_id, metrics = tracking.start_trial_run(client, experiment, parent, trial, {"x": "y"})
    run = client.get_run(run_id)
    assert metrics is None and run.info.status == "RUNNING" and run.info.start_time >= before  # the trial's own time
    assert run.info.run_name == trial.name and run.data.tags["x"] == "y"
    assert run.data.tags[tracking.PARENT_TAG] == parent and run.data.tags[tracking.TRIAL_KEY_TAG] == trial.key
    client.log_metric(run_id, "objective", 3.0, step=0)  # then the worker died
    fresh, metrics = tracking.start_trial_run(client, experiment, parent, trial, {"x": "y"})  # the retry
    assert fresh != run_id and metrics is None
    old, new = client.get_run(run_id), client.get_run(fresh)
    assert old.info.lifecycle_stage == "deleted"
    assert new.info.run_name == old.info.run_name and new.data.metrics == {}
    assert {k: v for k, v in new.data.tags.items() if not k.startswith("mlflow.") or k == tracking.PARENT_TAG} == \
        {k: v for k, v in old.data.tags.items() if not k.startswith("mlflow.") or k == tracking.PARENT_TAG}
    client.log_metric(fresh, "acc/mean", 1.0)
    client.set_terminated(fresh, "FINISHED")
    assert tracking.start_trial_run(client, experiment, parent, trial, {}) == (None, {"acc/mean": 1.0})  # kept
    other = Trial({"a": 2}, 0)
    started, _ = tracking.start_trial_run(client, experiment, parent, other, {})  # then the driver died
    pending, finished = tracking.prepare_child_runs(client, experiment, parent, [trial, other])  # resumed
    assert pending == [other] and [r.info.run_id for r in finished] == [fresh]
    assert client.get_run(started).info.lifecycle_stage == "deleted"


def test_the_printed_links_open_the_runs_in_model_training_mode():
    text = tracking.links("sqlite:////x/mlflow.db", "3", "abc")
    assert "http://127.0.0.1:5000/#/experiments/3/runs?workflowType=machine_learning after: mlflow ui " \
           "--backend-store-uri sqlite:////x/mlflow.db" in text
    assert tracking.links("http://h:5000", "3", "abc").splitlines()[1] == \
        "MLflow parent run: http://h:5000/#/experiments/3/runs/abc?workflowType=machine_learning"
