import numpy as np
import pytest

from mtc.metrics import accuracy, cosine_silhouette, nmi, pairwise_ari, purity, score_task


def test_permuted_labels_score_perfectly():
    y = np.array([0, 0, 1, 1, 2, 2])
    scores = score_task(y, np.array([2, 2, 0, 0, 1, 1]))
    assert scores == pytest.approx({"acc": 1.0, "nmi": 1.0, "nmi_max": 1.0, "ari": 1.0, "purity": 1.0})


def test_accuracy_and_purity_by_hand():
    y = np.array([0, 0, 0, 1, 1, 1])
    pred = np.array([0, 0, 1, 1, 1, 1])  # cluster 1 holds one sample of class 0
    assert accuracy(y, pred) == pytest.approx(5 / 6)
    assert purity(y, pred) == pytest.approx(5 / 6)
    # one cluster for everything: purity 1/2; Hungarian accuracy 1/2 as well
    assert purity(y, np.zeros(6, int)) == pytest.approx(0.5)
    assert accuracy(y, np.zeros(6, int)) == pytest.approx(0.5)


def test_purity_exceeds_accuracy_when_clusters_split_a_class():
    y = np.array([0, 0, 0, 0, 1, 1])
    pred = np.array([0, 0, 1, 1, 2, 2])
    assert purity(y, pred) == pytest.approx(1.0)
    assert accuracy(y, pred) == pytest.approx(4 / 6)


def test_nmi_normalisations_by_hand():
    # C = {0,0,1,1}, K = {0,0,0,1}: H(C) = ln 2, H(K) = H(1/4, 3/4), I = H(C) - H(C|K)
    y = np.array([0, 0, 1, 1])
    pred = np.array([0, 0, 0, 1])
    h_c = np.log(2)
    h_k = -(0.25 * np.log(0.25) + 0.75 * np.log(0.75))
    h_c_given_k = 0.75 * -(2 / 3 * np.log(2 / 3) + 1 / 3 * np.log(1 / 3))
    mi = h_c - h_c_given_k
    assert nmi(y, pred, "max") == pytest.approx(mi / max(h_c, h_k))
    assert nmi(y, pred, "arithmetic") == pytest.approx(mi / ((h_c + h_k) / 2))
    assert nmi(y, pred, "max") < nmi(y, pred, "arithmetic")


def test_bad_label_arrays_are_rejected():
    with pytest.raises(ValueError, match="equal length"):
        score_task(np.zeros(3, int), np.zeros(4, int))
    with pytest.raises(ValueError, match="empty"):
        accuracy(np.array([], int), np.array([], int))


@pytest.mark.parametrize("n_classes, n_clusters, n_samples", [(2, 2, 40), (4, 3, 160), (3, 5, 7), (1, 1, 5), (1, 3, 9),
                                                              (3, 1, 9), (20, 20, 2000)])
def test_the_one_table_scores_equal_scikit_learns_scorers_to_the_last_bit(n_classes, n_clusters, n_samples):
    from sklearn.metrics import adjusted_rand_score

    rng = np.random.default_rng(n_samples)
    for _ in range(20):
        truth = rng.integers(0, n_classes, n_samples)
        found = np.where(rng.random(n_samples) < 0.7, truth % n_clusters, rng.integers(0, n_clusters, n_samples))
        found = found * 3 - 7  # any integer labels
        assert score_task(truth, found) == {
            "acc": accuracy(truth, found), "nmi": nmi(truth, found, "arithmetic"), "nmi_max": nmi(truth, found, "max"),
            "ari": float(adjusted_rand_score(truth, found)), "purity": purity(truth, found)}
    assert score_task(np.repeat([0, 1], 4), np.tile([0, 1], 4))["nmi"] == 0.0  # no mutual information


@pytest.mark.parametrize("n_runs, n_samples, n_clusters", [(2, 5, 3), (3, 1, 1), (6, 40, 2), (20, 500, 4), (4, 300, 20)])
def test_pairwise_ari_equals_scikit_learns_on_every_pair_to_the_last_bit(n_runs, n_samples, n_clusters):
    from itertools import combinations

    from sklearn.metrics import adjusted_rand_score

    rng = np.random.default_rng(n_runs * n_samples)
    labels = rng.integers(0, n_clusters, (n_runs, n_samples)) * 3 - 7  # any integer labels
    labels[1] = labels[0]  # one identical pair: ARI 1
    expected = [adjusted_rand_score(a, b) for a, b in combinations(labels, 2)]
    found = pairwise_ari(labels)
    assert found.tolist() == expected
    assert found[0] == 1.0


