"""Per-process memoisation of deterministic, seed-independent solver steps.

In a sweep, Ray reuses each worker process for many trials; trials that differ only in the
seed (or in a parameter a step does not use) repeat the same deterministic work. A step
whose result depends only on its data and parameters can be kept here for the next trial.
Results are made read-only, since several fits share them.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import numpy as np
import scipy.sparse as sp


def fingerprint(*matrices) -> str:
    """sha1 over the shapes and entries of dense or sparse matrices."""
    digest = hashlib.sha1()
    for X in matrices:
        digest.update(str((X.shape, sp.issparse(X))).encode())
        parts = (X.indptr, X.indices, X.data) if sp.issparse(X) else (X,)
        for part in parts:
            digest.update(np.ascontiguousarray(part).tobytes())
    return digest.hexdigest()


class Memo:
    """The last `size` results by key (least recently used dropped first)."""

    def __init__(self, size: int = 2):
        self.size = size
        self.results: OrderedDict = OrderedDict()

    def get(self, key, compute):
        if key in self.results:
            self.results.move_to_end(key)
            return self.results[key]
        result = compute()
        _freeze(result)
        self.results[key] = result
        if len(self.results) > self.size:
            self.results.popitem(last=False)
        return result


def _freeze(value) -> None:
    """Make every array in a (nested) tuple/list result read-only."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif isinstance(value, (tuple, list)):
        for item in value:
            _freeze(item)
