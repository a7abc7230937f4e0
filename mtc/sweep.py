"""The sweep: ``python -m mtc.sweep method=snmf data=synthetic``.

Hydra composes the config; the driver resolves every path to absolute, loads the dataset
once, creates the MLflow parent run and one child run per (grid point, seed) trial, hands
the dataset to trials through Ray's object store (tune.with_parameters) and runs them with
Ray Tune, a batch of seeds of one grid point per Tune trial (``sweep.seeds_per_trial``; a
long sweep on few CPUs otherwise spends more time in Tune than in the fits). Afterwards it reads every child run back from MLflow, aggregates mean +- std per
grid point, prints the table for the best grid point (by accuracy, and without labels by
the final objective), writes it to the output directory and logs it to the parent run.
"""

from __future__ import annotations

from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from mtc import tracking
from mtc.cli import CONF_DIR, exit_on_bad_input, launch
from mtc.config import (data_spec, method_spec, seed_batches, seeds_per_trial, stable_hash, tracking_settings,
                        trial_list)
from mtc.report import best_point, grid_csv, report_markdown, summarize


def sweep_trainable(config, *, dataset, method, data_config, tracking_uri, batches, heatmaps):
    """One Ray Tune trial: a batch of seeds of one grid point (``config["batch"]`` names it in
    ``batches``). Each seed is fitted and logged to its pre-created MLflow child run; a
    failing seed marks its run FAILED and the others still run, then the trial fails. The
    trial reports once, the means over its seeds (MLflow has every seed's numbers)."""
    import numpy as np
    import ray
    from ray import tune

    client = tracking.client_for(tracking_uri)
    cpus = max(1, int(tune.get_context().get_trial_resources().required_resources.get("CPU", 1)))
    tags = {"mtc.node_id": ray.get_runtime_context().get_node_id()}
    outcomes, failures = [], []
    for trial in batches[config["batch"]]:
        try:
            outcomes.append(fit_and_log(client, trial, dataset, method, data_config, cpus, tags, heatmaps))
        except Exception as error:
            failures.append(error)
    if failures:
        raise RuntimeError(f"{len(failures)} seed(s) of {config['batch']} failed, "
                           f"first: {type(failures[0]).__name__}: {failures[0]}") from failures[0]
    tune.report({"acc_mean": float(np.mean([o.metrics["acc/mean"] for o in outcomes])),
                 "objective_final": float(np.mean([o.metrics["objective/final"] for o in outcomes])),
                 "seeds": len(outcomes)})


def fit_and_log(client, trial: dict, dataset, method: str, data_config: dict, cpus: int, tags: dict,
                heatmaps: bool):
    """Fit one (grid point, seed) with ``cpus`` BLAS threads and log it to its child run."""
    from threadpoolctl import threadpool_limits

    from mtc.trial import run_trial

    run_id = trial["run_id"]
    try:
        with threadpool_limits(limits=cpus):
            outcome = run_trial(dataset, method, trial["params"], trial["seed"])
        trial_config = {"method": method, "params": trial["params"], "seed": trial["seed"],
                        "grid_point": trial["point"], "data": data_config}
        tracking.log_trial(client, run_id, outcome, trial_config, dataset.task_names, tags,
                           heatmaps=heatmaps, convergence=False)
    except Exception as error:
        client.set_tag(run_id, "mtc.node_id", tags["mtc.node_id"])
        tracking.fail_run(client, run_id, error)
        raise
    client.set_terminated(run_id, "FINISHED")
    return outcome


