"""A Ray Tune trial's finished runs, written to the store at once.

MLflow's client writes a run in several calls (create_run, log_batch, set_terminated), each one
SQL transaction or more: about seven commits and 30 ms of SQLAlchemy ORM work per run on
SQLite, more than a fit of the papers' protocols, and two workers writing at once wait for each
other's commits. On a SQL store (``sqlite``, ``postgresql``, ``mysql``, ``mssql`` URIs) a batch's
runs go in one transaction of bulk INSERTs into MLflow's own tables, through MLflow's own
SQLAlchemy models (the schema stays MLflow's and its migrations keep applying), with the rows
its client writes for the same run: the run, its tags (``mlflow.runName`` included), params,
metrics (NaN and infinities stored as MLflow stores them) and latest metrics
(tests/test_run_writer.py compares the two row for row). Against a tracking server (``http``)
the batch goes in one request where the server serves BATCH_ENDPOINT (``mlflow server
--app-name mtc``, as ``mtc.stack`` starts it: mtc.store.server_app, which writes it as above),
else each run takes the client's calls. Either way a run's files are in the artifact store before
its rows are written, so a run that can be read has its files.
"""

from __future__ import annotations

import base64
import json
import shutil
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

SQL_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")


@dataclass(frozen=True)
class RunRecord:
    """A finished run, ready to be written (write_runs).

    Attributes
    ----------
    name : str
        The run's name (``mlflow.runName``).
    tags, params : dict of str to str
        The run's tags and params, as MLflow stores them.
    metrics : tuple of (str, float, int)
        Each metric value as (key, value, step).
    status : str
        ``FINISHED`` or ``FAILED``.
    start_ms, end_ms : int
        Start and end in epoch milliseconds.
    write_files : callable
        ``write_files(folder)`` writes the run's artifacts into ``folder``.
    """

    name: str
    tags: dict[str, str]
    params: dict[str, str]
    metrics: tuple[tuple[str, float, int], ...]
    status: str
    start_ms: int
    end_ms: int
    write_files: Callable[[Path], None]


class ParentClosed(Exception):
    """The parent run is no longer RUNNING (its driver stopped and closed the sweep): the
    batch's runs were not written."""


class RunIdTaken(Exception):
    """A run id of a batch is the id of another run already stored (the parent's, or any run
    that is not the batch's own): none of the batch's runs were written."""


def is_sql_store(tracking_uri: str) -> bool:
    return tracking_uri.split(":", 1)[0].split("+", 1)[0] in SQL_SCHEMES


def write_runs(client, experiment_id: str, parent_id: str, records: list[RunRecord],
               stores: dict | None = None) -> list[str]:
    """Write ``records`` as runs of the experiment (children of ``parent_id`` by their tags)
    and return their run ids; raises ParentClosed, writing no row, when the parent run is not
    RUNNING. A SQL store's rows go in one transaction (write_sql); a tracking server takes the
    batch in one request where it serves BATCH_ENDPOINT (``mlflow server --app-name mtc``,
    mtc.store.server_app), else each run's requests (write_with_client). ``stores`` keeps, per
    tracking URI, its SQLAlchemy store and whether its server took batches between calls (a
    worker's cache; None: built, and asked, per call)."""
    if not records:
        return []
    if is_sql_store(client.tracking_uri):
        store = sql_store(client.tracking_uri, stores)
        return write_sql(store, experiment_id, parent_id, records)
    offered = (BATCH_ENDPOINT, client.tracking_uri)
    if stores is None or stores.get(offered, True):
        try:
            return post_batch(client.tracking_uri, experiment_id, parent_id, records)
        except BatchNotTaken as refusal:
            if stores is not None and refusal.route_missing:
                stores[offered] = False
    return write_with_client(client, experiment_id, parent_id, records)


