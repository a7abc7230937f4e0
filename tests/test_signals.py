"""Signals and failures after the trials (issue 33, items 1-4): a real driver subprocess on
small synthetic data (the toy method of tests/plugin), stopped or starved mid-sweep; then the
store is read back: nothing RUNNING, nothing FINISHED that did not finish, one line on stderr,
and the same command resumes without a lost or duplicated run.

The full-disk cases mount a small tmpfs (root only, as CI runs); without root they are skipped
and the report's ENOSPC case, whose report.md is a symlink to /dev/full (a real ENOSPC from the
kernel, no mount needed), still runs."""

import contextlib
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from mtc.store import tracking

pytestmark = pytest.mark.slow

PLUGIN = Path(__file__).parent / "plugin"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGIN), *filter(None, [os.environ.get("PYTHONPATH")])])}
TOY = [f"hydra.searchpath=[file://{PLUGIN / 'conf'}]", "method=toy", "ray.num_cpus=1", "sweep.seeds_per_trial=1",
       "data.params.n_tasks=2", "data.params.samples_per_cluster=10"]
SLOW = [*TOY, "++method.grid.shift=[0.0,1.0]", "++method.params.delay=1.0", "sweep.repeats=3"]  # 6 trials of 1 s


def store_args(folder: Path, db: Path, *extra: str) -> list[str]:
    return [f"output_dir={folder / 'out'}", f"mlflow.tracking_uri=sqlite:///{db}",
            f"mlflow.artifact_root={folder / 'artifacts'}", *extra]


def start(folder: Path, args: list[str]) -> subprocess.Popen:
    """The driver in a process group of its own (as a terminal's job or a batch job), SIGINT and
    SIGHUP at their defaults: a job started with `&` inherits SIGINT ignored and one under nohup
    SIGHUP (the test suite itself may run under nohup), and the driver keeps an ignored signal
    ignored (mtc.sweep.stopping)."""
    return subprocess.Popen([sys.executable, "-m", "mtc.sweep", *args], cwd=folder, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=default_stop_signals)


def default_stop_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def run(folder: Path, args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mtc.sweep", *args], cwd=folder, env=ENV, capture_output=True,
                          text=True, timeout=300)


def finished_children(db: Path) -> int:
    """FINISHED child runs in the store, read with sqlite3 (cheap enough to poll)."""
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as connection:
        try:
            return connection.execute("SELECT COUNT(*) FROM runs JOIN tags ON tags.run_uuid = runs.run_uuid "
                                      "WHERE tags.key = ? AND runs.status = 'FINISHED'",
                                      (tracking.PARENT_TAG,)).fetchone()[0]
        except sqlite3.OperationalError:  # no schema yet
            return 0


def wait_for_parent(driver: subprocess.Popen) -> None:
    """Until the driver says its parent run exists (the store and the sweep are created)."""
    for line in driver.stdout:
        if "MLflow parent run" in line:
            return
    raise AssertionError("the driver ended before creating its parent run")


def processes() -> dict[int, tuple[int, int]]:
    """{pid: (parent pid, process group)} of every process, from /proc/<pid>/stat."""
    table = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after the command's name: state, ppid, pgrp
            table[int(stat.parent.name)] = (int(fields[1]), int(fields[2]))
    return table


def ray_processes_outside_its_group(pid: int) -> list[int]:
    """The driver's descendants (Ray's GCS, raylet and workers), each checked to be outside the
    driver's process group: a signal to the group reaches the driver alone, which stops Ray
    in order (mtc.sweep.stopping.ray_processes_in_a_group_of_their_own)."""
    table = processes()
    descendants, parents = [], {pid}
    while parents:
        parents = {child for child, (parent, _) in table.items() if parent in parents}
        descendants += sorted(parents)
    assert all(table[child][1] != pid for child in descendants), descendants
    return descendants


def signal_mid_sweep(folder: Path, db: Path, args: list[str], signum: int, again: float | None = None):
    """Start the driver, send ``signum`` to its process group once a trial finished (``again``
    seconds later a second time), and return (exit code, stderr lines)."""
    driver = start(folder, args)
    try:
        wait_for_parent(driver)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not finished_children(db):
            time.sleep(0.3)
        assert ray_processes_outside_its_group(driver.pid)
        os.killpg(driver.pid, signum)
        if again is not None:
            time.sleep(again)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(driver.pid, signum)
        _, stderr = driver.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)  # a test that failed midway leaves nothing running
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert not list(Path(tempfile.gettempdir()).glob(f"mtc-ray-{driver.pid}-*")), (driver.returncode, lines[-20:])
    return driver.returncode, lines  # its Ray folder removed


