"""mtc.store.run_writer: a batch of finished runs in one transaction writes the rows MLflow's
client writes for the same runs, and nothing when the parent run was closed."""

import math
import re
import uuid

import numpy as np
import pytest
import sqlalchemy as sa

from mtc.store import run_writer, tracking

TABLES = ("runs", "tags", "params", "metrics", "latest_metrics")


def record(name: str, status: str = "FINISHED") -> run_writer.RunRecord:
    metrics = (("acc/mean", 0.75, 0), ("nmi/task0", float("nan"), 0), ("objective/final", math.inf, 0),
               ("objective/trace", 3.0, 0), ("objective/trace", 2.0, 1), ("objective/trace", 1.5, 7),
               ("acc/mean", 0.75, 0))  # a repeated (key, value, step), which MLflow logs once
    return run_writer.RunRecord(
        name, {"mtc.trial_key": name, "mlflow.source.name": "test"}, {"alpha": "0.5", "seed": "3"}, metrics,
        status, 1_700_000_000_000, 1_700_000_004_321,
        lambda folder: np.savez_compressed(folder / "trial.npz", labels=np.arange(4)))


def rows(engine, table: str, run_id: str) -> list[tuple]:
    """A run's rows of one MLflow table, run id and its artifact folder replaced by 'RUN'."""
    with engine.connect() as connection:
        found = connection.execute(sa.text(f"SELECT * FROM {table} WHERE run_uuid = :run"), {"run": run_id})
        return sorted(tuple(str(v).replace(run_id, "RUN") for v in row) for row in found)


