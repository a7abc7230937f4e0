"""Multi-node readiness: a Ray head and a second Ray node on 127.0.0.1, one sweep across both."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mtc.cli import compose_config
from mtc.config import settings
from mtc.stack.loopback import free_port, loopback_cluster
from mtc.store import tracking
from mtc.sweep.driver import run_sweep
from tracked_runs import sweep_runs

pytestmark = pytest.mark.slow
PLUGIN = Path(__file__).parent / "plugin"


@pytest.fixture(scope="module")
def two_node_cluster():
    """A Ray head and a second node on 127.0.0.1 with token authentication (the session's
    RAY_AUTH_TOKEN, tests/conftest.py; every ray command and driver set RAY_AUTH_MODE=token).
    The toy method (tests/plugin) is importable on both nodes. One cluster serves the module."""
    patch = pytest.MonkeyPatch()
    patch.setenv("RAY_AUTH_MODE", "token")
    env = {**os.environ, "RAY_AUTH_MODE": "token",
           "PYTHONPATH": os.pathsep.join([str(PLUGIN), *filter(None, [os.environ.get("PYTHONPATH")])])}
    try:
        with loopback_cluster(env, nodes=2) as cluster:
            yield cluster.address
    finally:
        patch.undo()


def test_a_driver_with_the_wrong_ray_token_is_refused_in_one_line(two_node_cluster, tmp_path):
    env = {**os.environ, "RAY_AUTH_TOKEN": "0" * 64, "RAY_gcs_server_port_wait_time_s": "3"}
    done = subprocess.run([sys.executable, "-m", "mtc.sweep", "method=kmeans", "sweep.repeats=1",
                           f"ray.address={two_node_cluster}", f"mlflow.tracking_uri=sqlite:///{tmp_path / 'db'}",
                           f"output_dir={tmp_path / 'out'}"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: the Ray cluster at {two_node_cluster} refused this driver's auth token"), done.stderr
    assert not (tmp_path / "db").exists()  # refused before any MLflow run was created


def test_sweep_spreads_over_two_nodes_with_one_child_run_per_trial(two_node_cluster, tmp_path):
    cfg = compose_config([
        f"output_dir={tmp_path / 'outputs'}", f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
        f"mlflow.artifact_root={tmp_path / 'artifacts'}", f"ray.address={two_node_cluster}",
        "sweep.verbose=0", "method=kmeans", "++method.grid.n_init=[1,2,3]", "sweep.repeats=4",
    ])
    result = run_sweep(settings(cfg))
    client = tracking.client_for(result.tracking_uri)
    runs = tracking.find_runs(client, result.experiment_id, **{tracking.PARENT_TAG: result.parent_run_id})
    keys = [run.data.tags[tracking.TRIAL_KEY_TAG] for run in runs]
    assert len(keys) == 12 and len(set(keys)) == 12
    assert all(run.info.status == "FINISHED" for run in runs)
    nodes = {run.data.tags["mtc.node_id"] for run in runs}
    assert len(nodes) == 2, f"trials ran on {len(nodes)} node(s)"


@pytest.fixture(scope="module")
def tracking_server():
    """PostgreSQL + `mlflow server` (proxied artifacts, basic auth) started by mtc.stack on
    loopback in a fresh folder; stopped (only what it started) after the module's tests."""
    import tempfile

    from mtc.stack import server as stack

    root = Path(tempfile.mkdtemp(prefix="mtc-stack-", dir="/var/tmp"))  # reachable by the postgres user
    patch = pytest.MonkeyPatch()
    patch.setenv("MTC_MLFLOW_USERNAME", "admin")
    patch.setenv("MTC_MLFLOW_PASSWORD", "a-test-password-123")
    started = stack.start(root, port=free_port(), db_port=free_port(), auth=True)
    try:
        yield started
    finally:
        stack.stop(root)
        subprocess.run(["rm", "-rf", str(root)], check=False)
        patch.undo()


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
        "sweep.repeats=4", "data.params.samples_per_cluster=15", "mlflow.readable_trial_files=true",
    ])
    result = run_sweep(settings(cfg))
    client = tracking.client_for(uri)
    runs = tracking.find_runs(client, result.experiment_id, **{tracking.PARENT_TAG: result.parent_run_id})
    keys = [run.data.tags[tracking.TRIAL_KEY_TAG] for run in runs]
    assert len(keys) == 12 and len(set(keys)) == 12 and all(run.info.status == "FINISHED" for run in runs)
    nodes = {run.data.tags["mtc.node_id"] for run in runs}
    assert len(nodes) == 2, f"trials ran on {len(nodes)} node(s)"
    every = client.search_runs([result.experiment_id])
    assert every and all(run.info.artifact_uri.startswith("mlflow-artifacts:/") for run in every)  # no file://

    connection = psycopg2.connect(host="127.0.0.1", port=tracking_server.db_port, user="mtc", dbname="mlflow")
    try:
        with connection.cursor() as cursor:  # the rows are really in PostgreSQL
            cursor.execute("SELECT count(*) FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
                           "WHERE t.key = 'mlflow.parentRunId' AND t.value = %s AND r.status = 'FINISHED'",
                           (result.parent_run_id,))
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


