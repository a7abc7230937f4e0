"""A stop signal at any moment of a sweep or a study (issue 50): a real driver subprocess is
signalled at a moment it reports through the documented test hook of mtc.sweep.stopping
(MTC_DEBUG_MOMENTS; MTC_DEBUG_PAUSE holds it there) and must end with the documented exit
code (130 SIGINT, 143 SIGTERM, 129 SIGHUP), one line of its own on stderr, no process left
and no lock file left. Then a driver killed with SIGKILL leaves Ray's agents running: the next
sweep on the machine ends them.

Every driver runs in a short temp folder of its own (its TMPDIR, output folder and store: Ray's
socket paths take at most 107 bytes); a process is left behind if its command line, its
environment or a file it holds open names that folder (Ray retitles its agents and workers, but
they keep their logs there open). The moments are spread over the signals, one try each (a
few minutes in all); tests/test_signals.py stops sweeps mid-way and resumes them."""

import contextlib
import fcntl
import json
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

from mtc.store import locks
from mtc.sweep.driver import RAY_FOLDER

pytestmark = pytest.mark.slow

PLUGIN = Path(__file__).parent / "plugin"
TOY = [f"hydra.searchpath=[file://{PLUGIN / 'conf'}]", "method=toy", "ray.num_cpus=1", "sweep.seeds_per_trial=1",
       "data.params.n_tasks=2", "data.params.samples_per_cluster=10", "++method.grid.shift=[0.0,1.0]",
       "++method.params.delay=1.0", "sweep.repeats=3"]  # 6 trials of 1 s
STUDY = """sweeps:
  - methods: [kmeans]
    data: [synthetic]
    overrides: ["++method.grid.max_iter=[100]", "sweep.repeats=2", "data.params.n_tasks=2",
                "data.params.samples_per_cluster=10"]
compare:
  - out: compare_one
    benchmarks: [synthetic]
"""
HOW = {signal.SIGINT: "interrupted (Ctrl-C)", signal.SIGTERM: "stopped by SIGTERM",
       signal.SIGHUP: "stopped by SIGHUP (the terminal closed)"}
PROGRESS = re.compile(r"\d+%\|.*\| \d+/\d+ \[")  # the progress line (tqdm), redrawn in place
RAY_LOG = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\s+(INFO|WARNING) ")  # Ray's start-up lines
# tracking.open_store serialises a new SQLite store's creation with a lock file it leaves (never held after)
NOT_A_DRIVER_LOCK = {"mlflow.db.create.lock"}


@pytest.fixture
def folder():
    path = Path(tempfile.mkdtemp(prefix="mtc-o", dir="/tmp"))
    yield path
    for pid in left_behind(path, wait=0):  # a test that failed midway leaves nothing running
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(path, ignore_errors=True)


def driver_env(folder: Path, **extra: str) -> dict:
    return {**os.environ, "TMPDIR": str(folder), "MTC_DEBUG_MOMENTS": str(folder / "moments"),
            "PYTHONPATH": os.pathsep.join([str(PLUGIN), *filter(None, [os.environ.get("PYTHONPATH")])]), **extra}


def sweep_args(folder: Path, *extra: str) -> list[str]:
    return ["-m", "mtc.sweep", f"output_dir={folder / 'out'}", f"mlflow.tracking_uri=sqlite:///{folder / 'mlflow.db'}",
            f"mlflow.artifact_root={folder / 'artifacts'}", *TOY, *extra]


def study_args(folder: Path) -> list[str]:
    (folder / "study.yaml").write_text(STUDY)
    return ["-m", "mtc.reproduce", str(folder / "study.yaml"), f"output_dir={folder / 'out'}",
            f"mlflow.tracking_uri=sqlite:///{folder / 'mlflow.db'}", f"mlflow.artifact_root={folder / 'artifacts'}",
            "ray.num_cpus=1", "--compare-root", str(folder)]


def start(folder: Path, args: list[str], env: dict) -> subprocess.Popen:
    """The driver in a process group of its own, SIGINT and SIGHUP at their defaults (as
    tests/test_signals.py starts it)."""

    def default_stop_signals():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)

    return subprocess.Popen([sys.executable, *args], cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=default_stop_signals)


