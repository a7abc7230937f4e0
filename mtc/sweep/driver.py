"""The sweep: ``python -m mtc.sweep method=snmf data=synthetic``.

Hydra composes the config; mtc.config reads and checks all of it (every grid point against
the solver's constraints) before anything runs. The driver then checks that the Ray cluster, the output folder and
the tracking store can be used (mtc.store.preflight), takes its locks (mtc.sweep.locks), loads the
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

import contextlib
import logging
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import hydra
from omegaconf import DictConfig

from mtc.cli import CONF_DIR, exit_on_bad_input
from mtc.config import (
    Settings,
    TrackingSettings,
    Trial,
    method_display_names,
    seed_batches,
    seeds_per_trial,
    settings,
    stable_hash,
    trial_list,
)
from mtc.errors import InputError
from mtc.numerics.cache import Cache
from mtc.results.plots import log_convergence_figure, readable_files
from mtc.results.reading import chosen_points, point_summaries, trial_records
from mtc.results.report import (
    CRITERIA,
    PointSummary,
    data_note,
    grid_csv,
    report_markdown,
)
from mtc.store import preflight, tracking
from mtc.store.preflight import UnreachableError
from mtc.sweep import locks
from mtc.trial import trial_params


class SweepInterrupted(Exception):
    """Ctrl-C ended the sweep; the message says how far it got and how to resume."""


@dataclass(frozen=True)
class SweepPlan:
    """A checked sweep before anything is created: its settings, trials, data, output folder,
    the tags of its runs and its key (the parent run a resumed sweep finds)."""

    run: Settings
    trials: list[Trial]
    datasets: dict  # seed -> dataset (one shared object unless the data config draws per seed)
    output_dir: Path
    tags: dict
    key: str

    @property
    def name(self) -> str:
        return self.run.sweep.name


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


@dataclass(frozen=True)
class TunerOutcome:
    """The Ray Tune run of one or more sweeps' trials."""

    seconds: float = 0.0
    tune_trials: int = 0
    tune_errors: int = 0


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


def plan_sweep(run: Settings) -> SweepPlan:
    """Check the output folder and the artifact folder (mtc.store.preflight) and load the data; creates nothing."""
    sweep = run.sweep
    output_dir = sweep.output_dir / sweep.name
    preflight.check_writable(output_dir)
    if run.tracking.artifact_root and "://" not in run.tracking.artifact_root:
        preflight.check_writable(Path(run.tracking.artifact_root), "artifact folder", "mlflow.artifact_root")
    datasets = run.data.draws(range(sweep.repeats))
    tags = {**tracking.draws_tags(datasets), **tracking.provenance_tags("python -m mtc.sweep"),
            "mtc.method": run.method.name, "mtc.label": sweep.label, "mtc.data": run.data.name}
    # The name is part of the key: two sweeps of the same grid under different names (two
    # output folders, so two driver locks) must not resume into one parent run.
    key = stable_hash(sweep.name, run.method.name, run.method.params, run.method.grid, sweep.repeats,
                      run.data.resolved, tags[tracking.DATASET_HASH_TAG])
    return SweepPlan(run, trial_list(run.method, sweep.repeats), datasets, output_dir, tags, key)


def stored_parent(client, experiment_id: str, plan: SweepPlan):
    """The sweep's parent run if the store has one (resuming), else None; creates nothing."""
    if not plan.run.sweep.resume:
        return None
    existing = tracking.find_runs(client, experiment_id, **{tracking.SWEEP_KEY_TAG: plan.key})
    return existing[0] if existing else None


def all_trials_finished(client, experiment_id: str, parent, plan: SweepPlan) -> bool:
    """Whether every trial of the plan has a FINISHED child run under ``parent``."""
    if parent is None:
        return False
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
    print(f"sweep {plan.name}: {len(plan.trials)} trials ({len(finished)} already finished), "
          f"MLflow parent run {parent_id}")
    return OpenSweep(plan, client, experiment_id, parent_id, pending, len(finished))


