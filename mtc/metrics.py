"""Per-task clustering scores: accuracy, NMI (two normalisations), ARI, purity.

NMI: scikit-learn's default divides the mutual information by the arithmetic mean of the
two entropies (`nmi`); the papers' MATLAB code divides by max(H(C), H(K)) (`nmi_max`).
Use `nmi_max` when comparing with published numbers.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import linear_sum_assignment

# scikit-learn's scorers are imported in the functions that use them: the report reads
# METRIC_NAMES on the command line's rerun of a finished sweep, which skips scikit-learn (1.2 s).
METRIC_NAMES = ("acc", "nmi", "nmi_max", "ari", "purity")
UNMOVED = "unmoved"  # trial metric: 1 when every task's labels are its starting point's partition (validation.unmoved_tasks)
BALANCE = "balance"  # trial metric per task and its mean over tasks: cluster_balance


def cluster_balance(labels, n_clusters: int) -> float:
    """The smallest of ``n_clusters`` clusters as a share of an even split: its size times
    ``n_clusters`` over the samples (1 for equal clusters, 0 when one is empty). A partition
    that splits a few outlying rows off the rest scores near 0 however well separated they
    are, which is what the silhouette rewards (mtc.results.recommend)."""
    labels = np.asarray(labels)
    return float(np.bincount(labels, minlength=n_clusters).min() * n_clusters / labels.size)


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
    from sklearn.metrics.cluster import contingency_matrix

    labels_true, labels_pred = _check_pair(labels_true, labels_pred)
    table = contingency_matrix(labels_pred, labels_true)
    rows, cols = linear_sum_assignment(table, maximize=True)
    return float(table[rows, cols].sum() / labels_true.size)


def purity(labels_true, labels_pred) -> float:
    """Fraction of samples that belong to their cluster's majority class."""
    from sklearn.metrics.cluster import contingency_matrix

    labels_true, labels_pred = _check_pair(labels_true, labels_pred)
    table = contingency_matrix(labels_pred, labels_true)
    return float(table.max(axis=1).sum() / labels_true.size)


def nmi(labels_true, labels_pred, normalization: str = "arithmetic") -> float:
    from sklearn.metrics import normalized_mutual_info_score

    labels_true, labels_pred = _check_pair(labels_true, labels_pred)
    return float(
        normalized_mutual_info_score(labels_true, labels_pred, average_method=normalization)
    )


def score_task(labels_true, labels_pred) -> dict[str, float]:
    """All metrics of METRIC_NAMES for one task, from one contingency table (a trial scores
    every task: scikit-learn's scorers each rebuild and re-validate the table, about 3 ms a
    task, as long as many of the papers' fits). The same operations as the scorers above on
    the same table, so the same numbers to the last bit (tests/test_metrics.py)."""
    labels_true, labels_pred = _check_pair(labels_true, labels_pred)
    table = contingency_table(labels_true, labels_pred)
    rows, cols = linear_sum_assignment(table.T, maximize=True)
    n_samples = labels_true.size
    return {
        "acc": float(table.T[rows, cols].sum() / n_samples),
        **nmi_from_table(table),
        "ari": ari_from_table(table, n_samples),
        "purity": float(table.max(axis=0).sum() / n_samples),
    }


def contingency_table(labels_true, labels_pred) -> np.ndarray:
    """Classes x clusters counts (int64), both in sorted label order: scikit-learn's
    contingency_matrix from one bincount, without its input checks (about 0.5 ms)."""
    classes, class_index = np.unique(labels_true, return_inverse=True)
    clusters, cluster_index = np.unique(labels_pred, return_inverse=True)
    shape = (classes.size, clusters.size)
    return np.bincount(class_index.ravel() * shape[1] + cluster_index.ravel(), minlength=shape[0] * shape[1]
                       ).astype(np.int64).reshape(shape)


def marginal_entropy(counts: np.ndarray) -> float:
    """Entropy (nats) of a labelling from its class counts, as sklearn's ``_entropy``."""
    counts = counts[counts > 0].astype(np.float64)
    total = np.sum(counts)
    return float(-np.sum((counts / total) * (np.log(counts) - np.log(total))))


