"""A data config node (``cfg.data``) as a checked spec with absolute paths, and its loading.

``draw`` says how the samples relate to the trials' seeds: ``once`` (the default) builds one
dataset that every seed clusters; ``per_seed`` builds a fresh sample for every seed, with the
trial's seed as the builder's ``seed`` (``params.seed`` is then not used), so that a sweep with
``repeats`` seeds averages over that many random draws (SMT-NMF, SDM-14 Sec. 5.1: 30 draws per
sample size, the vocabulary built per draw).
"""

from __future__ import annotations

import inspect
import sys
import types
import typing
from dataclasses import dataclass, field, replace
from pathlib import Path

from omegaconf import OmegaConf

from mtc.data import (
    BUILDER_NAMES,
    IN_MEMORY_BUILDERS,
    builder_parameters,
    builder_takes_seed,
    builder_type_hints,
    load_dataset,
    remembered_hash,
)
from mtc.data.scaling import AUTO, resolved_scale
from mtc.data.sources import resolved as resolved_path
from mtc.errors import InputError
from mtc.tasks import MultiTaskDataset

DRAWS = ("once", "per_seed")


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
    draw: str = "once"  # "once" or "per_seed" (a fresh sample per trial seed)

    def load(self, seed: int | None = None) -> MultiTaskDataset:
        """The dataset; with ``draw: per_seed`` the draw of ``seed`` (required)."""
        params = self.params
        if self.draw == "per_seed":
            if seed is None:
                raise ValueError(f"dataset {self.name!r} draws a fresh sample per seed: load(seed) needs the seed")
            params = {**params, "seed": int(seed)}
        dataset = load_dataset(self.name, self.builder, params, self.root, self.cache_dir)
        check_clusterable(self.name, dataset)
        say_notes(self.name, dataset.meta.get("notes", ()))
        if not self.categories:
            return dataset
        classes = {c for task in dataset.tasks for c in task.class_names}
        unknown = sorted(set(self.categories) - classes)
        if unknown:
            raise InputError(f"dataset {self.name!r}: categories name unknown classes {unknown}; "
                             f"classes: {sorted(classes)}")
        return MultiTaskDataset(dataset.name, dataset.tasks, {**dataset.meta, "categories": dict(self.categories)})

    @property
    def in_memory(self) -> bool:
        """Whether the data is generated in memory and never cached (synthetic): no hash is
        remembered for it, and drawing it costs about what reading a hash would."""
        return self.builder in IN_MEMORY_BUILDERS

    def remembered_hashes(self, seeds) -> list[tuple[str, str]] | None:
        """(content hash, cache key) of the dataset (``once``) or of each seed's draw, in seed
        order, as remembered beside the processed cache files, without loading them; None when
        one is not remembered (never loaded yet, or a synthetic dataset)."""
        draws = [self.params] if self.draw == "once" else [{**self.params, "seed": int(s)} for s in sorted(seeds)]
        found = []
        for params in draws:
            found.append(remembered_hash(self.name, self.builder, params, self.root, self.cache_dir))
            if found[-1] is None:
                return None
        return found

    def draws(self, seeds) -> dict[int, MultiTaskDataset]:
        """The dataset of every seed: one shared object (``once``) or a draw per seed."""
        if self.draw == "once":
            dataset = self.load()
            return {int(seed): dataset for seed in seeds}
        return {int(seed): self.load(seed) for seed in seeds}


SAID: set[str] = set()  # notes on the data already printed by this process


def say_notes(name: str, notes) -> None:
    """Print each note on the data (``meta["notes"]``, e.g. a feature column named like a label)
    once per process, on stderr."""
    for note in notes:
        if note not in SAID:
            SAID.add(note)
            print(f"note on data {name!r}: {note}", file=sys.stderr)


def with_scale(spec: DataSpec, input_needs) -> DataSpec:
    """The user's files (``data=files``) with the scale that will be applied to them, by name
    (mtc.data.scaling.resolved_scale): ``auto`` of tables becomes the measured default for a
    method with ``input_needs``, of text folders what their vectoriser's settings do, in the
    params that key the cache and in the resolved config that runs record.

    Raises
    ------
    InputError
        A scale that text folders would not apply.
    """
    folders = any(resolved_path(str(path)).is_dir() for path in spec.params.get("paths") or ())
    scale = resolved_scale(spec.params.get("scale", AUTO), input_needs, spec.params.get("text"), folders)
    if scale == spec.params.get("scale"):
        return spec
    params = {**spec.params, "scale": scale}
    return replace(spec, params=params, resolved={**spec.resolved, "params": params})


