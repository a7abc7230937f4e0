"""Dense/sparse helpers and thin SVDs computed from Gram matrices."""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse as sp


def as_dense(X) -> np.ndarray:
    """X as a dense ndarray (a sparse matrix is densified, anything else passed to asarray)."""
    return X.toarray() if sp.issparse(X) else np.asarray(X)


def squared_norm(M) -> float:
    """||M||_F^2 of a dense or sparse matrix, or of an operator that knows its own
    (``M.squared_norm()``, e.g. mtc.numerics.affinity.CosineProduct)."""
    if hasattr(M, "squared_norm"):
        return M.squared_norm()
    return float(M.multiply(M).sum()) if sp.issparse(M) else float(np.sum(M * M))


def gram_svd(X) -> tuple[np.ndarray, np.ndarray]:
    """(U, s) of the thin SVD X = U S V' computed from the n x n Gram matrix X X' = U S^2 U'
    (cheap when d > n), keeping singular values with s^2 > 1e-12 s_max^2. V = X' U / s."""
    s2, U = scipy.linalg.eigh(as_dense(X @ X.T))
    keep = s2 > 1e-12 * max(s2.max(), 1e-300)
    return U[:, keep], np.sqrt(s2[keep])


def right_gram_svd(X) -> tuple[np.ndarray, np.ndarray]:
    """(V, s) of the thin SVD X = U S V' computed from the d x d Gram matrix X'X = V S^2 V'
    (cheap when n > d: no n x n array), keeping s^2 > 1e-12 s_max^2. U = X V / s."""
    s2, V = scipy.linalg.eigh(as_dense(X.T @ X))
    keep = s2 > 1e-12 * max(s2.max(), 1e-300)
    return V[:, keep], np.sqrt(s2[keep])


def row_space_coordinates(X) -> np.ndarray:
    """n x r coordinates U S of the rows of X in an orthonormal basis of their span: every
    pairwise distance and inner product is kept, so k-means on them is k-means on X, but
    costs O(n r) per step instead of O(n d) when d > n (documents, stacked mSDA features)."""
    U, s = gram_svd(X)
    return U * s[None, :]
