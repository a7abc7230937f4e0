"""One fresh fit of a method on a benchmark, one thread, in units of a 2000^3 fp64 GEMM timed in
the same process: a figure that travels between machines and holds on a busy one (both are CPU
seconds of one thread, so another job slows them alike).

    MTC_DATA_DIR=../shared/data python benchmarks/fit_units.py METHOD DATA [key=value ...] [--seeds 0 1 2]

METHOD and DATA are config names (conf/method, conf/data), the key=value pairs the solver's
parameters at the point to time (e.g. ``mtcmrl 20ng alpha=4 lambda_=2``). Each seed is a fresh
fit: no cache, so every seed-free step (affinities, eigendecompositions, k-means starts) is paid,
as by the first fit of a sweep's worker. Prints per seed the CPU seconds, the units and the
iterations, then the GEMM's own time before and after (the unit is their mean).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import yaml
from threadpoolctl import threadpool_limits

from mtc.cli import compose_config
from mtc.config import settings

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
    parser.add_argument("point", nargs="*", help="key=value: the solver's parameters at the timed point")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    point = {key: yaml.safe_load(value) for key, value in (item.split("=", 1) for item in args.point)}
    run = settings(compose_config([f"method={args.method}", f"data={args.data}"]))
    dataset = run.data.load()
    prototype = run.method.prototype(n_clusters=dataset.n_clusters)
    with threadpool_limits(1):
        before = gemm_seconds()
        fits = []
        for seed in args.seeds:
            solver = prototype.set_params(**point, random_state=seed)
            start = time.process_time()
            solver.fit(dataset.matrices)
            fits.append((seed, time.process_time() - start, solver.n_iter_))
        after = gemm_seconds()
    unit = (before + after) / 2
    label = ",".join(args.point) or "defaults"
    print(f"{args.method} on {args.data} ({label}), a fresh fit on one thread; unit: one {GEMM_SIZE}^3 fp64 GEMM")
    print(f"{'seed':>4s} {'CPU s':>7s} {'units':>6s} {'iters':>5s}")
    for seed, seconds, iterations in fits:
        print(f"{seed:4d} {seconds:7.2f} {seconds / unit:6.1f} {iterations:5d}")
    seconds = [s for _, s, _ in fits]
    print(f"mean {np.mean(seconds):.2f} s, {np.mean(seconds) / unit:.1f} units "
          f"(GEMM {before:.3f} s before, {after:.3f} s after)")


if __name__ == "__main__":
    main()
