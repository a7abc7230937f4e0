import math

import numpy as np
import pytest
import scipy.sparse as sp

from mtc.config import Trial
from mtc.data.synthetic import make_synthetic
from mtc.methods import MTCFIR, MTCFIRnF, MTCFIRnI, MTCFIRnR
from mtc.metrics import accuracy
from mtc.numerics.affinity import squared_distances
from mtc.numerics.cache import Cache
from mtc.numerics.consistent_similarity import adaptive_neighbours, distance_matrices, relation_matrices, task_weights
from mtc.numerics.msda import msda_features, msda_layer
from mtc.trial import run_trial


def test_msda_closed_form_matches_the_average_over_many_corruptions():
    rng = np.random.default_rng(0)
    X = np.abs(rng.normal(size=(25, 6))) * (rng.random((25, 6)) < 0.6)
    p, copies = 0.4, 4000
    Xb = np.hstack([X, np.ones((25, 1))])
    keep = rng.random((copies, 25, 7)) > p
    keep[:, :, -1] = True  # the constant feature is never corrupted
    corrupted = Xb[None] * keep
    P = np.einsum("ni,cnj->ij", Xb, corrupted) / copies
    Q = np.einsum("cni,cnj->ij", corrupted, corrupted) / copies
    W = np.linalg.solve(Q, P.T).T  # least squares over the explicit corruptions, Eq. 3
    explicit = np.tanh(Xb @ W[:6].T)
    np.testing.assert_allclose(msda_layer(X, p, "dense"), explicit, atol=0.03)


def test_dense_and_woodbury_routes_agree_on_dense_and_sparse_input():
    rng = np.random.default_rng(1)
    X = np.abs(rng.normal(size=(20, 40))) * (rng.random((20, 40)) < 0.3)
    dense = msda_layer(X, 0.6, "dense")
    np.testing.assert_allclose(msda_layer(X, 0.6, "woodbury"), dense, atol=1e-8)
    np.testing.assert_allclose(msda_layer(sp.csr_matrix(X), 0.6, "woodbury"), dense, atol=1e-8)
    stacked = msda_features(X, 0.6, 3)
    assert stacked.shape == (20, 160) and np.allclose(stacked[:, :40], X)


def test_bad_corruption_probability():
    with pytest.raises(ValueError, match=r"corruption probability p must be in \[0, 1\)"):
        msda_layer(np.ones((5, 3)), 1.0)


def test_adaptive_neighbours_columns_are_on_the_simplex_with_exactly_l_nonzeros():
    V = np.random.default_rng(2).random((30, 12))
    A = squared_distances(V)
    for l in (1, 4, 9):
        M = adaptive_neighbours(A, l)
        np.testing.assert_allclose(M.sum(axis=0), 1.0)
        assert (M >= 0).all() and np.all(np.count_nonzero(M, axis=0) == l)
        assert np.all(np.diag(M) == 0)
        # the kept entries are the l nearest points of each column
        nearest = np.argsort(A + np.diag(np.full(30, np.inf)), axis=0)[:l]
        assert all(set(np.flatnonzero(M[:, j])) == set(nearest[:, j]) for j in range(30))


def test_task_weights_prefer_a_related_task_over_an_unrelated_one():
    related = make_synthetic(n_tasks=2, n_clusters=3, n_shared=3, seed=5)
    unrelated = make_synthetic(n_tasks=1, n_clusters=3, n_shared=0, seed=99, n_features=40)
    features = [related.tasks[0].X, related.tasks[1].X, unrelated.tasks[0].X]
    alpha = task_weights(relation_matrices(features), [15, 15, 15])
    normalised = alpha / np.diag(alpha)[:, None]
    np.testing.assert_allclose(np.diag(normalised), 1.0)
    assert normalised[0, 1] > normalised[0, 2] and normalised[1, 0] > normalised[1, 2]


