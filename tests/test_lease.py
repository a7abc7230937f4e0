"""The sweep lease in a tracking store (mtc locks.server_lease): drivers on two machines see
each other through the store. Exercised here on a real MLflow store through its client (the
lease only reads and writes experiment tags, as it does through a server's REST API); the
two-driver case against a real server is in tests/test_multinode.py. Also the file locks of
mtc.store.locks: a holder record in the lock file, and a dead driver's leftover that still
holds it."""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from mtc.store import locks
from tracked_runs import sweep_runs

REMOTE = "http://tracking.example:5000"  # any non-SQLite URI: the lease applies


@pytest.fixture()
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(locks, "SETTLE_SECONDS", 0.05)
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    return client, client.create_experiment("lease", artifact_location=str(tmp_path / "artifacts"))


def test_a_second_driver_of_a_leased_sweep_is_refused_in_one_line(store):
    client, experiment = store
    with locks.server_lease(client, experiment, {"k1": "toy-synthetic"}, REMOTE):
        holder = locks.lease_holder(client, experiment, "k1")
        assert holder["holder"].split(" pid ")[1].split()[0].isdigit()
        with pytest.raises(locks.BusyError) as refused:
            with locks.server_lease(client, experiment, {"k2": "other", "k1": "toy-synthetic"}, REMOTE):
                pass
        message = str(refused.value)
        assert message.startswith("sweep 'toy-synthetic' is already running from ") and "\n" not in message
        assert "lapses after 120 s" in message
        assert locks.lease_holder(client, experiment, "k2") is None  # refused before writing anything
    assert locks.lease_holder(client, experiment, "k1") is None  # released at exit
    with locks.server_lease(client, experiment, {"k1": "toy-synthetic"}, REMOTE):  # free again
        pass


def test_a_lapsed_lease_of_a_dead_driver_is_taken_over(store):
    client, experiment = store
    stale = json.dumps({"holder": "node-b pid 4242 deadbeef", "renewed": time.time() - locks.LEASE_SECONDS - 1})
    client.set_experiment_tag(experiment, locks.LEASE_TAG.format(key="k1"), stale)
    assert locks.lease_holder(client, experiment, "k1") is None
    with locks.server_lease(client, experiment, {"k1": "toy"}, REMOTE):
        assert locks.lease_holder(client, experiment, "k1")["holder"] != "node-b pid 4242 deadbeef"


def test_a_dead_drivers_leases_of_sweeps_it_finished_are_removed_by_the_next_driver(store):
    """A driver killed by SIGKILL leaves a lease on every sweep it held, also those it had
    finished, which the next driver does not run: it removes them, and keeps a live one."""
    client, experiment = store
    dead = dead_process_here()
    for key in ("finished1", "finished2"):
        client.set_experiment_tag(experiment, locks.LEASE_TAG.format(key=key), json.dumps(
            {"holder": f"{dead['host']} pid {dead['pid']} deadbeef", "renewed": time.time(), "process": dead}))
    live = json.dumps({"holder": "node-b pid 4242 deadbeef", "renewed": time.time()})
    client.set_experiment_tag(experiment, locks.LEASE_TAG.format(key="elsewhere"), live)
    with locks.server_lease(client, experiment, {"k1": "toy"}, REMOTE):
        pass
    assert sorted(key for key in client.get_experiment(experiment).tags if key.startswith("mtc.lease.")) == \
        ["mtc.lease.elsewhere"]


def test_a_live_foreign_lease_written_during_the_settle_wins(store, monkeypatch):
    """Two drivers read "free" together: the later writer keeps the lease, the other backs off."""
    client, experiment = store
    other = json.dumps({"holder": "node-b pid 4242 deadbeef", "renewed": time.time()})
    real_sleep = time.sleep

    def other_driver_writes(seconds):
        client.set_experiment_tag(experiment, locks.LEASE_TAG.format(key="k1"), other)
        real_sleep(seconds)

    monkeypatch.setattr(locks.time, "sleep", other_driver_writes)
    with pytest.raises(locks.BusyError, match="^sweep 'toy' is already running from node-b pid 4242 against"):
        with locks.server_lease(client, experiment, {"k1": "toy"}, REMOTE):
            pass


def test_the_heartbeat_renews_the_lease(store, monkeypatch):
    client, experiment = store
    monkeypatch.setattr(locks, "RENEW_SECONDS", 0.2)
    with locks.server_lease(client, experiment, {"k1": "toy"}, REMOTE):
        first = locks.lease_holder(client, experiment, "k1")["renewed"]
        time.sleep(1.0)
        assert locks.lease_holder(client, experiment, "k1")["renewed"] > first