def run_trials_on_ray(cfg: DictConfig, dataset, method: str, data_config: dict, trials: dict[str, dict],
                      tracking_uri: str, storage: Path, name: str) -> tuple[float, int]:
    """Run the trials; returns the wall seconds of the Tuner (Ray start-up excluded) and the
    number of Ray Tune trials (seed batches)."""
    import time

    import ray
    from ray import tune

    address = cfg.ray.address
    if address in (None, "local"):
        ray.init(address="local", num_cpus=cfg.ray.num_cpus, object_store_memory=cfg.ray.object_store_memory,
                 include_dashboard=False, log_to_driver=True)
    else:
        ray.init(address=address)
    try:
        slots = int(ray.cluster_resources().get("CPU", 1) // cfg.sweep.cpus_per_trial)
        if cfg.sweep.max_concurrent_trials:
            slots = min(slots, int(cfg.sweep.max_concurrent_trials))
        size = seeds_per_trial(cfg.sweep.seeds_per_trial, len(trials), int(cfg.sweep.repeats), slots)
        batches = seed_batches(list(trials.values()), size)
        print(f"{len(trials)} trials in {len(batches)} Ray Tune trials of up to {size} seed(s), {slots} at a time")
        trainable = tune.with_parameters(sweep_trainable, dataset=dataset, method=method, data_config=data_config,
                                         tracking_uri=tracking_uri, batches=batches,
                                         heatmaps=bool(cfg.mlflow.trial_heatmaps))
        trainable = tune.with_resources(trainable, {"cpu": cfg.sweep.cpus_per_trial})
        tuner = tune.Tuner(
            trainable,
            param_space={"batch": tune.grid_search(list(batches))},
            tune_config=tune.TuneConfig(reuse_actors=True, max_concurrent_trials=cfg.sweep.max_concurrent_trials),
            run_config=tune.RunConfig(name=name, storage_path=str(storage), verbose=cfg.sweep.verbose,
                                      failure_config=tune.FailureConfig(max_failures=0, fail_fast=False)),
        )
        start = time.perf_counter()
        tuner.fit()
        return time.perf_counter() - start, len(batches)
    finally:
        ray.shutdown()


def trial_records(client, experiment_id: str, parent_id: str) -> list[dict]:
    records = []
    for run in tracking.find_runs(client, experiment_id, **{tracking.PARENT_TAG: parent_id}):
        records.append({"point": run.data.tags.get(tracking.POINT_TAG, "?"), "status": run.info.status,
                        "metrics": run.data.metrics, "run_id": run.info.run_id,
                        "seed": run.data.params.get("seed", "?")})
    return records


def run_sweep(cfg: DictConfig) -> dict:
    """Run (or resume) a sweep; returns the report's paths and best-point summaries."""
    spec = method_spec(cfg)
    data = data_spec(cfg)
    trials = trial_list(spec, int(cfg.sweep.repeats))
    seeds_per_trial(cfg.sweep.seeds_per_trial, len(trials), int(cfg.sweep.repeats), 1)  # reject a bad value early
    tracking_uri, experiment, artifact_root = tracking_settings(cfg)
    name = cfg.sweep.name or f"{spec.name}-{data.name}"
    output_dir = Path(cfg.output_dir).resolve() / name
    output_dir.mkdir(parents=True, exist_ok=True)

    dataset = data.load()
    data_config = OmegaConf.to_container(cfg.data, resolve=True)
    client = tracking.client_for(tracking_uri)
    experiment_id = tracking.ensure_experiment(client, experiment, artifact_root)
    tags = {**tracking.dataset_tags(dataset), "mtc.method": spec.name, "mtc.data": data.name}
    sweep_key = stable_hash(spec.name, spec.params, spec.grid, cfg.sweep.repeats, data_config,
                            tags[tracking.DATASET_HASH_TAG])
    parent_id = tracking.open_parent_run(client, experiment_id, sweep_key, name,
                                         OmegaConf.to_container(cfg, resolve=True), tags, bool(cfg.sweep.resume))
    pending, finished = tracking.prepare_child_runs(client, experiment_id, parent_id, trials, tags)
    print(f"sweep {name}: {len(trials)} trials ({len(finished)} already finished), MLflow parent run {parent_id}")
    tuner_seconds, tune_trials = 0.0, 0
    try:
        if pending:
            todo = {t["key"]: {**t, "run_id": pending[t["key"]]} for t in trials if t["key"] in pending}
            tuner_seconds, tune_trials = run_trials_on_ray(cfg, dataset, spec.name, data_config, todo, tracking_uri,
                                              output_dir / "ray_results", name)
    except BaseException:
        client.set_terminated(parent_id, "KILLED")
        raise

    records = trial_records(client, experiment_id, parent_id)
    summaries = summarize(records)
    markdown = report_markdown(f"{spec.name} on {data.name}", summaries, dataset.task_names)
    (output_dir / "report.md").write_text(markdown)
    (output_dir / "grid.csv").write_text(grid_csv(summaries))
    client.log_artifact(parent_id, str(output_dir / "report.md"))
    client.log_artifact(parent_id, str(output_dir / "grid.csv"))
    best = {selection: best_point(summaries, selection) for selection in ("acc", "objective")}
    for selection, summary in best.items():
        runs = {f"seed {r['seed']}": r["run_id"] for r in records if r["point"] == summary.point
                and r["status"] == "FINISHED"}
        tracking.log_convergence_figure(client, parent_id, runs, output_dir / f"convergence_best_by_{selection}.png",
                                        f"{spec.name} on {data.name}, {summary.point}")
    tracking.log_sweep_summary(client, parent_id, best, failed=sum(s.n_failed for s in summaries))
    client.set_terminated(parent_id, "FINISHED")
    print(markdown)
    print(f"report: {output_dir / 'report.md'}\nMLflow: mlflow ui --backend-store-uri {tracking_uri}")
    return {"parent_run_id": parent_id, "output_dir": str(output_dir), "summaries": summaries, "best": best,
            "tracking_uri": tracking_uri, "experiment_id": experiment_id,
            "trials_run": len(pending), "tune_trials": tune_trials, "tuner_seconds": tuner_seconds}


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
@exit_on_bad_input
def main(cfg: DictConfig) -> None:
    run_sweep(cfg)


if __name__ == "__main__":
    launch(main)