def test_a_sweep_straight_into_the_servers_postgresql_is_served_by_the_server(two_node_cluster, tracking_server,
                                                                            tmp_path, monkeypatch):
    """The scaling route of docs/cluster.md: the workers of both nodes write each batch's runs in
    one transaction straight into the stack's PostgreSQL (mtc.store.run_writer, no request to
    the server), the artifacts into a folder they share; the server then serves those runs."""
    cfg = compose_config([
        f"output_dir={tmp_path / 'outputs'}", f"mlflow.tracking_uri={tracking_server.database_uri()}",
        f"mlflow.artifact_root={tmp_path / 'artifacts'}", "mlflow.experiment=direct", f"ray.address={two_node_cluster}",
        "sweep.verbose=0", "method=kmeans", "++method.grid.n_init=[1,2,3]", "sweep.repeats=4",
    ])
    result = run_sweep(settings(cfg))
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "a-test-password-123")
    client = tracking.client_for(tracking_server.tracking_uri)  # read back through the server
    assert client.get_experiment_by_name("direct").experiment_id == result.experiment_id
    runs = tracking.find_runs(client, result.experiment_id, **{tracking.PARENT_TAG: result.parent_run_id})
    keys = [run.data.tags[tracking.TRIAL_KEY_TAG] for run in runs]
    assert len(keys) == 12 == len(set(keys)) and {run.info.status for run in runs} == {"FINISHED"}
    assert len({run.data.tags["mtc.node_id"] for run in runs}) == 2
    assert client.get_run(result.parent_run_id).info.status == "FINISHED"
    for run in runs:  # every run's record: its scores through the server, its trace in the shared folder
        assert 0.0 <= run.data.metrics["acc/mean"] <= 1.0
        folder = Path(run.info.artifact_uri.removeprefix("file://"))
        assert folder.is_relative_to(tmp_path / "artifacts") and (folder / "trial.npz").stat().st_size > 0


def test_a_study_on_the_cluster_against_the_server(two_node_cluster, tracking_server, tmp_path, monkeypatch):
    """tests/studies/tiny.yaml (two methods x two benchmarks, and a sweep of fits k-means has too) in one driver across both nodes,
    logged to the PostgreSQL-backed server, then compared from it; run again, it starts no Ray."""
    from mtc import reproduce
    from mtc.sweep import driver as sweep

    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "a-test-password-123")
    uri = tracking_server.tracking_uri
    study = reproduce.load_study(str(Path(__file__).parent / "studies" / "tiny.yaml"))
    overrides = [f"output_dir={tmp_path / 'outputs'}", f"mlflow.tracking_uri={uri}", f"ray.address={two_node_cluster}",
                 "mlflow.experiment=study"]
    before = len(server_requests(tracking_server))
    outcome = reproduce.run_study(study, reproduce.plan_study(study, overrides, []), compare_root=tmp_path)
    assert outcome["ray_started"] and len(outcome["ran"]) == 5
    requests = server_requests(tracking_server)[before:]  # the 27 children in batches, none created one by one:
    assert requests.count("POST /api/2.0/mlflow/runs/create") == 5 + 1  # the five sweeps' parents and the compare's run
    # at most one per Tune trial: 2 per two-point sweep, 2 for the one-point sweep (its seeds split over 2 slots)
    assert 1 <= requests.count("POST /api/2.0/mtc/runs/write-batch") <= 10
    client = tracking.client_for(uri)
    experiment = client.get_experiment_by_name("study").experiment_id
    runs = client.search_runs([experiment], max_results=1000)
    parents = [r for r in runs if tracking.SWEEP_KEY_TAG in r.data.tags]
    children = [r for r in runs if tracking.PARENT_TAG in r.data.tags]
    assert len(parents) == 5 and {r.info.status for r in parents} == {"FINISHED"}
    keys = [(r.data.tags[tracking.PARENT_TAG], r.data.tags[tracking.TRIAL_KEY_TAG]) for r in children]
    assert len(keys) == 27 == len(set(keys)) and {r.info.status for r in children} == {"FINISHED"}
    assert len({r.data.tags["mtc.node_id"] for r in children}) == 2  # both nodes' workers took trials
    assert (tmp_path / "compare_tiny" / "cells.csv").is_file()
    monkeypatch.setattr(sweep, "ray_session", lambda *a, **k: pytest.fail("Ray started for a finished study"))
    again = reproduce.run_study(study, reproduce.plan_study(study, overrides, []), compare_root=tmp_path)
    assert not again["ray_started"] and len(again["finished"]) == 5


