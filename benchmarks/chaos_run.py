"""Issue 81's chaos run: a study on three hosts while its parts are killed at random moments.

    .venv/bin/python benchmarks/chaos_run.py --minutes 30 --faults 12 --seed 0 \\
        --out outputs/chaos_run --markdown docs/results/chaos_run.md

Needs root, iproute2 and PostgreSQL's server: the cluster is tests/netns_cluster.py's, three
hosts in network namespaces (the head: the Ray head, mtc.stack's tracking server and its
PostgreSQL; two Ray workers of 2 CPUs each), the driver on the head. The study (STUDY: k-means,
kernel k-means, SNMF and MTCMRL on the synthetic benchmark with its clusters closer than by
default, where the fits leave their k-means start and the scores vary by seed; one seed per Ray
Tune trial, each trial's readable files logged) is run three times, each in an experiment of its
own:

1. a pilot of ``--pilot-repeats`` seeds, whose trials' span in the store sizes the study so that
   its trials take ``--minutes`` (``--repeats`` sets the seeds instead, without a pilot);
2. the reference, without faults: its wall time, its trials' span and its compare folder;
3. the same study with faults: ``--faults`` moments drawn by a seeded RNG (``--seed``), one in
   each equal part of the first SHARE of the reference's span of trials, each of a kind (the kinds in turn,
   shuffled): a worker host's Ray (its raylet and ``ray start`` SIGKILLed; the operator's ``ray
   stop`` and ``ray start``), the tracking server (its process group SIGKILLed), PostgreSQL (its
   postmaster SIGKILLed; both brought back by ``python -m mtc.stack start``), the driver
   (SIGTERM or SIGKILL to its process group; the same command again). Each part comes back
   OPERATOR_DELAY seconds after its fault (drawn too). A driver that ends with an error by
   itself is run again as well; one that ends without having written the compare folders (all
   its sweeps were finished) is run again with ``--compare``, as its own line says.

At the end: every planned trial FINISHED exactly once (its child runs counted per sweep and
trial key; none left RUNNING, FAILED or KILLED), every FINISHED run's files downloaded through
the tracking server and read, the compare folder's cells equal to the reference's
(benchmarks/cells_diff.py), and nothing left: no process in the hosts' namespaces but the
cluster's, no lock file held and no driver's lock, no sweep's lease in the store. The fault log
and the counts go to ``--markdown``; the exit code is 1 when a check failed.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import math
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))  # one token for the nodes and every driver
os.environ.setdefault("RAY_AUTH_MODE", "token")

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "benchmarks"), str(REPO / "tests" / "plugin")]  # + a test study's methods

from cells_diff import KEY, compare_cells  # noqa: E402
from netns_cluster import PLUGIN, NetnsCluster, entered, in_netns, unavailable  # noqa: E402

KINDS = ("worker", "server", "database", "driver")
OPERATOR_DELAY = (1.0, 5.0)  # seconds from a fault to the command that brings the part back
SHARE = 0.9  # the faults fall in this first share of the reference's span of trials
STOP_SECONDS = 120.0  # a driver sent SIGTERM that still runs this long after gets SIGKILL
# Ray's GCS declares a node dead after 5 failed health checks of its raylet, one a second
# (tests/test_netns_cluster.py: Tune saw a lost host's trials fail 10 s after the loss, 65 s
# with Ray's defaults)
HEALTH_CHECKS = {"RAY_health_check_initial_delay_ms": "1000", "RAY_health_check_period_ms": "1000",
                 "RAY_health_check_timeout_ms": "1000", "RAY_health_check_failure_threshold": "5"}
STUDY = """\
sweeps:
  - methods: [kmeans, kkm, snmf, mtcmrl]
    data: [synthetic]
    overrides: ["data.params.separation=0.5"]
compare:
  - out: compare
    benchmarks: [synthetic]
