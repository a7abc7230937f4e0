"""Core data types: one clustering task and an ordered multi-task dataset."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class Task:
    """One clustering task: a data matrix (rows = samples) and its ground truth.

    A sparse X is kept in canonical form (sorted indices, no duplicate entries; a copy is made
    when the given one is not): the order in which a sparse product adds a row's entries follows
    the index order, so without it a fit's rounding, and a capped fit's labels, would depend on
    whether anything had sorted the matrix before (content_hash once did, in place).
    """

    name: str
    X: np.ndarray | sp.spmatrix
    y: np.ndarray
    class_names: tuple[str, ...]

    def __post_init__(self):
        if self.X.ndim != 2:
            raise ValueError(f"task {self.name!r}: X must be 2-D, got shape {self.X.shape}")
        if len(self.y) != self.X.shape[0]:
            raise ValueError(
                f"task {self.name!r}: {self.X.shape[0]} rows but {len(self.y)} labels"
            )
        if sp.issparse(self.X) and not getattr(self.X, "has_canonical_format", True):
            canonical = self.X.copy()
            canonical.sum_duplicates()  # sorts the indices too
            object.__setattr__(self, "X", canonical)

    @property
    def n_samples(self) -> int:
        return self.X.shape[0]

    @property
    def n_clusters(self) -> int:
        return len(self.class_names)

    def class_counts(self) -> dict[str, int]:
        counts = np.bincount(self.y, minlength=self.n_clusters)
        return dict(zip(self.class_names, counts.tolist()))


@dataclass(frozen=True)
class MultiTaskDataset:
    """Ordered tasks that share one feature space."""

    name: str
    tasks: tuple[Task, ...]
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if not self.tasks:
            raise ValueError(f"dataset {self.name!r} has no tasks")
        dims = {t.X.shape[1] for t in self.tasks}
        if len(dims) != 1:
            raise ValueError(
                f"dataset {self.name!r}: tasks must share one feature space, got dimensions "
                f"{[t.X.shape[1] for t in self.tasks]}"
            )

    @property
    def n_features(self) -> int:
        return self.tasks[0].X.shape[1]

    @property
    def matrices(self) -> list:
        return [t.X for t in self.tasks]

    @property
    def labels(self) -> list[np.ndarray]:
        return [t.y for t in self.tasks]

    @property
    def n_clusters(self) -> list[int]:
        return [t.n_clusters for t in self.tasks]

    @property
    def task_names(self) -> list[str]:
        return [t.name for t in self.tasks]

    def ideal_task_relatedness(self) -> np.ndarray:
        """MTCFIR Sec. 4.6 (Tables 6-7): r_ts = (share of task t's samples whose category
        also occurs in task s) x (share of task s's samples whose category occurs in task t).

        A class's category is ``meta["categories"][class name]`` (Reuters: economic index,
        energy, food, metal; 20NG: the root group), else the class itself, so tasks with the
        same classes (WebKB4, Handdigits) are related by 1."""
        categories = self.meta.get("categories") or {}
        sample_categories = [np.array([categories.get(c, c) for c in task.class_names])[task.y] for task in self.tasks]
        present = [np.unique(c) for c in sample_categories]
        share = np.array([[np.isin(cats, other).mean() for other in present] for cats in sample_categories])
        return share * share.T

    def content_hash(self) -> str:
        """sha256 over every task's name, classes, labels and matrix entries."""
        digest = hashlib.sha256()
        for task in self.tasks:
            digest.update(task.name.encode())
            digest.update("\x00".join(task.class_names).encode())
            digest.update(np.ascontiguousarray(task.y, dtype=np.int64).tobytes())
            X = sp.csr_matrix(task.X) if sp.issparse(task.X) else np.ascontiguousarray(task.X)
            if sp.issparse(X):  # canonical already (Task): the hash reads it, never sorts it
                for part in (X.indptr, X.indices, X.data):
                    digest.update(np.ascontiguousarray(part).tobytes())
            else:
                digest.update(X.astype(np.float64, copy=False).tobytes())
            digest.update(str(task.X.shape).encode())
        return digest.hexdigest()

    def describe(self) -> str:
        """A tasks x classes table of counts plus the feature dimension."""
        lines = [f"{self.name}: {len(self.tasks)} tasks, {self.n_features} features"]
        for task in self.tasks:
            counts = ", ".join(f"{c} {n}" for c, n in task.class_counts().items())
            lines.append(f"  {task.name} (n={task.n_samples}, k={task.n_clusters}): {counts}")
        return "\n".join(lines)
