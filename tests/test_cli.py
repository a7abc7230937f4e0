"""The command-line entry points: one debugging fit, and one-line errors on bad input only."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mtc import tracking

PLUGIN = Path(__file__).parent / "plugin"


def run_cli(module, *args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=env)


def test_run_logs_one_mlflow_run(tmp_path):
    db = tmp_path / "mlflow.db"
    done = run_cli("mtc.run", "method=kmeans", "data=synthetic", "seed=3", f"mlflow.tracking_uri=sqlite:///{db}",
                   f"output_dir={tmp_path}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "mean: acc=1.0000" in done.stdout
    client = tracking.client_for(f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("mtc")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.data.params["seed"] == "3" and run.data.metrics["acc/mean"] == 1.0
    assert experiment.artifact_location == (tmp_path / "mlartifacts").as_uri()


@pytest.mark.parametrize("module, args, message", [
    ("mtc.sweep", ["method=nope"], "error: unknown method 'nope'; available: a_asi, a_kmeans, a_ncut"),
    ("mtc.sweep", ["data=nope"], "error: unknown data 'nope'; available: "),
    ("mtc.sweep", ["method=kmeans", "+method.grid.alpha=[1,2]"], "error: method 'kmeans': unknown grid key 'alpha'"),
    ("mtc.run", ["data.params.n_shared=9"], "error: n_shared must be in [0, n_clusters=4], got 9"),
    # out-of-range grid values: one line naming method, point, key, value and what is allowed
    ("mtc.sweep", ["method=mtcmrl", "method.grid.lambda_=[-1.0]"],
     "error: method 'mtcmrl', grid point alpha=0.25,lambda_=-1.0: The 'lambda_' parameter of MTCMRL must be a float "
     "in the range (0.0, inf). Got -1.0 instead."),
    ("mtc.sweep", ["method=mtcfir", "method.grid.corruption=[1.0]"],
     "error: method 'mtcfir', grid point corruption=1.0,neighbour_ratio=0.1: The 'corruption' parameter of MTCFIR"),
    ("mtc.sweep", ["method=kkm", "++method.grid.max_iter=[abc]"], "error: method 'kkm', grid point"),
    ("mtc.sweep", ["sweep.repeats=0"], "error: sweep.repeats must be a positive integer, got 0"),
])
def test_bad_cli_input_fails_fast_with_one_line(tmp_path, module, args, message):
    done = run_cli(module, *args, f"output_dir={tmp_path}", f"mlflow.tracking_uri=sqlite:///{tmp_path / 'db'}", cwd=tmp_path)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == [lines[0]] and lines[0].startswith(message), done.stderr
    assert not (tmp_path / "db").exists()  # nothing was created: no MLflow store, no run left RUNNING


def plugin_env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGIN), *filter(None, [os.environ.get("PYTHONPATH")])])}


def test_a_method_from_outside_the_package_runs_from_the_command_line(tmp_path):
    done = run_cli("mtc.run", f"hydra.searchpath=[file://{PLUGIN / 'conf'}]", "method=toy", "data=synthetic",
                   f"mlflow.tracking_uri=sqlite:///{tmp_path / 'db'}", f"output_dir={tmp_path}", cwd=tmp_path,
                   env=plugin_env())
    assert done.returncode == 0, done.stderr
    assert "mean: acc=1.0000" in done.stdout and "objective 2.25 after 3 iterations" in done.stdout


def test_a_numerical_failure_keeps_its_traceback_and_exits_1(tmp_path):
    done = run_cli("mtc.run", f"hydra.searchpath=[file://{PLUGIN / 'conf'}]", "method=toy", "++method.params.fail=true",
                   f"mlflow.tracking_uri=sqlite:///{tmp_path / 'db'}", f"output_dir={tmp_path}", cwd=tmp_path,
                   env={**plugin_env(), "HYDRA_FULL_ERROR": "1"})
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "FloatingPointError: toy failure: the iteration diverged" in done.stderr


def child_runs(db):
    client = tracking.client_for(f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("mtc")
    if experiment is None:
        return client, [], []
    runs = client.search_runs([experiment.experiment_id])
    return client, [r for r in runs if tracking.PARENT_TAG in r.data.tags], [r for r in runs if tracking.PARENT_TAG not in r.data.tags]


def test_ctrl_c_ends_the_sweep_without_a_report_and_the_same_command_resumes(tmp_path):
    import signal
    import time

    db, out = tmp_path / "mlflow.db", tmp_path / "out"
    args = [f"hydra.searchpath=[file://{PLUGIN / 'conf'}]", "method=toy", "++method.grid.shift=[0.0,1.0,2.0]",
            "++method.params.delay=1.0", "sweep.repeats=4", "sweep.seeds_per_trial=1", "ray.num_cpus=1",
            "sweep.verbose=0", f"mlflow.tracking_uri=sqlite:///{db}", f"output_dir={out}",
            "data.params.n_tasks=2", "data.params.samples_per_cluster=10"]
    driver = subprocess.Popen([sys.executable, "-m", "mtc.sweep", *args], cwd=tmp_path, env=plugin_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    for line in driver.stdout:  # the store and every run exist once the driver says so (no race on creation)
        if "MLflow parent run" in line:
            break
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:  # interrupt once some trials finished and others have not
        time.sleep(1.0)
        if any(r.info.status == "FINISHED" for r in child_runs(db)[1]):
            break
    os.killpg(driver.pid, signal.SIGINT)  # Ctrl-C reaches the terminal's whole process group
    _, stderr = driver.communicate(timeout=240)
    assert driver.returncode == 130, stderr
    assert "run the same command again to resume" in stderr.splitlines()[-1]
    client, children, (parent,) = child_runs(db)
    assert parent.info.status == "KILLED"
    statuses = [r.info.status for r in children]
    assert "RUNNING" not in statuses and 0 < statuses.count("FINISHED") < 12
    assert not (out / "toy-synthetic" / "report.md").exists()
    kept = {r.data.tags[tracking.TRIAL_KEY_TAG]: r.info.run_id for r in children if r.info.status == "FINISHED"}

    done = run_cli("mtc.sweep", *args, cwd=tmp_path, env=plugin_env())
    assert done.returncode == 0, done.stderr
    _, children, parents = child_runs(db)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    finished = {r.data.tags[tracking.TRIAL_KEY_TAG]: r.info.run_id for r in children if r.info.status == "FINISHED"}
    assert len(finished) == 12 and all(finished[key] == run_id for key, run_id in kept.items())
    assert (out / "toy-synthetic" / "report.md").exists()