def test_task_weights_threshold_is_the_printed_sorted_rows_entry_to_the_bit():
    """Eq. 20's eps^t is read off row l of U^t (every column of V^(tt) sorted in descending
    order); task_weights takes the same order statistic by a partition: identical weights,
    ties and l at its bounds included."""
    rng = np.random.default_rng(4)
    features = [rng.random((40, 6)), rng.random((35, 6)), np.repeat(rng.random((10, 6)), 3, axis=0)]  # ties
    relations = relation_matrices(features)

    def printed(l):
        alpha = np.zeros((3, 3))
        for t in range(3):
            ranked = -np.sort(-relations[(t, t)], axis=0)
            threshold = np.median(ranked[min(l[t], relations[(t, t)].shape[0] - 1)])
            for s in range(3):
                alpha[t, s] = np.count_nonzero(relations[(t, s)] >= threshold) / relations[(t, s)].size
        return alpha

    for l in ([1, 1, 1], [5, 7, 3], [39, 34, 29], [60, 60, 60]):
        np.testing.assert_array_equal(task_weights(relations, l), printed(l))


@pytest.fixture(scope="module")
def planted():
    return make_synthetic(n_tasks=2, n_clusters=3, n_shared=2, samples_per_cluster=30, seed=6)


@pytest.mark.parametrize("cls", [MTCFIR, MTCFIRnF, MTCFIRnI, MTCFIRnR])
def test_mtcfir_and_ablations_recover_planted_clusters(cls, planted):
    model = cls(n_clusters=3, random_state=0).fit(planted.matrices)
    for task, labels in zip(planted.tasks, model.labels_):
        assert accuracy(task.y, labels) >= 0.95
    np.testing.assert_allclose(np.diag(model.task_weights_), 1.0)


def test_snmf_step_objective_never_rises_with_the_monotone_update(planted):
    model = MTCFIR(n_clusters=3, update="quarter", tol=0, max_iter=100, random_state=0).fit(planted.matrices)
    trace = model.objective_trace_
    assert len(trace) == 101 and np.all(np.diff(trace) <= 1e-9 * trace[0])


def test_ablation_switches(planted):
    assert np.all(MTCFIRnR(n_clusters=3, random_state=0).fit(planted.matrices).task_weights_ == 1.0)
    nf = MTCFIRnF(n_clusters=3, random_state=0).fit(planted.matrices)
    assert nf.mmd_after_ == nf.mmd_before_  # no new features
    full = MTCFIR(n_clusters=3, random_state=0).fit(planted.matrices)
    assert full.n_neighbours_ == [math.ceil(0.3 * 90 / 3)] * 2