def check_clusterable(name: str, dataset: MultiTaskDataset) -> None:
    """Every task has at least two clusters and a sample for each: what every solver needs,
    checked here, before Ray starts, rather than failing every trial."""
    for task in dataset.tasks:
        if task.n_clusters < 2:
            raise InputError(f"dataset {name!r}, task {task.name!r}: {task.n_clusters} cluster(s); clustering needs "
                             "at least 2")
        if task.n_samples < task.n_clusters:
            raise InputError(f"dataset {name!r}, task {task.name!r}: {task.n_samples} sample(s) for "
                             f"{task.n_clusters} clusters; give each cluster at least one sample")


def check_params(name: str, builder: str, params: dict) -> None:
    """Every key of ``data.params`` is one the builder takes, and none it needs is missing."""
    allowed = builder_parameters(builder)
    unknown = sorted(set(params) - set(allowed))
    missing = sorted(key for key, p in allowed.items() if p.default is p.empty and key not in params)
    if unknown or missing:
        what = "; ".join(part for part in (f"unknown data.params {', '.join(map(repr, unknown))}" if unknown else "",
                                           f"missing data.params {', '.join(map(repr, missing))}" if missing else "")
                         if part)
        raise InputError(f"dataset {name!r} (builder {builder!r}): {what}; it takes: {', '.join(sorted(allowed))}")
    hints = builder_type_hints(builder)
    for key, value in params.items():
        expected = hints.get(key) or default_type(allowed[key].default)
        if expected is not None and not value_has_type(value, expected):
            raise InputError(f"dataset {name!r}: data.params.{key} must be {type_name(expected)}, got {value!r}")


def default_type(default):
    """The type a parameter without an annotation takes: its default's (float also takes ints)."""
    if default is inspect.Parameter.empty or default is None:
        return None
    return list if isinstance(default, tuple) else type(default)


def value_has_type(value, expected) -> bool:
    """A config value against an annotation (``int``, ``float``, ``list[str]``, ``int | None``, ...);
    only the outer type is checked."""
    if typing.get_origin(expected) in (typing.Union, types.UnionType):
        return any(value_has_type(value, option) for option in typing.get_args(expected))
    expected = typing.get_origin(expected) or expected
    if expected is type(None):
        return value is None
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected in (list, tuple):
        return isinstance(value, (list, tuple))
    return isinstance(value, expected) if isinstance(expected, type) else True


def type_name(expected) -> str:
    if typing.get_origin(expected) in (typing.Union, types.UnionType):
        return " or ".join(type_name(option) for option in typing.get_args(expected))
    expected = typing.get_origin(expected) or expected
    names = {int: "an integer", float: "a number", bool: "true or false", str: "a string", list: "a list",
             tuple: "a list", dict: "a mapping", type(None): "null"}
    return names.get(expected, getattr(expected, "__name__", str(expected)))


def data_spec(node) -> DataSpec:
    """The DataSpec of a data config node (``cfg.data``)."""
    resolved = OmegaConf.to_container(node, resolve=True)
    builder = resolved.get("builder") or resolved["name"]
    if builder not in BUILDER_NAMES:
        raise InputError(f"unknown dataset {resolved['name']!r} (builder {builder!r}); "
                         f"known builders: {', '.join(BUILDER_NAMES)}")
    draw = resolved.get("draw") or "once"
    if draw not in DRAWS:
        raise InputError(f"dataset {resolved['name']!r}: draw must be one of {', '.join(DRAWS)}, got {draw!r}")
    if draw == "per_seed" and not builder_takes_seed(builder):
        raise InputError(f"dataset {resolved['name']!r}: draw=per_seed needs a builder that samples with a seed; "
                         f"{builder!r} takes none")
    check_params(resolved["name"], builder, resolved.get("params") or {})
    if builder == "files" and resolved["name"] == "files":
        raise InputError("data=files: name your data with data.name=<name>; it names the sweep, its output folder "
                         "and its benchmark in mtc.results.compare")
    absolute = {key: str(Path(resolved[key]).expanduser().resolve()) if resolved.get(key) else None
                for key in ("root", "cache_dir")}
    return DataSpec(resolved["name"], builder, resolved.get("params") or {}, **absolute,
                    categories=resolved.get("categories") or {}, resolved=resolved, draw=draw)
