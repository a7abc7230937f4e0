"""MBC and S-MBC: (smart) multi-task Bregman clustering (Zhang & Zhang, AAAI-13, Algorithm 1).

Notation: task t has n_t samples X^t (rows), c_t clusters with centroids M^t (c_t x d) and
assignment h^t; pi^t are the cluster masses of the EMD. The objective, Eq. 1, with the
squared Euclidean divergence (the only one the experiments use):

  J = (1/T) sum_t L^t + lambda Omega,  L^t = (1/n_t) sum_i ||x_i - m_h(i)||^2,
  Omega = 1/(T(T-1)) sum_{t != s} EMD(P^t, P^s),
  EMD(P^t, P^s) = min_{W^ts >= 0, W 1 = pi^t, W'1 = pi^s} sum_zl w_zl ||m^t_z - m^s_l||^2   (Eq. 2)

W step (Eq. 2): one exact transport problem per unordered task pair (POT's network simplex;
W^st = W^ts' since the cost is symmetric).

M step (Eq. 3-5). For squared Euclidean, Eq. 5's minimiser (A u_L + B u_R) / (A + B) is the
stationary point of T J in m^t_z with H and W fixed (the pair terms appear once as (t, s)
and once as (s, t)):

  m^t_z = [ (1/n_t) sum_{i in z} x_i + (2 lambda / (T-1)) sum_{s != t} (W^ts M^s)_z ]
          / ( n_z / n_t + 2 lambda pi^t_z ).

Printed, Eq. 3 has A = n_z/n_t + lambda/c and B = lambda/c: with pi = 1/c this is the same
update (our test checks stationarity of T J by finite differences). An empty cluster keeps
a centroid pulled to its related centroids when lambda > 0, and its previous one when
lambda = 0 (Eq. 6 is then k-means).

H step (Eq. 7; the printed sum over i is garbled): h(x_i) = argmin_z ||x_i - m_z||^2.

Marginals (``marginals``): the text defines pi as cluster proportions, but Eq. 3 uses 1/c and
the kernel section relaxes pi = 1/c; Fig. 1's W has uniform marginals. With ``uniform``
(default) the loop is block-coordinate descent and J never rises; with ``proportions`` the
H step changes the EMD's feasible set and J can rise.

S-MBC (``smart=True``), Algorithm 1: per task, a multi-task candidate (Eq. 3 then Eq. 7,
local loss J1) and a single-task one (cluster means, Eq. 6, then Eq. 7, local loss J2); the
smaller local loss is kept, ties to the multi-task one. Which assignment the single-task
candidate starts from is ambiguous: ``candidates="parallel"`` (default; both from the saved
state, as the prose says) makes J_st = (1/T) sum_t L^t non-increasing (J2 <= L(means(h),
h) <= L(M, h)); ``"sequential"`` (the literal in-place reading: step 7 uses step 5's h)
makes J2 <= J1 always, so the multi-task candidate is never kept.

Initialisation is not given in the paper: ``init="random"`` draws random labels (the
literal reading), ``"kmeans++"`` seeds with scikit-learn's k-means++; M is then the cluster
means ("compute M according to H without task regularization").
"""

from __future__ import annotations

from numbers import Real

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import kmeans_plusplus
from sklearn.utils._param_validation import Interval, StrOptions

from mtc.methods.base import AT_LEAST_ONE, NON_NEGATIVE, STOPPING, MultiTaskClusterer
from mtc.numerics.affinity import row_norms_sq, squared_distances
from mtc.numerics.convergence import has_converged
from mtc.numerics.linalg import summed
from mtc.numerics.seeding import seed_from
from mtc.numerics.transport import MARGINALS, cluster_marginal, emd
from mtc.record import LabelledMatrix


def cluster_sums(X, labels: np.ndarray, k: int) -> np.ndarray:
    """H'X (k x d), the rows of X summed per cluster (Eq. 3's numerator). Sparse X: one
    bincount over the stored entries, which adds them row by row as the sparse product H'X
    does, so the same bits without building H or a sparse k x d result (the product route is
    kept in tests/test_hotspots.py)."""
    if not sp.issparse(X):
        H = sp.csr_matrix((np.ones(X.shape[0]), (np.arange(X.shape[0]), labels)), shape=(X.shape[0], k))
        return np.asarray(H.T @ X)
    X = sp.csr_matrix(X)
    d = X.shape[1]
    bins = np.repeat(np.asarray(labels, dtype=np.int64) * d, np.diff(X.indptr)) + X.indices
    return np.bincount(bins, weights=X.data, minlength=k * d).reshape(k, d)


def local_loss(distances: np.ndarray, labels: np.ndarray) -> float:
    """L^t = (1/n_t) sum_i ||x_i - m_h(i)||^2 from the n x c distances."""
    return float(distances[np.arange(labels.shape[0]), labels].mean())


