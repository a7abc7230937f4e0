"""mtc.store.run_writer: a batch of finished runs in one transaction writes the rows MLflow's
client writes for the same runs, and nothing when the parent run was closed."""

import math

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