def moments(folder: Path, name: str = "moments") -> list[str]:
    with contextlib.suppress(FileNotFoundError):
        return (folder / name).read_text().split()
    return []


def wait_for(driver: subprocess.Popen, folder: Path, moment: str, timeout: float = 240.0,
             name: str = "moments") -> None:
    deadline = time.monotonic() + timeout
    while moment not in moments(folder, name):
        assert driver.poll() is None, f"the driver ended before {moment!r}: {driver.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline, f"no {moment!r} within {timeout:.0f} s"
        time.sleep(0.02)


def names_folder(pid: int, folder: bytes) -> bool:
    """Whether process ``pid`` names ``folder`` in its command line, environment or open files."""
    proc = Path(f"/proc/{pid}")
    try:
        if folder in (proc / "cmdline").read_bytes() or folder in (proc / "environ").read_bytes():
            return True
        for fd in (proc / "fd").iterdir():
            with contextlib.suppress(OSError):
                if folder in os.readlink(fd).encode():
                    return True
    except OSError:  # gone
        return False
    return False


def left_behind(folder: Path, wait: float = 3.0) -> list[int]:
    """The processes (but this one) still naming ``folder`` once they had ``wait`` seconds to go."""
    deadline = time.monotonic() + wait
    while True:
        found = [int(proc.name) for proc in Path("/proc").iterdir()
                 if proc.name.isdigit() and int(proc.name) != os.getpid() and names_folder(int(proc.name),
                                                                                           str(folder).encode())]
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


def describe(pids: list[int]) -> list[str]:
    """Each process's pid, title and the Ray temp folders it names (whose driver's pid is in the name)."""
    out = []
    for pid in pids:
        with contextlib.suppress(OSError):
            proc = Path(f"/proc/{pid}")
            title = (proc / "cmdline").read_bytes()[:80].replace(b"\0", b" ").decode(errors="replace")
            named = set(RAY_FOLDER.findall((proc / "cmdline").read_bytes() + (proc / "environ").read_bytes()))
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    named.update(RAY_FOLDER.findall(os.readlink(fd).encode()))
            parent = (proc / "stat").read_text().rsplit(")", 1)[1].split()[1]
            out.append(f"{pid} {title} (parent {parent}; names {sorted(name.decode().rsplit('/', 1)[-1] for name in named)})")
    return out


def own_lines(stderr: str) -> list[str]:
    """The driver's own lines on stderr: without Ray's start-up log lines and the progress line."""
    return [line for line in re.split(r"[\r\n]", stderr) if line.strip() and not RAY_LOG.match(line)
            and not PROGRESS.search(line)]


def locks_left(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*.lock*")
                  if path.name not in NOT_A_DRIVER_LOCK)


def stand_in_holder(lock: Path) -> int:
    """Hold a killed driver's Ray lock for this test, its record naming this live process: a
    sweep of a test running beside this one (pytest-xdist) ends a dead driver's Ray processes
    wherever they are (mtc.sweep.driver.remove_dead_drivers_ray_folders), and would end them
    before this test has seen them. Closing the returned descriptor lets go; the file stays."""
    fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(locks.this_process()).encode(), 0)
    return fd