@pytest.fixture
def store(tmp_path):
    client = tracking.client_for(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = tracking.ensure_experiment(client, "writer", str(tmp_path / "artifacts"))
    parent = client.create_run(experiment).info.run_id
    return client, experiment, parent, sa.create_engine(f"sqlite:///{tmp_path / 'mlflow.db'}")


def test_the_sql_route_writes_the_rows_of_the_clients_calls(store):
    client, experiment, parent, engine = store
    batch = [record("a"), record("b", "FAILED")]
    by_sql = run_writer.write_sql(run_writer.sql_store(client.tracking_uri, None), experiment, parent, batch)
    by_client = run_writer.write_with_client(client, experiment, parent, batch)
    for sql_id, client_id in zip(by_sql, by_client):
        for table in TABLES:
            assert rows(engine, table, sql_id) == rows(engine, table, client_id), table
        assert str(client.get_run(sql_id).data.to_dictionary()) == str(client.get_run(client_id).data.to_dictionary())
        history = [(m.step, m.value) for m in client.get_metric_history(sql_id, "objective/trace")]
        assert history == [(0, 3.0), (1, 2.0), (7, 1.5)]
        assert client.get_run(sql_id).data.metrics["objective/final"] == pytest.approx(1.7976931348623157e308)
        assert math.isnan(client.get_run(sql_id).data.metrics["nmi/task0"])
        arrays = np.load(client.download_artifacts(sql_id, "trial.npz"))
        np.testing.assert_array_equal(arrays["labels"], np.arange(4))
    statuses = {run.info.run_id: run.info.status for run in tracking.find_runs(client, experiment)}
    assert [statuses[i] for i in by_sql] == ["FINISHED", "FAILED"]
    assert len(rows(engine, "metrics", by_sql[0])) == 6 and len(rows(engine, "latest_metrics", by_sql[0])) == 4


def test_nothing_is_written_once_the_parent_is_closed(store):
    client, experiment, parent, engine = store
    client.set_terminated(parent, "KILLED")
    for write in (lambda: run_writer.write_runs(client, experiment, parent, [record("a")], {}),
                  lambda: run_writer.write_with_client(client, experiment, parent, [record("a")])):
        with pytest.raises(run_writer.ParentClosed, match="KILLED"):
            write()
    assert [run.info.run_id for run in tracking.find_runs(client, experiment)] == [parent]
    with engine.connect() as connection:
        assert connection.execute(sa.text("SELECT count(*) FROM metrics")).scalar() == 0


def test_a_bad_metric_key_is_refused_before_any_row(store):
    client, experiment, parent, engine = store
    bad = run_writer.RunRecord("x", {}, {}, (("no spaces?\n", 1.0, 0),), "FINISHED", 0, 1, lambda folder: None)
    with pytest.raises(Exception, match="metric"):
        run_writer.write_runs(client, experiment, parent, [record("a"), bad], {})
    assert [run.info.run_id for run in tracking.find_runs(client, experiment)] == [parent]


def test_the_route_follows_the_tracking_uri():
    assert run_writer.is_sql_store("sqlite:////tmp/x.db") and run_writer.is_sql_store("postgresql+psycopg2://u@h/db")
    assert not run_writer.is_sql_store("http://127.0.0.1:5000") and not run_writer.is_sql_store("file:///tmp/mlruns")


def test_the_client_route_writes_a_batch_from_several_threads_and_keeps_its_order(store):
    """Against a server a batch's runs are sent by CLIENT_THREADS threads at once: every run
    complete (its tags, params, metrics, files, status), ids in the records' order; the files
    are written in the caller's thread (a readable trial's figures share the worker's frames)."""
    import threading

    client, experiment, parent, _ = store

    def own_files(name, write):
        def write_files(folder):
            assert threading.current_thread() is threading.main_thread()
            (folder / "name.txt").write_text(name)
            write(folder)
        return write_files

    batch = [record(f"r{i}", "FAILED" if i % 5 == 0 else "FINISHED") for i in range(3 * run_writer.CLIENT_THREADS)]
    batch = [run_writer.RunRecord(r.name, r.tags, r.params, r.metrics, r.status, r.start_ms, r.end_ms,
                                  own_files(r.name, r.write_files)) for r in batch]
    ids = run_writer.write_with_client(client, experiment, parent, batch)
    assert len(set(ids)) == len(batch)
    for run_id, written in zip(ids, batch):
        run = client.get_run(run_id)
        assert (run.info.run_name, run.info.status) == (written.name, written.status)
        assert run.data.tags["mtc.trial_key"] == written.name and run.data.params == {"alpha": "0.5", "seed": "3"}
        assert [(m.step, m.value) for m in client.get_metric_history(run_id, "objective/trace")] == \
            [(0, 3.0), (1, 2.0), (7, 1.5)]
        np.testing.assert_array_equal(np.load(client.download_artifacts(run_id, "trial.npz"))["labels"], np.arange(4))
        assert open(client.download_artifacts(run_id, "name.txt")).read() == written.name


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Two real ``mlflow server``s on SQLite stores, artifacts served: one as mtc.stack starts it
    (``--app-name mtc``: the batch route) and a plain one; stopped after the module."""
    import os
    import subprocess
    import sys

    from mtc.stack.loopback import free_port, wait_for_port

    started = {}
    for name, app in (("mtc", ["--app-name", "mtc"]), ("plain", [])):
        folder, port = tmp_path_factory.mktemp(name), free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", *app, "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
             "--serve-artifacts", "--artifacts-destination", str(folder / "artifacts"), "--host", "127.0.0.1",
             "--port", str(port), "--workers", "1"], stdout=open(folder / "server.log", "wb"), stderr=subprocess.STDOUT,
            start_new_session=True, env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
        started[name] = (process, port, folder)
    try:
        for process, port, _ in started.values():
            wait_for_port(port, 120)
        yield {name: (f"http://127.0.0.1:{port}", folder) for name, (_, port, folder) in started.items()}
    finally:
        for process, _, _ in started.values():
            os.killpg(process.pid, 15)
            process.wait(timeout=30)


def server_store(servers, name: str):
    uri, folder = servers[name]
    client = tracking.client_for(uri)
    experiment = tracking.ensure_experiment(client, f"writer-{uuid.uuid4().hex[:8]}", None)
    return client, experiment, client.create_run(experiment).info.run_id, sa.create_engine(f"sqlite:///{folder / 'mlflow.db'}")


def requests_in_log(servers, name: str) -> list[str]:
    """The request lines of a server's access log ("POST /api/2.0/...")."""
    log = (servers[name][1] / "server.log").read_text()
    return re.findall(r'"((?:GET|POST|PATCH|DELETE) /[^ ?]*)', log)


def test_a_server_with_the_batch_route_takes_a_batch_in_one_request_with_the_clients_rows(servers, monkeypatch):
    """``mlflow server --app-name mtc`` (mtc.store.server_app): the batch in one request,
    the rows MLflow's client writes for the same runs (NaN and infinity included), the files
    where the server's artifact routes serve them."""
    client, experiment, parent, engine = server_store(servers, "mtc")
    batch = [record("a"), record("b", "FAILED")]
    before = len(requests_in_log(servers, "mtc"))
    monkeypatch.setattr(run_writer, "write_with_client", lambda *args: pytest.fail("sent run by run"))
    stores = {}
    by_route = run_writer.write_runs(client, experiment, parent, batch, stores)
    assert stores.get((run_writer.BATCH_ENDPOINT, client.tracking_uri), True)
    assert requests_in_log(servers, "mtc")[before:] == [f"POST {run_writer.BATCH_ENDPOINT}"]
    monkeypatch.undo()
    by_client = run_writer.write_with_client(client, experiment, parent, batch)
    for route_id, client_id in zip(by_route, by_client):
        for table in TABLES:
            assert rows(engine, table, route_id) == rows(engine, table, client_id), table
        assert math.isnan(client.get_run(route_id).data.metrics["nmi/task0"])
        np.testing.assert_array_equal(np.load(client.download_artifacts(route_id, "trial.npz"))["labels"], np.arange(4))
    assert [client.get_run(i).info.status for i in by_route] == ["FINISHED", "FAILED"]


def test_a_plain_mlflow_server_gets_each_runs_requests_and_is_remembered(servers):
    client, experiment, parent, _ = server_store(servers, "plain")
    stores = {}
    first = run_writer.write_runs(client, experiment, parent, [record("a")], stores)
    assert stores[(run_writer.BATCH_ENDPOINT, client.tracking_uri)] is False  # 404: asked once per worker
    before = len(requests_in_log(servers, "plain"))
    second = run_writer.write_runs(client, experiment, parent, [record("b")], stores)
    assert f"POST {run_writer.BATCH_ENDPOINT}" not in requests_in_log(servers, "plain")[before:]
    assert [client.get_run(i).info.run_name for i in first + second] == ["a", "b"]


def post(uri: str, body) -> tuple[int, dict]:
    """POST a body to the batch route as it is, without the client's fallbacks."""
    import json
    import urllib.error
    import urllib.request

    request = urllib.request.Request(uri + run_writer.BATCH_ENDPOINT, method="POST",
                                     headers={"Content-Type": "application/json"}, data=json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        assert error.headers[run_writer.BATCH_HEADER] == "1"  # the route's own answer, not a missing route
        return error.code, json.loads(error.read())


def test_a_batch_sent_again_after_a_lost_answer_is_written_once(servers):
    client, experiment, parent, _ = server_store(servers, "mtc")
    body = run_writer.batch_payload(experiment, parent, [record("a"), record("b")])
    first, second = post(client.tracking_uri, body), post(client.tracking_uri, body)
    assert first == second and first[0] == 200 and first[1]["run_ids"] == [run["id"] for run in body["runs"]]
    children = [run for run in tracking.find_runs(client, experiment) if run.info.run_id != parent]
    assert sorted(run.info.run_name for run in children) == ["a", "b"]


def test_the_batch_route_refuses_what_it_should_not_write(servers, tmp_path):
    """Files outside the run's folder (by name, or by an experiment location that leaves the
    server's destination), ids that are not text, a missing parent: refused, nothing written,
    and the client does not take a refusal for a missing route."""
    client, experiment, parent, _ = server_store(servers, "mtc")
    uri = client.tracking_uri
    escaping = run_writer.batch_payload(experiment, parent, [record("a")])
    escaping["runs"][0]["files"] = {"../../outside.txt": "aGk="}
    status, body = post(uri, escaping)
    assert status == 400 and "leaves the run's folder" in body["message"]
    assert post(uri, {"experiment_id": experiment})[0] == 400
    assert post(uri, {**run_writer.batch_payload(experiment, parent, [record("a")]), "experiment_id": int(experiment)})[0] == 400
    status, body = post(uri, run_writer.batch_payload(experiment, "f" * 32, [record("a")]))
    assert status == 400 and "f" * 32 in body["message"]
    outside = tmp_path / "outside"
    elsewhere = client.create_experiment(f"elsewhere-{uuid.uuid4().hex[:8]}",
                                         artifact_location="mlflow-artifacts:/" + "../" * 12 + str(outside).lstrip("/"))
    elsewhere_parent = client.create_run(elsewhere).info.run_id
    status, body = post(uri, run_writer.batch_payload(elsewhere, elsewhere_parent, [record("a")]))
    assert status == 501 and "not a folder of this server's" in body["message"]
    with pytest.raises(run_writer.BatchNotTaken) as refused:
        run_writer.post_batch(uri, elsewhere, elsewhere_parent, [record("a")])
    assert not refused.value.route_missing
    assert not outside.exists() and not list(servers["mtc"][1].rglob("outside.txt"))
    assert [run.info.run_id for run in tracking.find_runs(client, experiment)] == [parent]


def test_the_batch_route_writes_nothing_once_the_parent_is_closed(servers):
    client, experiment, parent, _ = server_store(servers, "mtc")
    client.set_terminated(parent, "KILLED")
    with pytest.raises(run_writer.ParentClosed, match="KILLED"):
        run_writer.post_batch(client.tracking_uri, experiment, parent, [record("a")])
    assert [run.info.run_id for run in tracking.find_runs(client, experiment)] == [parent]
