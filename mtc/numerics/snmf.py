"""Symmetric NMF (Kuang, Ding & Park 2012): min_{Y >= 0} ||M - Y Y^T||_F^2.

Update rules (``rule``):
- ``sqrt``: Y <- Y * sqrt(MY / (Y Y^T Y)), MTCFIR Eq. 25 (the papers' default).
- ``plain``: Y <- Y * MY / (Y Y^T Y), MTCMRL Eq. 19 with lambda = 0 ("as printed").
- ``damped``: Y <- Y * (1/2 + MY / (2 Y Y^T Y)), Ding, He & Simon (2005).
- ``quarter``: Y <- Y * (MY / (Y Y^T Y))^(1/4), He, Xie & Zdunek (2011); the objective is
  provably non-increasing under this rule.
``sqrt`` and ``plain`` carry no descent guarantee; pair them with the ``relative`` stopping
rule, which does not stop on a rise.

Not any paper's rule, offered beside them because the multiplicative rules can need hundreds
of iterations (MTCFIR on Handdigits):
- ``hals``: Kuang, Yun & Park (2015)'s penalised form min_{W, H >= 0} ||M - W H^T||_F^2 +
  alpha ||W - H||_F^2 with alpha = max(M)^2 (their choice), solved by alternating W and H
  like their ANLS, each half-step one pass of exact column-wise minimisation (HALS: each
  column is the non-negative minimiser of a convex quadratic with the others fixed), so
  the penalised objective never rises. Their ANLS solves each half-step's non-negative
  least squares exactly by block principal pivoting, which has no vectorised scipy
  counterpart; one HALS pass costs one M product and k vector updates. The trace is
  ||M - H H^T||_F^2 at H, comparable with the other rules; labels are argmax of H.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from mtc.numerics.affinity import CosineProduct
from mtc.numerics.convergence import SingleFit, has_converged
from mtc.numerics.linalg import squared_norm
from mtc.numerics.thin import thin_product

UPDATE_RULES = ("sqrt", "plain", "damped", "quarter", "hals")
EPS = 1e-12  # only ever added to denominators


def snmf_objective(M: np.ndarray, Y: np.ndarray, MY: np.ndarray, M_sq: float) -> float:
    """||M - YY^T||_F^2 = ||M||^2 - 2 tr(Y^T M Y) + ||Y^T Y||^2, without forming YY^T."""
    YtY = Y.T @ Y
    return float(M_sq - 2.0 * np.sum(Y * MY) + np.sum(YtY * YtY))


def snmf_step(Y: np.ndarray, MY: np.ndarray, rule: str, YtY: np.ndarray | None = None) -> np.ndarray:
    """One multiplicative update of Y given MY = M @ Y (and Y'Y, when Y is a block of rows of
    the whole Y whose Y'Y it needs)."""
    ratio = MY / (Y @ (Y.T @ Y if YtY is None else YtY) + EPS)
    if rule == "sqrt":
        return Y * np.sqrt(ratio)  # MTCFIR Eq. 25
    if rule == "plain":
        return Y * ratio  # MTCMRL Eq. 19, lambda = 0
    if rule == "damped":
        return Y * (0.5 + 0.5 * ratio)
    if rule == "quarter":
        return Y * np.sqrt(np.sqrt(ratio))
    raise ValueError(f"unknown SNMF update {rule!r}; choose one of {UPDATE_RULES}")


def penalty_weight(M) -> float:
    """alpha = max(M)^2, Kuang, Yun & Park (2015)'s weight of ||W - H||_F^2."""
    return float(M.max()) ** 2


def penalised_objective(M, W: np.ndarray, H: np.ndarray, alpha: float, M_sq: float) -> float:
    """||M - W H^T||_F^2 + alpha ||W - H||_F^2, without forming W H^T."""
    return float(M_sq - 2.0 * np.sum(W * (M @ H)) + np.sum((W.T @ W) * (H.T @ H)) + alpha * np.sum((W - H) ** 2))


def hals_half_step(MH: np.ndarray, HtH: np.ndarray, W: np.ndarray, H: np.ndarray, alpha: float) -> np.ndarray:
    """W minimising ||M - W H^T||^2 + alpha ||W - H||^2 over one column at a time (W >= 0),
    given MH = M H and HtH = H^T H: w_j = max(0, (MH_j + alpha h_j - W HtH_j + w_j HtH_jj)
    / (HtH_jj + alpha))."""
    W = W.copy()
    for j in range(W.shape[1]):  # k columns, each vectorised over the samples
        numerator = MH[:, j] + alpha * H[:, j] - W @ HtH[:, j] + W[:, j] * HtH[j, j]
        W[:, j] = np.maximum(numerator / (HtH[j, j] + alpha), 0.0)
    return W


def snmf_hals(M, H, *, stopping="relative", tol=1e-4, max_iter=500) -> tuple[np.ndarray, SingleFit]:
    """The ``hals`` route (module docstring): alternate W and H from W = H; returns H.
    The start is first scaled to its best multiple c H (c^2 = tr(H'MH) / ||H'H||_F^2, the
    minimiser of ||M - c^2 HH'||): a start far from M's scale (k-means + 0.2 indicators
    against a similarity with small entries) otherwise drives whole columns to zero in the
    first pass, and a zero column never revives."""
    M_sq, alpha = squared_norm(M), penalty_weight(M)
    MH = M @ H
    HtH = H.T @ H
    scale = math.sqrt(max(float(np.sum(H * MH)), 0.0) / max(float(np.sum(HtH * HtH)), EPS))
    H, MH = H * scale, MH * scale
    W = H.copy()

    def advance(H, MH):
        nonlocal W
        W = hals_half_step(MH, H.T @ H, W, H, alpha)
        return hals_half_step(M @ W, W.T @ W, H, W, alpha)

    return iterate(M, H, MH, M_sq, advance, stopping, tol, max_iter)


def descend(state: tuple, step, objective, stopping: str, tol: float, max_iter: int) -> tuple[np.ndarray, SingleFit]:
    """state <- step(state) until the stopping rule holds on objective(state) or max_iter;
    state[0] is Y (the rest: the products an iteration carries to the next)."""
    trace = [objective(state)]
    converged = False
    for _ in range(max_iter):
        state = step(state)
        trace.append(objective(state))
        if has_converged(trace[-2], trace[-1], stopping, tol):
            converged = True
            break
    Y = state[0]
    return Y, SingleFit(np.argmax(Y, axis=1), np.array(trace), len(trace) - 1, converged)


def iterate(M, Y, MY, M_sq: float, advance, stopping: str, tol: float, max_iter: int) -> tuple[np.ndarray, SingleFit]:
    """Y <- advance(Y, M Y) until the stopping rule holds on ||M - YY^T||_F^2 or max_iter."""

    def step(state):
        Y = advance(*state)
        return Y, thin_product(M, Y)  # dense M: the bits of M @ Y, faster (mtc.numerics.thin)

    return descend((Y, MY), step, lambda state: snmf_objective(M, *state, M_sq), stopping, tol, max_iter)


PASS_BLOCK_BYTES = 2**19  # rows of N per block of iterate_one_pass: 512 KiB, kept in a core's L2 for both products


def iterate_one_pass(M, Y, rule: str, stopping: str, tol: float, max_iter: int) -> tuple[np.ndarray, SingleFit]:
    """``iterate`` with the update ``rule`` for M = N N' (+ R) of dense rows N (a
    CosineProduct), one pass over N per iteration instead of two: with Z = N'Y (d x k),
    M Y = N Z + R Y, so each block of rows N_b gives M Y_b = N_b Z + R_b Y, then the block's
    new rows Y_b (the update needs Y'Y of the whole Y, known before the pass), then its
    share N_b' Y_b of the next Z, while N_b is still in the core's cache. The objective
    ||M - YY'||^2 = ||M||^2 - 2 tr(Y'MY) + ||Y'Y||^2 with tr(Y'N N'Y) = ||Z||^2. The same
    iterates as ``iterate`` up to rounding (N'Y is summed block by block; tests: 1e-10 over
    hundreds of iterations). Handdigits' 5,000 x 1,024 mSDA features (MTCFIR-nI): N (N'Y)
    reads N twice (41 MB, more than the L3) in 17-21 ms, one pass 7-8 ms (one thread;
    benchmarks/mtcfir_steps.py prints both)."""
    N, R, M_sq = M.N, M.correction, M.squared_norm()
    Y = np.asarray(Y, dtype=np.float64)  # as ``iterate``'s updates, whatever the start's dtype
    rows = max(1, PASS_BLOCK_BYTES // (8 * N.shape[1]))
    starts = range(0, N.shape[0], rows)  # blocks of rows, not single samples

    def carried(Y, Z):  # (Y, Z = N'Y, R Y, Y'Y)
        return Y, Z, (R @ Y if R is not None else None), Y.T @ Y

    def step(state):
        Y, Z, RY, YtY = state
        Y_new, Z_new = np.empty_like(Y), np.zeros_like(Z)
        for start in starts:
            N_b = N[start:start + rows]
            MY_b = N_b @ Z
            if RY is not None:
                MY_b += RY[start:start + rows]
            Y_new[start:start + rows] = snmf_step(Y[start:start + rows], MY_b, rule, YtY)
            Z_new += N_b.T @ Y_new[start:start + rows]
        return carried(Y_new, Z_new)

    def objective(state):
        Y, Z, RY, YtY = state
        tr_YMY = float(np.sum(Z * Z)) + (float(np.sum(Y * RY)) if RY is not None else 0.0)
        return float(M_sq - 2.0 * tr_YMY + np.sum(YtY * YtY))

    return descend(carried(Y, N.T @ Y), step, objective, stopping, tol, max_iter)


def snmf(M, Y, *, update="sqrt", stopping="relative", tol=1e-4, max_iter=500) -> tuple[np.ndarray, SingleFit]:
    """Run SNMF from Y; returns (Y, fit) with fit.labels = argmax of each row of Y. M may be
    sparse (MTCFIR's l-neighbour similarities) or a product form with ``squared_norm()`` and
    ``max()`` (mtc.numerics.affinity.CosineProduct): every M Y is then O(nnz k) instead of
    O(n^2 k), and no n x n array is formed; of dense rows, one pass over them per iteration
    (iterate_one_pass)."""
    if update == "hals":
        return snmf_hals(M, Y, stopping=stopping, tol=tol, max_iter=max_iter)
    if isinstance(M, CosineProduct) and not sp.issparse(M.N):
        return iterate_one_pass(M, Y, update, stopping, tol, max_iter)
    M_sq = squared_norm(M)
    return iterate(M, Y, thin_product(M, Y), M_sq, lambda Y, MY: snmf_step(Y, MY, update), stopping, tol, max_iter)
