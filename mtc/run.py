"""One fit without Ray, for debugging: ``python -m mtc.run method=kmeans data=synthetic seed=3``.

Logs one MLflow run (the resolved config, per-task metrics, the traces, labels, plots).
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from mtc.cli import CONF_DIR, exit_on_bad_input, launch
from mtc.config import Settings, Trial, settings


def run_once(run: Settings) -> dict[str, float]:
    from mtc.results.plots import readable_files
    from mtc.results.report import COLLAPSE_CAUSE
    from mtc.store import locks, preflight, tracking
    from mtc.trial import run_trial, trial_params

    preflight.process_env()
    preflight.check_tracking(run.tracking.uri)  # before the fit, not after it
    dataset = run.data.load(run.seed)  # the seed's draw if the data config draws per seed
    prototype = run.method.prototype(n_clusters=dataset.n_clusters)
    trial = Trial({}, run.seed)
    with locks.store_lock(run.tracking.uri):  # SQLite takes one writer at a time, as for a sweep
        outcome = run_trial(dataset, prototype, trial, cache=None)
        client, experiment_id = tracking.open_store(run.tracking.uri, run.tracking.experiment,
                                                    run.tracking.artifact_root)
        tags = {**tracking.dataset_tags(dataset), **tracking.provenance_tags("python -m mtc.run")}
        mlflow_run = client.create_run(experiment_id, run_name=f"{run.method.name} on {run.data.name} seed={run.seed}",
                                       tags=tags)
        config = trial_params(run.method.name, prototype, trial, run.data.resolved)
        names = dataset.task_names
        tracking.log_trial(client, mlflow_run.info.run_id, mlflow_run.info.artifact_uri, outcome, config, names,
                           lambda folder: readable_files(folder, outcome, config, names))
        client.set_terminated(mlflow_run.info.run_id, "FINISHED")
        shown = ("acc", "nmi_max", "ari") if dataset.labelled else ("silhouette",)  # no labels: label-free scores
        for name in dataset.task_names + ["mean"]:
            print(f"{name:>16}: " + "  ".join(f"{m}={outcome.metrics[f'{m}/{name}']:.4f}" for m in shown))
        print(f"objective {outcome.metrics['objective/final']:.6g} after {int(outcome.metrics['n_iter'])} iterations; "
              f"MLflow run {mlflow_run.info.run_id} in {run.tracking.uri}")
        degenerate = [name for name in names if outcome.metrics.get(f"degenerate/{name}")]
        if degenerate:
            scale = f"; this run's data.params.scale={run.data.params['scale']}" if "scale" in run.data.params else ""
            print(f"warning: degenerate clustering: {', '.join(degenerate)} in fewer clusters than asked (scores of a "
                  f"collapse; {COLLAPSE_CAUSE}{scale})")
    return outcome.metrics


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
@exit_on_bad_input
def main(cfg: DictConfig) -> None:
    run_once(settings(cfg))


if __name__ == "__main__":
    launch(main)