"""
SETTINGS = ("sweep.seeds_per_trial=1", "mlflow.readable_trial_files=true")


@dataclass(frozen=True)
class Study:
    """A study file's text and the overrides every command of it gets (besides its folders,
    store and Ray address: ``StudyRun.args``)."""

    text: str
    overrides: tuple[str, ...]


@dataclass(frozen=True)
class Fault:
    """A planned fault: its moment (s after the study's first command started), its kind, the
    worker (an index) or the signal it hits, and the operator's delay before bringing it back."""

    at: float
    kind: str
    worker: int
    signal: int
    delay: float


@dataclass
class Event:
    """A line of the fault log: when (s into the run), the kind (a fault's, or ``driver ended``
    when the driver ended by itself), what was killed, how it came back and after how long."""

    at: float
    kind: str
    killed: str
    back: str
    seconds: float


@dataclass
class DriverRun:
    """One run of the study's command: its number, output files, start (s into the run), exit
    code and the signal that stopped it (None: it ended by itself)."""

    number: int
    out: Path
    err: Path
    started: float
    code: int | None = None
    stopped_by: str | None = None

    def last_line(self) -> str:
        lines = [line for line in re.split(r"[\r\n]", self.err.read_text(errors="replace")) if line.strip()]
        return lines[-1].strip() if lines else ""

    def counts(self) -> dict[str, int]:
        """The last counts of the study's progress line ('running 2, failed 0, retried 1'), and
        those of a second Tuner's line ('study NAME again: ...', mtc.sweep.stranded) as 'again <key>'."""
        found = {}
        for part in re.split(r"[\r\n]", self.err.read_text(errors="replace")):
            if part.startswith("study "):
                prefix = "again " if " again:" in part else ""
                found.update({prefix + key: int(value) for key, value in
                              re.findall(r"(running|failed|retried|to run again) (\d+)", part)})
        return found


class Driver:
    """``python -m mtc.reproduce <args>`` on the head, in its own process group, started again
    as an operator would; each run's output in ``folder``/driver-<n>.out and .err."""

    def __init__(self, cluster: NetnsCluster, folder: Path, args: list[str], clock: float):
        self.cluster, self.folder, self.args, self.clock = cluster, folder, args, clock
        self.runs: list[DriverRun] = []
        self.process: subprocess.Popen | None = None

    def start(self, *extra: str) -> None:
        run = DriverRun(len(self.runs) + 1, self.folder / f"driver-{len(self.runs) + 1}.out",
                        self.folder / f"driver-{len(self.runs) + 1}.err", time.monotonic() - self.clock)
        with run.out.open("w") as out, run.err.open("w") as err:
            self.process = subprocess.Popen(
                in_netns(self.cluster.head, sys.executable, "-m", "mtc.reproduce", *self.args, *extra),
                cwd=self.folder, env={**self.cluster.env, "PYTHONUNBUFFERED": "1"}, stdout=out, stderr=err,
                start_new_session=True)
        self.runs.append(run)

    def poll(self) -> int | None:
        code = self.process.poll()
        self.runs[-1].code = code
        return code

    def stop(self, sent: int) -> int:
        """Send ``sent`` to the driver's process group and wait for it to end (SIGKILL after
        STOP_SECONDS); returns its exit code."""
        run = self.runs[-1]
        run.stopped_by = signal.Signals(sent).name
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sent)
        try:
            run.code = self.process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            run.code = self.process.wait()
            run.stopped_by += f", still running {STOP_SECONDS:.0f} s later: SIGKILL"
        return run.code


@dataclass
class StudyRun:
    """One run of the study in ``folder`` and ``experiment``: its command's arguments, the
    driver's runs, the fault log, its wall time and when its trials ran (s after its start)."""

    folder: Path
    experiment: str
    args: list[str]
    runs: list[DriverRun] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    seconds: float = 0.0
    trials_span: tuple[float, float] = (0.0, 0.0)

    @property
    def faults(self) -> list[Event]:
        return [event for event in self.events if event.kind in KINDS]

    @property
    def compare(self) -> Path:
        return self.folder / "compare" / "cells.csv"


def study_args(cluster: NetnsCluster, study: Study, folder: Path, experiment: str) -> list[str]:
    """The study's command line (its file written to ``folder``): overrides, folders, store, Ray."""
    path = folder / "study.yaml"
    path.write_text(study.text)
    return [str(path), *study.overrides, f"output_dir={folder / 'outputs'}", f"data.cache_dir={folder / 'cache'}",
            f"mlflow.tracking_uri={cluster.tracking_uri}", f"mlflow.experiment={experiment}",
            f"ray.address={cluster.ray_address}", "--compare-root", str(folder)]


