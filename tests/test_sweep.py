"""End to end: Hydra config -> Ray Tune trials -> MLflow runs -> report (local Ray), with a
solver from outside the package (tests/plugin: one module + one config, no platform change)."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from mtc.cli import compose_config
from mtc.config import Trial, settings
from mtc.store import tracking
from mtc.store.stored_report import stored_report
from mtc.sweep.driver import run_sweep, stop_kept_ray

pytestmark = pytest.mark.slow

PLUGIN = Path(__file__).parent / "plugin"


@pytest.fixture(scope="module")
def plugin_path():
    """The toy method's module importable here and in Ray's workers (they inherit PYTHONPATH)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(PLUGIN))
        patch.setenv("PYTHONPATH", os.pathsep.join([str(PLUGIN), *filter(None, [os.environ.get("PYTHONPATH")])]))
        yield


@pytest.fixture(scope="module", autouse=True)
def one_ray():
    """The module's sweeps share one local Ray (run_sweep's keep_ray, as mtc.sweep.run does),
    stopped after the module; the sweeps that test Ray's start and stop start their own."""
    yield
    stop_kept_ray()


def shared_ray_sweep(cfg):
    return run_sweep(settings(cfg), keep_ray=True)


def sweep_overrides(tmp, *overrides) -> list[str]:
    return [
        f"hydra.searchpath=[file://{PLUGIN / 'conf'}]",
        f"output_dir={tmp / 'outputs'}", f"mlflow.tracking_uri=sqlite:///{tmp / 'mlflow.db'}",
        f"mlflow.artifact_root={tmp / 'artifacts'}", "ray.num_cpus=1", "sweep.verbose=0",
        "method=toy", "method.grid.shift=[1.0]", "++method.grid.fail=[false,true]", "sweep.repeats=2",
        "data.params.n_tasks=2", "data.params.samples_per_cluster=20", *overrides,
    ]


def sweep_config(tmp, *overrides):
    return compose_config(sweep_overrides(tmp, *overrides))


@pytest.fixture(scope="module")
def finished_sweep(tmp_path_factory, plugin_path):
    tmp = tmp_path_factory.mktemp("sweep")
    cfg = sweep_config(tmp, "mlflow.readable_trial_files=true")
    result = shared_ray_sweep(cfg)
    client = tracking.client_for(result.tracking_uri)
    return cfg, tmp, result, client


def children(client, result):
    return tracking.find_runs(client, result.experiment_id, **{tracking.PARENT_TAG: result.parent_run_id})


