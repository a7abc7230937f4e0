"""The shared numerics layer: stacking, seeding, distances, the explicit cache."""

import os

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.metrics.pairwise import cosine_similarity

from mtc.methods import MTCMRL
from mtc.numerics.affinity import squared_distances
from mtc.numerics.cache import Cache, cached
from mtc.numerics.linalg import gram_svd, row_dots, row_space_coordinates, row_sums
from mtc.numerics.seeding import indicator, initial_indicator
from mtc.numerics.stacking import row_counts, split_rows, stack_rows


@pytest.mark.parametrize("sparse", [False, True])
def test_stack_and_split_round_trip(sparse):
    rng = np.random.default_rng(0)
    tasks = [rng.random((n, 4)) for n in (3, 5, 2)]
    tasks = [sp.csr_matrix(X) for X in tasks] if sparse else tasks
    stacked = stack_rows(tasks)
    assert stacked.shape == (10, 4) and sp.issparse(stacked) == sparse
    for part, X in zip(split_rows(stacked, row_counts(tasks)), tasks):
        np.testing.assert_array_equal(part.toarray() if sparse else part, X.toarray() if sparse else X)


def test_squared_distances_match_the_definition():
    rng = np.random.default_rng(1)
    A, B = rng.normal(size=(6, 3)), rng.normal(size=(4, 3))
    expected = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(squared_distances(A, B), expected, atol=1e-12)
    assert (squared_distances(A) >= 0).all() and np.allclose(np.diag(squared_distances(A)), 0, atol=1e-12)


def test_row_space_coordinates_keep_inner_products():
    X = np.random.default_rng(2).random((5, 40))
    Z = row_space_coordinates(X)
    assert Z.shape[1] <= 5
    np.testing.assert_allclose(Z @ Z.T, X @ X.T, atol=1e-10)
    U, s = gram_svd(X)
    np.testing.assert_allclose(np.sort(s), np.sort(np.linalg.svd(X, compute_uv=False)), rtol=1e-8)


@pytest.mark.parametrize("columns", [*range(1, 20), 31, 64, 100, 127, 128, 129, 130])
def test_row_sums_by_columns_are_numpys_row_sums_to_the_bit(columns):
    """Every row sum of widely spread terms (so any other order of additions shows), rows of
    negative zeros (+0, as numpy's), an F-ordered view and float32 equal np.sum(A, axis=1) bit
    for bit; products likewise for row_dots."""
    rng = np.random.default_rng(columns)
    A = rng.standard_normal((4000, columns)) * np.exp(5 * rng.standard_normal((4000, columns)))
    A[:3] = -0.0
    B = rng.standard_normal((4000, columns))
    for a in (A, np.asfortranarray(A), A[::2], A.astype(np.float32)):
        got, want = row_sums(a), np.sum(a, axis=1)
        assert got.dtype == want.dtype
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8))
    assert np.array_equal(row_dots(A, B).view(np.uint8), np.sum(A * B, axis=1).view(np.uint8))
    assert columns < 3 or not np.array_equal(np.sum(np.roll(A, 1, axis=1), axis=1), np.sum(A, axis=1))  # order shows


def test_dense_gram_by_row_blocks_equals_the_product(monkeypatch):
    """Above SYRK_ROWS rows X X' is taken by row blocks (numpy's SYRK route crashes OpenBLAS on
    large products): the same matrix, symmetric, to rounding; up to it, numpy's own product."""
    from mtc.numerics import linalg

    X = np.random.default_rng(3).random((50, 7))
    assert np.array_equal(linalg.dense_gram(X), X @ X.T)
    monkeypatch.setattr(linalg, "SYRK_ROWS", 10)
    monkeypatch.setattr(linalg, "GRAM_BLOCK_BYTES", 8 * 50 * 6)  # blocks of 6 rows, the last one of 2
    blocked = linalg.dense_gram(X)
    np.testing.assert_allclose(blocked, X @ X.T, rtol=1e-13)
    np.testing.assert_allclose(blocked, blocked.T, rtol=1e-13)
    U, s = gram_svd(X)  # 50 rows: by blocks
    np.testing.assert_allclose(np.sort(s), np.sort(np.linalg.svd(X, compute_uv=False)), rtol=1e-8)
    assert linalg.dense_gram(X.astype(np.float32)).dtype == np.float32
    # the affinities that take X X' do so by blocks above SYRK_ROWS rows: the same matrices as scikit-learn's
    from sklearn.metrics.pairwise import cosine_similarity, euclidean_distances

    from mtc.numerics import affinity

    monkeypatch.setattr(affinity, "SYRK_ROWS", 10)
    np.testing.assert_allclose(affinity.squared_distances(X), euclidean_distances(X, squared=True), atol=1e-12)
    np.testing.assert_allclose(affinity.cosine_affinity(X), np.maximum(cosine_similarity(X), 0.0), atol=1e-14)
    D2 = euclidean_distances(X, squared=True)
    np.testing.assert_allclose(affinity.gaussian_affinity(X, 1.0, "relative"),
                               np.exp(-D2 / (2.0 * affinity.median_positive(D2))), atol=1e-12)


