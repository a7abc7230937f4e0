"""MKC and S-MKC (AAAI-13, Eq. 8-22, Algorithm 2): the kernel-form state against explicit
feature-space centroids (linear kernel), the kappa of Eq. 13, the Z step, the smart rule's
monotonicity, the union kernel with folded duplicates, the cache, planted clusters, lambda = 0.
Every statement the MBC-family spec (shared/specs/mbc_family.md) marks *checked* for the kernel
half is re-verified here (tests named "*checked*")."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils._param_validation import InvalidParameterError

import mtc.methods.mkc as mkc
from mtc.data.synthetic import make_synthetic
from mtc.methods.mkc import (MKC, SMKC, centroid_costs, centroid_state, local_loss, right_solve, semi_nmf_step,
                             transport)
from mtc.metrics import accuracy
from mtc.numerics.affinity import gaussian_affinity, median_positive
from mtc.numerics.cache import Cache, fingerprint
from mtc.numerics.kernels import distinct_rows, gram, squared_distances_from_gram, union_kernel, weighted_pair_median
from mtc.numerics.seeding import coordinates_file_key, indicator, kmeans_coordinates
from mtc.numerics.transport import emd


# --- explicit feature space (linear kernel: phi(X^t) = X^t', d x n_t) -------------------
def explicit_update(t, X, M, Z, plans, coef, kappa):
    """Eq. 13 with explicit centroids: ((1/n) X'Z + coef sum_s M^s W^st) (Z'Z/n + (kappa/c) I)^-1."""
    n, c = Z[t].shape
    pull = sum((M[s] @ plans[(s, t)] for s in range(len(X)) if s != t), np.zeros_like(M[t]))
    return (X[t].T @ Z[t] / n + coef * pull) @ np.linalg.inv(Z[t].T @ Z[t] / n + (kappa / c) * np.eye(c))


def explicit_eq10(X, M, Z, plans, lam):
    """Eq. 10: sum_t (1/n_t)||X^t' - M^t Z^t'||^2 + (2 lambda/(T-1)) sum_{t<s} <W^ts, ||m^t_z - m^s_l||^2>."""
    T = len(X)
    value = sum(np.sum((X[t].T - M[t] @ Z[t].T) ** 2) / X[t].shape[0] for t in range(T))
    for t in range(T):
        for s in range(t + 1, T):
            cost = ((M[t][:, :, None] - M[s][:, None, :]) ** 2).sum(axis=0)
            value += 2.0 * lam / (T - 1) * np.sum(plans[(t, s)] * cost)
    return value


def state_from(M, X_all):
    """F^(.,t) = X M^t over all rows and G^(s,t) = M^s'M^t."""
    return [X_all @ Mt for Mt in M], {(s, t): M[s].T @ M[t] for s in range(len(M)) for t in range(len(M))}


@pytest.fixture(scope="module")
def linear_problem():
    """Three small tasks, random Z >= 0 and random explicit centroids, with the linear kernel."""
    rng = np.random.default_rng(3)
    data = make_synthetic(n_tasks=3, n_clusters=3, n_shared=1, samples_per_cluster=8, n_features=5, support=3, seed=3)
    X = data.matrices
    kernel = union_kernel(X, "linear", fold=False)
    Z = [rng.random((Xt.shape[0], 3)) + 0.2 for Xt in X]
    M = [rng.standard_normal((5, 3)) for _ in X]
    return X, np.vstack(X), kernel, Z, M


def test_kernel_state_with_the_exact_recursion_equals_explicit_centroids(linear_problem):
    """*checked* (spec): F/G by Eq. 14, Eq. 15 (s = t) and the exact G^(s,t) recursion equal the
    explicit Eq. 13 centroids, through two sweeps over the tasks (Z steps in between)."""
    X, X_all, kernel, Z, M = linear_problem
    Z, M = [z.copy() for z in Z], [m.copy() for m in M]
    F, G = state_from(M, X_all)
    lam, T = 0.7, 3
    coef, kappa = 2 * lam / (T - 1), 2 * lam
    for _ in range(2):
        plans, _ = transport(G, [3, 3, 3])
        for t in range(T):
            F_t, G_col, G_tt = centroid_state(t, Z[t], kernel.times(t, Z[t]), kernel, F, G, plans, coef, kappa)
            M[t] = explicit_update(t, X, M, Z, plans, coef, kappa)
            scale = np.abs(X_all @ M[t]).max()
            np.testing.assert_allclose(F_t, X_all @ M[t], atol=1e-10 * scale, rtol=0)
            for s, block in G_col.items():
                np.testing.assert_allclose(block, M[s].T @ M[t], atol=1e-10 * scale, rtol=0)
            np.testing.assert_allclose(G_tt, M[t].T @ M[t], atol=1e-10 * scale, rtol=0)
            F[t], G[(t, t)] = F_t, G_tt
            for s, block in G_col.items():
                G[(s, t)], G[(t, s)] = block, block.T
            Z[t] = semi_nmf_step(Z[t], F_t[kernel.rows[t]], G_tt)