def sweep_runs(db: Path, name: str):
    """The parent run of sweep ``name`` and its child runs."""
    client = tracking.client_for(f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("mtc").experiment_id
    (parent,) = [r for r in tracking.find_runs(client, experiment) if r.info.run_name == name
                 and tracking.PARENT_TAG not in r.data.tags]
    return parent, tracking.find_runs(client, experiment, **{tracking.PARENT_TAG: parent.info.run_id})


def assert_stopped(db: Path, name: str, code: int, lines: list[str], expected_code: int, how: str):
    """Exit 128 + the signal, one last line saying how far the sweep got, the parent and every
    unfinished run KILLED, none RUNNING, no Abseil stack dump."""
    assert code == expected_code, lines[-20:]
    assert lines[-1].startswith(f"{how}: ") and "run the same command again to resume" in lines[-1], lines[-5:]
    assert not any("SIGTERM received" in line or "AbslFailureSignalHandler" in line or "Traceback" in line
                   for line in lines)
    parent, children = sweep_runs(db, name)
    statuses = [r.info.status for r in children]
    assert parent.info.status == "KILLED" and "RUNNING" not in statuses
    assert 0 < statuses.count("FINISHED") < 6 and f"{statuses.count('FINISHED')} of 6 trials finished" in lines[-1]
    return parent, children


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One folder and store for the SIGTERM sweep (resumed to FINISHED) and the sweep whose
    worker dies (compare reads both)."""
    folder = tmp_path_factory.mktemp("signals")
    return folder, folder / "mlflow.db"


@pytest.fixture(scope="module")
def terminated(shared):
    """SIGTERM to the driver's process group (a scheduler's time limit, `kill -- -PGID`; Ray's
    own processes are in a group of their own), then the same command again."""
    folder, db = shared
    args = store_args(folder, db, *SLOW)
    code, lines = signal_mid_sweep(folder, db, args, signal.SIGTERM)
    parent, children = assert_stopped(db, "toy-synthetic", code, lines, 143, "stopped by SIGTERM")
    kept = {r.data.tags[tracking.TRIAL_KEY_TAG]: r.info.run_id for r in children if r.info.status == "FINISHED"}
    resumed = run(folder, args)
    return parent, kept, resumed


def test_sigterm_closes_every_run_killed_and_the_same_command_resumes(shared, terminated):
    _, db = shared
    parent, kept, resumed = terminated
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    again, children = sweep_runs(db, "toy-synthetic")
    assert again.info.run_id == parent.info.run_id and again.info.status == "FINISHED"
    keys = [r.data.tags[tracking.TRIAL_KEY_TAG] for r in children]
    assert len(keys) == 6 == len(set(keys)) and {r.info.status for r in children} == {"FINISHED"}
    assert all(r.info.run_id == kept[r.data.tags[tracking.TRIAL_KEY_TAG]] for r in children
               if r.data.tags[tracking.TRIAL_KEY_TAG] in kept)  # finished runs kept, not run again


def test_ctrl_c_twice_closes_every_run_killed_with_the_right_message(tmp_path):
    """The second Ctrl-C lands while the driver stops Ray and closes the runs: it is told to
    wait, the closing goes on, and the one line still says how far the sweep got."""
    db = tmp_path / "mlflow.db"
    code, lines = signal_mid_sweep(tmp_path, db, store_args(tmp_path, db, *SLOW), signal.SIGINT, again=0.5)
    assert_stopped(db, "toy-synthetic", code, lines, 130, "interrupted (Ctrl-C)")
    assert not any("before any MLflow run" in line for line in lines)


def test_sighup_is_handled_like_sigterm(tmp_path):
    """The terminal closed: SIGHUP to the whole job."""
    db = tmp_path / "mlflow.db"
    code, lines = signal_mid_sweep(tmp_path, db, store_args(tmp_path, db, *SLOW), signal.SIGHUP)
    assert_stopped(db, "toy-synthetic", code, lines, 129, "stopped by SIGHUP (the terminal closed)")


def test_a_worker_killed_without_retries_fails_the_sweep_and_compare_names_it(shared, terminated, tmp_path):
    """sweep.max_failures=0 and a worker SIGKILLed inside a fit: the seeds of its Tune trial
    get no result, so the parent is FAILED (not FINISHED), the exit is non-zero with one line,
    and compare leaves the sweep out with a note naming it."""
    from mtc.results.compare import compare

    folder, db = shared
    died = tmp_path / "died"
    args = store_args(folder, db, *TOY, "sweep.name=toy-dead", "++method.grid.shift=[0.0,1.0]", "sweep.repeats=3",
                      "sweep.seeds_per_trial=3", "sweep.max_failures=0", f"++method.params.die_once={died}")
    done = run(folder, args)
    assert died.exists() and done.returncode == 1, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: sweep toy-dead: 3 of 6 trials have no result (") and "max_failures=0" in last
    assert last.endswith("is FAILED; run the same command again to run them")  # after Ray Tune's own trial error
    parent, children = sweep_runs(db, "toy-dead")
    assert parent.info.status == "FAILED" and parent.data.tags["mtc.error"] == last.removeprefix("error: ")
    assert "RUNNING" not in {r.info.status for r in children}
    assert sum(r.info.status == "FINISHED" for r in children) == 3
    assert not (folder / "out" / "toy-dead" / "report.md").exists()  # no report of a partial sweep
    notes = compare(f"sqlite:///{db}", "mtc", tmp_path / "compare", log=False)["comparison"].notes
    assert any(note.startswith(f"toy on dead: the newest sweep ({parent.info.run_id}, FAILED) did not finish")
               for note in notes), notes


def test_a_report_that_hits_a_full_disk_fails_the_parent_in_one_line(tmp_path):
    """The output folder fills while the report is written: report.md is a symlink to
    /dev/full, whose writes fail with ENOSPC (a real one, without a mount)."""
    db = tmp_path / "mlflow.db"
    out = tmp_path / "out" / "toy-synthetic"
    out.mkdir(parents=True)
    (out / "report.md").symlink_to("/dev/full")
    done = run(tmp_path, store_args(tmp_path, db, *TOY, "++method.grid.shift=[0.0]", "sweep.repeats=2"))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert lines[-1] == report_on_a_full_disk(out)
    parent, children = sweep_runs(db, "toy-synthetic")
    assert parent.info.status == "FAILED" and {r.info.status for r in children} == {"FINISHED"}


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB tmpfs at tmp_path/small (root only), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("a full disk needs a tmpfs mount (root); test_a_report_that_hits_a_full_disk runs without")
    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(small)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield small
    subprocess.run(["umount", "-l", str(small)], check=False)


def fill(folder: Path) -> Path:
    """Fill the disk of ``folder`` to the last byte; returns the filler file."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"\0" * 4096)
    return filler