def running_runs(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as connection:
        return connection.execute("SELECT COUNT(*) FROM runs WHERE status = 'RUNNING'").fetchone()[0]


# (moment, signal, MTC_DEBUG_PAUSE, seconds between the moment and the signal, study?)
MOMENTS = [
    ("data", signal.SIGHUP, "data=10", 0.3, False),  # the config read, the data being loaded
    ("ray", signal.SIGTERM, None, 0.3, False),  # ray.init starting the GCS and the raylet
    ("ray", signal.SIGINT, None, 1.0, False),  # the raylet starting its agents, the core worker connecting
    ("ray-started", signal.SIGHUP, "ray-started=10", 0.3, False),  # ray.init returned, Ray's start not yet over
    ("trials", signal.SIGINT, None, 1.5, False),  # the first trials' workers starting
    ("report", signal.SIGTERM, "report=10", 0.3, False),  # every trial done, the report being written
    ("finished", signal.SIGHUP, "finished=10", 0.3, False),  # the sweep FINISHED, Ray about to stop
    ("compare", signal.SIGTERM, "compare=10", 0.3, True),  # a study's compare folders being written
]


@pytest.mark.parametrize("moment, signum, pause, delay, study", MOMENTS,
                         ids=[f"{m[0]}-{m[1].name}" for m in MOMENTS])
def test_a_stop_signal_at_any_moment_exits_with_its_code_one_line_no_orphan_and_no_lock(folder, moment, signum,
                                                                                       pause, delay, study):
    env = driver_env(folder, **({"MTC_DEBUG_PAUSE": pause} if pause else {}))
    driver = start(folder, study_args(folder) if study else sweep_args(folder), env)
    try:
        wait_for(driver, folder, moment)
        time.sleep(delay)
        reached = moments(folder)
        os.killpg(driver.pid, signum)
        _, stderr = driver.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)
    lines = own_lines(stderr)
    assert driver.returncode == 128 + signum, (reached, stderr[-3000:])
    assert len(lines) == 1, (reached, lines[-20:])  # no traceback, no Abseil dump, no second message
    how = HOW[signum]
    expected = {"data": f"{how} before any MLflow run was created", "ray": f"{how} before any MLflow run was created",
                "ray-started": f"{how} before any MLflow run was created",
                "trials": f"{how}: ", "report": f"{how}: 6 of 6 trials finished",
                "finished": f"{how} after sweep toy-synthetic finished: MLflow parent run ",
                "compare": f"{how} while writing the compare folders"}[moment]
    assert lines[0].startswith(expected), (reached, lines)
    if moment == "ray":  # the signal came while ray.init ran, or it tested nothing
        assert "ray-started" not in reached, reached
    left = left_behind(folder)
    assert not left, (reached, describe(left))
    assert not locks_left(folder), (reached, locks_left(folder))
    assert not list(folder.glob("mtc-ray-*")), reached  # its Ray folder removed
    if (folder / "mlflow.db").exists():
        assert running_runs(folder / "mlflow.db") == 0  # every run closed


def test_the_next_sweep_ends_the_ray_processes_a_killed_driver_left(folder):
    """SIGKILL to the driver alone, mid-sweep (the OOM killer, a lost login): Ray's GCS and raylet
    die with it (their parent-death signal), but its agents (and workers starting) live on,
    retitled ``ray::DashboardAgent`` and ``ray::RuntimeEnvAgent``. The next sweep, here the same
    command, ends them before it starts its own Ray, removes the dead driver's Ray folder and
    resumes the sweep; nothing is left once it is done."""
    args = sweep_args(folder)
    driver = start(folder, args, driver_env(folder))
    try:
        wait_for(driver, folder, "trials")
        time.sleep(2.0)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(driver.pid, signal.SIGKILL)
    dead_folder = sorted(folder.glob(f"mtc-ray-{driver.pid}-*"))
    assert [path.suffix for path in dead_folder] == ["", ".lock"]
    stand_in = stand_in_holder(dead_folder[1])
    time.sleep(1.0)
    orphans = left_behind(folder, wait=0)
    assert orphans, "Ray left nothing behind this time: the rest of this test proves nothing"
    assert {"ray::DashboardAgent", "ray::RuntimeEnvAgent"} <= {line.split()[1] for line in describe(orphans)}

    os.close(stand_in)  # from here on, any sweep may end them: the next one here must
    again = start(folder, args, driver_env(folder, MTC_DEBUG_MOMENTS=str(folder / "moments-again")))
    try:
        wait_for(again, folder, "ray-started", name="moments-again")
        assert not any(pid in orphans for pid in left_behind(folder, wait=0)), describe(orphans)  # ended first
        _, stderr = again.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(again.pid, signal.SIGKILL)
    assert again.returncode == 0, stderr[-3000:]
    assert not any(path.exists() for path in dead_folder)
    left = left_behind(folder)
    assert not left, describe(left)
    assert not locks_left(folder)
    assert running_runs(folder / "mlflow.db") == 0