def test_printed_eq15_for_s_not_t_recomputes_the_partner_and_is_inexact(linear_problem):
    """Eq. 15 as printed for s != t (D_s^-1 V D_t^-1 with Z^s'K^st Z^t) is M^s(Eq. 13)'M^t_new,
    not the stored M^s'M^t_new: off by order 1 away from a fixed point."""
    X, X_all, kernel, Z, M = linear_problem
    F, G = state_from(M, X_all)
    plans, _ = transport(G, [3, 3, 3])
    lam, T, t, s = 0.7, 3, 0, 1
    coef = 2 * lam / (T - 1)
    D = [Zt.T @ Zt / Zt.shape[0] + (2 * lam / 3) * np.eye(3) for Zt in Z]
    _, G_col, _ = centroid_state(t, Z[t], kernel.times(t, Z[t]), kernel, F, G, plans, coef, 2 * lam)
    K_st = X[s] @ X[t].T
    others_t, others_s = [p for p in range(T) if p != t], [q for q in range(T) if q != s]
    V = (Z[s].T @ K_st @ Z[t] / (Z[s].shape[0] * Z[t].shape[0])
         + coef / Z[s].shape[0] * sum(Z[s].T @ F[p][kernel.rows[s]] @ plans[(p, t)] for p in others_t)
         + coef / Z[t].shape[0] * sum(plans[(s, q)] @ F[q][kernel.rows[t]].T @ Z[t] for q in others_s)
         + coef**2 * sum(plans[(s, q)] @ G[(q, p)] @ plans[(p, t)] for q in others_s for p in others_t))
    printed = np.linalg.solve(D[s], V) @ np.linalg.inv(D[t])
    M_new = explicit_update(t, X, M, Z, plans, coef, 2 * lam)
    np.testing.assert_allclose(G_col[s], M[s].T @ M_new, atol=1e-10 * np.abs(G_col[s]).max())
    assert np.abs(printed - M[s].T @ M_new).max() > 0.1 * np.abs(G_col[s]).max()


def test_eq21_costs_and_eq22_local_loss_equal_explicit_computations(linear_problem):
    X, X_all, kernel, Z, M = linear_problem
    F, G = state_from(M, X_all)
    for t in range(3):
        for s in range(3):
            if s != t:
                explicit = ((M[t][:, :, None] - M[s][:, None, :]) ** 2).sum(axis=0)
                np.testing.assert_allclose(centroid_costs(G, t, s), explicit, rtol=1e-10, atol=1e-12)
        direct = np.sum((X[t].T - M[t] @ Z[t].T) ** 2) / X[t].shape[0]
        via_kernel = local_loss(kernel.task_trace(t), F[t][kernel.rows[t]], G[(t, t)], Z[t])
        assert via_kernel == pytest.approx(direct, rel=1e-10)
    plans, total = transport(G, [3, 3, 3])
    for (t, s), plan in plans.items():
        np.testing.assert_allclose(plan.sum(axis=1), 1 / 3, atol=1e-12)  # uniform marginals (Eq. 10)
        np.testing.assert_allclose(plan, plans[(s, t)].T)
    assert total == pytest.approx(sum(emd(centroid_costs(G, t, s), np.full(3, 1 / 3), np.full(3, 1 / 3))[1]
                                      for t in range(3) for s in range(t + 1, 3)), rel=1e-12)


def gradient(f, M, h=1e-5):
    """Central finite differences of f at M."""
    g = np.zeros_like(M)
    for index in np.ndindex(M.shape):
        step = np.zeros_like(M)
        step[index] = h
        g[index] = (f(M + step) - f(M - step)) / (2 * h)
    return g


