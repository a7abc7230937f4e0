"""The toy solver (toy_method.py) as a slow fit that says where it runs: tests/test_netns_cluster.py
kills a worker host while one of its fits is running, and needs to know which host a running
fit is on. With MTC_TEST_FIT_MARKERS set in a Ray node's environment, every fit on that node
creates ``<netns inode>.<pid>.<ns>.running`` in that folder as it starts and renames it to
``.done`` when it ends (a fit whose host is killed leaves its ``.running``). The inode is the
fit's network namespace (``/proc/self/ns/net``), the same as ``os.stat('/run/netns/NAME')``'s."""

from __future__ import annotations

import os
import time
from pathlib import Path

from toy_method import ToyClusterer

MARKERS_ENV = "MTC_TEST_FIT_MARKERS"


def netns_inode() -> int:
    """This process's network namespace, as an inode number."""
    return os.stat("/proc/self/ns/net").st_ino


class SlowToyClusterer(ToyClusterer):
    """ToyClusterer (same parameters; conf/method/slow.yaml sets ``delay``) that marks its fits."""

    def _fit(self, matrices, n_clusters, rng):
        folder = os.environ.get(MARKERS_ENV)
        if not folder:
            return super()._fit(matrices, n_clusters, rng)
        marker = Path(folder) / f"{netns_inode()}.{os.getpid()}.{time.time_ns()}.running"
        marker.touch()
        super()._fit(matrices, n_clusters, rng)
        marker.rename(marker.with_suffix(".done"))