def test_pairwise_ari_rejects_labels_that_are_not_runs_by_samples():
    with pytest.raises(ValueError, match="runs x samples"):
        pairwise_ari(np.zeros(5, int))
    with pytest.raises(ValueError, match="runs x samples"):
        pairwise_ari(np.zeros((3, 0), int))


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("n, sample_size", [(60, None), (60, 60), (300, 120)])
def test_the_cosine_silhouette_from_cluster_sums_equals_scikit_learns(sparse, n, sample_size):
    import scipy.sparse as sp
    from sklearn.metrics import silhouette_score

    rng = np.random.default_rng(n + sparse)
    X = rng.random((n, 30)) * (rng.random((n, 30)) < 0.3)
    X[[3, 17]] = 0.0  # empty rows: distance 1 to every other row
    X[5] = X[6]  # two identical rows: distance 0
    labels = rng.integers(0, 3, n) * 5 + 2  # any integer labels
    labels[[0, 5, 6]] = [40, 41, 41]  # a cluster of one sample (score 0) and one of two identical rows
    X = sp.csr_matrix(X) if sparse else X
    for seed in range(3):
        expected = silhouette_score(X, labels, metric="cosine", sample_size=sample_size, random_state=seed)
        assert cosine_silhouette(X, labels, sample_size, seed) == pytest.approx(expected, abs=1e-12)


def test_the_cosine_silhouette_is_nan_where_scikit_learn_has_none():
    X = np.random.default_rng(0).random((6, 4))
    assert np.isnan(cosine_silhouette(X, np.zeros(6, int)))  # one cluster
    assert np.isnan(cosine_silhouette(X, np.arange(6)))  # a cluster per sample
    assert np.isnan(cosine_silhouette(X, np.repeat([0, 1], 3), sample_size=1, random_state=0))  # one sample drawn


def test_the_cosine_silhouette_of_parallel_rows_and_any_input_type_is_scikit_learns():
    import pandas as pd
    import scipy.sparse as sp
    from sklearn.metrics import silhouette_score

    u = np.array([0.8, 0.8, 0.5])  # clusters of rows pointing one way: distances sum to rounding, not to 0
    parallel = [(np.vstack([np.outer([2, 3, 3, 2, 2], u), np.outer([1, 2], u), [[1, 0, 0], [0, 0, 1]]]),
                 [0, 0, 0, 0, 0, 1, 1, 2, 2]),
                (np.vstack([np.tile(u, (6, 1)), [[1, 0, 0], [0, 0, 1]]]), [0, 0, 0, 1, 1, 1, 2, 2])]
    rng = np.random.default_rng(0)
    X = rng.random((60, 10))
    labels = rng.integers(0, 3, 60)
    others = [(X < 0.4, labels), ((X * 30).astype(np.uint8), labels), ((X * 70000).astype(np.int32), labels),
              (X.tolist(), labels), (pd.DataFrame(X), labels), (sp.coo_matrix(X), labels)]
    for matrix, labels in parallel + others:
        expected = silhouette_score(matrix, labels, metric="cosine", sample_size=7, random_state=1)
        assert cosine_silhouette(matrix, labels, 7, 1) == pytest.approx(expected, abs=1e-12)
        assert cosine_silhouette(matrix, labels) == pytest.approx(silhouette_score(matrix, labels, metric="cosine"),
                                                                  abs=1e-12)
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        cosine_silhouette(X, labels)


def test_the_cluster_balance_is_the_smallest_cluster_against_an_even_share():
    from mtc.metrics import cluster_balance

    assert cluster_balance([0, 1, 0, 1], 2) == 1.0
    assert cluster_balance([0] * 9 + [1], 2) == pytest.approx(0.2)  # 1 row against an even share of 5
    assert cluster_balance([0, 0, 1, 1], 3) == 0.0  # an empty cluster
