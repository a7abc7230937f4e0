import numpy as np
import pytest

from mtc.cli import configured_dataset
from mtc.config import Trial
from mtc.data.synthetic import make_synthetic
from mtc.methods import MTCMRL, SNMFLR
from mtc.numerics.cache import Cache
from mtc.numerics.simplex import G_SOLVERS, project_rows_to_simplex, rowwise_objective, solve_simplex_rows
from mtc.trial import run_trial


@pytest.fixture(scope="module")
def planted():
    return make_synthetic(n_tasks=3, n_clusters=4, n_shared=2, samples_per_cluster=25, seed=4)


def nondecreasing_steps(trace):
    return int(np.sum(np.diff(trace) > 1e-10 * abs(trace[0])))


def test_simplex_projection_is_on_the_simplex_and_fixes_simplex_points():
    V = np.random.default_rng(0).normal(size=(50, 7)) * 3
    P = project_rows_to_simplex(V)
    assert (P >= 0).all()
    np.testing.assert_allclose(P.sum(axis=1), 1.0)
    np.testing.assert_allclose(project_rows_to_simplex(P), P, atol=1e-12)


@pytest.mark.parametrize("h_t, h_s, beta", [(3, 3, 0.5), (4, 6, 0.05), (7, 5, 2.0)])
def test_projection_qp_and_frank_wolfe_agree(h_t, h_s, beta):
    A = np.random.default_rng(h_t * h_s).random((h_t, h_s)) * 2
    solutions = {solver: solve_simplex_rows(A, beta, solver) for solver in G_SOLVERS}
    best = rowwise_objective(A, solutions["projection"], beta)
    # the interior-point QP and Frank-Wolfe (sublinear) are approximate: looser tolerances
    tolerance = {"projection": (1e-12, 1e-10), "qp": (1e-5, 2e-3), "frank_wolfe": (1e-4, 2e-2)}
    for solver, G in solutions.items():
        np.testing.assert_allclose(G.sum(axis=1), 1.0, atol=1e-8)
        rel, atol = tolerance[solver]
        assert rowwise_objective(A, G, beta) == pytest.approx(best, rel=rel), solver
        assert rowwise_objective(A, G, beta) >= best - 1e-12  # the projection is the minimiser
        np.testing.assert_allclose(G, solutions["projection"], atol=atol)