def test_seedings_are_named_and_reproducible():
    X = np.vstack([np.zeros((5, 2)), np.ones((5, 2)) * 10])
    Y = initial_indicator(X, 2, np.random.default_rng(0), "kmeans", offset=0.2)
    assert sorted(np.unique(Y)) == [0.2, 1.2] and (Y.max(axis=1) == 1.2).all()
    assert len({tuple(Y[i]) for i in range(5)}) == 1 and not np.array_equal(Y[0], Y[-1])  # the two blobs
    R1, R2 = (initial_indicator(X, 3, np.random.default_rng(5), "random") for _ in range(2))
    np.testing.assert_array_equal(R1, R2)
    assert R1.shape == (10, 3) and R1.min() >= 0.2 and R1.max() < 1.2
    np.testing.assert_array_equal(indicator(np.array([1, 0]), 3), [[0, 1, 0], [1, 0, 0]])
    with pytest.raises(ValueError, match="unknown seeding 'spectral'"):
        initial_indicator(X, 2, np.random.default_rng(0), "spectral")


def test_cache_is_a_shared_handle_and_optional():
    cache = Cache()
    solver = MTCMRL(cache=cache)
    assert clone(solver).cache is cache  # clone shares the handle instead of copying what it keeps
    calls = []
    for _ in range(2):
        cached(cache, "step", "key", lambda: calls.append(1) or np.zeros(2))
    cached(None, "step", "key", lambda: calls.append(1) or np.zeros(2))
    assert len(calls) == 2  # once into the cache, once without one


def test_cosine_product_is_the_cosine_affinity_of_non_negative_sparse_rows():
    from mtc.numerics.affinity import CosineProduct, cosine_affinity, cosine_operator

    X = sp.random(50, 400, density=0.02, random_state=0, format="lil")
    X[3] = 0  # an empty row: cosine 0 to everything, as in cosine_similarity
    X = X.tocsr()
    operator = cosine_operator(X)
    assert isinstance(operator, CosineProduct)
    M, Y = cosine_affinity(X), np.random.default_rng(0).random((50, 3))
    np.testing.assert_allclose(operator @ Y, M @ Y, rtol=1e-12, atol=1e-14)
    assert operator.squared_norm() == pytest.approx(float(np.sum(M * M)), rel=1e-12)
    signed = X.copy()
    signed.data[0] = -signed.data[0]  # clipping would matter: the dense matrix is kept
    assert isinstance(cosine_operator(signed), np.ndarray)
    assert isinstance(cosine_operator(X.toarray()), np.ndarray)


@pytest.mark.parametrize("shift, expected", [(3.0, "no correction"), (1.5, "sparse correction"), (0.0, "dense")])
def test_cosine_operator_of_signed_narrow_rows_gives_the_clipped_cosine_products(shift, expected):
    """Rows of width d <= n / 4 (MTCFIR-nI on Handdigits' mSDA features): M Y = N (N'Y) + R Y,
    R the clipped negative cosines, kept sparse while at most MAX_NEGATIVE_SHARE of them;
    the shift moves the rows away from the origin, so fewer cosines are negative."""
    from mtc.numerics.affinity import MAX_NEGATIVE_SHARE, CosineProduct, cosine_affinity, cosine_operator
    from mtc.numerics.snmf import snmf

    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 6)) + shift
    M = cosine_affinity(X)
    negative_share = np.mean(cosine_similarity(X) < 0)
    operator = cosine_operator(X)
    if expected == "dense":
        assert negative_share > MAX_NEGATIVE_SHARE and isinstance(operator, np.ndarray)
        np.testing.assert_array_equal(operator, M)
        return
    assert isinstance(operator, CosineProduct)
    assert (operator.correction is None) == (expected == "no correction") == (negative_share == 0)
    if operator.correction is not None:
        assert 0 < operator.correction.nnz <= MAX_NEGATIVE_SHARE * 200**2 and operator.correction.data.min() > 0
    Y = rng.random((200, 4))
    np.testing.assert_allclose(operator @ Y, M @ Y, rtol=1e-12, atol=1e-12)
    assert operator.squared_norm() == pytest.approx(float(np.sum(M * M)), rel=1e-12)
    Y0 = rng.random((200, 4)) + 0.2
    (_, product), (_, dense) = (snmf(S, Y0, update="sqrt", tol=0, max_iter=80) for S in (operator, M))
    np.testing.assert_allclose(product.trace, dense.trace, rtol=1e-10)
    np.testing.assert_array_equal(product.labels, dense.labels)


