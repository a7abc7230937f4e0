"""The sweep: ``python -m mtc.sweep method=snmf data=synthetic``.

Hydra composes the config; mtc.config reads and checks all of it (every grid point against
the solver's constraints) before anything runs. The driver then checks that the Ray cluster, the output folder and
the tracking store can be used (mtc.preflight), takes its locks (mtc.locks), loads the
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
from pathlib import Path

import hydra
import numpy as np
from omegaconf import DictConfig

from mtc import locks, preflight, tracking
from mtc.cli import CONF_DIR, exit_on_bad_input, launch
from mtc.config import RESERVED_PARAMS, Settings, Trial, seed_batches, seeds_per_trial, settings, stable_hash, trial_list
from mtc.errors import InputError
from mtc.preflight import UnreachableError
from mtc.report import (SELECTIONS, TrialRecord, best_point, data_note, grid_csv, report_markdown, summarize,
                        with_stability)

class SweepInterrupted(Exception):
    """Ctrl-C ended the sweep; the message says how far it got and how to resume."""


def sweep_trainable(config, *, datasets, prototype, method, data_config, tracking_uri, experiment_id, parent_id,
                    run_tags, batches, heatmaps):
    """One Ray Tune trial: a batch of seeds of one grid point (``config["batch"]`` names it in
    ``batches``). Each seed is fitted and logged to its MLflow child run, created as its fit starts. A fit that raises
    marks its run FAILED (with the error) and the other seeds still run; it is not retried (a
    seeded fit fails the same way again). A worker that dies (killed, out of memory, node
    lost) fails the Tune trial, which Ray Tune runs again (sweep.max_failures): seeds already
    FINISHED are skipped then, and a seed that died half-logged gets a fresh run."""
    import ray
    from ray import tune

    client = tracking.client_for(tracking_uri)
    cpus = max(1, int(tune.get_context().get_trial_resources().required_resources.get("CPU", 1)))
    node = {"mtc.node_id": ray.get_runtime_context().get_node_id()}
    accuracies, objectives, failed = [], [], 0
    for trial in batches[config["batch"]]:
        run_id, metrics = tracking.start_trial_run(client, experiment_id, parent_id, trial, {**run_tags, **node})
        if run_id:
            metrics = fit_and_log(client, trial.with_run(run_id), datasets[trial.seed], prototype, method, data_config,
                                  cpus, heatmaps)
        if metrics is None:
            failed += 1
        else:
            accuracies.append(metrics["acc/mean"])
            objectives.append(metrics["objective/final"])
    tune.report({"acc_mean": float(np.mean(accuracies)) if accuracies else float("nan"),
                 "objective_final": float(np.mean(objectives)) if objectives else float("nan"),
                 "seeds": len(accuracies), "failed_seeds": failed})


def trial_params(method: str, prototype, trial: Trial, data_config: dict) -> dict:
    """What a child run records as its params and config.json: the solver's parameters under
    their own names (filter on ``params.alpha``), the seed, the method and the data config
    (``data.*``)."""
    params = {key: value for key, value in prototype.get_params().items() if key not in RESERVED_PARAMS}
    return {**params, **trial.point, "method": method, "seed": trial.seed, "data": data_config}


def fit_and_log(client, trial: Trial, dataset, prototype, method: str, data_config: dict, cpus: int,
                heatmaps: bool) -> dict | None:
    """Fit one (grid point, seed) with ``cpus`` BLAS threads and log it to its child run;
    returns its metrics, or None when the fit or its logging raised (the run is then FAILED
    with the error)."""
    from threadpoolctl import threadpool_limits

    from mtc.trial import run_trial

    try:
        with threadpool_limits(limits=cpus):
            outcome = run_trial(dataset, prototype, trial)
        tracking.log_trial(client, trial.run_id, outcome, trial_params(method, prototype, trial, data_config),
                           dataset.task_names, heatmaps=heatmaps, convergence=False)
    except Exception as error:
        tracking.fail_run(client, trial.run_id, error)
        return None
    client.set_terminated(trial.run_id, "FINISHED")
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


def run_trials_on_ray(run: Settings, datasets: dict, prototype, trials: list[Trial], cpus: int, experiment_id: str,
                      parent_id: str, run_tags: dict) -> tuple[float, int, int]:
    """Run the trials; returns the wall seconds of the Tuner, the number of Ray Tune trials
    (seed batches) and how many of them ended in an error (after sweep.max_failures retries)."""
    from ray import tune

    from mtc.progress import ProgressLine

    sweep = run.sweep
    slots = cpus // sweep.cpus_per_trial
    if slots < 1:
        raise InputError(f"sweep.cpus_per_trial={sweep.cpus_per_trial} but the Ray cluster has {cpus} CPU(s)")
    if sweep.max_concurrent_trials:
        slots = min(slots, sweep.max_concurrent_trials)
    size = seeds_per_trial(sweep.seeds_per_trial, len(trials), sweep.repeats, slots)
    batches = seed_batches(trials, size)
    print(f"{len(trials)} trials in {len(batches)} Ray Tune trials of up to {size} seed(s), {slots} at a time")
    trainable = tune.with_parameters(sweep_trainable, datasets=datasets, prototype=prototype, method=run.method.name,
                                     data_config=run.data.resolved, tracking_uri=run.tracking.uri,
                                     experiment_id=experiment_id, parent_id=parent_id, run_tags=run_tags,
                                     batches=batches, heatmaps=run.tracking.trial_heatmaps)
    trainable = tune.with_resources(trainable, {"cpu": sweep.cpus_per_trial})
    progress = None if sweep.verbose else ProgressLine({name: len(b) for name, b in batches.items()}, sweep.name)
    tuner = tune.Tuner(
        trainable,
        param_space={"batch": tune.grid_search(list(batches))},
        tune_config=tune.TuneConfig(reuse_actors=True, max_concurrent_trials=sweep.max_concurrent_trials),
        run_config=tune.RunConfig(name=sweep.name, storage_path=str(sweep.output_dir / sweep.name / "ray_results"),
                                  verbose=sweep.verbose, callbacks=[progress] if progress else [],
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
    return time.perf_counter() - start, len(batches), len(results.errors)


def trial_records(client, experiment_id: str, parent_id: str) -> list[TrialRecord]:
    return [TrialRecord(run.data.tags.get(tracking.POINT_TAG, "?"), run.data.params.get("seed", "?"), run.info.status,
                        run.data.metrics, run.info.run_id, run.info.artifact_uri)
            for run in tracking.find_runs(client, experiment_id, **{tracking.PARENT_TAG: parent_id})]


def seed_labels(client, records: list[TrialRecord], task_names: list[str]) -> dict[str, list[list[np.ndarray]]]:
    """Every finished trial's labels, by grid point (for the stability criterion)."""
    labels: dict[str, list[list[np.ndarray]]] = {}
    for record in records:
        if record.status == "FINISHED":
            labels.setdefault(record.point, []).append(
                tracking.load_labels(client, record.run_id, record.artifact_uri, task_names))
    return labels