def server_requests(stack) -> list[str]:
    """The request lines of the stack's server log ("POST /api/2.0/...")."""
    import re

    return re.findall(r'"((?:GET|POST|PATCH|DELETE) /[^ ?]*)', (Path(stack.dir) / "server.log").read_text())


def test_the_batch_route_behind_basic_auth_needs_the_right_to_create_runs_there(tracking_server, monkeypatch):
    """A user with READ (the stack's default) is refused by the route and then by MLflow's own
    calls, and nothing is written; once given EDIT on the experiment, the batch goes in one
    request (the basic-auth app checks the route as create_run: mtc.store.server_app)."""
    import numpy as np
    from mlflow import MlflowClient
    from mlflow.server import get_app_client

    from mtc.store import run_writer

    uri = tracking_server.tracking_uri
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "a-test-password-123")
    admin = MlflowClient(uri)
    experiment = admin.create_experiment(f"batch-auth-{time.time_ns()}")
    parent = admin.create_run(experiment).info.run_id

    users = get_app_client("basic-auth", tracking_uri=uri)
    user = f"reader{time.time_ns()}"
    users.create_user(user, "a-reader-password-123")
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", user)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "a-reader-password-123")
    run = run_writer.RunRecord("r", {"mtc.trial_key": "r"}, {"seed": "0"}, (("acc/mean", 0.5, 0),), "FINISHED", 1, 2,
                               lambda folder: np.save(folder / "labels.npy", np.arange(3)))
    with pytest.raises(run_writer.BatchNotTaken, match="403"):
        run_writer.post_batch(uri, experiment, parent, [run])
    stores = {}
    with pytest.raises(Exception, match="(?i)permission"):
        run_writer.write_runs(MlflowClient(uri), experiment, parent, [run], stores)
    assert (run_writer.BATCH_ENDPOINT, uri) not in stores  # refused to this sender, not missing: asked again
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "a-test-password-123")
    users.grant_user_permission(user, "experiment", experiment, "EDIT")
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", user)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "a-reader-password-123")
    (written,) = run_writer.post_batch(uri, experiment, parent, [run])
    assert [r.info.run_id for r in admin.search_runs([experiment]) if r.info.run_id != parent] == [written]
    assert admin.get_run(written).data.params == {"seed": "0"}


def server_env(extra: dict | None = None) -> dict:
    return {**os.environ, "RAY_AUTH_MODE": "token", "MLFLOW_TRACKING_USERNAME": "admin",
            "MLFLOW_TRACKING_PASSWORD": "a-test-password-123",
            "PYTHONPATH": os.pathsep.join([str(PLUGIN), *filter(None, [os.environ.get("PYTHONPATH")])]), **(extra or {})}


def toy_sweep_args(tmp_path, uri: str, address: str, name: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "mtc.sweep", f"hydra.searchpath=[file://{PLUGIN / 'conf'}]", "method=toy",
            f"sweep.name={name}", f"output_dir={tmp_path / 'outputs'}", f"mlflow.tracking_uri={uri}",
            f"ray.address={address}", "data.params.n_tasks=2", "data.params.samples_per_cluster=10", *extra]


