"""Datasets by name: ``load_dataset(name, builder, params, root)`` returns a MultiTaskDataset.

Real corpora are read from the data root (see mtc.data.sources), built into the papers'
compositions (mtc.data.compositions) and cached on disk (mtc.data.cache), keyed by the raw
files' checksums and the config, so a second load only reads one .npz file.
"""

from __future__ import annotations

import inspect

from mtc.errors import InputError
from mtc.data import cache
from mtc.data.compositions import BUILDERS, build
from mtc.data.sources import RAW_FILES, data_root, raw_file
from mtc.data.synthetic import make_synthetic
from mtc.tasks import MultiTaskDataset

BUILDER_NAMES = sorted([*BUILDERS, "synthetic"])


def builder_takes_seed(builder: str) -> bool:
    """Whether the builder samples with a ``seed`` parameter (so it can draw per seed)."""
    function = make_synthetic if builder == "synthetic" else BUILDERS[builder].build
    return "seed" in inspect.signature(function).parameters


def load_dataset(name: str, builder: str | None = None, params: dict | None = None, root: str | None = None,
                 cache_dir: str | None = None) -> MultiTaskDataset:
    builder = builder or name
    params = dict(params or {})
    if builder == "synthetic":
        return make_synthetic(**params)
    if builder not in BUILDERS:
        raise InputError(f"unknown dataset builder {builder!r}; known builders: {', '.join(BUILDER_NAMES)}")
    base = data_root(root)
    spec = BUILDERS[builder]
    paths, checksums = {}, {}
    for key in spec.raw(params):
        paths[key], checksums[key] = raw_file(key, base)
    for key in spec.optional_raw:
        if (base / RAW_FILES[key].path).exists():
            paths[key], checksums[key] = raw_file(key, base, allow_download=False)
    key = cache.cache_key(name, builder, params, checksums)
    cached = cache.cache_dir(cache_dir) / f"{name}-{key}.npz"
    if cached.exists():
        dataset = cache.load(cached)
    else:
        dataset = build(builder, name, paths, params)
        dataset = MultiTaskDataset(name, dataset.tasks, {**dataset.meta, "cache_key": key})
        cache.save(dataset, cached)
    return dataset
