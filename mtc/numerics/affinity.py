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
