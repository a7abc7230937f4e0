"""The tracking stack as a service (issue 81): ``python -m mtc.stack start`` brings up
whichever part is down, PostgreSQL (over the stale lock files of one killed with SIGKILL) or
the MLflow tracking server, and leaves the running part alone; ``status`` says which part is
up; a sweep that runs while each part in turn is killed and brought back loses nothing.
(``restart`` shares ``start``'s code; tests/test_multinode.py restarts a server mid-sweep.)

One stack (real PostgreSQL from Debian's package, a real ``mlflow server``) serves the module,
started and checked with the commands as an operator runs them; each test leaves it up.
"""

import contextlib
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient
from tracked_runs import sweep_runs

from mtc.stack import server
from mtc.stack.loopback import free_port
from mtc.store import tracking

pytestmark = pytest.mark.slow  # servers and Ray: run first (tests/conftest.py)
PLUGIN = Path(__file__).parent / "plugin"


def stack(root: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m mtc.stack <args> --dir root``."""
    return subprocess.run([sys.executable, "-m", "mtc.stack", *args, "--dir", str(root)], capture_output=True,
                          text=True, timeout=180)


def recorded(root: Path) -> dict:
    return json.loads((root / "stack.json").read_text())


def postmaster_pid(root: Path) -> int:
    return int((root / "pgdata" / "postmaster.pid").read_text().split()[0])


def runs(pid: int) -> bool:
    """Whether process ``pid`` runs (an exited one not yet reaped, a zombie, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_until(condition, what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not {what} after {seconds} s"
        time.sleep(0.2)


def kill_postgresql(root: Path) -> int:
    """SIGKILL to PostgreSQL's postmaster (its ``postmaster.pid`` stays); returns its pid once
    it and its children are gone."""
    pid = postmaster_pid(root)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not runs(pid), "exited")
    wait_until(lambda: str(root / "pgdata") not in map(folder_of, os.listdir("/proc")), "without its children")
    return pid


def folder_of(pid: str) -> str | None:
    """The working folder of process ``pid`` (PostgreSQL's processes work in its data folder)."""
    with contextlib.suppress(OSError):
        return os.readlink(f"/proc/{pid}/cwd")


@pytest.fixture(scope="module")
def root():
    """The module's stack, started with ``python -m mtc.stack start`` on free loopback ports
    in a fresh folder under /var/tmp (the postgres user reaches it); stopped and removed after."""
    if not (shutil.which("pg_ctl") or glob.glob("/usr/lib/postgresql/*/bin/pg_ctl")):
        pytest.skip("no PostgreSQL server here (Debian: apt-get install postgresql)")
    folder = Path(tempfile.mkdtemp(prefix="mtc-stack-", dir="/var/tmp"))
    try:
        started = stack(folder, "start", "--port", str(free_port()), "--db-port", str(free_port()))
        assert started.returncode == 0, started.stderr
        yield folder
    finally:
        try:
            server.stop(folder)
        finally:
            subprocess.run(["rm", "-rf", str(folder)], check=False)


def test_start_brings_back_postgresql_killed_with_sigkill_over_its_stale_lock_files(root):
    """A PostgreSQL killed with SIGKILL leaves postmaster.pid (and its socket's lock file);
    here their pid went to another live process, as after a reboot, which PostgreSQL itself
    takes for a running server. ``start`` checks that pid is no PostgreSQL of this folder,
    removes the stale files and starts it; the running server is left alone and works."""
    server_pid = recorded(root)["server_pid"]
    dead = kill_postgresql(root)
    stranger = subprocess.Popen(["sleep", "600"])  # the pid the lock files name is alive again
    try:
        for lock in [root / "pgdata" / "postmaster.pid", *root.glob(".s.PGSQL.*.lock")]:
            lock.write_text(lock.read_text().replace(str(dead), str(stranger.pid), 1))
        done = stack(root, "start")
        assert done.returncode == 0, done.stderr
        assert runs(stranger.pid)
    finally:
        stranger.kill()
        stranger.wait()
    assert postmaster_pid(root) not in (dead, stranger.pid) and runs(postmaster_pid(root))
    assert recorded(root)["server_pid"] == server_pid  # left alone
    client = MlflowClient(f"http://127.0.0.1:{recorded(root)['port']}")  # its pool reconnects to the new PostgreSQL
    run = client.create_run(client.create_experiment(f"after-{dead}"))
    client.log_metric(run.info.run_id, "m", 1.0)
    assert client.get_run(run.info.run_id).data.metrics == {"m": 1.0}


def test_status_says_which_part_is_up(root, tmp_path):
    state = recorded(root)
    database, uri = f"127.0.0.1:{state['db_port']}", f"http://127.0.0.1:{state['port']}"
    both = stack(root, "status")
    assert both.returncode == 0, both.stderr
    assert both.stdout.splitlines() == [f"PostgreSQL: up, pid {postmaster_pid(root)}, {database}",
                                        f"tracking server: up, pid {state['server_pid']}, {uri}"]
    kill_postgresql(root)
    half = stack(root, "status")
    assert half.returncode == 3
    assert half.stdout.splitlines() == [f"PostgreSQL: down, {database}",
                                        f"tracking server: up, pid {state['server_pid']}, {uri}"]
    assert stack(root, "start").returncode == 0
    none = stack(tmp_path, "status")
    assert none.returncode == 3 and none.stdout == f"no stack in {tmp_path}\n"


def test_start_refuses_another_port_for_a_running_part_and_stops_nothing(root):
    state, database = recorded(root), postmaster_pid(root)
    other = str(free_port())
    done = stack(root, "start", "--db-port", other)
    assert done.returncode == 2 and done.stderr == (
        f"error: the stack in {root} runs with --db-port {state['db_port']}: to use --db-port {other}, stop it first "
        f"(python -m mtc.stack stop --dir {root})\n")
    assert recorded(root) == state and postmaster_pid(root) == database and runs(database)
    assert runs(state["server_pid"])


def test_a_sweep_loses_nothing_while_each_part_is_killed_and_brought_back_by_start(root):
    """While the trials run: PostgreSQL killed with SIGKILL, then ``start``; then the server's
    pid (from stack.json) killed as issue 81's serious row did, then ``start``, which used to fail
    on PostgreSQL's lock file and then shut the running PostgreSQL down (the sweep lost its store).
    Each time the other part is left as it ran; the trials' logging waits (MLflow's retries) and
    every trial is stored once, finished, with its metrics."""
    uri = f"http://127.0.0.1:{recorded(root)['port']}"
    folder = Path(tempfile.mkdtemp(prefix="mtc-s", dir="/tmp"))  # short: Ray's socket paths
    env = {**os.environ, "TMPDIR": str(folder),
           "PYTHONPATH": os.pathsep.join([str(PLUGIN), *filter(None, [os.environ.get("PYTHONPATH")])])}
    driver = subprocess.Popen([sys.executable, "-m", "mtc.sweep", f"hydra.searchpath=[file://{PLUGIN / 'conf'}]",
                               "method=toy", "ray.num_cpus=1", "sweep.seeds_per_trial=1", "data.params.n_tasks=2",
                               "data.params.samples_per_cluster=10", "++method.grid.shift=[0.0,1.0]",
                               "++method.params.delay=1.0", "sweep.repeats=4", "sweep.name=faults",
                               f"mlflow.tracking_uri={uri}", f"output_dir={folder / 'out'}"],
                              cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)

    def finished() -> int:
        assert driver.poll() is None, driver.communicate()[1][-3000:]
        return sum(r.info.status == "FINISHED" for r in sweep_runs(uri, "faults")[1])

    try:
        wait_until(lambda: finished() >= 1, "one trial finished", 180)
        server_pid = recorded(root)["server_pid"]
        kill_postgresql(root)
        assert stack(root, "start").returncode == 0
        assert recorded(root)["server_pid"] == server_pid and runs(server_pid)  # left alone

        at_server_fault, database = finished(), postmaster_pid(root)
        os.kill(server_pid, signal.SIGTERM)
        wait_until(lambda: not server.server_is_up(uri), "down")
        assert driver.poll() is None  # mid-sweep
        done = stack(root, "start")
        assert done.returncode == 0, done.stderr
        assert postmaster_pid(root) == database and runs(database)  # left alone
        assert recorded(root)["server_pid"] != server_pid and server.server_is_up(uri)
        _, stderr = driver.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)
    assert driver.returncode == 0, stderr[-3000:]
    assert at_server_fault < 8
    (parent,), children = sweep_runs(uri, "faults")
    keys = [r.data.tags[tracking.TRIAL_KEY_TAG] for r in children]
    assert parent.info.status == "FINISHED" and len(keys) == 8 == len(set(keys))
    assert all(r.info.status == "FINISHED" and r.data.metrics["acc/mean"] == 1.0 for r in children)
    assert "received fast shutdown request" not in (root / "postgres.log").read_text()  # nobody stopped it