def plan_faults(rng: random.Random, count: int, window: tuple[float, float]) -> list[Fault]:
    """``count`` faults, one at a random moment in each of ``count`` equal parts of ``window``
    (s after the start), their kinds in a random order: each kind as often as the others (the
    first kinds of KINDS once more when ``count`` is no multiple of their number)."""
    kinds = [KINDS[i % len(KINDS)] for i in range(count)]
    rng.shuffle(kinds)
    width = (window[1] - window[0]) / max(count, 1)
    return [Fault(window[0] + width * (i + rng.random()), kind, rng.randrange(2),
                  rng.choice((signal.SIGTERM, signal.SIGKILL)), rng.uniform(*OPERATOR_DELAY))
            for i, kind in enumerate(kinds)]


def fault_window(reference: StudyRun, share: float = SHARE) -> tuple[float, float]:
    """The first ``share`` of the span of ``reference``'s trials (s after its start): a run with
    faults, never faster, still runs its trials then."""
    first, last = reference.trials_span
    return first, first + share * (last - first)


def inject(cluster: NetnsCluster, driver: Driver, fault: Fault) -> Event:
    """Kill the part ``fault`` names, wait the operator's delay, bring it back as an operator
    does; returns the fault log's line."""
    at, start = time.monotonic() - driver.clock, time.monotonic()
    if fault.kind == "worker":
        host = cluster.workers[fault.worker % len(cluster.workers)]
        pids = cluster.kill_ray(host)
        killed = f"{host.role}'s Ray: its raylet and `ray start` (SIGKILL, {len(pids)} processes)"
        time.sleep(fault.delay)
        cluster.restart_ray(host)
        back = f"`ray stop`, `ray start` on {host.role} after {fault.delay:.1f} s; {len(cluster.hosts)} nodes again"
    elif fault.kind in ("server", "database"):
        kill = cluster.kill_tracking_server if fault.kind == "server" else cluster.kill_database
        pid = kill()
        killed = (f"the tracking server (SIGKILL to its process group {pid})" if fault.kind == "server"
                  else f"PostgreSQL (SIGKILL to its postmaster {pid})")
        time.sleep(fault.delay)
        cluster.start_stack()
        back = f"`python -m mtc.stack start` after {fault.delay:.1f} s"
    else:
        run = driver.runs[-1]
        code = driver.stop(fault.signal)
        killed = f"the driver, run {run.number} ({run.stopped_by} to its process group; exit {code})"
        time.sleep(fault.delay)
        driver.start()
        back = f"the same command after {fault.delay:.1f} s (run {driver.runs[-1].number})"
    return Event(at, fault.kind, killed, back, time.monotonic() - start)


def supervise(driver: Driver, until: float, events: list[Event], max_runs: int) -> bool:
    """Watch the driver until ``until`` (time.monotonic()), running the same command again when
    it ends with an error (logged as ``driver ended``); False once it ended with 0."""
    while True:
        code = driver.poll()
        if code == 0:
            return False
        if code is not None:
            run = driver.runs[-1]
            if len(driver.runs) >= max_runs:
                raise RuntimeError(f"the study's command ended with exit {code} in its run {run.number} of "
                                   f"{max_runs} at most: {run.last_line()}")
            events.append(Event(time.monotonic() - driver.clock, "driver ended",
                                f"the driver ended by itself, run {run.number}, exit {code}: {run.last_line()}",
                                f"the same command (run {run.number + 1})", 0.0))
            driver.start()
        if time.monotonic() >= until:
            return True
        time.sleep(0.5)


