"""Datasets by name: ``load_dataset(name, builder, params, root)`` returns a MultiTaskDataset.

Real corpora are read from the data root (see mtc.data.sources), built into the papers'
compositions (mtc.data.compositions) and cached on disk (mtc.data.cache), keyed by the raw
files' checksums and the config, so a second load only reads one .npz file. The user's own
files (builder ``files``, mtc.data.files) are cached the same way, keyed by their contents.
"""

from __future__ import annotations

import inspect
import typing

from mtc.errors import InputError
from mtc.data import cache, files
from mtc.data.compositions import BUILDERS, build
from mtc.data.sources import RAW_FILES, data_root, raw_file
from mtc.data.synthetic import make_synthetic
from mtc.tasks import MultiTaskDataset

BUILDER_NAMES = sorted([*BUILDERS, "synthetic", "files"])


def builder_function(builder: str):
    return {"synthetic": make_synthetic, "files": files.build_files}.get(builder) or BUILDERS[builder].build


def builder_parameters(builder: str) -> dict[str, inspect.Parameter]:
    """The parameters a data config's ``params`` may set for this builder (by name); a
    composition's ``paths`` are its raw files, not a parameter (``files`` takes the user's)."""
    return {name: p for name, p in inspect.signature(builder_function(builder)).parameters.items()
            if name != "paths" or builder not in BUILDERS}


def builder_type_hints(builder: str) -> dict:
    """The builder's parameter annotations (none for an unannotated builder)."""
    return typing.get_type_hints(builder_function(builder))


def builder_takes_seed(builder: str) -> bool:
    """Whether the builder samples with a ``seed`` parameter (so it can draw per seed)."""
    return "seed" in builder_parameters(builder)


def load_dataset(name: str, builder: str | None = None, params: dict | None = None, root: str | None = None,
                 cache_dir: str | None = None) -> MultiTaskDataset:
    builder = builder or name
    params = dict(params or {})
    if builder == "synthetic":
        return make_synthetic(**params)
    if builder == "files":
        checksums = files.checksums(params.get("paths") or [])
    elif builder in BUILDERS:
        base = data_root(root)
        spec = BUILDERS[builder]
        paths, checksums = {}, {}
        for key in spec.raw(params):
            paths[key], checksums[key] = raw_file(key, base)
        for key in spec.optional_raw:
            if (base / RAW_FILES[key].path).exists():
                paths[key], checksums[key] = raw_file(key, base, allow_download=False)
    else:
        raise InputError(f"unknown dataset builder {builder!r}; known builders: {', '.join(BUILDER_NAMES)}")
    key = cache.cache_key(name, builder, params, checksums)
    cached = cache.cache_dir(cache_dir) / f"{name}-{key}.npz"
    cache.check_folder(cached.parent, write=False)
    dataset = cache.load_or_none(cached)
    if dataset is None:
        cache.check_folder(cached.parent, write=True)  # before building, which can take minutes
        dataset = files.build_files(**params) if builder == "files" else build(builder, name, paths, params)
        dataset = MultiTaskDataset(name, dataset.tasks, {**dataset.meta, "cache_key": key})
        cache.save(dataset, cached)
    return dataset
