"""A SQL store's runs read back in a few queries, for what the platform reads most.

A report reads every child run of its sweep, a compare every run of its sweeps. MLflow's
``search_runs`` loads them through SQLAlchemy's ORM: an object per run, tag, param and latest
metric (45,000 for three sweeps of 330 trials), which took about half of a sweep's report and of
a compare (cProfile, docs/results/README.md). On a SQL store (``sqlite``, ``postgresql``,
``mysql``, ``mssql``) this module selects the same rows with SQLAlchemy Core from MLflow's own
tables (its models, so its schema and migrations apply) and builds the same ``Run`` entities:
the same runs in the same order (start time descending, then run id), with their info, tags,
params and latest metrics (NaN as MLflow returns it). It leaves out the runs' dataset inputs
and model outputs, which no reader of the platform uses. tests/test_tracking.py compares it
with ``search_runs`` entity for entity. Against a tracking server the client's search is used.
"""

from __future__ import annotations

from collections import defaultdict

CHUNK = 500  # run ids per IN (...) query: below every database's limit on bound parameters


def sql_store(client):
    """The client's MLflow SqlAlchemyStore, or None (a tracking server, another store)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    store = client._tracking_client.store  # the store the client itself writes and reads through
    return store if isinstance(store, SqlAlchemyStore) else None


def run_columns():
    """The runs table's columns a Run entity needs."""
    from mlflow.store.tracking.dbmodels.models import SqlRun

    return (SqlRun.run_uuid, SqlRun.name, SqlRun.user_id, SqlRun.status, SqlRun.start_time, SqlRun.end_time,
            SqlRun.lifecycle_stage, SqlRun.artifact_uri)


def read_runs(store, experiment_id: str, tags: dict[str, str] | None = None, has_tag: str | None = None) -> list:
    """The experiment's active runs whose tags equal ``tags`` (and that have a tag ``has_tag``),
    as ``mlflow.entities.Run``, ordered as ``search_runs`` orders them."""
    import sqlalchemy as sa
    from mlflow.store.tracking.dbmodels.models import SqlRun, SqlTag

    query = sa.select(*run_columns()).where(SqlRun.experiment_id == int(experiment_id),
                                            SqlRun.lifecycle_stage == "active")
    for key, value in (tags or {}).items():
        query = query.where(SqlRun.run_uuid.in_(sa.select(SqlTag.run_uuid).where(SqlTag.key == key,
                                                                                   SqlTag.value == str(value))))
    if has_tag is not None:
        query = query.where(SqlRun.run_uuid.in_(sa.select(SqlTag.run_uuid).where(SqlTag.key == has_tag)))
    query = query.order_by(SqlRun.start_time.desc(), SqlRun.run_uuid)
    with store.ManagedSessionMaker() as session:
        rows = session.execute(query).all()
        return _runs(session, rows, experiment_id)


def read_children(store, experiment_id: str, parent_key: str, parent_ids: list[str]) -> dict[str, list]:
    """The experiment's active runs whose tag ``parent_key`` names each of ``parent_ids``, as
    ``read_runs(store, experiment_id, {parent_key: parent})`` gives them for each parent (the
    same runs in the same order), in one query per CHUNK parents: no index covers a tag's value,
    so each query reads every row of that tag (0.17 s a sweep in a store of 70,000 runs, a third
    of a compare's reading)."""
    import sqlalchemy as sa
    from mlflow.store.tracking.dbmodels.models import SqlRun, SqlTag

    children = {parent: [] for parent in parent_ids}
    parents = list(children)
    with store.ManagedSessionMaker() as session:
        for start in range(0, len(parents), CHUNK):
            query = (sa.select(*run_columns(), SqlTag.value.label("parent"))
                     .join(SqlTag, sa.and_(SqlTag.run_uuid == SqlRun.run_uuid, SqlTag.key == parent_key))
                     .where(SqlRun.experiment_id == int(experiment_id), SqlRun.lifecycle_stage == "active",
                            SqlTag.value.in_(parents[start:start + CHUNK]))
                     .order_by(SqlRun.start_time.desc(), SqlRun.run_uuid))
            rows = session.execute(query).all()
            for row, run in zip(rows, _runs(session, rows, experiment_id)):
                children[row.parent].append(run)
    return children


def _runs(session, rows, experiment_id: str) -> list:
    """The Run entities of rows of the runs table, with their tags, params and latest metrics."""
    tags_of, params_of, metrics_of = _children(session, [row.run_uuid for row in rows])
    return [_run(row, experiment_id, tags_of[row.run_uuid], params_of[row.run_uuid], metrics_of[row.run_uuid])
            for row in rows]


def _children(session, ids: list[str]) -> tuple[dict, dict, dict]:
    """Each run's tags, params and latest metrics, by run id."""
    import sqlalchemy as sa
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.store.tracking.dbmodels.models import SqlLatestMetric, SqlParam, SqlTag

    tags, params, metrics = defaultdict(list), defaultdict(list), defaultdict(list)
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start:start + CHUNK]
        for run_id, key, value in driver_rows(session, sa.select(SqlTag.run_uuid, SqlTag.key, SqlTag.value)
                                              .where(SqlTag.run_uuid.in_(chunk))):
            tags[run_id].append(RunTag(key, value))
        for run_id, key, value in driver_rows(session, sa.select(SqlParam.run_uuid, SqlParam.key, SqlParam.value)
                                              .where(SqlParam.run_uuid.in_(chunk))):
            params[run_id].append(Param(key, value))
        for run_id, key, value, timestamp, step, is_nan in driver_rows(
                session, sa.select(SqlLatestMetric.run_uuid, SqlLatestMetric.key, SqlLatestMetric.value,
                                   SqlLatestMetric.timestamp, SqlLatestMetric.step, SqlLatestMetric.is_nan)
                .where(SqlLatestMetric.run_uuid.in_(chunk))):
            metrics[run_id].append(Metric(key, float("nan") if is_nan else value, timestamp, step))
    return tags, params, metrics


def driver_rows(session, query) -> list[tuple]:
    """The query's rows as the database driver returns them (tuples), without SQLAlchemy's Row
    objects: for the tags, params and latest metrics of a compare's runs (1.7 million rows for the
    spmtc study's folders) these took about 16 of the 22 seconds of reading them. The columns read
    this way need no conversion: text, integers, floats, and ``is_nan`` read by its truth (SQLite
    returns 0 or 1, PostgreSQL a bool)."""
    result = session.connection().execute(query)  # Core's CursorResult (the session's would be the ORM's)
    try:
        return result.cursor.fetchall()
    finally:
        result.close()


def _run(row, experiment_id: str, tags: list, params: list, metrics: list):
    """The Run entity of one row, as SqlRun.to_mlflow_entity builds it."""
    from mlflow.entities import Run, RunData, RunInfo
    from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME

    name = row.name or next((tag.value for tag in tags if tag.key == MLFLOW_RUN_NAME), None)
    info = RunInfo(run_id=row.run_uuid, run_name=name, experiment_id=str(experiment_id), user_id=row.user_id,
                   status=row.status, start_time=row.start_time, end_time=row.end_time,
                   lifecycle_stage=row.lifecycle_stage, artifact_uri=row.artifact_uri)
    return Run(run_info=info, run_data=RunData(metrics=metrics, params=params, tags=tags))
