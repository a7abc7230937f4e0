"""Freed memory kept for the next arrays (glibc's malloc) instead of given back to the system.

A solver's iteration allocates its temporaries afresh. With glibc's defaults an array above
the mmap threshold (128 KiB at first, raised to the size of the largest such array freed) is
mapped from the kernel, and freed memory at the heap's top beyond the trim threshold (twice
that) is given back, so each iteration's new arrays take a page fault per 4 KiB page on first
touch. On the 2-core VM here that costs more than the arithmetic on them: twenty rounds of
two live 40,674 x 8 temporaries (LSSMTC's W step on NG1) took 24,780 minor page faults, none
with the memory kept (tests/test_hotspots.py), and an LSSMTC iteration on NG1 from a fresh
process 23.1-23.4 ms of CPU against 14.4-16.6 ms (docs/results/README.md, "Hot spots"); a
process that has already freed a larger array has a raised threshold and gains nothing.
``keep_freed_memory`` serves arrays up to MMAP_THRESHOLD from the heap and keeps
up to TRIM_THRESHOLD of freed heap for reuse: the same operations, the same bits, fewer page
faults. The price: a process keeps up to 256 MiB of freed heap resident between fits (larger
arrays are still mapped and given back at their free).

``mtc.trial.run_trial`` (every fit of ``mtc.run``, of a sweep's workers and of the benchmarks
that fit as sweeps do) calls it; a notebook may call it once itself.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (glibc malloc.h)
MMAP_THRESHOLD = 32 << 20  # arrays up to 32 MiB from the heap (glibc's own dynamic bound)
TRIM_THRESHOLD = 256 << 20  # up to 256 MiB of freed heap kept


@cache
def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds for this process (once); False where the C library
    has no working ``mallopt`` (macOS, musl), which then keeps its defaults."""
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
