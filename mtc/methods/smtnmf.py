"""SMT-NMF: symmetric multi-task NMF (Al-Stouhi & Reddy, SDM-14), generalised to k clusters.

Notation (ours): the T tasks' rows stacked into D (N x d, D >= 0, tf-idf in the paper),
task t owning a contiguous block of n_t rows; B = 1[D != 0] (Eq. 3.8); V (N x k) >= 0.

Affinity (Eq. 3.10-3.16). The instance-instance weight of Eq. 3.10 sums, over the features
both instances contain, the **sum** of the two edge weights (Eq. 3.13 prints x_{t*}^i; it
must be x_{t*}^k). In matrix form G = D B' + B D' (the feature check f of Eq. 3.12 is implied
by the two edge checks e). The optional self-loop check s of Eq. 3.11 removes the diagonal
2 sum_j D_ij (``self_loops=False``, the default). Eq. 3.16 scales the within-task blocks by
lambda_intra and the between-task blocks by lambda_inter. G is seed- and lambda-free: it is
built once from the sparse product and kept in ``cache``. No normalisation is printed;
``normalize="sym"`` gives D^-1/2 W D^-1/2 (Eq. 2.4 of the related work) as an option.
The iteration only multiplies by W, so W can also be applied without forming it
(``route="implicit"``, BipartiteAffinity): W V = lambda_inter G V + (lambda_intra -
lambda_inter) blockdiag(G) V - lambda_intra diag(g) V with G V = D (B'V) + B (D'V) and
g = 2 D 1 the removed self-loops, O(nnz k) per product and no N x N array; ||W||_F^2 from
d x d Gram matrices (BipartiteAffinity.squared_norm). Same iterates to rounding (tested);
``route="auto"`` takes it from IMPLICIT_MIN_SAMPLES stacked rows on.

Objective (Eq. 4.17-4.20). J = 1/2 ||W - VV'||^2 + alpha Tr(phi phi'), phi = H V K, H the
T x N task indicator, K the 2 x T matrix whose columns are all (+1, -1). With the cluster
masses S = H V (T x k), Tr(phi phi') = T sum_t (S_t1 - S_t2)^2: a per-task **balance**
penalty (zero at equal masses), not the orthogonality the text describes. For k clusters
we use Tr(H V C_k V' H') = sum_t sum_c (S_tc - mean_c S_t)^2 with the centering matrix
C_k = I - 11'/k: the relabelling-invariant PSD form vanishing exactly at equal masses. For
k = 2, K K' = 2T C_2, so this is the paper's penalty divided by 2T; the adaptive alpha of
Eq. 4.32 absorbs the constant (alpha_C = 2T alpha_K) and the iterates are identical
(tests/test_smtnmf.py). The brief and the paper agree here; the objective decides.

Update. The gradient (Eq. 4.23, correct as printed) is 2 (VV'V - WV + alpha P) with
P = H'H V C_k, i.e. P_ic = S_t(i)c - mean_c' S_t(i)c'. Eq. 4.26 is the gradient step of size
V / (4 VV'V): V <- 1/2 V o [1 + (WV - alpha P) / (VV'V)] (``update="paper"``); with alpha = 0
it is Ding et al.'s damped SNMF rule. Eq. 4.27-4.32 pick the largest alpha keeping V >= 0:
alpha = min over entries with P+ > 0 of (WV)_ij / P+_ij, every iteration
(``alpha="adaptive"``, optionally times ``alpha_scale`` in (0, 1], which Eq. 4.31 allows);
no entry with P+ > 0 gives alpha = 0. Then V_new >= V / 2 entrywise.

The printed algorithm does not converge: the adaptive alpha falls into a two-step cycle
and labels keep flipping (pinned in the tests), so it runs to ``max_iter``. For a fixed
alpha the split grad+ = VV'V + alpha H'H V, grad- = WV + (alpha/k) H'H V 11' (from
C_k = I - 11'/k) gives ``update="quarter_split"``: V o (grad-/grad+)^(1/4), which never
increases J (auxiliary function, as He et al.'s SNMF rule), and ``update="damped_split"``:
V o (1/2 + grad-/(2 grad+)), non-negative for any alpha. A fixed ``alpha`` (a float) is in
units of mean(W) T: with V V' ~ W, the SNMF gradient WV ~ N mean(W) v and the penalty's
H'H V C ~ n_t dv, so alpha / (mean(W) N / n_t) is free of the scale of W and of the sample
size (the brief says "mean(W) n_t"; the gradients balance at mean(W) N / n_t = mean(W) T for
equal task sizes). With ``update="paper"`` a fixed alpha is capped by the bound of Eq. 4.31
so that V stays non-negative; the alpha used is what the ``alpha`` trace records.

Init U[0, 1) ("random non-negative", Algorithm 1 step 4); readout argmax over the columns of
V, which all tasks share, so k must be equal across tasks. An instance sharing no term with
any other instance has a zero row in G (WV_i = 0 forces alpha = 0): that is an InputError.
An instance whose row of W is zero only because lambda_inter = 0 (all its shared terms are
in other tasks) gets a warning and is left out of the alpha bound; its V row is kept >= 0.
"""

