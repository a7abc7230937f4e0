"""Dense/sparse helpers and thin SVDs computed from Gram matrices."""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse as sp


def as_dense(X) -> np.ndarray:
    """X as a dense ndarray (a sparse matrix is densified, anything else passed to asarray)."""
    return X.toarray() if sp.issparse(X) else np.asarray(X)


def summed(terms) -> np.ndarray:
    """The sum of an iterable of arrays, added in place into the first term, which must be a
    fresh array (a product's result, say): the bits of ``sum(terms)`` without its copies (sum
    starts from 0, so each term costs a new array; a negative zero aside, 0 + a is a)."""
    terms = iter(terms)
    total = next(terms)
    for term in terms:
        total += term
    return total


PAIRWISE_BLOCK = 128  # numpy adds up to this many terms of a contiguous sum in one pairwise block


def row_sums(A: np.ndarray) -> np.ndarray:
    """``np.sum(A, axis=1)`` of a 2-D float array, to the bit, taken column by column.

    numpy sums each row whose terms lie next to each other in memory (a C-ordered array's),
    of at most 128 terms, from +0 in eight running sums (the first eight terms, then each next
    eight added in turn), combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then
    the terms left over added one at a time; fewer than eight terms are added in order. The
    same additions as whole columns are c vector operations instead of n reductions of c
    terms: for a 1,850 x 2 array 2 us against 30 (SPMTC's per-example losses). Other arrays
    (wider, or rows not contiguous, which numpy already sums column by column) go to
    ``np.sum``. tests/test_numerics.py checks the bits for 1 to 130 columns.
    """
    A = np.asarray(A)
    c = A.shape[1]
    if c > PAIRWISE_BLOCK or c == 0 or A.dtype.kind != "f" or A.strides[1] != A.itemsize:
        return np.sum(A, axis=1)
    if c < 8:
        total = A[:, 0] + 0.0  # numpy's sum starts from +0: a row of -0 sums to +0
        for j in range(1, c):
            total += A[:, j]
        return total
    running = [A[:, j].copy() for j in range(8)]
    start = 8
    while start <= c - 8:
        for j in range(8):
            running[j] += A[:, start + j]
        start += 8
    total = running[0] + running[1]
    total += running[2] + running[3]
    rest = running[4] + running[5]
    rest += running[6] + running[7]
    total += rest
    for j in range(start, c):
        total += A[:, j]
    total += 0.0  # numpy's sum starts from +0: a row of -0 sums to +0
    return total


def row_dots(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``np.sum(A * B, axis=1)``, to the bit (``row_sums`` of the elementwise product)."""
    return row_sums(A * B)


def squared_norm(M) -> float:
    """||M||_F^2 of a dense or sparse matrix, or of an operator that knows its own
    (``M.squared_norm()``, e.g. mtc.numerics.affinity.CosineProduct)."""
    if hasattr(M, "squared_norm"):
        return M.squared_norm()
    return float(M.multiply(M).sum()) if sp.issparse(M) else float(np.sum(M * M))


SYRK_ROWS = 10_000  # a dense X X' with more rows is computed by row blocks (dense_gram)
GRAM_BLOCK_BYTES = 2**25  # working memory of one row block of dense_gram


def dense_gram(X: np.ndarray) -> np.ndarray:
    """X X' of a dense X. numpy computes ``X @ X.T`` with BLAS's SYRK, which OpenBLAS 0.3.31
    (numpy 2.4's wheels) crashes the process on (SIGSEGV) for large products on two threads,
    numpy#19685; measured here: 15,500 x 2,000, 16,000 x 700, 20,000 x 300 and 30,000 x 100
    crash, 14,000 x 1,000 and 40,000 x 50 do not. Up to SYRK_ROWS rows this is that product
    (the same bits as before); above, blocks of rows by GEMM, the same values to rounding."""
    X = np.asarray(X)
    n = X.shape[0]
    if n <= SYRK_ROWS:
        return X @ X.T
    out = np.empty((n, n), dtype=np.matmul(X[:1], X[:1].T).dtype)  # the product's own dtype
    rows = max(1, GRAM_BLOCK_BYTES // (8 * n))
    for start in range(0, n, rows):  # a block is not X itself, so numpy takes GEMM
        np.matmul(X[start:start + rows], X.T, out=out[start:start + rows])
    return out


def self_gram(X) -> np.ndarray:
    """X X' as a dense array, of a dense (dense_gram) or sparse X."""
    return as_dense(X @ X.T) if sp.issparse(X) else dense_gram(X)


def gram_svd(X) -> tuple[np.ndarray, np.ndarray]:
    """(U, s) of the thin SVD X = U S V' computed from the n x n Gram matrix X X' = U S^2 U'
    (cheap when d > n), keeping singular values with s^2 > 1e-12 s_max^2. V = X' U / s."""
    s2, U = scipy.linalg.eigh(self_gram(X))
    keep = s2 > 1e-12 * max(s2.max(), 1e-300)
    return U[:, keep], np.sqrt(s2[keep])


def right_gram_svd(X) -> tuple[np.ndarray, np.ndarray]:
    """(V, s) of the thin SVD X = U S V' computed from the d x d Gram matrix X'X = V S^2 V'
    (cheap when n > d: no n x n array), keeping s^2 > 1e-12 s_max^2. U = X V / s."""
    s2, V = scipy.linalg.eigh(self_gram(X.T))
    keep = s2 > 1e-12 * max(s2.max(), 1e-300)
    return V[:, keep], np.sqrt(s2[keep])


def row_space_coordinates(X, svd: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """n x r coordinates U S of the rows of X in an orthonormal basis of their span: every
    pairwise distance and inner product is kept, so k-means on them is k-means on X, but
    costs O(n r) per step instead of O(n d) when d > n (documents, stacked mSDA features).
    ``svd``: ``gram_svd(X)`` when the caller has it already (the same bits, one eigh less)."""
    U, s = gram_svd(X) if svd is None else svd
    return U * s[None, :]
