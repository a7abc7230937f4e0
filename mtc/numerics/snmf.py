"""Symmetric NMF (Kuang, Ding & Park 2012): min_{Y >= 0} ||M - Y Y^T||_F^2.

Update rules (``rule``):
- ``sqrt``: Y <- Y * sqrt(MY / (Y Y^T Y)), MTCFIR Eq. 25 (the papers' default).
- ``plain``: Y <- Y * MY / (Y Y^T Y), MTCMRL Eq. 19 with lambda = 0 ("as printed").
- ``damped``: Y <- Y * (1/2 + MY / (2 Y Y^T Y)), Ding, He & Simon (2005).
- ``quarter``: Y <- Y * (MY / (Y Y^T Y))^(1/4), He, Xie & Zdunek (2011); the objective is
  provably non-increasing under this rule.
``sqrt`` and ``plain`` carry no descent guarantee; pair them with the ``relative`` stopping
rule, which does not stop on a rise.
"""

from __future__ import annotations

import numpy as np

from mtc.numerics.convergence import SingleFit, has_converged
from mtc.numerics.linalg import squared_norm

UPDATE_RULES = ("sqrt", "plain", "damped", "quarter")
EPS = 1e-12  # only ever added to denominators


def snmf_objective(M: np.ndarray, Y: np.ndarray, MY: np.ndarray, M_sq: float) -> float:
    """||M - YY^T||_F^2 = ||M||^2 - 2 tr(Y^T M Y) + ||Y^T Y||^2, without forming YY^T."""
    YtY = Y.T @ Y
    return float(M_sq - 2.0 * np.sum(Y * MY) + np.sum(YtY * YtY))


def snmf_step(Y: np.ndarray, MY: np.ndarray, rule: str) -> np.ndarray:
    """One multiplicative update of Y given MY = M @ Y."""
    ratio = MY / (Y @ (Y.T @ Y) + EPS)
    if rule == "sqrt":
        return Y * np.sqrt(ratio)  # MTCFIR Eq. 25
    if rule == "plain":
        return Y * ratio  # MTCMRL Eq. 19, lambda = 0
    if rule == "damped":
        return Y * (0.5 + 0.5 * ratio)
    if rule == "quarter":
        return Y * np.sqrt(np.sqrt(ratio))
    raise ValueError(f"unknown SNMF update {rule!r}; choose one of {UPDATE_RULES}")


def snmf(M, Y, *, update="sqrt", stopping="relative", tol=1e-4, max_iter=500) -> tuple[np.ndarray, SingleFit]:
    """Run SNMF from Y; returns (Y, fit) with fit.labels = argmax of each row of Y. M may be
    sparse (MTCFIR's l-neighbour similarities): every M Y is then O(nnz k) instead of O(n^2 k)."""
    M_sq = squared_norm(M)
    MY = M @ Y
    trace = [snmf_objective(M, Y, MY, M_sq)]
    converged = False
    for _ in range(max_iter):
        Y = snmf_step(Y, MY, update)
        MY = M @ Y
        trace.append(snmf_objective(M, Y, MY, M_sq))
        if has_converged(trace[-2], trace[-1], stopping, tol):
            converged = True
            break
    return Y, SingleFit(np.argmax(Y, axis=1), np.array(trace), len(trace) - 1, converged)