from __future__ import annotations

import warnings
from numbers import Real

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval, StrOptions

from mtc.errors import InputError
from mtc.methods.base import AT_LEAST_ONE, NON_NEGATIVE, POSITIVE, STOPPING, MultiTaskClusterer
from mtc.numerics.affinity import IMPLICIT_MIN_SAMPLES, ROUTES
from mtc.numerics.cache import Cache, cached, fingerprint
from mtc.numerics.convergence import has_converged, summed_traces
from mtc.numerics.linalg import squared_norm
from mtc.numerics.snmf import EPS
from mtc.numerics.stacking import row_counts, stack_rows
from mtc.numerics.thin import thin_product
from mtc.record import LabelledMatrix

UPDATES = ("paper", "damped_split", "quarter_split")


# --- affinity (Eq. 3.10-3.16) ------------------------------------------------------------
def bipartite_affinity(D, self_loops: bool = False) -> np.ndarray:
    """G = D B' + B D' with B = 1[D != 0] (Eq. 3.10 in matrix form), dense N x N; the
    diagonal 2 sum_j D_ij (self-loops, Eq. 3.11) removed unless ``self_loops``."""
    D, B = edge_weights(D)
    G = np.asarray((D @ B.T).toarray())
    G += G.T  # B D' = (D B')'
    if not self_loops:
        np.fill_diagonal(G, 0.0)
    return G


def task_bounds(sizes) -> np.ndarray:
    """Row offsets [0, n_1, n_1 + n_2, ..., N] of the stacked tasks."""
    return np.concatenate([[0], np.cumsum(sizes)])


def multitask_affinity(G: np.ndarray, bounds, lambda_intra: float, lambda_inter: float,
                       normalize: str = "none") -> np.ndarray:
    """W (Eq. 3.16): G's within-task blocks x lambda_intra, between-task blocks x
    lambda_inter; ``normalize="sym"``: D^-1/2 W D^-1/2 with D = diag(W 1) (0 for a zero row).
    One N x N array (W itself) is allocated."""
    W = G * lambda_inter
    if lambda_intra != lambda_inter:
        for a, b in zip(bounds[:-1], bounds[1:]):
            W[a:b, a:b] = G[a:b, a:b] * lambda_intra
    if normalize == "sym":
        degree = W.sum(axis=1)
        scale = np.divide(1.0, np.sqrt(degree), out=np.zeros_like(degree), where=degree > 0)
        W *= scale[:, None]
        W *= scale[None, :]
    return W


def edge_weights(D):
    """(D, B): D as CSR without stored zeros and B = 1[D != 0] (Eq. 3.8)."""
    D = sp.csr_matrix(D, dtype=np.float64)
    D.eliminate_zeros()
    B = D.copy()
    B.data[:] = 1.0
    return D, B