class MBC(MultiTaskClusterer):
    """MBC and, with ``smart=True``, S-MBC (AAAI-13, Algorithm 1); see the module docstring.

    Parameters
    ----------
    n_clusters : int or list of int, default=2
        c_t, clusters per task.
    lambda_ : float, default=0.5
        Weight of the task regularisation Omega (Eq. 1); the AAAI paper uses 0.5.
    smart : bool, default=False
        S-MBC's rule: keep per task the candidate (multi-task or single-task) with the
        smaller local loss.
    candidates : {"parallel", "sequential"}, default="parallel"
        Where S-MBC's single-task candidate starts: the saved state (monotone J_st) or the
        multi-task candidate's assignment (the literal in-place reading).
    marginals : {"uniform", "proportions"}, default="uniform"
        Cluster masses pi of the EMD: 1/c (Eq. 3, monotone J) or cluster proportions (Eq. 2's text).
    init : {"random", "kmeans++"}, default="random"
        Initial assignment: random labels, or k-means++ seeds.
    stopping : {"relative", "decrease"}, default="relative"
        Stopping rule on the objective trace.
    tol : float, default=1e-6
        Tolerance of the stopping rule.
    max_iter : int, default=100
        Iterations at most.
    random_state : int, Generator or None, default=None
        Seed of the initialisation.

    Attributes
    ----------
    labels_ : list of ndarray of shape (n_t,)
        h^t, the cluster of every sample.
    centroids_ : list of ndarray of shape (c_t, d)
        M^t.
    W_ : dict of (t, s) to ndarray of shape (c_t, c_s)
        The EMD plans between every ordered task pair at the last W step (W^st = W^ts').
    objective_trace_ : ndarray of shape (n_iter_ + 1,)
        Eq. 1's J (``smart=False``) or J_st = (1/T) sum_t L^t (``smart=True``), from the
        initial point on, each with the EMD solved at that point.
    local_loss_trace_ : ndarray of shape (n_iter_ + 1, T)
        L^t per iteration and task.
    branch_trace_ : ndarray of shape (n_iter_, T)
        1 where the multi-task candidate was kept (always 1 when ``smart=False``).
    candidate_gap_trace_ : ndarray of shape (n_iter_, T)
        J1 - J2, the multi-task candidate's local loss minus the single-task one's
        (``smart=True`` only).
    n_iter_ : int
        Iterations run.
    converged_ : bool
        Whether the stopping rule was met before ``max_iter``.
    record_ : FitRecord
        Matrix ``W`` (cluster x cluster per ordered task pair), traces ``local_loss``,
        ``multitask_kept`` and (smart) ``candidate_gap``, per task.
    """

    _parameter_constraints = {
        **MultiTaskClusterer._parameter_constraints,
        "lambda_": [Interval(Real, 0, None, closed="left")], "smart": ["boolean"],
        "candidates": [StrOptions({"parallel", "sequential"})], "marginals": [StrOptions(set(MARGINALS))],
        "init": [StrOptions({"random", "kmeans++"})], "stopping": [STOPPING], "tol": [NON_NEGATIVE],
        "max_iter": [AT_LEAST_ONE],
    }

    def __init__(self, n_clusters=2, lambda_=0.5, smart=False, candidates="parallel", marginals="uniform",
                 init="random", stopping="relative", tol=1e-6, max_iter=100, random_state=None):
        self.n_clusters = n_clusters
        self.lambda_ = lambda_
        self.smart = smart
        self.candidates = candidates
        self.marginals = marginals
        self.init = init
        self.stopping = stopping
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state

    # --- steps ---------------------------------------------------------------------------
    def _initial_labels(self, X, k, rng) -> np.ndarray:
        if self.init == "random":
            return rng.integers(k, size=X.shape[0])
        centres, _ = kmeans_plusplus(X, k, random_state=seed_from(rng))
        return np.argmin(squared_distances(X, np.asarray(centres)), axis=1)

    def _transport(self, centroids, labels, n_clusters) -> tuple[dict, dict]:
        """Eq. 2 for every unordered pair: ({(t, s): W^ts}, {(t, s): EMD cost}), both orders."""
        masses = [cluster_marginal(h, k, self.marginals) for h, k in zip(labels, n_clusters)]
        plans, costs = {}, {}
        for t in range(len(centroids)):
            for s in range(t + 1, len(centroids)):
                plan, cost = emd(squared_distances(centroids[t], centroids[s]), masses[t], masses[s])
                plans[(t, s)], plans[(s, t)] = plan, plan.T
                costs[(t, s)] = costs[(s, t)] = cost
        return plans, costs

    def _centroids(self, t, X, labels, k, previous, centroids, plans, lam) -> np.ndarray:
        """Eq. 3 (lam > 0) or Eq. 6 (lam = 0): the minimiser of T J in M^t for fixed H, W.
        Formed in place on the fresh cluster sums: the same operations in the same order as
        the formula written out (tests/test_hotspots.py, to the bit), without five more
        c x d arrays (d = 40,674 on ng1)."""
        n = X.shape[0]
        sums = np.ascontiguousarray(cluster_sums(X, labels, k))  # M in C order: its row norms' bits depend on it
        sums /= n
        denominator = np.bincount(labels, minlength=k) / n
        T = len(centroids)
        if lam > 0:
            pi = cluster_marginal(labels, k, self.marginals)
            coupling = summed(plans[(t, s)] @ centroids[s] for s in range(T) if s != t)  # sum_s W^ts M^s
            coupling *= 2.0 * lam / (T - 1)
            sums += coupling
            denominator = denominator + 2.0 * lam * pi
        defined = denominator > 0
        if defined.all():
            sums /= denominator[:, None]
            return sums
        M = previous.copy()  # an empty cluster (Eq. 3 undefined) keeps its centroid
        M[defined] = sums[defined] / denominator[defined, None]
        return M

    def _candidate(self, t, X, x_sq, labels, k, previous, centroids, plans, lam):
        """(M, h, L^t) of one candidate: centroids from ``labels``, then Eq. 7."""
        M = self._centroids(t, X, labels, k, previous, centroids, plans, lam)
        distances = squared_distances(X, M, x_sq)
        h = np.argmin(distances, axis=1)
        return M, h, local_loss(distances, h)

    def _objective(self, local, costs, T, lam) -> float:
        """J of Eq. 1 (or J_st when smart): (1/T) sum_t L^t + lambda Omega."""
        value = float(np.mean(local))
        if not self.smart and T > 1:
            value += lam * sum(costs.values()) / (T * (T - 1))
        return value

    # --- fit -----------------------------------------------------------------------------
    def _fit(self, matrices, n_clusters, rng):
        T = len(matrices)
        lam = self.lambda_ if T > 1 else 0.0  # one task: no task pairs, Omega is empty
        x_sq = [row_norms_sq(X) for X in matrices]
        labels = [self._initial_labels(X, k, rng) for X, k in zip(matrices, n_clusters)]
        centroids = [self._centroids(t, X, h, k, np.zeros((k, X.shape[1])), [], {}, 0.0)
                     for t, (X, h, k) in enumerate(zip(matrices, labels, n_clusters))]
        local = [local_loss(squared_distances(X, M, sq), h) for X, sq, M, h in zip(matrices, x_sq, centroids, labels)]
        plans, costs = self._transport(centroids, labels, n_clusters)
        trace, local_trace, branches, gaps = [self._objective(local, costs, T, lam)], [list(local)], [], []
        self.converged_ = False
        for _ in range(self.max_iter):
            kept, gap = [], []
            for t, (X, sq, k) in enumerate(zip(matrices, x_sq, n_clusters)):
                args = (t, X, sq)
                M1, h1, J1 = self._candidate(*args, labels[t], k, centroids[t], centroids, plans, lam)  # steps 4-6
                if self.smart:
                    start = labels[t] if self.candidates == "parallel" else h1
                    M2, h2, J2 = self._candidate(*args, start, k, centroids[t], centroids, plans, 0.0)  # steps 7-9
                    gap.append(J1 - J2)
                    if J2 < J1:  # steps 10-14, ties to the multi-task candidate
                        M1, h1, J1 = M2, h2, J2
                        kept.append(0.0)
                    else:
                        kept.append(1.0)
                else:
                    kept.append(1.0)
                centroids[t], labels[t], local[t] = M1, h1, J1
            plans, costs = self._transport(centroids, labels, n_clusters)  # step 2 of the next iteration
            trace.append(self._objective(local, costs, T, lam))
            local_trace.append(list(local))
            branches.append(kept)
            gaps.append(gap)
            if has_converged(trace[-2], trace[-1], self.stopping, self.tol):
                self.converged_ = True
                break
        self.labels_, self.centroids_, self.W_ = labels, centroids, plans
        self.objective_trace_ = np.array(trace)
        self.local_loss_trace_ = np.array(local_trace)
        self.branch_trace_ = np.array(branches).reshape(len(branches), T)
        self.n_iter_ = len(trace) - 1
        self.record_.traces.update(local_loss=self.local_loss_trace_, multitask_kept=self.branch_trace_)
        if self.smart:
            self.candidate_gap_trace_ = np.array(gaps).reshape(len(gaps), T)
            self.record_.traces["candidate_gap"] = self.candidate_gap_trace_
        if plans:
            self.record_.matrices["W"] = LabelledMatrix(dict(plans), "cluster", "cluster",
                                                        "EMD cluster relation W(t,s) (Eq. 2)")
