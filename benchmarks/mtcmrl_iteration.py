"""Time per MTCMRL outer iteration (and per fit) on real corpora, one thread.

    MTC_DATA_DIR=../shared/data python benchmarks/mtcmrl_iteration.py [data ...]

Fits MTCMRL at the default parameters (lambda = alpha = 1, mu = beta = 0.5) with 3 seeds
and prints the set-up time, the mean time per outer iteration and the whole fit. The
seed-free part of the set-up (affinities, row-space basis, SVD factors) is kept per process
(one mtc.numerics.cache.Cache given to every fit), as in a sweep, and printed once as
"preparation"; the per-seed set-up left is the k-means initialisation.
"""

import sys
import time
from threadpoolctl import threadpool_limits

from mtc.cli import configured_dataset
from mtc.methods import MTCMRL
from mtc.numerics.cache import Cache


def main(names):
    print(f"{'data':10s} {'seed':>4s} {'iters':>5s} {'fit s':>7s} {'setup s':>8s} {'per iter ms':>11s}")
    for name in names:
        dataset = configured_dataset(name)
        cache = Cache()  # one per process, as a sweep worker's
        with threadpool_limits(1):
            MTCMRL(n_clusters=dataset.n_clusters, max_iter=0, row_space=False, cache=cache).fit(dataset.matrices)  # imports
            start = time.perf_counter()
            MTCMRL(n_clusters=dataset.n_clusters, max_iter=0, cache=cache).fit(dataset.matrices)
            print(f"{name:10s} preparation (once per process) + one set-up: {time.perf_counter() - start:.2f} s")
            for seed in range(3):
                setup = MTCMRL(n_clusters=dataset.n_clusters, max_iter=0, cache=cache, random_state=seed)
                start = time.perf_counter()
                setup.fit(dataset.matrices)
                setup_seconds = time.perf_counter() - start
                start = time.perf_counter()
                model = MTCMRL(n_clusters=dataset.n_clusters, cache=cache, random_state=seed).fit(dataset.matrices)
                fit_seconds = time.perf_counter() - start
                per_iter = (fit_seconds - setup_seconds) / max(model.n_iter_, 1)
                print(f"{name:10s} {seed:4d} {model.n_iter_:5d} {fit_seconds:7.2f} {setup_seconds:8.2f} {1e3 * per_iter:11.1f}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["reuters", "webkb4"])
