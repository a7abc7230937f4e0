"""Affinity matrices between the samples of one task, and pairwise squared distances."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.metrics.pairwise import cosine_similarity, euclidean_distances

from mtc.numerics.linalg import as_dense

AFFINITIES = ("cosine", "gaussian")
WIDTH_MODES = ("relative", "absolute")  # Gaussian width: x the median distance, or sigma itself


def row_norms_sq(X) -> np.ndarray:
    """||x_i||^2 for every row of a dense or sparse X."""
    return np.asarray(X.multiply(X).sum(axis=1)).ravel() if sp.issparse(X) else np.sum(X * X, axis=1)


def squared_distances(A, B: np.ndarray | None = None, a_sq: np.ndarray | None = None) -> np.ndarray:
    """||a_i - b_j||^2 between the rows of A (dense or sparse) and of B (B = A when omitted),
    clipped at 0; ``a_sq`` are A's squared row norms when already known."""
    B = A if B is None else B
    a2 = row_norms_sq(A) if a_sq is None else a_sq
    return np.maximum(a2[:, None] + row_norms_sq(B)[None, :] - 2.0 * np.asarray(A @ B.T), 0.0)


def cosine_affinity(X) -> np.ndarray:
    """Cosine similarity, negative values clipped to 0 so that SNMF/Ncut get M >= 0."""
    M = cosine_similarity(X, dense_output=True)
    np.maximum(M, 0.0, out=M)
    return M


class CosineProduct:
    """The clipped cosine affinity as a product, M = N N' + R: N the rows scaled to unit
    length, R = max(-N N', 0) the sparse part that cosine_affinity's clipping removes (None
    when no cosine is negative, e.g. for non-negative rows). M @ Y costs N (N' Y) and R Y,
    O(n d h + nnz(R) h), instead of a pass over the dense n x n M: 20NG's sparse rows (2 x
    90,000 non-zeros against 1558^2 entries per product), Handdigits' mSDA features (d = 1024
    against n = 5000; at corruption 0.5-0.7 at most 1.1 % of the cosines are negative).

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n, d)
        The rows.
    correction : sparse matrix of shape (n, n) or None, default=None
        R; None when no cosine is negative.
    squared_norm : float or None, default=None
        ||M||_F^2 when already known; otherwise computed (densely) when asked.
    """

    def __init__(self, X, correction=None, squared_norm=None):
        from sklearn.preprocessing import normalize

        unit = normalize(X)  # zero rows stay zero, as in cosine_similarity
        self.N = sp.csr_matrix(unit) if sp.issparse(X) else unit
        self.correction = correction
        self._squared_norm = squared_norm
        self.shape = (X.shape[0], X.shape[0])

    def __matmul__(self, Y: np.ndarray) -> np.ndarray:
        MY = np.asarray(self.N @ (self.N.T @ Y))
        return MY if self.correction is None else MY + self.correction @ Y

    def squared_norm(self) -> float:
        """||M||_F^2."""
        if self._squared_norm is None:
            M = as_dense(self.N @ self.N.T)
            if self.correction is not None:
                M = np.maximum(M, 0.0)
            self._squared_norm = float(np.sum(M * M))
        return self._squared_norm


MAX_NEGATIVE_SHARE = 0.02  # above it, R Y (a sparse product) costs about as much as the dense M Y


def cosine_operator(X):
    """What multiplies by the clipped cosine affinity of X (equal products to rounding):
    - non-negative sparse rows with fewer than n^2 / 2 non-zeros: CosineProduct (M = N N');
    - rows of width d <= n / 4 whose cosines are at most MAX_NEGATIVE_SHARE negative:
      CosineProduct with the sparse clipped part R (4 n d + nnz(R) instead of 2 n^2 flops
      per column of Y);
    - otherwise cosine_affinity(X), dense."""
    n, d = X.shape
    if sp.issparse(X) and (X.nnz == 0 or X.data.min() >= 0) and 2 * X.nnz < n**2:
        return CosineProduct(X)
    if 4 * d > n:
        return cosine_affinity(X)
    M = cosine_similarity(X, dense_output=True)
    negative = M < 0.0
    n_negative = int(np.count_nonzero(negative))
    if n_negative > MAX_NEGATIVE_SHARE * n * n:
        np.maximum(M, 0.0, out=M)
        return M
    correction = sp.csr_matrix(np.where(negative, -M, 0.0)) if n_negative else None
    np.maximum(M, 0.0, out=M)
    return CosineProduct(X, correction, float(np.sum(M * M)))


def median_positive(D2: np.ndarray) -> float:
    """Median of the non-zero off-diagonal squared distances (bandwidth heuristic)."""
    positive = D2[np.triu_indices_from(D2, k=1)]
    positive = positive[positive > 0]
    return float(np.median(positive)) if positive.size else 1.0


def gaussian_sigma2(width: float, mode: str, median_d2) -> float:
    """sigma^2 of a Gaussian kernel: width^2 x the median squared distance (``relative``, the
    MTCMRL/MTCFIR papers' heuristic) or width^2 (``absolute``: width is sigma, as the AAAI-13
    paper's grid {0.1, 1, 10, 100}). ``median_d2`` is a value or a function returning it (only
    called in the relative mode)."""
    if mode == "absolute":
        return float(width) ** 2
    if mode == "relative":
        return width**2 * (median_d2() if callable(median_d2) else median_d2)
    raise ValueError(f"unknown width mode {mode!r}; choose one of {WIDTH_MODES}")


def gaussian_affinity(X, width: float = 1.0, mode: str = "relative") -> np.ndarray:
    """exp(-||x_i - x_j||^2 / (2 sigma^2)) with sigma^2 = width^2 * median squared distance
    (``mode="relative"``) or sigma = width (``mode="absolute"``)."""
    D2 = euclidean_distances(as_dense(X), squared=True)
    sigma2 = gaussian_sigma2(width, mode, lambda: median_positive(D2))
    return np.exp(-D2 / (2.0 * sigma2))


def affinity_matrix(X, kind: str, width: float = 1.0) -> np.ndarray:
    """The ``kind`` affinity (one of AFFINITIES) between the rows of X."""
    if kind == "cosine":
        return cosine_affinity(X)
    if kind == "gaussian":
        return gaussian_affinity(X, width)
    raise ValueError(f"unknown affinity {kind!r}; choose one of {AFFINITIES}")
