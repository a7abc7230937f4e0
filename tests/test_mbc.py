"""MBC and S-MBC (AAAI-13): the EMD, the re-derived centroid update, the smart rule, and the
checked statements of ../shared/specs/mbc_family.md, each verified here."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from mtc.data.synthetic import make_synthetic
from mtc.methods.mbc import MBC
from mtc.metrics import accuracy
from mtc.numerics.affinity import row_norms_sq, squared_distances
from mtc.numerics.transport import cluster_marginal, emd


def emd_by_linprog(cost, a, b):
    """Eq. 2 literally: the LP with row sums a and column sums b (scipy's HiGHS)."""
    c_t, c_s = cost.shape
    rows = np.kron(np.eye(c_t), np.ones((1, c_s)))
    cols = np.kron(np.ones((1, c_t)), np.eye(c_s))
    result = linprog(cost.ravel(), A_eq=np.vstack([rows, cols]), b_eq=np.concatenate([a, b]), bounds=(0, None),
                     method="highs")
    assert result.status == 0
    return result.x.reshape(c_t, c_s), result.fun


@pytest.mark.parametrize("seed", range(12))
def test_pot_equals_the_linear_program(seed):
    rng = np.random.default_rng(seed)
    c_t, c_s = rng.integers(2, 17, size=2)
    cost = rng.random((c_t, c_s)) * 3
    for kind in ("uniform", "proportions"):
        a = cluster_marginal(rng.integers(c_t, size=40), c_t, kind)  # proportions may have zero bins
        b = cluster_marginal(rng.integers(c_s, size=25), c_s, kind)
        plan, value = emd(cost, a, b)
        _, reference = emd_by_linprog(cost, a, b)
        assert value == pytest.approx(reference, abs=1e-10)  # compare costs: optimal plans can tie
        np.testing.assert_allclose(plan.sum(axis=1), a, atol=1e-12)
        np.testing.assert_allclose(plan.sum(axis=0), b, atol=1e-12)
        assert (plan >= 0).all()
        _, transposed = emd(cost.T, b, a)
        assert transposed == pytest.approx(value, abs=1e-12)  # W^st = W^ts' has the same cost


def test_figure_1_relation_has_the_papers_cost():
    task_a = np.array([[0.0, 1.0], [0.0, -1.0], [-1.0, 0.0]])  # clusters a, b, c
    task_b = np.array([[0.0, 1.0], [0.0, -1.0], [1.0, 0.0]])  # clusters a, b, d
    cost = squared_distances(task_a, task_b)
    printed = np.array([[16, 0, 9], [0, 16, 9], [9, 9, 7]]) / 75  # Eq. 4
    np.testing.assert_allclose(printed.sum(axis=0), 1 / 3)
    np.testing.assert_allclose(printed.sum(axis=1), 1 / 3)
    plan, value = emd(cost, np.full(3, 1 / 3), np.full(3, 1 / 3))
    assert np.sum(printed * cost) == pytest.approx(4 / 3) and value == pytest.approx(4 / 3)  # a tied optimum


def total_objective(model, matrices, labels, centroids, plans, lam):
    """T J of Eq. 1 at fixed H and W (uniform marginals), for the finite-difference check."""
    T = len(matrices)
    value = sum(np.mean(np.sum((np.asarray(X) - M[h]) ** 2, axis=1)) for X, M, h in zip(matrices, centroids, labels))
    pairs = sum(np.sum(plans[(t, s)] * squared_distances(centroids[t], centroids[s]))
                for t in range(T) for s in range(T) if s != t)
    return value + lam / (T - 1) * pairs


def test_the_centroid_update_is_stationary_for_the_objective():
    """Eq. 3 re-derived: with H and W fixed, M^t is where the gradient of T J in M^t vanishes."""
    data = make_synthetic(n_tasks=3, n_clusters=3, n_shared=1, samples_per_cluster=8, n_features=4, support=4, seed=3)
    matrices, k, lam = data.matrices, data.n_clusters, 0.7
    rng = np.random.default_rng(0)
    labels = [rng.integers(3, size=X.shape[0]) for X in matrices]
    centroids = [rng.normal(size=(3, 4)) for _ in matrices]
    model = MBC(lambda_=lam)
    plans, _ = model._transport(centroids, labels, k)
    t = 1
    centroids[t] = model._centroids(t, matrices[t], labels[t], 3, centroids[t], centroids, plans, lam)
    step, gradient = 1e-6, np.zeros((3, 4))
    for z in range(3):
        for j in range(4):
            shifted = [M.copy() for M in centroids]
            shifted[t][z, j] += step
            up = total_objective(model, matrices, labels, shifted, plans, lam)
            shifted[t][z, j] -= 2 * step
            down = total_objective(model, matrices, labels, shifted, plans, lam)
            gradient[z, j] = (up - down) / (2 * step)
    assert np.abs(gradient).max() < 1e-6


def lloyd(X, labels, k, iterations):
    """Plain k-means from given labels: the lambda = 0 reference."""
    trace = []
    x_sq = row_norms_sq(X)
    M = np.vstack([X[labels == z].mean(axis=0) for z in range(k)])
    trace.append(np.mean(np.sum((X - M[labels]) ** 2, axis=1)))
    for _ in range(iterations):
        labels = np.argmin(squared_distances(X, M, x_sq), axis=1)
        trace.append(np.mean(np.sum((X - M[labels]) ** 2, axis=1)))
        M = np.vstack([X[labels == z].mean(axis=0) if np.any(labels == z) else M[z] for z in range(k)])
    return labels, np.array(trace)


def test_lambda_zero_is_k_means_for_mbc_and_smbc():
    data = make_synthetic(n_tasks=2, n_clusters=3, n_shared=1, samples_per_cluster=20, separation=1.0, seed=4)
    fits = [MBC(n_clusters=3, lambda_=0.0, smart=smart, tol=0, max_iter=8, random_state=5).fit(data.matrices)
            for smart in (False, True)]
    np.testing.assert_array_equal(fits[0].objective_trace_, fits[1].objective_trace_)
    start = np.random.default_rng(5)
    initial = [start.integers(3, size=X.shape[0]) for X in data.matrices]
    for t, X in enumerate(data.matrices):
        labels, trace = lloyd(X, initial[t], 3, fits[0].n_iter_)
        for fit in fits:
            np.testing.assert_array_equal(fit.labels_[t], labels)
            np.testing.assert_allclose(fit.local_loss_trace_[:, t], trace, rtol=1e-12)


@pytest.fixture(scope="module")
def noisy():
    data = make_synthetic(n_tasks=3, n_clusters=4, n_shared=2, samples_per_cluster=25, separation=1.2, seed=7)
    return data.matrices


def rises(trace):
    return int(np.sum(np.diff(trace) > 1e-12 * abs(trace[0])))


def test_mbc_with_uniform_marginals_never_raises_its_objective(noisy):
    total = sum(rises(MBC(n_clusters=4, lambda_=1.0, tol=0, max_iter=30, random_state=seed).fit(noisy).objective_trace_)
                for seed in range(30))
    assert total == 0


def test_mbc_with_proportion_marginals_can_raise_it(noisy):
    total = sum(rises(MBC(n_clusters=4, lambda_=1.0, marginals="proportions", tol=0, max_iter=30,
                          random_state=seed).fit(noisy).objective_trace_) for seed in range(30))
    assert total > 0


def test_smart_parallel_never_raises_j_st_and_uses_both_branches(noisy):
    kept = []
    for seed in range(20):
        fit = MBC(n_clusters=4, lambda_=0.1, smart=True, tol=0, max_iter=30, random_state=seed).fit(noisy)
        assert rises(fit.objective_trace_) == 0
        np.testing.assert_allclose(fit.objective_trace_, fit.local_loss_trace_.mean(axis=1))  # J_st
        kept.append(fit.branch_trace_)
    kept = np.concatenate(kept)
    # both candidates win sometimes; the multi-task one rarely (1 of 342 task steps here, none
    # at lambda >= 0.5: docs/results/mbc.md)
    assert 0 < kept.mean() < 1


def test_smart_sequential_single_task_candidate_is_never_worse(noisy):
    for seed in range(10):
        fit = MBC(n_clusters=4, lambda_=1.0, smart=True, candidates="sequential", tol=0, max_iter=20,
                  random_state=seed).fit(noisy)
        assert (fit.candidate_gap_trace_ >= -1e-12).all()  # J2 <= J1 at every step
        assert (fit.branch_trace_[fit.candidate_gap_trace_ > 1e-12] == 0).all()


@pytest.mark.parametrize("smart", [False, True])
def test_planted_clusters_recovered_and_relations_recorded(smart):
    data = make_synthetic(n_tasks=2, n_clusters=3, n_shared=2, samples_per_cluster=30, seed=2)
    fit = MBC(n_clusters=3, lambda_=0.5, smart=smart, init="kmeans++", random_state=1).fit(data.matrices)
    assert [accuracy(task.y, labels) for task, labels in zip(data.tasks, fit.labels_)] == [1.0, 1.0]
    W = fit.record_.matrices["W"]
    assert sorted(W.blocks) == [(0, 1), (1, 0)] and W.rows == W.cols == "cluster"
    np.testing.assert_allclose(W.blocks[(1, 0)], W.blocks[(0, 1)].T)
    np.testing.assert_allclose(W.blocks[(0, 1)].sum(axis=1), 1 / 3)
    # the shared clusters are related to each other: their mass goes to the same shared class
    shared = [np.bincount(labels[task.y == 0], minlength=3).argmax() for task, labels in zip(data.tasks, fit.labels_)]
    assert W.blocks[(0, 1)][shared[0], shared[1]] == pytest.approx(1 / 3)


def test_sparse_documents_and_one_task():
    rng = np.random.default_rng(0)
    X = sp.random(40, 30, density=0.2, random_state=1, format="csr")
    fit = MBC(n_clusters=[3, 2], smart=True, random_state=0).fit([X, sp.csr_matrix(rng.random((20, 30)))])
    assert [len(l) for l in fit.labels_] == [40, 20] and np.isfinite(fit.objective_trace_).all()
    single = MBC(n_clusters=3, lambda_=0.9, random_state=0).fit([X])  # no pairs: plain k-means
    assert single.W_ == {} and "W" not in single.record_.matrices


def test_bad_parameters_are_rejected():
    X = [np.ones((5, 2))]
    for params, message in [({"lambda_": -0.1}, "The 'lambda_' parameter of MBC"),
                            ({"marginals": "sizes"}, "The 'marginals' parameter of MBC"),
                            ({"candidates": "both"}, "The 'candidates' parameter of MBC"),
                            ({"init": "kmeans"}, "The 'init' parameter of MBC")]:
        with pytest.raises(ValueError, match=message):
            MBC(**params).fit(X)