class BipartiteAffinity:
    """W of Eq. 3.16 (with ``normalize`` and ``self_loops`` as multitask_affinity and
    bipartite_affinity) as products, never formed (module docstring): W V in O(nnz(D) k).

    Parameters
    ----------
    D : sparse matrix of shape (N, d)
        The stacked tasks' rows, D >= 0.
    bounds : ndarray of shape (T + 1,)
        Row offsets of the tasks (task_bounds).
    lambda_intra, lambda_inter : float
        Weights of the within- and between-task blocks (Eq. 3.16).
    normalize : {"none", "sym"}, default="none"
    self_loops : bool, default=False
    """

    def __init__(self, D, bounds, lambda_intra: float, lambda_inter: float, normalize: str = "none",
                 self_loops: bool = False):
        self.D, self.B = edge_weights(D)
        self.bounds = np.asarray(bounds)
        self.blocks = [(self.D[a:b], self.B[a:b]) for a, b in zip(self.bounds[:-1], self.bounds[1:])]
        self.lambda_intra, self.lambda_inter, self.self_loops = lambda_intra, lambda_inter, self_loops
        self.loops = 2.0 * np.asarray(self.D.sum(axis=1)).ravel()  # g_i = G_ii (Eq. 3.11)
        self.shape = (self.D.shape[0], self.D.shape[0])
        self.scale = None
        if normalize == "sym":
            degree = self @ np.ones(self.shape[0])
            self.scale = np.divide(1.0, np.sqrt(degree), out=np.zeros_like(degree), where=self.nonzero_rows())

    def _unscaled(self, V: np.ndarray) -> np.ndarray:
        """W V before the normalisation: lambda_inter G V + (lambda_intra - lambda_inter)
        blockdiag(G) V, less lambda_intra g o V without self-loops (Eq. 3.10-3.16)."""
        product = self.lambda_inter * (self.D @ (self.B.T @ V) + self.B @ (self.D.T @ V))
        if self.lambda_intra != self.lambda_inter:
            extra = self.lambda_intra - self.lambda_inter
            product += extra * np.vstack([Dt @ (Bt.T @ Vt) + Bt @ (Dt.T @ Vt)
                                          for (Dt, Bt), Vt in zip(self.blocks, np.split(V, self.bounds[1:-1]))])
        if not self.self_loops:
            product -= self.lambda_intra * self.loops[:, None] * V
        return product

    def __matmul__(self, V: np.ndarray) -> np.ndarray:
        V2 = V.reshape(V.shape[0], -1)
        if self.scale is not None:
            V2 = self.scale[:, None] * V2
        product = self._unscaled(V2)
        if self.scale is not None:
            product *= self.scale[:, None]
        return product.reshape(V.shape)

    def nonzero_rows(self) -> np.ndarray:
        """Rows of W with a non-zero entry, from the counts of shared terms (exact integers)."""
        terms = np.asarray(self.B.sum(axis=1)).ravel()
        within = np.concatenate([np.asarray(Bt @ (Bt.T @ np.ones(Bt.shape[0]))).ravel() for _, Bt in self.blocks])
        everywhere = np.asarray(self.B @ (self.B.T @ np.ones(self.shape[0]))).ravel()
        rows = (within - terms > 0) | ((everywhere - within > 0) & (self.lambda_inter > 0))
        return rows | ((terms > 0) & self.self_loops)

    def lonely_rows(self) -> np.ndarray:
        """Rows sharing no term with any other row (no edge of Eq. 3.10)."""
        terms = np.asarray(self.B.sum(axis=1)).ravel()
        return np.asarray(self.B @ (self.B.T @ np.ones(self.shape[0]))).ravel() - terms == 0

    def squared_norm(self) -> float:
        """||W||_F^2 = sum over blocks (p, q) of lambda_pq^2 sum_ij a_i a_j G_ij^2, a the squared
        scale (1 unnormalised), with sum_ij a_i a_j (D_i.B_j + B_i.D_j)^2 = <D_p'AD_p, B_q'AB_q> +
        <B_p'AB_p, D_q'AD_q> + 2 <D_p'AB_p, (D_q'AB_q)'> (d x d Gram matrices), less
        sum_i a_i^2 g_i^2 within tasks without self-loops."""
        a = np.ones(self.shape[0]) if self.scale is None else self.scale**2
        grams = []
        for (Dt, Bt), at in zip(self.blocks, np.split(a, self.bounds[1:-1])):
            weighted = sp.diags(at) @ Dt, sp.diags(at) @ Bt
            grams.append((Dt.T @ weighted[0], Bt.T @ weighted[1], Dt.T @ weighted[1]))

        def inner(X, Y):
            return float(X.multiply(Y).sum())

        total = 0.0
        for p, (DDp, BBp, DBp) in enumerate(grams):
            for q, (DDq, BBq, DBq) in enumerate(grams):
                weight = self.lambda_intra if p == q else self.lambda_inter
                if weight:
                    total += weight**2 * (inner(DDp, BBq) + inner(BBp, DDq) + 2.0 * inner(DBp, DBq.T))
        if not self.self_loops:
            total -= self.lambda_intra**2 * float(np.sum((a * self.loops) ** 2))
        return total


