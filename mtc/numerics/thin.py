"""A @ B for a large dense A and a thin B (a few columns), as (B'A')' wherever that is the
same product to the last bit.

OpenBLAS computes a tall-by-thin product A @ B (m x n by n x c, c of a few clusters) at about
half its speed on the transposed operands: on one thread, 1,336 x 1,330 by 4 (MTCMRL's ridge
factor on a 20NG task) 1.36 ms against 0.92 ms for (B'A')', and a 7,971 x 3,976 column slice
of NG3's kernel by 3 (S-MKC) 54.0 ms against 31.1 ms. Both compute every entry as the same dot
product over n, and on this machine's OpenBLAS they agree to the bit for most shapes, but not
for all (small products take other kernels, and 16 columns another blocking): so the route
is chosen per shape by a probe, made once per process for each (shape, memory order, BLAS
thread count), that computes both on random operands of that shape and order and keeps the
transposed route only if every entry agrees to the bit. Random operands, not the caller's:
with data whose every sum has at most two terms (a zero or very sparse A) different orders
agree by chance, and the answer is kept for every later A of that shape. The results are
therefore exactly those of A @ B; the gain is speed only (``benchmarks/thin_products.py``).
"""

from __future__ import annotations

import numpy as np

PROBE_SEED = 0
_probed: dict[tuple, bool] = {}
_blas = None


def blas_threads() -> tuple:
    """Threads of every loaded BLAS (threadpoolctl), read cheaply after the first call: a
    product's kernels, and so its bits, can change with them."""
    global _blas
    if _blas is None:
        from threadpoolctl import ThreadpoolController

        _blas = ThreadpoolController().select(user_api="blas").lib_controllers
    return tuple(library.get_num_threads() for library in _blas)


def memory_order(A: np.ndarray) -> str:
    """'C' when A's rows are contiguous runs, 'F' when its columns are, '' otherwise (a
    BLAS call copies such an array first, and the order of the copy is numpy's)."""
    if A.strides[-1] == A.itemsize:
        return "C"
    if A.strides[0] == A.itemsize:
        return "F"
    return ""


def transposed_agrees(shape: tuple, columns: int, orders: tuple, dtype) -> bool:
    """Whether (B'A')' equals A @ B to the bit for random A and B of these shapes, memory
    orders and dtype, on the BLAS threads of now; probed once per process and key."""
    key = (shape, columns, orders, np.dtype(dtype).str, blas_threads())
    if key not in _probed:
        rng = np.random.default_rng(PROBE_SEED)
        A = np.asarray(rng.standard_normal(shape), dtype=dtype, order=orders[0] or "C")
        B = np.asarray(rng.standard_normal((shape[1], columns)), dtype=dtype, order=orders[1] or "C")
        _probed[key] = bool(np.array_equal(A @ B, (B.T @ A.T).T))
    return _probed[key]


def thin_product(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """A @ B, computed as (B'A')' when a probe of this shape found that the same to the bit
    (module docstring). For A of at least as many rows as B has columns; anything else
    (sparse, a vector, other dtypes than A's and B's shared one) is A @ B."""
    if not (isinstance(A, np.ndarray) and isinstance(B, np.ndarray) and A.ndim == 2 and B.ndim == 2
            and A.dtype == B.dtype and A.dtype.kind == "f" and B.shape[1] < A.shape[0]):
        return A @ B
    if transposed_agrees(A.shape, B.shape[1], (memory_order(A), memory_order(B)), A.dtype):
        return np.ascontiguousarray((B.T @ A.T).T)  # C-ordered as A @ B: later sums run in its order
    return A @ B
