"""A data config node (``cfg.data``) as a checked spec with absolute paths, and its loading."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from mtc.data import BUILDER_NAMES, load_dataset
from mtc.errors import InputError
from mtc.tasks import MultiTaskDataset


@dataclass(frozen=True)
class DataSpec:
    """What load_dataset needs, with the data root and cache directory made absolute."""

    name: str
    builder: str
    params: dict
    root: str | None
    cache_dir: str | None
    categories: dict = field(default_factory=dict)  # class -> category (ideal task relatedness)
    resolved: dict = field(default_factory=dict, repr=False)  # the whole data config, for tracking

    def load(self) -> MultiTaskDataset:
        dataset = load_dataset(self.name, self.builder, self.params, self.root, self.cache_dir)
        if not self.categories:
            return dataset
        classes = {c for task in dataset.tasks for c in task.class_names}
        unknown = sorted(set(self.categories) - classes)
        if unknown:
            raise InputError(f"dataset {self.name!r}: categories name unknown classes {unknown}; "
                             f"classes: {sorted(classes)}")
        return MultiTaskDataset(dataset.name, dataset.tasks, {**dataset.meta, "categories": dict(self.categories)})


def data_spec(node) -> DataSpec:
    """The DataSpec of a data config node (``cfg.data``)."""
    resolved = OmegaConf.to_container(node, resolve=True)
    builder = resolved.get("builder") or resolved["name"]
    if builder not in BUILDER_NAMES:
        raise InputError(f"unknown dataset {resolved['name']!r} (builder {builder!r}); "
                         f"known builders: {', '.join(BUILDER_NAMES)}")
    absolute = {key: str(Path(resolved[key]).expanduser().resolve()) if resolved.get(key) else None
                for key in ("root", "cache_dir")}
    return DataSpec(resolved["name"], builder, resolved.get("params") or {}, **absolute,
                    categories=resolved.get("categories") or {}, resolved=resolved)
