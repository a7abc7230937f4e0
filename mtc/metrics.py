"""Per-task clustering scores: accuracy, NMI (two normalisations), ARI, purity.

NMI: scikit-learn's default divides the mutual information by the arithmetic mean of the
two entropies (`nmi`); the papers' MATLAB code divides by max(H(C), H(K)) (`nmi_max`).
Use `nmi_max` when comparing with published numbers.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.metrics.cluster import contingency_matrix

METRIC_NAMES = ("acc", "nmi", "nmi_max", "ari", "purity")


def _check_pair(labels_true, labels_pred):
    labels_true = np.asarray(labels_true)
    labels_pred = np.asarray(labels_pred)
    if labels_true.shape != labels_pred.shape or labels_true.ndim != 1:
        raise ValueError(
            f"labels must be 1-D of equal length, got {labels_true.shape} and {labels_pred.shape}"
        )
    if labels_true.size == 0:
        raise ValueError("labels are empty")
    return labels_true, labels_pred


def clusters_in_class_order(labels_true, labels_pred, n_clusters: int) -> tuple[np.ndarray, np.ndarray]:
    """(cluster ids, matched class of each) ordered by matched class (Hungarian matching,
    as in the accuracy); clusters matched to no class come last with class -1."""
    labels_true, labels_pred = _check_pair(labels_true, labels_pred)
    counts = np.zeros((n_clusters, int(labels_true.max()) + 1), dtype=np.int64)
    np.add.at(counts, (labels_pred, labels_true), 1)
    clusters, classes = linear_sum_assignment(counts, maximize=True)
    by_class = np.argsort(classes)
    unmatched = np.setdiff1d(np.arange(n_clusters), clusters)
    return (np.concatenate([clusters[by_class], unmatched]),
            np.concatenate([classes[by_class], np.full(unmatched.size, -1)]))


def accuracy(labels_true, labels_pred) -> float:
    """Fraction of samples on the best one-to-one cluster/class matching."""
    labels_true, labels_pred = _check_pair(labels_true, labels_pred)
    table = contingency_matrix(labels_pred, labels_true)
    rows, cols = linear_sum_assignment(table, maximize=True)
    return float(table[rows, cols].sum() / labels_true.size)


def purity(labels_true, labels_pred) -> float:
    """Fraction of samples that belong to their cluster's majority class."""
    labels_true, labels_pred = _check_pair(labels_true, labels_pred)
    table = contingency_matrix(labels_pred, labels_true)
    return float(table.max(axis=1).sum() / labels_true.size)


def nmi(labels_true, labels_pred, normalization: str = "arithmetic") -> float:
    labels_true, labels_pred = _check_pair(labels_true, labels_pred)
    return float(
        normalized_mutual_info_score(labels_true, labels_pred, average_method=normalization)
    )


def score_task(labels_true, labels_pred) -> dict[str, float]:
    """All metrics of METRIC_NAMES for one task."""
    labels_true, labels_pred = _check_pair(labels_true, labels_pred)
    return {
        "acc": accuracy(labels_true, labels_pred),
        "nmi": nmi(labels_true, labels_pred, "arithmetic"),
        "nmi_max": nmi(labels_true, labels_pred, "max"),
        "ari": float(adjusted_rand_score(labels_true, labels_pred)),
        "purity": purity(labels_true, labels_pred),
    }
