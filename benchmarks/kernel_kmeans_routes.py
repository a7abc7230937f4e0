"""Kernel k-means on a benchmark, by route: how long a fit takes and whether the iterates agree.

    MTC_DATA_DIR=../shared/data python benchmarks/kernel_kmeans_routes.py [--data ng3] [--width 10] [--seed 0] \
        [--components 500]

On one thread (threadpoolctl), the fit as a sweep runs it (``KernelKMeans``, absolute sigma, its
``n_init`` restarts per task), with each of four routes:

- ``dense rows, literal``: the kernel from the rows made dense (``gaussian_affinity`` of the
  dense copy, the package's route before the sparse one), K H computed again every Lloyd
  iteration;
- ``dense rows, incremental``: the same kernel, K H updated from the samples that moved;
- ``sparse rows, incremental``: the package's route, the kernel from the sparse rows
  (scikit-learn's ``euclidean_distances`` on them, no dense copy): the same K to rounding, not
  always the same labels;
- ``nystroem``: ``route="nystroem"`` with ``--components`` rows drawn per task, an approximation
  of the kernel (not the paper's method, off by default).

Prints each route's fit time and accuracy per task, and the largest difference between the
kernels from the sparse and the dense rows of every task.

    MTC_DATA_DIR=../shared/data python benchmarks/kernel_kmeans_routes.py --data ng1 --accuracy 500 1000

instead compares the Nyström route (each listed number of components) with the dense route:
mean accuracy over tasks, mean +- std over seeds 0-2, at sigma = 10 absolute (the AAAI-13 grid's)
and at the relative width 1 (the package's default), one thread, with the time per fit.
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np
from threadpoolctl import threadpool_limits

from mtc.cli import compose_config
from mtc.data.spec import data_spec
from mtc.methods import KernelKMeans
from mtc.methods import kernel_kmeans as kk
from mtc.metrics import accuracy
from mtc.numerics.affinity import gaussian_affinity
from mtc.numerics.linalg import as_dense


def dense_rows_affinity(X, width: float = 1.0, mode: str = "relative") -> np.ndarray:
    """The Gaussian kernel from the rows made dense (the package's route before the sparse one)."""
    return gaussian_affinity(as_dense(X), width, mode)


def route_accuracy(dataset, components: list[int], seeds: int = 3) -> None:
    """The dense route against the Nyström route with each of ``components`` (module docstring)."""
    for width, mode in ((10.0, "absolute"), (1.0, "relative")):
        for params in [{}] + [{"route": "nystroem", "n_components": m} for m in components]:
            start, scores = time.perf_counter(), []
            for seed in range(seeds):
                solver = KernelKMeans(n_clusters=dataset.n_clusters, kernel_width=width, width_mode=mode,
                                      random_state=seed, **params).fit(dataset.matrices)
                scores.append(np.mean([accuracy(task.y, labels) for task, labels in zip(dataset.tasks, solver.labels_)]))
            route = f"nystroem, m = {params['n_components']}" if params else "dense"
            print(f"sigma {width:g} ({mode}), {route}: mean acc over tasks {np.mean(scores):.4f} +- {np.std(scores):.4f} "
                  f"over seeds 0-{seeds - 1}, {(time.perf_counter() - start) / seeds:.1f} s a fit", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="ng3")
    parser.add_argument("--width", type=float, default=10.0, help="sigma (absolute)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--components", type=int, default=500, help="rows drawn by the Nyström route")
    parser.add_argument("--accuracy", type=int, nargs="+", metavar="M", default=None,
                        help="only compare the dense route's accuracy with the Nyström route's at these components")
    args = parser.parse_args()
    dataset = data_spec(compose_config([f"data={args.data}"]).data).load(0)
    if args.accuracy:
        with threadpool_limits(1):
            route_accuracy(dataset, args.accuracy)
        return
    lloyd = kk.kernel_kmeans_lloyd
    with threadpool_limits(1):
        for X in dataset.matrices:
            gap = np.abs(gaussian_affinity(X, args.width, "absolute") - dense_rows_affinity(X, args.width, "absolute")).max()
            print(f"task {X.shape}: largest |K sparse rows - K dense rows| {gap:.1e}")
        nystroem = {"route": "nystroem", "n_components": args.components}
        routes = {"dense rows, literal": (dense_rows_affinity, False, {}),
                  "dense rows, incremental": (dense_rows_affinity, True, {}),
                  "sparse rows, incremental": (gaussian_affinity, True, {}),
                  f"nystroem, m = {args.components}": (gaussian_affinity, True, nystroem)}
        try:
            for name, (affinity, incremental, params) in routes.items():
                kk.gaussian_affinity = affinity
                kk.kernel_kmeans_lloyd = functools.partial(lloyd, incremental=incremental)
                start = time.perf_counter()
                solver = KernelKMeans(n_clusters=dataset.n_clusters, kernel_width=args.width, width_mode="absolute",
                                      random_state=args.seed, **params).fit(dataset.matrices)
                scores = [round(accuracy(task.y, labels), 4) for task, labels in zip(dataset.tasks, solver.labels_)]
                print(f"{name}: fit {time.perf_counter() - start:.1f} s, acc per task {scores}", flush=True)
        finally:
            kk.gaussian_affinity, kk.kernel_kmeans_lloyd = gaussian_affinity, lloyd


if __name__ == "__main__":
    main()