def nonzero_rows(W) -> np.ndarray:
    """Rows of W (dense or BipartiteAffinity) with a non-zero entry."""
    return (W != 0).any(axis=1) if isinstance(W, np.ndarray) else W.nonzero_rows()


def mean_entry(W) -> float:
    """mean(W) over its N^2 entries."""
    return float(W.mean()) if isinstance(W, np.ndarray) else float(np.sum(W @ np.ones(W.shape[0]))) / W.shape[0] ** 2


def block_means(W, bounds) -> np.ndarray:
    """T x T mean affinity of every (task, task) block of W (dense or BipartiteAffinity)."""
    T = len(bounds) - 1
    if not isinstance(W, np.ndarray):
        sizes = np.diff(bounds)
        H = np.repeat(np.eye(T), sizes, axis=0)  # N x T task indicator
        return np.add.reduceat(W @ H, bounds[:-1], axis=0) / np.outer(sizes, sizes)
    return np.array([[W[bounds[s]:bounds[s + 1], bounds[u]:bounds[u + 1]].mean() for u in range(T)]
                     for s in range(T)])


# --- penalty, objective and one step (Eq. 4.17-4.32) -----------------------------------
def cluster_masses(V: np.ndarray, bounds) -> np.ndarray:
    """S = H V (T x k): the mass of every cluster in every task."""
    return np.add.reduceat(V, bounds[:-1], axis=0)


def centred_masses(S: np.ndarray) -> np.ndarray:
    """S C_k (T x k): every task's cluster masses minus their mean over clusters (the sum over
    k, as S.mean sums and divides: the same bits without np.mean's 4 us of Python a call)."""
    return S - np.add.reduce(S, axis=1, keepdims=True) / S.shape[1]


def penalty_direction(S: np.ndarray, sizes, centred: np.ndarray | None = None) -> np.ndarray:
    """P = H'H V C_k (N x k): row i is S_t(i) minus its mean over clusters (``centred``:
    centred_masses(S) when the caller has it)."""
    return np.repeat(centred_masses(S) if centred is None else centred, sizes, axis=0)


def balance_term(S: np.ndarray, centred: np.ndarray | None = None) -> float:
    """Tr(H V C_k V'H') = sum_t sum_c (S_tc - mean_c S_t)^2 (for k = 2: Tr(phi phi') / 2T)."""
    return float(((centred_masses(S) if centred is None else centred) ** 2).sum())


def snmf_term(W_sq: float, V: np.ndarray, WV: np.ndarray, VtV: np.ndarray | None = None) -> float:
    """1/2 ||W - VV'||^2 = 1/2 (||W||^2 - 2 tr(V'WV) + ||V'V||^2), without forming VV'
    (``VtV``: V'V when the caller has it)."""
    VtV = V.T @ V if VtV is None else VtV
    return 0.5 * float(W_sq - 2.0 * (V * WV).sum() + (VtV * VtV).sum())


def adaptive_alpha(WV: np.ndarray, P: np.ndarray, rows=None) -> float:
    """Eq. 4.32: min over the entries with P+ > 0 (in ``rows`` when given) of (WV)/P+; 0 when
    there is none."""
    mask = P > 0
    if rows is not None:
        mask &= rows[:, None]
    bounds = WV[mask] / P[mask]
    return float(bounds.min()) if bounds.size else 0.0