def test_exact_kappa_is_stationary_for_eq10_and_the_printed_one_is_not_for_three_tasks(linear_problem):
    """*checked* (spec): with T = 3, Eq. 13 with kappa = 2 lambda (ours, recovered from the
    kernel state) zeroes the gradient of Eq. 10 in M^t; the printed kappa = 2 lambda/(T-1) does not."""
    X, X_all, kernel, Z, M = linear_problem
    F, G = state_from(M, X_all)
    plans, _ = transport(G, [3, 3, 3])
    lam, t = 0.5, 1
    norms = {}
    for name, kappa in (("exact", 2 * lam), ("paper", 2 * lam / 2)):
        F_t, _, _ = centroid_state(t, Z[t], kernel.times(t, Z[t]), kernel, F, G, plans, 2 * lam / 2, kappa)
        M_t = np.linalg.lstsq(X_all, F_t, rcond=None)[0]  # X_all has full column rank: M^t itself

        def objective(Mt):
            return explicit_eq10(X, [*M[:t], Mt, *M[t + 1:]], Z, plans, lam)

        norms[name] = np.abs(gradient(objective, M_t)).max()
    assert norms["exact"] < 1e-6 and norms["paper"] > 1e-2, norms


def test_exact_equals_paper_for_two_tasks_and_the_printed_kappa_breaks_monotonicity_for_three():
    data = make_synthetic(n_tasks=2, n_clusters=3, n_shared=1, samples_per_cluster=12, separation=1.0, seed=4)
    for cls in (MKC, SMKC):
        a = cls(n_clusters=3, centroid_update="exact", init="random", max_iter=30, random_state=1).fit(data.matrices)
        b = cls(n_clusters=3, centroid_update="paper", init="random", max_iter=30, random_state=1).fit(data.matrices)
        np.testing.assert_array_equal(a.objective_trace_, b.objective_trace_)
        for la, lb in zip(a.labels_, b.labels_):
            np.testing.assert_array_equal(la, lb)
    three = make_synthetic(n_tasks=3, n_clusters=3, n_shared=1, samples_per_cluster=12, separation=1.0, seed=4)
    paper = MKC(n_clusters=3, centroid_update="paper", init="random", max_iter=30, random_state=1).fit(three.matrices)
    assert np.diff(paper.objective_trace_).max() > 0  # Eq. 10 rises: the step is not its minimiser


def test_one_eq19_step_never_increases_the_local_loss():
    """*checked* (spec): for any fixed M^t = phi(X) C in the kernel span, one Eq. 19 step does
    not increase L^t (Ding, Li & Jordan's semi-NMF rule)."""
    rng = np.random.default_rng(0)
    data = make_synthetic(n_tasks=2, n_clusters=3, n_shared=1, samples_per_cluster=10, seed=2)
    kernel = union_kernel(data.matrices, "gaussian", 0.7)
    for trial in range(30):
        t = trial % 2
        C = rng.standard_normal((kernel.n_rows, 3))
        F = kernel.K @ C  # phi(X)'M with M = phi(X) C
        B = C.T @ F
        A = F[kernel.rows[t]]
        Z = rng.random((A.shape[0], 3)) * (rng.random((A.shape[0], 3)) < 0.7) + 1e-3
        before = local_loss(kernel.task_trace(t), A, B, Z)
        after = local_loss(kernel.task_trace(t), A, B, semi_nmf_step(Z, A, B))
        assert after <= before + 1e-12 * abs(before)


class BinaryStart(MKC):
    """MKC started from a binary Z0 (one-hot of random labels, no offset): Eq. 19 keeps zeros."""

    def _initial_indicators(self, matrices, n_clusters, rng):
        self.start_ = [rng.integers(k, size=X.shape[0]) for X, k in zip(matrices, n_clusters)]
        return [indicator(labels, k) for labels, k in zip(self.start_, n_clusters)]


def test_a_binary_start_freezes_the_labels():
    data = make_synthetic(n_tasks=2, n_clusters=3, n_shared=1, samples_per_cluster=10, seed=2)
    solver = BinaryStart(n_clusters=3, max_iter=20, random_state=0).fit(data.matrices)
    for start, labels, Z in zip(solver.start_, solver.labels_, solver.Z_):
        np.testing.assert_array_equal(labels, start)
        assert np.count_nonzero(Z) == Z.shape[0]  # only the starting ones are non-zero


@pytest.fixture(scope="module")
def noisy():
    return make_synthetic(n_tasks=3, n_clusters=3, n_shared=2, samples_per_cluster=12, separation=0.8, seed=6)


@pytest.mark.parametrize("centroid_update", ["exact", "paper"])
def test_parallel_smkc_never_raises_j_st_nor_any_local_loss(noisy, centroid_update):
    for seed, lam in ((0, 0.5), (1, 2.0)):
        solver = SMKC(n_clusters=3, lambda_=lam, centroid_update=centroid_update, init="random", max_iter=40,
                      random_state=seed).fit(noisy.matrices)
        trace = solver.objective_trace_
        assert len(trace) > 5 and np.diff(trace).max() <= 1e-12 * trace[0]
        np.testing.assert_allclose(trace, solver.local_loss_trace_.mean(axis=1), rtol=1e-14)
        assert np.diff(solver.local_loss_trace_, axis=0).max() <= 1e-12 * trace[0]
        np.testing.assert_array_equal(solver.branch_trace_, solver.candidate_gap_trace_ <= 0)


