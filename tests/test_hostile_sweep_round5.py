"""Defects of issue 81 (reliability round 5) in ``python -m mtc.sweep``, each against a real driver
subprocess:

- a method config that is not valid YAML is one line naming the file, the line and the column
  (exit 2), not Hydra's 100-line traceback;
- Ctrl-C while the command starts (its imports, Hydra's start) is one line and exit 130, not a
  KeyboardInterrupt traceback;
- a tracking server that stops answering mid-sweep costs no Ray Tune traceback: the driver ends
  with one line naming the server, whether the server is back for the sweep's end or not;
- a stop signal once every planned trial has a FINISHED run closes the sweep FINISHED (reported),
  so that the same command, or a study's resume, counts it finished instead of running it.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli import child_runs

from mtc.stack.loopback import free_port, wait_for_port
from mtc.sweep.planning import ALL_FINISHED_TAG

pytestmark = pytest.mark.slow

PLUGIN = Path(__file__).parent / "plugin"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGIN), *filter(None, [os.environ.get("PYTHONPATH")])])}
TOY = [f"hydra.searchpath=[file://{PLUGIN / 'conf'}]", "method=toy", "ray.num_cpus=1", "sweep.seeds_per_trial=1",
       "sweep.repeats=1", "data.params.n_tasks=2", "data.params.samples_per_cluster=10"]  # 2 trials


def sweep(folder: Path, args: list[str], env: dict = ENV) -> subprocess.Popen:
    """The driver in a process group of its own with SIGINT at its default (a job started with
    ``&``, as the suite may be, inherits it ignored)."""
    return subprocess.Popen([sys.executable, "-m", "mtc.sweep", *args], cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_for_moment(moments: Path, name: str, driver: subprocess.Popen, seconds: float = 240) -> None:
    """Until the driver has noted ``name`` (mtc.sweep.stopping.moment)."""
    deadline = time.monotonic() + seconds
    while not (moments.is_file() and name in moments.read_text().split()):
        assert driver.poll() is None and time.monotonic() < deadline, driver.communicate()
        time.sleep(0.1)


def test_a_method_config_that_is_not_yaml_is_one_line_naming_the_file_and_where(tmp_path):
    (tmp_path / "conf" / "method").mkdir(parents=True)
    broken = tmp_path / "conf" / "method" / "broken.yaml"
    broken.write_text("_target_: mtc.methods.kmeans.KMeansBaseline\ngrid: {n_init: [1, 2\n")
    done = subprocess.run([sys.executable, "-m", "mtc.sweep", "method=broken",
                           f"hydra.searchpath=[file://{tmp_path / 'conf'}]", f"output_dir={tmp_path / 'out'}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr == (f"error: cannot read the config {broken}: expected ',' or ']', but got '<stream end>' at "
                           "line 3, column 1 (while parsing a flow sequence at line 2, column 16)\n")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("after", [0.3, 1.0, 2.0])
def test_ctrl_c_while_the_command_starts_is_one_line_and_exit_130(tmp_path, after):
    driver = sweep(tmp_path, ["method=kmeans", f"output_dir={tmp_path / 'out'}",
                              f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}"])
    time.sleep(after)
    driver.send_signal(signal.SIGINT)
    _, err = driver.communicate(timeout=120)
    assert driver.returncode == 130 and err.count("\n") == 1 and err.startswith("interrupted (Ctrl-C) "), err


@pytest.mark.parametrize("back", [True, False], ids=["server-back-for-the-end", "server-gone"])
def test_a_tracking_server_that_stops_answering_costs_one_line_and_no_traceback(tmp_path, back):
    """The server killed as the Tuner starts, MLflow's retries cut short (none, 2 s): each Tune
    trial fails without a retry (sweep.max_failures=0). Back for the sweep's end (restarted on
    its store while the driver waits before its report), the sweep is FAILED, its line naming the
    server as why its trials have no result; gone for good, the driver cannot close its runs and
    says so in one line. Either way the same command resumes."""
    port, moments = free_port(), tmp_path / "moments"

    def server() -> subprocess.Popen:
        started = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{tmp_path / 'mlflow.db'}",
             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
        wait_for_port(port, 120)
        return started

    running = server()
    env = {**ENV, "MTC_DEBUG_MOMENTS": str(moments), "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
           "MLFLOW_HTTP_REQUEST_TIMEOUT": "2", **({"MTC_DEBUG_PAUSE": "report=30"} if back else {})}
    try:
        driver = sweep(tmp_path, [*TOY, "sweep.max_failures=0", f"output_dir={tmp_path / 'out'}",
                                  f"mlflow.tracking_uri=http://127.0.0.1:{port}"], env)
        wait_for_moment(moments, "trials", driver)
        os.killpg(running.pid, signal.SIGKILL)
        running.wait()
        if back:
            wait_for_moment(moments, "report", driver)
            running = server()
        _, err = driver.communicate(timeout=300)
    finally:
        if running.poll() is None:
            os.killpg(running.pid, signal.SIGTERM)
            running.wait(timeout=30)
    assert driver.returncode == 1 and "Traceback" not in err and "Trial task failed" not in err, err
    last = err.strip().splitlines()[-1]
    unanswered = (f"the tracking server http://127.0.0.1:{port} did not answer through MLflow's retries (Failed to "
                  "establish a new connection: [Errno 111] Connection refused)")
    if back:
        assert last.startswith(f"error: sweep toy-synthetic: 2 of 2 trials have no result ({unanswered}); MLflow "
                               "parent run ") and last.endswith(" is FAILED; run the same command again to run them")
    else:
        assert last == f"error: {unanswered}; once it answers, run the same command again to resume (finished " \
                       "trials are kept)"


def test_a_stop_once_every_trial_finished_reports_the_sweep_and_the_same_command_counts_it_finished(tmp_path):
    """Ctrl-C as the report is about to be written (every trial FINISHED): the sweep is reported
    and its parent FINISHED, not KILLED (a study's resume then counted it among the sweeps to run)."""
    moments, db = tmp_path / "moments", tmp_path / "mlflow.db"
    args = [*TOY, f"output_dir={tmp_path / 'out'}", f"mlflow.tracking_uri=sqlite:///{db}"]
    driver = sweep(tmp_path, args, {**ENV, "MTC_DEBUG_MOMENTS": str(moments), "MTC_DEBUG_PAUSE": "report=30"})
    wait_for_moment(moments, "report", driver)
    driver.send_signal(signal.SIGINT)
    _, err = driver.communicate(timeout=120)
    _, children, parents = child_runs(db)
    (parent,) = parents
    assert driver.returncode == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith(f"interrupted (Ctrl-C): 2 of 2 trials finished (MLflow parent run "
                                                   f"{parent.info.run_id}, FINISHED: reported)"), err
    assert parent.info.status == "FINISHED" and ALL_FINISHED_TAG in parent.data.tags
    assert [r.info.status for r in children] == ["FINISHED"] * 2
    assert (tmp_path / "out" / "toy-synthetic" / "report.md").is_file()
