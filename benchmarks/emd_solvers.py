"""EMD per solve: POT's network simplex (what MBC uses) against the literal LP (scipy's HiGHS).

    python benchmarks/emd_solvers.py [repeats]

For c x c cost matrices with uniform marginals, c in {3, 4, 10, 16} (the cluster counts of
our benchmarks), prints the mean time per solve of each route, their ratio, and the largest
cost difference (the optimal costs must agree; the plans may tie).
"""

import sys
import time

import numpy as np
from scipy.optimize import linprog

from mtc.numerics.transport import emd


def linprog_emd(cost, a, b):
    c_t, c_s = cost.shape
    constraints = np.vstack([np.kron(np.eye(c_t), np.ones((1, c_s))), np.kron(np.ones((1, c_t)), np.eye(c_s))])
    return linprog(cost.ravel(), A_eq=constraints, b_eq=np.concatenate([a, b]), bounds=(0, None), method="highs").fun


def timed(solve, problems):
    start = time.perf_counter()
    values = [solve(*problem) for problem in problems]
    return (time.perf_counter() - start) / len(problems), np.array(values)


def main(repeats: int = 200):
    rng = np.random.default_rng(0)
    print(f"{'c':>3s} {'POT ms':>8s} {'linprog ms':>11s} {'ratio':>7s} {'max |cost diff|':>16s}")
    for c in (3, 4, 10, 16):
        problems = [(rng.random((c, c)), np.full(c, 1 / c), np.full(c, 1 / c)) for _ in range(repeats)]
        pot_seconds, pot_costs = timed(lambda C, a, b: emd(C, a, b)[1], problems)
        lp_seconds, lp_costs = timed(linprog_emd, problems)
        print(f"{c:3d} {1e3 * pot_seconds:8.3f} {1e3 * lp_seconds:11.3f} {lp_seconds / pot_seconds:7.1f} "
              f"{np.abs(pot_costs - lp_costs).max():16.2e}")


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:]))