def smtnmf_step(V: np.ndarray, WV: np.ndarray, S: np.ndarray, sizes, alpha: float, update: str,
                P: np.ndarray | None = None, VtV: np.ndarray | None = None) -> np.ndarray:
    """One update of V given WV = W V and S = H V, for the penalty weight ``alpha`` (``P``:
    penalty_direction(S, sizes) and ``VtV``: V'V when the caller has them; a sub-second fit's
    iteration is a few dozen numpy calls on N x k arrays, so each one saved counts)."""
    VVtV = V @ (V.T @ V if VtV is None else VtV)
    if update == "paper":  # Eq. 4.26
        return 0.5 * V * (1.0 + (WV - alpha * (penalty_direction(S, sizes) if P is None else P)) / (VVtV + EPS))
    masses = np.repeat(S, sizes, axis=0)  # (H'H V)_i = S_t(i)
    grad_pos = VVtV + alpha * masses
    grad_neg = WV + alpha * masses.mean(axis=1, keepdims=True)  # (alpha / k) H'H V 11'
    ratio = grad_neg / (grad_pos + EPS)
    if update == "quarter_split":
        return V * np.sqrt(np.sqrt(ratio))
    if update == "damped_split":
        return V * (0.5 + 0.5 * ratio)
    raise ValueError(f"unknown SMT-NMF update {update!r}; choose one of {UPDATES}")


