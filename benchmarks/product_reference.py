"""What a solver's dominant products cost on this machine, timed in the same run as the
solver, so a benchmark can print its time per iteration beside the time of the products it
cannot avoid, and the ratio.

A product is named by its operand: a dense matrix (a GEMM with an n x h right-hand side of
random numbers) or a sparse one (an SpMM). Each is timed on its own, best of ``repeats``,
on the real operand of the fit (shapes and sparsity patterns matter: the skinny products of
these solvers are memory-bound, so a peak GFLOP/s figure would mislead).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class Product:
    """``operand @ (a random matrix with `columns` columns)``, counted ``count`` times per
    iteration; ``name`` says what it is in the solver."""

    name: str
    operand: object
    columns: int
    count: int = 1

    @property
    def kind(self) -> str:
        return "SpMM" if sp.issparse(self.operand) else "GEMM"

    def seconds(self, repeats: int = 5) -> float:
        """Best wall time of one product."""
        right = np.random.default_rng(0).random((self.operand.shape[1], self.columns))
        best = np.inf
        for _ in range(repeats):
            start = time.perf_counter()
            self.operand @ right
            best = min(best, time.perf_counter() - start)
        return best


def reference_seconds(products: list[Product], repeats: int = 5) -> tuple[float, dict[str, float]]:
    """Seconds per iteration of the products (each timed, times its count) and the total by
    kind (GEMM, SpMM)."""
    by_kind: dict[str, float] = {}
    for product in products:
        by_kind[product.kind] = by_kind.get(product.kind, 0.0) + product.count * product.seconds(repeats)
    return sum(by_kind.values()), by_kind


def reference_line(label: str, per_iteration: float, products: list[Product]) -> str:
    """One printed line: the measured time per iteration, the products' time, their ratio."""
    total, by_kind = reference_seconds(products)
    kinds = " + ".join(f"{kind} {1e3 * seconds:.3g}" for kind, seconds in sorted(by_kind.items()))
    return (f"{label}: {1e3 * per_iteration:.3g} ms per iteration; its {sum(p.count for p in products)} dominant "
            f"products {1e3 * total:.3g} ms ({kinds}); ratio {per_iteration / total:.2f}")
