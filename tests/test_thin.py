"""thin_product (mtc.numerics.thin): A @ B to the bit, by whichever route its probe chose, the
probe's answer borne out on other operands, and whole MTCMRL, S-MKC, SNMF and SMT-NMF fits that
use it equal to the bit to fits through the literal A @ B."""

import numpy as np
import pytest
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

import mtc.methods.mtcmrl as mtcmrl
import mtc.methods.smtnmf as smtnmf
import mtc.numerics.kernels as kernels
import mtc.numerics.snmf as snmf
import mtc.numerics.thin as thin
from mtc.data.synthetic import make_synthetic
from mtc.methods import MTCMRL, SMTNMF, SymmetricNMF
from mtc.methods.mkc import SMKC
from mtc.numerics.thin import memory_order, thin_product, transposed_agrees

# (rows, inner, columns): the solvers' shapes (a 20NG task's ridge factor, a kernel slice)
# and shapes where this machine's OpenBLAS gave other bits on the transposed operands
# (small products, 16 columns)
SHAPES = [(1336, 1330, 4), (1336, 1330, 3), (2000, 1003, 10), (500, 500, 2), (300, 300, 16), (200, 401, 16),
          (50, 50, 3), (700, 1401, 5)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", SHAPES)
def test_thin_product_is_the_literal_product_to_the_bit(shape, threads):
    rows, inner, columns = shape
    rng = np.random.default_rng(7)
    A, B = rng.random((rows, inner)), rng.standard_normal((inner, columns))
    with threadpool_limits(threads, user_api="blas"):
        for left, right in ((A, B), (np.asfortranarray(A), B), (A[:, 10:], B[10:]), (A, np.asfortranarray(B))):
            product = thin_product(left, right)
            assert np.array_equal(product, left @ right)
            assert product.flags.c_contiguous  # as A @ B's, so sums over it run in the same order


@pytest.mark.parametrize("shape", SHAPES)
def test_the_probes_answer_holds_for_other_operands_of_its_shape(shape):
    """The probe ran on the first A of its key and a seed-0 B; other operands of the same shape
    and order agree to the bit exactly when the probe said so (a route that sums in another
    order shows it)."""
    rows, inner, columns = shape
    rng = np.random.default_rng(5)
    for order in ("C", "F"):
        with threadpool_limits(1, user_api="blas"):
            said = transposed_agrees(np.asarray(rng.random((rows, inner)), order=order), columns, "C")
            A = np.asarray(rng.standard_normal((rows, inner)), order=order)
            B = rng.standard_normal((inner, columns))
            assert said == np.array_equal(A @ B, (B.T @ A.T).T)


def test_an_a_whose_sums_ignore_their_order_is_no_evidence():
    """A zero A or a permutation (one non-zero a row) gives the same bits by any route, so it
    leaves the key unprobed and takes the literal route; the next generic A probes it."""
    shape, columns = (1201, 1199), 4
    thin._probed.clear()
    B = np.random.default_rng(1).random((shape[1], columns))
    for A in (np.zeros(shape), np.eye(*shape)[np.random.default_rng(2).permutation(shape[0])]):
        assert not transposed_agrees(A, columns, "C") and not thin._probed
        assert np.array_equal(thin_product(A, B), A @ B)
    transposed_agrees(np.random.default_rng(3).random(shape), columns, "C")
    assert len(thin._probed) == 1


@pytest.mark.parametrize("threads", [1, 2])
def test_a_generic_a_of_every_shape_is_evidence(threads):
    """The probe's own regrouping of the sums (the first term last) is never the BLAS's
    blocking, so a random A is never taken for an order-blind one: every key is probed once.
    (Split in halves, a 200 x 401 A was order-blind on a machine whose OpenBLAS splits sums of
    401 terms at 200 on one thread and 201 on two: probed on every call.)"""
    rng = np.random.default_rng(4)
    with threadpool_limits(threads, user_api="blas"):
        for rows, inner, columns in SHAPES:
            thin._probed.clear()
            transposed_agrees(rng.random((rows, inner)), columns, "C")
            assert len(thin._probed) == 1, (rows, inner, columns)


def test_a_product_thin_product_does_not_route_is_the_plain_product():
    rng = np.random.default_rng(0)
    A = rng.random((40, 30))
    sparse = sp.random(40, 30, density=0.2, random_state=0, format="csr")
    for left, right in ((sparse, rng.random((30, 3))), (A, rng.random(30)), (A.astype(np.float32), rng.random((30, 3))),
                        (A.astype(int), np.ones((30, 2), dtype=int)), (A[:2], rng.random((30, 5)))):
        expected = left @ right
        result = thin_product(left, right)
        assert type(result) is type(expected) and np.array_equal(np.asarray(result), np.asarray(expected))


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_an_np_matrix_stays_an_np_matrix_where_the_probe_would_say_yes(monkeypatch):
    monkeypatch.setattr(thin, "transposed_agrees", lambda *args: True)
    rng = np.random.default_rng(0)
    A, B = rng.random((40, 30)), rng.random((30, 3))
    assert type(thin_product(A, B)) is np.ndarray  # the transposed route, as the probe says
    for left, right in ((np.asmatrix(A), B), (A, np.asmatrix(B))):
        result = thin_product(left, right)
        assert type(result) is np.matrix and np.array_equal(result, left @ right)


def test_orders_are_told_apart():
    A = np.zeros((6, 4))
    assert (memory_order(A), memory_order(np.asfortranarray(A)), memory_order(A[:, ::2])) == ("C", "F", "")


def literal(A, B):
    return A @ B


def fitted(estimator, matrices):
    with threadpool_limits(1, user_api="blas"):
        estimator.fit(matrices)
    return estimator


@pytest.mark.parametrize("make, modules", [
    (lambda: MTCMRL(n_clusters=4, alpha=4.0, lambda_=2.0, max_iter=15, tol=0.0, random_state=0), [mtcmrl]),
    (lambda: MTCMRL(n_clusters=4, alpha=4.0, lambda_=2.0, max_iter=15, tol=0.0, row_space=True, random_state=0),
     [mtcmrl]),
    (lambda: SMKC(n_clusters=4, lambda_=0.5, max_iter=15, random_state=0), [kernels]),
    (lambda: SymmetricNMF(n_clusters=4, affinity="gaussian", route="dense", max_iter=30, tol=0.0, random_state=0), [snmf]),
    (lambda: SMTNMF(n_clusters=4, route="dense", max_iter=30, tol=0.0, random_state=0), [smtnmf]),
], ids=["MTCMRL", "MTCMRL-row-space", "S-MKC", "SNMF", "SMT-NMF"])
def test_fits_through_thin_products_equal_fits_through_the_literal_product(make, modules, monkeypatch):
    """Documents-like tasks (d > n, non-negative, sparse), where this machine takes the
    transposed route: MTCMRL's ridge factor, data and similarity products (on the data and in
    the row space's dense coordinates), S-MKC's union kernel's column slices, SNMF's dense
    affinity and SMT-NMF's dense W."""
    data = make_synthetic(n_tasks=3, n_clusters=4, n_shared=2, samples_per_cluster=150, n_features=1000,
                          support=30, seed=1)
    matrices = [np.where(X > 1.5, X, 0.0) for X in data.matrices]  # SMT-NMF's bipartite graph needs shared terms
    thin._probed.clear()
    fast = fitted(make(), matrices)
    taken = [key for key, agrees in thin._probed.items() if agrees]
    if not taken:
        pytest.skip("this BLAS gives other bits on the transposed operands at every shape of these fits")
    for module in modules:
        monkeypatch.setattr(module, "thin_product", literal)
    plain = fitted(make(), matrices)
    assert np.array_equal(fast.objective_trace_, plain.objective_trace_)
    assert all(np.array_equal(a, b) for a, b in zip(fast.labels_, plain.labels_))
    assert len(fast.objective_trace_) > 3
