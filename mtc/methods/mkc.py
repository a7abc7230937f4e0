"""MKC and S-MKC: (smart) multi-task kernel clustering (Zhang & Zhang, AAAI-13, Algorithm 2).

Notation (the paper's orientation): phi(X^t) is d x n_t (points as columns, d possibly
infinite), M^t (d x c_t) the centroids, Z^t >= 0 (n_t x c_t) the relaxed partition matrix,
W^ts (c_t x c_s) the EMD plan between the clusters of tasks t and s, E^t = I / c_t.
The relaxed objective, Eq. 10, with the pair sum read over unordered pairs:

  J = sum_t L^t + (2 lambda / (T-1)) sum_{t<s} sum_zl w^ts_zl ||m^t_z - m^s_l||^2,      (10)
  L^t = (1/n_t) ||phi(X^t) - M^t Z^t'||_F^2,                                              (8)

W^ts >= 0 with rows summing to 1/c_t and columns to 1/c_s ("we relax pi = 1/c"). Read this
way Eq. 10 is T x Eq. 1 (Omega = 1/(T(T-1)) sum over ordered pairs), and its gradient in M^t
gives Eq. 13's coefficient 2 lambda / (T-1) on sum_s M^s W^st; with ordered pairs it would be
4 lambda / (T-1).

M step, Eq. 13. Setting the gradient of Eq. 10 in M^t to zero (others, Z, W fixed):

  M^t = ((1/n_t) phi(X^t) Z^t + (2 lambda/(T-1)) sum_{s != t} M^s W^st) D_t^-1,
  D_t = (1/n_t) Z^t'Z^t + kappa E^t,  kappa = 2 lambda.

The term tr(E^t M^t'M^t) appears once per partner s, T-1 times, so the exact kappa is
2 lambda; the paper prints kappa = 2 lambda / (T-1), the same for T = 2 and not a minimiser of
Eq. 10 for T > 2 (``centroid_update="paper"``; tests/test_mkc.py measures the gradient it
leaves). The default ``"exact"`` follows the paper's objective, which decides. (Eq. 12's
tr(W^ts M^t'M^s) should read tr(W^ts M^s'M^t).)

Kernel form (Eq. 14-15): the state is F^(s,t) = phi(X^s)'M^t and G^(s,t) = M^s'M^t. We keep
F^(.,t) = phi(X)'M^t over all kernel rows (the union of all tasks' samples, duplicate rows
folded: numerics/kernels.py), so F^(s,t) is its rows of task s. With coef = 2 lambda/(T-1):

  F^(.,t) <- [ (1/n_t) K[:, t] Z^t + coef sum_{p != t} F^(.,p) W^pt ] D_t^-1                (14)
  G^(s,t) <- [ (1/n_t) F^(t,s)'Z^t + coef sum_{p != t} G^(s,p) W^pt ] D_t^-1,  s != t
  G^(t,t) <- D_t^-1 V D_t^-1,                                                             (15)
  V = Z'K^tt Z / n_t^2 + (coef/n_t) sum_p (Z'F^(t,p) W^pt + W^tp F^(t,p)'Z)
      + coef^2 sum_q sum_p W^tq G^(q,p) W^pt,

and G^(t,s) = G^(s,t)'. Eq. 15 as printed for s != t multiplies by D_s^-1 on the left and
uses Z^s'K^st Z^t: it recomputes M^s from Eq. 13 instead of using the stored M^s, which is
exact only at a fixed point; the recursion above is M^s'M^t_new with the stored M^s (exact,
tested with a linear kernel against explicit centroids). For s = t Eq. 15 is exact as printed.
Only the (kernel rows) x c_t product K[:, t] Z^t touches the kernel; nothing else is
larger than n x c. Z^t changes only in task t's own step, so every task's product is taken
at the start of an iteration in one GEMM over K (one pass over the R x R kernel instead of
T; equal to rounding, tests/test_hotspots.py), and the initial centroids' products serve
the first iteration.

Z step (Eq. 16-19; the stray phi in A and B is garbled): with A = F^(t,t), B = G^(t,t),
Z <- Z o sqrt((A+ + Z B-) / (A- + Z B+ + EPS)), the semi-NMF rule of Ding, Li & Jordan; it
never increases L^t for fixed M^t. Zeros are absorbing: Z starts at one-hot + 0.2 (k-means or
random labels, ``init``), never binary. Labels: argmax over the rows of Z.

W step (Eq. 20-21): cost ||m^t_z - m^s_l||^2 = G^tt_zz - 2 G^ts_zl + G^ss_ll (clipped at 0),
uniform marginals, one exact EMD per unordered pair (numerics/transport.py, POT).
Local loss (Eq. 22): L^t = (1/n_t) [tr K^tt - 2 sum(F^(t,t) o Z) + sum((Z G^(t,t)) o Z)].

Loop (Algorithm 2): W by Eq. 20, then for t = 1..T in place, the M and Z steps. We solve the
EMD at the end of each iteration (it is step 2 of the next one), so every trace value is the
objective with W optimal at that point.

S-MKC (``SMKC``, steps 4-14): per task two candidates, multi-task (Eq. 14-15, then Eq. 19,
local loss O1) and single-task (the same with lambda = 0, i.e. D = Z'Z/n, then Eq. 19, O2);
the smaller local loss is kept, ties to the multi-task one. Step 7's starting Z is ambiguous:
``candidates="parallel"`` (default; both candidates from the saved state, as the prose of
S-MBC says) makes J_st = (1/T) sum_t L^t non-increasing (O2 <= L(M_lambda=0(Z), Z) <= L(M, Z),
and L^t depends on task t's state only); ``"sequential"`` (the literal in-place reading: step
7 starts from step 5's Z) makes O2 <= O1 always, so the multi-task candidate is never kept.

One path, many lambdas (S-MKC, parallel candidates): the single-task candidate reads only
task t's own Z, its kernel product and the other tasks' F, never lambda; so while no
multi-task candidate with a non-zero weight is kept, the fits at every lambda from the same
start hold the same state, step by step, and differ only in their Eq. 10, gaps and choices.
A fit given the sweep's other lambda values (``shared_lambdas``) computes their multi-task
candidates at each step from that shared state (the products their own fits would take, so
the same bits), drops a lambda at its first kept multi-task candidate (all of them when it
keeps one itself), and leaves each remaining lambda's whole fit in the cache, where that
lambda's own fit reads it: one pass over K per iteration for all of a seed's lambdas instead
of one each.

Objective traces: Eq. 10 for MKC (block-coordinate descent: never rises with ``exact``);
J_st (Algorithm 2's stopping quantity) for S-MKC, monotone with ``parallel``.

Observed (tests/test_mkc.py data, benchmarks/mkc_memory.py on NG3): with parallel candidates
the single-task candidate wins almost every comparison (its centroids minimise L^t at the
saved Z, and one Eq. 19 step moves Z little), so S-MKC mostly runs as relaxed single-task
kernel clustering; ``branch_trace_`` shows it per task and iteration. On NG1 (tf-idf, sigma
= the median distance) Eq. 19 hardly moves the argmax of Z: 200 iterations from random labels
changed none, and from k-means the labels stay k-means's. With ``paper`` and
T > 2, MKC's centroids can grow without bound (the pull sum_s M^s W^st has weight (T-1)/c
against kappa/c in D); a non-finite objective raises FloatingPointError.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from numbers import Integral
from typing import NamedTuple

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from mtc.methods.base import NON_NEGATIVE, POSITIVE, STOPPING, MultiTaskClusterer
from mtc.numerics.affinity import WIDTH_MODES
from mtc.numerics.cache import Cache, blas_threads, cached, fingerprint, library_versions
from mtc.numerics.convergence import has_converged
from mtc.numerics.kernels import KERNELS, UnionKernel, union_kernel
from mtc.numerics.seeding import coordinates_file_key, indicator, initial_indicator, kmeans_coordinates
from mtc.numerics.snmf import EPS
from mtc.numerics.transport import cluster_marginal, emd
from mtc.record import LabelledMatrix

OFFSET = 0.2  # added to the one-hot start: Eq. 19 keeps zeros at zero


def right_solve(B: np.ndarray, D: np.ndarray) -> np.ndarray:
    """B D^-1 for a symmetric c x c D (least squares when D is singular).

    D^-1 is formed (c is the number of clusters) and applied as one product: LAPACK's solve
    with B's thousands of rows as right-hand sides took 0.6-1.3 ms on NG3's shapes against
    0.05-0.1 ms, and agrees with it to about 1e-13 (tests/test_hotspots.py)."""
    try:
        return B @ np.linalg.inv(D)
    except np.linalg.LinAlgError:
        return B @ np.linalg.pinv(D)


class TaskProducts(NamedTuple):
    """What both candidates of task t's step read of (Z, K[:, t] Z, F) alike: Z'Z/n, Z'K^tt Z/n^2
    and F[s][rows of t]' Z / n for every other task s (taken once for both)."""

    ZtZ: np.ndarray
    ZKZ: np.ndarray
    FZ: dict


