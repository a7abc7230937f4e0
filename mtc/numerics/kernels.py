"""One kernel over the union of all tasks' samples, identical rows folded exactly.

A multi-task kernel method (S-MKC, AAAI-13 Eq. 14-15) needs every cross-task block K^(s,t),
so one kernel over the stacked samples of all tasks, with one Gaussian width for all of it.
Tasks built from overlapping classes share samples (NG3: 15,177 stacked rows, about half of
them repeats): with ``fold=True`` the kernel is built over the R distinct rows only, and
each task keeps the kernel row of each of its samples (``UnionKernel.rows``). Identical
samples have identical kernel rows and columns, so this is exact:
K[:, task t] Z = K_R (S_t Z), S_t (R x n_t) summing the rows of Z that share a kernel row,
computed on the range of columns that task t's rows span (distinct rows are numbered by
first occurrence, so each task's rows stay mostly together).

Gaussian width (``mode``, see affinity.gaussian_sigma2): sigma = width, or width x the median
distance between the samples of the union (the same statistic as affinity.median_positive
over the stacked samples: the median of the positive squared distances over pairs of
samples, each pair counted once). Pairs of identical samples are left out, and with folding
a pair of distinct rows (u, v) counts m_u m_v times (m = multiplicities), so folding does not
change it. The median is selected exactly without copying the n^2/2 distances (a radix
selection over the float bit patterns, four passes over row blocks): only the kernel matrix
itself is ever n x n.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from mtc.numerics.affinity import gaussian_sigma2
from mtc.numerics.linalg import dense_gram
from mtc.numerics.thin import thin_product

KERNELS = ("gaussian", "linear")
BLOCK_BYTES = 2**25  # working memory of one row block (Gram product, median passes)


class UnionKernel(NamedTuple):
    """K over the stacked samples of all tasks (or over their distinct rows).

    K : ndarray of shape (R, R)
        The kernel between kernel rows (R = number of distinct samples when folded, else n).
    rows : tuple of ndarray of shape (n_t,)
        For task t, the kernel row of each of its samples.
    counts : ndarray of shape (R,)
        How many stacked samples each kernel row stands for.
    spans : tuple of (int, int)
        (start, stop): task t's kernel rows lie in start..stop-1.
    direct : tuple of bool
        Whether task t's samples are exactly the kernel rows start..stop-1, in order (always
        without folding).
    """

    K: np.ndarray
    rows: tuple
    counts: np.ndarray
    spans: tuple
    direct: tuple

    @property
    def n_rows(self) -> int:
        return self.K.shape[0]

    def times(self, t: int, Z: np.ndarray) -> np.ndarray:
        """R x c product K[:, samples of task t] @ Z (Z: n_t x c): the cost of a kernel method,
        R (stop - start) c on a column slice of K (a view, no copy), as a thin_product (the bits of
        ``@``, about twice as fast: mtc.numerics.thin)."""
        start, stop = self.spans[t]
        if self.direct[t]:
            return thin_product(self.K[:, start:stop], Z)
        return thin_product(self.K[:, start:stop], fold_rows(Z, self.rows[t] - start, stop - start))

    def times_all(self, Zs: list) -> list:
        """[K[:, samples of task t] @ Zs[t] for every t] in one pass over K: B (R x sum c_t) holds
        each task's (folded) Z on its span's rows; the span boundaries cut K's columns into at
        most 2T segments, and each segment is one GEMM with the columns of B of the tasks whose
        spans cover it. The flops of ``times`` task by task (no product with B's zeros), K read
        once instead of once per task (NG3: spans of 3,976, 5,195 and 7,194 of 7,971 rows); the
        same sums up to rounding (the inner dimension is split at other places)."""
        widths = np.cumsum([0] + [Z.shape[1] for Z in Zs])
        B = np.zeros((self.n_rows, widths[-1]), order="F")
        for t, Z in enumerate(Zs):
            start, stop = self.spans[t]
            B[start:stop, widths[t]:widths[t + 1]] = Z if self.direct[t] else fold_rows(Z, self.rows[t] - start,
                                                                                          stop - start)
        bounds = sorted({bound for span in self.spans[:len(Zs)] for bound in span})
        out = np.zeros((self.n_rows, widths[-1]), order="F")
        for low, high in zip(bounds[:-1], bounds[1:]):
            covering = [np.arange(widths[t], widths[t + 1]) for t, (start, stop) in enumerate(self.spans[:len(Zs)])
                        if start <= low and high <= stop]
            if covering:
                columns = np.concatenate(covering)
                if columns[-1] - columns[0] + 1 == columns.size:  # consecutive tasks: views, no gather/scatter
                    columns = slice(columns[0], columns[-1] + 1)
                out[:, columns] += thin_product(self.K[:, low:high], B[low:high, columns])
        return [out[:, widths[t]:widths[t + 1]] for t in range(len(Zs))]

    def task_trace(self, t: int) -> float:
        """tr K^(t,t) = sum of K(x_i, x_i) over task t's samples."""
        return float(np.sum(np.diagonal(self.K)[self.rows[t]]))


def fold_rows(Z: np.ndarray, rows: np.ndarray, n_rows: int) -> np.ndarray:
    """S Z: the rows of Z summed into the kernel rows they map to (n_rows x c)."""
    S = sp.csr_matrix((np.ones(rows.shape[0]), (rows, np.arange(rows.shape[0]))), shape=(n_rows, rows.shape[0]))
    return np.asarray(S @ Z)


def distinct_rows(X) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first, inverse, counts) of the exactly identical rows of a dense or sparse X.

    Groups are numbered by first occurrence: ``first[g]`` is the first row of group g,
    ``inverse[i]`` the group of row i, ``counts[g]`` its size. Dense: np.unique on rows
    (-0.0 taken as 0.0). Sparse: rows sorted by (nnz, two fixed random projections), then
    neighbours with equal keys compared exactly; a key collision can only leave two equal
    rows apart, never merge different ones.
    """
    n = X.shape[0]
    if sp.issparse(X):
        X = sp.csr_matrix(X, copy=True)
        X.sum_duplicates()
        X.eliminate_zeros()
        nnz = np.diff(X.indptr)
        probes = np.asarray(X @ np.random.default_rng(0).standard_normal((X.shape[1], 2)))
        order = np.lexsort((probes[:, 1], probes[:, 0], nnz))
        same_key = (nnz[order[1:]] == nnz[order[:-1]]) & np.all(probes[order[1:]] == probes[order[:-1]], axis=1)
        linked = np.zeros(max(n - 1, 0), dtype=bool)
        candidates = np.flatnonzero(same_key)
        if candidates.size:
            difference = X[order[candidates + 1]] - X[order[candidates]]
            difference.eliminate_zeros()
            linked[candidates] = np.diff(difference.indptr) == 0
        group_sorted = np.concatenate([[0], np.cumsum(~linked)])
        inverse = np.empty(n, dtype=np.int64)
        inverse[order] = group_sorted
    else:
        _, inverse = np.unique(np.asarray(X) + 0.0, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
    n_groups = int(inverse.max()) + 1
    first = np.full(n_groups, n, dtype=np.int64)
    np.minimum.at(first, inverse, np.arange(n))
    relabel = np.empty(n_groups, dtype=np.int64)
    order = np.argsort(first, kind="stable")
    relabel[order] = np.arange(n_groups)
    inverse = relabel[inverse]
    return first[order], inverse, np.bincount(inverse, minlength=n_groups)


def gram(X) -> np.ndarray:
    """Dense X X' of a dense or sparse X (sparse: by row blocks, no sparse n x n product)."""
    if not sp.issparse(X):
        return dense_gram(X)
    n = X.shape[0]
    X = sp.csr_matrix(X)
    Xt = X.T.tocsr()
    out = np.empty((n, n))
    block = max(1, BLOCK_BYTES // (8 * n))
    for start in range(0, n, block):  # blocks of rows, not single samples
        out[start:start + block] = (X[start:start + block] @ Xt).toarray()
    return out


def squared_distances_from_gram(G: np.ndarray) -> np.ndarray:
    """||x_i - x_j||^2 = G_ii + G_jj - 2 G_ij, in place of G, clipped at 0 (diagonal exactly 0)."""
    sq = np.diagonal(G).copy()
    G *= -2.0
    G += sq[:, None]
    G += sq[None, :]
    np.maximum(G, 0.0, out=G)
    np.fill_diagonal(G, 0.0)
    return G


# (shift, width) of the bit chunks of a non-negative float64, high to low: 16 + 16 + 16 + 15 bits
_CHUNKS = ((47, 16), (31, 16), (15, 16), (0, 15))


def _pair_values(D2: np.ndarray, groups: np.ndarray | None, mult: np.ndarray | None):
    """A function yielding, per block of rows, the bit patterns (int64) and weights (or None)
    of D2[u, v] for u < v, D2 > 0 and groups[u] != groups[v], weighted mult[u] mult[v]."""
    R = D2.shape[0]
    block = max(1, BLOCK_BYTES // (8 * max(R, 1)))

    def blocks():
        for start in range(0, R, block):
            stop = min(start + block, R)
            sub = D2[start:stop, start:]
            keep = np.arange(start, R)[None, :] > np.arange(start, stop)[:, None]
            keep &= sub > 0
            if groups is not None:
                keep &= groups[start:stop, None] != groups[None, start:]
            weights = None if mult is None else (mult[start:stop, None] * mult[None, start:])[keep].astype(float)
            yield sub[keep].view(np.int64), weights

    return blocks


def _descend(hist: np.ndarray, prefix: int, rank: float, width: int) -> tuple[int, float]:
    """The bucket of ``hist`` holding the element of 0-based (weighted) rank ``rank``."""
    cumulative = np.cumsum(hist)
    bucket = int(np.searchsorted(cumulative, rank, side="right"))
    below = cumulative[bucket - 1] if bucket else 0.0
    return (prefix << width) | bucket, rank - below


def weighted_pair_median(D2: np.ndarray, groups: np.ndarray | None = None,
                         mult: np.ndarray | None = None) -> float:
    """np.median of the multiset {D2[u, v]: u < v, D2[u, v] > 0, groups differ}, pair (u, v)
    repeated mult[u] mult[v] times; 1.0 when it is empty (as affinity.median_positive).

    Exact: positive float64 values order as their bit patterns, so the elements of the two
    middle ranks are found chunk by chunk from weighted histograms of their bits.
    """
    blocks = _pair_values(D2, groups, mult)
    shift, width = _CHUNKS[0]
    hist = np.zeros(1 << width)
    for bits, weights in blocks():
        hist += np.bincount(bits >> shift, weights=weights, minlength=1 << width)
    total = int(round(hist.sum()))
    if total == 0:
        return 1.0
    states = [_descend(hist, 0, float(rank), width) for rank in ((total - 1) // 2, total // 2)]
    for shift, width in _CHUNKS[1:]:
        hists = {prefix: np.zeros(1 << width) for prefix, _ in states}
        mask = (1 << width) - 1
        for bits, weights in blocks():
            high = bits >> (shift + width)
            for prefix, hist in hists.items():
                chosen = high == prefix
                hist += np.bincount((bits[chosen] >> shift) & mask,
                                    weights=None if weights is None else weights[chosen], minlength=1 << width)
        states = [_descend(hists[prefix], prefix, rank, width) for prefix, rank in states]
    low, high = (float(np.array(prefix, dtype=np.int64).view(np.float64)) for prefix, _ in states)
    return low if total % 2 else (low + high) / 2.0


def union_kernel(matrices: list, kind: str = "gaussian", width: float = 1.0, mode: str = "relative",
                 fold: bool = True) -> UnionKernel:
    """The ``kind`` kernel (gaussian or linear) over the stacked rows of ``matrices``, over
    their distinct rows when ``fold``; Gaussian sigma from ``width`` and ``mode`` (relative:
    x the median distance of the union's samples, see the module docstring)."""
    if kind not in KERNELS:
        raise ValueError(f"unknown kernel {kind!r}; choose one of {KERNELS}")
    sizes = [X.shape[0] for X in matrices]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    stacked = sp.vstack(matrices, format="csr") if any(sp.issparse(X) for X in matrices) else np.vstack(matrices)
    first, inverse, counts = distinct_rows(stacked)
    repeats = counts.size < stacked.shape[0]
    if fold and repeats:
        G = gram(stacked[first])
        rows = tuple(inverse[offsets[t]:offsets[t + 1]] for t in range(len(matrices)))
        groups, mult = None, counts
    else:
        G = gram(stacked)
        rows = tuple(np.arange(offsets[t], offsets[t + 1]) for t in range(len(matrices)))
        groups, mult, counts = (inverse if repeats else None), None, np.ones(stacked.shape[0], dtype=np.int64)
    spans = tuple((int(r.min()), int(r.max()) + 1) for r in rows)
    direct = tuple(bool(np.array_equal(r, np.arange(r[0], r[0] + r.size))) for r in rows)
    if kind == "gaussian":
        D2 = squared_distances_from_gram(G)
        sigma2 = gaussian_sigma2(width, mode, lambda: weighted_pair_median(D2, groups, mult))
        D2 *= -1.0 / (2.0 * sigma2)
        G = np.exp(D2, out=D2)
    return UnionKernel(G, rows, counts, spans, direct)
