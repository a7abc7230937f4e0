"""The sweep: ``python -m mtc.sweep method=snmf data=synthetic``.

Hydra composes the config; mtc.config reads and checks all of it (every grid point against
the solver's constraints) before anything runs (the command line, mtc.sweep.command, first
looks in a SQLite store for the report of the sweep finished, and checks the method only if it
has to run). The driver then checks that the Ray cluster, the output folder and
the tracking store can be used (mtc.store.preflight), takes its locks (mtc.store.locks), loads the
dataset once, starts or joins Ray, creates the MLflow parent run, hands the
dataset (or, for a data config with ``draw: per_seed``, every seed's draw) and a validated
prototype solver to the trials through Ray's object store
(tune.with_parameters) and runs them with Ray Tune, a batch of seeds of one grid point per
Tune trial (``sweep.seeds_per_trial``; a long sweep on few CPUs otherwise spends more time
in Tune than in the fits); each (grid point, seed) gets its MLflow child run as its fit starts. Afterwards it reads every child run back from MLflow, aggregates
mean +- std per grid point, prints the table for the best grid point (by accuracy, and
without labels by the final objective), writes it to the output directory and logs it to
the parent run. docs/architecture.md follows one sweep through these steps.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import logging
import os
import re
import shlex
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from mtc.config import (
    Settings,
    TrackingSettings,
    Trial,
    method_display_names,
    point_label,
    seed_batches,
    seeds_per_trial,
    staggered,
)
from mtc.errors import InputError
from mtc.methods.memory import Shapes, check_sweep_memory
from mtc.methods.validation import check_equal_clusters, check_solver_takes, check_tasks
from mtc.numerics.cache import Cache
from mtc.results.reading import chosen_points, point_summaries, records_of
from mtc.results.report import (
    CRITERIA,
    PointSummary,
    data_note,
    grid_csv,
    left_out_note,
    report_markdown,
)
from mtc.store import locks, preflight, run_writer, tracking
from mtc.store.disk import full_disk, full_disk_in_one_line, full_folders
from mtc.store.preflight import UnreachableError
from mtc.store.locks import end_processes
from mtc.sweep.head_watch import watching_head
from mtc.sweep.stopping import (
    SweepIncomplete,
    SweepInterrupted,
    as_stopped,
    deferred,
    moment,
    ray_keeps_our_signal_handlers,
    ray_processes_in_a_group_of_their_own,
    server_unanswered,
    shielded,
    stop_signals,
)
from mtc.sweep.stranded import StrandedTrials
from mtc.sweep.planning import ALL_FINISHED_TAG, SweepPlan, plan_sweep, print_report, trials_digest
from mtc.trial import trial_params


LOST_TAG = "mtc.lost"  # on a FAILED child run that has no result for a reason other than its fit (why)
# The metrics the trials link shows as columns (mtc.store.tracking.log_trials_view), those the sweep logged
VIEW_METRICS = ("acc/mean", "nmi/mean", "ari/mean", "silhouette/mean", "objective/final", "degenerate_tasks",
                "n_iter", "fit_seconds")


@dataclass(frozen=True)
class OpenSweep:
    """A sweep whose parent run exists: the trials still to run and how many are finished."""

    plan: SweepPlan
    client: object = field(repr=False)
    experiment_id: str
    parent_id: str
    pending: list[Trial]
    finished: int


@dataclass(frozen=True)
class SweepJob:
    """What a Ray worker needs to fit and log the trials of one sweep."""

    datasets: dict
    prototype: object
    method: str
    data_config: dict
    tracking_uri: str
    experiment_id: str
    parent_id: str
    run_tags: dict
    readable: bool
    cache_dir: str | None = None  # data.cache_dir made absolute by the driver, or None: the worker's own default
    batches: dict = field(default_factory=dict)  # this sweep's Tune trials: {Tune trial name: [Trial, ...]}
    points: tuple = ()  # the grid points of its pending trials (mtc.trial.trial_solver's siblings)
    shared_fits: dict = field(default_factory=dict)  # trial key -> fit key another sweep shares (mtc.sweep.shared_fits)


@dataclass(frozen=True)
class TunerOutcome:
    """The Ray Tune run of one or more sweeps' trials: ``lost`` holds the errors (one line each,
    distinct) of seeds whose runs could not be logged; ``tune_errors`` counts the Tune trials
    that ended in ERROR, after the second run of those ended with retries left (``run_again``),
    and ``errors`` says why (tune_error: one line each, distinct)."""

    seconds: float = 0.0
    tune_trials: int = 0
    tune_errors: int = 0
    lost: tuple[str, ...] = ()
    run_again: int = 0  # Tune trials ended with retries left and run again (mtc.sweep.stranded)
    errors: tuple[str, ...] = ()


@dataclass(frozen=True)
class SweepResult:
    """A finished sweep: its parent run, report folder, summaries and chosen points."""

    parent_run_id: str
    output_dir: str
    summaries: list[PointSummary]
    best: dict[str, PointSummary]
    tracking_uri: str
    experiment_id: str
    trials_run: int
    markdown: str
    tuner: TunerOutcome = TunerOutcome()
    ray_started: bool = False


def runnable(plan: SweepPlan) -> SweepPlan:
    """The plan without the grid points whose parameters cannot fit its data (on any draw:
    MultiTaskClusterer.cannot_fit), each named in ``unrunnable`` with the reason, so that no
    trial fails for a reason known before it runs.

    Raises
    ------
    InputError
        No grid point can fit the data (the first point's reason).
    """
    method, datasets = plan.run.method, plan.datasets
    shapes = {Shapes.of(data.matrices, data.n_clusters) for data in datasets.values()}
    prototype = method.prototype(n_clusters=next(iter(datasets.values())).n_clusters)
    unrunnable = {}
    for point in method.grid_points():
        solver = prototype.__class__(**{**prototype.get_params(), **point})
        problem = next(filter(None, (solver.cannot_fit(shape) for shape in shapes)), None)
        if problem:
            unrunnable[point_label(point)] = problem
    if not unrunnable:
        return plan
    trials = [trial for trial in plan.trials if trial.label not in unrunnable]
    if not trials:
        raise InputError(f"no grid point can fit the data ({next(iter(unrunnable.values()))})")
    return replace(plan, trials=trials, unrunnable=unrunnable)


def check_memory(run: Settings, datasets: dict, points: list[dict]) -> None:
    """Refuse in one line (InputError) a local sweep whose concurrent trials cannot fit in the
    memory free beside Ray's object store (mtc.methods.memory: the largest estimate over the grid,
    on the largest draw); a joined cluster's workers are not known before joining, so nothing is
    checked there."""
    if not run.ray.local:
        return
    slots = max((run.ray.num_cpus or os.cpu_count() or 1) // run.sweep.cpus_per_trial, 1)
    if run.sweep.max_concurrent_trials:
        slots = min(slots, run.sweep.max_concurrent_trials)
    largest = max(datasets.values(), key=lambda data: sum(X.shape[0] for X in data.matrices))
    check_sweep_memory(run.method.prototype(n_clusters=largest.n_clusters),
                       Shapes.of(largest.matrices, largest.n_clusters), points, slots,
                       reserved=run.ray.object_store_memory)


def task_names(run: Settings, dataset) -> list[str]:
    """The tasks as a message names them: ``'a' (<its file>)`` for the user's files read one task
    a path, else ``'a'``."""
    paths = run.data.params.get("paths") or [] if run.data.builder == "files" else []
    if len(paths) == len(dataset.tasks) and not run.data.params.get("task_column"):
        return [f"{task.name!r} ({path})" for task, path in zip(dataset.tasks, paths)]
    return [repr(task.name) for task in dataset.tasks]


def check_plan(plan: SweepPlan) -> SweepPlan:
    """What a sweep that will run must pass before Ray starts: its data loads (every task
    clusterable), its method takes the data's cluster counts (a solver that shares its cluster
    columns across tasks needs equal ones), it takes the data (tasks on close enough scales, its
    input needs: mtc.methods.validation.check_solver_takes), a grid point can fit it (runnable)
    and its concurrent trials fit in memory (check_memory); the refusal names the sweep, one of a
    study's many. Returns the plan to run: without the grid points that cannot fit the data."""
    datasets = plan.datasets
    try:
        for counts in {tuple(data.n_clusters) for data in datasets.values()}:
            check_equal_clusters(list(counts), plan.run.method.solver.__name__,
                                 plan.run.method.solver.equal_clusters_reason)
        for data in datasets.values():
            check_tasks(data.matrices, names=task_names(plan.run, data))  # what every fit checks, before Ray
            check_solver_takes(plan.run.method.solver, data.matrices)
        plan = runnable(plan)
        check_memory(plan.run, datasets, list({trial.label: trial.point for trial in plan.trials}.values()))
    except InputError as error:
        raise InputError(f"sweep {plan.name}: {error}") from None
    return plan


