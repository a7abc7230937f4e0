"""Multi-node readiness: a Ray head and a second Ray node on 127.0.0.1, one sweep across both."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mtc import tracking
from mtc.cli import compose_config
from mtc.config import settings
from mtc.sweep import run_sweep

pytestmark = pytest.mark.slow
RAY = str(Path(sys.executable).with_name("ray"))


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
    """Block until the cluster has `count` live nodes (a loaded machine can take a while)."""
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


def stop(process: subprocess.Popen) -> None:
    """End one `ray start --block` and the Ray processes it started (its process group);
    `ray stop` would also stop every other Ray instance on the machine."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
            process.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture
def two_node_cluster(tmp_path, monkeypatch):
    # Every ray command and the driver must agree on the auth mode (STACK_NOTES.md).
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    port = free_port()
    common = ["--num-cpus=1", "--disable-usage-stats", "--object-store-memory=100000000", "--block"]
    nodes = []
    try:
        nodes.append(subprocess.Popen([RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
                                       "--include-dashboard=false", *common], env=env, start_new_session=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for_port(port)
        nodes.append(subprocess.Popen([RAY, "start", f"--address=127.0.0.1:{port}", "--node-ip-address=127.0.0.1",
                                       *common], env=env, start_new_session=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for_nodes(f"127.0.0.1:{port}", 2)
        yield f"127.0.0.1:{port}"
    finally:
        for node in reversed(nodes):
            stop(node)


def test_sweep_spreads_over_two_nodes_with_one_child_run_per_trial(two_node_cluster, tmp_path):
    cfg = compose_config([
        f"output_dir={tmp_path / 'outputs'}", f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
        f"mlflow.artifact_root={tmp_path / 'artifacts'}", f"ray.address={two_node_cluster}",
        "sweep.verbose=0", "method=kmeans", "++method.grid.n_init=[1,2,3]", "sweep.repeats=4",
    ])
    result = run_sweep(settings(cfg))
    client = tracking.client_for(result["tracking_uri"])
    runs = tracking.find_runs(client, result["experiment_id"], **{tracking.PARENT_TAG: result["parent_run_id"]})
    keys = [run.data.tags[tracking.TRIAL_KEY_TAG] for run in runs]
    assert len(keys) == 12 and len(set(keys)) == 12
    assert all(run.info.status == "FINISHED" for run in runs)
    nodes = {run.data.tags["mtc.node_id"] for run in runs}
    assert len(nodes) == 2, f"trials ran on {len(nodes)} node(s)"
