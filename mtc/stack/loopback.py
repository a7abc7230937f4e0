"""A Ray cluster of several nodes on 127.0.0.1, each a ``ray start --block`` process group
of its own: what the cluster tests and benchmarks/cluster_modes.py run, and the bare-machine
recipe of docs/cluster.md on one machine. Only the processes started here are stopped
(``ray stop`` would end every Ray instance of the user)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
NODE_FLAGS = ["--node-ip-address=127.0.0.1", "--disable-usage-stats", "--object-store-memory=100000000", "--block"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {seconds} s")


def wait_for_nodes(address: str, count: int, seconds: float = 120.0) -> None:
    """Block until the cluster has ``count`` live nodes (a loaded machine can take a while)."""
    import ray

    ray.init(address=address, logging_level="ERROR")
    try:
        deadline = time.monotonic() + seconds
        while sum(node["Alive"] for node in ray.nodes()) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {sum(n['Alive'] for n in ray.nodes())} of {count} Ray nodes after {seconds} s")
            time.sleep(1.0)
    finally:
        ray.shutdown()


def stop_node(process: subprocess.Popen) -> None:
    """End one ``ray start --block`` and the Ray processes it started (its process group)."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
            process.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


class LoopbackCluster:
    """A head (started on entering) and nodes added with ``add_node``, all with ``env``
    (RAY_AUTH_MODE, RAY_AUTH_TOKEN, PYTHONPATH, ...) and ``cpus_per_node`` CPUs each."""

    def __init__(self, env: dict[str, str], cpus_per_node: int = 1):
        self.env = {**env, "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}  # a quick stop (no 30 s drain)
        self.cpus = cpus_per_node
        self.port = free_port()
        self.nodes: list[subprocess.Popen] = []

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, *flags: str) -> None:
        self.nodes.append(subprocess.Popen([RAY, "start", *flags, f"--num-cpus={self.cpus}", *NODE_FLAGS],
                                           env=self.env, start_new_session=True, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL))

    def add_node(self) -> None:
        self.start(f"--address={self.address}")
        wait_for_nodes(self.address, len(self.nodes))

    def __enter__(self) -> LoopbackCluster:
        try:
            self.start("--head", f"--port={self.port}", "--include-dashboard=false")
            wait_for_port(self.port)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        for node in reversed(self.nodes):
            stop_node(node)
        self.nodes.clear()


@contextlib.contextmanager
def loopback_cluster(env: dict[str, str], nodes: int, cpus_per_node: int = 1):
    """A LoopbackCluster with ``nodes`` live nodes; yields it."""
    with LoopbackCluster(env, cpus_per_node) as cluster:
        for _ in range(nodes - 1):
            cluster.add_node()
        if nodes == 1:
            wait_for_nodes(cluster.address, 1)
        yield cluster