@pytest.mark.parametrize("w_update", ["exact", "paper"])
def test_ridge_and_sylvester_w_solvers_agree(planted, w_update):
    fits = [MTCMRL(n_clusters=4, w_solver=solver, w_update=w_update, max_iter=5, stopping="relative", tol=0,
                   random_state=0).fit(planted.matrices) for solver in ("ridge", "sylvester")]
    for W_ridge, W_sylvester in zip(fits[0].W_, fits[1].W_):
        np.testing.assert_allclose(W_ridge, W_sylvester, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(fits[0].objective_trace_, fits[1].objective_trace_, rtol=1e-8)


def test_objective_never_rises_and_constraints_hold_on_synthetic(planted):
    model = MTCMRL(n_clusters=4, alpha=2.0, stopping="relative", tol=1e-9, max_iter=60, random_state=0)
    model.fit(planted.matrices)
    assert nondecreasing_steps(model.objective_trace_) == 0
    assert all((Y >= 0).all() for Y in model.Y_)
    assert all(W.shape == (planted.n_features, 4) for W in model.W_)
    assert sorted(model.G_) == [(t, s) for t in range(3) for s in range(3) if s != t]
    for G in model.G_.values():
        assert (G >= 0).all()
        np.testing.assert_allclose(G.sum(axis=1), 1.0)


@pytest.mark.slow
def test_objective_never_rises_on_reuters_and_the_printed_rules_do():
    dataset = configured_dataset("reuters")
    exact = MTCMRL(n_clusters=dataset.n_clusters, lambda_=1.0, alpha=1.0, random_state=0).fit(dataset.matrices)
    assert exact.converged_ and exact.n_iter_ > 5
    assert nondecreasing_steps(exact.objective_trace_) == 0
    printed = MTCMRL(n_clusters=dataset.n_clusters, lambda_=1.0, alpha=1.0, w_update="paper", y_update="paper",
                     stopping="relative", tol=0, max_iter=30, random_state=0).fit(dataset.matrices)
    assert nondecreasing_steps(printed.objective_trace_) > 0  # docs/architecture.md "Numerics we have checked": Eq. 19 is not a descent step


def test_snmf_lr_is_mtcmrl_without_cross_task_terms(planted):
    single = SNMFLR(n_clusters=4, random_state=3).fit(planted.matrices)
    zero = MTCMRL(n_clusters=4, alpha=0.0, beta=0.0, random_state=3).fit(planted.matrices)
    assert single.G_ == {} and "G" not in single.record_.matrices
    np.testing.assert_allclose(single.objective_trace_, zero.objective_trace_)
    assert "alpha" not in SNMFLR().get_params()


def test_shared_clusters_are_most_related_after_mapping_to_classes():
    dataset = make_synthetic(n_tasks=2, n_clusters=4, n_shared=2, seed=0)
    outcome = run_trial(dataset, MTCMRL(n_clusters=dataset.n_clusters, alpha=1.0), Trial({}, 0), None)
    assert outcome.metrics["acc/mean"] == 1.0
    relatedness = outcome.matrices["G"]
    G = relatedness.blocks[(0, 1)]
    assert relatedness.row_names == {0: ["shared0", "shared1", "task0_own0", "task0_own1"],
                                     1: ["shared0", "shared1", "task1_own0", "task1_own1"]}
    assert relatedness.row_groups == {0: "task0", 1: "task1"} and sorted(relatedness.blocks) == [(0, 1), (1, 0)]
    for i in (0, 1):  # a shared cluster's most related cluster is the same shared cluster
        assert np.argmax(G[i]) == i
    assert set(outcome.traces) == {"w_norm/task0", "w_norm/task1"}


@pytest.mark.parametrize("params, message", [
    ({"lambda_": 0.0}, r"The 'lambda_' parameter of MTCMRL must be a float in the range \(0.0, inf\)"),
    ({"alpha": -1.0}, r"The 'alpha' parameter of MTCMRL must be a float in the range \[0.0, inf\)"),
    ({"tol": -1.0}, r"The 'tol' parameter of MTCMRL must be a float in the range \[0.0, inf\)"),
    ({"g_solver": "cvx"}, "The 'g_solver' parameter of MTCMRL must be a str among"),
    ({"w_solver": "lu"}, "The 'w_solver' parameter of MTCMRL must be a str among"),
    ({"y_update": "fast"}, "The 'y_update' parameter of MTCMRL must be a str among"),
])
def test_bad_parameters_are_rejected(planted, params, message):
    with pytest.raises(ValueError, match=message):
        MTCMRL(n_clusters=4, **params).fit(planted.matrices)


def test_negative_similarity_data_is_fine_but_nan_is_not(planted):
    bad = [X.copy() for X in planted.matrices]
    bad[2][0, 0] = np.nan
    with pytest.raises(ValueError, match="task 2: data contains NaN"):
        MTCMRL(n_clusters=4).fit(bad)


def test_row_space_coordinates_give_the_same_fit(planted):
    sparse_tasks = [np.abs(X) for X in planted.matrices]
    fits = [MTCMRL(n_clusters=4, row_space=flag, stopping="relative", tol=0, max_iter=15, random_state=1
                   ).fit(sparse_tasks) for flag in (True, False)]
    np.testing.assert_allclose(fits[0].objective_trace_, fits[1].objective_trace_, rtol=1e-10)
    for W_reduced, W_full in zip(fits[0].W_, fits[1].W_):
        assert W_reduced.shape == W_full.shape == (planted.n_features, 4)
        np.testing.assert_allclose(W_reduced, W_full, rtol=1e-7, atol=1e-9)


def test_seed_independent_preparation_is_cached_and_identical_without_the_cache(planted):
    cache = Cache(size=1)
    first = MTCMRL(n_clusters=4, random_state=3, cache=cache).fit(planted.matrices)
    again = MTCMRL(n_clusters=4, alpha=2.0, random_state=3, cache=cache).fit(planted.matrices)
    (kept,) = cache.results["mtcmrl_preparation"].values()
    MTCMRL(n_clusters=4, random_state=3, cache=cache).fit(planted.matrices)
    (still,) = cache.results["mtcmrl_preparation"].values()
    assert still is kept  # another alpha and a repeat reused the preparation
    assert not np.array_equal(first.objective_trace_, again.objective_trace_)
    fresh = MTCMRL(n_clusters=4, random_state=3).fit(planted.matrices)
    np.testing.assert_array_equal(first.objective_trace_, fresh.objective_trace_)  # bit-identical
    for W_cached, W_fresh in zip(first.W_, fresh.W_):
        np.testing.assert_array_equal(W_cached, W_fresh)
    assert all(X.flags.writeable for X in planted.matrices)
    MTCMRL(n_clusters=4, row_space=False, random_state=3, cache=cache).fit(planted.matrices)
    assert all(X.flags.writeable for X in planted.matrices)


@pytest.mark.parametrize("y_update", ["monotone", "paper"])
def test_the_last_objective_is_eq3_recomputed_from_scratch_at_the_returned_factors(planted, y_update):
    """The objective reuses the Y step's products M Y and X W (docs: issue 15's restructure);
    the literal Eq. 3 at the returned Y, W, G gives the same number."""
    from mtc.numerics.affinity import affinity_matrix

    X = planted.matrices
    model = MTCMRL(n_clusters=planted.n_clusters, alpha=1.0, beta=0.5, y_update=y_update, max_iter=15,
                   random_state=0).fit(X)
    total = 0.0
    for t, (Xt, Y, W) in enumerate(zip(X, model.Y_, model.W_)):
        M = affinity_matrix(Xt, "cosine")
        total += 0.5 * np.sum((M - Y @ Y.T) ** 2) + model.lambda_ * np.sum((Y - Xt @ W) ** 2) + model.mu * np.sum(W ** 2)
    for (t, s), G in model.G_.items():
        distances = ((model.W_[t][:, :, None] - model.W_[s][:, None, :]) ** 2).sum(axis=0)
        total += model.alpha * (np.sum(distances * G) + model.beta * np.sum(G * G))
    assert model.objective_trace_[-1] == pytest.approx(total, rel=1e-10)


@pytest.mark.parametrize("density", [0.02, 1.0])
def test_both_ridge_factor_routes_solve_the_ridge_systems(density):
    """RidgeFactor streams V, or X and U for sparse X (issue 15): each column is
    (lam X'X + c_j I)^-1 b_j, as a dense solve gives."""
    import scipy.sparse as sp

    from mtc.methods.mtcmrl import RidgeFactor

    rng = np.random.default_rng(0)
    X = sp.random(60, 300, density=density, random_state=1, format="csr")
    factor = RidgeFactor(X)
    assert (factor.V is None) == (density < 1)  # sparse: through X and U; dense: through V
    lam, c, B = 0.7, np.array([0.5, 1.5, 4.0]), rng.normal(size=(300, 3))
    gram = (X.T @ X).toarray()
    expected = np.column_stack([np.linalg.solve(lam * gram + cj * np.eye(300), b) for cj, b in zip(c, B.T)])
    np.testing.assert_allclose(factor.solve(lam, c, B), expected, rtol=1e-9, atol=1e-12)


def test_row_space_auto_is_used_only_when_it_has_fewer_coordinates_than_features(planted):
    tall = [np.abs(X) for X in planted.matrices]  # 3 x 100 samples, 40 features: no row space
    wide = [X[::10] for X in tall]  # 3 x 10 samples: 31 coordinates < 40 features
    for tasks, expected in ((tall, False), (wide, True)):
        assert MTCMRL(row_space="auto")._uses_row_space(tasks) is expected
        auto, explicit = (MTCMRL(n_clusters=4, row_space=flag, max_iter=5, random_state=0).fit(tasks)
                          for flag in ("auto", expected))
        np.testing.assert_array_equal(auto.objective_trace_, explicit.objective_trace_)


def test_sparse_data_through_x_and_u_gives_the_dense_fit():
    """The fit on sparse tasks (ridge systems through X and U) equals the fit on the same
    tasks dense (through V) to 1e-10 along the whole trace, in the original features and in
    the row space alike."""
    import scipy.sparse as sp

    from mtc.methods.mtcmrl import RidgeFactor

    sparse = [sp.random(40, 300, density=0.03, random_state=seed, format="csr") for seed in range(3)]
    dense = [X.toarray() for X in sparse]
    assert all(RidgeFactor(X).V is None for X in sparse) and all(RidgeFactor(X).V is not None for X in dense)
    for row_space in (False, True):
        fits = [MTCMRL(n_clusters=3, row_space=row_space, stopping="relative", tol=0, max_iter=15,
                       random_state=1).fit(tasks) for tasks in (sparse, dense)]
        np.testing.assert_allclose(fits[0].objective_trace_, fits[1].objective_trace_, rtol=1e-10)


def test_a_task_gram_svd_is_computed_once_for_its_ridge_factor_and_its_seeding(monkeypatch):
    """Without the row space and with d > n (20NG), a task's ridge factor and the k-means
    seeding's coordinates come from one eigendecomposition of its Gram matrix, not two, and
    are the same bits as each computed on its own."""
    import scipy.sparse as sp

    from mtc.methods import mtcmrl
    from mtc.numerics import linalg
    from mtc.numerics.seeding import kmeans_coordinates

    tasks = [sp.random(40, 300, density=0.05, random_state=seed, format="csr") for seed in range(3)]
    calls = []
    eigh = linalg.scipy.linalg.eigh
    monkeypatch.setattr(linalg.scipy.linalg, "eigh", lambda A, *a, **k: calls.append(A.shape) or eigh(A, *a, **k))
    model = MTCMRL(n_clusters=3, row_space=False, max_iter=0, random_state=0)
    M, _, space, factors, seeding = model._prepare(tasks, row_space=False)
    assert space is None and calls == [(40, 40)] * 3  # one per task
    for X, factor, C in zip(tasks, factors, seeding):
        alone = mtcmrl.RidgeFactor(X)
        np.testing.assert_array_equal(factor.U, alone.U)
        np.testing.assert_array_equal(factor.s, alone.s)
        np.testing.assert_array_equal(C, kmeans_coordinates(X))