def sql_store(tracking_uri: str, stores: dict | None):
    """MLflow's SqlAlchemyStore of the URI (its engine, sessions and models), from ``stores``
    when it holds one."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    if stores is not None and tracking_uri in stores:
        return stores[tracking_uri]
    store = SqlAlchemyStore(tracking_uri, None)
    if stores is not None:
        stores[tracking_uri] = store
    return store


def upload_files(artifact_uri: str, record: RunRecord) -> None:
    """The run's files into its artifact folder: written there directly when the artifact store
    is a local folder (a temporary folder and its copy cost as much as writing the files), else
    written to a temporary folder and uploaded by MLflow's artifact repository. A folder left
    half-written by an error is removed."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
    from mlflow.utils.file_utils import local_file_uri_to_path

    if urlparse(artifact_uri).scheme in ("", "file"):
        folder = Path(local_file_uri_to_path(artifact_uri))
        folder.mkdir(parents=True, exist_ok=True)
        try:
            record.write_files(folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return
    with tempfile.TemporaryDirectory() as tmp:
        record.write_files(Path(tmp))
        get_artifact_repository(artifact_uri).log_artifacts(tmp)


def write_sql(store, experiment_id: str, parent_id: str, records: list[RunRecord],
              upload: Callable[[str, RunRecord], None] = upload_files, ids: list[str] | None = None) -> list[str]:
    """The SQL route: the rows checked as MLflow checks them, then the files
    (``upload(artifact_uri, record)``), then every row in one transaction, the parent's status
    read last inside it and locked (SQLite: the transaction holds the write lock; PostgreSQL:
    FOR SHARE on the parent's row), so the driver cannot close the parent between the check and
    the commit. ``ids``: the runs' ids (default: new uuids)."""
    import sqlalchemy as sa
    from mlflow.store.tracking.dbmodels.models import SqlLatestMetric, SqlMetric, SqlParam, SqlRun, SqlTag
    from mlflow.utils.uri import append_to_uri_path

    location = store.get_experiment(experiment_id).artifact_location
    ids = ids or [uuid.uuid4().hex for _ in records]
    uris = [append_to_uri_path(location, run_id, store.ARTIFACTS_FOLDER_NAME) for run_id in ids]
    rows = sql_rows(store, experiment_id, ids, uris, records)  # validated before any file is written
    for uri, record in zip(uris, records):
        upload(uri, record)
    with store.ManagedSessionMaker(read_only=False) as session:
        for model, table_rows in zip((SqlRun, SqlTag, SqlParam, SqlMetric, SqlLatestMetric), rows):
            if table_rows:  # the table's Core insert (one executemany): the ORM's bulk insert took 15 % more CPU
                session.execute(sa.insert(model.__table__), table_rows)
        status = session.execute(sa.select(SqlRun.status).where(SqlRun.run_uuid == parent_id)
                                 .with_for_update(read=True)).scalar()
        if status != "RUNNING":
            session.rollback()  # raised after the session closes: MLflow's session wraps every error
    if status != "RUNNING":
        raise ParentClosed(f"parent run {parent_id} is {status}")
    return ids


def stored_runs(store, experiment_id: str, parent_id: str, ids: list[str], records: list[RunRecord]) -> list[bool]:
    """Which of a batch's runs the store holds already, written by an earlier sending of the same
    batch whose answer was lost: a stored run with the record's id, experiment, name, start and
    end, and its tags.

    Parameters
    ----------
    store : mlflow.store.tracking.sqlalchemy_store.SqlAlchemyStore
        The SQL store.
    experiment_id, parent_id : str
        The batch's experiment and parent run.
    ids : list of str
        The runs' ids, chosen by the client.
    records : list of RunRecord
        The runs, in the order of ``ids``.

    Returns
    -------
    list of bool
        Per run, whether it is stored.

    Raises
    ------
    RunIdTaken
        A stored run has one of the ids but is not that record's run (the parent, a run of
        another batch or experiment): the batch must not be acknowledged, nor its files written
        into that run's folder.
    """
    import sqlalchemy as sa
    from mlflow.store.tracking.dbmodels.models import SqlRun, SqlTag
    from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME

    with store.ManagedSessionMaker() as session:
        found = {row.run_uuid: row for row in session.execute(
            sa.select(SqlRun.run_uuid, SqlRun.experiment_id, SqlRun.name, SqlRun.start_time, SqlRun.end_time)
            .where(SqlRun.run_uuid.in_(ids)))}
        tags: dict[str, dict[str, str]] = {}
        for run_id, key, value in session.execute(sa.select(SqlTag.run_uuid, SqlTag.key, SqlTag.value)
                                                  .where(SqlTag.run_uuid.in_(list(found)))):
            tags.setdefault(run_id, {})[key] = value
    for run_id, record in zip(ids, records):
        row = found.get(run_id)
        if row is None:
            continue
        same = (str(row.experiment_id), row.name, row.start_time, row.end_time) == \
            (experiment_id, record.name, record.start_ms, record.end_ms) and \
            {**record.tags, MLFLOW_RUN_NAME: record.name}.items() <= tags.get(run_id, {}).items()
        if not same:
            whose = "the parent run's" if run_id == parent_id else "another run's"
            raise RunIdTaken(f"run id {run_id} is already {whose} id; nothing written")
    return [run_id in found for run_id in ids]


def sql_rows(store, experiment_id: str, ids: list[str], uris: list[str], records: list[RunRecord]) -> tuple:
    """The rows of MLflow's tables for the records: (runs, tags, params, metrics, latest
    metrics), as the client's create_run, log_batch and set_terminated write them."""
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME
    from mlflow.utils.validation import _validate_batch_log_data

    runs, tags, params, metrics, latest = [], [], [], [], []
    for run_id, uri, record in zip(ids, uris, records):
        run_tags = {**record.tags, MLFLOW_RUN_NAME: record.name}
        _validate_batch_log_data([Metric(k, v, record.end_ms, s) for k, v, s in record.metrics],
                                 [Param(k, v) for k, v in record.params.items()],
                                 [RunTag(k, v) for k, v in run_tags.items()])
        runs.append({"run_uuid": run_id, "name": record.name, "artifact_uri": uri, "experiment_id": int(experiment_id),
                     "source_type": "UNKNOWN", "source_name": "", "entry_point_name": "",
                     "user_id": record.tags.get("mlflow.user", "unknown"), "status": record.status,
                     "start_time": record.start_ms, "end_time": record.end_ms, "deleted_time": None,
                     "source_version": "", "lifecycle_stage": "active"})
        tags += [{"run_uuid": run_id, "key": k, "value": v} for k, v in run_tags.items()]
        params += [{"run_uuid": run_id, "key": k, "value": v} for k, v in record.params.items()]
        newest: dict[str, dict] = {}
        for key, value, step in dict.fromkeys(record.metrics):  # MLflow drops repeated (key, value, step)
            is_nan, stored = store.sanitize_metric_value(float(value))
            row = {"run_uuid": run_id, "key": key, "value": stored, "timestamp": record.end_ms, "step": step,
                   "is_nan": is_nan}
            metrics.append(row)
            if key not in newest or (step, stored) > (newest[key]["step"], newest[key]["value"]):
                newest[key] = row
        latest += list(newest.values())
    return runs, tags, params, metrics, latest


BATCH_ENDPOINT = "/api/2.0/mtc/runs/write-batch"  # served by mtc.store.server_app


BATCH_HEADER = "X-MTC-Batch"  # on every answer of the route: a 404 without it is a server without the route


class BatchNotTaken(Exception):
    """The tracking server does not take this batch in one request: it has no BATCH_ENDPOINT
    (404 or 405 without BATCH_HEADER; ``route_missing``, remembered per worker), the sender may
    not use it (403), or the server does not write this batch itself (501)."""

    def __init__(self, status: int, route_missing: bool):
        super().__init__(f"HTTP {status}")
        self.route_missing = route_missing


def batch_payload(experiment_id: str, parent_id: str, records: list[RunRecord]) -> dict:
    """The request body of BATCH_ENDPOINT: each run's id (chosen here, so that a request sent
    again after a lost answer is recognised), fields, metric values as text (JSON has no NaN or
    infinity; ``float`` reads them back) and files as {relative path: base64}, written one run
    after the other in this thread."""
    runs = []
    for record in records:
        with tempfile.TemporaryDirectory() as tmp:
            record.write_files(Path(tmp))
            files = {path.relative_to(tmp).as_posix(): base64.b64encode(path.read_bytes()).decode()
                     for path in sorted(Path(tmp).rglob("*")) if path.is_file()}
        runs.append({"id": uuid.uuid4().hex, "name": record.name, "tags": record.tags, "params": record.params,
                     "metrics": [(key, repr(float(value)), step) for key, value, step in record.metrics],
                     "status": record.status, "start_ms": record.start_ms, "end_ms": record.end_ms, "files": files})
    return {"experiment_id": str(experiment_id), "parent_id": parent_id, "runs": runs}


def post_batch(tracking_uri: str, experiment_id: str, parent_id: str, records: list[RunRecord]) -> list[str]:
    """The batch in one request to the server's BATCH_ENDPOINT (its credentials as MLflow's
    client finds them, its retries of lost answers and 5xx: the route writes a batch once); the
    run ids in the records' order. Raises BatchNotTaken (above), ParentClosed on the 409 of a
    closed parent (nothing written) and RuntimeError for any other refusal (the 409 RUN_CHANGED
    of a stored run's id sent with other content among them)."""
    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request

    response = http_request(get_default_host_creds(tracking_uri), BATCH_ENDPOINT, "POST",
                            data=json.dumps(batch_payload(experiment_id, parent_id, records)),
                            extra_headers={"Content-Type": "application/json"}, raise_on_status=False)
    served = BATCH_HEADER in response.headers
    if response.status_code in (404, 405) and not served:
        raise BatchNotTaken(response.status_code, route_missing=True)
    if response.status_code in (403, 501):
        raise BatchNotTaken(response.status_code, route_missing=False)
    try:
        body = response.json()
    except ValueError:
        body = {"message": response.text[:500]}
    if response.status_code == 409 and body.get("error_code") == "RUN_CHANGED":  # a stored run's id, other content
        raise RuntimeError(body["message"])
    if response.status_code == 409:
        raise ParentClosed(body.get("message", f"parent run {parent_id} is closed"))
    if response.status_code != 200:
        raise RuntimeError(f"the tracking server refused a batch of {len(records)} runs "
                           f"(HTTP {response.status_code}): {body.get('message', body)}")
    return body["run_ids"]


CLIENT_THREADS = 8  # runs of a batch written at once against a tracking server (write_with_client)


def write_with_client(client, experiment_id: str, parent_id: str, records: list[RunRecord]) -> list[str]:
    """The tracking server's route: the client's calls per run (create_run with every tag,
    one log_batch, the files, set_terminated), after one check of the parent's status. A
    run's four requests wait for the server's answers, so the batch's runs are sent by up to
    CLIENT_THREADS threads at once (one after the other, a worker spent most of a trial waiting
    on the network, docs/results/README.md); their files are written first, one run after the
    other in this thread (drawing a figure uses the worker's shared matplotlib frames). The ids
    come back in the records' order; the first error is raised once every thread has ended."""
    from concurrent.futures import ThreadPoolExecutor

    status = client.get_run(parent_id).info.status
    if status != "RUNNING":
        raise ParentClosed(f"parent run {parent_id} is {status}")
    with tempfile.TemporaryDirectory() as tmp:
        folders = [Path(tmp) / str(i) for i in range(len(records))]
        for folder, record in zip(folders, records):
            folder.mkdir()
            record.write_files(folder)
        if len(records) == 1:
            return [send_with_client(client, experiment_id, records[0], folders[0])]
        with ThreadPoolExecutor(max_workers=min(CLIENT_THREADS, len(records)), thread_name_prefix="mtc-runs") as pool:
            futures = [pool.submit(send_with_client, client, experiment_id, record, folder)
                       for record, folder in zip(records, folders)]
        return [future.result() for future in futures]


def send_with_client(client, experiment_id: str, record: RunRecord, folder: Path) -> str:
    """One run through the client's calls, its files from ``folder``; returns its id."""
    from mlflow.entities import Metric, Param
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    run = client.create_run(experiment_id, start_time=record.start_ms, run_name=record.name, tags=record.tags)
    client.log_batch(run.info.run_id, metrics=[Metric(k, v, record.end_ms, s) for k, v, s in record.metrics],
                     params=[Param(k, v) for k, v in record.params.items()])
    get_artifact_repository(run.info.artifact_uri, tracking_uri=client.tracking_uri).log_artifacts(str(folder))
    client.set_terminated(run.info.run_id, record.status, end_time=record.end_ms)
    return run.info.run_id