def test_two_sweeps_at_once_against_the_server_lose_no_run(two_node_cluster, tracking_server, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "a-test-password-123")
    uri = tracking_server.tracking_uri
    drivers = [subprocess.Popen(toy_sweep_args(tmp_path, uri, two_node_cluster, name, "++method.grid.shift=[0.0,1.0,2.0]",
                                               "sweep.repeats=3"),
                                cwd=tmp_path, env=server_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for name in ("first", "second")]
    outputs = [driver.communicate(timeout=600) for driver in drivers]
    for driver, (_, stderr) in zip(drivers, outputs):
        assert driver.returncode == 0, stderr[-3000:]
    for name in ("first", "second"):
        (parent,), children = sweep_runs(uri, name)
        keys = [r.data.tags[tracking.TRIAL_KEY_TAG] for r in children]
        assert parent.info.status == "FINISHED" and len(keys) == 9 == len(set(keys))
        assert {r.info.status for r in children} == {"FINISHED"}


def test_a_second_driver_of_one_sweep_on_another_machine_is_refused_by_the_servers_lease(
        two_node_cluster, tracking_server, tmp_path, monkeypatch):
    """Two output folders (two machines) and one server: the file lock cannot see the first
    driver, the lease on the server does; the second is refused in one line and the first
    finishes with one parent and no duplicate run."""
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "a-test-password-123")
    uri = tracking_server.tracking_uri
    args = ("++method.grid.shift=[0.0,1.0]", "sweep.repeats=3", "++method.params.delay=1.0")
    first = subprocess.Popen(toy_sweep_args(tmp_path / "node1", uri, two_node_cluster, "leased", *args),
                             cwd=tmp_path, env=server_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in first.stdout:  # the lease is held once the parent run exists
        if "MLflow parent run" in line:
            break
    second = subprocess.run(toy_sweep_args(tmp_path / "node2", uri, two_node_cluster, "leased", *args),
                            cwd=tmp_path, env=server_env(), capture_output=True, text=True, timeout=300)
    _, stderr = first.communicate(timeout=600)
    assert first.returncode == 0, stderr[-3000:]
    assert second.returncode == 2
    assert second.stderr.strip().startswith(f"error: sweep 'leased' is already running from {socket.gethostname()} "
                                            f"pid {first.pid} against this tracking store")
    assert len(second.stderr.strip().splitlines()) == 1
    (parent,), children = sweep_runs(uri, "leased")
    keys = [r.data.tags[tracking.TRIAL_KEY_TAG] for r in children]
    assert parent.info.status == "FINISHED" and len(keys) == 6 == len(set(keys))


def test_a_tracking_server_restarted_mid_sweep_loses_no_result(two_node_cluster, tracking_server, tmp_path,
                                                               monkeypatch):
    from mtc.stack import server as stack

    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "a-test-password-123")
    uri = tracking_server.tracking_uri
    driver = subprocess.Popen(toy_sweep_args(tmp_path, uri, two_node_cluster, "restart", "++method.grid.shift=[0.0,1.0,2.0]",
                                             "++method.params.delay=1.0", "sweep.repeats=4", "sweep.seeds_per_trial=1"),
                              cwd=tmp_path, env=server_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and driver.poll() is None:  # restart once some trials finished
        time.sleep(1.0)
        if any(r.info.status == "FINISHED" for r in sweep_runs(uri, "restart")[1]):
            break
    finished_before = sum(r.info.status == "FINISHED" for r in sweep_runs(uri, "restart")[1])
    stack.restart_server(Path(tracking_server.dir))
    _, stderr = driver.communicate(timeout=600)
    assert driver.returncode == 0, stderr[-3000:]
    (parent,), children = sweep_runs(uri, "restart")
    finished = [r for r in children if r.info.status == "FINISHED"]
    assert 0 < finished_before < 12  # the restart came mid-sweep
    assert parent.info.status == "FINISHED" and len(children) == 12 == len(finished)
    assert all(len(r.data.metrics) > 0 and r.data.metrics["acc/mean"] == 1.0 for r in finished)  # no result lost