def parent_params(run: Settings) -> dict:
    """The parent run's params: the resolved config with the seeds the sweep runs (``seeds``,
    "0-9" for ten repeats) in place of its ``seed``, the one seed of ``python -m mtc.run``,
    which no sweep uses."""
    repeats = run.sweep.repeats
    seeds = "0" if repeats == 1 else f"0-{repeats - 1}"
    return {**{key: value for key, value in run.resolved.items() if key != "seed"}, "seeds": seeds}


def sweep_job(opened: OpenSweep) -> SweepJob:
    run = opened.plan.run
    prototype = run.method.prototype(n_clusters=opened.plan.datasets[0].n_clusters)
    return SweepJob(opened.plan.datasets, prototype, run.method.name, run.data.resolved, run.tracking.uri,
                    opened.experiment_id, opened.parent_id, opened.plan.tags, run.tracking.readable_trial_files)


def sweep_trainable(config, *, jobs, batches):
    """One Ray Tune trial: a batch of seeds of one grid point of one sweep (``config["batch"]``
    names it in ``batches``: (sweep, trials); ``jobs`` maps each sweep to its SweepJob in Ray's
    object store). A seed whose earlier attempt FINISHED is skipped (a retried Tune trial: its
    worker died, killed, out of memory or node lost); each other seed is fitted, then its MLflow
    child run is created and logged in batched writes. A fit that raises gets a FAILED run (with
    the error) and the other seeds still run; it is not retried (a seeded fit fails the same way
    again)."""
    import numpy as np
    import ray
    from ray import tune

    sweep_id, trials = batches[config["batch"]]
    job = ray.get(jobs[sweep_id])
    client = tracking.client_for(job.tracking_uri)
    cpus = max(1, int(tune.get_context().get_trial_resources().required_resources.get("CPU", 1)))
    tags = {**job.run_tags, "mtc.node_id": ray.get_runtime_context().get_node_id()}
    earlier = tracking.earlier_runs(client, job.experiment_id, job.parent_id, trials[0].label)
    accuracies, objectives, failed = [], [], 0
    for trial in trials:
        metrics = tracking.skip_or_clear(client, earlier.get(trial.key, []))
        if metrics is None:
            metrics = fit_and_log(client, job, trial, cpus, tags)
        if metrics is None:
            failed += 1
        else:
            accuracies.append(metrics.get("acc/mean", float("nan")))
            objectives.append(metrics["objective/final"])
    tune.report({"acc_mean": float(np.mean(accuracies)) if accuracies else float("nan"),
                 "objective_final": float(np.mean(objectives)) if objectives else float("nan"),
                 "seeds": len(accuracies), "failed_seeds": failed})


@dataclass(frozen=True)
class WorkerCaches:
    """What a worker process keeps between its trials (Ray reuses a worker for many): the
    solvers' seed-independent steps (``cache`` parameters, mtc.numerics.cache) and the heatmap
    frames of readable trial files (mtc.results.plots.block_heatmap)."""

    fits: Cache = field(default_factory=lambda: Cache(size=2))
    figures: Cache = field(default_factory=lambda: Cache(size=4))


WORKER_CACHES = WorkerCaches()  # the only state a worker process keeps between trials