def test_trial_logs_task_weights_and_mmd(planted, tmp_path):
    from mtc.results.plots import readable_files
    from mtc.store import tracking

    outcome = run_trial(planted, MTCFIR(n_clusters=planted.n_clusters, neighbour_ratio=0.3), Trial({}, 0), None)
    weights = outcome.matrices["task_weights"]
    assert weights.blocks[(0, 0)].shape == (2, 2) and weights.row_names[0] == planted.task_names
    assert {"mmd_before", "mmd_after"} <= set(outcome.metrics)
    # 2 of 3 equal-sized classes shared: the ideal relatedness of MTCFIR Sec. 4.6 is (2/3)^2
    np.testing.assert_allclose(outcome.matrices["ideal_task_weights"].blocks[(0, 0)], [[1, 4 / 9], [4 / 9, 1]])
    client = tracking.client_for(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.create_run(tracking.ensure_experiment(client, "t", str(tmp_path / "artifacts")))
    config = {"method": "mtcfir", "params": {}, "seed": 0, "data": {"name": "planted"}}
    tracking.log_trial(client, run.info.run_id, run.info.artifact_uri, outcome, config, planted.task_names,
                       lambda folder: readable_files(folder, outcome, config, planted.task_names))
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {f"{stem}.{ext}" for stem in ("task_weights", "ideal_task_weights") for ext in ("csv", "png")} <= names
    arrays = tracking.load_trial_arrays(client, run.info.run_id, run.info.artifact_uri)
    np.testing.assert_allclose(arrays["matrix/task_weights"], weights.blocks[(0, 0)])


def test_ideal_task_relatedness_counts_shared_classes():
    from mtc.data.synthetic import make_synthetic

    dataset = make_synthetic(n_tasks=3, n_clusters=4, n_shared=2, samples_per_cluster=10)
    np.testing.assert_allclose(dataset.ideal_task_relatedness(), [[1, 0.25, 0.25], [0.25, 1, 0.25], [0.25, 0.25, 1]])


def test_too_many_neighbours_is_rejected(planted):
    with pytest.raises(ValueError, match=r"The 'neighbour_ratio' parameter of MTCFIR must be a float in the range \(0.0, 1.0\]"):
        MTCFIR(n_clusters=3, neighbour_ratio=1.5).fit(planted.matrices)
    with pytest.raises(ValueError, match="task 0: l = ceil"):  # l = 2 neighbours need more than 3 samples
        MTCFIR(n_clusters=2, neighbour_ratio=1.0).fit([X[:3] for X in planted.matrices])


def test_a_trial_records_the_seconds_of_the_cached_steps_it_computed_and_not_of_those_it_read(planted):
    """step_seconds/<step> (mtc.trial.step_seconds): the first trial computes mSDA's features, the
    relations, the similarities, the seeding's coordinates and its seed's k-means labels; a second
    seed reads the features, the similarities and the coordinates from the cache and computes only
    its own k-means; without a cache nothing is recorded."""
    from mtc.config import Trial
    from mtc.tasks import MultiTaskDataset, Task
    from mtc.trial import run_trial

    dataset = MultiTaskDataset("planted", tuple(Task(f"t{t}", X, y, ("a", "b", "c"))
                                                for t, (X, y) in enumerate(zip(planted.matrices, planted.labels))))
    cache, prototype = Cache(size=2), MTCFIR(n_clusters=3)
    first = run_trial(dataset, prototype, Trial({}, 0), cache).metrics
    second = run_trial(dataset, prototype, Trial({}, 1), cache).metrics
    steps = {key for key in first if key.startswith("step_seconds/")}
    assert steps == {"step_seconds/msda_features", "step_seconds/mtcfir_relations", "step_seconds/mtcfir_similarities",
                     "step_seconds/mtcfir_seeding", "step_seconds/kmeans_labels"}
    assert {key for key in second if key.startswith("step_seconds/")} == {"step_seconds/kmeans_labels"}
    assert 0 < sum(first[key] for key in steps) < first["fit_seconds"]
    assert sum(cache.compute_seconds.values()) == pytest.approx(sum(first[key] for key in steps)
                                                                + second["step_seconds/kmeans_labels"])
    assert not any(key.startswith("step_seconds/") for key in run_trial(dataset, prototype, Trial({}, 0), None).metrics)


def test_seed_independent_steps_are_cached_and_identical_without_the_cache(planted):
    cache = Cache(size=2)
    first = MTCFIR(n_clusters=3, random_state=0, cache=cache).fit(planted.matrices)
    second = MTCFIR(n_clusters=3, random_state=1, cache=cache).fit(planted.matrices)
    assert len(cache.results["msda_features"]) == 1 and len(cache.results["mtcfir_similarities"]) == 1
    other_point = MTCFIR(n_clusters=3, neighbour_ratio=0.5, random_state=0, cache=cache).fit(planted.matrices)
    # a new neighbour ratio reuses step 1 and the relations but not the rest of step 2, and seed
    # 0's k-means labels (one per task and seed)
    assert len(cache.results["msda_features"]) == 1 and len(cache.results["mtcfir_similarities"]) == 2
    assert len(cache.results["mtcfir_relations"]) == 1 and cache.compute_seconds.keys() >= {"mtcfir_relations"}
    assert len(cache.results["kmeans_labels"]) == 2 * len(planted.matrices)
    # the seeding's coordinates, once per features: mSDA's features are wider than a task's 90
    # samples, so the exact row-space coordinates (90 x rank), not the features themselves
    (coordinates,) = cache.results["mtcfir_seeding"].values()
    (features,) = cache.results["msda_features"].values()
    assert features.shape[1] > planted.matrices[0].shape[0]
    assert [C.shape[0] for C in coordinates] == [X.shape[0] for X in planted.matrices]
    assert all(C.shape[1] <= C.shape[0] for C in coordinates)
    fresh_point = MTCFIR(n_clusters=3, neighbour_ratio=0.5, random_state=0).fit(planted.matrices)
    np.testing.assert_array_equal(other_point.objective_trace_, fresh_point.objective_trace_)
    np.testing.assert_array_equal(first.task_weights_, second.task_weights_)
    alpha, similarities = next(iter(cache.results["mtcfir_similarities"].values()))
    assert sp.issparse(similarities[0])  # l = 10 of n_t = 100 neighbours: at most 20 % non-zero
    assert not alpha.flags.writeable and not similarities[0].data.flags.writeable
    fresh = MTCFIR(n_clusters=3, random_state=0).fit(planted.matrices)
    np.testing.assert_array_equal(first.objective_trace_, fresh.objective_trace_)  # bit-identical
    np.testing.assert_array_equal(first.task_weights_, fresh.task_weights_)


def test_cache_keeps_the_most_recent_results_per_step():
    cache = Cache(size=2)
    for key in ("a", "b", "a", "c"):
        cache.get("step", key, lambda: np.zeros(2))
    cache.get("other", "a", lambda: np.ones(2))
    assert list(cache.results["step"]) == ["a", "c"] and list(cache.results["other"]) == ["a"]


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("width", [6, 200])  # d < sum n_s = 95: the feature route; d > 95: the relation route
def test_distances_from_features_equal_the_sum_over_relation_matrices(sparse, width):
    rng = np.random.default_rng(4)
    features = [np.abs(rng.normal(size=(n, width))) for n in (30, 25, 40)]
    if sparse:
        features = [sp.csr_matrix(Z) for Z in features]
    relations = relation_matrices(features)
    alpha = np.array([[1.0, 0.3, 0.5], [0.7, 0.0, 0.2], [0.1, 0.4, 1.0]])
    explicit = 0.7 * squared_distances(relations[(1, 0)]) + 0.2 * squared_distances(relations[(1, 2)])
    np.testing.assert_allclose(list(distance_matrices(features, relations, alpha))[1], explicit, atol=1e-10)


@pytest.mark.parametrize("update", ["sqrt", "quarter"])
def test_snmf_on_the_sparse_similarity_gives_the_dense_trace(planted, update):
    """MTCFIR keeps its l-neighbour similarities sparse (issue 15): SNMF on them follows the
    same trace as on the dense matrices to 1e-10."""
    from mtc.numerics.seeding import initial_indicator
    from mtc.numerics.snmf import snmf

    cache = Cache()
    MTCFIR(n_clusters=3, neighbour_ratio=0.1, random_state=0, cache=cache).fit(planted.matrices)
    _, similarities = next(iter(cache.results["mtcfir_similarities"].values()))
    for M, X in zip(similarities, planted.matrices):
        assert sp.issparse(M) and M.nnz < 0.25 * M.shape[0] ** 2
        Y = initial_indicator(X, 3, np.random.default_rng(0))
        (_, sparse), (_, dense) = (snmf(S, Y, update=update, tol=0, max_iter=60) for S in (M, M.toarray()))
        np.testing.assert_allclose(sparse.trace, dense.trace, rtol=1e-10)
        np.testing.assert_array_equal(sparse.labels, dense.labels)


def test_the_same_rows_split_into_other_tasks_share_no_cached_step(planted):
    """The cached steps are keyed by what the features come from: the stacked rows, their split
    into tasks, p and g. The same rows split otherwise are other tasks (other relations, task
    weights and seeding coordinates): a shared Cache gives what a fresh fit gives."""
    rows = np.vstack(planted.matrices[:2])
    splits = ([rows[:90], rows[90:]], [rows[:60], rows[60:]])
    cache = Cache()
    for tasks in splits:
        kept = MTCFIR(n_clusters=3, random_state=0, cache=cache).fit(tasks)
        fresh = MTCFIR(n_clusters=3, random_state=0).fit(tasks)
        np.testing.assert_array_equal(kept.task_weights_, fresh.task_weights_)
        np.testing.assert_array_equal(kept.objective_trace_, fresh.objective_trace_)
    assert len(cache.results["mtcfir_relations"]) == 1 and len(cache.results["msda_features"]) == 2


def test_msda_features_are_shared_through_the_cache_folder_by_mtcfir_and_its_ablations(planted, tmp_path, monkeypatch):
    """A second worker's cache with the same folder (and MTCFIR-nR, whose features are MTCFIR's)
    reads mSDA's features from the file the first wrote instead of computing them: the same
    bits, so the same fit; another corruption is another file; features computed on two BLAS
    threads are kept in memory only; a damaged file is computed again."""
    from threadpoolctl import threadpool_limits

    from mtc.numerics import msda

    with threadpool_limits(limits=1, user_api="blas"):
        first = MTCFIR(n_clusters=3, random_state=0, cache=Cache(folder=tmp_path)).fit(planted.matrices)
    (file,) = (tmp_path / "msda_features").glob("*.npy")
    computed = []
    real = msda.msda_features
    monkeypatch.setattr(msda, "msda_features", lambda *args: computed.append(args[1:]) or real(*args))
    with threadpool_limits(limits=1, user_api="blas"):
        again = MTCFIR(n_clusters=3, random_state=0, cache=Cache(folder=tmp_path)).fit(planted.matrices)
        ablation = MTCFIRnR(n_clusters=3, random_state=0, cache=Cache(folder=tmp_path)).fit(planted.matrices)
        fresh_ablation = MTCFIRnR(n_clusters=3, random_state=0).fit(planted.matrices)
        assert computed == [(0.5, 3)]  # the fresh fit's, not the cached ones'
        np.testing.assert_array_equal(again.objective_trace_, first.objective_trace_)
        np.testing.assert_array_equal(ablation.objective_trace_, fresh_ablation.objective_trace_)
        MTCFIR(n_clusters=3, corruption=0.7, random_state=0, cache=Cache(folder=tmp_path)).fit(planted.matrices)
    assert computed[-1] == (0.7, 3) and len(list((tmp_path / "msda_features").glob("*.npy"))) == 2
    with threadpool_limits(limits=2, user_api="blas"):
        if msda.blas_threads() == 2:  # a BLAS that can run on two threads here
            MTCFIR(n_clusters=3, corruption=0.6, random_state=0, cache=Cache(folder=tmp_path)).fit(planted.matrices)
            assert computed[-1] == (0.6, 3) and len(list((tmp_path / "msda_features").glob("*.npy"))) == 2
    file.write_bytes(b"not an array")
    computed.clear()
    with threadpool_limits(limits=1, user_api="blas"):
        repaired = MTCFIR(n_clusters=3, random_state=0, cache=Cache(folder=tmp_path)).fit(planted.matrices)
    assert computed == [(0.5, 3)] and np.load(file).shape == (180, planted.matrices[0].shape[1] * 4)
    np.testing.assert_array_equal(repaired.objective_trace_, first.objective_trace_)


def test_relations_and_seeding_coordinates_are_shared_through_the_cache_folder(planted, tmp_path, monkeypatch):
    """MTCFIR's relations between its tasks' features and the k-means seeding's coordinates of
    each task's (wide: 160 mSDA features for 90 rows) are computed by the first worker and read
    from its files by the next (and by MTCFIR-nR, on the same features): the same arrays in the
    same memory order, so fits equal to the bit to fits without a cache. Relations computed on
    two BLAS threads are kept in memory only; a damaged file is computed again."""
    from threadpoolctl import threadpool_limits

    from mtc.numerics import consistent_similarity, seeding
    from mtc.numerics.msda import blas_threads

    with threadpool_limits(limits=1, user_api="blas"):
        fresh = MTCFIR(n_clusters=3, random_state=0).fit(planted.matrices)
        first = MTCFIR(n_clusters=3, random_state=0, cache=Cache(folder=tmp_path)).fit(planted.matrices)
    (relations_file,) = (tmp_path / "mtcfir_relations").glob("*.npz")
    (seeding_file,) = (tmp_path / "mtcfir_seeding").glob("*.npz")
    computed = []
    for module, name in ((consistent_similarity, "relation_matrices"), (seeding, "seeding_svd")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *args, real=real, name=name: computed.append(name) or real(*args))
    with threadpool_limits(limits=1, user_api="blas"):
        again = MTCFIR(n_clusters=3, random_state=0, cache=Cache(folder=tmp_path)).fit(planted.matrices)
        ablation = MTCFIRnR(n_clusters=3, random_state=0, cache=Cache(folder=tmp_path)).fit(planted.matrices)
        assert computed == []  # both read the first fit's files
        fresh_ablation = MTCFIRnR(n_clusters=3, random_state=0).fit(planted.matrices)
    for kept, without in ((first, fresh), (again, fresh), (ablation, fresh_ablation)):
        np.testing.assert_array_equal(kept.objective_trace_, without.objective_trace_)
        np.testing.assert_array_equal(kept.task_weights_, without.task_weights_)
        for a, b in zip(kept.labels_, without.labels_):
            np.testing.assert_array_equal(a, b)

    features = [np.abs(np.random.default_rng(t).normal(size=(n, 60))) for t, n in enumerate((20, 30, 25))]
    direct = consistent_similarity.relation_matrices(features)
    with threadpool_limits(limits=1, user_api="blas"):
        consistent_similarity.kept_relations(features, "three tasks", Cache(folder=tmp_path))
        assert len(list((tmp_path / "mtcfir_relations").glob("*.npz"))) == 2
        read = consistent_similarity.kept_relations(features, "three tasks", Cache(folder=tmp_path))
        narrow = [F[:, :10] for F in features]  # 3,775 relation entries against 750 features: not kept as a file
        consistent_similarity.kept_relations(narrow, "three narrow tasks", Cache(folder=tmp_path))
        assert len(list((tmp_path / "mtcfir_relations").glob("*.npz"))) == 2
    assert sorted(read) == sorted(direct)
    for pair, V in direct.items():  # V^(tt) as relation_matrices leaves it (its transpose's order), V^(st) = V^(ts)'
        np.testing.assert_array_equal(read[pair], V)
        assert (read[pair].flags.c_contiguous, read[pair].flags.f_contiguous) == (V.flags.c_contiguous,
                                                                                   V.flags.f_contiguous)
    relations_file.write_bytes(b"not an archive")
    computed.clear()
    with threadpool_limits(limits=1, user_api="blas"):
        repaired = MTCFIR(n_clusters=3, random_state=0, cache=Cache(folder=tmp_path)).fit(planted.matrices)
    assert computed == ["relation_matrices"] and len(np.load(relations_file).files) == 3  # (0,0), (0,1), (1,1)
    np.testing.assert_array_equal(repaired.objective_trace_, fresh.objective_trace_)
    assert seeding_file.exists()
    with threadpool_limits(limits=2, user_api="blas"):
        if blas_threads() == 2:  # a BLAS that can run on two threads here
            before = set((tmp_path / "mtcfir_relations").glob("*.npz"))
            MTCFIR(n_clusters=3, corruption=0.6, random_state=0, cache=Cache(folder=tmp_path)).fit(planted.matrices)
            assert set((tmp_path / "mtcfir_relations").glob("*.npz")) == before