def test_mkc_exact_never_raises_eq10(noisy):
    for seed, lam in ((0, 0.5), (1, 2.0)):
        solver = MKC(n_clusters=3, lambda_=lam, init="random", max_iter=40, random_state=seed).fit(noisy.matrices)
        assert np.diff(solver.objective_trace_).max() <= 1e-12 * solver.objective_trace_[0]
        np.testing.assert_array_equal(solver.objective_trace_, solver.eq10_trace_)


def test_sequential_single_task_candidate_is_always_at_least_as_good(noisy):
    solver = SMKC(n_clusters=3, candidates="sequential", init="random", max_iter=30, random_state=0).fit(noisy.matrices)
    gap = solver.candidate_gap_trace_  # O1 - O2
    assert gap.min() >= -1e-12 * solver.objective_trace_[0]
    assert not solver.branch_trace_[gap > 0].any()  # the multi-task candidate only survives an exact tie


@pytest.fixture(scope="module")
def shared_samples():
    """Two tasks sharing 20 samples (and one repeat inside task 1): the union has duplicates."""
    data = make_synthetic(n_tasks=1, n_clusters=3, n_shared=0, samples_per_cluster=20, separation=1.5, seed=8)
    X = data.matrices[0]
    return [X[:40], np.vstack([X[20:], X[25:26]])]


def test_folding_duplicates_gives_the_same_kernel_and_fit(shared_samples):
    folded = union_kernel(shared_samples, fold=True)
    full = union_kernel(shared_samples, fold=False)
    assert folded.n_rows == 60 and full.n_rows == 81
    rows = np.concatenate(folded.rows)
    np.testing.assert_allclose(folded.K[np.ix_(rows, rows)], full.K, rtol=0, atol=1e-14)
    assert folded.direct == (True, False) and full.direct == (True, True) and folded.spans[1] == (20, 60)
    for t, n in enumerate((40, 41)):
        Z = np.random.default_rng(t).random((n, 3))
        np.testing.assert_allclose(folded.times(t, Z)[rows], full.times(t, Z), rtol=1e-12)  # K[:, task t] Z
    for cls in (MKC, SMKC):
        a = cls(n_clusters=3, fold_duplicates=True, max_iter=30, random_state=3).fit(shared_samples)
        b = cls(n_clusters=3, fold_duplicates=False, max_iter=30, random_state=3).fit(shared_samples)
        assert (a.kernel_rows_, b.kernel_rows_) == (60, 81)
        for la, lb in zip(a.labels_, b.labels_):
            np.testing.assert_array_equal(la, lb)
        np.testing.assert_allclose(a.objective_trace_, b.objective_trace_, rtol=1e-9)
        np.testing.assert_allclose(a.local_loss_trace_, b.local_loss_trace_, rtol=1e-9)


def test_the_kernel_comes_from_the_cache_with_identical_results(shared_samples, monkeypatch):
    built = []
    monkeypatch.setattr(mkc, "union_kernel", lambda *args: built.append(args) or union_kernel(*args))
    cache = Cache()
    plain = SMKC(n_clusters=3, max_iter=10, random_state=1).fit(shared_samples)
    first = SMKC(n_clusters=3, max_iter=10, random_state=1, cache=cache).fit(shared_samples)
    second = SMKC(n_clusters=3, lambda_=0.9, max_iter=10, random_state=2, cache=cache).fit(shared_samples)
    again = SMKC(n_clusters=3, max_iter=10, random_state=1, cache=cache).fit(shared_samples)
    assert len(built) == 2 and len(cache.results["mkc_kernel"]) == 1  # one build without, one with the cache
    for other in (first, again):
        np.testing.assert_array_equal(plain.objective_trace_, other.objective_trace_)
        for a, b in zip(plain.Z_, other.Z_):
            np.testing.assert_array_equal(a, b)
    assert not np.array_equal(second.objective_trace_, plain.objective_trace_)


