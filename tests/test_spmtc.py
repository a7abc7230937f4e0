"""LSSMTC, SPMTC-h and SPMTC-s: the facts of /work/shared/specs/spmtc.md re-verified, and the
restructured iteration against a literal transcription of MALSAR's LSSMTC.m (here, not in
the package)."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize_scalar

from mtc.data.synthetic import make_synthetic
from mtc.errors import InputError
from mtc.methods.spmtc import ASI, LSSMTC, PooledASI, SPMTCh, SPMTCs
from mtc.metrics import accuracy


def literal_lssmtc(cellX, cellP, c, l, lam, iters, W0=None, omega=None, eps=1e-9):
    """LSSMTC.m l.85-150 transcribed (columns = samples, C = XX' every iteration, WW' and
    left-to-right products, inv, dense residual objective); optional weights omega per task
    enter M, M_k, C and D as Omega = diag(omega), P by the cancelled Eq. 22."""
    m = len(cellX)
    d = cellX[0].shape[0]
    cellP = [P.copy() for P in cellP]
    omega = omega or [np.ones(X.shape[1]) for X in cellX]
    W = np.eye(d, l) if W0 is None else W0.copy()
    X = np.hstack(cellX)
    Om = np.diag(np.concatenate(omega))
    history = []
    for _ in range(iters):
        P = np.vstack(cellP)
        M = W.T @ X @ Om @ P @ np.linalg.inv(P.T @ Om @ P)
        cellM = []
        for k in range(m):
            Ok = np.diag(omega[k])
            Mk = cellX[k] @ Ok @ cellP[k] @ np.linalg.inv(cellP[k].T @ Ok @ cellP[k])
            A = lam * cellX[k].T @ Mk + (1 - lam) * cellX[k].T @ W @ M
            B = lam * Mk.T @ Mk + (1 - lam) * M.T @ M
            PA, NA, PB, NB = (abs(A) + A) / 2, (abs(A) - A) / 2, (abs(B) + B) / 2, (abs(B) - B) / 2
            cellP[k] = cellP[k] * np.sqrt((PA + cellP[k] @ NB) / (NA + cellP[k] @ PB + eps))
            cellM.append(Mk)
        P = np.vstack(cellP)
        C = X @ Om @ X.T
        D = X @ Om @ P @ M.T
        PC, NC, PD, ND = (abs(C) + C) / 2, (abs(C) - C) / 2, (abs(D) + D) / 2, (abs(D) - D) / 2
        tmp = W @ W.T
        W = W * np.sqrt((NC @ W + tmp @ PC @ W + PD + tmp @ ND) / (PC @ W + tmp @ NC @ W + ND + tmp @ PD + eps))
        f = sum(lam * np.sum(((cellX[k] - cellM[k] @ cellP[k].T) * np.sqrt(omega[k])) ** 2)
                + (1 - lam) * np.sum(((W.T @ cellX[k] - M @ cellP[k].T) * np.sqrt(omega[k])) ** 2) for k in range(m))
        history.append(([P.copy() for P in cellP], M, cellM, W.copy(), f))
    return history


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(0)
    tasks = [sp.random(n, 30, density=0.3, random_state=rng, format="csr") * 5 for n in (25, 30)]
    P0 = [np.abs(rng.random((X.shape[0], 3))) for X in tasks]
    return tasks, P0


def ours(tasks, P0, iters, lam=0.6, l=3, W0=None, omega=None, **kw):
    """Our solver from the given start, one recorded state per iteration."""
    s = LSSMTC(n_clusters=3, n_components=l, lambda_=lam, **kw)
    s._validate_params()
    s.record_ = __import__("mtc.record", fromlist=["FitRecord"]).FitRecord()
    s._setup(tasks, [3] * len(tasks), np.random.default_rng(0))
    s.P_ = [P.copy() for P in P0]
    if W0 is not None:
        s.W_ = W0.copy()
    if omega is not None:
        s._set_weights(omega)
    states = []
    for _ in range(iters):
        s._iterate()
        states.append(([P.copy() for P in s.P_], s.M_.copy(), [Mk.copy() for Mk in s.task_centroids_],
                       s.W_.copy(), s._traces["objective"][-1]))
    return states


def assert_same(fast, literal):
    for (P, M, Mk, W, f), (Pl, Ml, Mkl, Wl, fl) in zip(fast, literal):
        for a, b in zip(P, Pl):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13)
            np.testing.assert_array_equal(np.argmax(a, axis=1), np.argmax(b, axis=1))
        np.testing.assert_allclose(M, Ml, rtol=1e-10, atol=1e-12)
        for a, b in zip(Mk, Mkl):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(W, Wl, rtol=1e-10, atol=1e-13)
        assert f == pytest.approx(fl, rel=1e-10)


def test_restructured_iteration_equals_the_literal_reference(small):
    tasks, P0 = small
    dense = [X.toarray().T for X in tasks]
    assert_same(ours(tasks, P0, 8), literal_lssmtc(dense, P0, 3, 3, 0.6, 8))


def test_general_w_formula_from_a_random_non_negative_start(small):
    tasks, P0 = small
    W0 = np.abs(np.random.default_rng(3).random((30, 3)))
    dense = [X.toarray().T for X in tasks]
    assert_same(ours(tasks, P0, 6, W0=W0), literal_lssmtc(dense, P0, 3, 3, 0.6, 6, W0=W0))
    # signed input: C+/- formed once (per weights), the same iterate
    signed = [sp.csr_matrix(X.toarray() - 0.1) for X in tasks]
    assert_same(ours(signed, P0, 6, W0=W0), literal_lssmtc([X.toarray().T for X in signed], P0, 3, 3, 0.6, 6, W0=W0))


def test_weighted_step_equals_the_literal_weighted_reference(small):
    tasks, P0 = small
    rng = np.random.default_rng(4)
    omega = [rng.random(X.shape[0]) for X in tasks]
    dense = [X.toarray().T for X in tasks]
    assert_same(ours(tasks, P0, 5, omega=omega), literal_lssmtc(dense, P0, 3, 3, 0.6, 5, omega=omega))


def test_malsar_w_never_leaves_the_identity_and_depends_on_column_order(small):
    tasks, P0 = small
    s = LSSMTC(n_clusters=3, n_components=3, max_iter=40, stopping="none", random_state=0).fit(tasks)
    off = s.W_.copy()
    off[np.arange(3), np.arange(3)] = 0.0
    assert np.count_nonzero(off) == 0 and np.all(s.w_nonzeros_trace_ == 3)  # off-diagonal exactly 0
    assert np.all(s.w_orthogonality_trace_[:10] < 1e-8)  # diagonal = 1 up to eps / N per step ...
    assert s.w_orthogonality_trace_[-1] > 1e3 * s.w_orthogonality_trace_[9]  # ... but unstable here: the
    # eps drift grows (the literal reference does the same, see the module docstring)
    order = np.random.default_rng(1).permutation(30)
    permuted = [X[:, order] for X in tasks]
    malsar = [LSSMTC(n_clusters=3, n_components=3, max_iter=10, stopping="none", random_state=0).fit(T)
              for T in (tasks, permuted)]
    assert not np.allclose(malsar[0].P_[0], malsar[1].P_[0])
    eigen = [LSSMTC(n_clusters=3, n_components=3, max_iter=10, stopping="none", w_update="eigen",
                    w_init="eigen", random_state=0).fit(T) for T in (tasks, permuted)]
    for a, b in zip(eigen[0].P_, eigen[1].P_):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-10)


def test_malsar_objective_never_rises(small):
    tasks, _ = small
    s = LSSMTC(n_clusters=3, n_components=3, max_iter=60, stopping="none", random_state=2).fit(tasks)
    assert np.all(np.diff(s.objective_trace_) <= 1e-10 * s.objective_trace_[0])


def test_blocks_m_and_mk_are_optimal(small):
    tasks, P0 = small
    P, M, Mk, W, _ = ours(tasks, P0, 1)[0]
    # M, M_k of the sweep minimise their terms for the P at the sweep's start (P0): zero gradient
    for X, P0k, Mkk in zip(tasks, P0, Mk):
        Xd = X.toarray()
        np.testing.assert_allclose(P0k.T @ (Xd - P0k @ Mkk.T), 0.0, atol=1e-9)
    Y = [X.toarray() @ np.eye(30, 3) for X in tasks]
    grad = sum(P0k.T @ (Yk - P0k @ M.T) for P0k, Yk in zip(P0, Y))
    np.testing.assert_allclose(grad, 0.0, atol=1e-9)


def explicit_S(tasks, P):
    X = np.vstack([X.toarray() for X in tasks])
    Pp = np.vstack(P)
    return X.T @ (np.eye(len(X)) - Pp @ np.linalg.inv(Pp.T @ Pp) @ Pp.T) @ X


def test_eigen_step_minimises_the_trace_and_is_degenerate_on_rank_deficient_data(small):
    tasks, P0 = small
    s = ours(tasks, P0, 1, w_update="eigen")[-1]
    W = s[3]
    S = explicit_S(tasks, s[0])
    assert np.trace(W.T @ S @ W) == pytest.approx(np.sum(np.linalg.eigvalsh(S)[:3]), rel=1e-8, abs=1e-8)
    np.testing.assert_allclose(W.T @ W, np.eye(3), atol=1e-10)
    # d = 80 > N = 40: the null space of S has dimension >= 40 >= l: W'X = 0 (N x N Gram route)
    rng = np.random.default_rng(5)
    wide = [sp.random(20, 80, density=0.2, random_state=rng, format="csr") for _ in range(2)]
    fits = [LSSMTC(n_clusters=2, n_components=4, lambda_=lam, w_update="eigen", w_init="eigen", max_iter=30,
                   stopping="none", random_state=0).fit(wide) for lam in (0.2, 0.8)]
    for f in fits:
        assert np.all(f.w_projection_trace_ < 1e-10)
        np.testing.assert_allclose(f.W_.T @ f.W_, np.eye(4), atol=1e-10)
    for a, b in zip(fits[0].labels_, fits[1].labels_):
        np.testing.assert_array_equal(a, b)  # lambda cancels out of the P update


def test_hard_weights_select_ceil_q_n_per_task_and_six_rounds(small):
    tasks, _ = small
    s = SPMTCh(n_clusters=3, n_components=3, warm_start_iter=5, round_max_iter=5, random_state=0).fit(tasks)
    np.testing.assert_allclose(s.round_fractions_, [0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
    sizes = np.array([X.shape[0] for X in tasks])
    expected = np.array([[math.ceil(q * n - 1e-9) for n in sizes] for q in s.round_fractions_])
    np.testing.assert_array_equal(s.record_.traces["selected"], expected)
    np.testing.assert_array_equal(s.record_.traces["full_weight"], expected)
    assert s.lambda2_.shape == (6, 2) and not np.allclose(s.lambda2_[:, 0], s.lambda2_[:, 1])  # per task
    assert all(set(np.unique(w)) <= {0.0, 1.0} for w in s.weights_)
    assert s.record_.matrices["weights"].blocks[(1, 0)].shape == (30, 1)
    # within a round the weighted objective never rises (fixed V: weighted LSSMTC, MALSAR W)
    bounds = list(s.round_starts_) + [len(s.objective_trace_)]
    for a, b in zip(bounds[:-1], bounds[1:]):
        seg = s.objective_trace_[a:b]
        assert np.all(np.diff(seg) <= 1e-10 * seg[0])


def test_soft_weights_solve_their_scalar_problem():
    solver = SPMTCs()
    lambda2, gamma = 2.0, 1.0
    L = np.linspace(0.01, 3.0, 300)
    v = solver.weights_for(L, lambda2)
    assert np.all((v >= 0) & (v <= 1))
    np.testing.assert_array_equal(v[L <= lambda2 / 3], 1.0)
    np.testing.assert_array_equal(v[L >= lambda2], 0.0)
    mid = (L > lambda2 / 3) & (L < lambda2)
    np.testing.assert_allclose(v[mid], lambda2 / (2 * L[mid]) - 0.5)
    for edge in (lambda2 / 3, lambda2):  # continuous at both thresholds
        near = solver.weights_for(np.array([edge * (1 - 1e-9), edge * (1 + 1e-9)]), lambda2)
        assert abs(near[0] - near[1]) < 1e-6
    for Li, vi in zip(L[::15], v[::15]):  # each v_i minimises L v - gamma ln(v + gamma / lambda2) on [0, 1]
        best = minimize_scalar(lambda x: Li * x - gamma * np.log(x + gamma / lambda2), bounds=(0, 1),
                               method="bounded", options={"xatol": 1e-10})
        assert vi == pytest.approx(best.x, abs=1e-5)
    hard = SPMTCh().weights_for(L, lambda2)
    np.testing.assert_array_equal(hard, (L <= lambda2).astype(float))


def test_start_fraction_one_is_lssmtc_and_all_ones_is_the_unweighted_step(small):
    tasks, _ = small
    sp_fit = SPMTCh(n_clusters=3, n_components=3, warm_start_iter=4, round_max_iter=6, start_fraction=1.0,
                    stopping="none", random_state=3).fit(tasks)
    ls = LSSMTC(n_clusters=3, n_components=3, max_iter=10, stopping="none", random_state=3).fit(tasks)
    assert sp_fit.round_fractions_.tolist() == [1.0]
    for a, b in zip(sp_fit.P_, ls.P_):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(sp_fit.objective_trace_, ls.objective_trace_)


def test_rows_with_zero_weight_stay_alive_and_freeze_keeps_them(small):
    tasks, _ = small
    for rows in ("update", "freeze"):
        s = SPMTCs(n_clusters=3, n_components=3, warm_start_iter=3, round_max_iter=5, unselected_rows=rows,
                   random_state=1).fit(tasks)
        assert all(np.all(P.sum(axis=1) > 0) for P in s.P_)
        assert s.record_.traces["gamma"].shape == (6, 2)
        np.testing.assert_allclose(s.record_.traces["gamma"], s.lambda2_ / 2)


def planted_lengths(seed=0, n=40, d=20):
    """Two tasks of two planted clusters (terms 0-9 and 10-19). Rows alternate clean (the
    cluster's profile) and noisy (half profile, half uniform noise), and independently short
    (x 1) or long (x 6): on counts a long row's loss is ~36 times a short one's."""
    rng = np.random.default_rng(seed)
    profile = np.zeros((2, d))
    profile[0, : d // 2] = profile[1, d // 2:] = 1.0
    tasks = []
    for _ in range(2):
        y = np.arange(n) % 2
        noisy = (np.arange(n) // 2) % 2 == 1
        long = np.arange(n) // 4 % 2 == 1
        rows = profile[y] * (1 + 0.05 * rng.random((n, d)))
        rows[noisy] = 0.5 * rows[noisy] + rng.random((noisy.sum(), d))
        tasks.append(rows * np.where(long, 6.0, 1.0)[:, None])
    return tasks, noisy, long


def test_l2_selection_ignores_length_where_counts_take_the_short_rows():
    tasks, noisy, long = planted_lengths()
    assert noisy.sum() == long.sum() == 20 and np.count_nonzero(noisy & long) == 10  # independent
    kw = dict(n_clusters=2, n_components=2, warm_start_iter=10, round_max_iter=10, random_state=0)
    counts = SPMTCh(**kw).fit(tasks)
    l2 = SPMTCh(selection_rows="l2", **kw).fit(tasks)
    # first round (q = 0.5): counts takes 19 short rows of 20 in each task, l2 half long ones
    np.testing.assert_array_equal(counts.record_.traces["selected_long"][0], [0.05, 0.05])
    assert np.all(np.abs(l2.record_.traces["selected_long"][0] - 0.5) <= 0.1)
    assert np.all(counts.record_.traces["loss_length_spearman"][0] > 0.8)
    assert np.all(np.abs(l2.record_.traces["loss_length_spearman"][0]) < 0.3)
    L = l2.selection_losses([np.array([1.0, 8.0, 9.0, 4.0])], [np.array([1.0, 4.0, 9.0, 0.0])])[0]
    np.testing.assert_allclose(L, [1.0, 2.0, 1.0, 4.0])  # the empty row divided by the smallest non-zero
    for fit in (counts, l2):  # both still recover the planted clusters on the counts
        assert all(accuracy(np.arange(40) % 2, labels) == 1.0 for labels in fit.labels_)


def test_l2_selection_is_the_printed_route_when_rows_have_one_length(small):
    tasks, _ = small
    unit = [sp.csr_matrix(sp.diags(1.0 / np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())) @ X) for X in tasks]
    # ||x||^2 = 1 up to rounding: hard weights select the same rows (same bits), soft weights
    # differ only by the rounding of L / ||x||^2
    for solver, rtol in ((SPMTCh, 0.0), (SPMTCs, 1e-9)):
        kw = dict(n_clusters=3, n_components=3, warm_start_iter=4, round_max_iter=5, random_state=2)
        a, b = solver(**kw).fit(unit), solver(selection_rows="l2", **kw).fit(unit)
        for Pa, Pb in zip(a.P_, b.P_):
            np.testing.assert_allclose(Pa, Pb, rtol=rtol, atol=0)
        np.testing.assert_array_equal(a.record_.traces["selected"], b.record_.traces["selected"])
    assert SPMTCh().selection_rows == SPMTCs().selection_rows == "counts"  # the printed ranking stays the default


def test_freeze_is_the_default_and_the_printed_update_stays_reachable(small):
    # issue 34: freeze helped across the six problems (mtc/methods/spmtc.py, SPMTCh)
    tasks, _ = small
    assert SPMTCh().unselected_rows == SPMTCs().unselected_rows == "freeze"
    kw = dict(n_clusters=3, n_components=3, warm_start_iter=3, round_max_iter=5, random_state=1)
    default, freeze, update = (SPMTCh(**kw).fit(tasks), SPMTCh(unselected_rows="freeze", **kw).fit(tasks),
                               SPMTCh(unselected_rows="update", **kw).fit(tasks))
    for a, b in zip(default.P_, freeze.P_):
        np.testing.assert_array_equal(a, b)
    assert not all(np.array_equal(a, b) for a, b in zip(default.P_, update.P_))


def test_planted_clusters_are_recovered():
    data = make_synthetic(n_tasks=2, n_clusters=3, n_shared=1, samples_per_cluster=30, seed=1)
    fit = LSSMTC(n_clusters=3, w_update="eigen", random_state=0).fit(data.matrices)
    for task, labels in zip(data.tasks, fit.labels_):
        assert accuracy(task.y, labels) >= 0.9


def test_bad_input_is_rejected():
    X = np.abs(np.random.default_rng(0).random((10, 5)))
    with pytest.raises(InputError, match="same number of clusters"):
        LSSMTC(n_clusters=[2, 3]).fit([X, X])
    with pytest.raises(InputError, match="n_components=6 exceeds the 5 features"):
        SPMTCh(n_components=6).fit([X])
    with pytest.raises(ValueError, match="The 'lambda_' parameter of LSSMTC must be a float in the range"):
        LSSMTC(lambda_=1.5).fit([X])
    with pytest.raises(ValueError, match="The 'selection_rows' parameter of SPMTCh must be a str among"):
        SPMTCh(selection_rows="tfidf").fit([X])


def test_asi_is_lssmtc_with_lambda_zero_on_each_task_alone(small):
    tasks, _ = small
    asi = ASI(n_clusters=3, n_components=3, max_iter=15, stopping="none", random_state=4).fit(tasks)
    rng = np.random.default_rng(4)  # the one stream the tasks' starts are drawn from, in order
    for t, X in enumerate(tasks):
        alone = LSSMTC(n_clusters=3, n_components=3, lambda_=0.0, max_iter=15, stopping="none", random_state=rng).fit([X])
        np.testing.assert_array_equal(asi.labels_[t], alone.labels_[0])
        np.testing.assert_allclose(asi.task_objective_traces_[t], alone.objective_trace_, rtol=1e-12)
    assert asi.record_.scalars["w_projection"].shape == (2,)


def test_all_asi_on_the_pooled_rows_equals_lssmtc_lambda_zero_on_the_tasks(small):
    tasks, _ = small
    for w_update in ("malsar", "eigen"):
        pooled = PooledASI(n_clusters=3, n_components=3, w_update=w_update, max_iter=15, stopping="none",
                           random_state=5).fit(tasks)
        joint = LSSMTC(n_clusters=3, n_components=3, lambda_=0.0, w_update=w_update, max_iter=15, stopping="none",
                       random_state=5).fit(tasks)
        for a, b in zip(pooled.labels_, joint.labels_):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(pooled.objective_trace_, joint.objective_trace_, rtol=1e-10)
        assert [len(l) for l in pooled.labels_] == [25, 30]


def test_asi_records_which_degenerate_subspace_it_found(small):
    tasks, _ = small  # d = 30: null(X_1) has dimension >= 30 - 25 = 5 >= l; X_2 (30 rows) has full rank
    malsar = ASI(n_clusters=3, n_components=3, max_iter=10, random_state=0).fit(tasks)
    first = [np.linalg.norm(X[:, :3].toarray()) / np.linalg.norm(X.toarray()) for X in tasks]
    np.testing.assert_allclose(malsar.record_.scalars["w_projection"], first, rtol=1e-6)  # W = eye(d, l)
    eigen = ASI(n_clusters=3, n_components=3, w_update="eigen", max_iter=10, random_state=0).fit(tasks)
    projection = eigen.record_.scalars["w_projection"]
    assert projection[0] < 1e-8 < 1e-2 < projection[1]  # task 1: X W = 0, a basis of null(X); task 2: not
