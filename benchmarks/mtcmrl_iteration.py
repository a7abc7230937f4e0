"""Time per MTCMRL outer iteration (and per fit) on real corpora, one thread, beside the
time of the products each iteration cannot avoid.

    MTC_DATA_DIR=../shared/data python benchmarks/mtcmrl_iteration.py [data ...]

Fits MTCMRL at the default parameters (lambda = alpha = 1, mu = beta = 0.5) with 3 seeds
and prints the set-up time, the mean time per outer iteration and the whole fit. The
seed-free part of the set-up (affinities, row-space basis, SVD factors) is kept per process
(one mtc.numerics.cache.Cache given to every fit), as in a sweep, and printed once as
"preparation"; the per-seed set-up left is the k-means initialisation. Then, per data set,
the dominant products of one iteration (per task: X W and M Y of the Y step, X'Y and the
ridge solve's two products with V, or four with X and U, of the W step) are timed on the
fit's own operands (benchmarks/product_reference.py) and compared with the measured
iteration: the ratio says how far the iteration is from its products.
"""

import sys
import time

from threadpoolctl import threadpool_limits

from mtc.cli import configured_dataset
from mtc.methods import MTCMRL
from mtc.numerics.affinity import CosineProduct
from mtc.numerics.cache import Cache

from product_reference import Product, reference_line


def iteration_products(cache: Cache, matrices, n_clusters) -> list[Product]:
    """The dominant products of one outer iteration, on the prepared operands."""
    (preparation,) = cache.results["mtcmrl_preparation"].values()
    M, _, space, factors, _ = preparation
    X = space.Z if space is not None else matrices
    products = []
    for Xt, Mt, factor, h in zip(X, M, factors, n_clusters):
        products += [Product("X W", Xt, h), Product("X'Y", Xt.T, h)]
        if isinstance(Mt, CosineProduct):
            products += [Product("N'Y", Mt.N.T, h), Product("N (N'Y)", Mt.N, h)]
            products += [] if Mt.correction is None else [Product("R Y", Mt.correction, h)]
        else:
            products.append(Product("M Y", Mt, h))
        if factor.V is None:
            products += [Product("X B", Xt, h), Product("U'(X B)", factor.U.T, h), Product("U z", factor.U, h),
                         Product("X'(U z)", Xt.T, h)]
        else:
            products += [Product("V'B", factor.V.T, h), Product("V z", factor.V, h)]
    return products


def main(names):
    print(f"{'data':10s} {'seed':>4s} {'iters':>5s} {'fit s':>7s} {'setup s':>8s} {'per iter ms':>11s}")
    for name in names:
        dataset = configured_dataset(name)
        cache = Cache()  # one per process, as a sweep worker's
        per_iteration = []
        with threadpool_limits(1):
            MTCMRL(n_clusters=dataset.n_clusters, max_iter=0, row_space=False).fit(dataset.matrices)  # imports
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
                per_iteration.append((fit_seconds - setup_seconds) / max(model.n_iter_, 1))
                print(f"{name:10s} {seed:4d} {model.n_iter_:5d} {fit_seconds:7.2f} {setup_seconds:8.2f} "
                      f"{1e3 * per_iteration[-1]:11.1f}")
            products = iteration_products(cache, dataset.matrices, dataset.n_clusters)
            print(reference_line(f"{name:10s} mean of 3 seeds", sum(per_iteration) / len(per_iteration), products))


if __name__ == "__main__":
    main(sys.argv[1:] or ["reuters", "webkb4", "20ng"])
