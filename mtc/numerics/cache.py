"""An explicit cache for deterministic, seed-independent solver steps.

In a sweep, Ray reuses each worker process for many trials; trials that differ only in the
seed (or in a parameter a step does not use) repeat the same deterministic work. A solver
that takes a ``cache`` parameter keeps such a step's result in the Cache it is given (the
sweep's trial runner gives every fit of a worker process the same one); with ``cache=None``
everything is computed afresh, with the same result to the bit. Cached arrays are made
read-only, since several fits share them.
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


class Cache:
    """The last ``size`` results of every step, by key (least recently used dropped first).

    Parameters
    ----------
    size : int, default=2
        Results kept per step name.

    Attributes
    ----------
    results : dict of str to OrderedDict
        Per step name, key -> result, most recently used last.
    """

    def __init__(self, size: int = 2):
        self.size = size
        self.results: dict[str, OrderedDict] = {}

    def get(self, step: str, key, compute, keep: int | None = None):
        """The result of ``step`` for ``key``, from ``compute()`` when not kept; ``keep``
        results of this step are kept (default: ``size``; more for small results that many
        trials of a worker share, such as k-means labels)."""
        kept = self.results.setdefault(step, OrderedDict())
        if key in kept:
            kept.move_to_end(key)
            return kept[key]
        result = compute()
        _freeze(result)
        kept[key] = result
        if len(kept) > (self.size if keep is None else keep):
            kept.popitem(last=False)
        return result

    def __deepcopy__(self, memo):
        return self  # a handle: scikit-learn's clone shares it instead of copying its contents


def cached(cache: Cache | None, step: str, key, compute, keep: int | None = None):
    """``cache.get(step, key, compute, keep)``, or ``compute()`` when there is no cache."""
    return compute() if cache is None else cache.get(step, key, compute, keep)


def _freeze(value) -> None:
    """Make every array (dense, or a sparse matrix's arrays) in a (nested) tuple/list result
    read-only."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif sp.issparse(value):
        for part in (value.data, value.indices, value.indptr):
            _freeze(part)
    elif isinstance(value, (tuple, list)):
        for item in value:
            _freeze(item)
