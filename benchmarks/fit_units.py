"""Fresh fits of a method on a benchmark, one thread, in units of a 2000^3 fp64 GEMM timed in
the same process: a figure that travels between machines and holds on a busy one (both are CPU
seconds of one thread, so another job slows them alike).

    MTC_DATA_DIR=../shared/data python benchmarks/fit_units.py METHOD DATA [key=value[,value...] ...]
                                                                  [--seeds 0 1 2] [--cache]

METHOD and DATA are config names (conf/method, conf/data), the key=value pairs the solver's
parameters at the points to time (e.g. ``mtcmrl 20ng alpha=4 lambda_=2``; a comma list gives
several points, every combination, e.g. ``mtcfir 20ng corruption=0.5 neighbour_ratio=0.1,0.3``).
Every point is fitted with every seed, in that order. Without ``--cache`` each fit is fresh:
every seed-free step (affinities, eigendecompositions, k-means starts) is paid, as by the first
fit of a sweep's worker. With ``--cache`` the fits share one mtc.numerics.cache.Cache, as the
fits of a worker do, and each line adds the cached steps that fit computed. Prints per fit the
CPU seconds, the units and the iterations, then the GEMM's own time before and after (the unit
is their mean).
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
import yaml
from threadpoolctl import threadpool_limits

from mtc.cli import compose_config
from mtc.config import settings
from mtc.numerics.cache import Cache

GEMM_SIZE = 2000


def gemm_seconds(repeats: int = 3) -> float:
    """Best CPU seconds of one GEMM_SIZE^3 fp64 product on this thread."""
    A = np.random.default_rng(0).random((GEMM_SIZE, GEMM_SIZE))
    A @ A  # the first call pays for the library's set-up
    best = np.inf
    for _ in range(repeats):
        start = time.process_time()
        A @ A
        best = min(best, time.process_time() - start)
    return best


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("method")
    parser.add_argument("data")
    parser.add_argument("point", nargs="*", help="key=value[,value...]: the solver's parameters at the timed points")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--cache", action="store_true", help="the fits share one Cache, as a sweep worker's")
    return parser.parse_args(argv)


def points(items: list[str]) -> list[dict]:
    """Every combination of the ``key=value[,value...]`` items."""
    grid = {key: [yaml.safe_load(value) for value in values.split(",")]
            for key, values in (item.split("=", 1) for item in items)}
    return [dict(zip(grid, values)) for values in itertools.product(*grid.values())]


def main(argv=None) -> None:
    args = parse_args(argv)
    run = settings(compose_config([f"method={args.method}", f"data={args.data}"]))
    datasets = {seed: run.data.load(seed) for seed in args.seeds}  # a per-seed composition: each seed's draw
    prototype = run.method.prototype(n_clusters=datasets[args.seeds[0]].n_clusters)
    cache = Cache() if args.cache else None
    fits = []
    with threadpool_limits(1):
        before = gemm_seconds()
        for point, seed in itertools.product(points(args.point), args.seeds):
            solver = prototype.set_params(**point, random_state=seed)
            if cache is not None:
                solver.set_params(cache=cache)
            steps_before = {} if cache is None else dict(cache.compute_seconds)
            start = time.process_time()
            solver.fit(datasets[seed].matrices)
            seconds = time.process_time() - start
            steps = {} if cache is None else {step: total - steps_before.get(step, 0.0)
                                              for step, total in cache.compute_seconds.items()
                                              if total > steps_before.get(step, 0.0)}
            fits.append((point, seed, seconds, solver.n_iter_, steps))
        after = gemm_seconds()
    unit = (before + after) / 2
    print(f"{args.method} on {args.data}, {'fits sharing one Cache' if cache else 'fresh fits'} on one thread; "
          f"unit: one {GEMM_SIZE}^3 fp64 GEMM")
    print(f"{'point':40s} {'seed':>4s} {'CPU s':>7s} {'units':>6s} {'iters':>5s}  steps computed (s)")
    for point, seed, seconds, iterations, steps in fits:
        label = ",".join(f"{key}={value}" for key, value in point.items()) or "defaults"
        computed = ", ".join(f"{step} {value:.2f}" for step, value in steps.items())
        print(f"{label:40s} {seed:4d} {seconds:7.2f} {seconds / unit:6.1f} {iterations:5d}  {computed}")
    seconds = [fit[2] for fit in fits]
    print(f"mean {np.mean(seconds):.2f} s, {np.mean(seconds) / unit:.1f} units "
          f"(GEMM {before:.3f} s before, {after:.3f} s after)")


if __name__ == "__main__":
    main()