def point_summaries(client, records: list[TrialRecord], task_names: list[str], same_data: bool = True):
    """Mean and std per grid point of the runs' metrics, with the stability across seeds when
    every seed clustered the same data (``same_data``): labels of different draws (a data
    config with ``draw: per_seed``) label different samples, and their ARI means nothing."""
    summaries = summarize(records)
    return with_stability(summaries, seed_labels(client, records, task_names)) if same_data else summaries


def chosen_points(summaries) -> dict:
    """The grid point of every selection whose criterion was logged."""
    chosen = {}
    for selection in SELECTIONS:
        with contextlib.suppress(ValueError):
            chosen[selection] = best_point(summaries, selection)
    return chosen


def run_sweep(run: Settings) -> dict:
    """Run (or resume) a sweep; returns the report's paths and best-point summaries.

    Before anything is created the Ray address, the output folder and the tracking store are
    checked (mtc.preflight); the data is loaded; the driver takes its locks (mtc.locks): one
    live driver per sweep, one live sweep per SQLite store. Ray is started or joined before
    any MLflow run is created."""
    spec, sweep = run.method, run.sweep
    trials = trial_list(spec, sweep.repeats)
    output_dir = sweep.output_dir / sweep.name
    worker_env = preflight.process_env()
    preflight.check_ray(run.ray.address)
    preflight.check_tracking(run.tracking.uri)
    preflight.check_writable(output_dir)
    if run.tracking.artifact_root and "://" not in run.tracking.artifact_root:
        preflight.check_writable(Path(run.tracking.artifact_root), "artifact folder", "mlflow.artifact_root")
    datasets = run.data.draws(range(sweep.repeats))  # seed -> dataset (one shared object unless per_seed)
    output_dir.mkdir(parents=True, exist_ok=True)
    with locks.driver_locks(output_dir, sweep.name, run.tracking.uri):
        with ray_session(run, worker_env) as cpus:
            return sweep_on(run, trials, datasets, output_dir, cpus)