def run_study(cluster: NetnsCluster, study: Study, folder: Path, experiment: str, faults: list[Fault],
              max_runs: int) -> StudyRun:
    """The study in a fresh ``folder`` and experiment, ``faults`` injected at their moments (those
    that fall after the study ended are not), run again until its command ends with 0 (at most
    ``max_runs`` runs), its compare folders written."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    result = StudyRun(folder, experiment, study_args(cluster, study, folder, experiment))
    started, clock = time.time(), time.monotonic()
    driver = Driver(cluster, folder, result.args, clock)
    driver.start()
    for fault in faults:
        if not supervise(driver, clock + fault.at, result.events, max_runs):
            break
        result.events.append(inject(cluster, driver, fault))
    supervise(driver, math.inf, result.events, max_runs)
    if "no sweep ran" in driver.runs[-1].out.read_text():  # a run stopped while comparing: as its line says
        driver.start("--compare")
        result.events.append(Event(time.monotonic() - clock, "compare", "no compare folder written: every sweep was "
                                   "finished", f"the same command with --compare (run {driver.runs[-1].number})", 0.0))
        supervise(driver, math.inf, result.events, max_runs + 1)
    result.seconds, result.runs = time.monotonic() - clock, driver.runs
    first, last = trials_span(cluster, experiment)
    result.trials_span = (first - started, last - started)
    return result


# what the store holds
def stored(cluster: NetnsCluster, experiment: str) -> tuple[list, list, list, dict]:
    """(parent runs, live child runs, deleted child runs, experiment tags) of ``experiment``."""
    from mlflow import MlflowClient
    from mlflow.entities import ViewType

    from mtc.store import tracking

    with entered(cluster.head.netns):
        client = MlflowClient(cluster.tracking_uri)
        found = client.get_experiment_by_name(experiment)
        runs = client.search_runs([found.experiment_id], run_view_type=ViewType.ALL, max_results=50000)
    parents = [r for r in runs if tracking.SWEEP_KEY_TAG in r.data.tags]
    children = [r for r in runs if tracking.PARENT_TAG in r.data.tags]
    return (parents, [r for r in children if r.info.lifecycle_stage == "active"],
            [r for r in children if r.info.lifecycle_stage != "active"], dict(found.tags))


def trials_span(cluster: NetnsCluster, experiment: str) -> tuple[float, float]:
    """The first start and the last end of the experiment's FINISHED child runs (epoch s)."""
    runs = [r for r in stored(cluster, experiment)[1] if r.info.status == "FINISHED"]
    return min(r.info.start_time for r in runs) / 1000, max(r.info.end_time for r in runs) / 1000


def planned(args: list[str]) -> set[tuple[str, str]]:
    """Every planned trial of the study as (sweep key, trial key), as its driver plans them."""
    from mtc import reproduce

    overrides = [arg for arg in args[1:] if "=" in arg]
    return {(plan.key, trial.key) for plan in reproduce.plan_study(reproduce.load_study(args[0]), overrides, [])
            for trial in plan.trials}


# the checks
@dataclass
class Checks:
    """What the store and the machine hold after a run (``verify``)."""

    planned: int
    finished: int
    lost: int
    duplicated: int
    statuses: dict
    parents: dict
    deleted: int
    runs_read: int
    files_read: int
    unreadable: list
    cells: int
    cells_lines: list
    cells_differ: bool
    seeds_differ: int
    strays: list
    locks: list
    leases: list

    def failures(self) -> list[str]:
        """The checks that failed, named."""
        failed = {"planned trials without a FINISHED run": self.lost, "duplicated runs": self.duplicated,
                  "child runs not FINISHED": self.statuses != {"FINISHED": self.planned},
                  "parent runs not FINISHED": set(self.parents) != {"FINISHED"},
                  "unreadable files": self.unreadable, "no cells": not self.cells,
                  "cells unlike the run without faults'": self.cells_differ or self.seeds_differ,
                  "processes left": self.strays, "locks left": self.locks, "sweep leases left": self.leases}
        return [name for name, found in failed.items() if found]

    @property
    def ok(self) -> bool:
        return not self.failures()


def tally(parents: list, children: list, expected: set) -> tuple[Counter, int, int]:
    """FINISHED child runs per (sweep key, trial key), the planned trials without one (lost) and
    the FINISHED runs beyond one per planned trial (duplicated: a second run, or an unplanned key)."""
    from mtc.store import tracking

    sweep_of = {p.info.run_id: p.data.tags[tracking.SWEEP_KEY_TAG] for p in parents}
    finished = Counter((sweep_of.get(r.data.tags[tracking.PARENT_TAG]), r.data.tags[tracking.TRIAL_KEY_TAG])
                       for r in children if r.info.status == "FINISHED")
    lost = len(expected - set(finished))
    duplicated = sum(count - (key in expected) for key, count in finished.items())
    return finished, lost, duplicated