def test_three_tasks_k_means_coordinates_are_computed_once_per_worker_and_not_where_the_labels_are_kept(
        tmp_path, monkeypatch):
    """With d > n each task's k-means start runs on its exact row-space coordinates (an n x n
    eigendecomposition): a sweep worker's cache (two places a step, as mtc.sweep gives) keeps
    all three tasks' at once, so a second grid point computes none (one entry per task used to
    evict each other: ng3's 62 s every fit). The labels are kept by the data, so a worker whose
    seeds' labels another left as files (the AAAI-13 protocol after S-MKC's sweep on NG3)
    computes no coordinates at all, and starts from the same labels to the bit; one that needs
    other seeds' labels reads the coordinates from the files the first worker left."""
    from threadpoolctl import threadpool_limits

    computed = []
    monkeypatch.setattr(mkc, "kmeans_coordinates", lambda X: computed.append(X.shape) or kmeans_coordinates(X))
    data = make_synthetic(n_tasks=3, n_clusters=3, n_shared=1, samples_per_cluster=6, n_features=40, seed=4)
    matrices = [sp.csr_matrix(np.abs(X)) for X in data.matrices]  # 18 rows, 40 columns: d > n
    plain = SMKC(n_clusters=3, max_iter=10, random_state=1).fit(matrices)  # no cache: k-means computes its own
    with threadpool_limits(limits=1):  # labels kept as files are computed on one thread (a sweep's trials)
        cache = Cache(size=2, folder=tmp_path)
        for lambda_ in (0.5, 0.1, 0.9):
            cached_fit = SMKC(n_clusters=3, lambda_=lambda_, max_iter=10, random_state=1, cache=cache).fit(matrices)
        assert len(computed) == 3  # the three tasks', once for all the cached fits
        again = SMKC(n_clusters=3, max_iter=10, random_state=1, cache=cache).fit(matrices)
        other_worker = SMKC(n_clusters=3, kernel_width=2.0, max_iter=10, random_state=1,
                            cache=Cache(size=2, folder=tmp_path)).fit(matrices)
        assert len(computed) == 3 and cached_fit.n_iter_ >= 1 and len(list((tmp_path / "kmeans_labels").glob("*.npy"))) == 3
        widened = SMKC(n_clusters=3, kernel_width=2.0, max_iter=10, random_state=1).fit(matrices)
        SMKC(n_clusters=3, max_iter=10, random_state=2, cache=Cache(size=2, folder=tmp_path)).fit(matrices)
    assert len(computed) == 3  # another seed's labels: that worker reads the coordinates the first one kept
    assert len(list((tmp_path / "kmeans_coordinates").glob("*.npy"))) == 3
    for fit, reference in ((again, plain), (other_worker, widened)):
        np.testing.assert_array_equal(fit.objective_trace_, reference.objective_trace_)
        for a, b in zip(fit.Z_, reference.Z_):
            np.testing.assert_array_equal(a, b)


def test_a_second_worker_computes_the_coordinates_of_tasks_the_first_is_not_computing(tmp_path, monkeypatch):
    """While one worker computes a task's k-means coordinates (its lock file held), another that
    needs coordinates passes over that task and computes the others' first; the files then hold
    every task's, and a fit from them starts from the labels of a fit without a cache."""
    from filelock import FileLock
    from threadpoolctl import threadpool_limits

    computed = []
    monkeypatch.setattr(mkc, "kmeans_coordinates", lambda X: computed.append(X.shape[0]) or kmeans_coordinates(X))
    data = make_synthetic(n_tasks=3, n_clusters=3, n_shared=1, samples_per_cluster=6, n_features=40, seed=4)
    matrices = [sp.csr_matrix(np.abs(X))[:n] for X, n in zip(data.matrices, (18, 17, 16))]  # d > n, told apart by n
    with threadpool_limits(limits=1):
        second = SMKC(n_clusters=3, max_iter=10, random_state=1, cache=Cache(size=2, folder=tmp_path))
        first = Cache(size=2, folder=tmp_path)
        key = coordinates_file_key(fingerprint(matrices[0]))
        with FileLock(f"{first.path('kmeans_coordinates', key)}.lock"):  # the first worker computes task 0's
            keys = {t: coordinates_file_key(fingerprint(X)) for t, X in enumerate(matrices)}
            task_1 = second._task_coordinates(dict(enumerate(matrices)), keys, 1)
            np.testing.assert_array_equal(task_1, kmeans_coordinates(matrices[1]))
            assert computed == [17, 16]  # tasks 1 and 2, not task 0
        first.get("kmeans_coordinates", key, lambda: mkc.kmeans_coordinates(matrices[0]), persist=True)
        assert computed == [17, 16, 18] and len(list((tmp_path / "kmeans_coordinates").glob("*.npy"))) == 3
        fit = SMKC(n_clusters=3, max_iter=10, random_state=1, cache=Cache(size=2, folder=tmp_path)).fit(matrices)
    assert computed == [17, 16, 18]
    plain = SMKC(n_clusters=3, max_iter=10, random_state=1).fit(matrices)
    np.testing.assert_array_equal(fit.objective_trace_, plain.objective_trace_)


