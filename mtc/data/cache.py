"""On-disk cache of processed datasets, keyed by the raw files' checksums and the data config."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mtc.data.sources import configured_dir
from mtc.tasks import MultiTaskDataset, Task

CACHE_VERSION = 1  # bump when a builder's output changes for the same config


def cache_dir(configured: str | None = None) -> Path:
    return configured_dir(configured, "MTC_CACHE_DIR", "~/.cache/mtc/processed")


def cache_key(name: str, builder: str, params: dict, checksums: dict[str, str]) -> str:
    blob = json.dumps([CACHE_VERSION, name, builder, params, sorted(checksums.items())], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def save(dataset: MultiTaskDataset, path: Path) -> None:
    arrays = {"meta": np.array(json.dumps({"name": dataset.name, "meta": dataset.meta,
                                           "tasks": [[t.name, list(t.class_names)] for t in dataset.tasks]}))}
    for i, task in enumerate(dataset.tasks):
        arrays[f"y{i}"] = task.y
        if sp.issparse(task.X):
            X = sp.csr_matrix(task.X)
            arrays.update({f"data{i}": X.data, f"indices{i}": X.indices, f"indptr{i}": X.indptr,
                           f"shape{i}": np.array(X.shape)})
        else:
            arrays[f"dense{i}"] = task.X
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npz.part", delete=False) as tmp:
        np.savez(tmp, **arrays)
    os.replace(tmp.name, path)


def load(path: Path) -> MultiTaskDataset:
    with np.load(path, allow_pickle=False) as archive:
        info = json.loads(str(archive["meta"]))
        tasks = []
        for i, (task_name, classes) in enumerate(info["tasks"]):
            if f"dense{i}" in archive:
                X = archive[f"dense{i}"]
            else:
                X = sp.csr_matrix((archive[f"data{i}"], archive[f"indices{i}"], archive[f"indptr{i}"]),
                                  shape=tuple(archive[f"shape{i}"]))
            tasks.append(Task(task_name, X, archive[f"y{i}"], tuple(classes)))
    return MultiTaskDataset(info["name"], tuple(tasks), info["meta"])