def mutual_information(table: np.ndarray) -> float:
    """mutual_info_score of an int64 contingency table: scikit-learn's steps on its non-zero
    cells in row order (its route for an array), without its input checks (about 0.6 ms)."""
    rows, cols = np.nonzero(table)
    counts = table[rows, cols]
    total, row_sums, col_sums = table.sum(), table.sum(axis=1), table.sum(axis=0)
    if row_sums.size == 1 or col_sums.size == 1:
        return 0.0
    log_counts = np.log(counts)
    shares = counts / total
    log_outer = -np.log(row_sums.take(rows) * col_sums.take(cols)) + math.log(row_sums.sum()) + math.log(col_sums.sum())
    terms = shares * (log_counts - math.log(total)) + shares * log_outer
    terms = np.where(np.abs(terms) < np.finfo(terms.dtype).eps, 0.0, terms)
    return float(np.clip(terms.sum(), 0.0, None))


def nmi_from_table(table: np.ndarray) -> dict[str, float]:
    """``nmi`` (arithmetic mean of the entropies) and ``nmi_max`` from an int64 contingency
    table, with normalized_mutual_info_score's limit cases (one class and one cluster: 1;
    no mutual information: 0)."""
    if table.shape[0] == table.shape[1] == 1:
        return {"nmi": 1.0, "nmi_max": 1.0}
    mi = mutual_information(table)
    if mi == 0:
        return {"nmi": 0.0, "nmi_max": 0.0}
    h_true = marginal_entropy(table.sum(axis=1))
    h_pred = marginal_entropy(table.sum(axis=0))
    return {"nmi": float(mi / np.mean([h_true, h_pred])), "nmi_max": float(mi / np.max([h_true, h_pred]))}


def ari_from_table(table: np.ndarray, n_samples: int) -> float:
    """adjusted_rand_score from an int64 contingency table (its pair confusion matrix)."""
    sum_squares = (table ** 2).sum()
    true_squares = (table.sum(axis=1) ** 2).sum()  # sum of n_c^2: scikit-learn's table' n_c, summed
    pred_squares = (table.sum(axis=0) ** 2).sum()  # sum of n_k^2: its table n_k, summed
    return ari_from_squares(sum_squares, true_squares, pred_squares, n_samples)


def ari_from_squares(sum_squares, true_squares, pred_squares, n_samples) -> float:
    """adjusted_rand_score from the sums of squares of a contingency table, of its row sums and
    of its column sums: scikit-learn's pair confusion matrix, then its formula in Python's
    integers (the same float, bit for bit)."""
    sum_squares, n_samples = int(sum_squares), int(n_samples)
    tp = sum_squares - n_samples
    fp = int(pred_squares) - sum_squares
    fn = int(true_squares) - sum_squares
    tn = n_samples ** 2 - fp - fn - sum_squares
    if fn == 0 and fp == 0:
        return 1.0
    return 2.0 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn))


def pairwise_ari(labels) -> np.ndarray:
    """adjusted_rand_score of every pair of rows of ``labels`` (runs x samples), in the order of
    ``itertools.combinations(rows, 2)``: each pair's contingency counts come from one bincount
    over the pair's joint codes, one run against all later runs at a time (a loop over runs,
    not samples). Equal to scikit-learn's, bit for bit (the same integers, the same formula)."""
    labels = np.asarray(labels)
    if labels.ndim != 2 or labels.shape[1] == 0:
        raise ValueError(f"labels must be runs x samples with at least one sample, got shape {labels.shape}")
    n_runs, n_samples = labels.shape
    codes = np.unique(labels, return_inverse=True)[1].reshape(n_runs, n_samples).astype(np.int64)
    k = int(codes.max()) + 1
    sizes = np.bincount((np.arange(n_runs)[:, None] * k + codes).ravel(), minlength=n_runs * k)
    squares = (sizes.reshape(n_runs, k).astype(np.int64) ** 2).sum(axis=1)
    scores = []
    for run in range(n_runs - 1):
        later = codes[run + 1:]
        joint = (np.arange(len(later))[:, None] * k + codes[run]) * k + later
        counts = np.bincount(joint.ravel(), minlength=len(later) * k * k).reshape(len(later), -1)
        sum_squares = (counts.astype(np.int64) ** 2).sum(axis=1)
        scores += [ari_from_squares(s, squares[run], q, n_samples)
                   for s, q in zip(sum_squares.tolist(), squares[run + 1:].tolist())]
    return np.array(scores)