def fit_and_log(client, job: SweepJob, trial: Trial, cpus: int, tags: dict) -> dict | None:
    """Fit one (grid point, seed) with ``cpus`` BLAS threads, then create its child run (started
    at the fit's start) and log it; returns its metrics, or None when the fit or its logging
    raised (the run is then FAILED with the error)."""
    from threadpoolctl import threadpool_limits

    from mtc.trial import run_trial

    start_ms = int(time.time() * 1000)
    run = None
    try:
        with threadpool_limits(limits=cpus):
            outcome = run_trial(job.datasets[trial.seed], job.prototype, trial, WORKER_CACHES.fits)
        run = tracking.create_trial_run(client, job.experiment_id, job.parent_id, trial, tags, start_ms)
        config = trial_params(job.method, job.prototype, trial, job.data_config)
        names = job.datasets[trial.seed].task_names
        readable = (lambda folder: readable_files(folder, outcome, config, names, WORKER_CACHES.figures))
        tracking.log_trial(client, run.info.run_id, run.info.artifact_uri, outcome, config, names,
                           readable if job.readable else None)
    except Exception as error:
        if run is None:
            run = tracking.create_trial_run(client, job.experiment_id, job.parent_id, trial, tags, start_ms)
        tracking.fail_run(client, run.info.run_id, error)
        return None
    client.set_terminated(run.info.run_id, "FINISHED")
    return outcome.metrics


RAY_TEMP_PREFIX = "mtc-ray-"  # + the driver's pid: a killed driver's folder is removed by the next sweep