def sweep_on(run: Settings, trials: list[Trial], datasets: dict, output_dir, cpus: int) -> dict:
    """The sweep once the checks passed, the locks are held and Ray is up."""
    spec, sweep = run.method, run.sweep
    dataset = datasets[0]
    prototype = spec.prototype(n_clusters=dataset.n_clusters)
    client, experiment_id = tracking.open_store(run.tracking.uri, run.tracking.experiment, run.tracking.artifact_root)
    tags = {**tracking.draws_tags(datasets), **tracking.provenance_tags("python -m mtc.sweep"), "mtc.method": spec.name, "mtc.label": sweep.label,
            "mtc.data": run.data.name}
    # The name is part of the key: two sweeps of the same grid under different names (two
    # output folders, so two driver locks) must not resume into one parent run.
    sweep_key = stable_hash(sweep.name, spec.name, spec.params, spec.grid, sweep.repeats, run.data.resolved,
                            tags[tracking.DATASET_HASH_TAG])
    parent_id = tracking.open_parent_run(client, experiment_id, sweep_key, sweep.name, run.resolved, tags, sweep.resume)
    try:
        tracking.log_dataset_input(client, parent_id, run.data.name, datasets, run.data.resolved)
        pending, finished = tracking.prepare_child_runs(client, experiment_id, parent_id, trials)
        print(f"sweep {sweep.name}: {len(trials)} trials ({len(finished)} already finished), MLflow parent run {parent_id}")
        tuner_seconds, tune_trials, tune_errors = 0.0, 0, 0
        if pending:
            tuner_seconds, tune_trials, tune_errors = run_trials_on_ray(run, datasets, prototype, pending, cpus,
                                                                        experiment_id, parent_id, tags)
        tracking.close_unfinished(client, experiment_id, parent_id, "FAILED",
                                  f"the trial's Ray worker died and its retries (sweep.max_failures={sweep.max_failures}) "
                                  "ran out; see the Ray logs")
        records = trial_records(client, experiment_id, parent_id)
        summaries = point_summaries(client, records, dataset.task_names, same_data=run.data.draw != "per_seed")
        markdown = report_markdown(f"{spec.name} on {run.data.name}", summaries, dataset.task_names,
                                   data_note(run.data.draw, datasets))
    except KeyboardInterrupt:  # Ctrl-C: no report; the started trials' runs are closed, the parent KILLED
        tracking.close_unfinished(client, experiment_id, parent_id, "KILLED", "the sweep was interrupted (Ctrl-C)")
        client.set_terminated(parent_id, "KILLED")
        done = sum(r.status == "FINISHED" for r in trial_records(client, experiment_id, parent_id))
        raise SweepInterrupted(f"interrupted: {done} of {len(trials)} trials finished (MLflow parent run "
                               f"{parent_id}, KILLED); run the same command again to resume: finished trials "
                               "are kept, the others run again") from None
    except BaseException as error:  # an error, or SystemExit from Ray's SIGTERM handler (kill, a scheduler)
        status = "FAILED" if isinstance(error, Exception) else "KILLED"
        tracking.close_unfinished(client, experiment_id, parent_id, status,
                                  f"the sweep's driver stopped ({type(error).__name__}); run the same command again "
                                  "to resume")
        client.set_terminated(parent_id, status)
        raise
    (output_dir / "report.md").write_text(markdown)
    (output_dir / "grid.csv").write_text(grid_csv(summaries))
    client.log_artifact(parent_id, str(output_dir / "report.md"))
    client.log_artifact(parent_id, str(output_dir / "grid.csv"))
    best = chosen_points(summaries)
    for selection in ("acc", "objective"):
        runs = {f"seed {r.seed}": r.run_id for r in records if r.point == best[selection].point and r.status == "FINISHED"}
        tracking.log_convergence_figure(client, parent_id, runs, output_dir / f"convergence_best_by_{selection}.png",
                                        f"{spec.name} on {run.data.name}, {best[selection].point}")
    tracking.log_sweep_summary(client, parent_id, best, sum(s.n_failed for s in summaries), markdown, spec.grid)
    client.set_terminated(parent_id, "FINISHED")
    print(markdown)
    print(f"report: {output_dir / 'report.md'}\n" + tracking.links(run.tracking.uri, experiment_id, parent_id))
    return {"parent_run_id": parent_id, "output_dir": str(output_dir), "summaries": summaries, "best": best,
            "tracking_uri": run.tracking.uri, "experiment_id": experiment_id,
            "trials_run": len(pending), "tune_trials": tune_trials, "tune_errors": tune_errors,
            "tuner_seconds": tuner_seconds}


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


if __name__ == "__main__":
    launch(main)