def task_products(t: int, Z: np.ndarray, KZ: np.ndarray, kernel: UnionKernel, F: list) -> TaskProducts:
    n = Z.shape[0]
    rows = kernel.rows[t]
    return TaskProducts(Z.T @ Z / n, Z.T @ KZ[rows] / n**2, {s: F[s][rows].T @ Z / n for s in range(len(F)) if s != t})


def task_pulls(t: int, F: list, G: dict, plans: dict) -> tuple[np.ndarray, dict] | None:
    """(S, H) = (phi(X)' sum_p M^p W^pt, {s: M^s' sum_p M^p W^pt}) of Eq. 14-15 for task t, which
    every multi-task candidate of its step reads whatever its coef (None for one task)."""
    others = [p for p in range(len(F)) if p != t]
    if not others:
        return None
    S = sum(F[p] @ plans[(p, t)] for p in others)
    return S, {s: sum(G[(s, p)] @ plans[(p, t)] for p in others) for s in others}


def centroid_state(t: int, Z: np.ndarray, KZ: np.ndarray, kernel: UnionKernel, F: list, G: dict, plans: dict,
                   coef: float, kappa: float, products: TaskProducts | None = None,
                   pulls: tuple | None = None) -> tuple[np.ndarray, dict, np.ndarray]:
    """Eq. 13 in kernel form (Eq. 14-15, exact recursion): the state of task t's new centroids.

    M^t = ((1/n) phi(X^t) Z + coef sum_{p != t} M^p W^pt) D^-1, D = Z'Z/n + (kappa/c) I, given
    the other tasks' state F[p] = phi(X)'M^p (kernel rows x c_p) and G[(s, p)] = M^s'M^p, and
    KZ = K[:, t] Z (``products``: task_products of the same Z, KZ and F, when the caller shares
    them between candidates; ``pulls``: task_pulls of the same state). Returns (F^(.,t),
    {s: G^(s,t) for s != t}, G^(t,t)). coef = kappa = 0 is the single-task (lambda = 0) update
    M^t = phi(X^t) Z (Z'Z)^-1.
    """
    n, c = Z.shape
    rows = kernel.rows[t]
    products = task_products(t, Z, KZ, kernel, F) if products is None else products
    D = products.ZtZ + (kappa / c) * np.eye(c)
    others = [p for p in range(len(F)) if p != t]
    if coef and others:
        S, H = task_pulls(t, F, G, plans) if pulls is None else pulls
        F_t = right_solve(KZ / n + coef * S, D)  # Eq. 14
        G_col = {s: right_solve(products.FZ[s] + coef * H[s], D) for s in others}
        ZS = Z.T @ S[rows] / n
        V = products.ZKZ + coef * (ZS + ZS.T) + coef**2 * sum(plans[(t, q)] @ H[q] for q in others)  # Eq. 15, V
    else:
        F_t = right_solve(KZ / n, D)
        G_col = {s: right_solve(products.FZ[s], D) for s in others}
        V = products.ZKZ
    G_tt = right_solve(right_solve(V, D).T, D)  # Eq. 15, s = t: D^-1 V D^-1
    return F_t, G_col, (G_tt + G_tt.T) / 2.0