class SMTNMF(MultiTaskClusterer):
    """SMT-NMF (Algorithm 1) for k clusters shared by all tasks.

    Parameters
    ----------
    n_clusters : int or list of int, default=2
        k, equal for every task (V's columns are shared; unequal counts are an InputError).
    lambda_intra : float, default=1.0
        Weight of the within-task blocks of W (Eq. 3.16; > 0; Sec. 5.1 footnote: 1).
    lambda_inter : float, default=0.5
        Weight of the between-task blocks (Eq. 3.16; 0 <= lambda_inter <= lambda_intra, the
        multi-task coefficient of Eq. 1.1 in [0, 1], else an InputError). The paper sweeps it
        (Sec. 5.1, grid in conf/method/smtnmf.yaml); 0.5 is the middle of that grid.
    normalize : {"none", "sym"}, default="none"
        none: W as Eq. 3.16 (the paper); sym: D^-1/2 W D^-1/2.
    self_loops : bool, default=False
        Keep the diagonal of Eq. 3.10 (the optional check of Eq. 3.11 off).
    update : {"paper", "damped_split", "quarter_split"}, default="paper"
        paper: Eq. 4.26; quarter_split: never increases J for a fixed alpha; damped_split:
        the damped form of the same split (see the module docstring).
    alpha : "adaptive" or float, default="adaptive"
        adaptive: Eq. 4.32 every iteration; a float >= 0: fixed, in units of mean(W) T.
    alpha_scale : float, default=1.0
        Factor in (0, 1] on the adaptive alpha (Eq. 4.31 allows any alpha below the bound).
    stopping : {"relative", "decrease"}, default="relative"
        Rule on the objective (the paper gives none; the printed route cycles and so runs to
        ``max_iter``).
    tol : float, default=1e-6
        Tolerance of the stopping rule.
    max_iter : int, default=500
        Iterations at most.
    route : {"auto", "dense", "implicit"}, default="auto"
        dense: W formed (N x N); implicit: W applied as products of D and B, never formed
        (BipartiteAffinity; the same iterates to rounding); auto: implicit from 5000 stacked
        rows on.
    cache : Cache or None, default=None
        Keeps G (seed- and lambda-free) for the next fit on the same data (dense route).
    random_state : int, Generator or None, default=None
        Seed of the U[0, 1) initialisation of V.

    Attributes
    ----------
    labels_ : list of ndarray of shape (n_t,)
        argmax of every row of V, per task.
    V_ : ndarray of shape (N, k)
        The shared factor, tasks' rows stacked.
    objective_trace_ : ndarray of shape (n_iter_ + 1,)
        J = snmf + alpha x balance at every iterate, with the alpha of that iterate.
    alpha_trace_ : ndarray of shape (n_iter_ + 1,)
        alpha used at every iterate (in the units of the C_k penalty; the paper's K-penalty
        alpha is this / 2T for k = 2).
    snmf_trace_ : ndarray of shape (n_iter_ + 1,)
        1/2 ||W - VV'||^2 per iterate.
    balance_trace_ : ndarray of shape (n_iter_ + 1,)
        Tr(H V C_k V'H') per iterate.
    label_changes_trace_ : ndarray of shape (n_iter_ + 1,)
        Labels changed by each iteration (0 first).
    cluster_masses_ : ndarray of shape (T, k)
        S = H V at the end.
    affinity_blocks_ : ndarray of shape (T, T)
        Mean affinity of every (task, task) block of W.
    n_iter_ : int
        Iterations run.
    converged_ : bool
        Whether the stopping rule was met before ``max_iter``.
    record_ : FitRecord
        Traces ``alpha``, ``snmf_term``, ``balance_term``, ``objective``, ``label_changes``;
        matrices ``affinity_blocks`` (task x task) and ``cluster_masses`` (cluster x
        ("mass",) per task); scalars ``zero_rows_of_V`` and ``isolated_instances``.
    """

    _parameter_constraints = {
        **MultiTaskClusterer._parameter_constraints,
        "lambda_intra": [POSITIVE], "lambda_inter": [NON_NEGATIVE],
        "normalize": [StrOptions({"none", "sym"})], "self_loops": ["boolean"],
        "update": [StrOptions(set(UPDATES))],
        "alpha": [StrOptions({"adaptive"}), Interval(Real, 0, None, closed="left")],
        "alpha_scale": [Interval(Real, 0, 1, closed="right")], "stopping": [STOPPING],
        "tol": [NON_NEGATIVE], "max_iter": [AT_LEAST_ONE], "route": [StrOptions(set(ROUTES))],
        "cache": [None, Cache],
    }
    input_needs = frozenset({"non_negative"})  # D >= 0 (edge weights, Eq. 3.7)
    equal_clusters_reason = "V's k columns are shared across tasks"

    def __init__(self, n_clusters=2, lambda_intra=1.0, lambda_inter=0.5, normalize="none", self_loops=False,
                 update="paper", alpha="adaptive", alpha_scale=1.0, stopping="relative", tol=1e-6, max_iter=500,
                 route="auto", cache=None, random_state=None):
        self.n_clusters = n_clusters
        self.lambda_intra = lambda_intra
        self.lambda_inter = lambda_inter
        self.normalize = normalize
        self.self_loops = self_loops
        self.update = update
        self.alpha = alpha
        self.alpha_scale = alpha_scale
        self.stopping = stopping
        self.tol = tol
        self.max_iter = max_iter
        self.route = route
        self.cache = cache
        self.random_state = random_state

    # --- set-up ----------------------------------------------------------------------------
    def _implicit(self, sizes) -> bool:
        return self.route == "implicit" or (self.route == "auto" and sum(sizes) >= IMPLICIT_MIN_SAMPLES)

    def _bipartite(self, matrices, sizes):
        """G (Eq. 3.10): dense from the cache, or on the implicit route BipartiteAffinity at
        lambda 1; rejects instances sharing no term with any other."""
        if self._implicit(sizes):
            G = BipartiteAffinity(stack_rows(matrices), task_bounds(sizes), 1.0, 1.0, "none", self.self_loops)
            lonely = np.flatnonzero(G.lonely_rows())
        else:
            G = cached(self.cache, "smtnmf_bipartite_affinity", (fingerprint(*matrices), self.self_loops),
                       lambda: bipartite_affinity(stack_rows(matrices), self.self_loops))
            lonely = np.flatnonzero(np.count_nonzero(G, axis=1) == (np.diag(G) != 0))  # no off-diagonal edge
        if lonely.size:
            bounds = task_bounds(sizes)
            task = int(np.searchsorted(bounds, lonely[0], side="right") - 1)
            raise InputError(f"{lonely.size} instance(s) share no term with any other instance (Eq. 3.10 gives "
                             f"them no edge), first: row {lonely[0] - bounds[task]} of task {task}; drop them")
        return G

    def _check_fit_input(self):
        if self.lambda_inter > self.lambda_intra:
            raise InputError(f"lambda_inter = {self.lambda_inter} exceeds lambda_intra = {self.lambda_intra}: the "
                             "multi-task coefficient lambda_inter / lambda_intra must lie in [0, 1] (Eq. 1.1)")

    # --- iteration -------------------------------------------------------------------------
    def _run(self, W, V, sizes, alpha_mode):
        """Iterate from V on W (tasks of ``sizes`` stacked); alpha_mode "adaptive" or a
        number (already in W's units). Returns V and the traces."""
        bounds = task_bounds(sizes)
        W_sq = squared_norm(W)
        active = nonzero_rows(W)
        rows = None if active.all() else active
        WV = thin_product(W, V)  # dense W: the bits of W @ V, faster (mtc.numerics.thin)
        labels = np.argmax(V, axis=1)
        traces = {"alpha": [], "snmf": [], "balance": [], "objective": [], "changes": [0]}
        converged = False
        for it in range(self.max_iter + 1):
            S = cluster_masses(V, bounds)
            centred, VtV = centred_masses(S), V.T @ V  # each computed once per iteration
            P = penalty_direction(S, sizes, centred) if alpha_mode == "adaptive" or self.update == "paper" else None
            if alpha_mode == "adaptive":
                alpha = self.alpha_scale * adaptive_alpha(WV, P, rows)  # Eq. 4.32
            elif self.update == "paper":  # Eq. 4.31: capped so that V stays >= 0
                alpha = min(alpha_mode, adaptive_alpha(WV, P, rows))
            else:
                alpha = alpha_mode
            snmf, balance = snmf_term(W_sq, V, WV, VtV), balance_term(S, centred)
            for name, value in (("alpha", alpha), ("snmf", snmf), ("balance", balance),
                                ("objective", snmf + alpha * balance)):
                traces[name].append(value)
            if it > 0 and has_converged(traces["objective"][-2], traces["objective"][-1], self.stopping, self.tol):
                converged = True
                break
            if it == self.max_iter:
                break
            V = smtnmf_step(V, WV, S, sizes, alpha, self.update, P, VtV)  # Eq. 4.26 or a split rule
            if rows is not None:
                np.maximum(V, 0.0, out=V)  # rows outside the bound (zero rows of W) only
            WV = thin_product(W, V)  # the O(N^2 k) product (O(nnz k) implicit), once per iteration
            new_labels = np.argmax(V, axis=1)
            traces["changes"].append(int(np.count_nonzero(new_labels != labels)))
            labels = new_labels
        return V, {name: np.array(values, float) for name, values in traces.items()}, converged, int((~active).sum())

    def _alpha_mode(self, W, sizes):
        if self.alpha == "adaptive":
            return "adaptive"
        return float(self.alpha) * mean_entry(W) * W.shape[0] / float(np.mean(sizes))  # units of mean(W) N / n_t

    # --- fit -------------------------------------------------------------------------------
    def _fit(self, matrices, n_clusters, rng):
        self._check_fit_input()
        sizes = row_counts(matrices)
        k = n_clusters[0]
        G = self._bipartite(matrices, sizes)
        if isinstance(G, BipartiteAffinity):  # W of Eq. 3.16 as products
            W = BipartiteAffinity(G.D, G.bounds, self.lambda_intra, self.lambda_inter, self.normalize,
                                  self.self_loops)
        else:
            W = multitask_affinity(G, task_bounds(sizes), self.lambda_intra, self.lambda_inter, self.normalize)
        V0 = rng.random((W.shape[0], k))  # Algorithm 1 step 4
        V, traces, converged, isolated = self._run(W, V0, sizes, self._alpha_mode(W, sizes))
        self._store(V, traces, converged, isolated, W, sizes)

    def _store(self, V, traces, converged, isolated, W, sizes):
        bounds = task_bounds(sizes)
        if isolated:
            warnings.warn(f"{isolated} instance(s) have a zero row of W at lambda_inter = {self.lambda_inter} (their "
                          "shared terms are all in other tasks): left out of the alpha bound", stacklevel=3)
        self.V_ = V
        self.labels_ = [np.argmax(V[a:b], axis=1) for a, b in zip(bounds[:-1], bounds[1:])]
        self.objective_trace_ = traces["objective"]
        self.alpha_trace_, self.snmf_trace_, self.balance_trace_ = traces["alpha"], traces["snmf"], traces["balance"]
        self.label_changes_trace_ = traces["changes"]
        self.n_iter_ = len(self.objective_trace_) - 1
        self.converged_ = converged
        self.cluster_masses_ = cluster_masses(V, bounds)
        self.affinity_blocks_ = block_means(W, bounds)
        self._fill_record(isolated)

    def _fill_record(self, isolated):
        record = self.record_
        record.traces.update(alpha=self.alpha_trace_, snmf_term=self.snmf_trace_, balance_term=self.balance_trace_,
                             objective=self.objective_trace_, label_changes=self.label_changes_trace_)
        record.scalars["zero_rows_of_V"] = int(np.count_nonzero(~(self.V_ > 0).any(axis=1)))  # a defect, not a label
        record.scalars["isolated_instances"] = isolated
        record.matrices["affinity_blocks"] = LabelledMatrix.single(
            self.affinity_blocks_, "task", "task", "mean affinity of every task block of W (Eq. 3.16)")
        record.matrices["cluster_masses"] = LabelledMatrix(
            {(t, 0): self.cluster_masses_[t][:, None] for t in range(self.cluster_masses_.shape[0])},
            "cluster", ("mass",), "cluster masses S = HV per task (the balance penalty's argument)")