@pytest.mark.parametrize("where", ["artifacts", "store", "output"])
def test_a_full_disk_mid_sweep_fails_the_parent_in_one_line_and_the_sweep_resumes(tmp_path, small_disk, where):
    """The artifact store's, the SQLite store's or the output folder's disk fills once the sweep
    has started: every later trial is lost, the progress line counts them, stderr ends with one
    line naming the full disk (no traceback per trial, none of Ray Tune's pyarrow frames when its
    results folder under the output folder cannot be written), nothing is RUNNING and the
    parent not FINISHED (FAILED, unless the full disk is the store's own); with space freed the
    same command runs what was lost, without a duplicate."""
    db = small_disk / "mlflow.db" if where == "store" else tmp_path / "mlflow.db"
    args = [*store_args(tmp_path, db, *TOY, "++method.grid.shift=[0.0,1.0]", "sweep.repeats=2",
                        "++method.params.delay=0.5")]
    if where == "artifacts":
        args.append(f"mlflow.artifact_root={small_disk / 'artifacts'}")
    if where == "output":
        args.append(f"output_dir={small_disk / 'out'}")
    driver = start(tmp_path, args)
    try:
        wait_for_parent(driver)
        filler = fill(small_disk)
        _, stderr = driver.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert driver.returncode == 1, lines[-20:]
    assert len(lines) < 20 and "Traceback" not in stderr, lines  # no traceback per trial
    parent, children = sweep_runs(db, "toy-synthetic")
    assert "RUNNING" not in {r.info.status for r in children} and parent.info.status != "FINISHED"
    if where == "artifacts":
        assert lines[-1] == (f"error: sweep toy-synthetic: 4 of 4 trials have no result (no space left on device: the "
                             f"artifact folder {small_disk / 'artifacts'} has 0 KiB free); MLflow parent run "
                             f"{parent.info.run_id} is FAILED; free disk space, then run the same command again to run "
                             "them")
        assert parent.info.status == "FAILED"
        assert "failed 4" in stderr.replace("\r", "\n").splitlines()[-2]  # the progress line's last state
    elif where == "output":  # Ray Tune's results folder cannot be written: the driver stops, or, where the disk
        # filled only once Tune had started (a loaded machine), the trials finish and the report cannot be written
        # (test_an_output_folder_that_fills_while_tune_runs_costs_one_line_and_no_result)
        out = small_disk / "out"
        assert re.fullmatch(f"error: no space left on device \\(the output folder {re.escape(str(out))} has \\d+ KiB "
                            "free\\); free space and run the same command again to resume \\(finished trials are "
                            "kept\\)", lines[-1]) or lines[-1] == report_on_a_full_disk(out / "toy-synthetic"), lines[-1]
    else:  # a full SQLite store takes no more writes, not even the parent's status: the next run closes it
        assert lines[-1] == ("error: the disk of the SQLite store is full (database or disk is full); free space and "
                             "run the same command again to resume (finished trials are kept)")
        return  # resuming is the same as for the artifacts (and costs a sweep)

    filler.unlink()
    resumed = run(tmp_path, args)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    parent, children = sweep_runs(db, "toy-synthetic")
    keys = [r.data.tags[tracking.TRIAL_KEY_TAG] for r in children]
    assert parent.info.status == "FINISHED" and len(keys) == 4 == len(set(keys))
    assert {r.info.status for r in children} == {"FINISHED"}


