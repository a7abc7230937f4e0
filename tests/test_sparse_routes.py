"""Routes that never form an n x n affinity (issue 32, part 3): each exact implicit route gives
the dense route's fit to rounding, "auto" picks it for large sparse input, a fit on two sparse
30,000 x 2,000 tasks stays far below n^2 x 8 bytes, and the approximate knn route is sparse."""

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from mtc.errors import InputError
from mtc.methods.mtcmrl import MTCMRL, RidgeFactor
from mtc.methods.smtnmf import SMTNMF, BipartiteAffinity, SMTNMFNoBalance, bipartite_affinity, multitask_affinity
from mtc.methods.snmf import PooledSymmetricNMF, SymmetricNMF
from mtc.methods.spectral import NormalizedCut, PooledNormalizedCut
from mtc.numerics.affinity import (IMPLICIT_MIN_SAMPLES, CosineProduct, cosine_affinity, cosine_operator, knn_affinity,
                                   uses_implicit)


def planted(n, d=240, k=4, seed=0):
    """Sparse non-negative rows: light noise plus a heavy term from the row's cluster's block."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(k, size=n)
    noise = sp.random(n, d, density=0.03, random_state=seed, format="csr")
    terms = labels * (d // k) + rng.integers(d // k // 2, size=n)
    return (noise + sp.csr_matrix((np.full(n, 3.0), (np.arange(n), terms)), shape=(n, d))).tocsr()


@pytest.fixture(scope="module")
def tasks():
    return [planted(180, seed=1), planted(150, seed=2)]


def assert_same_fit(dense, implicit, rtol=1e-10):
    np.testing.assert_allclose(implicit.objective_trace_, dense.objective_trace_, rtol=rtol)
    for a, b in zip(dense.labels_, implicit.labels_):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("cls", [SymmetricNMF, PooledSymmetricNMF])
@pytest.mark.parametrize("update", ["sqrt", "plain", "quarter", "hals"])
def test_snmf_implicit_route_gives_the_dense_iterates(tasks, cls, update):
    fits = [cls(n_clusters=[4, 4], update=update, tol=0, max_iter=60, route=route, random_state=3).fit(tasks)
            for route in ("dense", "implicit")]
    assert fits[0].n_iter_ == fits[1].n_iter_ == 60
    assert_same_fit(*fits)


@pytest.mark.parametrize("cls", [NormalizedCut, PooledNormalizedCut])
def test_ncut_implicit_route_gives_scikit_learns_labels_and_cut(tasks, cls):
    fits = [cls(n_clusters=[4, 4], route=route, random_state=5).fit(tasks) for route in ("dense", "implicit")]
    assert_same_fit(*fits)
    assert 0 < fits[0].objective_trace_[0] < 4


def smtnmf_pair(cls, tasks, **params):
    """20 iterations: the paper's adaptive alpha (Eq. 4.32) amplifies rounding for a while
    (relative gaps of 1e-14 at 5 iterations, 1e-10 around 25-30, 1e-12 again at 60)."""
    return [cls(n_clusters=4, max_iter=20, route=route, random_state=2, **params).fit(tasks)
            for route in ("dense", "implicit")]


@pytest.mark.parametrize("params", [{}, {"normalize": "sym"}, {"self_loops": True, "lambda_inter": 0.2},
                                    {"update": "quarter_split", "alpha": 0.5}])
def test_smtnmf_implicit_route_gives_the_dense_iterates(tasks, params):
    dense, implicit = smtnmf_pair(SMTNMF, tasks, **params)
    assert_same_fit(dense, implicit)
    np.testing.assert_allclose(implicit.V_, dense.V_, rtol=1e-10, atol=1e-12 * np.abs(dense.V_).max())
    np.testing.assert_allclose(implicit.alpha_trace_, dense.alpha_trace_, rtol=1e-10)
    np.testing.assert_allclose(implicit.affinity_blocks_, dense.affinity_blocks_, rtol=1e-12)


def test_smtnmf_no_balance_implicit_route_gives_the_dense_iterates(tasks):
    assert_same_fit(*smtnmf_pair(SMTNMFNoBalance, tasks))


@pytest.mark.parametrize("lambdas, normalize, self_loops", [((1.0, 0.5), "none", False), ((2.0, 0.0), "sym", True),
                                                            ((1.0, 1.0), "sym", False)])
def test_bipartite_products_norm_and_rows_are_the_dense_ones(tasks, lambdas, normalize, self_loops):
    D, bounds = sp.vstack(tasks, format="csr"), np.array([0, 180, 330])
    W = multitask_affinity(bipartite_affinity(D, self_loops), bounds, *lambdas, normalize)
    operator = BipartiteAffinity(D, bounds, *lambdas, normalize, self_loops)
    V = np.random.default_rng(0).random((330, 3))
    np.testing.assert_allclose(operator @ V, W @ V, rtol=1e-12, atol=1e-12 * np.abs(W @ V).max())
    assert operator.squared_norm() == pytest.approx(float(np.sum(W * W)), rel=1e-12)
    np.testing.assert_array_equal(operator.nonzero_rows(), (W != 0).any(axis=1))


def test_cosine_product_norm_and_diagonal_without_an_n_by_n_array():
    X = sp.random(400, 30, density=0.2, random_state=1, format="csr")
    operator, M = CosineProduct(X), cosine_affinity(X)
    assert operator.squared_norm() == pytest.approx(float(np.sum(M * M)), rel=1e-12)  # from the 30 x 30 Gram
    np.testing.assert_allclose(operator.diagonal(), np.diag(M), atol=1e-12)
    assert operator.max() == pytest.approx(M.max(), rel=1e-12)
    dense_rows = np.abs(np.random.default_rng(0).normal(size=(200, 10)))  # non-negative, d <= n / 4
    assert isinstance(cosine_operator(dense_rows), CosineProduct)


def test_ridge_factor_of_tall_data_solves_from_the_feature_gram():
    """n > d: the SVD from X'X (d x d) instead of XX' (n x n); same ridge solutions."""
    X = sp.random(500, 40, density=0.3, random_state=4, format="csr")
    factor = RidgeFactor(X)
    assert factor.V.shape == (40, 40) and factor.U is None
    B, c = np.random.default_rng(1).random((40, 3)), np.array([0.5, 1.0, 2.0])
    dense = X.toarray()
    expected = np.column_stack([np.linalg.solve(2.0 * dense.T @ dense + cj * np.eye(40), B[:, j])
                                for j, cj in enumerate(c)])
    np.testing.assert_allclose(factor.solve(2.0, c, B), expected, rtol=1e-9, atol=1e-12)


def test_auto_route_is_implicit_for_large_sparse_cosine_only():
    big = sp.random(IMPLICIT_MIN_SAMPLES, 50, density=0.05, format="csr", random_state=0)
    assert uses_implicit(big, "cosine", "auto")
    assert not uses_implicit(big[:IMPLICIT_MIN_SAMPLES - 1], "cosine", "auto")
    assert not uses_implicit(big, "gaussian", "auto") and not uses_implicit(big.toarray(), "cosine", "auto")
    assert uses_implicit(big[:10], "cosine", "implicit") and not uses_implicit(big, "cosine", "dense")


@pytest.mark.parametrize("cls", [SymmetricNMF, NormalizedCut])
def test_implicit_route_of_the_gaussian_affinity_is_refused_in_one_line(tasks, cls):
    with pytest.raises(InputError, match=r"^route='implicit' is exact only for the cosine affinity, not 'gaussian': "
                                         r"use route='dense' or the approximate route='knn'$"):
        cls(n_clusters=[4, 4], affinity="gaussian", route="implicit").fit(tasks)


@pytest.mark.parametrize("kind", ["cosine", "gaussian"])
def test_knn_affinity_is_sparse_symmetric_and_keeps_the_nearest_entries(tasks, kind):
    X = tasks[0]
    M = knn_affinity(X, kind, n_neighbors=5)
    assert sp.issparse(M) and (abs(M - M.T)).max() == 0
    assert 6 <= np.diff(M.indptr).min() and M.nnz <= 2 * 6 * X.shape[0]
    if kind == "cosine":
        dense = cosine_affinity(X)
        np.testing.assert_allclose(M.data, dense[M.nonzero()], atol=1e-12)  # kept entries are exact
        row = dense[0].copy()
        assert M[0].toarray().ravel()[np.argsort(row)[-6:]].min() > 0  # the 5 nearest and itself


def test_knn_route_clusters_the_planted_tasks(tasks):
    fit = SymmetricNMF(n_clusters=[4, 4], route="knn", n_neighbors=15, random_state=0).fit(tasks)
    for X, labels in zip(tasks, fit.labels_):
        assert len(np.unique(labels)) == 4


N_LARGE, D_LARGE = 30_000, 2_000


@pytest.fixture(scope="module")
def large_tasks():
    return [sp.random(N_LARGE, D_LARGE, density=0.01, random_state=seed, format="csr") for seed in (1, 2)]


@pytest.mark.parametrize("make", [lambda: SymmetricNMF(n_clusters=[4, 4], max_iter=2),
                                  lambda: NormalizedCut(n_clusters=[4, 4], n_init=1),
                                  lambda: SMTNMF(n_clusters=4, max_iter=2),
                                  lambda: MTCMRL(n_clusters=[4, 4], max_iter=1)],
                         ids=["snmf", "ncut", "smtnmf", "mtcmrl"])
def test_defaults_on_two_sparse_30000_by_2000_tasks_never_allocate_an_n_by_n_matrix(large_tasks, make):
    tracemalloc.start()
    try:
        make().set_params(random_state=0).fit(large_tasks)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < N_LARGE**2 * 8 / 10  # 720 MB; a dense affinity is 7.2 GB per task