def semi_nmf_step(Z: np.ndarray, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Eq. 19: Z o sqrt((A+ + Z B-) / (A- + Z B+)), A = F^(t,t), B = G^(t,t). The parts as
    max(A, 0) and max(-A, 0): (|A| + A)/2 and (|A| - A)/2 to the bit, in two passes instead of six."""
    A_pos, A_neg = np.maximum(A, 0.0), np.maximum(-A, 0.0)
    B_pos, B_neg = np.maximum(B, 0.0), np.maximum(-B, 0.0)
    return Z * np.sqrt((A_pos + Z @ B_neg) / (A_neg + Z @ B_pos + EPS))


def local_loss(trace_K: float, A: np.ndarray, B: np.ndarray, Z: np.ndarray) -> float:
    """Eq. 22: (1/n) [tr K^tt - 2 sum(A o Z) + sum((Z B) o Z)] = (1/n) ||phi(X^t) - M Z'||^2."""
    return float((trace_K - 2.0 * np.sum(A * Z) + np.sum((Z @ B) * Z)) / Z.shape[0])


def centroid_costs(G: dict, t: int, s: int) -> np.ndarray:
    """Eq. 21: ||m^t_z - m^s_l||^2 = G^tt_zz - 2 G^ts_zl + G^ss_ll, clipped at 0."""
    return np.maximum(np.diagonal(G[(t, t)])[:, None] - 2.0 * G[(t, s)] + np.diagonal(G[(s, s)])[None, :], 0.0)


def transport(G: dict, n_clusters: list) -> tuple[dict, float]:
    """Eq. 20 for every unordered pair, uniform marginals: ({(t, s): W^ts}, sum_{t<s} EMD)."""
    plans, total = {}, 0.0
    for t in range(len(n_clusters)):
        for s in range(t + 1, len(n_clusters)):
            plan, cost = emd(centroid_costs(G, t, s), cluster_marginal(None, n_clusters[t], "uniform"),
                             cluster_marginal(None, n_clusters[s], "uniform"))
            plans[(t, s)], plans[(s, t)] = plan, plan.T
            total += cost
    return plans, total


def candidate(t, Z, KZ, kernel, trace_K, F, G, plans, coef, kappa, products=None, pulls=None) -> tuple:
    """Steps 4-6 (steps 7-9 with coef = kappa = 0) of Algorithm 2 for task t: the centroid
    state (Eq. 14-15), then Z by Eq. 19, then L^t by Eq. 22 (trace_K = tr K^tt); ``products`` and
    ``pulls`` as centroid_state's. Returns (F^(.,t), {s: G^(s,t)}, G^(t,t), Z, L^t)."""
    F_t, G_col, G_tt = centroid_state(t, Z, KZ, kernel, F, G, plans, coef, kappa, products, pulls)
    A = F_t[kernel.rows[t]]
    Z_new = semi_nmf_step(Z, A, G_tt)
    return F_t, G_col, G_tt, Z_new, local_loss(trace_K, A, G_tt, Z_new)


PATH_STEP = "smkc_path"  # the Cache step of the fits a shared path decided (SMKC.shared_lambdas)
PATH_VERSION = 1  # of what a decided fit holds (pack_path); part of its key


class PathFit(NamedTuple):
    """A fit's end state and traces (MKC._iterate): what its fitted attributes come from."""

    Z: list
    G: dict
    plans: dict
    trace: list
    eq10: list
    local_trace: list
    branches: list
    gaps: list
    converged: bool


@dataclass
class Follower:
    """Another lambda_ on an S-MKC fit's path (MKC._iterate): its weights, and its own Eq. 10,
    choices and gaps so far, one row of T per iteration."""

    lambda_: float
    coef: float
    kappa: float
    eq10: list = field(default_factory=list)
    kept: list = field(default_factory=list)
    gaps: list = field(default_factory=list)


def pair_order(T: int) -> list[tuple[int, int]]:
    """The keys of a fit's G in the order its initialisation inserts them."""
    return [pair for s in range(T) for t in range(s, T) for pair in ((s, t), (t, s))[:1 if s == t else 2]]


def plan_order(T: int) -> list[tuple[int, int]]:
    """The keys of a fit's EMD plans in the order ``transport`` inserts them."""
    return [pair for t in range(T) for s in range(t + 1, T) for pair in ((t, s), (s, t))]


def pack_path(fit: PathFit, follower: Follower) -> list[np.ndarray]:
    """The arrays of the follower's own fit, which shares ``fit``'s path: its Z, G, plans, J_st
    trace and local losses are the path's, its Eq. 10, choices and gaps its own."""
    T = len(fit.Z)
    return [*fit.Z, *(fit.G[pair] for pair in pair_order(T)), *(fit.plans[pair] for pair in plan_order(T)),
            np.array(fit.trace), np.array(follower.eq10), np.array(fit.local_trace),
            np.array(follower.kept).reshape(-1, T), np.array(follower.gaps).reshape(-1, T), np.array(fit.converged)]


def unpack_path(arrays: list, T: int) -> PathFit:
    """pack_path's arrays as a PathFit (writable copies, dicts in a fit's own key order)."""
    arrays = [np.array(a) for a in arrays]
    pairs, plan_pairs = pair_order(T), plan_order(T)
    G = dict(zip(pairs, arrays[T:T + len(pairs)]))
    rest = arrays[T + len(pairs):]
    plans = dict(zip(plan_pairs, rest[:len(plan_pairs)]))
    trace, eq10, local_trace, branches, gaps, converged = rest[len(plan_pairs):]
    return PathFit(arrays[:T], G, plans, trace.tolist(), eq10.tolist(), local_trace.tolist(), branches.tolist(),
                   gaps.tolist(), bool(converged))


class MKC(MultiTaskClusterer):
    """MKC: multi-task kernel clustering, Eq. 10 by block-coordinate descent (AAAI-13,
    Algorithm 2 without the smart rule); see the module docstring.

    Parameters
    ----------
    n_clusters : int or list of int, default=2
        c_t, clusters per task.
    lambda_ : float, default=0.5
        Weight of the task regularisation (>= 0; the AAAI paper's 0.5; 0 is single-task
        kernel clustering with the relaxed Z).
    centroid_update : {"exact", "paper"}, default="exact"
        kappa of D_t = Z'Z/n + kappa E: 2 lambda (the minimiser of Eq. 10) or 2 lambda/(T-1)
        as Eq. 13 prints (equal for T = 2).
    kernel : {"gaussian", "linear"}, default="gaussian"
        Mercer kernel over the union of all tasks' samples.
    kernel_width : float, default=1.0
        Gaussian width: sigma = kernel_width x the median distance of the union's samples
        (``width_mode="relative"``, as the MTCMRL/MTCFIR papers) or sigma = kernel_width
        (``"absolute"``, the AAAI paper's grid {0.1, 1, 10, 100}).
    width_mode : {"relative", "absolute"}, default="relative"
        How ``kernel_width`` sets sigma.
    fold_duplicates : bool, default=True
        Build the kernel over the distinct samples only (exact; NG3: 7,971 of 15,177 rows).
    init : {"kmeans", "random"}, default="kmeans"
        Z0 = one-hot of k-means (per task) or of uniformly random labels, + 0.2.
    stopping : {"relative", "decrease"}, default="relative"
        Stopping rule on the objective trace (mtc.numerics.convergence).
    tol : float, default=1e-6
        Tolerance of the stopping rule.
    max_iter : int, default=100
        Iterations at most.
    cache : Cache or None, default=None
        Keeps the union kernel for the next fit on the same data and kernel settings,
        and each seed's k-means labels for the other grid points; results are identical
        without it.
    random_state : int, Generator or None, default=None
        Seed of the initialisation.

    Attributes
    ----------
    labels_ : list of ndarray of shape (n_t,)
        argmax of every row of Z^t.
    Z_ : list of ndarray of shape (n_t, c_t)
        Relaxed partition matrices.
    G_ : dict of (s, t) to ndarray of shape (c_s, c_t)
        M^s'M^t for every ordered pair, s = t included (the centroids' inner products).
    W_ : dict of (t, s) to ndarray of shape (c_t, c_s)
        EMD plans at the final point, every ordered pair t != s (W^st = W^ts'; {} for T = 1).
    objective_trace_ : ndarray of shape (n_iter_ + 1,)
        Eq. 10 from the initial point on (S-MKC: J_st = (1/T) sum_t L^t).
    eq10_trace_ : ndarray of shape (n_iter_ + 1,)
        Eq. 10, the EMD solved at each point.
    local_loss_trace_ : ndarray of shape (n_iter_ + 1, T)
        L^t (Eq. 22) per iteration and task.
    kernel_rows_ : int
        Rows of the union kernel (distinct samples when folded).
    n_iter_ : int
        Iterations run.
    converged_ : bool
        Whether the stopping rule was met before ``max_iter``.
    record_ : FitRecord
        Matrix ``W`` (cluster x cluster per ordered task pair, T > 1), trace ``local_loss``
        (per task), scalar ``kernel_rows``, and for S-MKC traces ``multitask_kept`` and
        ``candidate_gap`` (per task) and ``eq10``.
    """

    _smart = False
    _kernel_route = "stacked"  # or "per_task": see _kernel_products
    _parameter_constraints = {
        **MultiTaskClusterer._parameter_constraints,
        "lambda_": [NON_NEGATIVE], "centroid_update": [StrOptions({"exact", "paper"})],
        "kernel": [StrOptions(set(KERNELS))], "kernel_width": [POSITIVE], "width_mode": [StrOptions(set(WIDTH_MODES))],
        "fold_duplicates": ["boolean"], "init": [StrOptions({"kmeans", "random"})], "stopping": [STOPPING],
        "tol": [NON_NEGATIVE], "max_iter": [Interval(Integral, 1, None, closed="left")], "cache": [None, Cache],
    }

    def __init__(self, n_clusters=2, lambda_=0.5, centroid_update="exact", kernel="gaussian", kernel_width=1.0,
                 width_mode="relative", fold_duplicates=True, init="kmeans", stopping="relative", tol=1e-6,
                 max_iter=100, cache=None, random_state=None):
        self.n_clusters = n_clusters
        self.lambda_ = lambda_
        self.centroid_update = centroid_update
        self.kernel = kernel
        self.kernel_width = kernel_width
        self.width_mode = width_mode
        self.fold_duplicates = fold_duplicates
        self.init = init
        self.stopping = stopping
        self.tol = tol
        self.max_iter = max_iter
        self.cache = cache
        self.random_state = random_state

    # --- steps ---------------------------------------------------------------------------
    def _kernel_key(self, matrices) -> tuple:
        """What the union kernel depends on (the data and the kernel settings)."""
        gaussian = self.kernel == "gaussian"
        return (fingerprint(*matrices), self.kernel, self.kernel_width if gaussian else None,
                self.width_mode if gaussian else None, self.fold_duplicates)

    def _union_kernel(self, matrices, key: tuple) -> UnionKernel:
        """The kernel over all tasks' samples: deterministic and seed-free, so cached."""
        return cached(self.cache, "mkc_kernel", key,
                      lambda: union_kernel(matrices, self.kernel, self.kernel_width, self.width_mode,
                                           self.fold_duplicates))

    def _kernel_products(self, kernel: UnionKernel, Z: list) -> list[np.ndarray]:
        """K[:, t] Z^t for every task, the dominating products of an iteration (Eq. 14): one GEMM
        over K (``_kernel_route = "stacked"``) or one per task (``"per_task"``, the route before
        issue 32; equal to rounding, tests/test_hotspots.py)."""
        if self._kernel_route == "stacked":
            return kernel.times_all(Z)
        return [kernel.times(t, Zt) for t, Zt in enumerate(Z)]

    def _initial_indicators(self, matrices, n_clusters, rng) -> list[np.ndarray]:
        """Z0: one-hot of k-means or random labels, + 0.2 (the paper gives no initialisation)."""
        if self.init == "kmeans":  # the k-means coordinates are seed-independent, computed only when a
            # seed's labels are not kept; without a cache, kmeans_labels computes each task's own
            coordinates = [None] * len(matrices)
            if self.cache is not None:
                wide = {t: X for t, X in enumerate(matrices) if X.shape[1] > X.shape[0]}
                keys = {t: coordinates_file_key(fingerprint(X)) for t, X in wide.items()}
                coordinates = [partial(self._task_coordinates, wide, keys, t) if t in wide else None
                               for t in range(len(matrices))]
            return [initial_indicator(X, k, rng, "kmeans", OFFSET, cache=self.cache, coordinates=C)
                    for X, k, C in zip(matrices, n_clusters, coordinates)]
        return [indicator(rng.integers(k, size=X.shape[0]), k, OFFSET) for X, k in zip(matrices, n_clusters)]

    def _task_coordinates(self, wide: dict, keys: dict, t: int) -> np.ndarray:
        """Task t's k-means coordinates (d > n: an eigendecomposition of its Gram matrix, 62 s
        for ng3's three tasks), kept in the cache with every wide task's (``wide``: task ->
        matrix, ``keys``: task -> key, as the k-means labels name the coordinates) and as files
        that the other workers read. Every wide task's are made here first, from task t on, each
        by the first worker to reach it: a task another worker is computing is passed over
        (``wait=False``), so two workers that start a sweep compute different tasks' at once
        instead of the same ones side by side; then task t's, waiting for the worker computing it."""
        def coordinates(s: int, wait: bool) -> np.ndarray | None:
            X = wide[s]
            return self.cache.get("kmeans_coordinates", keys[s], lambda: kmeans_coordinates(X), keep=len(wide),
                                  persist=True, valid=lambda C: C.shape[0] == X.shape[0] and C.dtype == np.float64,
                                  wait=wait)

        for s in sorted(wide, key=lambda s: (s < t, s)):
            coordinates(s, wait=False)
        return coordinates(t, wait=True)

    def _weights(self, T, lambda_=None) -> tuple[float, float]:
        """(coef, kappa) of Eq. 13-15 at ``lambda_`` (default: the fit's): 2 lambda/(T-1) and
        2 lambda (exact) or 2 lambda/(T-1)."""
        lambda_ = self.lambda_ if lambda_ is None else lambda_
        if T < 2:
            return 0.0, 0.0  # one task: no pairs, Eq. 10 is L^1
        coef = 2.0 * lambda_ / (T - 1)
        return coef, (2.0 * lambda_ if self.centroid_update == "exact" else coef)

    def _path_key(self, kernel_key: tuple, Z: list, n_clusters) -> tuple | None:
        """What this fit's path depends on but lambda_, when other lambda_ values can share it
        (SMKC); None here."""
        return None

    # --- fit -----------------------------------------------------------------------------
    def _fit(self, matrices, n_clusters, rng):
        T = len(matrices)
        kernel_key = self._kernel_key(matrices)
        kernel = self._union_kernel(matrices, kernel_key)
        Z = self._initial_indicators(matrices, n_clusters, rng)
        self.start_labels_ = [Zt.argmax(axis=1) for Zt in Z]
        path = self._path_key(kernel_key, Z, n_clusters)
        if path is None:
            return self._store(kernel, self._iterate(kernel, Z, n_clusters, []))
        # SMKC with its sweep's other lambda_ values (SMKC.shared_lambdas): one worker computes a
        # path while the other waits on its lock, then reads the fit it left for this lambda_
        with self.cache.computing(PATH_STEP, path, persist=True):
            decided = self.cache.peek(PATH_STEP, (path, self.lambda_), persist=True)
            if decided is not None:
                return self._store(kernel, unpack_path(decided, T))
            followers = [Follower(lam, *self._weights(T, lam)) for lam in self.shared_lambdas if lam != self.lambda_]
            fit = self._iterate(kernel, Z, n_clusters, followers)
            for follower in followers:  # only those still on the path at its end
                self.cache.put(PATH_STEP, (path, follower.lambda_), pack_path(fit, follower),
                               keep=2 * len(self.shared_lambdas), persist=True)
            self._store(kernel, fit)

    def _iterate(self, kernel: UnionKernel, Z: list, n_clusters, followers: list) -> PathFit:
        """Algorithm 2 from Z (the module docstring). ``followers`` (SMKC, parallel candidates):
        other lambda_ values whose fits from the same start take the same steps as long as no
        multi-task candidate with a non-zero weight is kept, neither this fit's nor theirs
        (then every kept state is the single-task candidate's, which lambda_ does not enter).
        Each step computes their multi-task candidates from the same state, products and pulls
        as their own fits would, so their gaps, choices and Eq. 10 are the bits of their own
        fits; a follower that keeps its multi-task candidate, or whose Eq. 10 is not finite,
        leaves the list, and all leave when this fit keeps one. Those left at the end are fits
        this one decided (``pack_path``); the list is updated in place."""
        T = len(Z)
        coef, kappa = self._weights(T)
        lambda_free = not (coef or kappa)  # the multi-task candidate is the single-task one
        smart, sequential = self._smart, getattr(self, "candidates", "parallel") == "sequential"
        Z = list(Z)
        KZ = self._kernel_products(kernel, Z)  # also the first iteration's: Z is unchanged until then
        # initial centroids from Z without the task regularisation (Algorithm 2, initialisation)
        F = [right_solve(KZ[t] / Z[t].shape[0], Z[t].T @ Z[t] / Z[t].shape[0]) for t in range(T)]
        G = {}
        for s in range(T):
            D_s = Z[s].T @ Z[s] / Z[s].shape[0]
            for t in range(s, T):
                # G^(s,t) = M^s'M^t = D_s^-1 Z_s'F^(s,t) / n_s
                G[(s, t)] = right_solve(F[t][kernel.rows[s]].T @ Z[s] / Z[s].shape[0], D_s).T
                G[(t, s)] = G[(s, t)].T
            G[(s, s)] = (G[(s, s)] + G[(s, s)].T) / 2.0
        traces_K = [kernel.task_trace(t) for t in range(T)]  # once: each is a strided read of K's diagonal
        local = [local_loss(traces_K[t], F[t][kernel.rows[t]], G[(t, t)], Z[t]) for t in range(T)]
        plans, emd_total = transport(G, n_clusters)
        eq10 = [sum(local) + coef * emd_total]
        for follower in followers:
            follower.eq10.append(sum(local) + follower.coef * emd_total)
        local_trace, branches, gaps = [list(local)], [], []
        trace = [float(np.mean(local)) if smart else eq10[0]]
        converged = False
        for iteration in range(self.max_iter):
            kept, gap = [], []
            for follower in followers:
                follower.kept.append([])
                follower.gaps.append([])
            if iteration:  # K[:, t] Z^t for every t at once: Z^t changes only in task t's own step below
                KZ = self._kernel_products(kernel, Z)
            for t in range(T):
                products = task_products(t, Z[t], KZ[t], kernel, F)  # both candidates' (parallel ones)
                pulls = task_pulls(t, F, G, plans) if coef or followers else None  # every multi-task candidate's
                chosen = candidate(t, Z[t], KZ[t], kernel, traces_K[t], F, G, plans, coef, kappa,
                                   products, pulls)  # steps 4-6 (Eq. 14-15, 19)
                if smart:
                    Z_start = chosen[3] if sequential else Z[t]
                    KZ_start = kernel.times(t, Z_start) if sequential else KZ[t]
                    single = candidate(t, Z_start, KZ_start, kernel, traces_K[t], F, G, plans, 0.0, 0.0,
                                       None if sequential else products)  # steps 7-9
                    gap.append(chosen[4] - single[4])
                    kept.append(1.0 if chosen[4] <= single[4] else 0.0)  # steps 10-14, ties to multi-task
                    for follower in followers:
                        loss = candidate(t, Z[t], KZ[t], kernel, traces_K[t], F, G, plans, follower.coef,
                                         follower.kappa, products, pulls)[4]
                        follower.gaps[-1].append(loss - single[4])
                        follower.kept[-1].append(1.0 if loss <= single[4] else 0.0)
                    followers[:] = [f for f in followers if not (f.kept[-1][-1] and (f.coef or f.kappa))]
                    if kept[-1] and not lambda_free:
                        followers.clear()  # this fit leaves the path its followers share
                    if not kept[-1]:
                        chosen = single
                F[t], G_col, G[(t, t)], Z[t], local[t] = chosen
                for s, block in G_col.items():
                    G[(s, t)], G[(t, s)] = block, block.T
            plans, emd_total = transport(G, n_clusters)  # step 2 of the next iteration
            eq10.append(sum(local) + coef * emd_total)
            for follower in followers:
                follower.eq10.append(sum(local) + follower.coef * emd_total)
            followers[:] = [f for f in followers if np.isfinite(f.eq10[-1])]  # its own fit raises there
            trace.append(float(np.mean(local)) if smart else eq10[-1])
            local_trace.append(list(local))
            branches.append(kept)
            gaps.append(gap)
            if not np.isfinite(eq10[-1]):
                raise FloatingPointError(
                    f"{type(self).__name__}: Eq. 10 is no longer finite after {len(trace) - 1} iterations "
                    f"(centroid_update={self.centroid_update!r}, T={T}; with 'paper' and T > 2 the centroids can "
                    "grow without bound, see the module docstring)")
            if has_converged(trace[-2], trace[-1], self.stopping, self.tol):
                converged = True
                break
        return PathFit(Z, G, plans, trace, eq10, local_trace, branches, gaps, converged)

    def _store(self, kernel: UnionKernel, fit: PathFit) -> None:
        """The fitted attributes and the record from a fit's end state."""
        T = len(fit.Z)
        self.Z_, self.G_, self.W_ = fit.Z, fit.G, fit.plans
        self.converged_ = fit.converged
        self.labels_ = [np.argmax(Zt, axis=1) for Zt in fit.Z]
        self.objective_trace_ = np.array(fit.trace)
        self.eq10_trace_ = np.array(fit.eq10)
        self.local_loss_trace_ = np.array(fit.local_trace)
        self.kernel_rows_ = kernel.n_rows
        self.n_iter_ = len(fit.trace) - 1
        self.record_.traces["local_loss"] = self.local_loss_trace_
        self.record_.scalars["kernel_rows"] = float(self.kernel_rows_)
        if self._smart:
            self.branch_trace_ = np.array(fit.branches).reshape(self.n_iter_, T)
            self.candidate_gap_trace_ = np.array(fit.gaps).reshape(self.n_iter_, T)
            self.record_.traces.update(multitask_kept=self.branch_trace_, candidate_gap=self.candidate_gap_trace_,
                                       eq10=self.eq10_trace_)
        if fit.plans:
            self.record_.matrices["W"] = LabelledMatrix(dict(fit.plans), "cluster", "cluster",
                                                        "EMD cluster relation W(t,s) (Eq. 20)")


class SMKC(MKC):
    """S-MKC: smart multi-task kernel clustering (AAAI-13, Algorithm 2): per task and
    iteration, the multi-task or the single-task (lambda = 0) candidate, whichever has the
    smaller local loss (ties to the multi-task one); see the module docstring.

    Parameters
    ----------
    n_clusters, lambda_, centroid_update, kernel, kernel_width, width_mode, fold_duplicates, init
        As MKC.
    stopping, tol, max_iter, cache, random_state
        As MKC.
    candidates : {"parallel", "sequential"}, default="parallel"
        Where the single-task candidate (step 7) starts: the saved Z (J_st never rises) or the
        multi-task candidate's Z from step 5 (the literal in-place reading; then O2 <= O1
        always and the multi-task candidate is never kept).
    shared_lambdas : sequence of float, default=()
        Other lambda_ values whose fits this one may decide (a sweep's trial runner gives the
        grid's, mtc.trial.trial_solver): with ``cache`` and parallel candidates, the fits at
        every lambda_ from the same start (same data, seed and other parameters) take the same
        steps as long as no multi-task candidate is kept, since the single-task candidate does
        not depend on lambda_; so this fit also computes their multi-task candidates at each
        step, from the same state, and keeps in ``cache`` the fit of each lambda_ that stays on
        its path to the end, which that lambda_'s fit then reads instead of computing: the same
        bits (tests/test_mkc.py). On NG1, 20NG and WebKB4 the multi-task candidate is never
        kept at the paper's lambda_ grid, so a sweep computes each seed's path once instead of
        ten times.

    Attributes
    ----------
    labels_, Z_, G_, W_, eq10_trace_, local_loss_trace_, kernel_rows_, n_iter_, converged_
        As MKC.
    objective_trace_ : ndarray of shape (n_iter_ + 1,)
        J_st = (1/T) sum_t L^t (Algorithm 2, step 16), from the initial point on.
    branch_trace_ : ndarray of shape (n_iter_, T)
        1 where the multi-task candidate was kept, 0 where the single-task one was.
    candidate_gap_trace_ : ndarray of shape (n_iter_, T)
        O1 - O2: the multi-task candidate's local loss minus the single-task one's.
    record_ : FitRecord
        As MKC, plus traces ``multitask_kept`` (= branch_trace_), ``candidate_gap`` (per task)
        and ``eq10``.
    """

    _smart = True
    _parameter_constraints = {**MKC._parameter_constraints, "candidates": [StrOptions({"parallel", "sequential"})],
                              "shared_lambdas": ["array-like"]}
    grid_siblings = {"shared_lambdas": "lambda_"}  # filled by a sweep's trial runner (mtc.trial.trial_solver)

    def __init__(self, n_clusters=2, lambda_=0.5, candidates="parallel", centroid_update="exact", kernel="gaussian",
                 kernel_width=1.0, width_mode="relative", fold_duplicates=True, init="kmeans", stopping="relative",
                 tol=1e-6, max_iter=100, shared_lambdas=(), cache=None, random_state=None):
        super().__init__(n_clusters=n_clusters, lambda_=lambda_, centroid_update=centroid_update, kernel=kernel,
                         kernel_width=kernel_width, width_mode=width_mode, fold_duplicates=fold_duplicates,
                         init=init, stopping=stopping, tol=tol, max_iter=max_iter, cache=cache,
                         random_state=random_state)
        self.candidates = candidates
        self.shared_lambdas = shared_lambdas

    def _path_key(self, kernel_key: tuple, Z: list, n_clusters) -> tuple | None:
        """Everything the fits sharing this one's path have in common (the kernel, the start, the
        other parameters, the route and threads of the kernel products, the libraries), when
        there are other lambda_ values to share it with; else None."""
        if self.cache is None or self.candidates != "parallel" or not [lam for lam in self.shared_lambdas
                                                                        if lam != self.lambda_]:
            return None
        return (PATH_VERSION, type(self).__name__, kernel_key, fingerprint(*Z), tuple(n_clusters),
                self.centroid_update, self.stopping, float(self.tol), int(self.max_iter), self._kernel_route,
                blas_threads(), *library_versions())
