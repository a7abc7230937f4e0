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


@pytest.fixture
def tracking_server(monkeypatch):
    """PostgreSQL + `mlflow server` (proxied artifacts, basic auth) started by mtc.stack on
    loopback in a fresh folder; stopped (only what it started) afterwards."""
    import tempfile

    from mtc import stack

    root = Path(tempfile.mkdtemp(prefix="mtc-stack-", dir="/var/tmp"))  # reachable by the postgres user
    monkeypatch.setenv("MTC_MLFLOW_USERNAME", "admin")
    monkeypatch.setenv("MTC_MLFLOW_PASSWORD", "a-test-password-123")
    started = stack.start(root, port=free_port(), db_port=free_port(), auth=True)
    try:
        yield started
    finally:
        stack.stop(root)
        subprocess.run(["rm", "-rf", str(root)], check=False)


def download_on_node(node_id: str, uri: str, run_id: str, paths: list[str]) -> dict:
    """Download artifacts through the tracking server from a Ray task pinned to ``node_id``."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=1, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))
    def download():
        import tempfile

        from mlflow import MlflowClient

        client, out = MlflowClient(uri), tempfile.mkdtemp()
        sizes = {path: os.path.getsize(client.download_artifacts(run_id, path, out)) for path in paths}
        return ray.get_runtime_context().get_node_id(), sizes

    return ray.get(download.remote())


def test_cluster_sweep_against_a_tracking_server_on_postgresql(two_node_cluster, tracking_server, tmp_path,
                                                               monkeypatch):
    import urllib.error
    import urllib.request

    import psycopg2
    import ray

    uri = tracking_server.tracking_uri
    with pytest.raises(urllib.error.HTTPError) as refused:  # no credentials: refused
        urllib.request.urlopen(f"{uri}/api/2.0/mlflow/experiments/search?max_results=1", timeout=10)
    assert refused.value.code == 401
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "a-test-password-123")
    cfg = compose_config([
        f"output_dir={tmp_path / 'outputs'}", f"mlflow.tracking_uri={uri}", f"ray.address={two_node_cluster}",
        "sweep.verbose=0", "method=mtcmrl", "++method.grid.lambda_=[0.5,1.0,2.0]", "++method.grid.alpha=[1.0]",
        "sweep.repeats=4", "data.params.samples_per_cluster=15",
    ])
    result = run_sweep(settings(cfg))
    client = tracking.client_for(uri)
    runs = tracking.find_runs(client, result["experiment_id"], **{tracking.PARENT_TAG: result["parent_run_id"]})
    keys = [run.data.tags[tracking.TRIAL_KEY_TAG] for run in runs]
    assert len(keys) == 12 and len(set(keys)) == 12 and all(run.info.status == "FINISHED" for run in runs)
    nodes = {run.data.tags["mtc.node_id"] for run in runs}
    assert len(nodes) == 2, f"trials ran on {len(nodes)} node(s)"
    every = client.search_runs([result["experiment_id"]])
    assert every and all(run.info.artifact_uri.startswith("mlflow-artifacts:/") for run in every)  # no file://

    connection = psycopg2.connect(host="127.0.0.1", port=tracking_server.db_port, user="mtc", dbname="mlflow")
    try:
        with connection.cursor() as cursor:  # the rows are really in PostgreSQL
            cursor.execute("SELECT count(*) FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
                           "WHERE t.key = 'mlflow.parentRunId' AND t.value = %s AND r.status = 'FINISHED'",
                           (result["parent_run_id"],))
            assert cursor.fetchone()[0] == 12
    finally:
        connection.close()

    child = runs[0]
    names = [a.path for a in client.list_artifacts(child.info.run_id)]
    heatmap = next(name for name in names if name.endswith(".png") and name != "convergence.png")
    ray.init(address=two_node_cluster, logging_level="ERROR",
             runtime_env={"env_vars": {k: os.environ[k] for k in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")}})
    try:
        other = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["NodeID"] != ray.get_runtime_context().get_node_id())
        node, sizes = download_on_node(other, uri, child.info.run_id, [heatmap, "objective_trace.csv"])
    finally:
        ray.shutdown()
    assert node == other and all(size > 0 for size in sizes.values())
