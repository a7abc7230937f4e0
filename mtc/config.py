"""From a composed Hydra config to validated, absolute, plain-Python sweep settings."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from mtc.data import BUILDER_NAMES
from mtc.methods import check_params, solver_class
from mtc.tracking import absolute_tracking_uri


@dataclass(frozen=True)
class MethodSpec:
    name: str
    params: dict
    grid: dict[str, list]

    def grid_points(self) -> list[dict]:
        """Every combination of the grid values, each merged over the defaults."""
        keys = sorted(self.grid)
        return [dict(zip(keys, values)) for values in itertools.product(*(self.grid[k] for k in keys))]


def plain(node) -> dict:
    """A config node as a plain dict ({} for a missing node)."""
    return OmegaConf.to_container(node, resolve=True) if node is not None else {}


def method_spec(cfg: DictConfig) -> MethodSpec:
    name = cfg.method.name
    solver_class(name)
    params = plain(cfg.method.get("params"))
    grid = plain(cfg.method.get("grid"))
    check_params(name, params)
    check_params(name, grid, what="grid key")
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ValueError(f"method {name!r}: grid values for {key!r} must be a non-empty list, got {values!r}")
    return MethodSpec(name, params, grid)


@dataclass(frozen=True)
class DataSpec:
    """What load_dataset needs, with the data root and cache directory made absolute."""

    name: str
    builder: str
    params: dict
    root: str | None
    cache_dir: str | None
    categories: dict = field(default_factory=dict)  # class -> category (ideal task relatedness)

    def load(self):
        from mtc.data import load_dataset
        from mtc.tasks import MultiTaskDataset

        dataset = load_dataset(self.name, self.builder, self.params, self.root, self.cache_dir)
        if not self.categories:
            return dataset
        classes = {c for task in dataset.tasks for c in task.class_names}
        unknown = sorted(set(self.categories) - classes)
        if unknown:
            raise ValueError(f"dataset {self.name!r}: categories name unknown classes {unknown}; "
                             f"classes: {sorted(classes)}")
        return MultiTaskDataset(dataset.name, dataset.tasks, {**dataset.meta, "categories": dict(self.categories)})


def data_spec(cfg: DictConfig) -> DataSpec:
    builder = cfg.data.get("builder") or cfg.data.name
    if builder not in BUILDER_NAMES:
        raise ValueError(f"unknown dataset {cfg.data.name!r} (builder {builder!r}); "
                         f"known builders: {', '.join(BUILDER_NAMES)}")
    absolute = {key: str(Path(cfg.data[key]).expanduser().resolve()) if cfg.data.get(key) else None
                for key in ("root", "cache_dir")}
    return DataSpec(cfg.data.name, builder, plain(cfg.data.get("params")), **absolute,
                    categories=plain(cfg.data.get("categories")))


def point_label(point: dict) -> str:
    return ",".join(f"{k}={point[k]}" for k in sorted(point)) or "defaults"


def trial_list(spec: MethodSpec, repeats: int) -> list[dict]:
    """Grid x seeds: one entry per trial with a stable key (used to resume)."""
    if repeats < 1:
        raise ValueError(f"sweep.repeats must be at least 1, got {repeats}")
    trials = []
    for point in spec.grid_points():
        for seed in range(repeats):
            label = point_label(point)
            trials.append({
                "key": f"{label}|seed={seed}", "label": label, "name": f"{spec.name}[{label}] seed={seed}",
                "point": point, "params": {**spec.params, **point}, "seed": seed,
            })
    return trials


def seeds_per_trial(setting, n_trials: int, repeats: int, parallel_slots: int) -> int:
    """How many seeds of one grid point a Ray Tune trial runs.

    An int is taken as it is; "auto" takes the largest batch (at most ``repeats``) that still
    leaves four Tune trials per parallel slot, so small sweeps and big clusters keep one seed
    per trial and only long sweeps on few CPUs batch (each Tune trial and report adds driver
    and worker overhead: benchmarks/sweep_overhead.py).
    """
    if setting == "auto":
        return max(1, min(repeats, n_trials // (4 * max(1, parallel_slots))))
    if isinstance(setting, bool) or not isinstance(setting, int) or setting < 1:
        raise ValueError(f"sweep.seeds_per_trial must be 'auto' or a positive integer, got {setting!r}")
    return setting


def seed_batches(trials: list[dict], size: int) -> dict[str, list[dict]]:
    """The trials in batches of at most ``size`` seeds of one grid point, keyed by a name
    for the Tune trial ("<point> seeds=<first>-<last>"); the order of ``trials`` is kept."""
    by_point: dict[str, list[dict]] = {}
    for trial in trials:
        by_point.setdefault(trial["label"], []).append(trial)
    batches = {}
    for label, point_trials in by_point.items():
        for start in range(0, len(point_trials), size):
            batch = point_trials[start:start + size]
            seeds = f"{batch[0]['seed']}" if len(batch) == 1 else f"{batch[0]['seed']}-{batch[-1]['seed']}"
            batches[f"{label} seeds={seeds}"] = batch
    return batches


def stable_hash(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def tracking_settings(cfg: DictConfig) -> tuple[str, str, str | None]:
    """(absolute tracking URI, experiment name, absolute artifact root or None)."""
    base = os.getcwd()
    uri = absolute_tracking_uri(cfg.mlflow.tracking_uri, base)
    root = cfg.mlflow.get("artifact_root")
    if root and "://" not in root:
        root = str((Path(base) / root).resolve())
    return uri, cfg.mlflow.experiment, root
