"""Datasets by name: ``load_dataset(name, builder, params, root)`` returns a MultiTaskDataset.

Real corpora are read from the data root (see mtc.data.sources), built into the papers'
compositions (mtc.data.compositions) and cached on disk (mtc.data.cache), keyed by the raw
files' checksums and the config, so a second load only reads one .npz file. The user's own
files (builder ``files``, mtc.data.files) are cached the same way, keyed by their contents.
"""

from __future__ import annotations

import inspect
import typing
from pathlib import Path

from mtc.errors import InputError
from mtc.data import cache
from mtc.data.compositions import BUILDERS, build
from mtc.data.sources import RAW_FILES, data_root, raw_file, user_file_checksums
from mtc.data.synthetic import make_synthetic
from mtc.tasks import MultiTaskDataset

BUILDER_NAMES = sorted([*BUILDERS, "synthetic", "files"])
IN_MEMORY_BUILDERS = ("synthetic",)  # generated, never cached: drawing one is as cheap as looking up a hash


def files_builder():
    """The user's files' module (mtc.data.files), imported when a config uses it: it brings
    pandas and scikit-learn's loaders (1.2 s), which no corpus needs."""
    from mtc.data import files

    return files


def builder_function(builder: str):
    if builder == "files":
        return files_builder().build_files
    return make_synthetic if builder == "synthetic" else BUILDERS[builder].build


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
    cached, paths, key = cache_location(name, builder, params, root, cache_dir)
    cache.check_folder(cached.parent, write=False)
    dataset = cache.load_or_none(cached)
    if dataset is None:
        cache.check_folder(cached.parent, write=True)  # before building, which can take minutes
        dataset = files_builder().build_files(**params) if builder == "files" else build(builder, name, paths, params)
        dataset = MultiTaskDataset(name, dataset.tasks, {**dataset.meta, "cache_key": key})
        cache.save(dataset, cached)
    if cache.remembered_hash(cached) is None:
        cache.remember_hash(cached, dataset.content_hash())
    return dataset


def remembered_hash(name: str, builder: str | None = None, params: dict | None = None, root: str | None = None,
                    cache_dir: str | None = None) -> tuple[str, str] | None:
    """(content hash, cache key) of the dataset ``load_dataset`` would return, from the hash
    remembered beside its cache file, without reading it; None when not remembered (or a
    synthetic dataset, which has no cache)."""
    builder = builder or name
    if builder in IN_MEMORY_BUILDERS:
        return None
    cached, _, key = cache_location(name, builder, dict(params or {}), root, cache_dir)
    content_hash = cache.remembered_hash(cached)
    return None if content_hash is None else (content_hash, key)


def cache_location(name: str, builder: str, params: dict, root: str | None,
                   cache_dir: str | None) -> tuple[Path, dict, str]:
    """The cache file of a corpus or files dataset, its raw files by key and its cache key."""
    if builder == "files":
        paths, checksums = {}, user_file_checksums(params.get("paths") or [])
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
    return cache.cache_dir(cache_dir) / f"{name}-{key}.npz", paths, key
