import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics.pairwise import euclidean_distances

from mtc.config import method_configs
from mtc.data.synthetic import make_synthetic
from mtc.methods.base import PooledClusterer
from mtc.methods import LSSMTC, MBC, KernelKMeans, KMeansClusterer, SPMTCh, SymmetricNMF
from mtc.metrics import accuracy
from mtc.numerics.affinity import cosine_affinity, gaussian_affinity, median_positive, squared_distances
from mtc.numerics.snmf import hals_half_step, penalised_objective, penalty_weight, snmf

# Planted Gaussian clusters have signed, dense features: methods that need non-negative sparse
# data (SMT-NMF's term-sharing affinity) are tested on their own data in their test files.
METHODS = {name: cls for name, cls in method_configs().items() if not cls.input_needs}
# ASI read as LSSMTC's subspace term alone minimises ||XW - PM'|| over orthonormal W: it seeks
# the directions of least within-cluster spread (or null(X), or MALSAR's first l columns), not
# the ones that separate clusters, so it is not expected to recover planted clusters; its
# equivalences and degenerate subspaces are tested in tests/test_spmtc.py.
PLANTED = {name: cls for name, cls in METHODS.items() if name not in ("asi", "a_asi")}


@pytest.fixture(scope="module")
def planted():
    return make_synthetic(n_tasks=2, n_clusters=3, n_shared=1, samples_per_cluster=30, seed=1)


def well_started(cls) -> dict:
    """Start options for the methods whose literal start can stop in a local minimum on this
    data: MBC from random labels; LSSMTC/SPMTC from MALSAR's W = eye(d, l) (the reference
    code's W never leaves the first l features, tests/test_spmtc.py)."""
    if cls is MBC:
        return {"init": "kmeans++"}
    if issubclass(cls, (LSSMTC, SPMTCh)):
        return {"w_update": "eigen", "w_init": "eigen"}
    return {}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_every_baseline_recovers_planted_clusters(name, planted):
    solver = PLANTED[name](n_clusters=planted.n_clusters, random_state=0, **well_started(PLANTED[name])).fit(planted.matrices)
    assert len(solver.labels_) == 2
    for task, labels in zip(planted.tasks, solver.labels_):
        assert labels.shape == (task.n_samples,)
        if not issubclass(PLANTED[name], PooledClusterer):  # pooled variants merge private clusters across tasks
            assert accuracy(task.y, labels) == 1.0
    assert np.isfinite(solver.objective_trace_).all() and solver.n_iter_ >= 1


@pytest.mark.parametrize("name", sorted(METHODS))
def test_solvers_are_deterministic_given_random_state(name, planted):
    a = METHODS[name](n_clusters=3, random_state=7).fit(planted.matrices)
    b = METHODS[name](n_clusters=3, random_state=7).fit(planted.matrices)
    for la, lb in zip(a.labels_, b.labels_):
        np.testing.assert_array_equal(la, lb)
    np.testing.assert_allclose(a.objective_trace_, b.objective_trace_)


def test_pooled_kmeans_puts_shared_clusters_together(planted):
    solver = METHODS["a_kmeans"](n_clusters=3, random_state=0).fit(planted.matrices)
    shared = [labels[task.y == 0] for task, labels in zip(planted.tasks, solver.labels_)]
    assert len(set(np.concatenate(shared))) == 1  # the shared cluster gets one pooled label


def test_kernel_kmeans_objective_never_rises(planted):
    noisy = make_synthetic(n_tasks=1, n_clusters=4, n_shared=0, separation=0.6, seed=3)
    solver = KernelKMeans(n_clusters=4, n_init=1, random_state=0).fit(noisy.matrices)
    trace = solver.task_objective_traces_[0]
    assert len(trace) > 2
    assert np.all(np.diff(trace) <= 1e-9 * abs(trace[0]))


