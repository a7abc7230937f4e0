import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from mtc.cli import CONF_DIR
from mtc.config import data_spec
from mtc.data.synthetic import make_synthetic
from mtc.methods import MTCMRL, SNMFLR
from mtc.methods.simplex import G_SOLVERS, project_rows_to_simplex, rowwise_objective, solve_simplex_rows
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
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        dataset = data_spec(compose(config_name="config", overrides=["data=reuters"])).load()
    exact = MTCMRL(n_clusters=dataset.n_clusters, lambda_=1.0, alpha=1.0, random_state=0).fit(dataset.matrices)
    assert exact.converged_ and exact.n_iter_ > 5
    assert nondecreasing_steps(exact.objective_trace_) == 0
    printed = MTCMRL(n_clusters=dataset.n_clusters, lambda_=1.0, alpha=1.0, w_update="paper", y_update="paper",
                     stopping="relative", tol=0, max_iter=30, random_state=0).fit(dataset.matrices)
    assert nondecreasing_steps(printed.objective_trace_) > 0  # DESIGN.md "Numerics": Eq. 19 is not a descent step


def test_snmf_lr_is_mtcmrl_without_cross_task_terms(planted):
    single = SNMFLR(n_clusters=4, random_state=3).fit(planted.matrices)
    zero = MTCMRL(n_clusters=4, alpha=0.0, beta=0.0, random_state=3).fit(planted.matrices)
    assert single.G_ == {} and single.cluster_relatedness() == {}
    np.testing.assert_allclose(single.objective_trace_, zero.objective_trace_)
    assert "alpha" not in SNMFLR().get_params()


def test_shared_clusters_are_most_related_after_mapping_to_classes():
    dataset = make_synthetic(n_tasks=2, n_clusters=4, n_shared=2, seed=0)
    outcome = run_trial(dataset, "mtcmrl", {"alpha": 1.0}, seed=0)
    assert outcome.metrics["acc/mean"] == 1.0
    G = outcome.relatedness[(0, 1)]
    assert outcome.cluster_names == [["shared0", "shared1", "task0_own0", "task0_own1"],
                                     ["shared0", "shared1", "task1_own0", "task1_own1"]]
    for i in (0, 1):  # a shared cluster's most related cluster is the same shared cluster
        assert np.argmax(G[i]) == i
    assert set(outcome.diagnostics) == {"w_norm/task0", "w_norm/task1"}


@pytest.mark.parametrize("params, message", [
    ({"lambda_": 0.0}, "MTCMRL needs lambda_ > 0"),
    ({"alpha": -1.0}, "alpha >= 0"),
    ({"g_solver": "cvx"}, "unknown g_solver 'cvx'"),
    ({"w_solver": "lu"}, "unknown w_solver 'lu'"),
    ({"y_update": "fast"}, "unknown y_update 'fast'"),
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
    np.testing.assert_allclose(fits[0].objective_trace_, fits[1].objective_trace_, rtol=1e-9)
    for W_reduced, W_full in zip(fits[0].W_, fits[1].W_):
        assert W_reduced.shape == W_full.shape == (planted.n_features, 4)
        np.testing.assert_allclose(W_reduced, W_full, rtol=1e-7, atol=1e-9)


def test_seed_independent_preparation_is_memoised_and_leaves_the_input_writable(planted):
    from mtc.methods import mtcmrl as module
    from mtc.methods.memo import Memo

    calls = []
    original = MTCMRL._prepare

    def counting(self, matrices):
        calls.append(1)
        return original(self, matrices)

    module._PREPARED = Memo(size=1)
    MTCMRL._prepare = counting
    try:
        first = MTCMRL(n_clusters=4, random_state=3).fit(planted.matrices)
        again = MTCMRL(n_clusters=4, alpha=2.0, random_state=3).fit(planted.matrices)
        MTCMRL(n_clusters=4, random_state=3).fit(planted.matrices)
    finally:
        MTCMRL._prepare = original
    assert len(calls) == 1  # another alpha and a repeat reused the preparation
    assert not np.array_equal(first.objective_trace_, again.objective_trace_)
    module._PREPARED = Memo(size=1)
    fresh = MTCMRL(n_clusters=4, random_state=3).fit(planted.matrices)
    np.testing.assert_array_equal(first.objective_trace_, fresh.objective_trace_)
    assert all(X.flags.writeable for X in planted.matrices)
    MTCMRL(n_clusters=4, row_space=False, random_state=3).fit(planted.matrices)
    assert all(X.flags.writeable for X in planted.matrices)