def read_file(path: Path) -> None:
    """Read ``path`` as what its name says it is; raises if it cannot be."""
    import numpy as np
    import pandas as pd
    from PIL import Image

    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as arrays:
            for name in arrays.files:
                arrays[name]
    elif path.suffix == ".csv":
        pd.read_csv(path)
    elif path.suffix == ".json":
        json.loads(path.read_text())
    elif path.suffix == ".png":
        with Image.open(path) as image:
            image.verify()
    else:
        path.read_text(encoding="utf-8")


def unreadable_files(cluster: NetnsCluster, runs: list, folder: Path) -> tuple[int, list[str]]:
    """Every artifact file of ``runs`` downloaded through the tracking server and read
    (read_file); returns how many files were read and the unreadable ones ('<run>/<file>: why')."""
    from mlflow import MlflowClient

    read, failed = 0, []
    # the download's threads start from this one: in the head's namespace; no progress bar per run
    with mock.patch.dict(os.environ, {"MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false"}), entered(cluster.head.netns):
        client = MlflowClient(cluster.tracking_uri)
        for run in runs:
            local = Path(tempfile.mkdtemp(dir=folder))
            try:
                for path in sorted(Path(client.download_artifacts(run.info.run_id, "", str(local))).rglob("*")):
                    if path.is_file():
                        try:
                            read_file(path)
                            read += 1
                        except Exception as error:
                            failed.append(f"{run.info.run_name}/{path.relative_to(local)}: {error}")
            except Exception as error:
                failed.append(f"{run.info.run_name}: {error}")
            finally:
                shutil.rmtree(local, ignore_errors=True)
    return read, failed


