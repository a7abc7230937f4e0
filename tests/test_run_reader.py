"""mtc.store.run_reader: a SQL store's runs read with a few Core queries are the Run entities
MLflow's search_runs returns (same runs, order, info, tags, params, latest metrics, NaN
included), and the platform's searches use it on a SQL store."""

import math

import numpy as np
import pytest

from mtc.store import run_reader, run_writer, tracking


def record(name: str, start_ms: int, status: str = "FINISHED", acc: float = 0.75) -> run_writer.RunRecord:
    metrics = (("acc/mean", acc, 0), ("nmi/task0", float("nan"), 0), ("objective/final", math.inf, 0),
               ("objective/trace", 3.0, 0), ("objective/trace", 2.0, 1), ("objective/trace", 1.5, 7))
    return run_writer.RunRecord(
        name, {tracking.TRIAL_KEY_TAG: name, "mlflow.source.name": "test"}, {"alpha": "0.5", "seed": name},
        metrics, status, start_ms, start_ms + 4_321, lambda folder: np.savez_compressed(folder / "trial.npz", a=1))


def mlflow_search(client, experiment: str, filter_string: str = "") -> list:
    runs, token = [], None
    while True:
        page = client.search_runs([experiment], filter_string=filter_string, max_results=1000, page_token=token)
        runs += page
        token = page.token
        if not token:
            return runs


def assert_same_runs(ours: list, theirs: list) -> None:
    assert [run.info.run_id for run in ours] == [run.info.run_id for run in theirs]
    for a, b in zip(ours, theirs):
        assert a.info.to_proto() == b.info.to_proto()
        assert a.data.tags == b.data.tags and a.data.params == b.data.params
        assert a.data.metrics.keys() == b.data.metrics.keys()
        for key, value in a.data.metrics.items():
            assert (math.isnan(value) and math.isnan(b.data.metrics[key])) or value == b.data.metrics[key], key
        assert sorted((m.key, m.step, m.timestamp) for m in a.data._metric_objs) == \
            sorted((m.key, m.step, m.timestamp) for m in b.data._metric_objs)


@pytest.fixture
def store(tmp_path):
    """Two sweeps' parents and children written by both routes (equal start times among them,
    so the run id breaks ties), a deleted child, a run without a name."""
    client = tracking.client_for(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = tracking.ensure_experiment(client, "reader", str(tmp_path / "artifacts"))
    parents = []
    for key in ("sweep-a", "sweep-b"):
        parent = client.create_run(experiment, run_name=key, tags={tracking.SWEEP_KEY_TAG: key}).info.run_id
        parents.append(parent)
        batch = [record(f"{key}-{i}", 1_700_000_000_000 + 1000 * (i // 2), acc=0.1 * i) for i in range(5)]
        children = [{tracking.PARENT_TAG: parent}] * len(batch)
        batch = [run_writer.RunRecord(r.name, {**r.tags, **tag}, r.params, r.metrics, r.status, r.start_ms, r.end_ms,
                                      r.write_files) for r, tag in zip(batch, children)]
        run_writer.write_sql(run_writer.sql_store(client.tracking_uri, None), experiment, parent, batch[:3])
        run_writer.write_with_client(client, experiment, parent, batch[3:])
    deleted = tracking.find_runs(client, experiment, **{tracking.TRIAL_KEY_TAG: "sweep-a-0"})[0].info.run_id
    client.delete_run(deleted)
    client.create_run(experiment)  # no name given: MLflow names it
    return client, experiment, parents, deleted


def test_the_core_reads_are_mlflows_runs(store):
    client, experiment, parents, deleted = store
    sql = run_reader.sql_store(client)
    everything = run_reader.read_runs(sql, experiment)
    assert len(everything) == 2 + 2 * 5 - 1 + 1 and deleted not in {run.info.run_id for run in everything}
    assert_same_runs(everything, mlflow_search(client, experiment))
    children = run_reader.read_runs(sql, experiment, {tracking.PARENT_TAG: parents[1]})
    assert len(children) == 5
    assert_same_runs(children, mlflow_search(client, experiment, f"tags.`{tracking.PARENT_TAG}` = '{parents[1]}'"))
    one = run_reader.read_runs(sql, experiment, {tracking.PARENT_TAG: parents[1], tracking.TRIAL_KEY_TAG: "sweep-b-3"})
    assert [run.data.params["seed"] for run in one] == ["sweep-b-3"]
    swept = run_reader.read_runs(sql, experiment, has_tag=tracking.SWEEP_KEY_TAG)
    assert sorted(run.info.run_name for run in swept) == ["sweep-a", "sweep-b"]
    assert_same_runs(swept, mlflow_search(client, experiment, f"tags.`{tracking.SWEEP_KEY_TAG}` LIKE '%'"))
    assert math.isnan(children[0].data.metrics["nmi/task0"])


def test_the_children_of_many_parents_in_one_read_are_each_parents_search(store, monkeypatch):
    client, experiment, parents, deleted = store
    sql = run_reader.sql_store(client)
    for chunk in (1, 500):
        monkeypatch.setattr(run_reader, "CHUNK", chunk)
        children = run_reader.read_children(sql, experiment, tracking.PARENT_TAG, [parents[1], parents[0], parents[1]])
        assert list(children) == [parents[1], parents[0]]
        for parent in parents:
            assert_same_runs(children[parent], mlflow_search(client, experiment,
                                                             f"tags.`{tracking.PARENT_TAG}` = '{parent}'"))
        assert len(children[parents[0]]) == 4 and deleted not in {run.info.run_id for run in children[parents[0]]}
    assert run_reader.read_children(sql, experiment, tracking.PARENT_TAG, ["no-such-run"]) == {"no-such-run": []}


def test_the_platforms_searches_read_a_sql_store_with_core_queries(store, monkeypatch):
    client, experiment, parents, _ = store
    expected = (mlflow_search(client, experiment), mlflow_search(client, experiment,
                f"tags.`{tracking.PARENT_TAG}` = '{parents[0]}'"))

    def no_search(*args, **kwargs):
        raise AssertionError("MLflow's search_runs was used on a SQL store")

    monkeypatch.setattr(client, "search_runs", no_search)
    assert_same_runs(tracking.search_all(client, experiment), expected[0])
    assert_same_runs(tracking.find_runs(client, experiment, **{tracking.PARENT_TAG: parents[0]}), expected[1])
    assert_same_runs(tracking.find_children(client, experiment, [parents[0]])[parents[0]], expected[1])
    assert len(tracking.runs_with_tag(client, experiment, tracking.SWEEP_KEY_TAG)) == 2


def test_a_store_that_is_not_sql_has_no_core_route():
    class Remote:
        class _tracking_client:
            store = object()

    assert run_reader.sql_store(Remote()) is None