def stored_parent(client, experiment_id: str, plan: SweepPlan):
    """The sweep's parent run if the store has one (resuming), else None; creates nothing."""
    if not plan.run.sweep.resume:
        return None
    existing = tracking.find_runs(client, experiment_id, **{tracking.SWEEP_KEY_TAG: plan.key})
    return existing[0] if existing else None


def marked_all_finished(parent, plan: SweepPlan) -> bool:
    """Whether finish_sweep marked the FINISHED parent run done for exactly the plan's trials."""
    return parent.info.status == "FINISHED" and parent.data.tags.get(ALL_FINISHED_TAG) == trials_digest(plan.trials)


def all_trials_finished(client, experiment_id: str, parent, plan: SweepPlan) -> bool:
    """Whether every trial of the plan has a FINISHED child run under ``parent``: told by the
    parent's ALL_FINISHED_TAG when finish_sweep wrote it for these trials (one run read, where
    searching a sweep's children loads every metric row of every run: 0.4 s a sweep of 150
    trials), else by the children."""
    if parent is None:
        return False
    if marked_all_finished(parent, plan):
        return True
    done = {run.data.tags.get(tracking.TRIAL_KEY_TAG)
            for run in tracking.find_runs(client, experiment_id, **{tracking.PARENT_TAG: parent.info.run_id})
            if run.info.status == "FINISHED"}
    return all(trial.key in done for trial in plan.trials)


def open_sweep(plan: SweepPlan, client, experiment_id: str) -> OpenSweep:
    """Create (or find, resuming) the parent run and prepare its children: finished trials are
    kept, unfinished runs deleted."""
    run = plan.run
    parent_id = tracking.open_parent_run(client, experiment_id, plan.key, plan.name, parent_params(run), plan.tags,
                                         run.sweep.resume)
    tracking.log_dataset_input(client, parent_id, run.data.name, plan.datasets, run.data.resolved)
    pending, finished = tracking.prepare_child_runs(client, experiment_id, parent_id, plan.trials)
    scale = run.data.params.get("scale") if run.data.builder == "files" else None
    print(f"sweep {plan.name}: {len(plan.trials)} trials ({len(finished)} already finished), "
          + (f"features scaled: {scale}, " if scale else "") + f"MLflow parent run {parent_id}"
          + (f"\n{left_out_note(plan.unrunnable, bold='')}" if plan.unrunnable else ""))
    return OpenSweep(plan, client, experiment_id, parent_id, pending, len(finished))


def parent_params(run: Settings) -> dict:
    """The parent run's params: the resolved config with the seeds the sweep runs (``seeds``,
    "0-9" for ten repeats) in place of its ``seed``, the one seed of ``python -m mtc.run``,
    which no sweep uses."""
    repeats = run.sweep.repeats
    seeds = "0" if repeats == 1 else f"0-{repeats - 1}"
    return {**{key: value for key, value in run.resolved.items() if key != "seed"}, "seeds": seeds}


def sweep_job(opened: OpenSweep, batches: dict[str, list[Trial]]) -> SweepJob:
    run = opened.plan.run
    prototype = run.method.prototype(n_clusters=opened.plan.datasets[0].n_clusters)
    return SweepJob(opened.plan.datasets, prototype, run.method.name, run.data.resolved, run.tracking.uri,
                    opened.experiment_id, opened.parent_id, opened.plan.tags, run.tracking.readable_trial_files,
                    None if run.data.cache_dir is None else str(Path(run.data.cache_dir).expanduser().resolve()),
                    batches, tuple({trial.label: trial.point for trials in batches.values() for trial in trials}.values()),
                    {trial.key: opened.plan.shared_fits[trial.key] for trials in batches.values() for trial in trials
                     if trial.key in opened.plan.shared_fits})


def sweep_trainable(config, *, jobs, owners):
    """One Ray Tune trial: a batch of seeds of one grid point of one sweep (``config["batch"]``
    names it; ``owners`` maps it to its sweep, ``jobs`` each sweep to its SweepJob in Ray's
    object store, which holds the sweep's batches). A seed whose earlier attempt FINISHED is
    skipped (a retried Tune trial: its worker died, killed, out of memory or node lost); each
    other seed is fitted, and the batch's child runs are written together once every seed is
    done (run_writer.write_runs: one transaction on a SQL store). A fit that raises gets a FAILED run (with the error) and
    the other seeds still run; it is not retried (a seeded fit fails the same way again).
    When the runs cannot be written (a full disk) the batch's seeds are counted lost, with
    the error; when the driver has closed the parent run (it was stopped) none is written."""
    import numpy as np
    import ray
    from ray import tune
    from threadpoolctl import threadpool_limits

    quiet_store_errors()
    job = ray.get(jobs[owners[config["batch"]]])  # unpickling its prototype imports the solver and its libraries
    trials = job.batches[config["batch"]]
    client = tracking.client_for(job.tracking_uri)
    WORKER_CACHES.fits.folder = steps_folder(job.cache_dir)  # no data.cache_dir: MTC_CACHE_DIR or ~ of the worker
    cpus = max(1, int(tune.get_context().get_trial_resources().required_resources.get("CPU", 1)))
    tags = {**job.run_tags, "mtc.node_id": ray.get_runtime_context().get_node_id(),
            tracking.MACHINE_TAG: tracking.machine_description()}
    earlier = tracking.earlier_runs(client, job.experiment_id, job.parent_id, trials[0].label)
    done, fitted = [], []
    # BLAS and OpenMP threads limited once per batch, not per seed: finding the loaded libraries
    # takes threadpoolctl about 2.4 ms, a tenth of a small fit (docs/results/README.md)
    with threadpool_limits(limits=cpus):
        for trial in trials:
            metrics = tracking.skip_or_clear(client, earlier.get(trial.key, []))
            if metrics is None:
                fitted.append(fit_trial(job, trial, tags))
            else:
                done.append(metrics)
    written, lost = write_fitted(client, job, fitted)
    done += written
    scores = [metrics for metrics in done if metrics is not None]
    tune.report({"acc_mean": float(np.mean([m.get("acc/mean", float("nan")) for m in scores])) if scores else float("nan"),
                 "objective_final": float(np.mean([m["objective/final"] for m in scores])) if scores else float("nan"),
                 "seeds": len(scores), "failed_seeds": len(done) - len(scores) + len(lost), "lost_seeds": len(lost),
                 "degenerate_seeds": sum(m.get("degenerate_tasks", 0) > 0 for m in scores),
                 "lost_error": lost[0] if lost else ""})


