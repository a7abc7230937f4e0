"""Time per SMT-NMF iteration against its dominant product W @ V, one thread.

    MTC_DATA_DIR=../shared/data python benchmarks/smtnmf_iteration.py [data | synthetic:N ...]

One iteration is O(N^2 k): the product W V (N x N times N x k) plus O(N k^2 + N k) for VV'V,
the masses and the update, with no N x N temporary besides W. The script builds G once
(kept in a Cache, as in a sweep), fits the printed route (update=paper, adaptive alpha) and
the quarter_split route for a fixed number of iterations, and prints the time per iteration
next to the time of one W @ V at the same size; their ratio shows the overhead. An
instance sharing no term with any other is an InputError for SMT-NMF: such rows are dropped
here first (and counted).
"""

import sys
import time

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from mtc.cli import configured_dataset
from mtc.methods.smtnmf import SMTNMF, bipartite_affinity
from mtc.numerics.cache import Cache
from mtc.numerics.stacking import row_counts, split_rows, stack_rows


def keep_connected(matrices):
    """Drop the rows sharing no term with any other row (Eq. 3.10 gives them no edge)."""
    G = bipartite_affinity(stack_rows(matrices))
    connected = np.count_nonzero(G, axis=1) > 0
    parts = split_rows(np.arange(G.shape[0]), row_counts(matrices))
    return [X[connected[rows]] for X, rows in zip(matrices, parts)], int((~connected).sum())


def best_of(repeats, run):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def load(name):
    """A data config, or "synthetic:N": two tasks of N/2 sparse non-negative rows (make_synthetic
    thresholded at 1.5, about 20% non-zero), to see the O(N^2 k) regime at larger N."""
    if name.startswith("synthetic:"):
        from mtc.data.synthetic import make_synthetic

        N = int(name.split(":")[1])
        data = make_synthetic(n_tasks=2, n_clusters=2, n_shared=1, samples_per_cluster=N // 4, n_features=200,
                              support=30, seed=0)
        return [np.where(X > 1.5, X, 0.0) for X in data.matrices], 2
    dataset = configured_dataset(name)
    return dataset.matrices, dataset.n_clusters[0]


def main(names, iterations=100):
    print(f"{'data':32s} {'N':>5s} {'k':>2s} {'route':>14s} {'setup ms':>9s} {'iter ms':>8s} {'W@V ms':>7s} {'ratio':>6s}")
    for name in names:
        raw, k = load(name)
        matrices, dropped = keep_connected([sp.csr_matrix(X) for X in raw])
        cache = Cache()
        with threadpool_limits(1):
            start = time.perf_counter()
            SMTNMF(n_clusters=k, max_iter=1, cache=cache).fit(matrices)
            g_seconds = time.perf_counter() - start
            N = sum(row_counts(matrices))
            W = np.random.default_rng(0).random((N, N))
            V = np.random.default_rng(1).random((N, k))
            product = best_of(20, lambda: W @ V)
            for route in ({"update": "paper"}, {"update": "quarter_split", "alpha": 1.0}):
                setup = best_of(3, lambda: SMTNMF(n_clusters=k, max_iter=1, tol=0, cache=cache, **route).fit(matrices))
                full = best_of(3, lambda: SMTNMF(n_clusters=k, max_iter=iterations + 1, tol=0, cache=cache,
                                                 **route).fit(matrices))
                per_iter = (full - setup) / iterations
                print(f"{name:32s} {N:5d} {k:2d} {route['update']:>14s} {1e3 * setup:9.2f} {1e3 * per_iter:8.3f} "
                      f"{1e3 * product:7.3f} {per_iter / product:6.2f}")
        print(f"{name}: G built once in {1e3 * g_seconds:.1f} ms (first fit, cached after); "
              f"{dropped} row(s) without a shared term dropped")


if __name__ == "__main__":
    main(sys.argv[1:] or ["smtnmf_reuters_orgs_vs_people", "synthetic:4000"])
