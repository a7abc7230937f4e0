"""S-MKC on NG3: peak memory with and without folding duplicate rows, and the time of an
iteration against the time of its dominating kernel products.

    MTC_DATA_DIR=../shared/data python benchmarks/mkc_memory.py [iterations]   (default: 10)

NG3's three tasks share the posts of their common classes: 15,177 stacked rows, fewer
distinct ones. For ``fold_duplicates`` True and False, on one S-MKC setting (lambda = 0.5,
sigma = the median distance, parallel candidates, random one-hot + 0.2 start so that the
start costs nothing next to the kernel):

1. a first fit of one iteration, kernel included: wall time and tracemalloc peak (numpy
   reports its buffers to it), beside the size of the kernel matrix itself;
2. fits of 1 and 1 + ``iterations`` iterations with the kernel from the cache (stopping
   switched off): seconds per iteration = the difference / iterations;
3. the products K[:, task t] Z^t (one per task and iteration, shared by both candidates),
   each timed alone (best of 3), summed over the tasks;
4. whether both routes give the same labels and traces.

    MTC_DATA_DIR=../shared/data python benchmarks/mkc_memory.py --routes [threads]   (default: 1)

Issue 32's hot spot instead: one S-MKC fit on NG3 as a sweep worker runs it once the kernel
is in its cache (lambda = 0.5, the 100 iterations NG3's fits run: stopping off; a random
start, since a worker keeps each seed's k-means labels too and they cost the same on both
routes), with every task's kernel product of an iteration in one pass over K (``stacked``,
the default) and one product per task (``per_task``, the route before), alternated twice;
wall and process CPU seconds per fit, and the largest differences between the two routes'
traces and Z.
"""

import gc
import sys
import time
import tracemalloc

import numpy as np
from threadpoolctl import threadpool_limits

from mtc.cli import configured_dataset
from mtc.methods.mkc import MKC, SMKC
from mtc.numerics.cache import Cache
from mtc.numerics.seeding import indicator


def measured(step, trace=False):
    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    result = step()
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20 if trace else float("nan")
    if trace:
        tracemalloc.stop()
    return result, seconds, peak


def main(iterations: int):
    dataset = configured_dataset("ng3")
    matrices, ks = dataset.matrices, dataset.n_clusters
    print(f"ng3: tasks {[X.shape for X in matrices]}, clusters {ks}, {iterations} timed iterations")
    print(f"{'fold':5s} {'rows R':>7s} {'K MiB':>7s} {'first fit s':>11s} {'peak MiB':>9s} "
          f"{'s/iter':>7s} {'K Z s/iter':>10s} {'share':>6s}")
    fits = {}
    for fold in (True, False):
        cache = Cache(size=1)
        settings = dict(n_clusters=ks, init="random", tol=0.0, fold_duplicates=fold, cache=cache, random_state=0)
        first, first_seconds, peak = measured(lambda: SMKC(max_iter=1, **settings).fit(matrices), trace=True)
        kernel = next(iter(cache.results["mkc_kernel"].values()))
        _, one, _ = measured(lambda: SMKC(max_iter=1, **settings).fit(matrices))
        fit, more, _ = measured(lambda: SMKC(max_iter=1 + iterations, **settings).fit(matrices))
        per_iteration = (more - one) / iterations
        rng = np.random.default_rng(0)
        products = 0.0
        for t, k in enumerate(ks):
            Z = indicator(rng.integers(k, size=matrices[t].shape[0]), k, 0.2)
            products += min(measured(lambda: kernel.times(t, Z))[1] for _ in range(3))
        print(f"{str(fold):5s} {kernel.n_rows:7d} {kernel.K.nbytes / 2**20:7.1f} {first_seconds:11.2f} {peak:9.1f} "
              f"{per_iteration:7.3f} {products:10.3f} {products / per_iteration:6.0%}")
        fits[fold] = fit
        del first, kernel, cache, settings
        gc.collect()
    same = all(np.array_equal(a, b) for a, b in zip(fits[True].labels_, fits[False].labels_))
    gap = np.max(np.abs(fits[True].objective_trace_ - fits[False].objective_trace_) / fits[False].objective_trace_)
    print(f"folded vs full: labels identical {same}, largest relative J_st difference {gap:.1e}, "
          f"multi-task candidate kept in {fits[True].branch_trace_.mean():.0%} of task steps")


def routes(threads: int):
    dataset = configured_dataset("ng3")
    settings = dict(n_clusters=dataset.n_clusters, init="random", tol=0.0, cache=Cache(), random_state=0)
    with threadpool_limits(threads):
        start = time.perf_counter()
        SMKC(max_iter=1, **settings).fit(dataset.matrices)
        print(f"ng3 S-MKC, {threads} thread(s): the kernel, once per worker, {time.perf_counter() - start:.1f} s")
        fits = {}
        for route in ("per_task", "stacked") * 2:
            MKC._kernel_route = route
            wall, cpu = time.perf_counter(), time.process_time()
            fits[route] = SMKC(lambda_=0.5, max_iter=100, **settings).fit(dataset.matrices)
            print(f"  {route:8s}: {time.perf_counter() - wall:6.2f} s wall, {time.process_time() - cpu:6.2f} s CPU, "
                  f"{fits[route].n_iter_} iterations", flush=True)
    old, new = fits["per_task"], fits["stacked"]
    print(f"  labels identical {all(np.array_equal(a, b) for a, b in zip(old.labels_, new.labels_))}, "
          f"branches identical {np.array_equal(old.branch_trace_, new.branch_trace_)}, largest relative J_st "
          f"difference {np.max(np.abs(new.objective_trace_ / old.objective_trace_ - 1)):.1e}, largest |Z| "
          f"difference {max(np.max(np.abs(a - b)) for a, b in zip(old.Z_, new.Z_)):.1e}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--routes"]:
        routes(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