def write_fitted(client, job: SweepJob, fitted: list) -> tuple[list, list[str]]:
    """Write a batch's fitted runs ((record, metrics) pairs); returns the metrics of the seeds
    written and, when they could not be written (a full disk, a store that refuses writes: the
    seeds have no result and the sweep will be incomplete), the error line once per seed.
    Nothing is written, and nothing counted, when the driver has closed the parent run."""
    try:
        run_writer.write_runs(client, job.experiment_id, job.parent_id, [record for record, _ in fitted],
                              WORKER_CACHES.stores)
    except run_writer.ParentClosed:
        return [], []
    except Exception as error:
        return [], [full_disk(error) or error_line(error)] * len(fitted)
    return [metrics for _, metrics in fitted], []


def quiet_store_errors() -> None:
    """MLflow's SQL store logs every failed write (a full disk: each trial's) with its traceback
    before raising it; the driver and its workers record each once (write_fitted: the Tune
    trial's lost_error; the driver's one line)."""
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)


def steps_folder(cache_dir: str | None) -> Path:
    """Where a worker's cache keeps the results it persists (mtc.numerics.cache): ``steps/`` in
    the processed-data cache folder."""
    from mtc.data.cache import cache_dir as processed_dir

    return processed_dir(cache_dir) / "steps"


@dataclass(frozen=True)
class WorkerCaches:
    """What a worker process keeps between its trials (Ray reuses a worker for many): the
    solvers' seed-independent steps (``cache`` parameters, mtc.numerics.cache; the k-means
    labels of their seedings also as files in the sweep's steps_folder), the heatmap
    frames of readable trial files (mtc.results.plots.block_heatmap) and, per tracking URI,
    the SQL store the runs are written to (one engine) or whether its server takes batches."""

    fits: Cache = field(default_factory=lambda: Cache(size=2))
    figures: Cache = field(default_factory=lambda: Cache(size=4))
    stores: dict = field(default_factory=dict)  # per tracking URI: SQL store, server's batch route (run_writer)


WORKER_CACHES = WorkerCaches()  # the only state a worker process keeps between trials


def fit_trial(job: SweepJob, trial: Trial, tags: dict) -> tuple[run_writer.RunRecord, dict | None]:
    """Fit one (grid point, seed) with the BLAS threads its caller allows (sweep_trainable: the
    Tune trial's CPUs); returns its child run record (started at the fit's start) and its
    metrics, or a FAILED record and None when the fit raised (a result of the method, recorded
    with its error)."""
    from mtc.trial import run_trial

    start_ms = int(time.time() * 1000)
    try:
        outcome = run_trial(job.datasets[trial.seed], job.prototype, trial, WORKER_CACHES.fits, job.points,
                            job.shared_fits.get(trial.key))
    except Exception as error:
        return tracking.failed_record(job.parent_id, trial, tags, start_ms, error), None
    config = trial_params(job.method, job.prototype, trial, job.data_config)
    names = job.datasets[trial.seed].task_names
    from mtc.results.plots import readable_files  # matplotlib: not imported by a driver that has nothing to draw

    readable = (lambda folder: readable_files(folder, outcome, config, names, WORKER_CACHES.figures))
    record = tracking.trial_record(job.parent_id, trial, tags, start_ms, outcome, config, names,
                                   readable if job.readable else None)
    return record, outcome.metrics


def error_line(error: BaseException) -> str:
    """An error in one line: its type and the first line of its message."""
    first = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {first}"[:500]


RAY_TEMP_PREFIX = "mtc-ray-"  # + the driver's pid and a token; a killed driver's folder is removed by the next sweep
RAY_MARK = "MTC_RAY_FOLDER"  # in the environment of every process of a local Ray session: its temp folder


RAY_FOLDER = re.compile(rb"(/[^\0 ]*?/" + RAY_TEMP_PREFIX.encode() + rb"\d+-[0-9a-f]{8})(?![0-9a-f])")


