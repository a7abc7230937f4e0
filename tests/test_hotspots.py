"""Issue 32, item 4: every faster route against the route it replaced (kept reachable), on
small data: the same iterates, objective traces and labels (bit for bit where the fast route
only stops recomputing what cannot change, to 1e-10 where it reorders a sum)."""

import subprocess
import sys

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp

from mtc.data.synthetic import make_synthetic
from mtc.methods import mkc
from mtc.methods.mkc import MKC, SMKC
from mtc.methods.spmtc import ASI, LSSMTC, PooledASI, SPMTCh, SPMTCs
from mtc.numerics.affinity import sparse_times_rows
from mtc.numerics.kernels import union_kernel


# --- MKC / S-MKC: K[:, t] Z^t of every task in one GEMM (Eq. 14) -----------------------
@pytest.fixture(scope="module")
def three_tasks_with_shared_samples():
    """Three tasks, the second and third sharing samples with the first (folded kernel rows,
    spans that overlap, a task that is not a direct range)."""
    data = make_synthetic(n_tasks=3, n_clusters=3, n_shared=2, samples_per_cluster=12, separation=0.8, seed=6)
    X = data.matrices
    return [X[0], np.vstack([X[1], X[0][5:15]]), np.vstack([X[0][20:], X[2]])]


