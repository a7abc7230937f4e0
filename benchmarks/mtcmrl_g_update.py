"""Time of one MTCMRL G^(t,s) update for h_t = h_s = h (the paper's Fig. 3 experiment).

    python benchmarks/mtcmrl_g_update.py [max_seconds_per_solve]

For h in {5, 15, ..., 95}: the row-wise simplex projection, the paper's QP on the whole
h^2 vector (scipy trust-constr) and Frank-Wolfe, on A_ij = squared distances between random
weight columns, beta = 0.5, one thread. A solver is skipped at larger h once one solve
took longer than max_seconds_per_solve (default 120).
"""

import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

from mtc.methods.mtcmrl import sq_distances
from mtc.numerics.simplex import G_SOLVERS, rowwise_objective, solve_simplex_rows


def timed(solver, A, beta):
    repeats = 200 if solver == "projection" else 1
    start = time.perf_counter()
    for _ in range(repeats):
        G = solve_simplex_rows(A, beta, solver)
    return (time.perf_counter() - start) / repeats, G


def main(cap: float = 120.0):
    rng = np.random.default_rng(0)
    beta = 0.5
    skipped = set()
    print(f"{'h':>3s} " + " ".join(f"{s + ' s':>16s}" for s in G_SOLVERS) + f" {'qp / projection':>16s}  max |obj - obj_proj|")
    with threadpool_limits(1):
        for h in range(5, 100, 10):
            A = sq_distances(rng.normal(size=(500, h)), rng.normal(size=(500, h))) / 500
            times, objectives = {}, {}
            for solver in G_SOLVERS:
                if solver in skipped:
                    continue
                times[solver], G = timed(solver, A, beta)
                objectives[solver] = rowwise_objective(A, G, beta)
                if times[solver] > cap:
                    skipped.add(solver)
            cells = [f"{times[s]:16.6f}" if s in times else f"{'skipped':>16s}" for s in G_SOLVERS]
            ratio = f"{times['qp'] / times['projection']:16.0f}" if "qp" in times else f"{'-':>16s}"
            gap = max(abs(v - objectives["projection"]) for v in objectives.values())
            print(f"{h:3d} " + " ".join(cells) + f" {ratio}  {gap:.2e}", flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 120.0)