def test_planted_clusters_are_recovered():
    data = make_synthetic(n_tasks=3, n_clusters=3, n_shared=1, samples_per_cluster=20, seed=1)
    for solver in (MKC(n_clusters=3, random_state=0), SMKC(n_clusters=3, random_state=0),
                   SMKC(n_clusters=3, random_state=0, init="random", max_iter=200)):
        solver.fit(data.matrices)
        assert [accuracy(task.y, labels) for task, labels in zip(data.tasks, solver.labels_)] == [1.0] * 3
    record = solver.record_
    assert set(record.matrices["W"].blocks) == {(t, s) for t in range(3) for s in range(3) if s != t}
    assert record.traces["multitask_kept"].shape == (solver.n_iter_, 3)
    assert record.traces["local_loss"].shape == (solver.n_iter_ + 1, 3)


def test_absolute_width_is_sigma_itself():
    data = make_synthetic(n_tasks=2, n_clusters=3, n_shared=1, samples_per_cluster=10, seed=1)
    X = np.vstack(data.matrices)
    D2 = squared_distances_from_gram(gram(X))
    for sigma in (0.1, 10.0):
        K = union_kernel(data.matrices, width=sigma, mode="absolute").K
        np.testing.assert_allclose(K, np.exp(-D2 / (2 * sigma**2)), rtol=1e-12)
    sigma = np.sqrt(median_positive(D2))  # 1 x the median distance, given as an absolute sigma
    a = SMKC(n_clusters=3, random_state=0, max_iter=20).fit(data.matrices)
    b = SMKC(n_clusters=3, random_state=0, max_iter=20, width_mode="absolute", kernel_width=sigma).fit(data.matrices)
    np.testing.assert_allclose(a.objective_trace_, b.objective_trace_, rtol=1e-10)


def test_lambda_zero_branch_is_consistent(linear_problem):
    """lambda = 0: Eq. 14-15 reduce to F = K Z (Z'Z)^-1, G^(s,t) = F^(t,s)'Z (Z'Z)^-1,
    G^(t,t) = (Z'Z)^-1 Z'KZ (Z'Z)^-1; MKC, S-MKC and one task alone then agree."""
    X, X_all, kernel, Z, M = linear_problem
    F, G = state_from(M, X_all)
    t = 2
    F_t, G_col, G_tt = centroid_state(t, Z[t], kernel.times(t, Z[t]), kernel, F, G, {}, 0.0, 0.0)
    inverse = np.linalg.inv(Z[t].T @ Z[t])
    K = X_all @ X_all.T
    rows = kernel.rows[t]
    np.testing.assert_allclose(F_t, K[:, rows] @ Z[t] @ inverse, rtol=1e-10)
    for s in (0, 1):
        np.testing.assert_allclose(G_col[s], F[s][rows].T @ Z[t] @ inverse, rtol=1e-10)
    np.testing.assert_allclose(G_tt, inverse @ Z[t].T @ K[np.ix_(rows, rows)] @ Z[t] @ inverse, rtol=1e-10)

    data = make_synthetic(n_tasks=3, n_clusters=3, n_shared=1, samples_per_cluster=10, separation=1.0, seed=9)
    settings = dict(n_clusters=3, lambda_=0.0, width_mode="absolute", kernel_width=4.0, max_iter=25, tol=0.0,
                    random_state=5)
    plain, smart = MKC(**settings).fit(data.matrices), SMKC(**settings).fit(data.matrices)
    np.testing.assert_allclose(plain.objective_trace_, 3 * smart.objective_trace_, rtol=1e-13)  # Eq. 10 = T J_st
    assert smart.branch_trace_.all()  # identical candidates: the tie goes to the multi-task one
    alone = MKC(**{**settings, "n_clusters": [3]}).fit(data.matrices[:1])  # task 0 draws the same start
    for a, b, c in ((plain.labels_[0], smart.labels_[0], alone.labels_[0]),):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    np.testing.assert_allclose(plain.local_loss_trace_[:, 0], alone.local_loss_trace_[:, 0], rtol=1e-9)