def report_on_a_full_disk(folder: Path) -> str:
    """The driver's last line when the report in ``folder`` cannot be written for a full disk."""
    return (f"error: no space left on device writing {folder / 'report.md'}; free space and run the same command again "
            "to resume (finished trials are kept)")


def wait_for_a_finished_trial(db: Path, name: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(run.info.status == "FINISHED" for run in sweep_runs(db, name)[1]):
            return
        time.sleep(0.1)
    raise AssertionError(f"no trial of {name} finished in {seconds} s")


def test_an_output_folder_that_fills_while_tune_runs_costs_one_line_and_no_result(tmp_path, small_disk):
    """The output folder's disk fills once a trial has finished: Ray Tune's saves of its
    experiment state there fail until its run ends (each logged with pyarrow's traceback, before),
    and it goes on. The driver prints one warning line for them, every trial finishes in MLflow,
    and the last line names the report it could not write; the parent is FAILED."""
    db, out = tmp_path / "mlflow.db", small_disk / "out"
    driver = start(tmp_path, [*store_args(tmp_path, db, *SLOW), f"output_dir={out}"])
    try:
        wait_for_parent(driver)
        wait_for_a_finished_trial(db, "toy-synthetic")
        fill(small_disk)
        _, stderr = driver.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert driver.returncode == 1 and "Traceback" not in stderr, lines
    warned = [line for line in lines if "Ray Tune could not save its experiment state" in line]
    assert len(warned) == 1 and re.search(f"no space left on device \\(the output folder {re.escape(str(out))} has "
                                          "\\d+ KiB free\\); nothing here reads it", warned[0]), warned
    assert lines[-1] == report_on_a_full_disk(out / "toy-synthetic")
    parent, children = sweep_runs(db, "toy-synthetic")
    assert parent.info.status == "FAILED" and [r.info.status for r in children] == ["FINISHED"] * 6


def test_a_ray_worker_stopped_by_sigterm_exits_without_a_traceback():
    """Ray stops its workers with SIGTERM at every shutdown; its own handler raised SystemExit
    wherever the worker was (often a GC callback: "Exception ignored ... SystemExit" printed
    after a successful sweep). The workers the driver starts take mtc's handler instead, and a
    worker sent SIGTERM ends at once, silently."""
    import ray

    from mtc.sweep.driver import worker_runtime_env

    @ray.remote
    class Probe:
        def handler(self):
            return getattr(signal.getsignal(signal.SIGTERM), "__name__", ""), os.getpid()

    folder = Path(tempfile.mkdtemp(prefix="mtc-test-ray-"))  # short: Ray's socket paths take at most 107 bytes
    ray.init(address="local", num_cpus=1, include_dashboard=False, runtime_env=worker_runtime_env({}),
             _temp_dir=str(folder))
    try:
        name, pid = ray.get(Probe.remote().handler.remote())
        assert name == "exit_now"
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
        errors = "".join(path.read_text() for path in folder.rglob(f"*{pid}*.err"))
        assert "Exception ignored" not in errors and "SystemExit" not in errors
    finally:
        ray.shutdown()
        shutil.rmtree(folder, ignore_errors=True)