def test_a_sqlite_store_is_left_to_its_file_lock(store):
    client, experiment = store
    with locks.server_lease(client, experiment, {"k1": "toy"}, "sqlite:////tmp/x.db"):
        assert locks.lease_holder(client, experiment, "k1") is None


def dead_process_here() -> dict:
    """A holder record of a process of this machine that has exited."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return {**locks.this_process(), "pid": child.pid, "started": None}


def test_a_lease_of_a_dead_driver_of_this_machine_is_taken_over_at_once(store):
    """The driver was killed (SIGKILL) a moment ago on this host: its lease was renewed just
    now, but its process is gone here, so the same command takes the sweep over at once."""
    client, experiment = store
    dead = dead_process_here()
    fresh = json.dumps({"holder": f"{dead['host']} pid {dead['pid']} deadbeef", "renewed": time.time(),
                        "process": dead})
    client.set_experiment_tag(experiment, locks.LEASE_TAG.format(key="k1"), fresh)
    assert locks.lease_holder(client, experiment, "k1") is None
    with locks.server_lease(client, experiment, {"k1": "toy"}, REMOTE):
        assert locks.lease_holder(client, experiment, "k1")["process"]["pid"] == os.getpid()


@pytest.mark.parametrize("elsewhere", [{"host": "node-b"}, {"boot": "another-boot"}, {"pidns": "pid:[1]"}, {}],
                         ids=["another host", "another boot", "another PID namespace", "no process recorded"])
def test_a_fresh_lease_held_from_elsewhere_is_kept_until_it_lapses(store, elsewhere):
    """A pid that runs nothing here says nothing of a driver on another host, in another boot
    or PID namespace (a container with this host name), or of an older driver's lease."""
    client, experiment = store
    process = {**dead_process_here(), **elsewhere} if elsewhere else None
    lease = {"holder": "node-b pid 4242 deadbeef", "renewed": time.time(), **({"process": process} if process else {})}
    client.set_experiment_tag(experiment, locks.LEASE_TAG.format(key="k1"), json.dumps(lease))
    with pytest.raises(locks.BusyError, match="lapses after 120 s; on the machine it ran on, at once"):
        with locks.server_lease(client, experiment, {"k1": "toy"}, REMOTE):
            pass


def test_a_lock_file_records_its_holder_and_is_removed_on_release(tmp_path):
    lock = tmp_path / ".driver.lock"
    with locks.held(lock, "busy {pid}"):
        assert locks.read_holder(lock) == locks.this_process()
        with pytest.raises(locks.BusyError, match=f"^busy {os.getpid()}$"):
            with locks.held(lock, "busy {pid}"):
                pass
    assert not lock.exists()


def test_whether_another_holds_a_lock_is_asked_without_touching_its_file(tmp_path):
    lock = tmp_path / "mtc-ray-1-deadbeef.lock"
    assert not locks.held_by_another(lock) and not lock.exists()  # none holds a missing file, nor is it made
    with locks.held(lock, "busy {pid}"):
        assert locks.held_by_another(lock)
        before = lock.read_text()
    lock.write_text(before)  # a dead driver's lock file, left behind
    assert not locks.held_by_another(lock) and lock.read_text() == before  # free, and left as it was


def test_a_lock_kept_by_a_dead_drivers_leftover_is_freed(tmp_path):
    """The lock's recorded holder is gone but a process that shares its open file (a fork that
    did not exec) still holds it: that leftover is ended and the lock taken; a live holder's
    lock is never taken."""
    import fcntl

    lock = tmp_path / ".driver.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, json.dumps(dead_process_here()).encode())
    leftover = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=[fd])
    os.close(fd)  # only the leftover holds it now
    try:
        assert locks.lock_holders(lock) == [leftover.pid]
        with locks.held(lock, "busy {pid}"):
            assert leftover.wait(timeout=10) is not None
    finally:
        leftover.kill()
        leftover.wait()
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, json.dumps({**locks.this_process(), "pid": os.getppid(),
                             "started": locks.start_time(os.getppid())}).encode())
    try:
        with pytest.raises(locks.BusyError):
            with locks.held(lock, "busy {pid}"):
                pass
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def tracking_server():
    """PostgreSQL + `mlflow server` started by mtc.stack on loopback in a fresh folder (as
    tests/test_multinode.py does, without basic auth); stopped (only what it started) after the
    module's tests. Skipped where no PostgreSQL server is installed."""
    from mtc.errors import InputError
    from mtc.stack import server as stack
    from mtc.stack.loopback import free_port

    root = Path(tempfile.mkdtemp(prefix="mtc-stack-", dir="/var/tmp"))  # reachable by the postgres user
    try:
        started = stack.start(root, port=free_port(), db_port=free_port())
    except InputError as error:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"no tracking stack here: {error}")
    try:
        yield started
    finally:
        stack.stop(root)
        subprocess.run(["rm", "-rf", str(root)], check=False)


