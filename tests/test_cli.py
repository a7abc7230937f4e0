"""The command-line entry points: one debugging fit, and one-line errors on bad input."""

import subprocess
import sys

import pytest

from mtc import tracking


def run_cli(module, *args, cwd):
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


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
    ("mtc.sweep", ["method=nope"], "error: unknown method 'nope'; available: a_kmeans, a_ncut"),
    ("mtc.sweep", ["data=nope"], "error: unknown data 'nope'; available: "),
    ("mtc.sweep", ["method=kmeans", "+method.grid.alpha=[1,2]"], "error: method 'kmeans': unknown grid key 'alpha'"),
    ("mtc.run", ["data.params.n_shared=9"], "error: n_shared must be in [0, n_clusters=4], got 9"),
])
def test_bad_cli_input_fails_fast_with_one_line(tmp_path, module, args, message):
    done = run_cli(module, *args, f"output_dir={tmp_path}", f"mlflow.tracking_uri=sqlite:///{tmp_path / 'db'}", cwd=tmp_path)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == [lines[0]] and lines[0].startswith(message), done.stderr