def test_one_parent_and_one_child_per_trial(finished_sweep):
    _, _, result, client = finished_sweep
    parent = client.get_run(result.parent_run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.params["method._target_"] == "toy_method.ToyClusterer" and parent.data.params["sweep.repeats"] == "2"
    runs = children(client, result)
    keys = sorted(run.data.tags[tracking.TRIAL_KEY_TAG] for run in runs)
    assert keys == [f"fail={f},shift=1.0|seed={s}" for f in (False, True) for s in (0, 1)]
    assert all(run.data.tags[tracking.DATASET_HASH_TAG] == parent.data.tags[tracking.DATASET_HASH_TAG] for run in runs)
    assert {run.data.tags[tracking.MACHINE_TAG] for run in runs} == {tracking.machine_description()}  # this machine's


def test_plugged_in_method_has_its_record_logged_and_plotted(finished_sweep):
    _, _, result, client = finished_sweep
    run = next(r for r in children(client, result) if r.data.tags[tracking.TRIAL_KEY_TAG] == "fail=False,shift=1.0|seed=1")
    run_id = run.info.run_id
    assert run.info.status == "FINISHED"
    for metric in ("acc", "nmi", "nmi_max", "ari", "purity"):
        assert run.data.metrics[f"{metric}/task0"] == 1.0 and run.data.metrics[f"{metric}/mean"] == 1.0
    assert run.data.params["shift"] == "1.0" and run.data.params["fail"] == "False"
    assert run.data.params["seed"] == "1" and "grid_point.shift" not in run.data.params
    assert run.info.run_name == "fail=False shift=1 s1"  # the params' own names, compact values
    # scalars: one number, and one per task
    assert run.data.metrics["toy_score"] == 8.0
    assert (run.data.metrics["toy_mass/task0"], run.data.metrics["toy_mass/task1"]) == (0.0, 1.0)
    # traces: the objective as a metric with steps, every trace in trial.npz
    objective = client.get_metric_history(run_id, "objective/trace")
    assert [m.value for m in sorted(objective, key=lambda m: m.step)] == [5.0, 4.0, 3.5, 3.25]
    assert run.data.metrics["objective/final"] == 3.25
    assert run.data.metrics["objective/relative"] == 3.25 / 5.0
    arrays = tracking.load_trial_arrays(client, run_id, run.info.artifact_uri)
    assert arrays["trace/toy_step/task1"].tolist() == [0.0, 2.0, 4.0, 6.0]
    assert 0.5 < run.data.metrics["silhouette/mean"] <= 1.0  # well-separated synthetic clusters
    trace_csv = Path(client.download_artifacts(run_id, "objective_trace.csv")).read_text().splitlines()
    assert trace_csv[:2] == ["step,objective", "0,5"]
    labels_csv = Path(client.download_artifacts(run_id, "labels.csv")).read_text().splitlines()
    assert labels_csv[0] == "task,sample,label,cluster_name" and len(labels_csv) == 1 + 2 * 80
    names = {a.path for a in client.list_artifacts(run_id)}
    assert {"trial.npz", "config.json", "objective_trace.csv"} <= names
    assert "convergence.png" in names  # mlflow.readable_trial_files=true: every file a person opens
    # labelled matrices: one .npy/.csv per block, clusters mapped to the classes they match
    assert {"toy_relatedness_task0__task1.csv", "toy_task_similarity.csv",
            "ideal_task_weights.csv", "toy_weights_task0.csv"} <= names
    lines = Path(client.download_artifacts(run_id, "toy_relatedness_task0__task1.csv")).read_text().splitlines()
    assert lines[0] == "row,shared0,shared1,task1_own0,task1_own1"
    assert [line.split(",")[0] for line in lines[1:]] == ["shared0", "shared1", "task0_own0", "task0_own1"]
    block = arrays["matrix/toy_relatedness_task0__task1"]
    assert block.shape == (4, 4) and set(np.unique(block)) <= {1.0, 2.0}  # shift, or shift + (1 + t)
    weights = Path(client.download_artifacts(run_id, "toy_weights_task0.csv")).read_text().splitlines()
    assert weights[0] == "row,weight" and len(weights) == 1 + 80 and weights[1].startswith("0:")
    # and one heatmap per matrix, the reference relatedness from the labels beside the task x task one
    assert {"toy_relatedness.png", "toy_task_similarity.png", "toy_weights.png", "ideal_task_weights.png"} <= names
    assert sorted(k for k in arrays if k.startswith("labels/")) == ["labels/task0", "labels/task1"]
    assert arrays["labels/task0"].shape == (80,)


def test_a_local_stores_trial_files_are_read_in_place_without_a_temporary_folder(finished_sweep, monkeypatch):
    """A compare reads the labels of tens of thousands of trials: from a local artifact store
    they are read where they are, with no temporary folder made per trial (it cost more than
    the read); the labels are the trial's own."""
    import tempfile

    _, _, result, client = finished_sweep
    run = next(r for r in children(client, result) if r.info.status == "FINISHED")
    expected = tracking.load_trial_arrays(client, run.info.run_id, run.info.artifact_uri)

    def refused(*args, **kwargs):
        raise AssertionError("a temporary folder was made to read a local store's file")

    monkeypatch.setattr(tempfile, "TemporaryDirectory", refused)
    labels = tracking.load_labels(client, run.info.run_id, run.info.artifact_uri, ["task0", "task1"])
    assert [list(a) for a in labels] == [list(expected["labels/task0"]), list(expected["labels/task1"])]
    assert len(labels[0]) == 80


def test_the_workers_keep_the_k_means_labels_of_their_seedings_as_files(finished_sweep, monkeypatch):
    """The toy seeds with kmeans_labels and the worker's cache: each (task, seed) k-means of
    the fitted trials is a file in steps/ of the processed-data cache, holding the labels the
    runs logged; a cache given that folder in this process, on the trials' one OpenMP thread
    (part of the key: k-means splits its sums among its threads), finds every one of them."""
    import os

    from threadpoolctl import threadpool_limits

    from mtc.numerics import seeding
    from mtc.numerics.cache import Cache
    from mtc.numerics.seeding import kmeans_labels

    cfg, tmp, result, client = finished_sweep
    from mtc.sweep.driver import steps_folder

    folder = steps_folder(None)
    assert folder == Path(os.environ["MTC_CACHE_DIR"]) / "steps"
    kept = {path.name: np.load(path) for path in (folder / "kmeans_labels").glob("*.npy")}
    fitted = [run for run in children(client, result) if run.info.status == "FINISHED"]
    assert len(fitted) == 2 and len(kept) >= 2 * 2  # two tasks of each fitted seed (other tests may add more)
    run = settings(cfg)
    cache = Cache(folder=folder)
    monkeypatch.setattr(seeding, "KMeans", None)  # any k-means run here would raise: every label is read
    for child in fitted:
        seed = int(child.data.params["seed"])
        data, rng = run.data.load(seed), np.random.default_rng(seed)
        logged = tracking.load_trial_arrays(client, child.info.run_id, child.info.artifact_uri)
        for task, X, k in zip(data.task_names, data.matrices, data.n_clusters):
            with threadpool_limits(limits=1):
                labels = kmeans_labels(X, k, rng, cache=cache)
            assert cache.path("kmeans_labels", next(reversed(cache.results["kmeans_labels"]))).name in kept
            np.testing.assert_array_equal(labels, logged[f"labels/{task}"])


def test_failed_trials_are_counted_wherever_the_sweep_is_read(finished_sweep):
    """Nothing hidden: the parent's failed_trials metric, trials()'s warning and its listing on
    request (status and outcome), and compare's overview all count the 2 failed trials."""
    import mtc.results
    from mtc.results.compare import compare
    from mtc.results.frames import TrialsLeftOutWarning

    _, tmp, result, client = finished_sweep
    parent = client.get_run(result.parent_run_id)
    assert parent.data.metrics["failed_trials"] == 2
    assert parent.data.tags["mtc.answer"].startswith("acc/mean 1.0000 at fail=False,shift=1.0; silhouette/mean ")
    with pytest.warns(TrialsLeftOutWarning, match=r"2 trials not FINISHED left out \(FAILED 2\)"):
        finished = mtc.results.trials(result.tracking_uri, sweep=result.parent_run_id)
    assert len(finished) == 2 and finished.attrs["left_out"] == {"FAILED": 2}
    every = mtc.results.trials(result.tracking_uri, sweep=result.parent_run_id, finished_only=False)
    assert sorted(every.outcome) == ["answer", "answer", "failed", "failed"]
    compare(result.tracking_uri, "mtc", tmp / "compare_failed", log=False)
    text = (tmp / "compare_failed" / "compare.md").read_text()
    assert "2 failed trial(s) and 0 grid point(s) left out before Ray" in text
    assert "| synthetic | toy | 2 | 0 |" in text


def test_failing_trials_are_recorded_and_do_not_stop_the_sweep(finished_sweep):
    _, tmp, result, client = finished_sweep
    failed = [r for r in children(client, result) if r.info.status == "FAILED"]
    assert len(failed) == 2
    assert all("FloatingPointError: toy failure" in r.data.tags["mtc.error"] for r in failed)
    best = result.best["acc"]
    assert best.point == "fail=False,shift=1.0" and best.n_runs == 2 and best.mean["acc/mean"] == 1.0
    report = (tmp / "outputs" / "toy-synthetic" / "report.md").read_text()
    assert "**2 of 4 trials failed**" in report and "| task0 | 1.0000 ± 0.0000 |" in report
    parent_artifacts = {a.path for a in client.list_artifacts(result.parent_run_id)}
    assert {"report.md", "grid.csv", "convergence_best_by_acc.png", "convergence_best_by_objective.png"} <= parent_artifacts
    parent = client.get_run(result.parent_run_id)
    assert parent.data.metrics["best_by_acc/acc/mean"] == 1.0
    assert parent.data.tags["mlflow.note.content"] == report  # the run's description is the report
    assert parent.data.params["swept.shift"] == "[1.0]" and parent.data.params["swept.fail"] == "[false, true]"
    assert len(parent.data.tags["mlflow.source.git.commit"].removesuffix("-dirty")) == 40  # the code that ran
    (dataset,) = parent.inputs.dataset_inputs  # the data as an MLflow dataset input
    assert dataset.dataset.name == "synthetic" and dataset.dataset.digest == \
        parent.data.tags[tracking.DATASET_HASH_TAG][:36]
    assert json.loads(dataset.dataset.profile)["tasks"]["task0"]["samples"] == 80
    experiment = client.get_experiment(result.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"  # the UI opens on the runs
    assert parent.data.metrics["best_by_stability/stability/mean"] == 1.0  # k-means on separated clusters


def test_resume_keeps_finished_runs_and_retries_only_the_rest(finished_sweep):
    cfg, _, result, client = finished_sweep
    before = {r.data.tags[tracking.TRIAL_KEY_TAG]: r.info.run_id for r in children(client, result)}
    again = shared_ray_sweep(cfg)
    assert again.parent_run_id == result.parent_run_id
    after = {r.data.tags[tracking.TRIAL_KEY_TAG]: r.info.run_id for r in children(client, result)}
    assert sorted(after) == sorted(before)  # still exactly one child run per trial
    for key in ("fail=False,shift=1.0|seed=0", "fail=False,shift=1.0|seed=1"):
        assert after[key] == before[key]  # finished: not run again
    for key in ("fail=True,shift=1.0|seed=0", "fail=True,shift=1.0|seed=1"):
        assert after[key] != before[key]  # failed: retried in a fresh run


def test_seeds_of_a_grid_point_can_share_one_tune_trial(tmp_path, plugin_path):
    result = shared_ray_sweep(sweep_config(tmp_path, "sweep.seeds_per_trial=2"))
    assert result.trials_run == 4 and result.tuner.tune_trials == 2  # one Tune trial per grid point
    assert result.tuner.tune_errors == 0  # a failing fit is recorded on its run, not retried; no trainable error
    client = tracking.client_for(result.tracking_uri)
    runs = {r.data.tags[tracking.TRIAL_KEY_TAG]: r for r in children(client, result)}
    assert len(runs) == 4  # still one MLflow child run per (grid point, seed)
    for seed in (0, 1):
        assert runs[f"fail=False,shift=1.0|seed={seed}"].info.status == "FINISHED"
        failed = runs[f"fail=True,shift=1.0|seed={seed}"]
        assert failed.info.status == "FAILED" and "toy failure" in failed.data.tags["mtc.error"]
    assert result.best["acc"].n_runs == 2 and result.best["acc"].mean["acc/mean"] == 1.0


def test_a_worker_killed_mid_trial_is_retried_and_every_trial_ends_finished_once(tmp_path, plugin_path):
    from mlflow.entities import ViewType

    died = tmp_path / "died"
    cfg = sweep_config(tmp_path, "++method.grid.fail=[false]", "method.grid.shift=[0.0,1.0]", "sweep.repeats=3",
                       "sweep.seeds_per_trial=3", f"++method.params.die_once={died}")
    result = shared_ray_sweep(cfg)
    assert died.exists()  # one worker was SIGKILLed inside a fit
    assert result.tuner.tune_errors == 0
    client = tracking.client_for(result.tracking_uri)
    runs = children(client, result)
    keys = [r.data.tags[tracking.TRIAL_KEY_TAG] for r in runs]
    assert len(keys) == 6 and len(set(keys)) == 6  # one run per (grid point, seed)
    assert {r.info.status for r in runs} == {"FINISHED"}  # nothing left RUNNING
    for point in {r.data.tags[tracking.POINT_TAG] for r in runs}:  # a point's 3 seeds run one after another in
        seeds = sorted((r for r in runs if r.data.tags[tracking.POINT_TAG] == point), key=lambda r: r.info.start_time)
        assert all(later.info.start_time >= earlier.info.end_time  # its Tune trial, each run created as its fit
                   for earlier, later in zip(seeds, seeds[1:]))    # starts: MLflow's duration is the trial's own
    replaced = client.search_runs([result.experiment_id], run_view_type=ViewType.DELETED_ONLY)
    assert replaced == []  # a run is created once its fit is done: the killed fit left none to replace
    assert all(s.n_runs == 3 and s.n_failed == 0 for s in result.summaries)  # every seed counted once
    for run in runs:  # the trace was logged once: 4 steps, not 8
        assert len(client.get_metric_history(run.info.run_id, "objective/trace")) == 4
        assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"trial.npz"}  # compact by default


def test_a_trial_left_in_error_with_retries_by_a_worker_killed_as_its_trial_ended_is_run_again(
        tmp_path, plugin_path, monkeypatch, capsys):
    """Ray Tune hands a finished trial's actor to the next trial; when that worker is killed in
    between, the next trial ends in ERROR with its retries unused (Ray Tune recovers only a
    RUNNING trial: mtc.sweep.stranded). The driver runs it again once and the sweep is complete;
    the progress line counts that trial's seed to run again, not failed."""
    moments, pids = tmp_path / "moments", tmp_path / "pids"
    monkeypatch.setenv("MTC_DEBUG_MOMENTS", str(moments))
    monkeypatch.setenv("MTC_DEBUG_PAUSE", "tune-trial-ended=1.0")  # the driver waits there, each trial's end
    killed = []

    def kill_the_worker_when_the_first_trial_ends():
        while not (moments.exists() and "tune-trial-ended" in moments.read_text().split()):
            time.sleep(0.01)
        (worker,) = map(int, pids.read_text().split())  # the process that fitted the first trial's seed
        assert Path(f"/proc/{worker}/cmdline").read_bytes().startswith(b"ray::ImplicitFunc")  # its Tune actor
        os.kill(worker, signal.SIGKILL)
        killed.append(worker)

    killer = threading.Thread(target=kill_the_worker_when_the_first_trial_ends, daemon=True)
    killer.start()
    cfg = sweep_config(tmp_path, "++method.grid.fail=[false]", "method.grid.shift=[0.0,1.0]", "sweep.seeds_per_trial=1",
                       f"++method.params.pid_file={pids}")  # 4 Tune trials, one at a time (ray.num_cpus=1)
    result = shared_ray_sweep(cfg)
    killer.join(timeout=5)
    assert len(killed) == 1  # the worker of the first trial, killed as that trial ended
    assert result.tuner.tune_trials == 4 and result.tuner.run_again == 1 and result.tuner.tune_errors == 0
    runs = children(tracking.client_for(result.tracking_uri), result)
    keys = [r.data.tags[tracking.TRIAL_KEY_TAG] for r in runs]
    assert len(keys) == 4 and len(set(keys)) == 4  # one run per (grid point, seed)
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert all(s.n_runs == 2 and s.n_failed == 0 for s in result.summaries)
    lines = [part for part in re.split(r"[\r\n]", capsys.readouterr().err) if "| " in part]  # the lines drawn
    first = [line for line in lines if line.startswith("toy-synthetic:")][-1]
    again = [line for line in lines if line.startswith("toy-synthetic again:")][-1]
    assert "4/4" in first and "failed 0" in first and "to run again 1" in first, first
    assert "1/1" in again and "failed 0" in again, again


def test_a_finished_sweep_run_again_is_reported_from_the_store_without_ray(tmp_path, plugin_path, monkeypatch):
    import ray

    from mtc.sweep import driver as sweep

    cfg = sweep_config(tmp_path, "++method.grid.fail=[false]")
    first = run_sweep(settings(cfg))
    assert first.ray_started and not ray.is_initialized()

    def no_ray(*args, **kwargs):
        raise AssertionError("Ray was started for a finished sweep")

    cleaned = []  # a killed driver's Ray agents are ended by the next sweep here, even one that starts no Ray
    monkeypatch.setattr(sweep, "ray_session", no_ray)
    monkeypatch.setattr(sweep, "remove_dead_drivers_ray_folders", lambda: cleaned.append(True))
    again = run_sweep(settings(cfg))
    assert not again.ray_started and again.trials_run == 0 and again.parent_run_id == first.parent_run_id
    assert cleaned == [True]
    assert again.markdown == first.markdown and [s.mean for s in again.summaries] == [s.mean for s in first.summaries]
    client = tracking.client_for(first.tracking_uri)
    assert client.get_run(first.parent_run_id).info.status == "FINISHED"
    assert len(children(client, first)) == 2

    # From the command line: the report the driver logged, read from the SQLite store without
    # importing MLflow, Ray, matplotlib, scikit-learn or pandas (mtc.sweep.command), copied back
    # into the emptied output folder.
    report = Path(first.output_dir) / "report.md"
    logged = Path(client.get_run(first.parent_run_id).info.artifact_uri.removeprefix("file://")) / "report.md"
    report.unlink()
    (Path(first.output_dir) / "grid.csv").unlink()
    script = ("import runpy, sys\n"
              f"sys.argv = ['mtc.sweep', *{sweep_overrides(tmp_path, '++method.grid.fail=[false]')!r}]\n"
              "try:\n    runpy.run_module('mtc.sweep', run_name='__main__')\nexcept SystemExit as stop:\n"
              "    assert not stop.code, stop.code\n"
              "print('imported:', sorted({name.split('.')[0] for name in sys.modules}\n"
              "                        & {'mlflow', 'ray', 'matplotlib', 'sklearn', 'pandas'}))")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (f"all 2 trials already finished, MLflow parent run {first.parent_run_id}; its report as logged when it "
            "finished (no Ray)") in done.stdout
    assert done.stdout.splitlines()[-1] == "imported: []"
    assert report.read_text() == logged.read_text() == first.markdown and first.markdown in done.stdout
    assert (Path(first.output_dir) / "grid.csv").read_text() == (logged.parent / "grid.csv").read_text()
    # Only a FINISHED parent marked done for exactly the planned trials, in a SQLite store, is found that way
    run = settings(cfg)
    plan = sweep.plan_sweep(run)
    found = stored_report(run.tracking.uri, run.tracking.experiment, plan.key, tracking.SWEEP_KEY_TAG,
                          sweep.trials_digest(plan.trials), sweep.ALL_FINISHED_TAG)
    assert (found.parent_id, found.folder, found.labelled) == (first.parent_run_id, logged.parent, True)
    assert stored_report(run.tracking.uri, run.tracking.experiment, plan.key, tracking.SWEEP_KEY_TAG,
                         sweep.trials_digest(plan.trials[1:]), sweep.ALL_FINISHED_TAG) is None
    assert stored_report(run.tracking.uri, "another", plan.key, tracking.SWEEP_KEY_TAG,
                         sweep.trials_digest(plan.trials), sweep.ALL_FINISHED_TAG) is None
    assert stored_report("http://127.0.0.1:1", run.tracking.experiment, plan.key, tracking.SWEEP_KEY_TAG,
                         sweep.trials_digest(plan.trials), sweep.ALL_FINISHED_TAG) is None
    client.set_terminated(first.parent_run_id, "KILLED")
    assert stored_report(run.tracking.uri, run.tracking.experiment, plan.key, tracking.SWEEP_KEY_TAG,
                         sweep.trials_digest(plan.trials), sweep.ALL_FINISHED_TAG) is None


def test_a_data_draw_per_seed_gives_every_seed_its_own_sample(tmp_path):
    from mtc.trial import run_trial

    cfg = compose_config([
        f"output_dir={tmp_path / 'outputs'}", f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
        f"mlflow.artifact_root={tmp_path / 'artifacts'}", "ray.num_cpus=1", "sweep.verbose=0", "method=kmeans",
        "sweep.repeats=3", "+data.draw=per_seed", "data.params.n_tasks=2", "data.params.samples_per_cluster=10"])
    run = settings(cfg)
    result = shared_ray_sweep(cfg)
    client = tracking.client_for(result.tracking_uri)
    parent = client.get_run(result.parent_run_id)
    assert parent.data.tags["mtc.data_draws"] == "3"
    runs = {int(r.data.params["seed"]): r for r in children(client, result)}
    assert sorted(runs) == [0, 1, 2]
    finals = []
    for seed, child in runs.items():  # each seed's child run clustered that seed's draw
        expected = run_trial(run.data.load(seed), run.method.prototype(n_clusters=[4, 4]), Trial({}, seed), None)
        assert child.data.metrics["objective/final"] == pytest.approx(expected.metrics["objective/final"], rel=1e-9)
        assert child.data.params["n_samples.task1"] == "40" and "n_samples/task1" not in child.data.metrics
        finals.append(child.data.metrics["objective/final"])
    assert len(set(finals)) == 3
    report = (Path(result.output_dir) / "report.md").read_text()
    assert "samples per task: task0 40, task1 40; a fresh random draw per seed (3 draws), means over draws" in report
    # labels of different draws label different samples: no stability criterion, said in the report and by compare
    assert not any("stability/mean" in s.mean for s in result.summaries)
    assert "no stability criterion" in report and "best_by_stability/stability/mean" not in parent.data.metrics
    assert "mtc.best_by_silhouette" in parent.data.tags  # the other label-free criteria stay
    from mtc.results.compare import compare

    compared = compare(result.tracking_uri, "mtc", tmp_path / "compare", log=False)
    (sweep,) = compared["comparison"].sweeps
    assert "stability" not in sweep.points and "silhouette" in sweep.points
    assert any(note.startswith("no stability point for 1 sweep(s) whose seeds each cluster their own draw")
               for note in compared["comparison"].notes)


def test_an_smkc_sweep_computes_each_seeds_path_once_and_logs_every_fit_as_computed_afresh(tmp_path):
    """S-MKC over three lambdas and two seeds: the workers' fits at the first lambda decide the
    other two lambdas' fits of their seed (mtc.methods.mkc.SMKC.shared_lambdas), kept as files
    in the sweep's steps folder (2 seeds x 2 lambdas); every run holds what a fit of its own,
    computed afresh without a cache, gives, to the bit."""
    from mtc.trial import run_trial

    cfg = compose_config([
        f"output_dir={tmp_path / 'outputs'}", f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
        f"mlflow.artifact_root={tmp_path / 'artifacts'}", f"data.cache_dir={tmp_path / 'cache'}", "ray.num_cpus=1",
        "sweep.verbose=0", "method=smkc", "method.grid.lambda_=[0.1,0.5,1.0]", "++method.params.max_iter=25",
        "sweep.repeats=2", "data.params.n_clusters=3", "data.params.samples_per_cluster=12"])
    run = settings(cfg)
    result = shared_ray_sweep(cfg)
    assert len(list((tmp_path / "cache" / "steps" / "smkc_path").glob("*.npz"))) == 4
    client = tracking.client_for(result.tracking_uri)
    runs = children(client, result)
    assert len(runs) == 6 and {r.info.status for r in runs} == {"FINISHED"}
    for child in runs:
        seed, lam = int(child.data.params["seed"]), float(child.data.params["lambda_"])
        data = run.data.load(seed)
        expected = run_trial(data, run.method.prototype(n_clusters=data.n_clusters), Trial({"lambda_": lam}, seed), None)
        for key in ("acc/mean", "nmi/mean", "objective/final", "n_iter", "converged"):
            assert child.data.metrics[key] == expected.metrics[key], key
        logged = tracking.load_trial_arrays(client, child.info.run_id, child.info.artifact_uri)
        for task, labels in zip(data.task_names, expected.labels):
            np.testing.assert_array_equal(logged[f"labels/{task}"], labels)
    assert "shared_lambdas" not in runs[0].data.params  # set by the worker, not a config


def test_what_the_mlflow_ui_reads_through_the_rest_api(finished_sweep, tmp_path):
    """The MLflow UI is a client of the server's REST API: start a real `mlflow server` on the
    sweep's store and read what the UI shows (experiment kind, parent description, run
    names, params, metric names, artifact previews)."""
    import subprocess
    import sys
    import urllib.request

    from mtc.stack.loopback import free_port, wait_for_port

    _, tmp, result, _ = finished_sweep
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", result.tracking_uri,
                               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                              env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    base = f"http://127.0.0.1:{port}"

    def get(endpoint, **query):
        url = f"{base}{endpoint}" + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")
        with urllib.request.urlopen(url, timeout=30) as response:
            body = response.read()
        return json.loads(body) if endpoint.startswith("/api/") else body.decode()

    try:
        wait_for_port(port, 120)
        experiment = get("/api/2.0/mlflow/experiments/get", experiment_id=result.experiment_id)["experiment"]
        assert {"key": "mlflow.experimentKind", "value": "custom_model_development"} in experiment["tags"]
        parent = get("/api/2.0/mlflow/runs/get", run_id=result.parent_run_id)["run"]
        tags = {t["key"]: t["value"] for t in parent["data"]["tags"]}
        assert tags["mlflow.note.content"].startswith("# toy on synthetic")  # the description: the report
        assert {p["key"]: p["value"] for p in parent["data"]["params"]}["swept.shift"] == "[1.0]"
        child = next(r for r in children(tracking.client_for(result.tracking_uri), result)
                     if r.info.status == "FINISHED")
        run = get("/api/2.0/mlflow/runs/get", run_id=child.info.run_id)["run"]
        assert len(run["info"]["run_name"]) <= 24  # whole in the runs table's name column
        params = {p["key"] for p in run["data"]["params"]}
        assert {"shift", "fail", "seed", "method", "data.name"} <= params and not any(p.startswith("params.")
                                                                                        for p in params)
        metrics = {m["key"] for m in run["data"]["metrics"]}
        assert {"acc/mean", "acc/task0", "silhouette/mean", "objective/relative", "objective/trace"} <= metrics
        search = urllib.request.Request(  # the runs table's search box: metrics.`acc/mean` > 0.5, as documented
            f"{base}/api/2.0/mlflow/runs/search", method="POST", headers={"Content-Type": "application/json"},
            data=json.dumps({"experiment_ids": [result.experiment_id], "max_results": 50,
                             "filter": "metrics.`acc/mean` > 0.5"}).encode())
        with urllib.request.urlopen(search, timeout=30) as response:
            found = json.loads(response.read())["runs"]
        assert child.info.run_id in {r["info"]["run_id"] for r in found}
        preview = get("/get-artifact", path="objective_trace.csv", run_uuid=child.info.run_id)
        assert preview.splitlines()[0] == "step,objective"  # the UI's CSV preview has a header
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)