def test_kmeans_labels_are_kept_by_data_k_and_drawn_seed_and_the_generator_moves_on_alike():
    from mtc.numerics.seeding import kmeans_labels

    X = np.random.default_rng(5).normal(size=(60, 4))
    cache = Cache(size=1)
    rngs = [np.random.default_rng(7) for _ in range(3)]
    plain = kmeans_labels(X, 3, rngs[0])
    first = kmeans_labels(X, 3, rngs[1], cache=cache)
    kept = cache.results["kmeans_labels"]
    again = kmeans_labels(X, 3, rngs[2], cache=cache)  # the same drawn seed: taken from the cache
    np.testing.assert_array_equal(plain, first)
    assert again is first and len(kept) == 1
    assert len({rng.integers(10**9) for rng in rngs}) == 1  # each generator drew the seed once
    kmeans_labels(X, 3, np.random.default_rng(8), cache=cache)
    kmeans_labels(X, 2, np.random.default_rng(7), cache=cache)
    kmeans_labels(X[:50], 3, np.random.default_rng(7), cache=cache)
    assert len(kept) == 4  # another seed, k or data: kept apart, beyond the cache's default size


def test_a_persisted_step_is_shared_through_its_folder_and_recomputed_when_unreadable(tmp_path, monkeypatch):
    """Two workers' caches with one folder: the second reads the first's k-means labels instead
    of running k-means; another k is another file; labels computed on two OpenMP threads (not
    repeatable to the bit) are kept in memory only; a damaged file, or one holding no valid
    labels, is computed again and rewritten; without a folder nothing is written."""
    from threadpoolctl import threadpool_limits

    from mtc.numerics import seeding

    X = np.random.default_rng(5).normal(size=(60, 4))
    with threadpool_limits(limits=1):
        first = seeding.kmeans_labels(X, 3, np.random.default_rng(7), cache=Cache(folder=tmp_path))
    files = sorted((tmp_path / "kmeans_labels").glob("*.npy"))
    assert len(files) == 1
    runs = []
    real = seeding.KMeans
    monkeypatch.setattr(seeding, "KMeans", lambda **kwargs: runs.append(kwargs) or real(**kwargs))
    with threadpool_limits(limits=1):
        second = seeding.kmeans_labels(X, 3, np.random.default_rng(7), cache=Cache(folder=tmp_path))
        assert runs == [] and not second.flags.writeable
        np.testing.assert_array_equal(first, second)
        seeding.kmeans_labels(X, 2, np.random.default_rng(7), cache=Cache(folder=tmp_path))
    assert len(runs) == 1 and len(list((tmp_path / "kmeans_labels").glob("*.npy"))) == 2
    with threadpool_limits(limits=2):
        two = Cache(folder=tmp_path)
        seeding.kmeans_labels(X, 3, np.random.default_rng(7), cache=two)
        seeding.kmeans_labels(X, 3, np.random.default_rng(7), cache=two)
    assert len(runs) == 2 and len(two.results["kmeans_labels"]) == 1  # computed, kept in memory, no file
    assert len(list((tmp_path / "kmeans_labels").glob("*.npy"))) == 2
    for damage in (b"not an array", None):
        if damage is None:
            np.save(files[0], np.full(60, 7))  # labels beyond k = 3
        else:
            files[0].write_bytes(damage)
        with threadpool_limits(limits=1):
            again = seeding.kmeans_labels(X, 3, np.random.default_rng(7), cache=Cache(folder=tmp_path))
        np.testing.assert_array_equal(again, first)
        np.testing.assert_array_equal(np.load(files[0]), first)
    assert len(runs) == 4
    seeding.kmeans_labels(X, 4, np.random.default_rng(7), cache=Cache(folder=None))
    assert len(list((tmp_path / "kmeans_labels").glob("*.npy"))) == 2 and not list(tmp_path.glob("**/*.tmp"))