ZERO_MEAN_DISTANCE = 1e-10  # a mean cosine distance below this is 0: a sum |c| - x_i . s_c of parallel rows is rounding


def cosine_silhouette(X, labels, sample_size: int | None = None, random_state=None) -> float:
    """scikit-learn's ``silhouette_score(X, labels, metric="cosine", sample_size=sample_size,
    random_state=random_state)`` (the same sample drawn; with an integer seed none when it would
    hold every sample, whose order changes only the rounding), NaN where it is undefined (fewer
    than 2 clusters, or as many as samples, in the sample). The cosine distance from a row x_i
    to a cluster c sums to |c| - x_i . s_c / |x_i|, with s_c the sum of c's rows at unit
    length, so every sample's distance to every cluster is two products with an n x k weight
    matrix: O(nnz k), where scikit-learn forms the n x n distances and loops over the samples
    (about 6 ms a task of a sub-second fit). The same number to rounding in float64
    (tests/test_metrics.py: within 1e-12), with one difference where rounding decides:
    scikit-learn clips each distance to [0, 2] and sums them, so rows pointing the same way are
    at distance 0 or a few eps, while here a mean distance below ZERO_MEAN_DISTANCE is 0 (the
    difference |c| - x_i . s_c is then rounding; a sample with both means 0 scores 0)."""
    import numbers

    import scipy.sparse as sp
    from sklearn.utils import check_random_state

    X = X.tocsr().astype(np.float64, copy=False) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    if not np.isfinite(X.data if sp.issparse(X) else X).all():
        raise ValueError("the silhouette needs finite input: X holds NaN or infinity")
    labels = np.asarray(labels)
    if sample_size is not None and (sample_size < X.shape[0] or not isinstance(random_state, numbers.Integral)):
        indices = check_random_state(random_state).permutation(X.shape[0])[:sample_size]  # silhouette_score's draw
        X, labels = X[indices], labels[indices]
    labels = np.unique(labels, return_inverse=True)[1].ravel()
    n, sizes = labels.size, np.bincount(labels)
    if not 2 <= sizes.size <= n - 1:
        return float("nan")
    squares = X.multiply(X).sum(axis=1) if sp.issparse(X) else np.einsum("ij,ij->i", X, X)
    norms = np.sqrt(np.asarray(squares).ravel())
    inverse = np.divide(1.0, norms, out=np.zeros(n), where=norms > 0)  # a zero row: distance 1 to every other
    rows = np.arange(n)
    weights = np.zeros((n, sizes.size))
    weights[rows, labels] = inverse
    similarity = np.asarray(X @ np.asarray(X.T @ weights)) * inverse[:, None]  # n x k: x_i . s_c / |x_i|
    distances = sizes - similarity  # sum over c of the distances from i, d(i, i) = 1 - x_i . x_i / |x_i|^2 among them
    distances[rows, labels] -= norms == 0  # d(i, i) = 0, as scikit-learn's
    distances[distances < ZERO_MEAN_DISTANCE * sizes] = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        intra = distances[rows, labels] / (sizes[labels] - 1)
        distances[rows, labels] = np.inf
        inter = (distances / sizes).min(axis=1)
        scores = (inter - intra) / np.maximum(intra, inter)
    scores[sizes[labels] == 1] = 0.0  # a cluster of one sample: 0 (scikit-learn's 0 / 0)
    return float(np.mean(np.nan_to_num(scores)))  # 0 / 0: intra = inter = 0
