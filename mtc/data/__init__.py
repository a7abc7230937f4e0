"""Datasets by name: ``load_dataset(name, params, root)`` returns a MultiTaskDataset."""

from __future__ import annotations

from mtc.data.synthetic import make_synthetic
from mtc.tasks import MultiTaskDataset

LOADERS = {"synthetic": make_synthetic}


def load_dataset(name: str, params: dict | None = None, root: str | None = None) -> MultiTaskDataset:
    try:
        loader = LOADERS[name]
    except KeyError:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {', '.join(sorted(LOADERS))}") from None
    return loader(**dict(params or {}))