def test_kernel_kmeans_kernels_kept_in_a_cache_give_the_same_fits_and_are_computed_once(monkeypatch):
    """A cache keeps each task's kernel by (data, width, mode): the seeds of a grid point compute
    them once, with the labels and traces of fits without a cache to the bit; another width
    computes its own."""
    from mtc.methods import kernel_kmeans
    from mtc.numerics.cache import Cache

    data = make_synthetic(n_tasks=3, n_clusters=3, n_shared=1, separation=0.8, seed=5)
    computed = []
    affinity = kernel_kmeans.gaussian_affinity
    monkeypatch.setattr(kernel_kmeans, "gaussian_affinity", lambda X, *args: computed.append(X.shape) or affinity(X, *args))
    cache = Cache()
    for width in (0.5, 0.5, 2.0, 2.0):
        for seed in (0, 1):
            kept = KernelKMeans(n_clusters=3, kernel_width=width, n_init=2, cache=cache, random_state=seed)
            fresh = KernelKMeans(n_clusters=3, kernel_width=width, n_init=2, random_state=seed)
            kept.fit(data.matrices)
            fresh.fit(data.matrices)
            for a, b in zip(kept.labels_ + kept.task_objective_traces_, fresh.labels_ + fresh.task_objective_traces_):
                np.testing.assert_array_equal(a, b)
    assert len(computed) == 3 * 4 * 2 * 2 // 2 + 3 * 2  # every fresh fit's 3 kernels; the cache's: 3 per width
    assert len(cache.results["gaussian_kernel"]) == 3 and cache.compute_seconds["gaussian_kernel"] > 0


def test_kernel_kmeans_incremental_sums_give_the_literal_iterates(monkeypatch):
    """K H updated from the columns of the samples that moved gives the labels, iterations and
    objective trace of K H computed again every iteration (the literal route), restart for
    restart, while computing K H in full only when many samples move."""
    from mtc.methods import kernel_kmeans

    data = make_synthetic(n_tasks=1, n_clusters=5, n_shared=0, separation=0.5, samples_per_cluster=60, seed=4)
    K = gaussian_affinity(data.matrices[0], 1.0, "relative")
    full_sums = {True: 0, False: 0}
    counted = kernel_kmeans.cluster_kernel_sums
    for seed in range(6):
        start = kernel_kmeans.kernel_kmeanspp(kernel_kmeans.DenseKernel(K), 5, np.random.default_rng(seed))
        runs = {}
        for incremental in (True, False):
            def counting(*args, incremental=incremental):
                full_sums[incremental] += 1
                return counted(*args)
            monkeypatch.setattr(kernel_kmeans, "cluster_kernel_sums", counting)
            runs[incremental] = kernel_kmeans.kernel_kmeans_lloyd(kernel_kmeans.DenseKernel(K), start, 5, 300,
                                                                  incremental=incremental)
        fast, literal = runs[True], runs[False]
        assert np.array_equal(fast.labels, literal.labels) and fast.n_iter == literal.n_iter > 2
        np.testing.assert_allclose(fast.trace, literal.trace, rtol=1e-10)
        assert np.all(np.diff(fast.trace) <= 1e-9 * abs(fast.trace[0]))
    assert full_sums[True] < full_sums[False] / 2


def test_kernel_kmeans_on_an_exact_factor_gives_the_dense_kernels_iterates():
    """The factored route's operations (diagonal, columns, K H, the moved samples' update) on
    Phi with Phi Phi' = K (K's eigen-factor) give the dense route's seeding, labels, iterations
    and trace: the Lloyd loop is the same on both, only how K is read differs."""
    from mtc.methods import kernel_kmeans

    data = make_synthetic(n_tasks=1, n_clusters=5, n_shared=0, separation=0.5, samples_per_cluster=60, seed=4)
    K = gaussian_affinity(data.matrices[0], 1.0, "relative")
    values, vectors = np.linalg.eigh(K)
    factor = vectors * np.sqrt(np.maximum(values, 0.0))
    dense, factored = kernel_kmeans.DenseKernel(K), kernel_kmeans.FactoredKernel(factor)
    np.testing.assert_allclose(factored.diagonal, dense.diagonal, atol=1e-10)
    for seed in range(4):
        starts = [kernel_kmeans.kernel_kmeanspp(kernel, 5, np.random.default_rng(seed)) for kernel in (dense, factored)]
        assert np.array_equal(*starts)
        one, other = (kernel_kmeans.kernel_kmeans_lloyd(kernel, starts[0], 5, 300) for kernel in (dense, factored))
        assert np.array_equal(one.labels, other.labels) and one.n_iter == other.n_iter > 2
        np.testing.assert_allclose(one.trace, other.trace, rtol=1e-9)


