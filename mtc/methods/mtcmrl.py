"""MTCMRL: multi-task clustering with model relation learning (Zhang et al., IJCAI-18).

Notation (ours: X^t is n_t x d, rows = samples; the paper's X^t is its transpose):
Y^t >= 0 (n_t x h_t) cluster indicators, W^t (d x h_t) regression weights, G^(t,s)
(h_t x h_s) cluster relatedness with rows on the probability simplex, A^(t,s)_ij =
||W^t_i - W^s_j||^2. The objective, Eq. 3:

  J = sum_t [ 1/2 ||M^t - Y^t Y^t'||^2 + lambda ||Y^t - X^t W^t||^2 + mu ||W^t||^2 ]
      + alpha sum_{t != s} [ <A^(t,s), G^(t,s)> + beta ||G^(t,s)||^2 ]

Algorithm 1 sweeps the tasks; for task t it updates every G^(t,s), then W^t, then Y^t.

G (Eq. 4-5): separable by rows; row i = projection of -A_i / (2 beta) onto the simplex
(`g_solver="projection"`); the paper's QP and Frank-Wolfe stay reachable.

W (Eq. 6-13). The paper's Eq. 6-7 keep only the pairs (t, s) in which W^t is the first
argument. W^t also enters the pairs (s, t) of Eq. 3; keeping them (``w_update="exact"``)
makes the step the exact minimiser of Eq. 3 in W^t. Setting the gradient to zero:

  lambda X'X W + W C = lambda X'Y + alpha R,                                     (*)
  C = mu I + alpha sum_s (H^(t,s) + D^(s,t)),  R = sum_s (W^s G^(t,s)' + W^s G^(s,t)),

with H^(t,s) = diag(row sums of G^(t,s)) (= I on the simplex) and D^(s,t) = diag(column
sums of G^(s,t)). ``w_update="paper"`` drops the (s, t) terms (D = 0 and R = sum_s W^s
G^(t,s)'), as Eq. 7 prints. C is diagonal, so (*) decouples by columns into ridge systems
(lambda X'X + c_j I) w_j = b_j sharing X: with the thin SVD X = U S V' (once per fit),
w_j = V diag(1/(lambda s^2 + c_j)) V'b_j + (b_j - V V'b_j) / c_j (``w_solver="ridge"``;
the SVD comes from the n_t x n_t Gram matrix, cheap for documents where n_t << d).
The paper's route (``w_solver="sylvester"``) solves the dual Sylvester equation Eq. 13
for the multipliers Gamma (n_t x h_t): X X' Gamma + Gamma K / (2 lambda) = Y K - 2 alpha X R
with K = 2C, then W = (X' Gamma + 2 alpha R) K^-1 (Eq. 10); both give the same W.

Y (Eq. 14-19): with Q = X W = Q+ - Q-, Eq. 19 is
Y <- Y * (M Y + lambda Q+) / (Y Y'Y + lambda Y + lambda Q-) (``y_update="paper"``); like
the plain SNMF rule it is not a descent step. ``y_update="monotone"`` raises the same ratio
to the power 1/4 (He et al.'s SNMF rule) and halves the exponent until the Y-part of Eq. 3
does not rise (exponent 0 keeps Y), so J never increases when W is updated exactly.

Every product of a dense n_t x d (or d x r) matrix with the thin Y, W or the ridge step's
h_t columns is a thin_product (mtc.numerics.thin): the bits of ``@``, about twice as fast.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval, StrOptions

from mtc.methods.base import AFFINITY, NON_NEGATIVE, POSITIVE, STOPPING, MultiTaskClusterer
from mtc.numerics.affinity import affinity_matrix, cosine_operator, squared_distances
from mtc.numerics.cache import Cache, cached, fingerprint
from mtc.numerics.convergence import has_converged
from mtc.numerics.linalg import gram_svd, right_gram_svd, self_gram, squared_norm
from mtc.numerics.seeding import initial_indicator, kmeans_coordinates, seeding_svd
from mtc.numerics.simplex import G_SOLVERS, solve_simplex_rows
from mtc.numerics.snmf import EPS
from mtc.numerics.stacking import row_counts, split_rows, stack_rows
from mtc.numerics.thin import thin_product
from mtc.record import LabelledMatrix


def sq_distances(Wt: np.ndarray, Ws: np.ndarray) -> np.ndarray:
    """A_ij = ||W^t_i - W^s_j||^2 between the columns of two weight matrices (Eq. 3)."""
    return squared_distances(Wt.T, Ws.T)


class RowSpace:
    """An orthonormal basis Q (d x m) of the span of every task's rows and the all-ones vector.

    Every W^t stays in this span (it starts at ones and each W update is built from X^t'Y and
    the other tasks' W), and ||W||, ||W_i - W_j|| and X W are unchanged by writing W = Q Omega
    and X = Z Q' with Z = X Q. So MTCMRL can run exactly in the m <= sum_t n_t + 1 coordinates
    (m << d for documents). Everything is computed from the Gram matrix of the stacked rows.
    """

    def __init__(self, matrices):
        ones = np.ones((1, matrices[0].shape[1]))
        self.stack = stack_rows([*matrices, ones])
        U, s = gram_svd(self.stack)
        self.coefficients = U / s[None, :]  # Q = stack' @ coefficients
        coordinates = U * s[None, :]  # stack @ Q
        *self.Z, ones_row = split_rows(coordinates, [*row_counts(matrices), 1])
        self.ones = ones_row[0]  # Q' 1

    def to_features(self, Omega: np.ndarray) -> np.ndarray:
        """W = Q Omega in the original d features."""
        return np.asarray(self.stack.T @ (self.coefficients @ Omega))


class RidgeFactor:
    """Thin SVD X = U S V' of one task's data (from its Gram matrix, see gram_svd), once per
    fit, for every (lambda X'X + c I)^-1 b of the fit.

    V'B and V z are memory-bound (B has h_t columns), so the factor keeps whichever is
    cheaper to stream: V (d x r), or, for sparse X, X and U (n x r) with V'B = S^-1 U'(X B)
    and V z = X'(U S^-1 z) when nnz(X) + n r < d r (20NG: n_t < d = 3000 at 2 % density).
    With more samples than features the SVD comes from the d x d Gram matrix X'X instead
    (right_gram_svd: no n x n array), and V is kept."""

    def __init__(self, X, svd: tuple[np.ndarray, np.ndarray] | None = None):
        if X.shape[0] > X.shape[1]:
            self.V, self.s = right_gram_svd(X)
            self.X = self.U = None
            return
        U, self.s = gram_svd(X) if svd is None else svd  # svd: gram_svd(X) when the caller has it
        through_X = sp.issparse(X) and X.nnz + U.size < X.shape[1] * self.s.size
        self.X, self.U = (sp.csr_matrix(X), U / self.s[None, :]) if through_X else (None, None)
        self.V = None if through_X else np.asarray(X.T @ U) / self.s[None, :]

    def solve(self, lam: float, c: np.ndarray, B: np.ndarray) -> np.ndarray:
        """Columns w_j = (lam X'X + c_j I)^-1 b_j = b_j / c_j - V diag(lam s^2 / (c_j (lam s^2
        + c_j))) V'b_j: the part in the span of V plus the rest, b_j - V V'b_j, scaled by 1/c_j,
        written with two products with V instead of three, each a thin_product (the same bits
        as ``@``, faster: mtc.numerics.thin)."""
        ls2 = lam * self.s[:, None] ** 2
        scale = ls2 / ((ls2 + c[None, :]) * c[None, :])
        if self.V is not None:
            return B / c[None, :] - thin_product(self.V, thin_product(self.V.T, B) * scale)
        VtB = thin_product(self.U.T, self.X @ B)  # U here is U S^-1
        return B / c[None, :] - self.X.T @ thin_product(self.U, VtB * scale)


class MTCMRL(MultiTaskClusterer):
    """MTCMRL (Algorithm 1). With alpha = beta = 0 it is the single-task SNMF+LR.

    Parameters
    ----------
    n_clusters : int or list of int, default=2
        h_t, clusters per task.
    lambda_ : float, default=1.0
        Weight of the regression term lambda ||Y - XW||^2 (> 0).
    mu : float, default=0.5
        Ridge weight mu ||W||^2 (> 0; the paper's 2^-1).
    alpha : float, default=1.0
        Weight of the cross-task terms (>= 0; 0 is SNMF+LR).
    beta : float, default=0.5
        Weight of ||G||^2 (>= 0; the paper's 2^-1).
    affinity : {"cosine", "gaussian"}, default="cosine"
        Similarity M^t of the SNMF term.
    g_solver : {"projection", "qp", "frank_wolfe"}, default="projection"
        G step (Eq. 4-5): exact row-wise simplex projection, the paper's QP, or Frank-Wolfe.
    w_solver : {"ridge", "sylvester"}, default="ridge"
        W step: column ridge systems on one SVD, or the paper's dual Sylvester equation (Eq. 13).
    w_update : {"exact", "paper"}, default="exact"
        exact: minimises Eq. 3 in W^t; paper: Eq. 7 as printed, the (s, t) pairs left out.
    y_update : {"monotone", "paper"}, default="monotone"
        monotone: Eq. 3 never rises; paper: Eq. 19 as printed (not a descent step).
    stopping : {"decrease", "relative"}, default="decrease"
        decrease: the paper's rule, stop when Eq. 3 falls by less than ``tol`` (Sec. 4.7).
    tol : float, default=1.0
        Tolerance of the stopping rule (Sec. 4.7: 1).
    max_iter : int, default=100
        Outer iterations at most (0: only the initial point, e.g. to time the set-up).
    row_space : bool or "auto", default="auto"
        Run in the exact coordinates of the tasks' row space (see RowSpace); "auto": when
        they are fewer than the features (sum_t n_t + 1 < d, e.g. Reuters, WebKB4), not when
        they are not (20NG: N = 5344 > d = 3000, where they would only turn sparse data
        dense). Both routes give the same fit up to rounding (tested).
    cache : Cache or None, default=None
        Keeps the seed- and parameter-free preparation (affinities, row space, ridge
        factors) for the next fit on the same data, and each seed's k-means labels for
        the other grid points; results are identical without it.
    random_state : int, Generator or None, default=None
        Seed of the k-means initialisation of Y.

    Attributes
    ----------
    labels_ : list of ndarray of shape (n_t,)
        argmax of every row of Y^t.
    Y_ : list of ndarray of shape (n_t, h_t)
        Cluster indicators.
    W_ : list of ndarray of shape (d, h_t)
        Regression weights, in the original features.
    G_ : dict of (t, s) to ndarray of shape (h_t, h_s)
        Cluster relatedness, rows on the simplex ({} when alpha = 0).
    objective_trace_ : ndarray of shape (n_iter_ + 1,)
        Eq. 3 from the initial point on.
    w_norm_trace_ : ndarray of shape (n_iter_ + 1, T)
        ||W^t||_F per iteration and task.
    n_iter_ : int
        Outer iterations run.
    converged_ : bool
        Whether the stopping rule was met before ``max_iter``.
    record_ : FitRecord
        Trace ``w_norm`` (per task) and, when alpha > 0, matrix ``G`` (cluster x cluster
        blocks per task pair).
    """

    _parameter_constraints = {
        **MultiTaskClusterer._parameter_constraints,
        "lambda_": [POSITIVE], "mu": [POSITIVE], "alpha": [NON_NEGATIVE], "beta": [NON_NEGATIVE],
        "affinity": [AFFINITY], "g_solver": [StrOptions(set(G_SOLVERS))],
        "w_solver": [StrOptions({"ridge", "sylvester"})], "w_update": [StrOptions({"exact", "paper"})],
        "y_update": [StrOptions({"monotone", "paper"})], "stopping": [STOPPING], "tol": [NON_NEGATIVE],
        "max_iter": [Interval(Integral, 0, None, closed="left")], "row_space": ["boolean", StrOptions({"auto"})],
        "cache": [None, Cache],
    }

    def __init__(self, n_clusters=2, lambda_=1.0, mu=0.5, alpha=1.0, beta=0.5, affinity="cosine",
                 g_solver="projection", w_solver="ridge", w_update="exact", y_update="monotone",
                 stopping="decrease", tol=1.0, max_iter=100, row_space="auto", cache=None, random_state=None):
        self.n_clusters = n_clusters
        self.lambda_ = lambda_
        self.mu = mu
        self.alpha = alpha
        self.beta = beta
        self.affinity = affinity
        self.g_solver = g_solver
        self.w_solver = w_solver
        self.w_update = w_update
        self.y_update = y_update
        self.stopping = stopping
        self.tol = tol
        self.max_iter = max_iter
        self.row_space = row_space
        self.cache = cache
        self.random_state = random_state

    # --- objective (Eq. 3) -------------------------------------------------------------
    def _task_terms(self, t) -> float:
        """1/2 ||M - YY'||^2 + lambda ||Y - XW||^2 + mu ||W||^2 for task t. The products M Y and
        X W of the current Y and W are taken from the Y step when it left them (the same
        numbers: the objective follows the Y step of every task, and nothing changes Y or W of
        a task in between), which spares two of the N x N x h and N x d x h products."""
        Y, W = self.Y_[t], self.W_[t]
        kept = self._products.get(t)
        MY, XW = (kept[2], kept[3]) if kept and kept[0] is Y and kept[1] is W else (None, None)
        return self._y_part(t, Y, MY, XW) + self.mu * float(np.sum(W ** 2))

    def _y_part(self, t, Y, MY=None, XW=None) -> float:
        """1/2 ||M - YY'||^2 + lambda ||Y - XW||^2, with M Y and X W given or computed."""
        MY = thin_product(self._M[t], Y) if MY is None else MY
        XW = thin_product(self._X[t], self.W_[t]) if XW is None else XW
        YtY = Y.T @ Y
        snmf = 0.5 * (self._M_sq[t] - 2.0 * np.sum(Y * MY) + np.sum(YtY * YtY))
        return float(snmf + self.lambda_ * np.sum((Y - XW) ** 2))

    def _pair_terms(self, t, s) -> float:
        G = self.G_[(t, s)]
        return self.alpha * (float(np.sum(sq_distances(self.W_[t], self.W_[s]) * G)) + self.beta * float(np.sum(G * G)))

    def _objective(self) -> float:
        """Eq. 3 at the current iterate."""
        total = sum(self._task_terms(t) for t in range(self._T))
        return total + sum(self._pair_terms(t, s) for (t, s) in self.G_)

    # --- block updates -------------------------------------------------------------------
    def _update_G(self, t):  # Eq. 4-5
        for s in range(self._T):
            if s != t:
                self.G_[(t, s)] = solve_simplex_rows(sq_distances(self.W_[t], self.W_[s]), self.beta, self.g_solver)

    def _update_W(self, t):  # Eq. 6-13
        h = self.W_[t].shape[1]
        c = np.full(h, self.mu)
        R = np.zeros_like(self.W_[t])
        if self.alpha > 0:
            for s in range(self._T):
                if s == t:
                    continue
                c += self.alpha * self.G_[(t, s)].sum(axis=1)  # H^(t,s)
                R += self.W_[s] @ self.G_[(t, s)].T
                if self.w_update == "exact":
                    c += self.alpha * self.G_[(s, t)].sum(axis=0)  # D^(s,t)
                    R += self.W_[s] @ self.G_[(s, t)]
        X, Y = self._X[t], self.Y_[t]
        if self.w_solver == "ridge":
            self.W_[t] = self._factors[t].solve(self.lambda_, c, self.lambda_ * thin_product(X.T, Y) + self.alpha * R)
        else:  # the dual Sylvester equation, Eq. 13, then Eq. 10
            K = 2.0 * c
            gram = self_gram(X)
            Gamma = scipy.linalg.solve_sylvester(gram, np.diag(K / (2.0 * self.lambda_)),
                                                 Y * K[None, :] - 2.0 * self.alpha * (X @ R))
            self.W_[t] = (X.T @ Gamma + 2.0 * self.alpha * R) / K[None, :]

    def _update_Y(self, t):  # Eq. 14-19
        Y, W = self.Y_[t], self.W_[t]
        kept = self._products.get(t)  # M Y of the last accepted step is M Y of this Y
        Q, MY = thin_product(self._X[t], W), kept[2] if kept and kept[0] is Y else thin_product(self._M[t], Y)
        Q_pos, Q_neg = (np.abs(Q) + Q) / 2.0, (np.abs(Q) - Q) / 2.0
        ratio = (MY + self.lambda_ * Q_pos) / (Y @ (Y.T @ Y) + self.lambda_ * Y + self.lambda_ * Q_neg + EPS)
        if self.y_update == "paper":
            self.Y_[t] = Y * ratio  # Eq. 19
            return
        before = self._y_part(t, Y, MY, Q)
        self._products[t] = (Y, W, MY, Q)  # kept if no step is accepted
        exponent = 0.25
        for _ in range(30):
            candidate = Y * ratio**exponent
            M_candidate = thin_product(self._M[t], candidate)
            if self._y_part(t, candidate, M_candidate, Q) <= before:
                self.Y_[t] = candidate
                self._products[t] = (candidate, W, M_candidate, Q)  # for the objective (_task_terms)
                return
            exponent /= 2.0

    # --- fit -----------------------------------------------------------------------------
    def _uses_row_space(self, matrices) -> bool:
        if self.row_space == "auto":
            return sum(X.shape[0] for X in matrices) + 1 < matrices[0].shape[1]
        return bool(self.row_space)

    def _prepare(self, matrices, row_space: bool) -> tuple:
        """The seed- and parameter-free part of a fit: similarities M^t (for non-negative sparse
        data with the cosine affinity, the exact product form CosineProduct) with ||M^t||^2, the
        row space (or None), the ridge factors of the data in the coordinates used (or
        None) and the k-means seeding's coordinates (mtc.numerics.seeding.kmeans_coordinates).
        Kept in ``cache`` when one is given: in a sweep, every grid point and seed on the
        same data shares it."""
        M = [cosine_operator(X) if self.affinity == "cosine" else affinity_matrix(X, self.affinity) for X in matrices]
        M_sq = [squared_norm(Mt) for Mt in M]
        space = RowSpace(matrices) if row_space else None  # exact change of coordinates, see RowSpace
        X = space.Z if space is not None else matrices
        # Without the row space and with d > n, a task's ridge factor and its seeding's
        # coordinates are the same thin SVD of X^t: one eigh of its Gram matrix, not two (2.3 s
        # of 10.4 on a fresh 20NG fit), on one thread as the seeding needs (seeding_svd)
        svds = [seeding_svd(Xt) if space is None and Xt.shape[1] > Xt.shape[0] else None for Xt in matrices]
        factors = [RidgeFactor(Xt, svd) for Xt, svd in zip(X, svds)] if self.w_solver == "ridge" else None
        # seed-free (1.7 s of a 20NG fit otherwise); None where they are X itself, which the
        # cache would freeze (it makes what it keeps read-only)
        coordinates = (kmeans_coordinates(Xt, svd) for Xt, svd in zip(matrices, svds))
        seeding = [None if C is Xt else C for Xt, C in zip(matrices, coordinates)]
        return M, M_sq, space, factors, seeding

    def _fit(self, matrices, n_clusters, rng):
        self._T = len(matrices)
        row_space = self._uses_row_space(matrices)
        key = (fingerprint(*matrices), self.affinity, row_space, self.w_solver)
        self._M, self._M_sq, space, self._factors, seeding = cached(self.cache, "mtcmrl_preparation", key,
                                                                    lambda: self._prepare(matrices, row_space))
        self._X = space.Z if space is not None else matrices
        self._products = {}  # task -> (Y, W, M Y, X W) of the last Y step, see _task_terms
        self.Y_ = [initial_indicator(X if C is None else C, k, rng, cache=self.cache)  # k-means on exact coordinates
                   for X, C, k in zip(matrices, seeding, n_clusters)]
        self.start_labels_ = [Y.argmax(axis=1) for Y in self.Y_]
        if row_space:
            self.W_ = [np.repeat(space.ones[:, None], k, axis=1) for k in n_clusters]
        else:
            self.W_ = [np.ones((X.shape[1], k)) for X, k in zip(matrices, n_clusters)]  # d x h_t (the text says n_t x h_t)
        self.G_ = {(t, s): np.full((n_clusters[t], n_clusters[s]), 1.0 / n_clusters[s])
                   for t in range(self._T) for s in range(self._T) if s != t} if self.alpha > 0 else {}
        trace, w_norms = [self._objective()], [[float(np.linalg.norm(W)) for W in self.W_]]
        self.converged_ = False
        for _ in range(self.max_iter):
            for t in range(self._T):
                if self.alpha > 0:
                    self._update_G(t)
                self._update_W(t)
                self._update_Y(t)
            trace.append(self._objective())
            w_norms.append([float(np.linalg.norm(W)) for W in self.W_])
            if has_converged(trace[-2], trace[-1], self.stopping, self.tol):
                self.converged_ = True
                break
        self.objective_trace_ = np.array(trace)
        self.w_norm_trace_ = np.array(w_norms)
        self.n_iter_ = len(trace) - 1
        self.labels_ = [np.argmax(Y, axis=1) for Y in self.Y_]
        if row_space:
            self.W_ = [space.to_features(Omega) for Omega in self.W_]
        for name in ("_X", "_M", "_M_sq", "_factors", "_products"):
            self.__dict__.pop(name, None)
        self.record_.traces["w_norm"] = self.w_norm_trace_
        if self.G_:
            self.record_.matrices["G"] = LabelledMatrix(dict(self.G_), "cluster", "cluster",
                                                        "cluster relatedness G(t,s), rows on the simplex")


class SNMFLR(MTCMRL):
    """SNMF+LR: MTCMRL's single-task ablation, alpha = beta = 0 (no cross-task terms).

    Parameters
    ----------
    n_clusters, lambda_, mu, affinity, w_solver, y_update, stopping, tol, max_iter, row_space, cache, random_state
        As MTCMRL (alpha = beta = 0 are fixed, so g_solver and w_update play no part).

    Attributes
    ----------
    labels_, Y_, W_, objective_trace_, w_norm_trace_, n_iter_, converged_
        As MTCMRL.
    G_ : dict
        Empty (no task pairs are related).
    record_ : FitRecord
        Trace ``w_norm`` (per task); no matrix.
    """

    def __init__(self, n_clusters=2, lambda_=1.0, mu=0.5, affinity="cosine", w_solver="ridge",
                 y_update="monotone", stopping="decrease", tol=1.0, max_iter=100, row_space="auto", cache=None,
                 random_state=None):
        super().__init__(n_clusters=n_clusters, lambda_=lambda_, mu=mu, alpha=0.0, beta=0.0, affinity=affinity,
                         w_solver=w_solver, y_update=y_update, stopping=stopping, tol=tol, max_iter=max_iter,
                         row_space=row_space, cache=cache, random_state=random_state)