def ray_processes() -> dict[int, str]:
    """{pid: Ray temp folder} of this user's processes of the local Ray sessions that drivers
    started (ray_temp_folder), their drivers alive or not: a process whose environment holds
    RAY_MARK, or one of Ray's (a ``ray::`` title or a Ray program) that names such a folder in
    its arguments or holds a file in it open (its logs: Ray retitles its agents and workers,
    overwriting their arguments and part of their environment)."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if proc.stat().st_uid != os.getuid():
                continue
            cmdline = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        marked = next((entry.split(b"=", 1)[1] for entry in environ.split(b"\0")
                       if entry.startswith(f"{RAY_MARK}=".encode())), None)
        if marked is None and (cmdline.startswith(b"ray::") or b"/ray/" in cmdline):
            named = RAY_FOLDER.search(cmdline)
            if named is None:
                with contextlib.suppress(OSError):
                    for fd in (proc / "fd").iterdir():
                        with contextlib.suppress(OSError):
                            named = RAY_FOLDER.search(os.readlink(fd).encode())
                            if named:
                                break
            marked = named.group(1) if named else None
        if marked:
            found[int(proc.name)] = marked.decode(errors="replace")
    return found


def remove_dead_drivers_ray_folders() -> None:
    """End the Ray processes of local sessions whose driver is gone (killed: its own clean-up
    never ran, and Ray's agents outlive the raylet that died with it), and remove their Ray temp
    folders here. A live driver holds the file lock beside its folder (ray_temp_folder); the
    kernel releases it when the driver dies. A lock, not the pid in the name: a driver in
    another PID namespace (a container sharing /tmp) has no /proc entry here. Their processes
    are found wherever their folder is (ray_processes: another TMPDIR too); a folder elsewhere,
    and its lock file, are left as they are (its own TMPDIR's next sweep removes them)."""
    marked: dict[str, list[int]] = {}
    for pid, folder in ray_processes().items():
        marked.setdefault(folder, []).append(pid)
    here = {str(folder) for folder in Path(tempfile.gettempdir()).glob(f"{RAY_TEMP_PREFIX}*-*") if folder.is_dir()}
    for folder in sorted(here):
        lock = Path(f"{folder}.lock")
        fd, _ = locks.take_or_free(lock)
        if fd is None:
            continue  # its driver is alive
        try:
            end_processes(marked.get(folder, []), grace=0)  # their session is dead: nothing to close in order
            shutil.rmtree(folder, ignore_errors=True)
        finally:
            locks.release(lock, fd)
    for folder in sorted(set(marked) - here):
        with contextlib.suppress(OSError):  # a folder not ours to read
            if not locks.held_by_another(Path(f"{folder}.lock")):
                end_processes(marked[folder], grace=0)


@contextlib.contextmanager
def ray_temp_folder():
    """A fresh temp folder for a local Ray session, held (a file lock beside it) while in use;
    afterwards the processes its session left (ray_processes: none after a clean ray.shutdown)
    are ended and the folder removed (Ray's session folders pile up otherwise)."""
    folder = Path(tempfile.gettempdir()) / f"{RAY_TEMP_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    # held before the folder exists: no sweep's clean-up can take it
    with locks.held(Path(f"{folder}.lock"), f"the Ray temp folder {folder} is in use (pid {{pid}})"):
        folder.mkdir()
        try:
            yield str(folder)
        finally:
            end_processes([pid for pid, used in ray_processes().items() if used == str(folder)], grace=1.0)
            shutil.rmtree(folder, ignore_errors=True)


def session_processes(folder: str) -> dict[int, int | None]:
    """{pid: start time} of the processes of the local Ray session in ``folder`` (ray_processes).
    Taken before Ray's shutdown, while Ray's agents still hold their logs in the folder open:
    shutting down they close them, and can linger a few seconds on a loaded machine naming
    nothing that ray_processes reads (Ray overwrote their environment with their title)."""
    return {pid: locks.start_time(pid) for pid, used in ray_processes().items() if used == folder}


def end_seen_processes(seen: dict[int, int | None]) -> None:
    """End those of the ``seen`` processes still running after Ray's shutdown (the same process:
    the same start time, not a later one given a freed pid)."""
    end_processes([pid for pid, started in seen.items() if started is not None and locks.start_time(pid) == started
                   and locks.alive(pid)], grace=1.0)


@dataclass(frozen=True)
class KeptRay:
    """A local Ray session left running after its sweep for the next sweeps of the same Python
    process (mtc.sweep.run: a notebook pays Ray's start once): what it was started with
    (local_resources), its node's id and what stops it (Ray's shutdown, then its temp folder)."""

    resources: tuple
    node_id: str
    stack: contextlib.ExitStack = field(repr=False, compare=False)


KEPT_RAY: list[KeptRay] = []  # the process's kept local Ray session, if any (at most one)


def local_resources(run: Settings, worker_env: dict) -> tuple:
    """What a local Ray session is started with: its CPUs, its object store and its workers'
    environment; a kept session serves a sweep asking the same, and is restarted otherwise."""
    return run.ray.num_cpus, run.ray.object_store_memory, tuple(sorted(worker_env.items()))


# Ray's raylet starts a worker per CPU when the driver connects, without the job's runtime
# environment (Ray's own start, not DIES_WITH_ITS_RAYLET): no trial can use them (they end idle
# while the trials' workers start), and a driver killed meanwhile left them for 10-25 s.
# ray.init gets a copy: Ray writes into the dict it is given (Node.validate_external_storage adds
# object_spilling_config, naming the session's folder), and a later ray.init given the same dict
# spilled into the earlier session's folder, recreating it after its removal (ray_temp_folder)
LOCAL_RAY_SETTINGS = {"prestart_worker_first_driver": False}


def start_local_ray(run: Settings, worker_env: dict, stack: contextlib.ExitStack) -> None:
    """Start Ray here in a fresh temp folder, every process it starts marked with it (RAY_MARK);
    closing ``stack`` stops it, ends what it left, then removes the folder. Dead drivers' Ray
    processes and folders go first (remove_dead_drivers_ray_folders)."""
    import ray

    remove_dead_drivers_ray_folders()
    temp_dir = stack.enter_context(ray_temp_folder())
    seen: dict[int, int | None] = {}
    stack.callback(end_seen_processes, seen)  # closed in reverse: seen, Ray's shutdown, these, the folder
    stack.callback(ray.shutdown, wait_for_processes=True)  # before the temp folder goes
    stack.callback(lambda: seen.update(session_processes(temp_dir)))
    os.environ[RAY_MARK] = temp_dir
    try:
        moment("ray")
        with ray_processes_in_a_group_of_their_own():
            ray.init(address="local", num_cpus=run.ray.num_cpus, object_store_memory=run.ray.object_store_memory,
                     include_dashboard=False, log_to_driver=True,
                     runtime_env=worker_runtime_env(worker_env, local=True), _temp_dir=temp_dir,
                     _system_config=dict(LOCAL_RAY_SETTINGS))
    finally:
        os.environ.pop(RAY_MARK, None)
    moment("ray-started")


def stop_kept_ray() -> None:
    """Stop the local Ray session kept for this process's next sweeps, if any, and remove its
    temp folder; registered with atexit when a session is kept."""
    while KEPT_RAY:
        KEPT_RAY.pop().stack.close()


def keep_local_ray(run: Settings, worker_env: dict) -> None:
    """A local Ray session kept running after the sweep (stop_kept_ray, at the latest at
    interpreter exit): the kept one when it is alive (no error or stop signal shut it down)
    and was started with the same resources, else a new one, the old one stopped first."""
    import ray

    resources = local_resources(run, worker_env)
    if KEPT_RAY and KEPT_RAY[0].resources == resources and ray.is_initialized() \
            and ray.get_runtime_context().get_node_id() == KEPT_RAY[0].node_id:
        return
    stop_kept_ray()
    stack = contextlib.ExitStack()
    try:
        start_local_ray(run, worker_env, stack)
    except BaseException:
        stack.close()
        raise
    KEPT_RAY.append(KeptRay(resources, ray.get_runtime_context().get_node_id(), stack))
    atexit.unregister(stop_kept_ray)  # registered once, and after Ray's own exit handler: runs before it
    atexit.register(stop_kept_ray)


@contextlib.contextmanager
def ray_session(run: Settings, worker_env: dict, keep: bool = False):
    """Ray started here (``ray.address=local``, in a temp folder removed afterwards) or joined;
    yields the cluster's CPU count. Failing to join is one line (UnreachableError). With
    ``keep`` (a sweep run from Python) a local Ray is kept running for the process's next
    sweeps (keep_local_ray); otherwise (the command line: one process, one sweep) Ray is
    stopped at the end, and a session kept by earlier sweeps is stopped first.

    Ray's start and its stop are not cut short by a stop signal (mtc.sweep.stopping.deferred:
    the signal is raised once Ray is up, or stopped), and Ray keeps the driver's signal
    handlers (ray_keeps_our_signal_handlers): ``ray.init`` sets a SIGTERM handler that exits
    at once and its core worker Abseil's, which prints a stack dump; a signal while ``ray.init``
    ran left Ray's agents running, aborted the driver (exit 134) or crashed it (exit 139).
    A joined cluster's head is watched (mtc.sweep.head_watch): lost, the driver ends with
    one line."""
    import ray

    stack = contextlib.ExitStack()
    try:
        with deferred(), ray_keeps_our_signal_handlers():
            if run.ray.local and keep:
                keep_local_ray(run, worker_env)
            else:
                stop_kept_ray()
                if run.ray.local:
                    start_local_ray(run, worker_env, stack)
                else:
                    stack.callback(ray.shutdown, wait_for_processes=True)
                    try:
                        ray.init(address=run.ray.address, runtime_env=worker_runtime_env(worker_env),
                                 logging_level="ERROR")
                    except (ConnectionError, RuntimeError, ray.exceptions.AuthenticationError) as error:
                        raise UnreachableError(join_error(run.ray.address, error)) from None
                    if not run.ray.address.startswith("ray://"):  # a Ray Client's driver runs on the head
                        stack.enter_context(watching_head(ray.get_runtime_context().gcs_address,
                                                          run.ray.head_lost_seconds))
            cpus = int(ray.cluster_resources().get("CPU", 1))
        yield cpus
    except BaseException as error:
        with deferred(ending=error):
            stack.close()
        raise
    with deferred():
        stack.close()


# How a local session's worker starts (its py_executable, which Ray's setup_worker.py runs as
# ``exec <py_executable> default_worker.py <args>`` in the process the raylet forked): it dies
# with the raylet (the parent-death signal, kept across exec), and a raylet already gone (the
# worker was reparented while Ray's setup imported) ends it at once; then default_worker.py runs
# as ``python default_worker.py`` would run it.
DIES_WITH_ITS_RAYLET = """\
import ctypes, os, runpy, sys
ctypes.CDLL(None, use_errno=True).prctl(1, ctypes.c_ulong(9))  # PR_SET_PDEATHSIG, SIGKILL
with open(f"/proc/{os.getppid()}/comm") as parent:
    if parent.read().strip() != "raylet":
        os._exit(1)
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(sys.argv[0])
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def worker_runtime_env(worker_env: dict, local: bool = False) -> dict:
    """The Ray workers' environment: the driver's variables, and the hook that lets a worker
    stopped by SIGTERM exit without a stray traceback (mtc.sweep.stopping).

    A ``local`` session's workers (Linux) die with their raylet (DIES_WITH_ITS_RAYLET), which
    dies with the driver: a driver killed (SIGKILL) while workers started left them for 10-25 s
    (their GcsClient waits twice 5 s for the GCS that is gone, ray._private.node.Node, before
    the core worker that would notice the raylet's death exists); a running worker's own check
    of its raylet took 1-2 s. A joined cluster's workers keep Ray's own start (the driver's Python
    path need not exist on its nodes; their raylet outlives the driver)."""
    env = {"env_vars": worker_env,
           "worker_process_setup_hook": "mtc.sweep.stopping.workers_exit_quietly_on_sigterm"}
    if local and sys.platform == "linux":
        env["py_executable"] = shlex.join([sys.executable, "-c", DIES_WITH_ITS_RAYLET])
    return env


def join_error(address: str, error: Exception) -> str:
    """One line for a failed ``ray.init(address=...)``."""
    if "InvalidAuthToken" in f"{error} {error.__cause__}" or "AuthenticationError" in type(error).__name__:
        return (f"the Ray cluster at {address} refused this driver's auth token; set RAY_AUTH_MODE=token and the "
                "cluster's token in RAY_AUTH_TOKEN (or ~/.ray/auth_token), as for every ray start (docs/cluster.md)")
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return (f"cannot join the Ray cluster at {address} ({first}); every ray command and this driver need the same "
            "RAY_AUTH_MODE (and token)")


def tune_batches(opened: list[OpenSweep], slots: int) -> dict[str, tuple[str, list[Trial]]]:
    """Every sweep's pending trials in seed batches (``sweep.seeds_per_trial``), keyed by the
    Tune trial's name ("<sweep> <point> seeds=<first>-<last>" when several sweeps share the
    Tuner): {name: (sweep name, trials)}. ``auto`` counts the pending trials of every sweep
    sharing the Tuner: a study keeps its slots busy across sweeps, so each of its sweeps
    batches as a long sweep would (each Tune trial costs about 0.1 s of Tune's bookkeeping).
    Consecutive batches fit their seeds in staggered orders (mtc.config.staggered)."""
    batches = {}
    pending = sum(len(sweep.pending) for sweep in opened)
    for sweep in opened:
        settings_ = sweep.plan.run.sweep
        size = seeds_per_trial(settings_.seeds_per_trial, pending, settings_.repeats, slots,
                               len({trial.label for trial in sweep.pending}))
        for name, trials in seed_batches(sweep.pending, size).items():
            batches[f"{sweep.plan.name} {name}" if len(opened) > 1 else name] = (
                sweep.plan.name, staggered(trials, len(batches), slots))
    return batches


def run_on_ray(opened: list[OpenSweep], cpus: int, name: str, storage: Path, run: Settings,
               finisher=None) -> TunerOutcome:
    """Run the pending trials of every sweep in one Ray Tune Tuner (trials of different sweeps
    share the workers); ``run`` gives the Tune settings (CPUs per trial, concurrency,
    retries, verbosity). A ``finisher`` (mtc.sweep.finishing.Finisher, a study's) reports
    each sweep whose trials have all ended while the Tuner runs the others."""
    import ray
    from ray import tune

    from mtc.sweep.progress import ProgressLine

    sweep = run.sweep
    slots = cpus // sweep.cpus_per_trial
    if slots < 1:
        raise InputError(f"sweep.cpus_per_trial={sweep.cpus_per_trial} but the Ray cluster has {cpus} CPU(s)")
    if sweep.max_concurrent_trials:
        slots = min(slots, sweep.max_concurrent_trials)
    batches = tune_batches([o for o in opened if o.pending], slots)
    if not batches:
        return TunerOutcome()
    # Each Tune trial unpickles what with_parameters holds: the batches' trials go with their
    # sweep's job, so a Tune trial reads its own sweep's, not every sweep's (110 ms for the
    # 16,800 trials of SMT-NMF's Table 5 protocol, for each of its 560 Tune trials)
    owners = {key: owner for key, (owner, _) in batches.items()}
    jobs = {o.plan.name: ray.put(sweep_job(o, {key: trials for key, (owner, trials) in batches.items()
                                               if owner == o.plan.name}))
            for o in opened if o.pending}
    if sweep.verbose:  # else a sweep prints its start and its result line (report_done), a study its sweeps'
        print(f"{sum(len(t) for _, t in batches.values())} trials in {len(batches)} Ray Tune trials, {slots} at a time")
    trainable = tune.with_parameters(sweep_trainable, jobs=jobs, owners=owners)
    trainable = tune.with_resources(trainable, {"cpu": sweep.cpus_per_trial})

    def fit(keys: list[str], tune_name: str, *callbacks) -> list:
        """The Tune trials of ``keys`` in one Tuner, under one progress line; their Results."""
        progress = None if sweep.verbose else ProgressLine(
            {key: len(batches[key][1]) for key in keys}, tune_name,
            {key: owners[key] for key in keys} if len(jobs) > 1 else None,
            runs_again=any(isinstance(callback, StrandedTrials) for callback in callbacks))
        tuner = tune.Tuner(
            trainable,
            param_space={"batch": tune.grid_search(keys)},
            tune_config=tune.TuneConfig(reuse_actors=True, max_concurrent_trials=sweep.max_concurrent_trials),
            run_config=tune.RunConfig(name=tune_name, storage_path=str(storage), verbose=sweep.verbose,
                                      callbacks=[c for c in (progress, *callbacks) if c is not None],
                                      failure_config=tune.FailureConfig(max_failures=sweep.max_failures,
                                                                        fail_fast=False)),
        )
        try:
            return list(tuner.fit())
        finally:
            if progress:
                progress.close()

    if finisher is not None:
        finisher.expect(owners)
    # Ctrl-C raises KeyboardInterrupt here instead of Tune's own handler, which would end
    # the Tuner quietly and let a partial sweep be reported as finished.
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    # No Tune result.json, progress.csv or TensorBoard events per trial: MLflow holds every
    # result, and the TensorBoard writer's thread could print a traceback at exit. The
    # ResultGrid then warns that it found no such files for the trials; only its metrics
    # (the last result, in memory) are read.
    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"
    logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)
    full_disk_in_one_line("ray.tune.execution.experiment_state", "Ray Tune could not save its experiment state: "
                          "{cause}; nothing here reads it (every result is in MLflow)")
    if not sweep.verbose:  # Tune's newer console output ignores verbose=0 (its config box, paths, INFO lines)
        os.environ["RAY_AIR_NEW_OUTPUT"] = "0"
        logging.getLogger("ray.tune").setLevel(logging.WARNING)
        for logger in ("ray.tune.execution.tune_controller", "ray.tune.tune"):  # the driver's line says why
            logging.getLogger(logger).addFilter(untold_trial_errors)
    start = time.perf_counter()
    stranded = StrandedTrials()
    results = fit(list(batches), name, finisher, stranded)
    errors = Counter(tune_error(result.error, sweep.max_failures) for result in results if result.error is not None)
    if stranded.batches:  # ended with retries left (mtc.sweep.stranded): run again, once; their sweeps are unclean
        print(f"{name}: {len(stranded.batches)} Ray Tune trial(s) ended with retries left (a worker that died while "
              "they waited for it): running them again once", file=sys.stderr, flush=True)
        again = fit(stranded.batches, f"{name} again")
        errors -= Counter({worker_died(sweep.max_failures): len(stranded.batches)})  # their first ends: a worker died
        errors += Counter(tune_error(result.error, sweep.max_failures) for result in again if result.error is not None)
        results += again
    lost = tuple(dict.fromkeys(result.metrics.get("lost_error") for result in results
                               if result.metrics and result.metrics.get("lost_error")))
    return TunerOutcome(time.perf_counter() - start, len(batches), errors.total(), lost, len(stranded.batches),
                        tuple(errors))


def untold_trial_errors(record: logging.LogRecord) -> bool:
    """A filter of Ray Tune's loggers at ``sweep.verbose=0``: without its "Trial task failed"
    tracebacks (one per failure and retry: 537 lines for a tracking server that stopped
    answering) and its "Trials did not complete" list; the progress line counts them, and the
    driver's one line says why (tune_error)."""
    return not record.getMessage().startswith(("Trial task failed", "Trials did not complete"))


def tune_error(error: BaseException, max_failures: int) -> str:
    """Why a Ray Tune trial ended in ERROR, in one line: what its trainable raised (a tracking
    server that did not answer named as such: server_unanswered), else its Ray worker died."""
    cause = getattr(error, "cause", None)  # Ray's RayTaskError holds what the task raised
    if isinstance(cause, Exception):
        return server_unanswered(cause) or error_line(cause)
    return worker_died(max_failures)


def worker_died(max_failures: int) -> str:
    """Why Ray Tune trials ended in ERROR when their Ray worker died, in words."""
    return f"their Ray worker died and its retries (sweep.max_failures={max_failures}) ran out"


def abandon(opened: OpenSweep, error: BaseException, trials_total: int) -> str:
    """Close a sweep that its driver leaves: reported (finish_sweep, the parent FINISHED) when a
    stop signal finds every planned trial with a FINISHED run, so that the same command counts
    it finished; else, or if its report fails, the unfinished child runs and the parent KILLED
    (a stop signal) or FAILED (an error). Returns how far it got."""
    status = "KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED"
    how = as_stopped(error).how if status == "KILLED" else f"the sweep's driver failed ({error_line(error)})"
    client, parent = opened.client, opened.parent_id
    runs = child_runs(opened)
    done = sum(run.info.status == "FINISHED" for run in runs)  # closing leaves FINISHED runs as they are
    if status == "KILLED" and not lost_trials(opened, [run for run in runs if run.info.status == "FINISHED"]):
        with contextlib.suppress(Exception):  # else closed KILLED below; the same command reports it
            finish_sweep(opened)
            return f"{trials_total} of {trials_total} trials finished (MLflow parent run {parent}, FINISHED: reported)"
    tracking.close_unfinished(client, runs, status, f"{how}; run the same command again to resume")
    client.set_terminated(parent, status)
    return f"{done} of {trials_total} trials finished (MLflow parent run {parent}, {status})"


def leave(opened: list[OpenSweep], error: BaseException) -> BaseException:
    """What a driver does when a stop signal or an error ends its sweeps: stop Ray first (a live
    worker would otherwise start its next seed while the runs are closed, and leave it
    RUNNING), then close each sweep's runs (abandon), a further stop signal notwithstanding.
    Returns what to raise: SweepInterrupted (one line: how far each sweep got, how to resume)
    for a stop signal, else the error."""
    with shielded():
        ray = sys.modules.get("ray")
        try:
            stop_kept_ray()  # a kept session too: the next sweep starts a fresh one
            if ray is not None and ray.is_initialized():
                ray.shutdown(wait_for_processes=True)
        finally:  # the runs are closed even if Ray's shutdown fails
            where = [(o.plan.name, abandon(o, error, len(o.plan.trials))) for o in opened]
    if not isinstance(error, KeyboardInterrupt):
        return error
    stop = as_stopped(error)
    counts = where[0][1] if len(where) == 1 else "; ".join(f"{name}: {text}" for name, text in where) \
        or "every sweep had been reported"
    return SweepInterrupted(f"{stop.how}: {counts}; run the same command again to resume: finished trials are kept, "
                            "the others run again", stop.exit_code)


def child_runs(opened: OpenSweep) -> list:
    """The sweep's child runs, as the store holds them now."""
    return tracking.find_runs(opened.client, opened.experiment_id, **{tracking.PARENT_TAG: opened.parent_id})


def lost_trials(opened: OpenSweep, runs: list) -> dict[str, str]:
    """The planned trials that have no result, {trial key: why}: no run (their Ray worker died
    before writing it, or their batch's runs could not be written: the Tune trial's
    lost_error says which), or a run that is FAILED for a reason other than its fit (tag
    LOST_TAG: its worker died with the run open, on a tracking server)."""
    result = {}
    for run in runs:
        key = run.data.tags.get(tracking.TRIAL_KEY_TAG)
        if run.info.status == "FINISHED" or (run.info.status == "FAILED" and LOST_TAG not in run.data.tags):
            result[key] = ""
        else:
            result.setdefault(key, run.data.tags.get(LOST_TAG, run.info.status))
    return {trial.key: result.get(trial.key, "no run") for trial in opened.plan.trials if result.get(trial.key) != ""}


def incomplete_message(opened: OpenSweep, lost: dict[str, str], tuner: TunerOutcome) -> str:
    """One line: how many trials of the sweep have no result, why (a full disk named by its
    folder), and how to run them."""
    max_failures = opened.plan.run.sweep.max_failures
    causes = list(dict.fromkeys([*tuner.lost, *(why for why in lost.values() if why not in ("no run", "RUNNING"))]))
    full = [c for c in causes if c.startswith(os.strerror(errno.ENOSPC).lower()) or "disk is full" in c]
    if full:
        causes = [f"{full[0].split(' writing ')[0]}: {', '.join(full_folders(opened.plan.run)) or 'a full disk'}"]
    causes += tuner.errors
    if "no run" in lost.values() and not tuner.lost and not tuner.errors:  # else their runs could not be written
        causes.append(worker_died(max_failures))
    why = "; ".join(causes[:2]) or "their runs did not finish"
    return (f"sweep {opened.plan.name}: {len(lost)} of {len(opened.plan.trials)} trials have no result ({why}); "
            f"MLflow parent run {opened.parent_id} is FAILED; "
            + ("free disk space, then " if full else "") + "run the same command again to run them")


def no_finished_trial_message(opened: OpenSweep, runs: list, closing: bool) -> str:
    """One line for a sweep without a finished trial: how many failed in their fit, the first
    (earliest) error, and, when the parent is being closed (``closing``), that it is FAILED."""
    failed = sorted((run for run in runs if run.data.tags.get("mtc.error")), key=lambda run: run.info.start_time)
    first = failed[0].data.tags["mtc.error"].splitlines()[0][:300] if failed else "none recorded"
    return (f"sweep {opened.plan.name}: no trial finished, {len(failed)} of {len(opened.plan.trials)} failed in "
            f"their fit (first error: {first}); "
            + (f"MLflow parent run {opened.parent_id} is FAILED; " if closing else "")
            + "fix the cause, then run the same command again")


def finish_sweep(opened: OpenSweep, tuner: TunerOutcome = TunerOutcome(), ray_started: bool = False,
                 log: bool = True) -> SweepResult:
    """Read the sweep's runs back, write its report (report.md, grid.csv) and, with ``log``,
    log it to the parent run with the convergence figures of the chosen points and the
    best-point summary, and mark the parent FINISHED. A sweep with planned trials that have
    no result (lost_trials), or whose every trial failed in its fit, gets no report: its parent
    is FAILED and SweepIncomplete raised (a study reports its other sweeps).
    Data without labels is reported and summarised by the label-free choices only (no accuracy
    point, no figure by accuracy)."""
    plan, client, parent_id, experiment_id = opened.plan, opened.client, opened.parent_id, opened.experiment_id
    run, out = plan.run, plan.output_dir
    dataset = plan.datasets[0]
    max_failures = run.sweep.max_failures
    died = (f"the trial's Ray worker died and its retries (sweep.max_failures={max_failures}) ran out; see the Ray "
            "logs")
    runs = child_runs(opened)  # one search: a sweep's runs load every latest metric (0.4 s for 150 trials)
    closed = tracking.close_unfinished(client, runs, "FAILED", died)
    for run_id in closed:
        client.set_tag(run_id, LOST_TAG, died)
    if closed:
        runs = child_runs(opened)
    lost = lost_trials(opened, runs)
    if lost and log:  # fewer trials ran than were planned: no report, and the sweep is not FINISHED
        message = incomplete_message(opened, lost, tuner)
        client.set_tag(parent_id, "mtc.error", message[:5000])
        client.set_terminated(parent_id, "FAILED")
        raise SweepIncomplete(message)
    records = records_of(runs)
    if not any(record.status == "FINISHED" for record in records):  # nothing to report or choose
        message = no_finished_trial_message(opened, runs, log)
        if log:
            client.set_tag(parent_id, "mtc.error", message[:5000])
            client.set_terminated(parent_id, "FAILED")
        raise SweepIncomplete(message)
    summaries = point_summaries(client, records, dataset.task_names, same_data=run.data.draw != "per_seed")
    markdown = report_markdown(f"{run.method.name} on {run.data.name}", summaries, dataset.task_names,
                               data_note(run.data.draw, plan.datasets), labelled=dataset.labelled,
                               method=run.method.name, left_out=plan.unrunnable)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "report.md", markdown)
    write_text(out / "grid.csv", grid_csv(summaries))
    best = chosen_points(summaries)
    if log:
        from mtc.results.plots import log_convergence_figure

        client.log_artifact(parent_id, str(out / "report.md"))
        client.log_artifact(parent_id, str(out / "grid.csv"))
        shown = run.sweep.label if run.sweep.label != run.method.name else \
            method_display_names().get(run.method.name, run.method.name)  # the paper's name; a variant its label
        drawn = {}  # point -> its figure: the two selections often choose the same point
        for selection in (s for s in ("acc", "objective") if s in best):
            point, path = best[selection].point, out / f"convergence_best_by_{selection}.png"
            if point in drawn:
                shutil.copyfile(drawn[point], path)
                client.log_artifact(parent_id, str(path))
                continue
            runs = {f"seed {r.seed}": (r.run_id, r.artifact_uri) for r in records
                    if r.point == point and r.status == "FINISHED"}
            log_convergence_figure(client, parent_id, runs, path, f"{shown} on {run.data.name}, {point}")
            drawn[point] = path
        tracking.log_sweep_summary(client, parent_id, best, sum(s.n_failed for s in summaries), markdown,
                                   run.method.grid, plan.unrunnable)
        logged = set().union(*(summary.mean for summary in summaries))
        tracking.log_trials_view(client, experiment_id, parent_id, sort_metric(best),
                                 [*sorted(run.method.grid), "seed"], [key for key in VIEW_METRICS if key in logged])
        if sum(r.status == "FINISHED" for r in records) == len(plan.trials):
            client.set_tag(parent_id, ALL_FINISHED_TAG, trials_digest(plan.trials))
        client.set_terminated(parent_id, "FINISHED")
    return SweepResult(parent_id, str(out), summaries, best, run.tracking.uri, experiment_id, len(opened.pending),
                       markdown, tuner, ray_started)


def write_text(path: Path, text: str) -> None:
    """``path.write_text``, naming the file when it fails (the OSError of a failed write, a full
    disk's ENOSPC, names none)."""
    try:
        path.write_text(text)
    except OSError as error:
        raise OSError(error.errno, error.strerror, str(path)) from error


def reopen_finished(plan: SweepPlan, client, experiment_id: str) -> OpenSweep | None:
    """The sweep as stored when every one of its trials already has a FINISHED run (nothing to
    run: no Ray is needed), else None."""
    parent = stored_parent(client, experiment_id, plan)
    if not all_trials_finished(client, experiment_id, parent, plan):
        return None
    return OpenSweep(plan, client, experiment_id, parent.info.run_id, [], len(plan.trials))


def store_has_experiment(store: TrackingSettings) -> bool:
    """Whether the store already holds the experiment (a new store or experiment holds no
    finished sweep); asks without creating anything, so a sweep that cannot start Ray leaves
    no store behind."""
    if store.uri.startswith("sqlite:///") and not Path(store.uri[len("sqlite:///"):]).is_file():
        return False
    return tracking.client_for(store.uri).get_experiment_by_name(store.experiment) is not None


def complete(opened: OpenSweep, tuner: TunerOutcome, ray_started: bool) -> SweepResult:
    """finish_sweep; a stop signal or an error closes the sweep's runs instead (leave), and an
    incomplete sweep (its parent already FAILED) is raised as it is."""
    try:
        moment("report")
        return finish_sweep(opened, tuner, ray_started)
    except SweepIncomplete:
        raise
    except BaseException as error:
        raise leave([opened], error) from None


def run_sweep(run: Settings, plan: SweepPlan | None = None, keep_ray: bool = False,
              full_report: bool = True) -> SweepResult:
    """Run (or resume) a sweep; returns its SweepResult. ``plan``: the sweep's plan when the
    caller made it (mtc.sweep.command), its data not loaded or drawn again. ``keep_ray``: a
    local Ray is left running for the process's next sweep (mtc.sweep.run; ray_session),
    instead of being started and stopped for this one. ``full_report``: print the report (the
    paper-style table) and the links at the end, as the command line does; False (a notebook's
    ``mtc.sweep.run`` at ``sweep.verbose=0``): one result line.

    Before anything is created the Ray address, the output folder and the tracking store are
    checked (mtc.store.preflight); the data is loaded; the driver takes its locks (mtc.store.locks): one
    live driver per sweep, one live sweep per SQLite store. A sweep whose trials all finished
    is reported from the store without starting Ray (the command line, mtc.sweep.command, first
    looks for the report its driver logged). Otherwise Ray is started or joined
    before any MLflow run is created. SIGINT, SIGTERM and SIGHUP raise Stopped meanwhile
    (stop_signals); once runs exist, Ray is stopped and the runs closed KILLED (leave).

    Raises
    ------
    SweepInterrupted
        A stop signal ended the sweep; its runs are closed KILLED.
    SweepIncomplete
        Some planned trials have no result; the parent run is FAILED.
    """
    with stop_signals():
        return drive(run, plan, keep_ray, full_report)


def drive(run: Settings, plan: SweepPlan | None = None, keep_ray: bool = False,
          full_report: bool = True) -> SweepResult:
    worker_env = preflight.process_env()
    run = replace(run, ray=replace(run.ray, address=preflight.check_ray(run.ray.address)))  # auto: the cluster checked
    preflight.check_tracking(run.tracking.uri)
    plan = replace(plan, run=run) if plan is not None else plan_sweep(run)
    moment("data")
    plan = check_plan(plan)  # a rerun of a finished sweep reports from its data too
    plan.output_dir.mkdir(parents=True, exist_ok=True)
    verbose = run.sweep.verbose
    full = full_report or bool(verbose)
    with locks.driver_locks(plan.output_dir, plan.name, run.tracking.uri):
        stored = None
        if store_has_experiment(run.tracking):
            client, experiment_id = tracking.open_store(run.tracking.uri, run.tracking.experiment,
                                                        run.tracking.artifact_root)
            stored = reopen_finished(plan, client, experiment_id)
        if stored is not None:
            remove_dead_drivers_ray_folders()  # as a sweep that starts Ray does: a killed driver's agents go
            parent_done = client.get_run(stored.parent_id).info.status == "FINISHED"
            if verbose:  # else its one line says so
                print(f"sweep {plan.name}: all {len(plan.trials)} trials already finished, MLflow parent run "
                      f"{stored.parent_id}; reported from the store (no Ray)")
            if not parent_done:  # its report was interrupted: written now, the parent closed FINISHED
                return report_done(complete(stored, TunerOutcome(), False), full)
            try:  # a re-report writes nothing to the store: its parent stays FINISHED whatever stops it
                return report_done(finish_sweep(stored, log=False), full)
            except KeyboardInterrupt as error:
                stop = as_stopped(error)
                raise SweepInterrupted(f"{stop.how} while reporting the finished sweep {plan.name} again; its MLflow "
                                       f"parent run {stored.parent_id} stays FINISHED", stop.exit_code) from None
        finished = None
        try:
            # a driver of the same sweep on another machine sees it taken (a server or database store): before Ray
            with leased_store(run.tracking, {plan.key: plan.name}) as store, \
                    ray_session(run, worker_env, keep_ray) as cpus:
                client, experiment_id = store()
                opened = None
                try:
                    with deferred():  # the runs are created whole, then a stop signal closes them
                        opened = open_sweep(plan, client, experiment_id)
                    moment("trials")
                    tuner = run_on_ray([opened], cpus, plan.name, plan.output_dir / "ray_results", run)
                except BaseException as error:  # a stop signal (no report) or an error: Ray stopped, the runs closed
                    if opened is None:
                        raise
                    raise leave([opened], error) from None
                finished = complete(opened, tuner, True)
                moment("finished")
            return report_done(finished, full)
        except KeyboardInterrupt as error:  # Ray stopping, or the report printed: the sweep is FINISHED
            if finished is None:
                raise
            raise stopped_after(as_stopped(error), f"sweep {plan.name} finished", finished) from None


def stopped_after(stop, what: str, result: SweepResult) -> SweepInterrupted:
    """A stop signal once a sweep (or a study's sweeps) had finished, in one line."""
    return SweepInterrupted(f"{stop.how} after {what}: MLflow parent run {result.parent_run_id} is FINISHED, its "
                            f"report {Path(result.output_dir) / 'report.md'}", stop.exit_code)


@contextlib.contextmanager
def leased_store(store: TrackingSettings, sweeps: dict[str, str]):
    """A server or database store opened and its sweeps (``{key: name}``) leased
    (locks.server_lease) before Ray starts: a driver refused by a live lease starts no Ray.
    Yields a function that returns (client, experiment id) once Ray has started: the lease
    confirmed (its settling wait overlaps Ray's start), or for a SQLite store, whose file lock
    is its lease, the store opened then (a sweep that cannot start Ray leaves no store behind)."""
    if store.uri.startswith("sqlite:///"):
        yield lambda: tracking.open_store(store.uri, store.experiment, store.artifact_root)
        return
    client, experiment_id = tracking.open_store(store.uri, store.experiment, store.artifact_root)
    lease = contextlib.ExitStack()
    try:
        with deferred():  # a lease written is released, a stop signal notwithstanding
            confirm = lease.enter_context(locks.server_lease(client, experiment_id, sweeps, store.uri,
                                                             confirm_later=True))

        def opened():
            confirm()
            return client, experiment_id

        yield opened
    except BaseException as error:
        with deferred(ending=error):
            lease.close()
        raise
    with deferred():
        lease.close()


def sort_selection(best: dict) -> str:
    """The selection whose metric a sweep's trials are sorted by in MLflow: accuracy when the
    data has labels (an accuracy point was chosen), else the silhouette."""
    return "acc" if "acc" in best else "silhouette"


def sort_metric(best: dict) -> str:
    """The metric of sort_selection (``acc/mean`` or ``silhouette/mean``)."""
    return CRITERIA[sort_selection(best)][0]


def result_line(result: SweepResult) -> str:
    """A finished sweep in one line: its trials (or that all had finished before), its best
    point by sort_metric, its report and the link to its trials in MLflow."""
    metric, best = sort_metric(result.best), result.best.get(sort_selection(result.best))
    trials = sum(summary.n_runs + summary.n_failed for summary in result.summaries)
    done = "" if result.trials_run or result.ray_started else " (all already finished, no Ray)"
    chosen = f", best {metric} {best.mean[metric]:.4f} at {best.point}" if best is not None else ""
    _, how = tracking.ui_base(result.tracking_uri)
    return (f"sweep {Path(result.output_dir).name}: {trials} trials{done}{chosen}; report "
            f"{Path(result.output_dir) / 'report.md'}; MLflow trials: "
            f"{tracking.trials_link(result.tracking_uri, result.experiment_id, result.parent_run_id)}{how}")


def report_done(result: SweepResult, full: bool = True) -> SweepResult:
    """Print a finished sweep: its report, where it was written and the MLflow links, or
    without ``full`` (a notebook at ``sweep.verbose=0``) one line (result_line)."""
    if not full:
        print(result_line(result))
        return result
    print_report(result.markdown, Path(result.output_dir), result.tracking_uri, result.experiment_id,
                 result.parent_run_id, "acc" in result.best)
    return result