def test_one_gemm_over_the_kernel_equals_the_per_task_products(three_tasks_with_shared_samples):
    tasks = three_tasks_with_shared_samples
    rng = np.random.default_rng(0)
    Z = [rng.random((X.shape[0], c)) for X, c in zip(tasks, (3, 2, 4))]
    for fold in (True, False):
        kernel = union_kernel(tasks, fold=fold)
        assert fold == (kernel.direct != (True, True, True))
        for t, product in enumerate(kernel.times_all(Z)):
            np.testing.assert_allclose(product, kernel.times(t, Z[t]), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("cls, params", [(MKC, {}), (SMKC, {}), (SMKC, {"candidates": "sequential"})])
def test_stacked_kernel_products_give_the_per_task_iterates(three_tasks_with_shared_samples, cls, params,
                                                            monkeypatch):
    tasks = three_tasks_with_shared_samples
    fits = {}
    for route in ("per_task", "stacked"):
        monkeypatch.setattr(MKC, "_kernel_route", route)
        fits[route] = cls(n_clusters=3, lambda_=0.7, max_iter=40, tol=0.0, random_state=2, **params).fit(tasks)
    old, new = fits["per_task"], fits["stacked"]
    assert old.n_iter_ == new.n_iter_ == 40
    np.testing.assert_allclose(new.objective_trace_, old.objective_trace_, rtol=1e-10)
    np.testing.assert_allclose(new.local_loss_trace_, old.local_loss_trace_, rtol=1e-10)
    for a, b in zip(new.Z_, old.Z_):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    for a, b in zip(new.labels_, old.labels_):
        np.testing.assert_array_equal(a, b)
    for key, block in old.G_.items():
        np.testing.assert_allclose(new.G_[key], block, rtol=1e-10, atol=1e-12)
    if cls is SMKC:
        np.testing.assert_array_equal(new.branch_trace_, old.branch_trace_)



def lapack_right_solve(B, D):
    """B D^-1 by LAPACK's solve with B's rows as right-hand sides (the route before the inverse)."""
    try:
        return np.linalg.solve(D, B.T).T
    except np.linalg.LinAlgError:
        return B @ np.linalg.pinv(D)


@pytest.mark.parametrize("cls, lambda_", [(MKC, 0.0), (MKC, 0.7), (SMKC, 0.7)])
def test_right_solves_by_the_inverse_give_the_lapack_solves_iterates(three_tasks_with_shared_samples, cls,
                                                                     lambda_, monkeypatch):
    tasks = three_tasks_with_shared_samples
    fits = {}
    for route in (lapack_right_solve, mkc.right_solve):
        monkeypatch.setattr(mkc, "right_solve", route)
        fits[route] = cls(n_clusters=3, lambda_=lambda_, max_iter=40, tol=0.0, random_state=2).fit(tasks)
    old, new = fits[lapack_right_solve], fits[mkc.right_solve]
    np.testing.assert_allclose(new.objective_trace_, old.objective_trace_, rtol=1e-10)
    for a, b in zip(new.Z_, old.Z_):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    for a, b in zip(new.labels_, old.labels_):
        np.testing.assert_array_equal(a, b)
    rng = np.random.default_rng(1)
    Z = rng.random((50, 6))
    B = rng.standard_normal((300, 6))
    for D in (Z.T @ Z / 50 + 0.01 * np.eye(6), Z.T @ Z / 50, np.diag([2.0, 1.0, 0.0, 0.0, 1.0, 3.0])):
        np.testing.assert_allclose(mkc.right_solve(B, D), lapack_right_solve(B, D), rtol=1e-10, atol=1e-12)


def test_semi_nmf_parts_by_maximum_are_the_printed_halves_to_the_bit():
    """Eq. 19's A+ = (|A| + A)/2 and A- = (|A| - A)/2, taken as max(A, 0) and max(-A, 0)."""
    rng = np.random.default_rng(3)
    Z = rng.random((200, 5))
    A = rng.standard_normal((200, 5)) * 10.0 ** rng.integers(-300, 300, (200, 5))
    A[::7] = 0.0
    B = rng.standard_normal((5, 5))
    A_pos, A_neg = (np.abs(A) + A) / 2.0, (np.abs(A) - A) / 2.0
    B_pos, B_neg = (np.abs(B) + B) / 2.0, (np.abs(B) - B) / 2.0
    printed = Z * np.sqrt((A_pos + Z @ B_neg) / (A_neg + Z @ B_pos + mkc.EPS))
    np.testing.assert_array_equal(mkc.semi_nmf_step(Z, A, B), printed)

# --- LSSMTC / ASI / SPMTC: the eigen W step's per-weights invariants (Eq. 23-25) ----------
@pytest.fixture(scope="module")
def sparse_tasks():
    rng = np.random.default_rng(0)
    return [sp.random(n, 30, density=0.3, random_state=rng, format="csr") * 5 for n in (25, 30)]


def fitted_both_ways(monkeypatch, make):
    fits = {}
    for route in ("literal", "cached"):
        monkeypatch.setattr(LSSMTC, "_eigen_route", route)
        fits[route] = make()
    return fits["literal"], fits["cached"]


def assert_identical(a, b):
    np.testing.assert_array_equal(a.objective_trace_, b.objective_trace_)
    for la, lb in zip(a.labels_, b.labels_):
        np.testing.assert_array_equal(la, lb)


def test_cached_eigen_step_is_bit_identical_where_the_null_space_comes_from_the_gram_matrix(sparse_tasks,
                                                                                            monkeypatch):
    # ASI per task: task 1 has d = 30 > 25 rows (degenerate, W a basis of null(X)); task 2 has
    # 30 rows (d > N fails, full rank: Eq. 25 proper every iteration)
    literal, cached = fitted_both_ways(monkeypatch, lambda: ASI(n_clusters=3, n_components=3, w_update="eigen",
                                                                max_iter=15, stopping="none",
                                                                random_state=1).fit(sparse_tasks))
    assert_identical(literal, cached)
    np.testing.assert_array_equal(literal.record_.scalars["w_projection"], cached.record_.scalars["w_projection"])
    assert cached.record_.scalars["w_projection"][0] < 1e-8 < 1e-2 < cached.record_.scalars["w_projection"][1]


@pytest.mark.parametrize("lambda_", [0.0, 0.6])
def test_cached_eigen_step_is_bit_identical_with_full_rank_pooled_rows(sparse_tasks, monkeypatch, lambda_):
    # 55 pooled rows, d = 30, full rank: Z'Z formed once, S's low-rank part per iteration
    literal, cached = fitted_both_ways(monkeypatch, lambda: LSSMTC(
        n_clusters=3, n_components=4, lambda_=lambda_, w_update="eigen", w_init="eigen", max_iter=15,
        stopping="none", random_state=3).fit(sparse_tasks))
    assert_identical(literal, cached)
    np.testing.assert_array_equal(literal.W_, cached.W_)


def test_cached_eigen_step_follows_the_self_paced_weights(sparse_tasks, monkeypatch):
    # the weights change every round: the invariants are formed again for each
    literal, cached = fitted_both_ways(monkeypatch, lambda: SPMTCh(
        n_clusters=3, n_components=3, lambda_=0.5, w_update="eigen", warm_start_iter=3, round_max_iter=4,
        random_state=0).fit(sparse_tasks))
    assert_identical(literal, cached)
    np.testing.assert_array_equal(literal.lambda2_, cached.lambda2_)


def test_degenerate_step_with_more_rows_than_features_returns_a_basis_of_the_null_space(monkeypatch):
    # rank 10 < d = 30 <= N = 60: both routes return a W with X W = 0 up to rounding, the
    # literal one an arbitrary basis of null(X) plus eigh's rounding noise (which then drives
    # the P iterates: no other route can give its iterates), the cached one the null basis
    # the d > N branch builds, formed once per fit
    rng = np.random.default_rng(1)
    X = sp.csr_matrix(np.abs(rng.standard_normal((60, 10))) @ np.abs(rng.standard_normal((10, 30))))
    literal, cached = fitted_both_ways(monkeypatch, lambda: PooledASI(n_clusters=3, n_components=4,
                                                                      w_update="eigen", max_iter=20,
                                                                      random_state=0).fit([X[:30], X[30:]]))
    for fit in (literal, cached):
        assert fit.record_.scalars["w_projection"] < 1e-8


# --- LSSMTC / SPMTC: MALSAR's W step in place (Eq. 23-24 as LSSMTC.m l.137-145) ----------
def malsar_w_written_out(solver, Y):
    """The W step as it read before it was formed in place (every term out of place, C-'s
    terms as zeros for non-negative input)."""
    W = solver.W_
    OY = [o[:, None] * Yk for o, Yk in zip(solver._omega, Y)]
    if solver._nonnegative:
        PCW = sum(np.asarray(X.T @ oy) for X, oy in zip(solver._X, OY))
        NCW = np.zeros_like(W)
        WWtPCW = W @ sum(Yk.T @ oy for Yk, oy in zip(Y, OY))
        WWtNCW = NCW
    else:
        Cp, Cn = solver._C_parts
        PCW, NCW = Cp @ W, Cn @ W
        WWtPCW, WWtNCW = W @ (W.T @ PCW), W @ (W.T @ NCW)
    XtOP = sum(np.asarray(X.T @ (o[:, None] * P)) for X, o, P in zip(solver._X, solver._omega, solver.P_))
    D = XtOP @ solver.M_.T
    PD, ND = (np.abs(D) + D) / 2.0, (np.abs(D) - D) / 2.0
    numerator = NCW + WWtPCW + PD + W @ (W.T @ ND)
    denominator = PCW + WWtNCW + ND + W @ (W.T @ PD) + solver.eps
    return W * np.sqrt(numerator / denominator)


def test_signed_parts_are_malsars_expressions_to_the_bit():
    from mtc.methods.spmtc import signed_parts

    A = np.random.default_rng(4).normal(size=(60, 7)) * 1e3
    A[3, 2] = 0.0
    positive, negative = signed_parts(A)
    np.testing.assert_array_equal(positive, (np.abs(A) + A) / 2.0)
    np.testing.assert_array_equal(negative, (np.abs(A) - A) / 2.0)
    assert positive.min() >= 0.0 and negative.min() >= 0.0


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("make", [lambda: LSSMTC(n_clusters=3, n_components=4, lambda_=0.6, max_iter=20,
                                                 stopping="none", random_state=2),
                                  lambda: SPMTCh(n_clusters=3, n_components=4, lambda_=0.6, warm_start_iter=5,
                                                 round_max_iter=10, random_state=2)],
                         ids=["lssmtc", "spmtc"])
def test_malsar_w_step_in_place_is_the_formula_written_out_to_the_bit(sparse_tasks, monkeypatch, signed, make):
    tasks = [X - 0.5 * X.mean() * (X != 0) if signed else X for X in sparse_tasks]  # signed: negative entries
    fast = make().fit(tasks)
    monkeypatch.setattr(LSSMTC, "_malsar_w", malsar_w_written_out)
    literal = make().fit(tasks)
    assert_identical(fast, literal)
    assert fast.W_.tobytes() == literal.W_.tobytes()  # the bits, signed zeros included


@pytest.mark.parametrize("make", [lambda: LSSMTC(n_clusters=3, n_components=4, lambda_=0.6, max_iter=20,
                                                 stopping="none", random_state=2),
                                  lambda: SPMTCh(n_clusters=3, n_components=4, lambda_=0.6, warm_start_iter=5,
                                                 round_max_iter=10, random_state=2),
                                  lambda: PooledASI(n_clusters=3, n_components=4, w_update="eigen", max_iter=20,
                                                    stopping="none", random_state=2)],
                         ids=["lssmtc", "spmtc", "all-asi-eigen"])
def test_x_w_kept_from_the_last_sweeps_losses_gives_the_iterates_of_taking_it_again(sparse_tasks, monkeypatch, make):
    kept = make().fit(sparse_tasks)
    iterate = LSSMTC._iterate

    def taking_x_w_again(self, frozen=None):
        self._Y_of = None
        return iterate(self, frozen)

    monkeypatch.setattr(LSSMTC, "_iterate", taking_x_w_again)
    again = make().fit(sparse_tasks)
    assert kept.n_iter_ == again.n_iter_ > 5
    assert_identical(kept, again)
    if hasattr(kept, "W_"):  # (All ASI keeps its pooled fit's labels and traces)
        assert kept.W_.tobytes() == again.W_.tobytes()
        for a, b in zip(kept.P_, again.P_):
            assert a.tobytes() == b.tobytes()


# --- LSSMTC / SPMTC: X B by columns, X'Omega P kept for the next sweep, one pass for the W step
@pytest.mark.parametrize("columns", [1, 2, 5, 16])
@pytest.mark.parametrize("order", ["C", "F"])
def test_sparse_products_by_columns_and_side_by_side_are_the_row_products_bits(columns, order):
    """X B by CSC (sorted indices) is X B by CSR to the bit, and X'[A, B] is [X'A, X'B]."""
    rng = np.random.default_rng(columns)
    X = sp.random(120, 300, density=0.05, format="csr", random_state=columns) * 7.3
    B = np.asarray(rng.standard_normal((300, columns)), order=order)
    A = rng.random((120, 2))
    Y = np.asarray(rng.standard_normal((120, columns)), order=order)
    assert X.has_canonical_format
    np.testing.assert_array_equal(X.tocsc() @ B, X @ B)
    both = X.T @ np.hstack([A, Y])
    np.testing.assert_array_equal(both[:, :2], X.T @ A)
    np.testing.assert_array_equal(both[:, 2:], X.T @ Y)


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("make", [
    lambda: LSSMTC(n_clusters=3, n_components=4, lambda_=0.6, max_iter=20, stopping="none", random_state=2),
    lambda: LSSMTC(n_clusters=3, n_components=2, lambda_=0.1, max_iter=200, random_state=5),
    lambda: SPMTCh(n_clusters=3, n_components=4, lambda_=0.6, warm_start_iter=5, round_max_iter=10, random_state=2),
    lambda: SPMTCh(n_clusters=3, n_components=3, lambda_=0.3, unselected_rows="update", random_state=4),
    lambda: SPMTCs(n_clusters=3, n_components=4, lambda_=0.8, random_state=1),
    lambda: PooledASI(n_clusters=3, n_components=4, max_iter=30, random_state=2),
    lambda: LSSMTC(n_clusters=3, n_components=4, lambda_=0.0, max_iter=40, stopping="none", random_state=3),
    lambda: ASI(n_clusters=3, n_components=3, w_update="eigen", max_iter=15, stopping="none", random_state=1),
], ids=["lssmtc", "lssmtc-converging", "spmtc-h", "spmtc-h-update", "spmtc-s", "all-asi", "lssmtc-lambda-0",
        "asi-eigen"])
def test_shared_sparse_products_give_the_literal_routes_fit_to_the_bit(sparse_tasks, monkeypatch, signed, make):
    """The shared route (X_k M_k by one CSR matrix-vector product per column, the transposed
    products from one pass; for lambda = 0 no M_k in the sweeps) against the literal route's CSR
    multi-vector products and every term of the sweep."""
    import mtc.methods.spmtc as spmtc

    tasks = [X - 0.5 * X.mean() * (X != 0) if signed else X for X in sparse_tasks]
    by_columns, solves = [], []
    monkeypatch.setattr(spmtc, "sparse_times_rows", lambda A, B: by_columns.append(1) or sparse_times_rows(A, B))
    solve = LSSMTC._task_centroids
    monkeypatch.setattr(LSSMTC, "_task_centroids", lambda self, *args: solves.append(1) or solve(self, *args))
    within_term = getattr(make(), "lambda_", 0.0) > 0  # ASI and All ASI are LSSMTC with lambda = 0
    shared = make().fit(tasks)
    # X_k M_k of 3 clusters took the matrix-vector products; lambda = 0: M_k once per task, at the end
    assert by_columns or not within_term
    assert len(solves) > 5 * len(tasks) if within_term else 0 < len(solves) <= len(tasks)
    monkeypatch.setattr(LSSMTC, "_product_route", "literal")
    by_columns.clear(), solves.clear()
    literal = make().fit(tasks)
    assert not by_columns and len(solves) > 5 * len(tasks)
    assert shared.n_iter_ == literal.n_iter_ > 5
    assert_identical(shared, literal)
    if hasattr(shared, "W_"):
        assert shared.W_.tobytes() == literal.W_.tobytes()
        for a, b in zip(shared.P_, literal.P_):
            assert a.tobytes() == b.tobytes()
        for a, b in zip(shared.task_centroids_, literal.task_centroids_):
            assert a.tobytes() == b.tobytes()
        assert shared.M_.tobytes() == literal.M_.tobytes()


@pytest.mark.parametrize("signed", [False, True])
def test_the_kept_transposed_product_is_the_next_sweeps_eq_18_product(sparse_tasks, signed):
    """After a sweep, X_k' Omega_k P_k of its W step is kept, equal to the product formed
    afresh from the P and Omega the next sweep starts from; new weights drop it."""
    from mtc.record import FitRecord

    tasks = [X - 0.5 * X.mean() * (X != 0) if signed else X for X in sparse_tasks]
    s = LSSMTC(n_clusters=3, n_components=4, lambda_=0.6, random_state=0)
    s.record_ = FitRecord()
    s._setup(tasks, [3, 3], np.random.default_rng(0))
    assert s._kept_XtOP() is None
    for _ in range(2):
        s._iterate()
        kept = s._kept_XtOP()
        assert kept is not None
        for X, o, P, XtOP in zip(s._X, s._omega, s.P_, kept):
            assert XtOP.flags.c_contiguous
            assert XtOP.tobytes() == np.asarray(X.T @ (o[:, None] * P)).tobytes()
    s._set_weights([np.linspace(0, 1, X.shape[0]) for X in tasks])
    assert s._kept_XtOP() is None


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_w_step_on_a_column_selection_is_the_full_steps_bits(sparse_tasks, seed):
    """From a W of one non-zero per column in distinct rows, far from 1 and with a signed M (so
    both D+ and D- enter): the malsar W step on the l non-zeros, X W and W'W are the full
    route's to the bit."""
    from mtc.record import FitRecord

    rng = np.random.default_rng(seed)
    s = LSSMTC(n_clusters=3, n_components=4, lambda_=0.6, random_state=seed)
    s.record_ = FitRecord()
    s._setup(sparse_tasks, [3, 3], rng)
    assert s._selected() is not None  # MALSAR's eye(d, l) start
    s._iterate()
    assert s._selected() is not None  # kept by the W rule
    W = np.zeros_like(s.W_)
    W[np.arange(4), np.arange(4)] = rng.uniform(0.3, 3.0, 4)
    s.M_ = rng.standard_normal(s.M_.shape)
    Y = [np.asarray(X @ W) for X in s._X]
    s.W_ = W
    assert s._selected() is None  # a W set from outside takes the full route ...
    full = s._malsar_w(Y)
    full_xw, full_gram = [s._x_w(k) for k in range(2)], s._w_gram()
    s._selected_W = W  # ... unless declared a selection
    selected = s._malsar_w(Y)
    assert selected.tobytes() == full.tobytes()
    assert np.count_nonzero(selected) == 4
    for k, X in enumerate(s._X):
        assert s._x_w(k).tobytes() == full_xw[k].tobytes() == np.asarray(X @ W).tobytes()
    assert s._w_gram().tobytes() == full_gram.tobytes()
    D = sum(np.asarray(X.T @ (o[:, None] * P)) for X, o, P in zip(s._X, s._omega, s.P_)) @ s.M_.T
    assert (D[np.arange(4), np.arange(4)] > 0).any() and (D[np.arange(4), np.arange(4)] < 0).any()
    # the identities the step rests on, on random d x l and l x l sides
    a, w = np.arange(4), W[np.arange(4), np.arange(4)]
    A, G = rng.standard_normal(W.shape), rng.standard_normal((4, 4))
    assert (W @ (W.T @ A))[a, a].tobytes() == (w * (w * A[a, a])).tobytes()
    assert (W @ G)[a, a].tobytes() == (w * G[a, a]).tobytes()


def test_signed_input_and_the_eigen_start_take_the_full_w_step(sparse_tasks):
    from mtc.record import FitRecord

    signed = [X - 0.5 * X.mean() * (X != 0) for X in sparse_tasks]
    for tasks, w_init in ((signed, "identity"), (sparse_tasks, "eigen")):
        s = LSSMTC(n_clusters=3, n_components=4, w_init=w_init, random_state=0)
        s.record_ = FitRecord()
        s._setup(tasks, [3, 3], np.random.default_rng(0))
        assert s._selected() is None


# --- ASI / LSSMTC / SPMTC: the eigen W step's invariants kept in the steps cache ----------
@pytest.mark.parametrize("make", [
    lambda cache: ASI(n_clusters=3, n_components=3, w_update="eigen", max_iter=15, stopping="none", cache=cache,
                      random_state=1),
    lambda cache: PooledASI(n_clusters=3, n_components=4, w_update="eigen", max_iter=15, cache=cache, random_state=2),
    lambda cache: LSSMTC(n_clusters=3, n_components=4, lambda_=0.6, w_update="eigen", w_init="eigen", max_iter=15,
                         stopping="none", cache=cache, random_state=3),
    lambda cache: SPMTCh(n_clusters=3, n_components=3, lambda_=0.5, w_update="eigen", warm_start_iter=3,
                         round_max_iter=4, cache=cache, random_state=0),
], ids=["asi", "all-asi", "lssmtc-eigen", "spmtc-eigen"])
def test_eigen_invariants_from_the_cache_give_the_fits_of_computing_them(sparse_tasks, monkeypatch, make):
    """The null basis and Z'Z depend on the weighted rows and l alone: a fit that reads them
    from the cache (another seed's) gives the fit that computes them, to the bit, and does not
    compute them again."""
    from mtc.numerics.cache import Cache

    cache = Cache()
    computed = []
    invariants = LSSMTC._eigen_invariants

    def counting(self, Z):
        computed.append(1)
        return invariants(self, Z)

    monkeypatch.setattr(LSSMTC, "_eigen_invariants", counting)
    alone = make(None).fit(sparse_tasks)
    first = len(computed)
    assert first > 0
    warm = make(cache).fit(sparse_tasks)  # fills the cache (SPMTC's last round, all weights 1, reads the first's)
    filled = len(computed) - first
    again = make(cache).fit(sparse_tasks)  # reads it
    assert 0 < filled <= first and len(computed) == first + filled
    for fit in (warm, again):
        assert_identical(alone, fit)
        if hasattr(fit, "W_"):
            assert fit.W_.tobytes() == alone.W_.tobytes() and fit.W_.flags.writeable


# --- MBC: H'X by one bincount over the stored entries (Eq. 3) -----------------------------
def test_cluster_sums_are_the_sparse_product_to_the_bit():
    from mtc.methods.mbc import cluster_sums

    rng = np.random.default_rng(0)
    X = sp.random(500, 300, density=0.05, random_state=rng, format="csr") * 3.7
    labels = rng.integers(6, size=500)
    labels[labels == 4] = 5  # an empty cluster
    H = sp.csr_matrix((np.ones(500), (np.arange(500), labels)), shape=(500, 6))
    np.testing.assert_array_equal(cluster_sums(X, labels, 6), (H.T @ X).toarray())
    np.testing.assert_array_equal(cluster_sums(X.toarray(), labels, 6), H.T @ X.toarray())


@pytest.mark.parametrize("lam", [0.0, 0.7])
def test_mbc_centroids_in_place_are_eq_3_written_out_to_the_bit(lam):
    from mtc.methods.mbc import MBC, cluster_sums
    from mtc.numerics.transport import cluster_marginal

    rng = np.random.default_rng(3)
    X = sp.random(80, 50, density=0.2, random_state=rng, format="csr")
    labels = rng.integers(4, size=80)
    labels[labels == 2] = 3  # an empty cluster keeps its previous centroid
    centroids = [rng.random((4, 50)) for _ in range(3)]
    plans = {(0, s): rng.random((4, 4)) / 16 for s in (1, 2)}
    previous = rng.random((4, 50))
    solver = MBC(n_clusters=4, lambda_=lam)
    n, T = 80, 3
    sums = cluster_sums(X, labels, 4) / n  # Eq. 3 as the formula reads, every step out of place
    denominator = (np.bincount(labels, minlength=4) / n).copy()
    if lam > 0:
        sums = sums + (2.0 * lam / (T - 1)) * sum(plans[(0, s)] @ centroids[s] for s in (1, 2))
        denominator = denominator + 2.0 * lam * cluster_marginal(labels, 4, "uniform")
    expected = previous.copy()
    defined = denominator > 0
    expected[defined] = sums[defined] / denominator[defined, None]
    got = solver._centroids(0, X, labels, 4, previous, centroids, plans, lam)
    assert got.tobytes() == expected.tobytes() and got.flags.c_contiguous  # the bits, signed zeros and order included
    if lam == 0:
        np.testing.assert_array_equal(got[2], previous[2])
    full = rng.permutation(np.arange(80) % 4)  # every cluster non-empty: the in-place route
    sums = cluster_sums(X, full, 4) / n
    if lam > 0:
        sums = sums + (2.0 * lam / (T - 1)) * sum(plans[(0, s)] @ centroids[s] for s in (1, 2))
        denominator = np.bincount(full, minlength=4) / n + 2.0 * lam * cluster_marginal(full, 4, "uniform")
    else:
        denominator = np.bincount(full, minlength=4) / n
    got = solver._centroids(0, X, full, 4, previous, centroids, plans, lam)
    assert got.tobytes() == (sums / denominator[:, None]).tobytes() and got.flags.c_contiguous


def test_mbc_iterates_are_unchanged_by_the_bincount_sums(monkeypatch):
    import mtc.methods.mbc as mbc

    data = make_synthetic(n_tasks=3, n_clusters=3, n_shared=2, samples_per_cluster=15, separation=0.8, seed=2)
    tasks = [sp.csr_matrix(np.abs(X)) for X in data.matrices]
    fast = mbc.MBC(n_clusters=3, smart=True, max_iter=20, tol=0.0, random_state=1).fit(tasks)

    def product_sums(X, labels, k):
        H = sp.csr_matrix((np.ones(X.shape[0]), (np.arange(X.shape[0]), labels)), shape=(X.shape[0], k))
        return (H.T @ X).toarray()

    monkeypatch.setattr(mbc, "cluster_sums", product_sums)
    literal = mbc.MBC(n_clusters=3, smart=True, max_iter=20, tol=0.0, random_state=1).fit(tasks)
    np.testing.assert_array_equal(fast.objective_trace_, literal.objective_trace_)
    for a, b in zip(fast.centroids_, literal.centroids_):
        np.testing.assert_array_equal(a, b)


# --- freed memory kept for the next arrays (mtc.numerics.heap) ---------------------------
PAGE_FAULTS_OF_TEMPORARIES = """
import resource, sys
import subprocess
import sys

import numpy as np
from mtc.numerics.heap import keep_freed_memory
kept = keep_freed_memory() if sys.argv[1] == "kept" else None
D = np.random.default_rng(0).standard_normal((40_674, 8))  # LSSMTC's d x l on NG1
for _ in range(3):
    magnitude = np.abs(D); positive = magnitude + D  # two temporaries alive at once, then freed
del magnitude, positive
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    magnitude = np.abs(D); positive = magnitude + D
    del magnitude, positive
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def test_kept_freed_memory_spares_each_iterations_temporaries_their_page_faults():
    faults = {}
    for mode in ("kept", "defaults"):
        answer = subprocess.run([sys.executable, "-c", PAGE_FAULTS_OF_TEMPORARIES, mode], capture_output=True,
                                text=True, check=True).stdout.split()
        faults[mode] = int(answer[1])
        if mode == "kept":
            assert answer[0] == "True"  # glibc's mallopt took both thresholds
    # glibc's defaults give two 2.6 MB temporaries back to the system at every free (about 1,270
    # pages to fault in again per round); kept, the heap serves them
    assert faults["defaults"] > 20 * 600
    assert faults["kept"] < 100, faults


def test_every_fit_of_the_platform_keeps_freed_memory(monkeypatch):
    from mtc import trial
    from mtc.numerics import heap

    calls = []
    monkeypatch.setattr(trial, "keep_freed_memory", lambda: calls.append(1) or True)
    dataset = make_synthetic(n_tasks=2, n_clusters=2, samples_per_cluster=10, seed=0)
    trial.run_trial(dataset, MKC(n_clusters=2, max_iter=3), trial.Trial({}, 0), cache=None)
    assert calls == [1]
    assert heap.keep_freed_memory() is True  # this process: glibc's mallopt accepted both


@pytest.mark.parametrize("c, columns, order", [(3, 40_674, "F"), (3, 40_674, "C"), (4, 8, "C"), (2, 5, "F")])
def test_gram_solves_by_cholesky_are_scipys_positive_definite_solve_to_the_bit(c, columns, order):
    from mtc.methods.spmtc import _solve_gram

    rng = np.random.default_rng(c + columns)
    P = rng.random((200, c))
    B = np.asarray(rng.standard_normal((c, columns)), order=order)
    fallbacks = []
    np.testing.assert_array_equal(_solve_gram(P.T @ P, B, fallbacks), scipy.linalg.solve(P.T @ P, B, assume_a="pos"))
    P[:, -1] = 0.0  # a cluster column died out: singular, lstsq, counted
    np.testing.assert_array_equal(_solve_gram(P.T @ P, B, fallbacks), np.linalg.lstsq(P.T @ P, B, rcond=None)[0])
    assert fallbacks == [1]


@pytest.mark.parametrize("c, rows, order", [(3, 40_674, "C"), (3, 500, "F"), (4, 8, "C")])
def test_gram_solves_from_the_right_are_the_transposed_left_solves(c, rows, order):
    from mtc.methods.spmtc import _solve_gram, _solve_gram_rows

    rng = np.random.default_rng(c + rows)
    P = rng.random((200, c))
    R = np.asarray(rng.standard_normal((rows, c)), order=order)
    fallbacks = []
    np.testing.assert_allclose(_solve_gram_rows(P.T @ P, R, fallbacks), _solve_gram(P.T @ P, R.T, fallbacks).T,
                               rtol=1e-13, atol=1e-15)
    U, _ = scipy.linalg.cho_factor(P.T @ P)  # the factor by scipy's wrapper, then the same two solves
    trsm, = scipy.linalg.get_blas_funcs(("trsm",), (U, R))
    by_cho_factor = trsm(1.0, U, trsm(1.0, U, R, side=1, lower=0), side=1, lower=0, trans_a=1)
    np.testing.assert_array_equal(_solve_gram_rows(P.T @ P, R, fallbacks), by_cho_factor)
    P[:, 0] = 0.0  # singular: lstsq, counted
    np.testing.assert_allclose(_solve_gram_rows(P.T @ P, R, fallbacks), _solve_gram(P.T @ P, R.T, fallbacks).T,
                               rtol=1e-13, atol=1e-15)
    assert fallbacks == [1, 1]
    R[1, 1] = np.nan
    with pytest.raises(ValueError, match="infs or NaNs"):
        _solve_gram_rows(rng.random((c, c)) + c * np.eye(c), R, [])


@pytest.mark.parametrize("make", [lambda: LSSMTC(n_clusters=3, n_components=4, lambda_=0.6, max_iter=20,
                                                 stopping="none", random_state=2),
                                  lambda: SPMTCh(n_clusters=3, n_components=4, lambda_=0.6, warm_start_iter=5,
                                                 round_max_iter=10, random_state=2)], ids=["lssmtc", "spmtc"])
def test_lssmtc_with_right_solves_gives_the_left_solves_iterates(sparse_tasks, monkeypatch, make):
    import mtc.methods.spmtc as spmtc

    right = make().fit(sparse_tasks)
    monkeypatch.setattr(spmtc, "_solve_gram_rows", lambda G, R, fallbacks: spmtc._solve_gram(G, R.T, fallbacks).T)
    left = make().fit(sparse_tasks)
    assert right.n_iter_ == left.n_iter_
    np.testing.assert_allclose(right.objective_trace_, left.objective_trace_, rtol=1e-12)
    np.testing.assert_allclose(right.W_, left.W_, rtol=1e-10, atol=1e-12)
    for a, b in zip(right.labels_, left.labels_):
        np.testing.assert_array_equal(a, b)


def test_spmtc_losses_by_column_row_sums_are_numpys_row_sums_bit_for_bit(sparse_tasks, monkeypatch):
    """SPMTC-h's per-example losses by ``row_dots`` (column by column) against np.sum(A * B,
    axis=1): the same objective trace, weights, W and labels, bit for bit."""
    import mtc.methods.spmtc as spmtc

    def make(l):
        return SPMTCh(n_clusters=3, n_components=l, lambda_=0.6, warm_start_iter=5, round_max_iter=10,
                      w_update="eigen", random_state=2)

    fast = [make(l).fit(sparse_tasks) for l in (4, 11)]  # X_k W's rows: the sums of fewer and more than 8 terms
    monkeypatch.setattr(spmtc, "row_dots", lambda A, B: np.sum(A * B, axis=1))
    for l, fit in zip((4, 11), fast):
        numpys = make(l).fit(sparse_tasks)
        assert fit.n_iter_ == numpys.n_iter_ > 5
        np.testing.assert_array_equal(fit.objective_trace_, numpys.objective_trace_)
        np.testing.assert_array_equal(fit.W_, numpys.W_)
        for a, b in zip(fit.P_, numpys.P_):
            np.testing.assert_array_equal(a, b)


# --- SNMF on the cosine of dense rows (MTCFIR-nI): one pass over N per iteration ----------
@pytest.mark.parametrize("rule", ["sqrt", "plain", "damped", "quarter"])
@pytest.mark.parametrize("shift, clipped", [(3.0, False), (1.5, True)], ids=["no-correction", "correction"])
def test_one_pass_snmf_gives_the_two_product_iterates(monkeypatch, rule, shift, clipped):
    """iterate_one_pass (blocks of 17 rows here, the last one shorter) against ``iterate``
    with M Y = N (N'Y) + R Y: the same iterates, trace and labels to 1e-10 over 150
    iterations, with and without the clipped part R; snmf takes it for a CosineProduct of
    dense rows."""
    import mtc.numerics.snmf as snmf_module
    from mtc.numerics.affinity import CosineProduct, cosine_operator

    rng = np.random.default_rng(7)
    X = rng.normal(size=(203, 6)) + shift
    M = cosine_operator(X)
    assert isinstance(M, CosineProduct) and (M.correction is not None) == clipped
    monkeypatch.setattr(snmf_module, "PASS_BLOCK_BYTES", 8 * 6 * 17)
    taken = []
    one_pass = snmf_module.iterate_one_pass
    monkeypatch.setattr(snmf_module, "iterate_one_pass", lambda *a, **k: taken.append(1) or one_pass(*a, **k))
    Y0 = rng.random((203, 4)) + 0.2
    Y_fast, fast = snmf_module.snmf(M, Y0, update=rule, tol=0, max_iter=150)
    Y_slow, slow = snmf_module.iterate(M, Y0, M @ Y0, M.squared_norm(),
                                       lambda Y, MY: snmf_module.snmf_step(Y, MY, rule), "relative", 0, 150)
    assert taken == [1] and fast.n_iter == slow.n_iter == 150
    np.testing.assert_allclose(Y_fast, Y_slow, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fast.trace, slow.trace, rtol=1e-10)
    np.testing.assert_array_equal(fast.labels, slow.labels)
    assert np.max(np.abs(np.diff(fast.trace))) > 0  # the iterates moved


# --- MTCFIR-nR: no relation matrices where the distances come from the features -----------
def test_mtcfir_nr_skips_the_relations_its_distances_do_not_read(monkeypatch):
    """With features narrower than all tasks' samples (Handdigits after mSDA) the distances
    come from the features and every alpha is 1, so MTCFIR-nR computes no V^(ts): the same
    similarities, bit for bit, as the distances from the relations' route-free call; MTCFIR
    with learned weights still needs them."""
    import mtc.methods.mtcfir as mtcfir
    import mtc.numerics.consistent_similarity as consistent_similarity
    from mtc.numerics.consistent_similarity import (adaptive_neighbours, distance_matrices, relation_matrices,
                                                    rescale_and_symmetrise)

    data = make_synthetic(n_tasks=2, n_clusters=3, n_features=5, support=3, samples_per_cluster=15, seed=4)
    features, neighbours = [np.abs(X) for X in data.matrices], [5, 5]
    expected = [rescale_and_symmetrise(adaptive_neighbours(A, l))
                for A, l in zip(distance_matrices(features, relation_matrices(features), np.ones((2, 2))), neighbours)]

    def refused(_):
        raise AssertionError("relation matrices computed")

    monkeypatch.setattr(consistent_similarity, "relation_matrices", refused)  # what MTCFIR's kept_relations calls
    alpha, similarities = mtcfir.MTCFIRnR()._similarity_step(features, "features", neighbours)
    np.testing.assert_array_equal(alpha, np.ones((2, 2)))
    for got, want in zip(similarities, expected):
        np.testing.assert_array_equal(got.toarray() if sp.issparse(got) else got, want)
    with pytest.raises(AssertionError, match="relation matrices computed"):
        mtcfir.MTCFIR()._similarity_step(features, "features", neighbours)


def literal_adaptive_neighbours(A, l):
    """Eq. 14-19 as the dense route selected them before: down the strided columns of A."""
    A = A.copy()
    np.fill_diagonal(A, -np.inf)
    order = np.argpartition(A, l + 1, axis=0)[: l + 2]
    picked = np.take_along_axis(A, order, axis=0)
    sort = np.argsort(picked, axis=0)
    order, picked = np.take_along_axis(order, sort, axis=0), np.take_along_axis(picked, sort, axis=0)
    nearest, next_one = picked[1: l + 1], picked[l + 1]
    denominator = l * next_one - nearest.sum(axis=0)
    weights = (next_one[None, :] - nearest) / np.maximum(denominator, 1e-300)[None, :]
    weights[:, denominator <= 1e-300] = 1.0 / l
    M = np.zeros(A.shape)
    np.put_along_axis(M, order[1: l + 1], weights, axis=0)
    return M


@pytest.mark.parametrize("n, l", [(50, 3), (300, 20), (300, 100), (1000, 60)])
@pytest.mark.parametrize("distances", ["random", "ties", "asymmetric"])
def test_consistent_similarity_from_the_weights_is_the_dense_route_to_the_bit(n, l, distances):
    """MTCFIR's M^t built sparse from the l x n neighbour weights (selected along the rows of A')
    against Sec. 3.5 applied to the dense Eq. 14-19 matrix selected down A's columns: the same
    entries, bit for bit, CSR (canonical, no stored zero) below a quarter of the entries, else
    dense; ties among the distances and an asymmetric A included."""
    from mtc.numerics.consistent_similarity import adaptive_neighbours, consistent_similarity, rescale_and_symmetrise

    rng = np.random.default_rng(n + l)
    X = rng.random((n, 5))
    if distances == "ties":
        X = np.round(3 * X) / 3
    A = ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=-1)
    if distances == "asymmetric":
        A += 0.1 * rng.random((n, n))
    literal = literal_adaptive_neighbours(A, l)
    np.testing.assert_array_equal(adaptive_neighbours(A, l), literal)
    expected = rescale_and_symmetrise(literal)
    got = consistent_similarity(A, l)
    assert sp.issparse(got) == (np.count_nonzero(expected) < 0.25 * n * n)
    if sp.issparse(got):
        want = sp.csr_matrix(expected)
        assert got.has_canonical_format and np.all(got.data != 0)
        for field in ("indptr", "indices", "data"):
            np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
    else:
        np.testing.assert_array_equal(got, expected)


def test_task_weights_threshold_is_the_literal_column_sort():
    """Eq. 20's eps^t: the median over columns of the (l+1)-th largest entry of each column of
    V^(tt), here from a partition of the transposed copy, against sorting every column (an
    asymmetric V^(tt), so rows and columns differ)."""
    from mtc.numerics.consistent_similarity import task_weights

    rng = np.random.default_rng(5)
    relations = {(t, s): rng.random((30 + 5 * t, 30 + 5 * s)) for t in range(2) for s in range(2)}
    alpha = task_weights(relations, [4, 7])
    for t, l in enumerate([4, 7]):
        descending = -np.sort(-relations[(t, t)], axis=0)
        threshold = np.median(descending[l])
        for s in range(2):
            assert alpha[t, s] == np.count_nonzero(relations[(t, s)] >= threshold) / relations[(t, s)].size


# --- MBC / S-MBC: X M' by one sparse matrix-vector product per centroid -------------------
@pytest.mark.parametrize("centroids", [1, 3, 16])
def test_sparse_times_rows_gives_the_multivector_products_bits(centroids):
    """squared_distances(X, M) of CSR rows and a few dense centroids takes one csr matvec
    per centroid: the same bits as scipy's X @ M' (a float32 X too), and the same distances."""
    from mtc.numerics.affinity import row_norms_sq, sparse_times_rows, squared_distances

    rng = np.random.default_rng(centroids)
    X = sp.random(300, 500, density=0.05, format="csr", random_state=centroids)
    M = rng.random((centroids, 500))
    np.testing.assert_array_equal(sparse_times_rows(X, M), X @ M.T)
    np.testing.assert_array_equal(sparse_times_rows(X.astype(np.float32), M), X.astype(np.float32) @ M.T)
    expected = np.maximum(row_norms_sq(X)[:, None] + row_norms_sq(M)[None, :] - 2.0 * (X @ M.T), 0.0)
    np.testing.assert_array_equal(squared_distances(X, M), expected)


def test_mbc_fits_are_the_same_bits_with_the_multivector_product(sparse_tasks, monkeypatch):
    """S-MBC's whole fit with scipy's X @ M' swapped back in: the same traces and labels, bit for bit."""
    import mtc.numerics.affinity as affinity
    from mtc.methods.mbc import MBC

    def fit():
        return MBC(n_clusters=3, smart=True, max_iter=30, tol=0, random_state=1).fit(sparse_tasks)

    fast = fit()
    monkeypatch.setattr(affinity, "sparse_times_rows", lambda A, B: np.asarray(A @ B.T))
    slow = fit()
    np.testing.assert_array_equal(fast.objective_trace_, slow.objective_trace_)
    for a, b in zip(fast.labels_, slow.labels_):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (16, 10)])
