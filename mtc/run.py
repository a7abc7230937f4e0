"""One fit without Ray, for debugging: ``python -m mtc.run method=kmeans data=synthetic seed=3``.

Logs one MLflow run (the resolved config, per-task metrics, the trace, labels, plots).
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig, OmegaConf

from mtc.cli import CONF_DIR, exit_on_bad_input, launch
from mtc.config import data_spec, method_spec, tracking_settings
from mtc.trial import run_trial


def run_once(cfg: DictConfig) -> dict[str, float]:
    from mtc import tracking

    spec = method_spec(cfg)
    data = data_spec(cfg)
    dataset = data.load()
    seed = int(cfg.seed)
    outcome = run_trial(dataset, spec.name, spec.params, seed)
    uri, experiment, artifact_root = tracking_settings(cfg)
    client = tracking.client_for(uri)
    experiment_id = tracking.ensure_experiment(client, experiment, artifact_root)
    run = client.create_run(experiment_id, run_name=f"{spec.name} on {data.name} seed={seed}",
                            tags=tracking.dataset_tags(dataset))
    trial_config = {"method": spec.name, "params": spec.params, "seed": seed,
                    "data": OmegaConf.to_container(cfg.data, resolve=True)}
    tracking.log_trial(client, run.info.run_id, outcome, trial_config, dataset.task_names)
    client.set_terminated(run.info.run_id, "FINISHED")
    for name in dataset.task_names + ["mean"]:
        print(f"{name:>16}: " + "  ".join(f"{m}={outcome.metrics[f'{m}/{name}']:.4f}" for m in ("acc", "nmi_max", "ari")))
    print(f"objective {outcome.metrics['objective/final']:.6g} after {int(outcome.metrics['n_iter'])} iterations; "
          f"MLflow run {run.info.run_id} in {uri}")
    return outcome.metrics


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
@exit_on_bad_input
def main(cfg: DictConfig) -> None:
    run_once(cfg)


if __name__ == "__main__":
    launch(main)
