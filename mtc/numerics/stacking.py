"""The tasks of a multi-task problem stacked into one matrix, and rows split back by task."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def stack_rows(matrices: list):
    """The task matrices one under the other: CSR when any is sparse, else dense."""
    if any(map(sp.issparse, matrices)):
        return sp.vstack(matrices, format="csr")
    return np.vstack(matrices)


def split_rows(stacked, sizes: list[int]) -> list:
    """The rows of ``stacked`` back into consecutive blocks of ``sizes`` rows (one per task)."""
    bounds = np.cumsum(sizes)[:-1]
    if sp.issparse(stacked):
        stacked = sp.csr_matrix(stacked)
        return [stacked[start:stop] for start, stop in zip([0, *bounds], [*bounds, stacked.shape[0]])]
    return np.split(stacked, bounds)


def row_counts(matrices: list) -> list[int]:
    """Number of rows (samples) of every task."""
    return [X.shape[0] for X in matrices]
