"""Kernel k-means on a benchmark, by route: how long a fit takes and whether the iterates agree.

    MTC_DATA_DIR=../shared/data python benchmarks/kernel_kmeans_routes.py [--data ng3] [--width 10] [--seed 0]

On one thread (threadpoolctl), the fit as a sweep runs it (``KernelKMeans``, absolute sigma, its
``n_init`` restarts per task), with each of three routes:

- ``dense K, literal``: the kernel from the rows made dense (``gaussian_affinity``, today's), K H
  computed again every Lloyd iteration;
- ``dense K, incremental``: the same kernel, K H updated from the samples that moved (the default);
- ``sparse K, incremental``: the kernel from the sparse rows (scikit-learn's
  ``euclidean_distances`` on them), not a route of the package: printed to show what it would
  change (the same K to rounding, not always the same labels).

Prints each route's fit time and accuracy per task, and the largest difference between the
sparse and dense kernels of every task.
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np
from sklearn.metrics.pairwise import euclidean_distances
from threadpoolctl import threadpool_limits

from mtc.cli import compose_config
from mtc.data.spec import data_spec
from mtc.methods import KernelKMeans
from mtc.methods import kernel_kmeans as kk
from mtc.metrics import accuracy
from mtc.numerics.affinity import gaussian_sigma2, median_positive


def sparse_gaussian_affinity(X, width: float = 1.0, mode: str = "relative") -> np.ndarray:
    """The Gaussian kernel from the rows as given (sparse stays sparse)."""
    D2 = euclidean_distances(X, squared=True)
    return np.exp(-D2 / (2.0 * gaussian_sigma2(width, mode, lambda: median_positive(D2))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="ng3")
    parser.add_argument("--width", type=float, default=10.0, help="sigma (absolute)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    dataset = data_spec(compose_config([f"data={args.data}"]).data).load(0)
    dense_affinity, lloyd = kk.gaussian_affinity, kk.kernel_kmeans_lloyd
    with threadpool_limits(1):
        for X in dataset.matrices:
            gap = np.abs(sparse_gaussian_affinity(X, args.width, "absolute") - dense_affinity(X, args.width, "absolute")).max()
            print(f"task {X.shape}: largest |K sparse - K dense| {gap:.1e}")
        routes = {"dense K, literal": (dense_affinity, False), "dense K, incremental": (dense_affinity, True),
                  "sparse K, incremental": (sparse_gaussian_affinity, True)}
        try:
            for name, (affinity, incremental) in routes.items():
                kk.gaussian_affinity = affinity
                kk.kernel_kmeans_lloyd = functools.partial(lloyd, incremental=incremental)
                start = time.perf_counter()
                solver = KernelKMeans(n_clusters=dataset.n_clusters, kernel_width=args.width, width_mode="absolute",
                                      random_state=args.seed).fit(dataset.matrices)
                scores = [round(accuracy(task.y, labels), 4) for task, labels in zip(dataset.tasks, solver.labels_)]
                print(f"{name}: fit {time.perf_counter() - start:.1f} s, acc per task {scores}", flush=True)
        finally:
            kk.gaussian_affinity, kk.kernel_kmeans_lloyd = dense_affinity, lloyd


if __name__ == "__main__":
    main()
