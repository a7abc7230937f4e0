"""Affinity matrices between the samples of one task."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.metrics.pairwise import cosine_similarity, euclidean_distances

AFFINITIES = ("cosine", "gaussian")


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


def gaussian_affinity(X, width: float = 1.0) -> np.ndarray:
    """exp(-||x_i - x_j||^2 / (2 sigma^2)) with sigma^2 = width^2 * median squared distance."""
    D2 = euclidean_distances(X, squared=True)
    sigma2 = width**2 * median_positive(D2)
    return np.exp(-D2 / (2.0 * sigma2))


def affinity_matrix(X, kind: str, width: float = 1.0) -> np.ndarray:
    if kind == "cosine":
        return cosine_affinity(X)
    if kind == "gaussian":
        return gaussian_affinity(X.toarray() if sp.issparse(X) else X, width)
    raise ValueError(f"unknown affinity {kind!r}; choose one of {AFFINITIES}")