def remove_dead_drivers_ray_folders() -> None:
    """Remove the Ray temp folders of local sweeps whose driver is gone (killed: its own
    clean-up never ran)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{RAY_TEMP_PREFIX}*-*"):
        pid = folder.name[len(RAY_TEMP_PREFIX):].split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def ray_session(run: Settings, worker_env: dict):
    """Ray started here (``ray.address=local``, in a temp folder removed afterwards) or joined;
    yields the cluster's CPU count. Failing to join is one line (UnreachableError)."""
    import ray

    temp_dir = None
    try:
        if run.ray.local:
            remove_dead_drivers_ray_folders()
            temp_dir = tempfile.mkdtemp(prefix=f"{RAY_TEMP_PREFIX}{os.getpid()}-")
            ray.init(address="local", num_cpus=run.ray.num_cpus, object_store_memory=run.ray.object_store_memory,
                     include_dashboard=False, log_to_driver=True, runtime_env={"env_vars": worker_env},
                     _temp_dir=temp_dir)
        else:
            try:
                ray.init(address=run.ray.address, runtime_env={"env_vars": worker_env}, logging_level="ERROR")
            except (ConnectionError, RuntimeError, ray.exceptions.AuthenticationError) as error:
                raise UnreachableError(join_error(run.ray.address, error)) from None
        yield int(ray.cluster_resources().get("CPU", 1))
    finally:
        ray.shutdown()
        if temp_dir:
            shutil.rmtree(temp_dir, ignore_errors=True)  # Ray's session folders pile up otherwise


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
    Tuner): {name: (sweep name, trials)}."""
    batches = {}
    for sweep in opened:
        settings_ = sweep.plan.run.sweep
        size = seeds_per_trial(settings_.seeds_per_trial, len(sweep.pending), settings_.repeats, slots)
        for name, trials in seed_batches(sweep.pending, size).items():
            batches[f"{sweep.plan.name} {name}" if len(opened) > 1 else name] = (sweep.plan.name, trials)
    return batches


def run_on_ray(opened: list[OpenSweep], cpus: int, name: str, storage: Path, run: Settings) -> TunerOutcome:
    """Run the pending trials of every sweep in one Ray Tune Tuner (trials of different sweeps
    share the workers); ``run`` gives the Tune settings (CPUs per trial, concurrency,
    retries, verbosity)."""
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
    jobs = {o.plan.name: ray.put(sweep_job(o)) for o in opened if o.pending}
    print(f"{sum(len(t) for _, t in batches.values())} trials in {len(batches)} Ray Tune trials, {slots} at a time")
    trainable = tune.with_parameters(sweep_trainable, jobs=jobs, batches=batches)
    trainable = tune.with_resources(trainable, {"cpu": sweep.cpus_per_trial})
    progress = None if sweep.verbose else ProgressLine(
        {key: len(trials) for key, (_, trials) in batches.items()}, name,
        {key: owner for key, (owner, _) in batches.items()} if len(jobs) > 1 else None)
    tuner = tune.Tuner(
        trainable,
        param_space={"batch": tune.grid_search(list(batches))},
        tune_config=tune.TuneConfig(reuse_actors=True, max_concurrent_trials=sweep.max_concurrent_trials),
        run_config=tune.RunConfig(name=name, storage_path=str(storage), verbose=sweep.verbose,
                                  callbacks=[progress] if progress else [],
                                  failure_config=tune.FailureConfig(max_failures=sweep.max_failures, fail_fast=False)),
    )
    # Ctrl-C raises KeyboardInterrupt here instead of Tune's own handler, which would end
    # the Tuner quietly and let a partial sweep be reported as finished.
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"
    if not sweep.verbose:  # Tune's newer console output ignores verbose=0 (its config box, paths, INFO lines)
        os.environ["RAY_AIR_NEW_OUTPUT"] = "0"
        logging.getLogger("ray.tune").setLevel(logging.WARNING)
    start = time.perf_counter()
    try:
        results = tuner.fit()
    finally:
        if progress:
            progress.close()
    return TunerOutcome(time.perf_counter() - start, len(batches), len(results.errors))


def abandon(opened: OpenSweep, error: BaseException, trials_total: int) -> str:
    """Close a sweep that its driver leaves: the unfinished child runs and the parent KILLED
    (Ctrl-C, SIGTERM) or FAILED (an error); returns how far it got."""
    status = "FAILED" if isinstance(error, Exception) else "KILLED"
    reason = ("the sweep was interrupted (Ctrl-C)" if isinstance(error, KeyboardInterrupt) else
              f"the sweep's driver stopped ({type(error).__name__}); run the same command again to resume")
    client, parent = opened.client, opened.parent_id
    tracking.close_unfinished(client, opened.experiment_id, parent, status, reason)
    client.set_terminated(parent, status)
    done = sum(r.status == "FINISHED" for r in trial_records(client, opened.experiment_id, parent))
    return f"{done} of {trials_total} trials finished (MLflow parent run {parent}, {status})"


def finish_sweep(opened: OpenSweep, tuner: TunerOutcome = TunerOutcome(), ray_started: bool = False,
                 log: bool = True) -> SweepResult:
    """Read the sweep's runs back, write its report (report.md, grid.csv) and, with ``log``,
    log it to the parent run with the convergence figures of the chosen points and the
    best-point summary, and mark the parent FINISHED. Data without labels is reported and
    summarised by the label-free choices only (no accuracy point, no figure by accuracy)."""
    plan, client, parent_id, experiment_id = opened.plan, opened.client, opened.parent_id, opened.experiment_id
    run, out = plan.run, plan.output_dir
    dataset = plan.datasets[0]
    max_failures = run.sweep.max_failures
    tracking.close_unfinished(client, experiment_id, parent_id, "FAILED",
                              f"the trial's Ray worker died and its retries (sweep.max_failures={max_failures}) "
                              "ran out; see the Ray logs")
    records = trial_records(client, experiment_id, parent_id)
    summaries = point_summaries(client, records, dataset.task_names, same_data=run.data.draw != "per_seed")
    markdown = report_markdown(f"{run.method.name} on {run.data.name}", summaries, dataset.task_names,
                               data_note(run.data.draw, plan.datasets), labelled=dataset.labelled)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(markdown)
    (out / "grid.csv").write_text(grid_csv(summaries))
    best = chosen_points(summaries)
    if log:
        client.log_artifact(parent_id, str(out / "report.md"))
        client.log_artifact(parent_id, str(out / "grid.csv"))
        shown = run.sweep.label if run.sweep.label != run.method.name else \
            method_display_names().get(run.method.name, run.method.name)  # the paper's name; a variant its label
        for selection in (s for s in ("acc", "objective") if s in best):
            runs = {f"seed {r.seed}": (r.run_id, r.artifact_uri) for r in records
                    if r.point == best[selection].point and r.status == "FINISHED"}
            log_convergence_figure(client, parent_id, runs, out / f"convergence_best_by_{selection}.png",
                                   f"{shown} on {run.data.name}, {best[selection].point}")
        tracking.log_sweep_summary(client, parent_id, best, sum(s.n_failed for s in summaries), markdown,
                                   run.method.grid)
        client.set_terminated(parent_id, "FINISHED")
    return SweepResult(parent_id, str(out), summaries, best, run.tracking.uri, experiment_id, len(opened.pending),
                       markdown, tuner, ray_started)


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
    """finish_sweep, closing the sweep's runs if it fails."""
    try:
        return finish_sweep(opened, tuner, ray_started)
    except BaseException as error:
        abandon(opened, error, len(opened.plan.trials))
        raise


