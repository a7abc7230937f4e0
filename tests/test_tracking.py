import contextlib
import json
import sqlite3
import time

import numpy as np

from mtc.config import Trial
from mtc.data.synthetic import make_synthetic
from mtc.methods import MTCMRL
from mtc.results.plots import readable_files
from mtc.results.report import PointSummary
from mtc.store import run_writer, tracking
from mtc.store.empty_store import empty_store_path
from mtc.trial import run_trial


def logged_artifacts(tmp_path, readable):
    dataset = make_synthetic(n_tasks=2, n_clusters=3, n_shared=1, samples_per_cluster=10, seed=0)
    outcome = run_trial(dataset, MTCMRL(n_clusters=dataset.n_clusters, alpha=1.0, max_iter=5), Trial({}, 0), None)
    client = tracking.client_for(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = tracking.ensure_experiment(client, "t", str(tmp_path / "artifacts"))
    run = client.create_run(experiment, tags={"mtc.node_id": "n1"})
    config = {"alpha": 1.0, "method": "mtcmrl", "seed": 0, "data": {"name": "synthetic", "params": {"n_tasks": 2}}}
    files = (lambda folder: readable_files(folder, outcome, config, dataset.task_names)) if readable else None
    tracking.log_trial(client, run.info.run_id, run.info.artifact_uri, outcome, config, dataset.task_names, files)
    logged = client.get_run(run.info.run_id)
    assert logged.data.tags["mtc.node_id"] == "n1" and logged.data.params["alpha"] == "1.0"
    assert logged.data.params["data.name"] == "synthetic" and "data.params.n_tasks" not in logged.data.params
    assert logged.data.params["n_samples.task1"] == "30" and not any(k.startswith("n_samples") for k in logged.data.metrics)
    arrays = tracking.load_trial_arrays(client, run.info.run_id, run.info.artifact_uri)
    assert [arrays[f"clusters/{task}"].tolist() for task in dataset.task_names] == outcome.cluster_names
    np.testing.assert_array_equal(arrays["trace/objective"], outcome.objective_trace)
    np.testing.assert_array_equal(arrays["trace/w_norm/task1"], outcome.traces["w_norm/task1"])
    G = outcome.matrices["G"]
    np.testing.assert_allclose(arrays["matrix/G_task0__task1"], G.blocks[(0, 1)])
    assert arrays["cols/G_task0__task1"].tolist() == G.col_names[1]
    assert json.loads(str(arrays["config"])) == config
    labels = tracking.load_labels(client, run.info.run_id, run.info.artifact_uri, dataset.task_names)
    assert all((a == b).all() for a, b in zip(labels, outcome.labels))
    return {a.path for a in client.list_artifacts(run.info.run_id)}, client, run.info.run_id, G


def test_a_trial_is_one_artifact_and_its_readable_files_on_request(tmp_path):
    assert logged_artifacts(tmp_path / "compact", readable=False)[0] == {"trial.npz"}
    names, client, run_id, G = logged_artifacts(tmp_path / "readable", readable=True)
    assert {"trial.npz", "labels.csv", "config.json", "objective_trace.csv", "convergence.png", "G.png",
            "G_task1__task0.csv"} <= names
    header = open(client.download_artifacts(run_id, "G_task0__task1.csv")).readline().strip()
    assert header == "row," + ",".join(G.col_names[1])


def test_the_metric_trace_keeps_first_and_last_log_spaced_and_the_artifact_every_step(tmp_path):
    """A long trace is stored once in full (trial.npz) and as at most CHART_POINTS metric rows,
    its first and last steps kept, dense at the start; both read back through MLflow's client."""
    from types import SimpleNamespace

    steps = tracking.chart_steps(1000)
    assert steps[0] == 0 and steps[-1] == 999 and len(steps) <= tracking.CHART_POINTS
    assert list(steps[:10]) == list(range(10)) and np.all(np.diff(steps) > 0)
    assert list(tracking.chart_steps(7)) == list(range(7))
    trace = 1.0 / np.arange(1, 1001)
    outcome = SimpleNamespace(objective_trace=trace, traces={"x/task0": np.arange(1000.0)},
                              labels=[np.array([0, 1])], matrices={}, metrics={"objective/final": trace[-1]},
                              n_samples={"task0": 2}, cluster_names=[["a", "b"]])
    client = tracking.client_for(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = tracking.ensure_experiment(client, "t", str(tmp_path / "artifacts"))
    run = client.create_run(experiment)
    tracking.log_trial(client, run.info.run_id, run.info.artifact_uri, outcome, {"seed": 0, "method": "m"}, ["task0"])
    history = sorted(client.get_metric_history(run.info.run_id, tracking.OBJECTIVE_TRACE), key=lambda m: m.step)
    assert [m.step for m in history] == list(steps)
    assert history[0].value == trace[0] and history[-1].value == trace[-1]
    assert client.get_metric_history(run.info.run_id, "x/task0") == []  # diagnostics: the artifact only
    stored = np.load(client.download_artifacts(run.info.run_id, "trial.npz"))
    np.testing.assert_array_equal(stored["trace/objective"], trace)
    np.testing.assert_array_equal(stored["trace/x/task0"], np.arange(1000.0))
    np.testing.assert_array_equal(tracking.load_objective_trace(client, run.info.run_id, run.info.artifact_uri), trace)


def test_a_batch_whose_artifacts_cannot_be_written_is_lost_with_its_error_and_leaves_no_run(tmp_path):
    from mtc.sweep.driver import SweepJob, fit_trial, write_fitted

    (tmp_path / "a-file").write_text("not a folder")
    dataset = make_synthetic(n_tasks=2, n_clusters=3, n_shared=1, samples_per_cluster=10, seed=0)
    client = tracking.client_for(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = tracking.ensure_experiment(client, "t", str(tmp_path / "a-file" / "artifacts"))
    parent = client.create_run(experiment).info.run_id
    prototype = MTCMRL(n_clusters=dataset.n_clusters, alpha=1.0, max_iter=5)
    job = SweepJob({0: dataset, 1: dataset}, prototype, "mtcmrl", {"name": "synthetic"}, "", experiment, parent, {},
                   False)
    fitted = [fit_trial(job, Trial({}, seed), {}) for seed in (0, 1)]
    assert all(metrics["acc/mean"] > 0.9 for _, metrics in fitted)
    written, lost = write_fitted(client, job, fitted)  # no result: the error in one line per seed, not metrics
    assert written == [] and len(lost) == 2 and "\n" not in lost[0]
    assert lost[0].split(":")[0] in ("NotADirectoryError", "FileExistsError", "OSError")
    assert tracking.find_runs(client, experiment, **{tracking.PARENT_TAG: parent}) == []  # nothing half-written


def test_a_trial_run_is_created_after_its_fit_and_a_retry_keeps_finished_runs_and_replaces_others(tmp_path):
    client = tracking.client_for(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = tracking.ensure_experiment(client, "t", str(tmp_path / "artifacts"))
    parent = client.create_run(experiment).info.run_id
    trial = Trial({"a": 1}, 0)
    pending, finished = tracking.prepare_child_runs(client, experiment, parent, [trial])
    assert pending == [trial] and finished == []
    assert [r.info.run_id for r in tracking.find_runs(client, experiment)] == [parent]  # no run before the fit
    start = int(time.time() * 1000) - 5000  # the fit started 5 s ago
    # a worker that died mid-write on a tracking server (one call per run) leaves a RUNNING run
    run_id = client.create_run(experiment, start_time=start, run_name=trial.name,
                               tags=tracking.trial_tags(parent, trial, {"x": "y"})).info.run_id
    run = client.get_run(run_id)
    assert run.data.tags[tracking.PARENT_TAG] == parent and run.data.tags[tracking.TRIAL_KEY_TAG] == trial.key
    client.log_metric(run_id, "objective", 3.0, step=0)  # then the worker died
    earlier = tracking.earlier_runs(client, experiment, parent, trial.label)
    assert tracking.skip_or_clear(client, earlier[trial.key]) is None  # the retry: the half-logged run goes
    assert client.get_run(run_id).info.lifecycle_stage == "deleted"
    finished = run_writer.RunRecord(trial.name, tracking.trial_tags(parent, trial, {"x": "y"}), {},
                                    (("acc/mean", 1.0, 0),), "FINISHED", start, start + 4000, lambda folder: None)
    [fresh] = run_writer.write_runs(client, experiment, parent, [finished])
    run = client.get_run(fresh)
    assert run.info.status == "FINISHED" and run.info.start_time == start  # the trial's own time
    assert run.info.run_name == trial.name and run.data.tags["x"] == "y"
    earlier = tracking.earlier_runs(client, experiment, parent, trial.label)
    assert tracking.skip_or_clear(client, earlier[trial.key]) == {"acc/mean": 1.0}  # kept
    other = Trial({"a": 2}, 0)
    started = client.create_run(experiment, tags=tracking.trial_tags(parent, other, {})).info.run_id  # driver died
    pending, finished = tracking.prepare_child_runs(client, experiment, parent, [trial, other])  # resumed
    assert pending == [other] and [r.info.run_id for r in finished] == [fresh]
    assert client.get_run(started).info.lifecycle_stage == "deleted"


def test_the_printed_links_open_the_runs_in_model_training_mode():
    text = tracking.links("sqlite:////x/mlflow.db", "3", "abc", "acc/mean")
    # the runs link opens the sweeps view by its key alone (the page ignores a stored view beside search parameters)
    assert text.splitlines()[0] == (
        "MLflow runs, a row per sweep, best score first: http://127.0.0.1:5000/#/experiments/3/runs?"
        "viewStateShareKey=sweeps&workflowType=machine_learning after: mlflow ui --backend-store-uri "
        "sqlite:////x/mlflow.db")
    assert tracking.links("http://h:5000", "3", "abc", "acc/mean").splitlines()[1] == \
        "MLflow parent run: http://h:5000/#/experiments/3/runs/abc?workflowType=machine_learning"


def test_the_printed_links_use_the_address_of_the_users_mlflow_ui(monkeypatch):
    """mlflow ui on another port: MTC_MLFLOW_UI names it, every link and the command use it."""
    monkeypatch.setenv("MTC_MLFLOW_UI", "http://127.0.0.1:5123/")
    lines = tracking.links("sqlite:////x/mlflow.db", "3", "abc", "acc/mean").splitlines()
    assert lines[0].endswith("http://127.0.0.1:5123/#/experiments/3/runs?viewStateShareKey=sweeps&workflowType="
                             "machine_learning after: mlflow ui --backend-store-uri sqlite:////x/mlflow.db --port 5123")
    assert all("http://127.0.0.1:5123/#/experiments/3/runs" in line for line in lines)


def test_the_parent_logs_its_score_and_the_sweeps_view_lists_the_parents_alone_best_first(tmp_path):
    """A parent's score is its answer's first mean (accuracy with labels, else silhouette), named
    by mtc.score; the experiment's sweeps view, which the printed runs link opens, finds the
    sweeps' parent runs alone (not their children, nor a compare's run), best score first, as
    the runs page asks the store for them, with the score and what the sweep ran as columns."""
    client, experiment = tracking.open_store(f"sqlite:///{tmp_path / 'mlflow.db'}", "mtc", str(tmp_path / "artifacts"))
    labelled = {"acc": PointSummary("a=1", 2, 0, {"acc/mean": 0.75, "silhouette/mean": 0.5}, {}),
                "silhouette": PointSummary("a=2", 2, 0, {"acc/mean": 0.5, "silhouette/mean": 0.625}, {})}
    unlabelled = {"silhouette": PointSummary("a=2", 2, 0, {"silhouette/mean": 0.875}, {})}
    parents = {}
    for name, best in {"labelled": labelled, "unlabelled": unlabelled}.items():
        parent = client.create_run(experiment, run_name=name, tags={tracking.SWEEP_KEY_TAG: name}).info.run_id
        for seed in range(2):
            client.create_run(experiment, tags=tracking.trial_tags(parent, Trial({"a": 1}, seed), {}))
        tracking.log_sweep_summary(client, parent, best, 0, "report", {"a": [1, 2]})
        parents[name] = client.get_run(parent).data
    client.create_run(experiment, run_name="compare", tags={"mtc.kind": "compare"})
    assert parents["labelled"].metrics["score"] == labelled["acc"].mean["acc/mean"]
    assert parents["labelled"].metrics["best_by_acc/acc/mean"] == labelled["acc"].mean["acc/mean"]  # kept
    assert parents["labelled"].tags["mtc.score"] == "acc/mean"
    assert parents["labelled"].tags["mtc.answer"].startswith("acc/mean 0.7500 at a=1;")  # the score first
    assert parents["unlabelled"].metrics["score"] == unlabelled["silhouette"].mean["silhouette/mean"]
    assert parents["unlabelled"].tags["mtc.score"] == "silhouette/mean"

    view = json.loads(client.get_experiment(experiment).tags["mlflow.sharedViewState.sweeps"])
    assert len(client.search_runs([experiment], "")) == 2 + 2 * 2 + 1
    # the runs page's own request: filter = searchFilter, order_by = orderByKey + " DESC"
    shown = client.search_runs([experiment], view["searchFilter"], order_by=[f"{view['orderByKey']} DESC"])
    assert [run.info.run_name for run in shown] == ["unlabelled", "labelled"]
    assert view["selectedColumns"] == ["metrics.`score`", "tags.`mtc.score`", "tags.`mtc.method`", "tags.`mtc.data`",
                                       "params.`data.params.scale`", "tags.`mtc.answer`"]
    assert view["columnOrder"] == ["duration", *view["selectedColumns"]]
    assert list(view["columnWidths"]) == view["selectedColumns"]  # wide enough for a whole score


def test_an_experiment_of_an_earlier_mtc_gets_the_sweeps_view_when_opened(tmp_path):
    """The printed runs link names the sweeps view: a store made before it existed, or holding
    an older one, gets the current one from the next driver that opens it."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = tracking.client_for(uri)
    old = client.create_experiment("mtc")
    client.set_experiment_tag(old, "mlflow.sharedViewState.sweeps", "{}")
    assert tracking.open_store(uri, "mtc", None)[1] == old
    assert client.get_experiment(old).tags["mlflow.sharedViewState.sweeps"] == tracking.sweeps_view()


def store_contents(db) -> tuple:
    """A SQLite store's schema (each statement's lines in sorted order: MLflow's own migrations
    list a table's constraints in an order that varies between runs), MLflow's migration
    version and its experiments (no times)."""
    with contextlib.closing(sqlite3.connect(db)) as connection:
        schema = sorted((kind, name, sorted(line.strip().rstrip(",") for line in (sql or "").splitlines()))
                        for kind, name, sql in connection.execute("SELECT type, name, sql FROM sqlite_master"))
        version = connection.execute("SELECT version_num FROM alembic_version").fetchall()
        experiments = connection.execute("SELECT experiment_id, name, artifact_location, lifecycle_stage "
                                         "FROM experiments ORDER BY experiment_id").fetchall()
    return schema, version, experiments


def test_a_new_store_copied_from_the_empty_one_is_what_mlflow_makes(tmp_path, monkeypatch):
    """open_store makes a new SQLite store as a copy of an empty one (made once per MLflow
    version under $MTC_CACHE_DIR): the same schema, migration version and experiments, the
    Default one with the artifact location MLflow gives it, as a store MLflow migrates itself;
    a folder that cannot hold the empty store leaves the making to MLflow."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MTC_CACHE_DIR", str(tmp_path / "cache"))
    copied = tmp_path / "copied.db"
    client, experiment = tracking.open_store(f"sqlite:///{copied}", "mtc", str(tmp_path / "artifacts"))
    template = empty_store_path()
    assert template.parent == tmp_path / "cache" and template.is_file()
    with contextlib.closing(sqlite3.connect(template)) as connection:
        assert connection.execute("SELECT COUNT(*) FROM experiments").fetchone() == (0,)

    monkeypatch.setenv("MTC_CACHE_DIR", str(tmp_path / "a-file" / "cache"))
    (tmp_path / "a-file").write_text("not a folder")
    migrated = tmp_path / "migrated.db"
    tracking.open_store(f"sqlite:///{migrated}", "mtc", str(tmp_path / "artifacts"))  # MLflow migrates it
    assert store_contents(copied) == store_contents(migrated)
    _, _, experiments = store_contents(copied)
    assert experiments == [(0, "Default", str(tmp_path / "mlruns" / "0"), "active"),
                           (1, "mtc", (tmp_path / "artifacts").as_uri(), "active")] and experiment == "1"
    run = client.create_run(experiment)
    client.log_metric(run.info.run_id, "acc", 0.5)
    assert client.get_run(run.info.run_id).data.metrics == {"acc": 0.5}

    made = template.stat().st_mtime_ns
    monkeypatch.setenv("MTC_CACHE_DIR", str(tmp_path / "cache"))
    tracking.open_store(f"sqlite:///{tmp_path / 'again.db'}", "mtc", None)
    assert template.stat().st_mtime_ns == made and not list(tmp_path.glob(".*.tmp"))


def test_the_machine_line_names_the_cpu_its_blas_kernels_and_the_library_versions():
    """What a fit's last bits depend on beyond its inputs (each child run's MACHINE_TAG)."""
    import platform

    import scipy
    import sklearn
    from threadpoolctl import threadpool_info

    line = tracking.machine_description()
    models = [row.split(":", 1)[1].strip() for row in open("/proc/cpuinfo") if row.startswith("model name")] \
        if platform.system() == "Linux" else []
    assert line.startswith(models[0] if models else (platform.processor() or platform.machine()) + ";")
    blas = [info for info in threadpool_info() if info["user_api"] == "blas"]
    assert blas and all(f"{info['internal_api']} {info['version']} {info['architecture']}" in line for info in blas)
    assert line.endswith(f"numpy {np.__version__}, scipy {scipy.__version__}, scikit-learn {sklearn.__version__}")
    assert tracking.machine_description() is line  # once per process