def test_the_same_grid_under_another_sweep_name_is_a_sweep_of_its_own(finished_sweep):
    _, tmp, result, client = finished_sweep
    other = shared_ray_sweep(sweep_config(tmp, "sweep.name=another"))
    assert other.parent_run_id != result.parent_run_id and other.trials_run == 4  # not resumed into it
    assert len(children(client, result)) == 4 and len(children(client, other)) == 4


def test_a_live_drivers_ray_folder_is_kept_whatever_its_pid_says(tmp_path, monkeypatch):
    """A dead driver's Ray temp folder is removed by the next sweep; a live one's never, even when
    the pid in its name is not a process here (a driver in another PID namespace sharing /tmp):
    liveness is the file lock its driver holds."""
    from filelock import FileLock

    from mtc.sweep import driver

    monkeypatch.setattr(driver.tempfile, "gettempdir", lambda: str(tmp_path))
    live, dead = tmp_path / "mtc-ray-999999999-live", tmp_path / "mtc-ray-999999999-dead"
    live.mkdir(), dead.mkdir()
    with FileLock(f"{live}.lock"):
        driver.remove_dead_drivers_ray_folders()
        assert live.is_dir() and not dead.exists() and not Path(f"{dead}.lock").exists()
    with driver.ray_temp_folder() as folder:
        driver.remove_dead_drivers_ray_folders()
        assert Path(folder).is_dir() and Path(folder).name.startswith(f"mtc-ray-{os.getpid()}-")
    assert not Path(folder).exists() and not Path(f"{folder}.lock").exists()