def run_sweep(run: Settings) -> SweepResult:
    """Run (or resume) a sweep; returns its SweepResult.

    Before anything is created the Ray address, the output folder and the tracking store are
    checked (mtc.store.preflight); the data is loaded; the driver takes its locks (mtc.sweep.locks): one
    live driver per sweep, one live sweep per SQLite store. A sweep whose trials all finished
    is reported from the store without starting Ray. Otherwise Ray is started or joined
    before any MLflow run is created."""
    worker_env = preflight.process_env()
    preflight.check_ray(run.ray.address)
    preflight.check_tracking(run.tracking.uri)
    plan = plan_sweep(run)
    plan.output_dir.mkdir(parents=True, exist_ok=True)
    with locks.driver_locks(plan.output_dir, plan.name, run.tracking.uri):
        stored = None
        if store_has_experiment(run.tracking):
            client, experiment_id = tracking.open_store(run.tracking.uri, run.tracking.experiment,
                                                        run.tracking.artifact_root)
            stored = reopen_finished(plan, client, experiment_id)
        if stored is not None:
            parent_done = client.get_run(stored.parent_id).info.status == "FINISHED"
            print(f"sweep {plan.name}: all {len(plan.trials)} trials already finished, MLflow parent run "
                  f"{stored.parent_id}; reported from the store (no Ray)")
            result = finish_sweep(stored, log=False) if parent_done else complete(stored, TunerOutcome(), False)
            return report_done(result)
        with ray_session(run, worker_env) as cpus:
            client, experiment_id = tracking.open_store(run.tracking.uri, run.tracking.experiment,
                                                        run.tracking.artifact_root)
            opened = open_sweep(plan, client, experiment_id)
            try:
                tuner = run_on_ray([opened], cpus, plan.name, plan.output_dir / "ray_results", run)
            except KeyboardInterrupt:  # Ctrl-C: no report; the started trials' runs are closed, the parent KILLED
                raise SweepInterrupted(f"interrupted: {abandon(opened, KeyboardInterrupt(), len(plan.trials))}; run "
                                       "the same command again to resume: finished trials are kept, the others run "
                                       "again") from None
            except BaseException as error:  # an error, or SystemExit from Ray's SIGTERM handler (kill, a scheduler)
                abandon(opened, error, len(plan.trials))
                raise
            return report_done(complete(opened, tuner, True))


def report_done(result: SweepResult) -> SweepResult:
    print(result.markdown)
    sort_metric = CRITERIA["acc" if "acc" in result.best else "silhouette"][0]  # no labels: no accuracy
    print(f"report: {Path(result.output_dir) / 'report.md'}\n" +
          tracking.links(result.tracking_uri, result.experiment_id, result.parent_run_id, sort_metric))
    return result


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
@exit_on_bad_input
def main(cfg: DictConfig) -> None:
    sys.stdout.reconfigure(line_buffering=True)  # each progress line as it happens, also through a pipe (tee, a log)
    try:
        run_sweep(settings(cfg))
    except SweepInterrupted as interrupted:
        print(interrupted, file=sys.stderr)
        sys.exit(130)
    except KeyboardInterrupt:
        print("interrupted before any MLflow run was created", file=sys.stderr)
        sys.exit(130)