def test_nystroem_features_from_every_row_reproduce_the_gaussian_kernel():
    """With as many components as rows the Nyström approximation is the kernel itself (and the
    relative width's median is over all pairs, as the dense route's)."""
    from mtc.numerics.affinity import nystroem_features

    X = make_synthetic(n_tasks=1, n_clusters=3, n_shared=0, samples_per_cluster=50, seed=2).matrices[0]
    for mode, width in (("relative", 1.0), ("absolute", 2.0)):
        Phi = nystroem_features(X, width, mode, 10**6, np.random.default_rng(0))
        assert Phi.shape == (150, 150)
        np.testing.assert_allclose(Phi @ Phi.T, gaussian_affinity(X, width, mode), atol=1e-10)


def test_gaussian_kernel_of_sparse_rows_is_formed_without_a_dense_copy(planted):
    """Sparse rows stay sparse: the planted rows spread over 2 x 10^6 columns (a dense copy would
    be 1.4 GB) give the kernel of the same rows as dense arrays, to rounding, in both width
    modes, with a traced peak far below that copy; kernel k-means on them recovers the planted
    clusters."""
    import tracemalloc

    X, y = planted.matrices[0], planted.labels[0]
    rows, cols = np.nonzero(X)
    columns = 2 * 10**6
    wide = sp.csr_matrix((X[rows, cols], (rows, cols * (columns // X.shape[1]) + 7)), shape=(X.shape[0], columns))
    for width, mode in ((0.5, "relative"), (3.0, "absolute")):
        tracemalloc.start()
        K = gaussian_affinity(wide, width, mode)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < X.shape[0] * columns * 8 / 20
        np.testing.assert_allclose(K, gaussian_affinity(X, width, mode), rtol=1e-12, atol=1e-14)
    labels = KernelKMeans(n_clusters=3, random_state=0).fit([wide]).labels_[0]
    assert accuracy(y, labels) > 0.95


def test_kernel_kmeans_nystroem_route_recovers_planted_clusters_without_an_n_by_n_array():
    """route="nystroem" on two sparse tasks of 6,000 rows: planted clusters recovered, objective
    never rising, and a traced peak far below one n x n kernel (288 MB per task)."""
    import tracemalloc

    data = make_synthetic(n_tasks=2, n_clusters=4, n_shared=0, separation=1.0, samples_per_cluster=1500, seed=3)
    tasks = [sp.csr_matrix(np.maximum(X, 0.0)) for X in data.matrices]
    tracemalloc.start()
    solver = KernelKMeans(n_clusters=4, route="nystroem", n_components=200, n_init=2, random_state=0).fit(tasks)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    n = tasks[0].shape[0]
    assert peak < n * n * 8 / 10
    for y, labels, trace in zip(data.labels, solver.labels_, solver.task_objective_traces_):
        assert accuracy(y, labels) > 0.95
        assert np.all(np.diff(trace) <= 1e-9 * abs(trace[0]))


@pytest.fixture(scope="module")
def overlapping_affinity():
    data = make_synthetic(n_tasks=1, n_clusters=4, n_shared=0, separation=0.8, seed=2)
    return cosine_affinity(data.matrices[0]), np.random.default_rng(0).random((200, 4)) + 0.2


def test_snmf_monotone_rules_never_rise(overlapping_affinity):
    M, Y0 = overlapping_affinity
    for rule in ("quarter", "damped"):
        Y, fit = snmf(M, Y0, update=rule, tol=0, max_iter=200)
        assert (Y >= 0).all()
        assert np.all(np.diff(fit.trace) <= 1e-9 * fit.trace[0]), rule
    # the objective is computed without forming YY^T: check it against the definition
    assert fit.trace[-1] == pytest.approx(np.linalg.norm(M - Y @ Y.T) ** 2, rel=1e-9)


def test_plain_update_as_printed_oscillates_and_the_literal_rule_stops_at_the_rise(overlapping_affinity):
    M, Y0 = overlapping_affinity
    _, plain = snmf(M, Y0, update="plain", tol=1e-6, max_iter=50)
    rises = np.flatnonzero(np.diff(plain.trace) > 0)
    assert rises.size >= 10  # docs/architecture.md "Numerics we have checked": not a descent method
    _, literal = snmf(M, Y0, update="plain", stopping="decrease", tol=1.0, max_iter=50)
    assert literal.n_iter == rises[0] + 1 and literal.converged
    _, robust = snmf(M, Y0, update="sqrt", stopping="relative", tol=1e-6, max_iter=500)
    assert robust.trace[-1] < 0.01 * robust.trace[0] and robust.trace[-1] < min(plain.trace)


def test_hals_never_raises_the_penalised_objective_and_each_column_is_its_exact_minimiser(overlapping_affinity):
    M, H0 = overlapping_affinity
    alpha, M_sq = penalty_weight(M), float(np.sum(M * M))
    assert alpha == pytest.approx(M.max() ** 2)
    W, H, values = H0.copy(), H0.copy(), [penalised_objective(M, H0, H0, alpha, M_sq)]
    for _ in range(30):
        W = hals_half_step(M @ H, H.T @ H, W, H, alpha)
        values.append(penalised_objective(M, W, H, alpha, M_sq))
        H = hals_half_step(M @ W, W.T @ W, H, W, alpha)
        values.append(penalised_objective(M, W, H, alpha, M_sq))
    assert np.all(np.diff(values) <= 1e-10 * values[0]) and values[-1] < 0.5 * values[0]
    assert values[-1] == pytest.approx(np.linalg.norm(M - W @ H.T) ** 2 + alpha * np.linalg.norm(W - H) ** 2, rel=1e-9)
    # after a pass the last column is the exact non-negative minimiser given the others:
    # no step along it (clipped at zero) lowers the objective
    W = hals_half_step(M @ H, H.T @ H, W, H, alpha)
    best = penalised_objective(M, W, H, alpha, M_sq)
    rng = np.random.default_rng(1)
    for _ in range(20):
        moved = W.copy()
        moved[:, -1] = np.maximum(moved[:, -1] + 1e-3 * rng.standard_normal(W.shape[0]), 0.0)
        assert penalised_objective(M, moved, H, alpha, M_sq) >= best - 1e-12 * best


def test_hals_converges_in_fewer_iterations_than_the_papers_rule_and_recovers_planted_clusters(planted):
    fits = {rule: SymmetricNMF(n_clusters=3, update=rule, tol=1e-6, max_iter=2000, random_state=0).fit(planted.matrices)
            for rule in ("sqrt", "hals")}
    for task, labels in zip(planted.tasks, fits["hals"].labels_):
        assert accuracy(task.y, labels) == 1.0
    assert fits["hals"].converged_ and fits["hals"].n_iter_ < fits["sqrt"].n_iter_
    M = cosine_affinity(planted.matrices[0])
    H, fit = snmf(M, np.random.default_rng(0).random((M.shape[0], 3)) + 0.2, update="hals", tol=1e-6)
    assert (H >= 0).all() and fit.trace[-1] == pytest.approx(np.linalg.norm(M - H @ H.T) ** 2, rel=1e-9)


def test_hals_scales_a_start_far_from_the_similarity_so_no_column_dies(planted):
    X, y = planted.matrices[0], planted.tasks[0].y
    M = np.clip(cosine_affinity(X), 0, None) / 1000  # entries far below the 0.2-1.2 start
    H, fit = snmf(M, np.eye(3)[y] + 0.2, update="hals", tol=1e-6)
    assert (H.max(axis=0) > 0).all()  # unscaled, the first pass zeroed two columns for good
    assert accuracy(y, fit.labels) == 1.0


def test_sparse_input_matches_dense(planted):
    dense = SymmetricNMF(n_clusters=3, random_state=0).fit([np.abs(X) for X in planted.matrices])
    sparse = SymmetricNMF(n_clusters=3, random_state=0).fit([sp.csr_matrix(np.abs(X)) for X in planted.matrices])
    for a, b in zip(dense.labels_, sparse.labels_):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "tasks, n_clusters, message",
    [
        ([np.ones((5, 3)), np.ones((5, 4))], 2, r"ragged feature dimensions across tasks: \[3, 4\]"),
        ([np.ones((5, 3)), np.full((5, 3), np.nan)], 2, "task 1: data contains NaN"),
        ([np.ones((5, 3)), np.full((5, 3), np.inf)], 2, "task 1: data contains NaN or infinite"),
        ([np.ones((2, 3))], 3, "task 0: 2 samples is fewer than n_clusters=3"),
        ([np.ones((5, 3))], [2, 2], "n_clusters has 2 entries but there are 1 tasks"),
        ([], 2, "tasks is empty"),
        (np.ones((5, 3)), 2, "tasks must be a list"),
        ([np.ones(5)], 2, "task 0: expected a 2-D matrix"),
    ],
)
def test_bad_input_is_rejected_with_a_specific_error(tasks, n_clusters, message):
    with pytest.raises(ValueError, match=message):
        KMeansClusterer(n_clusters=n_clusters).fit(tasks)


@pytest.mark.parametrize("solver, message", [
    (SymmetricNMF(n_clusters=3, update="cube"), "The 'update' parameter of SymmetricNMF must be a str among"),
    (SymmetricNMF(n_clusters=3, affinity="dot"), "The 'affinity' parameter of SymmetricNMF must be a str among"),
    (SymmetricNMF(n_clusters=3, stopping="never"), "The 'stopping' parameter of SymmetricNMF must be a str among"),
    (SymmetricNMF(n_clusters=3, max_iter=-1), r"The 'max_iter' parameter of SymmetricNMF must be an int in the range \[1, inf\)"),
    (KernelKMeans(n_clusters=3, kernel_width=0), r"The 'kernel_width' parameter of KernelKMeans must be a float in the range \(0.0, inf\)"),
    # these crashed deep inside the fit (empty min(), IndexError) before constraints were declared
    (KernelKMeans(n_clusters=3, n_init=0), "The 'n_init' parameter of KernelKMeans must be an int in the range"),
    (KernelKMeans(n_clusters=3, max_iter=0), "The 'max_iter' parameter of KernelKMeans must be an int in the range"),
])
def test_unknown_solver_options_are_rejected(planted, solver, message):
    with pytest.raises(ValueError, match=message):
        solver.fit(planted.matrices)


def test_kernel_kmeans_absolute_width_is_sigma_itself(planted):
    """width_mode="absolute" (the AAAI-13 paper's sigma grid): sigma = kernel_width; with sigma =
    w x the median distance it fits as the default relative width w does."""
    X = planted.matrices[0]
    D2 = squared_distances(X)
    np.testing.assert_allclose(gaussian_affinity(X, 10.0, mode="absolute"), np.exp(-D2 / 200.0), rtol=1e-12, atol=1e-14)
    D2_sklearn = euclidean_distances(X, squared=True)  # the default stays the former formula, to the bit
    former = np.exp(-D2_sklearn / (2.0 * (0.5**2 * median_positive(D2_sklearn))))
    np.testing.assert_array_equal(gaussian_affinity(X, 0.5), former)
    sigma = 0.5 * np.sqrt(median_positive(D2_sklearn))
    relative = KernelKMeans(n_clusters=3, kernel_width=0.5, n_init=2, random_state=0).fit(planted.matrices[:1])
    absolute = KernelKMeans(n_clusters=3, kernel_width=sigma, width_mode="absolute", n_init=2,
                            random_state=0).fit(planted.matrices[:1])
    np.testing.assert_array_equal(relative.labels_[0], absolute.labels_[0])
    np.testing.assert_allclose(relative.objective_trace_, absolute.objective_trace_, rtol=1e-10)
    with pytest.raises(ValueError, match="The 'width_mode' parameter of KernelKMeans must be a str among"):
        KernelKMeans(n_clusters=3, width_mode="median").fit(planted.matrices)


@pytest.mark.parametrize("labelled", [True, False])
def test_a_pooled_trial_on_tasks_with_unequal_cluster_counts_is_scored_and_its_clusters_named(labelled):
    """A-kmeans clusters the union into max_t k_t clusters, so a 2-class task can get a third
    cluster: the trial scores it and names every cluster its labels use (the namer sized its
    cluster list by the task's k and raised IndexError on such a label)."""
    from mtc.config import Trial
    from mtc.tasks import MultiTaskDataset, Task, cluster_names
    from mtc.trial import run_trial

    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    blobs = np.repeat(centres, 10, axis=0) + rng.normal(0.0, 0.5, (30, 2))
    y_two, y_three = np.repeat([0, 1, 1], 10), np.repeat([0, 1, 2], 10)  # task two: one class over two blobs
    tasks = (Task("two", blobs, y_two if labelled else None, ("a", "b") if labelled else cluster_names(2)),
             Task("three", blobs + 0.1, y_three if labelled else None, ("a", "b", "c") if labelled else cluster_names(3)))
    dataset = MultiTaskDataset("unequal", tasks)
    assert dataset.n_clusters == [2, 3]
    outcome = run_trial(dataset, METHODS["a_kmeans"](n_clusters=[2, 3]), Trial({}, 0), None)
    assert outcome.labels[0].max() == 2  # the 2-class task got a third pooled cluster
    names = outcome.cluster_names[0]
    assert len(names) == 3 and len(set(names)) == 3
    if labelled:
        assert outcome.metrics["acc/two"] == pytest.approx(accuracy(y_two, outcome.labels[0])) == 2 / 3
        assert {"a", "b"} < set(names)  # the two matched clusters take the class names, the third its own
