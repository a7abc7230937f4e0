"""Multi-node readiness: a Ray head and a second Ray node on 127.0.0.1, one sweep across both."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from mtc import tracking
from mtc.cli import CONF_DIR
from mtc.sweep import run_sweep

pytestmark = pytest.mark.slow
RAY = str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def two_node_cluster(tmp_path, monkeypatch):
    # Every ray command and the driver must agree on the auth mode (STACK_NOTES.md).
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    port = free_port()
    common = ["--num-cpus=1", "--disable-usage-stats", "--object-store-memory=100000000"]
    try:
        subprocess.run([RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
                        "--include-dashboard=false", *common], check=True, env=env, capture_output=True, timeout=120)
        subprocess.run([RAY, "start", f"--address=127.0.0.1:{port}", "--node-ip-address=127.0.0.1", *common],
                       check=True, env=env, capture_output=True, timeout=120)
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([RAY, "stop", "--force"], env=env, capture_output=True, timeout=120)


def test_sweep_spreads_over_two_nodes_with_one_child_run_per_trial(two_node_cluster, tmp_path):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            f"output_dir={tmp_path / 'outputs'}", f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
            f"mlflow.artifact_root={tmp_path / 'artifacts'}", f"ray.address={two_node_cluster}",
            "sweep.verbose=0", "method=kmeans", "++method.grid.n_init=[1,2,3]", "sweep.repeats=4",
        ])
    result = run_sweep(cfg)
    client = tracking.client_for(result["tracking_uri"])
    runs = tracking.find_runs(client, result["experiment_id"], **{tracking.PARENT_TAG: result["parent_run_id"]})
    keys = [run.data.tags[tracking.TRIAL_KEY_TAG] for run in runs]
    assert len(keys) == 12 and len(set(keys)) == 12
    assert all(run.info.status == "FINISHED" for run in runs)
    nodes = {run.data.tags["mtc.node_id"] for run in runs}
    assert len(nodes) == 2, f"trials ran on {len(nodes)} node(s)"
