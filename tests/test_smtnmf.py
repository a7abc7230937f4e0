"""SMT-NMF (SDM-14): every statement the brief (../shared/specs/smtnmf.md) marks checked,
re-verified, plus the bad-input errors and planted clusters."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils._param_validation import InvalidParameterError

from mtc.data.synthetic import make_synthetic
from mtc.errors import InputError
from mtc.methods.smtnmf import (SMTNMF, SMTNMFNoBalance, adaptive_alpha, balance_term, bipartite_affinity,
                                cluster_masses, multitask_affinity, penalty_direction, smtnmf_step, snmf_term,
                                task_bounds)
from mtc.metrics import accuracy
from mtc.numerics.cache import Cache
from mtc.numerics.snmf import snmf


def sparse_nonnegative(n_tasks=2, n_clusters=2, seed=1, samples_per_cluster=30):
    """make_synthetic with its entries below 1.5 set to 0: non-negative and sparse (~20%), like
    tf-idf. Dense data would make Eq. 3.10 the rank-2 G_ik = r_i + r_k (row sums only)."""
    data = make_synthetic(n_tasks=n_tasks, n_clusters=n_clusters, n_shared=1, samples_per_cluster=samples_per_cluster,
                          n_features=60, support=10, seed=seed)
    return data, [np.where(X > 1.5, X, 0.0) for X in data.matrices]


@pytest.fixture(scope="module")
def small():
    """Three tasks of 7, 5, 6 sparse non-negative rows, W at lambda = (1, 0.3), V > 0."""
    rng = np.random.default_rng(0)
    sizes = [7, 5, 6]
    D = rng.random((18, 12)) * (rng.random((18, 12)) < 0.4)
    D[:, 0] += 0.1  # every instance shares a term
    bounds = task_bounds(sizes)
    W = multitask_affinity(bipartite_affinity(D), bounds, 1.0, 0.3)
    return D, sizes, bounds, W, rng.random((18, 2)) + 0.1


def objective(W, V, bounds, alpha):
    """Eq. 4.17 with the C_k penalty, from the definitions (dense H, explicit VV')."""
    H = np.zeros((len(bounds) - 1, W.shape[0]))
    for t, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        H[t, a:b] = 1.0
    k = V.shape[1]
    C = np.eye(k) - np.ones((k, k)) / k
    return 0.5 * np.linalg.norm(W - V @ V.T) ** 2 + alpha * np.trace(H @ V @ C @ V.T @ H.T), H


def test_matrix_form_of_eq_3_10_equals_the_literal_loop(small):
    D, sizes, bounds, _, _ = small
    N, d = D.shape
    task = np.repeat(np.arange(3), sizes)
    literal = np.zeros((N, N))
    for i in range(N):
        for k in range(N):
            for j in range(d):
                f = D[task == task[i], j].any() and D[task == task[k], j].any()  # Eq. 3.12
                e = D[i, j] != 0 and D[k, j] != 0  # Eq. 3.13 (x_{t*}^k)
                literal[i, k] += (i != k) * f * e * (D[i, j] + D[k, j])  # Eq. 3.11, sum of the two weights
    G = bipartite_affinity(sp.csr_matrix(D))
    np.testing.assert_allclose(G, literal, rtol=0, atol=1e-12)
    assert np.allclose(G, G.T) and not np.diag(G).any()
    np.testing.assert_allclose(np.diag(bipartite_affinity(D, self_loops=True)), 2 * D.sum(axis=1))


def test_lambda_blocks_and_sym_normalisation(small):
    D, sizes, bounds, W, _ = small
    G = bipartite_affinity(D)
    for s in range(3):
        for u in range(3):
            block = (slice(bounds[s], bounds[s + 1]), slice(bounds[u], bounds[u + 1]))
            np.testing.assert_allclose(W[block], G[block] * (1.0 if s == u else 0.3))
    Ws = multitask_affinity(G, bounds, 1.0, 0.3, "sym")
    degree = W.sum(axis=1)
    np.testing.assert_allclose(Ws, W / np.sqrt(np.outer(degree, degree)))
    # only lambda_inter / lambda_intra matters for the sym form
    np.testing.assert_allclose(multitask_affinity(G, bounds, 2.0, 0.6, "sym"), Ws)


def test_penalty_closed_forms_k2_paper_K_and_general_k(small):
    _, sizes, bounds, W, V = small
    T = 3
    value, H = objective(W, V, bounds, 1.0)
    K = np.tile(np.array([[1.0], [-1.0]]), (1, T))  # Eq. 4.20
    phi = H @ V @ K  # Eq. 4.18
    S = cluster_masses(V, bounds)
    assert np.trace(phi @ phi.T) == pytest.approx(T * np.sum((S[:, 0] - S[:, 1]) ** 2))
    assert np.trace(phi @ phi.T) == pytest.approx(2 * T * balance_term(S))  # K K' = 2T C_2
    np.testing.assert_allclose(K @ K.T, 2 * T * (np.eye(2) - 0.5))
    V3 = np.random.default_rng(1).random((18, 3))
    S3 = cluster_masses(V3, bounds)
    pairs = sum((S3[:, a] - S3[:, b]) ** 2 for a in range(3) for b in range(a + 1, 3))
    assert balance_term(S3) == pytest.approx(pairs.sum() / 3)  # (1/k) x the paper's pairwise contrast
    assert value == pytest.approx(snmf_term(np.sum(W * W), V, W @ V) + balance_term(S))


def test_gradient_eq_4_23_by_finite_differences_and_eq_4_26_is_its_step(small):
    _, sizes, bounds, W, _ = small
    V = np.random.default_rng(2).random((18, 3)) + 0.1
    alpha = 0.7
    S = cluster_masses(V, bounds)
    P = penalty_direction(S, sizes)
    grad = -2 * W @ V + 2 * V @ V.T @ V + 2 * alpha * P  # Eq. 4.23, C_k in place of K K'
    numeric = np.zeros_like(V)
    h = 1e-6
    for i in range(V.shape[0]):
        for c in range(V.shape[1]):
            E = np.zeros_like(V)
            E[i, c] = h
            numeric[i, c] = (objective(W, V + E, bounds, alpha)[0] - objective(W, V - E, bounds, alpha)[0]) / (2 * h)
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-5)
    step = V - V / (4 * V @ V.T @ V) * grad  # Eq. 4.25 with eps = V / (4 VV'V)
    np.testing.assert_allclose(smtnmf_step(V, W @ V, S, sizes, alpha, "paper"), step, rtol=1e-10)