@pytest.mark.slow
def test_a_driver_killed_with_sigkill_is_resumed_at_once_against_a_tracking_server(tracking_server, capsys):
    """A live driver's lease refuses a second driver of the sweep (another output folder: another
    machine's) before it starts Ray; once the driver is killed with SIGKILL, the same command run
    at once on this machine takes its lease and output folder over at once, not after the lease
    lapses (LEASE_SECONDS, 120 s): it resumes (its parent run reopened) in well under half of
    that, 6-10 s here by the printed figure (no speed goal: a loaded machine takes longer), with
    no duplicate run and no process left."""
    from test_orphans import PLUGIN, describe, driver_env, left_behind, moments, start, wait_for

    from mtc.store import tracking

    folder = Path(tempfile.mkdtemp(prefix="mtc-l", dir="/tmp"))  # short: Ray's socket paths
    uri = tracking_server.tracking_uri
    args = ["-m", "mtc.sweep", f"hydra.searchpath=[file://{PLUGIN / 'conf'}]", "method=toy", "ray.num_cpus=1",
            "sweep.seeds_per_trial=1", "data.params.n_tasks=2", "data.params.samples_per_cluster=10",
            "++method.grid.shift=[0.0,1.0]", "++method.params.delay=1.5", "sweep.repeats=8",
            "sweep.name=resumed", f"mlflow.tracking_uri={uri}"]  # 16 trials of 1.5 s in turn: killed mid-way when loaded
    first = start(folder, [*args, f"output_dir={folder / 'out'}"], driver_env(folder))
    try:
        wait_for(first, folder, "trials")
        deadline = time.monotonic() + 120
        while not any(r.info.status == "FINISHED" for r in sweep_runs(uri, "resumed")[1]):
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()[-3000:]
            time.sleep(0.5)
        second = subprocess.run([sys.executable, *args, f"output_dir={folder / 'elsewhere'}"], cwd=folder,
                                env=driver_env(folder, MTC_DEBUG_MOMENTS=str(folder / "moments-second")),
                                capture_output=True, text=True, timeout=120)
        assert first.poll() is None, "the sweep ended before it could be killed mid-way"
        first.send_signal(signal.SIGKILL)  # the driver alone: nothing of it closes its runs or its lease
        first.wait(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(first.pid, signal.SIGKILL)
    assert second.returncode == 2 and second.stderr.strip().startswith(
        f"error: sweep 'resumed' is already running from {socket.gethostname()} pid {first.pid} against this "
        "tracking store"), second.stderr[-2000:]
    assert "data" in moments(folder, "moments-second") and "ray" not in moments(folder, "moments-second")  # no Ray
    (parent,), children = sweep_runs(uri, "resumed")
    assert parent.info.status == "RUNNING"  # nobody closed it
    kept = {r.data.tags[tracking.TRIAL_KEY_TAG]: r.info.run_id for r in children if r.info.status == "FINISHED"}
    assert 0 < len(kept) < 16

    begun = time.monotonic()
    again = start(folder, [*args, f"output_dir={folder / 'out'}"],
                  driver_env(folder, MTC_DEBUG_MOMENTS=str(folder / "moments-again")))
    try:
        resumed = None
        for line in again.stdout:
            if "MLflow parent run" in line:
                resumed = time.monotonic() - begun
                assert parent.info.run_id in line, line
                break
        _, stderr = again.communicate(timeout=300)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(again.pid, signal.SIGKILL)
    with capsys.disabled():
        print(f"\nresumed {resumed:.1f} s after its start" if resumed else "\nnot resumed")
    assert again.returncode == 0, stderr[-3000:]
    assert resumed is not None and resumed < locks.LEASE_SECONDS / 2, resumed  # it did not wait for the lease
    (after,), children = sweep_runs(uri, "resumed")
    keys = [r.data.tags[tracking.TRIAL_KEY_TAG] for r in children]
    assert after.info.status == "FINISHED" and len(keys) == 16 == len(set(keys))  # no duplicate run
    assert {r.info.status for r in children} == {"FINISHED"}
    assert all(r.info.run_id == kept[r.data.tags[tracking.TRIAL_KEY_TAG]] for r in children
               if r.data.tags[tracking.TRIAL_KEY_TAG] in kept)  # finished runs kept, not run again
    left = left_behind(folder)
    assert not left, (f"killed driver {first.pid}, resumed driver {again.pid}", describe(left),
                      sorted(path.name for path in folder.iterdir()))
    assert not list(folder.rglob("*.lock"))
    shutil.rmtree(folder, ignore_errors=True)