def test_emd_without_centred_duals_gives_pots_default_plan(shape):
    """transport.emd skips POT's centring of the duals it does not use: the plan and cost of
    ot.emd's defaults, bit for bit (a tie-heavy integer cost too)."""
    import ot

    from mtc.numerics.transport import cluster_marginal, emd

    rng = np.random.default_rng(shape[0])
    a, b = cluster_marginal(None, shape[0], "uniform"), cluster_marginal(None, shape[1], "uniform")
    for cost in (rng.random(shape), rng.integers(0, 3, shape).astype(float)):
        plan, value = emd(cost, a, b)
        default = ot.emd(a, b, np.ascontiguousarray(cost), numItermax=1_000_000)
        np.testing.assert_array_equal(plan, default)
        assert value == float(np.sum(default * cost))


def test_one_pass_snmf_from_an_integer_start_computes_in_floats():
    """An integer one-hot start: the one-pass route's iterates are floats, as the two-product
    route's (its updates promote), not truncated to the start's dtype."""
    import mtc.numerics.snmf as snmf_module
    from mtc.numerics.affinity import cosine_operator

    rng = np.random.default_rng(8)
    M = cosine_operator(rng.normal(size=(120, 5)) + 3.0)
    Y0 = np.eye(3, dtype=np.int64)[rng.integers(3, size=120)] + 1
    Y_fast, fast = snmf_module.snmf(M, Y0, update="sqrt", tol=0, max_iter=20)
    Y_slow, slow = snmf_module.iterate(M, Y0, M @ Y0, M.squared_norm(),
                                       lambda Y, MY: snmf_module.snmf_step(Y, MY, "sqrt"), "relative", 0, 20)
    assert Y_fast.dtype == np.float64
    np.testing.assert_allclose(Y_fast, Y_slow, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fast.trace, slow.trace, rtol=1e-10)