def _persisted_step_in_a_worker(folder: str, log: str, start) -> None:
    """A worker asking for one persisted step at the moment ``start`` is set: its compute
    notes a line in ``log`` and takes a second."""
    import time as clock

    def compute():
        with open(log, "a") as handle:
            handle.write("computed\n")
        clock.sleep(1.0)
        return np.arange(5.0)

    start.wait()
    np.save(f"{log}.{os.getpid()}.npy", Cache(folder=folder).get("step", ("data", 3), compute, persist=True))


def test_workers_asking_for_one_persisted_step_at_once_compute_it_once(tmp_path):
    """Two worker processes ask for the same persisted result at the same moment: one computes
    it while the other waits on its lock file and reads it, the same array in both."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    start, log = context.Event(), tmp_path / "log"
    workers = [context.Process(target=_persisted_step_in_a_worker, args=(str(tmp_path / "steps"), str(log), start))
               for _ in range(2)]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(60)
    assert [worker.exitcode for worker in workers] == [0, 0]
    assert log.read_text() == "computed\n"
    results = [np.load(path) for path in sorted(tmp_path.glob("log.*.npy"))]
    assert len(results) == 2 and all(np.array_equal(result, np.arange(5.0)) for result in results)


def test_a_persisted_step_another_worker_is_computing_is_passed_over_without_waiting(tmp_path):
    """get(wait=False) on a result whose lock file another worker holds returns None at once
    and computes nothing; once the lock is free it computes and keeps the result as usual."""
    from filelock import FileLock

    cache, calls = Cache(folder=tmp_path), []

    def compute():
        calls.append(1)
        return np.arange(3.0)

    with FileLock(f"{cache.path('step', 'key')}.lock"):  # held by "another worker"
        assert cache.get("step", "key", compute, persist=True, wait=False) is None
        assert calls == [] and "key" not in cache.results["step"]
    np.testing.assert_array_equal(cache.get("step", "key", compute, persist=True, wait=False), np.arange(3.0))
    assert calls == [1] and cache.path("step", "key").exists()


def test_a_step_computed_inside_another_counts_as_its_own_seconds_not_the_outer_ones(monkeypatch):
    """compute_seconds is exclusive: the outer step's seconds leave out the inner step's, so the
    steps of a fit add up to the time spent computing them (benchmarks/study_profile.py sums
    them beside the rest of the fit). A clock advanced by the steps themselves."""
    from types import SimpleNamespace

    import mtc.numerics.cache as cache_module

    clock = [0.0]
    monkeypatch.setattr(cache_module, "time", SimpleNamespace(perf_counter=lambda: clock[0]))

    def spend(seconds, result):
        clock[0] += seconds
        return result

    cache = Cache()
    outer = cache.get("outer", 1, lambda: spend(2.0, cache.get("inner", 1, lambda: spend(5.0, np.ones(2))) + 1))
    cache.get("outer", 2, lambda: spend(1.0, cache.get("inner", 1, lambda: spend(5.0, np.ones(2)))))  # inner kept
    assert outer.tolist() == [2.0, 2.0]
    assert cache.compute_seconds == {"inner": 5.0, "outer": 3.0}
    assert sum(cache.compute_seconds.values()) == clock[0] == 8.0


def test_a_step_drops_its_oldest_result_before_computing_a_new_one():
    """At ``keep`` results, the least recently used is dropped before the next is computed, so
    two large results of a step (MTCFIR's relations) are never held at once."""
    cache, held = Cache(), []
    cache.get("step", "a", lambda: np.zeros(2), keep=1)
    cache.get("step", "b", lambda: held.append(list(cache.results["step"])) or np.ones(2), keep=1)
    assert held == [[]] and list(cache.results["step"]) == ["b"]
    for key in "cde":
        cache.get("other", key, lambda: np.zeros(1))
    assert list(cache.results["other"]) == ["d", "e"]  # the default size, 2


def test_the_seeding_coordinates_are_the_same_bits_on_one_and_two_blas_threads():
    """The k-means seeding's coordinates (an eigendecomposition for d > n) are computed on one
    BLAS thread whatever the caller's (mtc.numerics.seeding.seeding_svd): at 300 x 600 the
    eigendecomposition on two threads is other bits, and k-means on such coordinates gives other
    partitions (20NG: 6-9 of 10 seeds), so a fit's numbers would depend on its thread count."""
    from threadpoolctl import threadpool_limits

    from mtc.numerics.seeding import kmeans_coordinates

    X = sp.random(300, 600, density=0.05, random_state=0, format="csr")
    coordinates = []
    for threads in (1, 2):
        with threadpool_limits(limits=threads, user_api="blas"):
            coordinates.append(kmeans_coordinates(X))
    np.testing.assert_array_equal(*coordinates)
