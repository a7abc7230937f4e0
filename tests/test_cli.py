"""The command-line entry points: one debugging fit, and one-line errors on bad input only."""

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from mtc.store import tracking

pytestmark = pytest.mark.slow  # drivers, Ray or servers: run first (tests/conftest.py)

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


def test_run_refuses_a_sqlite_store_a_sweep_is_writing_to_in_one_line(tmp_path):
    """mtc.run takes the SQLite store's lock as a sweep does: a store a live sweep writes to is
    refused before the fit, in one line naming the holder (here this test process)."""
    from mtc.store import locks

    db = tmp_path / "mlflow.db"
    with locks.store_lock(f"sqlite:///{db}"):
        done = run_cli("mtc.run", "method=kmeans", "data=synthetic", f"mlflow.tracking_uri=sqlite:///{db}",
                       f"output_dir={tmp_path}", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"error: another sweep (driver pid {os.getpid()}) is writing to the SQLite store "
                                   f"{db}; SQLite takes one sweep at a time: wait for it, or run concurrent sweeps "
                                   "against a tracking server (python -m mtc.stack start; docs/cluster.md)")
    assert not db.exists()


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


def finished_children(db) -> int:
    """How many child runs of the store are FINISHED, read with sqlite3 (cheap enough to poll)."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(db, timeout=30)) as connection:
        try:
            return connection.execute("SELECT COUNT(*) FROM runs JOIN tags ON tags.run_uuid = runs.run_uuid "
                                      "WHERE tags.key = ? AND runs.status = 'FINISHED'",
                                      (tracking.PARENT_TAG,)).fetchone()[0]
        except sqlite3.OperationalError:  # the schema is not created yet
            return 0


def child_runs(db):
    client = tracking.client_for(f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("mtc")
    if experiment is None:
        return client, [], []
    runs = client.search_runs([experiment.experiment_id])
    return client, [r for r in runs if tracking.PARENT_TAG in r.data.tags], [r for r in runs if tracking.PARENT_TAG not in r.data.tags]


def toy_sweep(tmp_path, db, *extra):
    return [f"hydra.searchpath=[file://{PLUGIN / 'conf'}]", "method=toy", "++method.grid.shift=[0.0,1.0,2.0]",
            "++method.params.delay=1.0", "sweep.repeats=4", "sweep.seeds_per_trial=1", "ray.num_cpus=1",
            f"mlflow.tracking_uri=sqlite:///{db}", f"output_dir={tmp_path / 'out'}",
            "data.params.n_tasks=2", "data.params.samples_per_cluster=10", *extra]


def start_driver(tmp_path, args, env=None):
    return subprocess.Popen([sys.executable, "-m", "mtc.sweep", *args], cwd=tmp_path, env=env or plugin_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_for_finished_runs(db, seconds: float = 240) -> None:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(1.0)
        if any(r.info.status == "FINISHED" for r in child_runs(db)[1]):
            return
    raise TimeoutError("no trial finished")


def ray_processes_after(pid: int, wait: float = 60.0) -> list[str]:
    """The command lines of the processes still using the Ray folder of driver ``pid`` once
    they had ``wait`` seconds to go (Ray's processes name the folder in their arguments)."""
    deadline = time.monotonic() + wait
    while True:
        found = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            with contextlib.suppress(OSError):
                text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
                if f"mtc-ray-{pid}-" in text:
                    found.append(text)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def test_a_killed_driver_is_resumed_by_the_same_command_without_duplicates(tmp_path):
    """The killed driver's Ray folder is left behind, and the next sweep removes it. Its drivers
    get a temp folder of their own (TMPDIR; short, for Ray's socket paths): in /tmp, a sweep of
    another test process removed the folder before this test could see it (CI, two processes)."""
    import shutil
    import signal

    db = tmp_path / "mlflow.db"
    args = toy_sweep(tmp_path, db)
    temp = Path(tempfile.mkdtemp(prefix="mtc-t", dir="/tmp"))
    env = {**plugin_env(), "TMPDIR": str(temp)}
    driver = start_driver(tmp_path, args, env)
    try:
        for line in driver.stdout:
            if "MLflow parent run" in line:
                break
        wait_for_finished_runs(db)
        assert ray_processes_after(driver.pid, wait=0)  # its local Ray, found by its folder
        driver.send_signal(signal.SIGKILL)  # the driver alone, as the OOM killer or a lost login would
        driver.wait(timeout=60)
        _, children, (parent,) = child_runs(db)
        assert parent.info.status == "RUNNING"  # nobody could close it
        kept = {r.data.tags[tracking.TRIAL_KEY_TAG]: r.info.run_id for r in children if r.info.status == "FINISHED"}
        assert 0 < len(kept) < 12

        assert not ray_processes_after(driver.pid)  # its local Ray died with it (Ray's parent-death signal)
        left = sorted(temp.glob(f"mtc-ray-{driver.pid}-*"))
        assert [path.suffix for path in left] == ["", ".lock"]  # its Ray folder and lock: its clean-up never ran
        done = run_cli("mtc.sweep", *args, cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        assert not any(path.exists() for path in left)  # removed by the next sweep
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)  # a test that failed midway leaves nothing running
        shutil.rmtree(temp, ignore_errors=True)
    _, children, parents = child_runs(db)
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    keys = [r.data.tags[tracking.TRIAL_KEY_TAG] for r in children]
    assert len(keys) == 12 == len(set(keys)) and {r.info.status for r in children} == {"FINISHED"}
    finished = {r.data.tags[tracking.TRIAL_KEY_TAG]: r.info.run_id for r in children}
    assert all(finished[key] == run_id for key, run_id in kept.items())  # finished runs keep their ids


def test_concurrent_drivers_on_one_sqlite_store_are_refused_in_one_line(tmp_path):
    db = tmp_path / "mlflow.db"  # a new store: its creation races unless serialised
    drivers = {name: start_driver(tmp_path, toy_sweep(tmp_path, db, f"sweep.name={name}", "sweep.repeats=2"))
               for name in ("one", "two")}
    outputs = {name: driver.communicate(timeout=300) for name, driver in drivers.items()}
    codes = sorted(driver.returncode for driver in drivers.values())
    assert codes == [0, 2], outputs
    loser = next(name for name, driver in drivers.items() if driver.returncode == 2)
    lines = [line for line in outputs[loser][1].splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: another sweep (driver pid "), lines
    assert "SQLite takes one sweep at a time" in lines[0] and "python -m mtc.stack start" in lines[0]
    _, children, parents = child_runs(db)
    assert len(parents) == 1 and len(children) == 6 and {r.info.status for r in children} == {"FINISHED"}
    winner = outputs[next(name for name in drivers if name != loser)]
    assert "toy-synthetic" not in winner[1] and "trial/s" in winner[1]  # tqdm's line (sweep.name is one/two)
    assert "╭" not in winner[0] + winner[1] and "Trial status" not in winner[0] + winner[1]  # no Ray Tune tables
    configs = list((tmp_path / "out" / "hydra").glob("*/.hydra/config.yaml"))
    assert len(configs) == 1  # the winner's Hydra output folder; the refused command leaves none


def test_the_same_sweep_started_twice_is_refused_while_the_first_runs(tmp_path):
    db = tmp_path / "mlflow.db"
    args = toy_sweep(tmp_path, db, "sweep.repeats=2")
    first = start_driver(tmp_path, args)
    for line in first.stdout:
        if "MLflow parent run" in line:
            break
    second = run_cli("mtc.sweep", *args, f"mlflow.tracking_uri=sqlite:///{tmp_path / 'other.db'}", cwd=tmp_path,
                     env=plugin_env())
    assert second.returncode == 2
    assert second.stderr.strip().startswith(f"error: sweep 'toy-synthetic' is already running (driver pid {first.pid}")
    _, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr
    _, children, parents = child_runs(db)
    assert len(parents) == 1 and len(children) == 6 and {r.info.status for r in children} == {"FINISHED"}
