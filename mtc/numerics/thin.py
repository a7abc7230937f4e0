"""A @ B for a large dense A and a thin B (a few columns), as (B'A')' wherever that is the
same product to the last bit.

OpenBLAS computes a tall-by-thin product A @ B (m x n by n x c, c of a few clusters) at about
half its speed on the transposed operands: on one thread, 1,336 x 1,330 by 4 (MTCMRL's ridge
basis on a 20NG task) 3.36 ms against 2.03 ms for (B'A')', and a 7,971 x 3,976 column slice of
NG3's kernel by 3 (S-MKC) 58.1 ms against 28.0 ms (``benchmarks/thin_products.py``). Both
compute every entry as a dot product over n, and on this machine's OpenBLAS they add its terms
in one order for most shapes, but not for all (small products take other kernels, and some
with 16 columns another blocking). So the route is chosen by a probe, once per process for
each (shape, memory order, dtype, BLAS threads): the first A of that key times a random B by
both routes, the transposed route kept only if every entry agrees to the bit. An A whose sums
come out alike in any order (a zero A, rows of at most two non-zeros) shows nothing, so the
probe first checks that A @ B differs from the same sums with their first term added last; if it
does not, that A takes the literal route and the key is probed again with the next A. (Not split
in halves: a BLAS splits long sums into blocks of its own, near the middle when n is under twice
its block depth, and where the split matched, every A of the shape looked order-blind. On an
AMD EPYC's OpenBLAS a 200 x 401 by 16 product is its two halves' sum split at 200 on one thread
and at 201 on two, and 300 x 300 by 16 at 152 and 150: such a key was probed on every call and
never took the transposed route.) The probe reads
the caller's A rather than a random one of its size, which would double the peak memory of a
dense affinity or kernel. The results are those of A @ B; the gain is speed only.
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


def transposed_agrees(A: np.ndarray, columns: int, b_order: str) -> bool:
    """Whether (B'A')' equals A @ B to the bit for a random B of ``columns`` columns in
    ``b_order``, on the BLAS threads of now; kept per (shape, orders, dtype, threads) once an
    A has shown it (module docstring)."""
    key = (A.shape, columns, memory_order(A), b_order, A.dtype.str, blas_threads())
    if key in _probed:
        return _probed[key]
    B = np.asarray(np.random.default_rng(PROBE_SEED).standard_normal((A.shape[1], columns)), dtype=A.dtype,
                   order=b_order or "C")
    literal = A @ B
    regrouped = A[:, 1:] @ B[1:]  # the first term last: no BLAS blocks a sum there
    regrouped += A[:, :1] @ B[:1]
    if np.array_equal(literal, regrouped):  # A's sums do not tell one order from another
        return False
    _probed[key] = bool(np.array_equal(literal, (B.T @ A.T).T))
    return _probed[key]


def thin_product(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """A @ B, computed as (B'A')' when the probe of its key found that the same to the bit
    (module docstring). For a dense float A of more rows than B has columns; anything else
    (sparse, a vector, mixed dtypes, an np.matrix, which ``@`` keeps) is A @ B."""
    if not (isinstance(A, np.ndarray) and isinstance(B, np.ndarray) and A.ndim == 2 and B.ndim == 2
            and not isinstance(A, np.matrix) and not isinstance(B, np.matrix)
            and A.dtype == B.dtype and A.dtype.kind == "f" and B.shape[1] < A.shape[0]):
        return A @ B
    if transposed_agrees(A, B.shape[1], memory_order(B)):
        return np.ascontiguousarray((B.T @ A.T).T)  # C-ordered as A @ B: later sums run in its order
    return A @ B
