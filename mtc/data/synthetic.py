"""Synthetic multi-task data: Gaussian clusters in one space, some shared across tasks.

Every task has ``n_clusters`` clusters; the first ``n_shared`` have the same centre in every
task (related tasks, positive transfer), the others have a centre of their own (negative
transfer when a method forces them together). Centres lie in the non-negative orthant on a
random support of ``support`` features, like topics in documents, so cosine affinities
separate them as well as Euclidean distances do.
"""

from __future__ import annotations

import numpy as np

from mtc.errors import InputError
from mtc.tasks import MultiTaskDataset, Task


def random_centre(rng: np.random.Generator, n_features: int, support: int, separation: float) -> np.ndarray:
    centre = np.zeros(n_features)
    on = rng.choice(n_features, size=support, replace=False)
    centre[on] = separation * np.abs(rng.standard_normal(support)) + separation
    return centre


def make_synthetic(n_tasks=3, n_clusters=4, n_shared=2, samples_per_cluster=50, n_features=40,
                   support=10, separation=3.0, noise=1.0, seed=0) -> MultiTaskDataset:
    for name, value, least in (("n_tasks", n_tasks, 1), ("n_clusters", n_clusters, 2),
                               ("samples_per_cluster", samples_per_cluster, 1), ("n_features", n_features, 1)):
        if value < least:
            raise InputError(f"{name} must be at least {least}, got {value}")
    if noise < 0:
        raise InputError(f"noise must be non-negative, got {noise}")
    if not 0 <= n_shared <= n_clusters:
        raise InputError(f"n_shared must be in [0, n_clusters={n_clusters}], got {n_shared}")
    if not 1 <= support <= n_features:
        raise InputError(f"support must be in [1, n_features={n_features}], got {support}")
    rng = np.random.default_rng(seed)
    shared = [random_centre(rng, n_features, support, separation) for _ in range(n_shared)]
    tasks = []
    for t in range(n_tasks):
        private = [random_centre(rng, n_features, support, separation) for _ in range(n_clusters - n_shared)]
        centres = np.array(shared + private)
        y = np.repeat(np.arange(n_clusters), samples_per_cluster)
        X = centres[y] + noise * rng.standard_normal((y.size, n_features))
        order = rng.permutation(y.size)
        names = [f"shared{c}" for c in range(n_shared)] + [f"task{t}_own{c}" for c in range(n_clusters - n_shared)]
        tasks.append(Task(f"task{t}", X[order], y[order], tuple(names)))
    return MultiTaskDataset("synthetic", tuple(tasks), {"n_shared": n_shared})
