"""Core data types: one clustering task and an ordered multi-task dataset.

A task has labels (``y``: the class index of every sample, ``class_names`` its classes) or
none (``y = None``, the user's own data without a label column: ``class_names`` are then the
names of its clusters, ``cluster_names(k)``); a dataset's tasks are all labelled or none.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp


def cluster_names(n_clusters: int) -> tuple[str, ...]:
    """The names of ``n_clusters`` clusters without classes: ``cluster0``, ``cluster1``, ..."""
    return tuple(f"cluster{i}" for i in range(n_clusters))


@dataclass(frozen=True)
class Task:
    """One clustering task: a data matrix (rows = samples) and its ground truth, if known.

    Attributes
    ----------
    name : str
        The task's name.
    X : ndarray or sparse matrix of shape (n_samples, n_features)
        The samples.
    y : ndarray of shape (n_samples,) or None
        The class index of every sample, in ``[0, len(class_names))``; None for a task without
        labels.
    class_names : tuple of str
        The classes; without labels the clusters to find, ``cluster_names(n_clusters)``. Their
        number is the task's ``n_clusters``.

    A sparse X is kept in canonical form (sorted indices, no duplicate entries; a copy is made
    when the given one is not): the order in which a sparse product adds a row's entries follows
    the index order, so without it a fit's rounding, and a capped fit's labels, would depend on
    whether anything had sorted the matrix before (content_hash once did, in place).
    """

    name: str
    X: np.ndarray | sp.spmatrix
    y: np.ndarray | None
    class_names: tuple[str, ...]

    def __post_init__(self):
        if self.X.ndim != 2:
            raise ValueError(f"task {self.name!r}: X must be 2-D, got shape {self.X.shape}")
        if self.y is None:
            if self.class_names != cluster_names(len(self.class_names)):
                raise ValueError(f"task {self.name!r} has no labels: its clusters are named cluster0, cluster1, ..., "
                                 f"got {self.class_names}")
        elif len(self.y) != self.X.shape[0]:
            raise ValueError(
                f"task {self.name!r}: {self.X.shape[0]} rows but {len(self.y)} labels"
            )
        elif len(self.y) and (self.y.min() < 0 or self.y.max() >= len(self.class_names)):
            raise ValueError(f"task {self.name!r}: labels must be class indices in [0, {len(self.class_names)}), "
                             f"got {self.y.min()} to {self.y.max()}")
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

    @property
    def labelled(self) -> bool:
        """Whether the task has labels (``y``)."""
        return self.y is not None

    def class_counts(self) -> dict[str, int]:
        """Samples per class; a task without labels has none (ValueError)."""
        if self.y is None:
            raise ValueError(f"task {self.name!r} has no labels: no class counts")
        counts = np.bincount(self.y, minlength=self.n_clusters)
        return dict(zip(self.class_names, counts.tolist()))


@dataclass(frozen=True)
class MultiTaskDataset:
    """Ordered tasks that share one feature space, all labelled or none.

    Attributes
    ----------
    name : str
        The dataset's name.
    tasks : tuple of Task
        The tasks, in order.
    meta : dict
        What its builder records (categories of classes, cache key, ...).
    """

    name: str
    tasks: tuple[Task, ...]
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        if not self.tasks:
            raise ValueError(f"dataset {self.name!r} has no tasks")
        if len({t.labelled for t in self.tasks}) > 1:
            raise ValueError(f"dataset {self.name!r}: tasks {[t.name for t in self.tasks if not t.labelled]} have no "
                             "labels but the others have; every task has labels or none")
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
    def labelled(self) -> bool:
        """Whether the tasks have labels (all of them, or none)."""
        return self.tasks[0].labelled

    @property
    def labels(self) -> list[np.ndarray] | None:
        """Every task's labels, or None without labels."""
        return [t.y for t in self.tasks] if self.labelled else None

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
        same classes (WebKB4, Handdigits) are related by 1. Only defined with labels (ValueError
        without)."""
        if not self.labelled:
            raise ValueError(f"dataset {self.name!r} has no labels: no ideal task relatedness")
        categories = self.meta.get("categories") or {}
        sample_categories = [np.array([categories.get(c, c) for c in task.class_names])[task.y] for task in self.tasks]
        present = [np.unique(c) for c in sample_categories]
        share = np.array([[np.isin(cats, other).mean() for other in present] for cats in sample_categories])
        return share * share.T

    def content_hash(self) -> str:
        """sha256 over every task's name, classes, labels (or that it has none) and matrix entries."""
        digest = hashlib.sha256()
        for task in self.tasks:
            digest.update(task.name.encode())
            digest.update("\x00".join(task.class_names).encode())
            labels = np.ascontiguousarray(task.y, dtype=np.int64).tobytes() if task.labelled else b"\x00unlabelled"
            digest.update(labels)
            X = sp.csr_matrix(task.X) if sp.issparse(task.X) else np.ascontiguousarray(task.X)
            if sp.issparse(X):  # canonical already (Task): the hash reads it, never sorts it
                for part in (X.indptr, X.indices, X.data):
                    digest.update(np.ascontiguousarray(part).tobytes())
            else:
                digest.update(X.astype(np.float64, copy=False).tobytes())
            digest.update(str(task.X.shape).encode())
        return digest.hexdigest()

    def describe(self) -> str:
        """A tasks x classes table of counts plus the feature dimension ("unlabelled" for
        tasks without labels)."""
        lines = [f"{self.name}: {len(self.tasks)} tasks, {self.n_features} features"]
        for task in self.tasks:
            counts = ", ".join(f"{c} {n}" for c, n in task.class_counts().items()) if task.labelled else "unlabelled"
            lines.append(f"  {task.name} (n={task.n_samples}, k={task.n_clusters}): {counts}")
        return "\n".join(lines)