@pytest.mark.parametrize("solver, message", [
    (MKC(n_clusters=3, lambda_=-0.5), r"The 'lambda_' parameter of MKC must be a float in the range \[0.0, inf\)"),
    (SMKC(n_clusters=3, kernel_width=0.0), r"The 'kernel_width' parameter of SMKC must be a float in the range \(0.0"),
    (SMKC(n_clusters=3, width_mode="median"), "The 'width_mode' parameter of SMKC must be a str among"),
    (SMKC(n_clusters=3, candidates="both"), "The 'candidates' parameter of SMKC must be a str among"),
    (MKC(n_clusters=3, centroid_update="printed"), "The 'centroid_update' parameter of MKC must be a str among"),
    (MKC(n_clusters=3, max_iter=0), r"The 'max_iter' parameter of MKC must be an int in the range \[1, inf\)"),
])
def test_bad_parameters_are_rejected_with_a_clear_message(solver, message):
    data = make_synthetic(n_tasks=2, n_clusters=3, n_shared=1, samples_per_cluster=5, seed=0)
    with pytest.raises(InvalidParameterError, match=message):
        solver.fit(data.matrices)


def test_weighted_pair_median_and_distinct_rows():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((30, 4))
    D2 = squared_distances_from_gram(gram(X))
    assert weighted_pair_median(D2) == median_positive(D2)  # no weights: affinity's statistic
    mult = rng.integers(1, 4, size=30)
    expanded = np.repeat(np.arange(30), mult)  # the samples the weighted rows stand for
    E = D2[np.ix_(expanded, expanded)]
    i, j = np.triu_indices_from(E, k=1)
    keep = expanded[i] != expanded[j]
    assert weighted_pair_median(D2, None, mult) == np.median(E[i, j][keep])
    groups = rng.integers(0, 20, size=30)
    i, j = np.triu_indices_from(D2, k=1)
    assert weighted_pair_median(D2, groups) == np.median(D2[i, j][(groups[i] != groups[j]) & (D2[i, j] > 0)])
    S = sp.random(40, 25, density=0.2, random_state=2, format="csr")
    S = sp.vstack([S, S[3], S[7], S[3], sp.csr_matrix((1, 25))]).tocsr()
    for dense, sparse in zip(distinct_rows(S.toarray()), distinct_rows(S)):
        np.testing.assert_array_equal(dense, sparse)
    first, inverse, counts = distinct_rows(S)
    assert inverse[40:43].tolist() == [3, 7, 3] and counts[3] == 3 and first[inverse[3]] == 3
    single = union_kernel([X], width=1.3)
    np.testing.assert_allclose(single.K, gaussian_affinity(X, 1.3), rtol=0, atol=1e-14)


def test_right_solve_falls_back_to_least_squares():
    D = np.diag([2.0, 0.0])
    np.testing.assert_allclose(right_solve(np.array([[4.0, 0.0]]), D), [[2.0, 0.0]])


FITTED = ("labels_", "Z_", "objective_trace_", "eq10_trace_", "local_loss_trace_", "branch_trace_",
          "candidate_gap_trace_", "n_iter_", "converged_", "kernel_rows_")


def assert_same_fit(fit, fresh):
    """Every fitted attribute and record entry of two S-MKC fits, to the bit (dicts in the same order)."""
    for name in FITTED:
        a, b = getattr(fit, name), getattr(fresh, name)
        for x, y in zip(a, b) if isinstance(a, list) else [(a, b)]:
            np.testing.assert_array_equal(x, y, err_msg=name)
    for a, b in ((fit.G_, fresh.G_), (fit.W_, fresh.W_)):
        assert list(a) == list(b)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    assert list(fit.record_.traces) == list(fresh.record_.traces)
    for name, trace in fit.record_.traces.items():
        np.testing.assert_array_equal(trace, fresh.record_.traces[name])
    assert fit.record_.scalars.keys() == fresh.record_.scalars.keys()
    np.testing.assert_array_equal(fit.record_.matrices["W"].blocks[(0, 1)], fresh.record_.matrices["W"].blocks[(0, 1)])


@pytest.mark.parametrize("in_files", [False, True])
def test_the_fits_a_shared_path_decides_are_the_bits_of_their_own(noisy, tmp_path, monkeypatch, in_files):
    """S-MKC at lambda 0 (every multi-task candidate is the single-task one), 0.1, 0.5 and 2 from
    one start: the first fit decides the others (its lambda's multi-task candidates are never
    kept here), which then read their fit from the cache, in memory or as files, with no kernel
    product of their own; each equals the fit computed afresh without a cache."""
    lambdas = (0.1, 0.0, 0.5, 2.0)
    cache = Cache(folder=tmp_path if in_files else None)
    passes = []
    products = mkc.MKC._kernel_products
    monkeypatch.setattr(mkc.MKC, "_kernel_products", lambda self, *args: passes.append(1) or products(self, *args))
    shared = []
    for lam in lambdas:
        before = len(passes)
        shared.append(SMKC(n_clusters=3, lambda_=lam, shared_lambdas=lambdas, max_iter=30, cache=cache,
                           random_state=4).fit(noisy.matrices))
        assert len(passes) - before == (shared[-1].n_iter_ if lam == lambdas[0] else 0)  # one pass an iteration
    if in_files:
        assert len(list((tmp_path / mkc.PATH_STEP).glob("*.npz"))) == 3
    else:
        assert len(cache.results[mkc.PATH_STEP]) == 3
    for lam, fit in zip(lambdas, shared):
        fresh = SMKC(n_clusters=3, lambda_=lam, max_iter=30, random_state=4).fit(noisy.matrices)
        assert not fresh.branch_trace_.any() if lam else fresh.branch_trace_.all()
        assert_same_fit(fit, fresh)


