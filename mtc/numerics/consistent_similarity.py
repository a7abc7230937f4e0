"""MTCFIR step 2 (CJC-19): a consistent similarity matrix per task from every task's relations (Eq. 7-20).

For task t: relation matrices V^(ts) (cosine, n_t x n_s) to every task s (s = t included),
task weights alpha_s^t = |V^(ts) >= eps^t| / (n_t n_s) with eps^t the median over columns of
the (l_t + 1)-th largest entry of V^(tt) (Eq. 20; the largest is the point itself), the
distances A_ij = sum_s alpha_s^t ||V^(ts)_i - V^(ts)_j||^2 (Algorithm 3, line 6) and, per
column j, the adaptive-neighbour solution of Eq. 14-19: with B_j the column sorted
ascending (B_1j = A_jj = 0 is the point itself),

  M_ij = (B_{l+2,j} - A_ij) / (l B_{l+2,j} - sum_{i'=2}^{l+1} B_i'j)  for the l nearest i,
  M_ij = 0 otherwise,

which puts every column on the simplex with exactly l non-zeros. Sec. 3.5 then scales each
column to a maximum of 1 and symmetrises, M = (M + M') / 2.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import normalize

from mtc.numerics.affinity import squared_distances
from mtc.numerics.cache import Cache, blas_threads, library_versions
from mtc.numerics.linalg import as_dense, self_gram

RELATIONS_VERSION = 1  # of kept_relations' files: bump when relation_matrices computes them differently


def relation_matrices(features: list[np.ndarray]) -> dict[tuple[int, int], np.ndarray]:
    """V^(ts) = cosine(Z^t, Z^s) for every ordered pair, s = t included (V^(st) = V^(ts)')."""
    unit = [normalize(Z) for Z in features]
    relations = {}
    for t in range(len(unit)):
        for s in range(t, len(unit)):
            relations[(t, s)] = self_gram(unit[t]) if s == t else as_dense(unit[t] @ unit[s].T)
            relations[(s, t)] = relations[(t, s)].T
    return relations


def kept_relations(features: list, key, cache: Cache | None) -> dict[tuple[int, int], np.ndarray]:
    """``relation_matrices(features)``, kept in ``cache`` by ``key`` (which must name the
    features: MTCFIR's features key) and, when computed on one BLAS thread and no larger than
    the features (the n^2 / 2 entries against n d: wide features, such as 20NG's mSDA features,
    143 MB of relations against 513 MB; Handdigits' 10,000 x 4,096 would need 600 MB a
    corruption and are not kept), as a file in the cache's folder: one worker of a machine
    computes them per features, the others (and the other sweeps on them, MTCFIR-nR's) read
    the file. The blocks V^(ts), s >= t, are what is kept, each as relation_matrices gives it
    (V^(tt) too, in its memory order); V^(st) is the transpose of V^(ts) as there, so the same
    arrays to the bit and in the same layout."""
    if cache is None:
        return relation_matrices(features)
    T = len(features)
    pairs = [(t, s) for t in range(T) for s in range(t, T)]
    threads = blas_threads()
    file_key = (key, threads, RELATIONS_VERSION, *library_versions())
    shapes = [(features[t].shape[0], features[s].shape[0]) for t, s in pairs]
    small = sum(a * b for a, b in shapes) <= sum(F.shape[0] * F.shape[1] for F in features)

    def upper_blocks():
        relations = relation_matrices(features)
        return [relations[pair] for pair in pairs]

    blocks = cache.get("mtcfir_relations", file_key, upper_blocks, keep=1, persist=threads == 1 and small,
                       valid=lambda kept: [V.shape for V in kept] == shapes and all(V.dtype == np.float64 for V in kept))
    relations = {}
    for (t, s), V in zip(pairs, blocks):
        relations[(t, s)] = V
        if s != t:
            relations[(s, t)] = V.T
    return relations


def task_weights(relations: dict, n_neighbours: list[int]) -> np.ndarray:
    """alpha[t, s] = alpha_s^t of Eq. 20 (T x T, unnormalised)."""
    T = len(n_neighbours)
    alpha = np.zeros((T, T))
    for t in range(T):
        Vtt = relations[(t, t)]
        # row l of U^t (each column in descending order): the (l+1)-th largest entry of each
        # column, an order statistic, so a partition gives it without sorting the columns (the
        # same values; a full sort took 2.3 s of a Handdigits fit's 12.7 s similarity step), along
        # the rows of a C-ordered copy of -V^(tt)' (0.4 s instead of 1.3 s down the strided columns
        # of Handdigits' 5,000 x 5,000 V^(tt))
        rank = min(n_neighbours[t], Vtt.shape[0] - 1)
        columns = np.negative(Vtt.T, order="C")
        columns.partition(rank, axis=1)
        threshold = np.median(-columns[:, rank])
        for s in range(T):
            alpha[t, s] = np.count_nonzero(relations[(t, s)] >= threshold) / relations[(t, s)].size
    return alpha


def neighbour_weights(A: np.ndarray, l: int) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 14-19 for every column of A at once: (rows, weights), both l x n, column j's l
    nearest rows (the point itself excluded) and their weights, which sum to 1.

    The order statistics are selected along the rows of a C-ordered copy of A' (each column of
    A contiguous: the same values in the same sequence as down the strided column, so the same
    selection); the l + 2 picked entries of each column are then handled as l + 2 rows, so their
    sums run in the same order. With consistent_similarity's sparse build, 0.98 s -> 0.37 s of
    CPU for a 5,000 x 5,000 A and l = 150 (tests/test_hotspots.py: the same bits)."""
    n = A.shape[0]
    if not 1 <= l <= n - 2:
        raise ValueError(f"number of neighbours l must be in [1, n_t - 2 = {n - 2}], got {l}")
    columns = np.array(A.T, order="C")
    np.fill_diagonal(columns, -np.inf)  # the point itself comes first (B_1j), never a neighbour
    order = np.ascontiguousarray(np.argpartition(columns, l + 1, axis=1)[:, : l + 2].T)  # self, l nearest, (l+1)-th
    picked = np.take_along_axis(columns.T, order, axis=0)
    sort = np.argsort(picked, axis=0)
    order, picked = np.take_along_axis(order, sort, axis=0), np.take_along_axis(picked, sort, axis=0)
    nearest, next_one = picked[1: l + 1], picked[l + 1]
    denominator = l * next_one - nearest.sum(axis=0)  # 2 beta_j, Eq. 19
    weights = (next_one[None, :] - nearest) / np.maximum(denominator, 1e-300)[None, :]  # Eq. 14, 16
    tied = denominator <= 1e-300  # all l + 1 candidates equally far: share the mass evenly
    weights[:, tied] = 1.0 / l
    return order[1: l + 1], weights


def adaptive_neighbours(A: np.ndarray, l: int) -> np.ndarray:
    """Eq. 14-19 for every column of A at once: each column on the simplex, l non-zeros (dense)."""
    rows, weights = neighbour_weights(A, l)
    M = np.zeros(A.shape)
    np.put_along_axis(M, rows, weights, axis=0)
    return M


def consistent_similarity(A: np.ndarray, l: int, density: float = 0.25):
    """rescale_and_symmetrise(adaptive_neighbours(A, l)) from the l x n weights alone, as CSR
    when fewer than ``density`` of its entries are non-zero (at most 2 l a row), else dense.

    The same numbers, bit for bit: each column's maximum is its largest weight (weights are
    non-negative), and (S + S')/2 adds the same two scaled weights where both are stored."""
    rows, weights = neighbour_weights(A, l)
    n = A.shape[0]
    scaled = weights / np.maximum(weights.max(axis=0, keepdims=True), 1e-300)  # Sec. 3.5
    S = sp.csr_matrix((scaled.ravel(), (rows.ravel(), np.tile(np.arange(n), l))), shape=(n, n))
    M = (S + S.T) / 2.0
    M.eliminate_zeros()
    M.sort_indices()
    return M if M.nnz < density * n * n else M.toarray()


def distances_use_relations(features: list) -> bool:
    """Whether distance_matrices computes A^t from the relations (features at least as wide
    as all tasks' samples together) rather than from the features themselves."""
    return features[0].shape[1] >= sum(Z.shape[0] for Z in features)


def distance_matrices(features: list, relations: dict | None, alpha: np.ndarray):
    """A^t of Algorithm 3, line 6, for every task t in turn (one n_t x n_t matrix held at a
    time): A^t_ij = sum_s alpha_s^t ||V^(ts)_i - V^(ts)_j||^2.

    Two exact routes. From the relations, sum_s n_t^2 n_s flops per task. From the features,
    when their width d is below sum_s n_s (digits: d = 1024 after mSDA, n_s = 5000): with U
    the L2-normalised rows, V^(ts) = U_t U_s', so ||V^(ts)_i - V^(ts)_j||^2 = (u_i - u_j)'
    U_s'U_s (u_i - u_j) and A^t = a 1' + 1 a' - 2 U_t C U_t' with C = sum_s alpha_s^t U_s'U_s
    (d x d, the Grams U_s'U_s computed once for all tasks) and a_i = u_i' C u_i: one n_t^2 d
    product per task (``relations`` is then not read and may be None)."""
    T = len(features)
    if distances_use_relations(features):
        for t in range(T):
            yield sum(alpha[t, s] * squared_distances(relations[(t, s)]) for s in range(T) if alpha[t, s] > 0)
        return
    unit = [normalize(Z) for Z in features]
    grams = [self_gram(U.T) for U in unit]
    for t in range(T):
        C = sum(alpha[t, s] * grams[s] for s in range(T) if alpha[t, s] > 0)
        gram = np.asarray(np.asarray(unit[t] @ C) @ unit[t].T)
        a = np.diag(gram)
        yield np.maximum(a[:, None] + a[None, :] - 2.0 * gram, 0.0)


def rescale_and_symmetrise(M: np.ndarray) -> np.ndarray:
    """Sec. 3.5: each column scaled to a maximum of 1, then (M + M') / 2."""
    M = M / np.maximum(M.max(axis=0, keepdims=True), 1e-300)
    return (M + M.T) / 2.0
