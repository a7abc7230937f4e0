"""Row-wise problems on the probability simplex: min_g a^T g + beta ||g||^2, g >= 0, sum g = 1.

This is MTCMRL's G subproblem (Eq. 4-5): the QP with P = 2 beta I separates by rows, and
each row's minimiser is the Euclidean projection of -a / (2 beta) onto the simplex. Three
solvers: the projection (exact, vectorised), the paper's general QP (on the whole h_t h_s
vector, Eq. 5) and Frank-Wolfe (the paper's alternative, Sec. 3.6).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, minimize

G_SOLVERS = ("projection", "qp", "frank_wolfe")


def project_rows_to_simplex(V: np.ndarray) -> np.ndarray:
    """Euclidean projection of every row of V onto {g >= 0, sum g = 1} (sort-based, exact)."""
    U = -np.sort(-V, axis=1)
    css = np.cumsum(U, axis=1) - 1.0
    ks = np.arange(1, V.shape[1] + 1)
    rho = np.count_nonzero(U - css / ks > 0, axis=1)  # the condition holds for a prefix of ks
    theta = css[np.arange(V.shape[0]), rho - 1] / rho
    return np.maximum(V - theta[:, None], 0.0)


def rowwise_objective(A: np.ndarray, G: np.ndarray, beta: float) -> float:
    return float(np.sum(A * G) + beta * np.sum(G * G))


def solve_by_projection(A: np.ndarray, beta: float) -> np.ndarray:
    if beta == 0:  # the LP limit: all mass on the smallest entry of each row
        G = np.zeros_like(A)
        G[np.arange(A.shape[0]), np.argmin(A, axis=1)] = 1.0
        return G
    return project_rows_to_simplex(-A / (2.0 * beta))


def solve_by_qp(A: np.ndarray, beta: float) -> np.ndarray:
    """Eq. 5 literally: min 1/2 g^T P g + f^T g, P = 2 beta I, one equality per row, 0 <= g <= 1,
    over the whole h_t h_s vector, by a general sparse QP-capable solver (scipy's
    trust-constr; SLSQP is dense and took about a minute already at h_t = h_s = 35)."""
    h_t, h_s = A.shape
    f = A.ravel()
    rows = sp.kron(sp.eye(h_t), np.ones((1, h_s)), format="csr")
    hessian = sp.eye(f.size, format="csr") * (2.0 * beta)
    result = minimize(lambda g: beta * g @ g + f @ g, np.full(f.size, 1.0 / h_s), jac=lambda g: 2.0 * beta * g + f,
                      hess=lambda g: hessian, method="trust-constr", bounds=Bounds(0.0, 1.0),
                      constraints=[LinearConstraint(rows, 1.0, 1.0)], options={"gtol": 1e-10, "xtol": 1e-12})
    return np.clip(result.x.reshape(h_t, h_s), 0.0, 1.0)


def solve_by_frank_wolfe(A: np.ndarray, beta: float, max_iter: int = 5000, tol: float = 1e-12) -> np.ndarray:
    """Frank-Wolfe over the product of row simplices, exact line search per row."""
    n_rows = A.shape[0]
    G = np.full_like(A, 1.0 / A.shape[1])
    for _ in range(max_iter):
        grad = A + 2.0 * beta * G
        vertex = np.zeros_like(G)
        vertex[np.arange(n_rows), np.argmin(grad, axis=1)] = 1.0
        direction = vertex - G
        gap = -np.sum(grad * direction, axis=1)
        if gap.max() <= tol:
            break
        curvature = 2.0 * beta * np.sum(direction * direction, axis=1)
        step = np.where(curvature > 0, np.clip(gap / np.maximum(curvature, 1e-300), 0.0, 1.0), 1.0)
        G = G + step[:, None] * direction
    return G


def solve_simplex_rows(A: np.ndarray, beta: float, solver: str = "projection") -> np.ndarray:
    if solver == "projection":
        return solve_by_projection(A, beta)
    if solver == "qp":
        return solve_by_qp(A, beta)
    if solver == "frank_wolfe":
        return solve_by_frank_wolfe(A, beta)
    raise ValueError(f"unknown g_solver {solver!r}; choose one of {G_SOLVERS}")