def test_a_lambda_that_keeps_its_multi_task_candidate_leaves_the_path_and_fits_itself(noisy, monkeypatch):
    """With the multi-task candidate made to win wherever its weight exceeds 1 (lambda 2 and 8
    of three tasks), those two lambdas leave the path at their first step: the first fit decides
    only 0.5 (0.1's own fit computed it), and a first fit at 8 (off the path itself) decides none,
    leaving 0.1 to decide 0.5; every fit equals its own computed afresh."""
    original = mkc.candidate

    def multi_wins_above_one(t, Z, KZ, kernel, trace_K, F, G, plans, coef, kappa, products=None, pulls=None):
        found = original(t, Z, KZ, kernel, trace_K, F, G, plans, coef, kappa, products, pulls)
        return (*found[:4], found[4] - 1e3) if coef > 1.0 else found

    monkeypatch.setattr(mkc, "candidate", multi_wins_above_one)
    lambdas = (0.1, 0.5, 2.0, 8.0)
    for first in (0.1, 8.0):
        cache = Cache()
        order = (first, *[lam for lam in lambdas if lam != first])
        fits, decided = {}, []
        for lam in order:
            fits[lam] = SMKC(n_clusters=3, lambda_=lam, shared_lambdas=lambdas, max_iter=20, cache=cache,
                             random_state=1).fit(noisy.matrices)
            decided.append(sorted(key[-1] for key in cache.results.get(mkc.PATH_STEP, {})))
        assert decided[0] == ([0.5] if first == 0.1 else []) and decided[-1] == [0.5]
        for lam, fit in fits.items():
            fresh = SMKC(n_clusters=3, lambda_=lam, max_iter=20, random_state=1).fit(noisy.matrices)
            assert fresh.branch_trace_.all() == (lam > 1.0)
            assert_same_fit(fit, fresh)


def test_a_sweeps_trial_runner_gives_smkc_the_other_lambdas_of_its_grid():
    from mtc.config import Trial
    from mtc.trial import sibling_values, trial_solver

    points = ({"lambda_": 0.1, "kernel_width": 1.0}, {"lambda_": 0.2, "kernel_width": 1.0},
              {"lambda_": 0.3, "kernel_width": 1.0}, {"lambda_": 0.2, "kernel_width": 2.0}, {"lambda_": 0.4})
    trial = Trial({"lambda_": 0.2, "kernel_width": 1.0}, 3)
    assert sibling_values(points, trial.point, "lambda_") == (0.1, 0.3)
    assert sibling_values(points, trial.point, "kernel_width") == (2.0,)
    assert sibling_values(points, {"kernel_width": 1.0}, "lambda_") == ()
    solver = trial_solver(SMKC(n_clusters=2), trial, Cache(), points)
    assert solver.shared_lambdas == (0.1, 0.3) and solver.lambda_ == 0.2 and solver.random_state == 3
    assert trial_solver(SMKC(n_clusters=2), trial, None, points).shared_lambdas == ()  # no cache: nothing shared
    assert trial_solver(MKC(n_clusters=2), trial, Cache(), points).get_params()["lambda_"] == 0.2  # MKC: none


def test_a_sweep_of_smkc_computes_one_fit_per_seed_and_other_grid_values():
    """The dry run's estimate counts the fits a sweep computes (mtc.trial.computed_fits): S-MKC's
    trials that differ in lambda_ alone share one; MKC computes every trial's."""
    from mtc.config import Trial
    from mtc.trial import computed_fits

    trials = [Trial({"lambda_": lam, "kernel_width": width}, seed)
              for lam in (0.1, 0.2, 0.3) for width in (1.0, 2.0) for seed in range(4)]
    assert computed_fits(SMKC(n_clusters=2), trials) == 2 * 4
    assert computed_fits(MKC(n_clusters=2), trials) == len(trials) == 24
