"""Stopping rules for iterative solvers and the result of one iterative fit.

``decrease`` is the papers' literal rule: stop once the objective decreased by less than
``tol`` (MTCMRL Sec. 4.7 uses tol = 1). It also stops at once when the objective rises,
which the printed SNMF updates do in their first iterations (docs/architecture.md,
"Numerics we have checked"). ``relative`` is robust to a rise: stop once
|f_prev - f| <= tol * max(|f_prev|, 1e-12).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

STOPPING_RULES = ("relative", "decrease")


class SingleFit(NamedTuple):
    """What one iterative fit on one task returns."""

    labels: np.ndarray
    trace: np.ndarray
    n_iter: int
    converged: bool
    start_labels: np.ndarray | None = None  # the labels of its starting point, when it starts from labels


def has_converged(previous: float, current: float, rule: str, tol: float) -> bool:
    if rule == "decrease":
        return previous - current < tol
    return abs(previous - current) <= tol * max(abs(previous), 1e-12)


def summed_traces(traces: list[np.ndarray]) -> np.ndarray:
    """Sum traces of unequal length, padding each with its last value."""
    length = max(len(trace) for trace in traces)
    padded = [np.pad(np.asarray(trace, float), (0, length - len(trace)), mode="edge") for trace in traces]
    return np.sum(padded, axis=0)