def literal_algorithm_1(W, bounds, V, n_iter):
    """Algorithm 1 as printed, k = 2, with the paper's H (Eq. 4.19) and K (Eq. 4.20)."""
    T = len(bounds) - 1
    H = np.zeros((T, W.shape[0]))
    for t, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        H[t, a:b] = 1.0
    K = np.tile(np.array([[1.0], [-1.0]]), (1, T))
    alphas = []
    for _ in range(n_iter):
        P = H.T @ H @ V @ K @ K.T
        positive = P > 0
        alpha = np.min((W @ V)[positive] / P[positive])  # Eq. 4.32
        V = 0.5 * V * (1 + (W @ V - alpha * P) / (V @ V.T @ V))  # Eq. 4.26
        alphas.append(alpha)
    return V, np.array(alphas)


def test_k2_with_the_paper_K_and_with_C2_gives_identical_adaptive_iterates():
    data, mats = sparse_nonnegative(n_tasks=3, samples_per_cluster=10)
    model = SMTNMF(n_clusters=2, lambda_inter=0.4, tol=0, max_iter=50, random_state=3).fit(mats)
    bounds = task_bounds([X.shape[0] for X in mats])
    W = multitask_affinity(bipartite_affinity(np.vstack(mats)), bounds, 1.0, 0.4)
    V0 = np.random.default_rng(3).random((W.shape[0], 2))
    V, alphas = literal_algorithm_1(W, bounds, V0, 50)
    np.testing.assert_allclose(model.V_, V, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(model.alpha_trace_[:50], 2 * 3 * alphas, rtol=1e-10)  # alpha_C = 2T alpha_K


def literal_iterates(W, V, sizes, alpha_scale, max_iter):
    """The printed route (update=paper, adaptive alpha) from the helpers, each computing what
    it needs afresh, as Algorithm 1 reads; SMTNMF._run shares the masses, P and V'V."""
    bounds, W_sq = task_bounds(sizes), np.sum(W * W)
    WV, objective, alphas = W @ V, [], []
    for it in range(max_iter + 1):
        S = cluster_masses(V, bounds)
        alpha = alpha_scale * adaptive_alpha(WV, penalty_direction(S, sizes))
        alphas.append(alpha)
        objective.append(snmf_term(W_sq, V, WV) + alpha * balance_term(S))
        if it == max_iter:
            return V, np.array(objective), np.array(alphas)
        V = smtnmf_step(V, WV, S, sizes, alpha, "paper")
        WV = W @ V


@pytest.mark.parametrize("alpha_scale", [1.0, 0.5])
def test_the_fit_shares_each_iterations_terms_and_gives_the_literal_iterates_to_the_bit(alpha_scale):
    _, matrices = sparse_nonnegative(samples_per_cluster=20)
    fitted = SMTNMF(n_clusters=2, alpha_scale=alpha_scale, tol=0, max_iter=60, random_state=3).fit(matrices)
    sizes = [X.shape[0] for X in matrices]
    W = multitask_affinity(bipartite_affinity(sp.csr_matrix(np.vstack(matrices))), task_bounds(sizes), 1.0, 0.5)
    V, objective, alphas = literal_iterates(W, np.random.default_rng(3).random((sum(sizes), 2)), sizes,
                                            alpha_scale, 60)
    assert np.array_equal(fitted.V_, V)
    assert np.array_equal(fitted.objective_trace_, objective) and np.array_equal(fitted.alpha_trace_, alphas)


def test_objective_trace_matches_the_explicit_objective():
    data, mats = sparse_nonnegative()
    model = SMTNMF(n_clusters=2, update="quarter_split", alpha=0.5, tol=0, max_iter=30, random_state=0).fit(mats)
    bounds = task_bounds([X.shape[0] for X in mats])
    W = multitask_affinity(bipartite_affinity(np.vstack(mats)), bounds, 1.0, 0.5)
    alpha = model.alpha_trace_[-1]
    assert alpha == pytest.approx(0.5 * W.mean() * 2)  # a fixed alpha is in units of mean(W) T
    value, _ = objective(W, model.V_, bounds, alpha)
    assert model.objective_trace_[-1] == pytest.approx(value, rel=1e-10)
    assert model.snmf_trace_[-1] + alpha * model.balance_trace_[-1] == pytest.approx(value, rel=1e-10)


def test_alpha_zero_is_the_damped_snmf_rule():
    _, mats = sparse_nonnegative()
    model = SMTNMF(n_clusters=2, alpha=0.0, lambda_inter=0.2, tol=0, max_iter=40, random_state=5).fit(mats)
    bounds = task_bounds([X.shape[0] for X in mats])
    W = multitask_affinity(bipartite_affinity(np.vstack(mats)), bounds, 1.0, 0.2)
    V, _ = snmf(W, np.random.default_rng(5).random((W.shape[0], 2)), update="damped", tol=0, max_iter=40)
    np.testing.assert_allclose(model.V_, V, rtol=1e-10)
    assert not model.alpha_trace_.any()


def test_adaptive_alpha_invariants(small):
    _, sizes, bounds, W, V = small
    WV, S = W @ V, cluster_masses(V, bounds)
    P = penalty_direction(S, sizes)
    alpha = adaptive_alpha(WV, P)
    new = smtnmf_step(V, WV, S, sizes, alpha, "paper")
    assert (new >= V / 2 - 1e-15).all()
    assert np.min((WV - alpha * P)[P > 0]) == pytest.approx(0, abs=1e-12)  # the bound of Eq. 4.30 is tight
    # tight for V_new >= V / 2 (non-negativity itself would allow more: 1 + (WV - alpha P)/VV'V >= 0)
    assert not (smtnmf_step(V, WV, S, sizes, 1.01 * alpha, "paper") >= V / 2).all()
    balanced = np.ones_like(V)  # equal masses: P = 0, no entry with P+ > 0
    Pb = penalty_direction(cluster_masses(balanced, bounds), sizes)
    assert adaptive_alpha(W @ balanced, Pb) == 0.0
    assert np.isfinite(smtnmf_step(balanced, W @ balanced, cluster_masses(balanced, bounds), sizes, 0.0, "paper")).all()


def test_scale_invariance(small):
    _, sizes, bounds, W, V = small
    c = 7.0
    WV, S = W @ V, cluster_masses(V, bounds)
    Vc = np.sqrt(c) * V
    WVc, Sc = (c * W) @ Vc, cluster_masses(Vc, bounds)
    alpha = adaptive_alpha(WV, penalty_direction(S, sizes))
    assert adaptive_alpha(WVc, penalty_direction(Sc, sizes)) == pytest.approx(c * alpha)
    for update in ("paper", "quarter_split", "damped_split"):
        np.testing.assert_allclose(smtnmf_step(Vc, WVc, Sc, sizes, c * alpha, update),
                                   np.sqrt(c) * smtnmf_step(V, WV, S, sizes, alpha, update), rtol=1e-10)


@pytest.mark.parametrize("alpha", [0.0, 1.0, 100.0])
def test_quarter_split_never_increases_the_objective(alpha):
    _, mats = sparse_nonnegative(n_tasks=3, n_clusters=3, samples_per_cluster=10)
    model = SMTNMF(n_clusters=3, update="quarter_split", alpha=alpha, tol=0, max_iter=150, random_state=1).fit(mats)
    assert np.all(np.diff(model.objective_trace_) <= 1e-10 * model.objective_trace_[0])
    damped = SMTNMF(n_clusters=3, update="damped_split", alpha=alpha, tol=0, max_iter=150, random_state=1).fit(mats)
    assert (damped.V_ >= 0).all() and np.isfinite(damped.objective_trace_).all()


def test_the_printed_algorithm_cycles_where_the_quarter_split_converges():
    """Known behaviour, pinned: the adaptive alpha of Eq. 4.32 settles into a two-step cycle."""
    _, mats = sparse_nonnegative()
    paper = SMTNMF(n_clusters=2, max_iter=300, random_state=0).fit(mats)
    alpha = paper.alpha_trace_[-40:]
    assert not paper.converged_ and paper.n_iter_ == 300
    np.testing.assert_allclose(alpha[2:], alpha[:-2], rtol=1e-2)  # period two
    assert np.min(np.abs(np.diff(alpha))) > 0.05 * alpha.mean()  # but not a fixed point
    quarter = SMTNMF(n_clusters=2, update="quarter_split", alpha=1.0, max_iter=1000, random_state=0).fit(mats)
    assert quarter.converged_ and np.all(np.diff(quarter.objective_trace_) <= 1e-10 * quarter.objective_trace_[0])


def test_planted_tasks_alpha_zero_cuts_between_tasks_smtnmf_within():
    data, mats = sparse_nonnegative()
    cut = SMTNMF(n_clusters=2, lambda_inter=0.0, alpha=0.0, update="damped_split", random_state=0).fit(mats)
    assert [accuracy(t.y, labels) for t, labels in zip(data.tasks, cut.labels_)] == [0.5, 0.5]
    assert all(len(set(labels)) == 1 for labels in cut.labels_)  # task = cluster: the degenerate solution
    for kwargs in ({"lambda_inter": 0.0}, {}, {"update": "quarter_split", "alpha": 1.0}, {"normalize": "sym"}):
        model = SMTNMF(n_clusters=2, random_state=0, **kwargs).fit(mats)
        assert [accuracy(t.y, labels) for t, labels in zip(data.tasks, model.labels_)] == [1.0, 1.0], kwargs
    single = SMTNMFNoBalance(n_clusters=2, random_state=0).fit(mats)
    assert [accuracy(t.y, labels) for t, labels in zip(data.tasks, single.labels_)] == [1.0, 1.0]


def test_record_and_cache():
    _, mats = sparse_nonnegative()
    cache = Cache()
    model = SMTNMF(n_clusters=2, lambda_inter=0.3, max_iter=20, cache=cache, random_state=0).fit(mats)
    again = SMTNMF(n_clusters=2, lambda_inter=0.8, max_iter=20, cache=cache, random_state=0).fit(mats)
    assert len(cache.results["smtnmf_bipartite_affinity"]) == 1  # G shared across lambda and seed
    blocks = model.record_.matrices["affinity_blocks"].blocks[(0, 0)]
    blocks_again = again.affinity_blocks_
    np.testing.assert_allclose(blocks[0, 1] / 0.3, blocks_again[0, 1] / 0.8)  # between-task blocks x lambda_inter
    masses = model.record_.matrices["cluster_masses"]
    np.testing.assert_allclose(masses.blocks[(1, 0)][:, 0], model.V_[60:].sum(axis=0))  # 60 rows per task
    assert set(model.record_.traces) == {"alpha", "snmf_term", "balance_term", "objective", "label_changes"}
    assert all(len(trace) == model.n_iter_ + 1 for trace in model.record_.traces.values())


def test_bad_input_one_clear_error_each():
    _, mats = sparse_nonnegative()
    with pytest.raises(InputError, match="same number of clusters in every task"):
        SMTNMF(n_clusters=[2, 3]).fit(mats)
    with pytest.raises(InputError, match="task 1: SMTNMF needs non-negative data .*data.params.scale=minmax"):
        SMTNMF(n_clusters=2).fit([mats[0], -mats[1]])
    lonely = mats[1].copy()
    lonely[4] = 0.0
    with pytest.raises(InputError, match=r"1 instance\(s\) share no term .* row 4 of task 1"):
        SMTNMF(n_clusters=2).fit([mats[0], lonely])
    with pytest.raises(InputError, match="lambda_inter = 2.0 exceeds lambda_intra = 1.0"):
        SMTNMF(n_clusters=2, lambda_inter=2.0).fit(mats)
    with pytest.raises(InvalidParameterError, match="The 'lambda_inter' parameter of SMTNMF must be"):
        SMTNMF(n_clusters=2, lambda_inter=-0.1).fit(mats)
    with pytest.raises(InvalidParameterError, match="The 'alpha' parameter of SMTNMF must be"):
        SMTNMF(n_clusters=2, alpha="auto").fit(mats)
    # an instance whose terms are all in the other task: a zero row of W at lambda_inter = 0 only
    cross = mats[1].copy()
    cross[4] = 0.0
    cross[4, np.flatnonzero(mats[0].any(axis=0) & ~np.delete(cross, 4, axis=0).any(axis=0))[:1]] = 1.0
    assert cross[4].any()  # a term task 0 has and no other row of task 1 has
    with pytest.warns(UserWarning, match="zero row of W at lambda_inter = 0.0"):
        model = SMTNMF(n_clusters=2, lambda_inter=0.0, max_iter=20).fit([mats[0], cross])
    assert model.record_.scalars["isolated_instances"] == 1 and (model.V_ >= 0).all()