def held(path: Path) -> bool:
    """Whether a process holds the file lock (flock) on ``path``."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def locks_left(folder: Path) -> list[str]:
    """The lock files under ``folder`` still held, and the drivers' lock files (their driver
    removes them as it ends) still there."""
    return [f"{path.relative_to(folder)}" + (" (held)" if held(path) else "")
            for path in sorted(folder.rglob("*.lock")) if path.name == ".driver.lock" or held(path)]


def verify(cluster: NetnsCluster, run: StudyRun, reference: StudyRun, tolerance: float = 1e-9) -> Checks:
    """The store, the files, the cells and the machine after ``run`` (against ``reference``'s cells)."""
    import pandas as pd

    expected = planned(run.args)
    parents, children, deleted, tags = stored(cluster, run.experiment)
    finished, lost, duplicated = tally(parents, children, expected)
    done = [r for r in parents + children if r.info.status == "FINISHED"]
    files, unreadable = unreadable_files(cluster, done, run.folder)
    cells_lines, differ, cells, seeds_differ = ["no cells.csv"], True, 0, 0
    if run.compare.exists():
        old, new = pd.read_csv(reference.compare), pd.read_csv(run.compare)
        cells_lines, differ = compare_cells(old, new, tolerance)
        both = old.merge(new, on=KEY, suffixes=("_old", "_new"))
        cells, seeds_differ = len(new), int((both["n_old"] != both["n_new"]).sum())  # cells_diff leaves n out
    return Checks(len(expected), sum(finished.values()), lost, duplicated, dict(Counter(r.info.status for r in children)),
                  dict(Counter(p.info.status for p in parents)), len(deleted), len(done), files, unreadable, cells,
                  cells_lines, differ, seeds_differ, cluster.strays(), locks_left(run.folder), leases_left(tags))


def leases_left(tags: dict) -> list[str]:
    """The sweeps' leases among the experiment's tags (mtc.store.locks.server_lease), each as
    '<sweep key>: <holder's pid>, renewed <s> s ago, <whether its driver is gone>'."""
    from mtc.store.locks import LEASE_TAG, gone

    prefix = LEASE_TAG.split("{")[0]
    found = []
    for tag, value in sorted(tags.items()):
        if tag.startswith(prefix):
            lease = json.loads(value)
            found.append(f"{tag.removeprefix(prefix)}: {' '.join(lease['holder'].split()[1:3])}, renewed "
                         f"{time.time() - lease['renewed']:.0f} s ago, its driver "
                         f"{'gone' if gone(lease.get('process') or {}) else 'alive'}")
    return found


def retried(run: StudyRun) -> dict[str, int]:
    """Trials run more than once: Ray Tune's retries (its trials whose worker died, in both
    Tuners), the trials a second Tuner ran again (mtc.sweep.stranded) and the trials running
    when a driver was stopped or ended (run again by the next command)."""
    counts = [driver_run.counts() for driver_run in run.runs]
    return {"Ray Tune retries": sum(c.get("retried", 0) + c.get("again retried", 0) for c in counts),
            "run again by a second Tuner": sum(c.get("to run again", 0) for c in counts),
            "running when a driver ended": sum(c.get("running", 0) + c.get("again running", 0)
                                               for c, driver_run in zip(counts, run.runs) if driver_run.code != 0)}


# sizing, the report
def size_study(cluster: NetnsCluster, study: Study, folder: Path, pilot_repeats: int, minutes: float) -> tuple[int, float]:
    """The seeds (sweep.repeats) whose trials take about ``minutes``, from a pilot run of
    ``pilot_repeats`` seeds (its trials' span in the store, per seed); and that span per seed."""
    pilot = Study(study.text, (*study.overrides, f"sweep.repeats={pilot_repeats}"))
    ran = run_study(cluster, pilot, folder, "pilot", [], max_runs=1)
    per_seed = (ran.trials_span[1] - ran.trials_span[0]) / pilot_repeats
    return max(math.ceil(minutes * 60 / per_seed), 1), per_seed


def scrub(text: str, folders: dict[str, str]) -> str:
    """``text`` with this machine's folders replaced by their names."""
    for folder, name in folders.items():
        text = text.replace(folder, name)
    return text


def as_minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def report(reference: StudyRun, faulted: StudyRun, checks: Checks, repeats: int, command: str,
           folders: dict[str, str]) -> str:
    """The markdown page: what a reader gets, the fault log, the checks, how it was measured."""
    kinds = Counter(event.kind for event in faulted.faults)
    again = retried(faulted)
    exits = ", ".join(f"{r.code}" + (f" ({r.stopped_by})" if r.stopped_by else "") for r in faulted.runs)
    verdict = "every check passed" if checks.ok else f"**checks failed: {', '.join(checks.failures())}** (below)"
    lines = [
        "# Chaos run: a study on three hosts while its parts are killed",
        "",
        f"A study of {checks.planned} trials ran on a three-host cluster for {as_minutes(faulted.seconds)} while "
        f"{len(faulted.faults)} faults were injected at random moments ({', '.join(f'{kinds[k]} {k}' for k in KINDS)}): "
        f"{verdict}. Runs lost: {checks.lost}, duplicated: {checks.duplicated}; every planned trial has "
        f"{'exactly one' if checks.lost == checks.duplicated == 0 else 'not exactly one'} FINISHED run; "
        f"{checks.files_read} files of {checks.runs_read} FINISHED runs read, {len(checks.unreadable)} unreadable; "
        f"the compare folder's {checks.cells} cells {'equal' if not checks.cells_differ else 'differ from'} those "
        f"of the run without faults; wall time {as_minutes(faulted.seconds)} against {as_minutes(reference.seconds)} "
        "without faults.",
        "",
        "| | without faults | with faults |",
        "|---|---|---|",
        f"| wall time (first command's start to the last one's end) | {as_minutes(reference.seconds)} | "
        f"{as_minutes(faulted.seconds)} |",
        f"| trials planned | {checks.planned} | {checks.planned} |",
        f"| faults injected | 0 | {len(faulted.faults)} ({', '.join(f'{k} {kinds[k]}' for k in KINDS)}) |",
        f"| runs of the study's command (exit codes) | {len(reference.runs)} "
        f"({', '.join(str(r.code) for r in reference.runs)}) | {len(faulted.runs)} ({exits}) |",
        f"| trials retried | 0 | {sum(again.values())} ({', '.join(f'{k} {v}' for k, v in again.items())}) |",
        f"| FINISHED child runs | {checks.planned} | {checks.finished} |",
        f"| runs lost | 0 | {checks.lost} |",
        f"| runs duplicated | 0 | {checks.duplicated} |",
        "",
        "## Fault log",
        "",
        "Seconds after the study's first command started; `driver ended`: the driver ended by itself "
        "and the same command was run again.",
        "",
        "| s | fault | what was killed | how it came back | back after s |",
        "|---|---|---|---|---|",
        *[f"| {e.at:.1f} | {e.kind} | {scrub(e.killed, folders).replace('|', '/')} | "
          f"{scrub(e.back, folders).replace('|', '/')} | {e.seconds:.1f} |" for e in faulted.events],
        "",
        "## Checks",
        "",
        f"- Trials: {checks.planned} planned, {checks.finished} FINISHED child runs, lost {checks.lost}, duplicated "
        f"{checks.duplicated}; child runs by status {checks.statuses}, deleted child runs (left unfinished, "
        f"replaced on resuming) {checks.deleted}; parent runs by status {checks.parents}.",
        f"- Files: {checks.files_read} files of the {checks.runs_read} FINISHED runs (children and parents) "
        f"downloaded through the tracking server and read, {len(checks.unreadable)} unreadable"
        + (": " + "; ".join(scrub(u, folders) for u in checks.unreadable[:10]) if checks.unreadable else "") + ".",
        "- Cells (`benchmarks/cells_diff.py`, the run without faults against this one): "
        + "; ".join(line.strip() for line in checks.cells_lines)
        + f"; seeds per cell (n) differ in {checks.seeds_differ} cells.",
        f"- Left: {len(checks.strays)} processes in the hosts' namespaces besides the cluster's"
        + (f" ({'; '.join(scrub(s, folders) for s in checks.strays)})" if checks.strays else "")
        + f", {len(checks.locks)} lock files held or drivers' locks left"
        + (f" ({', '.join(checks.locks)})" if checks.locks else "")
        + f", {len(checks.leases)} sweep leases in the store"
        + (f" ({'; '.join(checks.leases)})" if checks.leases else "") + ".",
        "",
        "## How it was measured",
        "",
        "`benchmarks/chaos_run.py` builds the cluster of `tests/netns_cluster.py`: three hosts in network "
        "namespaces of one machine (2 cores), the head with the Ray head (no CPUs), `mtc.stack`'s tracking server "
        "and its PostgreSQL, and two Ray workers of 2 CPUs each; the driver, `python -m mtc.reproduce`, runs on the "
        "head. Ray's GCS declares a node dead after 5 missed health checks one second apart. The study: k-means, "
        "kernel k-means, SNMF and MTCMRL on the synthetic benchmark (3 tasks, clusters closer than by default: "
        f"separation 0.5, where the fits leave their k-means start), their grids x {repeats} seeds, one seed per "
        "Ray Tune trial, each trial's readable files logged (trial.npz, labels, traces, matrices as CSV, "
        "heatmaps), one compare folder. Its seeds were sized by a pilot so that its trials take the minutes asked "
        f"(without faults they ran from {reference.trials_span[0]:.0f} s to {reference.trials_span[1]:.0f} s after "
        "the command started; the rest is the driver's start, the sweeps' reports and the compare folder). "
        "It ran once without faults (the reference), then in a fresh experiment with the faults, each at a random "
        f"moment (a seeded RNG) in its own equal part of the first {SHARE:.0%} of the reference's span of trials, "
        "each kind as often as the others in a random order: a worker host's Ray (its raylet and `ray start` SIGKILLed, then `ray stop` and `ray start` "
        "on that host), the tracking server (its process group SIGKILLed) and PostgreSQL (its postmaster "
        "SIGKILLed), both brought back by `python -m mtc.stack start`, and the driver (SIGTERM or SIGKILL to its "
        "process group, then the same command). Each part came back 1 to 5 s after its fault (drawn). A command "
        "that ended with an error by itself was run again; one that found every sweep finished and wrote no "
        "compare folder was run again with `--compare`, as its line says. Trials retried: Ray Tune's retries "
        "and the trials a second Tuner ran again (the drivers' progress lines), and the trials running when a "
        "driver was stopped or ended (its last progress line), which the next command ran again. Lost and "
        "duplicated: FINISHED child runs counted per sweep key and trial key against the trials the study plans. "
        "Files: every artifact of every FINISHED run read as its kind (numpy's npz, pandas' CSV, JSON, PIL's PNG "
        "check, UTF-8 text). Left: the processes of the namespaces that belong to no Ray node's process group, "
        "the tracking server's or PostgreSQL's; lock files under the run's folders (outputs, data cache) still "
        "held, and drivers' locks not removed; `mtc.lease.*` tags of the experiment. Wall times were measured "
        "while other work shared the machine.",
        "",
        "Made by:",
        "",
        "```bash",
        command,
        "```",
        "",
    ]
    return "\n".join(lines)


def summary(reference: StudyRun, faulted: StudyRun, checks: Checks) -> list[str]:
    """The lines printed at the end."""
    kinds = Counter(event.kind for event in faulted.faults)
    return [f"faults injected: {len(faulted.faults)} ({', '.join(f'{k} {kinds[k]}' for k in KINDS)}); "
            f"command runs: {len(faulted.runs)} (exits {[r.code for r in faulted.runs]})",
            f"trials retried: {retried(faulted)}",
            f"trials planned {checks.planned}, FINISHED runs {checks.finished}, lost {checks.lost}, duplicated "
            f"{checks.duplicated}, child statuses {checks.statuses}, deleted {checks.deleted}, parents {checks.parents}",
            f"files read {checks.files_read} of {checks.runs_read} FINISHED runs, unreadable {checks.unreadable[:5]}",
            f"cells: {'; '.join(line.strip() for line in checks.cells_lines)}; seeds per cell differ in "
            f"{checks.seeds_differ}",
            f"left: processes {checks.strays}, locks {checks.locks}, leases {checks.leases}",
            f"wall time: {faulted.seconds:.1f} s with faults, {reference.seconds:.1f} s without",
            "every check passed" if checks.ok else f"CHECKS FAILED: {', '.join(checks.failures())}"]


def cluster_env() -> dict[str, str]:
    """Every Ray node's and driver's environment: the token, the plugin's methods on the path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGIN), *filter(None, [os.environ.get("PYTHONPATH")])])}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="how long the study's trials take without faults")
    parser.add_argument("--faults", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0, help="the fault plan's RNG seed")
    parser.add_argument("--repeats", type=int, help="the study's seeds (no pilot run)")
    parser.add_argument("--pilot-repeats", type=int, default=2)
    parser.add_argument("--samples", type=int, default=300, help="synthetic samples per cluster")
    parser.add_argument("--out", type=Path, default=Path("outputs/chaos_run"))
    parser.add_argument("--markdown", type=Path, help="write the fault log and the counts there")
    args = parser.parse_args(argv)
    reason = unavailable()
    if reason:
        sys.exit(f"error: no network namespaces here: {reason}")
    command = " ".join([".venv/bin/python benchmarks/chaos_run.py", *(sys.argv[1:] if argv is None else argv)])
    out = args.out.resolve()
    study = Study(STUDY, (*SETTINGS, f"data.params.samples_per_cluster={args.samples}"))
    with NetnsCluster(cluster_env(), workers=2, worker_cpus=2, head_env=HEALTH_CHECKS) as cluster:
        repeats = args.repeats
        if repeats is None:
            repeats, per_seed = size_study(cluster, study, out / "pilot", args.pilot_repeats, args.minutes)
            print(f"pilot: {per_seed:.1f} s of trials per seed; {repeats} seeds for {args.minutes:g} min")
        study = Study(STUDY, (*study.overrides, f"sweep.repeats={repeats}"))
        reference = run_study(cluster, study, out / "reference", "reference", [], max_runs=1)
        print(f"reference: {reference.seconds:.1f} s, trials from {reference.trials_span[0]:.1f} s to "
              f"{reference.trials_span[1]:.1f} s")
        faults = plan_faults(random.Random(args.seed), args.faults, fault_window(reference))
        faulted = run_study(cluster, study, out / "faults", "faults", faults, max_runs=2 * args.faults + 5)
        for event in faulted.events:
            print(f"{event.at:8.1f} s  {event.kind:12s} {event.killed}; {event.back} ({event.seconds:.1f} s)")
        checks = verify(cluster, faulted, reference)
        folders = {str(out): "<out>", str(cluster.root): "<cluster>", str(cluster.ray_root): "<ray>",
                   sys.prefix: "<venv>", str(REPO): "."}
    print("\n".join(summary(reference, faulted, checks)))
    if args.markdown:
        args.markdown.write_text(report(reference, faulted, checks, repeats, command, folders))
        print(f"wrote {args.markdown}")
    sys.exit(0 if checks.ok else 1)


if __name__ == "__main__":
    main()