class SMTNMFNoBalance(SMTNMF):
    """S-NMF of the paper's Sec. 5.1: symmetric NMF with alpha = 0 (Eq. 4.26 = the damped SNMF
    rule) from a U[0, 1) start, on each task's own bipartite affinity (Eq. 3.10, block G_tt).

    Each task is fitted alone, with its own V_t: on a block-diagonal W (lambda_inter = 0) one
    shared V with alpha = 0 would cut between tasks instead of within them. The pooled A-NMF is
    SMTNMF(alpha=0, lambda_inter=lambda_intra) (one V on the whole affinity).

    Parameters
    ----------
    n_clusters, normalize, self_loops, update, stopping, tol, max_iter, route, cache, random_state
        As SMTNMF (alpha = 0, so update="paper" is the damped SNMF rule; lambda_intra only
        scales W and lambda_inter plays no part).

    Attributes
    ----------
    labels_ : list of ndarray of shape (n_t,)
        argmax of every row of V_t.
    V_ : ndarray of shape (N, k)
        The tasks' factors V_t stacked.
    objective_trace_, snmf_trace_ : ndarray of shape (n_iter_ + 1,)
        Summed over tasks (a task that stopped held at its last value).
    alpha_trace_, balance_trace_ : ndarray of shape (n_iter_ + 1,)
        alpha = 0 throughout; the balance term is recorded, not penalised.
    label_changes_trace_ : ndarray of shape (n_iter_ + 1,)
        Labels changed by each iteration, summed over tasks.
    cluster_masses_ : ndarray of shape (T, k)
        S_t = 1'V_t.
    affinity_blocks_ : ndarray of shape (T, T)
        Mean affinity of the task blocks of the multi-task W (between-task blocks at
        lambda_intra, for reference; the fit uses the diagonal blocks only).
    n_iter_ : int
        Most iterations over tasks.
    converged_ : bool
        Whether every task met the stopping rule.
    record_ : FitRecord
        As SMTNMF.
    """

    equal_clusters_reason = "each task's k-column factor is stacked into one V"

    def __init__(self, n_clusters=2, normalize="none", self_loops=False, update="paper", stopping="relative",
                 tol=1e-6, max_iter=500, route="auto", cache=None, random_state=None):
        super().__init__(n_clusters=n_clusters, lambda_intra=1.0, lambda_inter=1.0, normalize=normalize,
                         self_loops=self_loops, update=update, alpha=0.0, alpha_scale=1.0, stopping=stopping,
                         tol=tol, max_iter=max_iter, route=route, cache=cache, random_state=random_state)

    def _task_affinity(self, W, a, b):
        """W_t: task [a, b)'s own block of G, normalised as asked."""
        if isinstance(W, BipartiteAffinity):
            return BipartiteAffinity(W.D[a:b], np.array([0, b - a]), 1.0, 1.0, self.normalize, self.self_loops)
        return multitask_affinity(W[a:b, a:b], np.array([0, b - a]), 1.0, 1.0, self.normalize)

    def _fit(self, matrices, n_clusters, rng):
        self._check_fit_input()
        sizes = row_counts(matrices)
        bounds = task_bounds(sizes)
        W = self._bipartite(matrices, sizes)  # G: its diagonal blocks are the tasks' own affinities
        parts = []
        for a, b in zip(bounds[:-1], bounds[1:]):
            parts.append(self._run(self._task_affinity(W, a, b), rng.random((b - a, n_clusters[0])), [b - a], 0.0))
        V = np.vstack([part[0] for part in parts])
        traces = {name: summed_traces([part[1][name] for part in parts]) for name in parts[0][1]}
        traces["changes"] = summed_traces([np.append(part[1]["changes"], 0) for part in parts])[:len(traces["alpha"])]
        self._store(V, traces, all(part[2] for part in parts), sum(part[3] for part in parts), W, sizes)
