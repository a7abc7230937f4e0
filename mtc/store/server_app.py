"""The tracking server of ``mtc.stack``: MLflow's own server plus one route that takes a Ray Tune
trial's finished runs in one request.

Through MLflow's REST API a run costs four requests (create_run, log_batch, the files,
set_terminated), each through MLflow's ORM: 29-41 ms of server CPU per trial (docs/cluster.md),
85.4 ms of platform time per trial against 6.6 ms straight into the server's PostgreSQL. The
route ``run_writer.BATCH_ENDPOINT`` takes a whole batch (every run's id, tags, params, metrics,
status, times and files) and writes it as the SQL route does (``run_writer.write_sql``: files
first, then one transaction of bulk INSERTs through MLflow's models, the parent's status checked
inside it): the same rows as the client's calls (tests/test_run_writer.py). The workers then
need the server's address only, not the database's.

``mlflow server --app-name mtc`` serves it (``mtc-basic-auth``: behind MLflow's basic-auth app,
which checks the route as the calls it replaces: a user who is not an admin needs to be allowed
to create runs in the experiment and to update them). The client chooses the run ids, so a
request retried after a lost answer finds its runs written and writes nothing twice. The route
writes files only into the server's own ``--artifacts-destination`` (experiments whose artifacts
are served as ``mlflow-artifacts:/``), only on a SQL backend store and without workspaces;
anything else is answered 501 and the client sends each run's requests instead, as it does to a
plain ``mlflow server`` (404).
"""

from __future__ import annotations

import base64
import binascii
import os
from collections import Counter
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from mtc.store import run_writer
from mtc.store.disk import full_disk


def create_app():
    """``mlflow server --app-name mtc``: MLflow's app with the batch route."""
    return served_app(auth=False)


def create_auth_app():
    """``mlflow server --app-name mtc-basic-auth``: the same behind MLflow's basic-auth app."""
    return served_app(auth=True)


def served_app(auth: bool):
    """MLflow's Flask app with the route, wrapped as ``mlflow server`` wraps it (the FastAPI app
    on uvicorn, the default; Flask itself on gunicorn and waitress)."""
    from mlflow.environment_variables import _MLFLOW_SGI_NAME
    from mlflow.server import app

    if run_writer.BATCH_ENDPOINT not in {rule.rule for rule in app.url_map.iter_rules()}:
        app.add_url_rule(run_writer.BATCH_ENDPOINT, view_func=write_batch, methods=["POST"])
    if auth:
        from mlflow.server import auth as basic_auth

        basic_auth.BEFORE_REQUEST_VALIDATORS[(run_writer.BATCH_ENDPOINT, "POST")] = may_write_runs
        return basic_auth.create_app(app)
    if _MLFLOW_SGI_NAME.get() == "uvicorn":
        from mlflow.server.fastapi_app import create_fastapi_app

        return create_fastapi_app(app)
    return app


def may_write_runs() -> bool:
    """The basic-auth app's check of the route for a user who is not an admin: what create_run
    requires in the experiment, and what log_batch and set_terminated require of the new runs
    (update on runs, from the experiment where no run grant says otherwise). Uses the app's
    own requirement helpers (mlflow pinned to 3.17.2, pyproject.toml)."""
    from mlflow.server import auth as basic_auth
    from mlflow.server.auth.requirements import Requirement

    experiment_id = basic_auth._get_request_param("experiment_id")
    if not isinstance(experiment_id, str):  # grants match ids as text: 5 would miss a grant on "5"
        return False
    update_runs = Requirement(basic_auth.RESOURCE_TYPE_RUN, "*", "update",
                              fallback_if_no_grant=((basic_auth.RESOURCE_TYPE_EXPERIMENT, experiment_id),))
    return basic_auth._authorize_create_in_experiment(experiment_id, basic_auth.RESOURCE_TYPE_RUN, [update_runs])


INT64 = range(-2**63, 2**63)  # MLflow's steps and times: BIGINT columns


class BadBatch(ValueError):
    """A request body that is not a batch of runs."""


class NotServed(Exception):
    """A batch this server does not write itself (answered 501: the client sends each run's
    requests instead)."""


class RunChanged(Exception):
    """A run of the batch is stored already, by its id, name, times and tags, but with other
    content: the batch reuses stored run ids (answered 409, nothing written)."""


def write_batch():
    """POST ``{"experiment_id", "parent_id", "runs": [...]}`` (``run_writer.batch_payload``):
    200 with the run ids once every run of the batch is stored (a request sent again after a
    lost answer finds its runs and writes nothing twice: write_unstored); 409, nothing written,
    when the parent is no longer RUNNING or a run of the batch is stored with other content
    (RunChanged); 400, in one line, for a malformed body, an id that
    is already another run's (run_writer.RunIdTaken: the parent's, say), a parent that is not
    in the experiment or an experiment that is not active; 501 for a batch the server does not
    write (NotServed). Every answer carries ``run_writer.BATCH_HEADER``, so that the client can
    tell it from a server without the route. Behind basic auth, MLflow's app has answered
    401/403 before this runs for a sender who may not write these runs (may_write_runs)."""
    from flask import jsonify, request
    from mlflow.exceptions import MlflowException
    from mlflow.server import handlers

    def answer(status: int, **body):
        response = jsonify(**body)
        response.status_code = status
        response.headers[run_writer.BATCH_HEADER] = "1"
        return response

    try:
        experiment_id, parent_id, ids, records = parsed_batch(request.get_json(silent=True))
        store = handlers._get_tracking_store()
        check_served(store)
        experiment = store.get_experiment(experiment_id)
        if experiment.lifecycle_stage != "active":
            raise BadBatch(f"experiment {experiment_id} is {experiment.lifecycle_stage}")
        parent = store.get_run(parent_id)
        if parent.info.experiment_id != experiment_id:
            raise BadBatch(f"parent run {parent_id} is not in experiment {experiment_id}")
        write_unstored(store, experiment_id, parent, ids, records)
    except BadBatch as error:
        return answer(400, error_code="INVALID_PARAMETER_VALUE", message=str(error))
    except run_writer.RunIdTaken as error:
        return answer(400, error_code="RESOURCE_ALREADY_EXISTS", message=str(error))
    except run_writer.ParentClosed as error:
        return answer(409, error_code="PARENT_CLOSED", message=str(error))
    except RunChanged as error:
        return answer(409, error_code="RUN_CHANGED", message=str(error))
    except NotServed as error:
        return answer(501, error_code="NOT_IMPLEMENTED", message=str(error))
    except OSError as error:  # the files (a full disk): 507, which the client does not retry, unlike a 500
        return answer(507, error_code="INTERNAL_ERROR", message=full_disk(error) or f"{type(error).__name__}: {error}")
    except MlflowException as error:  # a missing parent or experiment (400, not the 404 of a missing route)
        status = error.get_http_status_code()
        return answer(400 if status == 404 else status, error_code=error.error_code, message=one_line(error))
    return answer(200, run_ids=ids)


def write_unstored(store, experiment_id: str, parent, ids: list[str], records: list[run_writer.RunRecord]) -> None:
    """Write the batch's runs that the store does not hold yet (stored_as_sent, which raises
    RunIdTaken for an id of another run and RunChanged for a run stored with other content
    before any file is written). When a sending of the same batch commits while this one is
    being written (the client sent it again before the first had finished), this one's INSERT
    fails on the run ids: the batch stands if every run is now stored as the batch's."""
    from mlflow.exceptions import MlflowException
    from sqlalchemy.exc import IntegrityError

    parent_id = parent.info.run_id
    stored = stored_as_sent(store, experiment_id, parent_id, ids, records)
    unstored = [i for i, done in enumerate(stored) if not done]
    if not unstored:
        return
    if parent.info.status != "RUNNING":  # checked again inside the transaction; no files for nothing
        raise run_writer.ParentClosed(f"parent run {parent_id} is {parent.info.status}")
    try:
        run_writer.write_sql(store, experiment_id, parent_id, [records[i] for i in unstored], upload=served_upload,
                             ids=[ids[i] for i in unstored])
    except MlflowException as error:
        if not isinstance(error.__cause__, IntegrityError) or \
                not all(stored_as_sent(store, experiment_id, parent_id, ids, records)):
            raise


def stored_as_sent(store, experiment_id: str, parent_id: str, ids: list[str],
                   records: list[run_writer.RunRecord]) -> list[bool]:
    """Which of a batch's runs the store holds already (run_writer.stored_runs, which compares
    a stored run's name, times and tags), each checked to hold the record's status, params and
    metrics too.

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
        An id is another run's (run_writer.stored_runs).
    RunChanged
        A stored run of the batch holds another status, other params or other metrics: a
        different batch under the same ids, which an acknowledgement would leave unwritten.
    """
    import sqlalchemy as sa
    from mlflow.store.tracking.dbmodels.models import SqlMetric, SqlParam, SqlRun

    stored = run_writer.stored_runs(store, experiment_id, parent_id, ids, records)
    pairs = [(run_id, record) for run_id, record, done in zip(ids, records, stored) if done]
    if not pairs:
        return stored
    done = [run_id for run_id, _ in pairs]
    runs, _, params, metrics, _ = run_writer.sql_rows(store, experiment_id, done, [""] * len(done),
                                                      [record for _, record in pairs])
    sent = rows_by_run(done, [(row["run_uuid"], row["status"]) for row in runs],
                       [(row["run_uuid"], row["key"], row["value"]) for row in params],
                       [(row["run_uuid"], row["key"], row["value"], row["step"], row["is_nan"]) for row in metrics])
    with store.ManagedSessionMaker() as session:
        held = rows_by_run(done, *(session.execute(sa.select(*columns).where(columns[0].in_(done))) for columns in (
            (SqlRun.run_uuid, SqlRun.status), (SqlParam.run_uuid, SqlParam.key, SqlParam.value),
            (SqlMetric.run_uuid, SqlMetric.key, SqlMetric.value, SqlMetric.step, SqlMetric.is_nan))))
    for run_id, record in pairs:
        changed = [part for part, new, old in zip(("status", "params", "metrics"), sent[run_id], held[run_id])
                   if new != old]
        if changed:
            raise RunChanged(f"run {record.name!r} ({run_id}) is stored with other {' and '.join(changed)} than this "
                             "batch's: a batch may not reuse stored run ids; nothing written")
    return stored


def rows_by_run(ids: list[str], *tables) -> dict[str, tuple[set, ...]]:
    """Per run id, per table, the set of its rows: each row of a table is (run id, values...)."""
    found = {run_id: tuple(set() for _ in tables) for run_id in ids}
    for i, rows in enumerate(tables):
        for run_id, *values in rows:
            found[run_id][i].add(tuple(values))
    return found


def one_line(error) -> str:
    """An MlflowException's message in one line; a database error as the database's own first
    line, without the statement, parameters and names that SQLAlchemy and the driver add."""
    from sqlalchemy.exc import SQLAlchemyError

    cause = error.__cause__
    if isinstance(cause, SQLAlchemyError):
        detail = str(getattr(cause, "orig", None) or cause).strip().splitlines()[0]
        return f"the tracking database refused the batch ({detail}); no run written"
    return " ".join(str(error.message).split())


def check_served(store) -> None:
    """NotServed unless the backend store is SQL (run_writer.write_sql), workspaces are off
    (their artifact folders are not the destination's) and the server serves artifacts."""
    from mlflow.environment_variables import MLFLOW_ENABLE_WORKSPACES
    from mlflow.server import ARTIFACTS_ONLY_ENV_VAR, SERVE_ARTIFACTS_ENV_VAR

    if not hasattr(store, "ManagedSessionMaker"):
        raise NotServed(f"the backend store is not a SQL database ({type(store).__name__})")
    if MLFLOW_ENABLE_WORKSPACES.get():
        raise NotServed("workspaces are enabled")
    if os.environ.get(SERVE_ARTIFACTS_ENV_VAR) != "true" or os.environ.get(ARTIFACTS_ONLY_ENV_VAR) == "true":
        raise NotServed("this server does not serve artifacts (--serve-artifacts), or serves only them")


def parsed_batch(body) -> tuple[str, str, list[str], list[run_writer.RunRecord]]:
    """(experiment id, parent id, run ids, records) of a request body; BadBatch when it is
    malformed."""
    try:
        experiment_id, parent_id = body["experiment_id"], body["parent_id"]
        if not isinstance(experiment_id, str) or not isinstance(parent_id, str):
            raise TypeError("experiment_id and parent_id must be strings")
        ids = [run["id"] for run in body["runs"]]
        if not ids or not all(isinstance(i, str) and len(i) == 32 and i.isalnum() for i in ids):
            raise ValueError("every run needs a 32-character id")
        records = [run_writer.RunRecord(
            str(run["name"]), {str(k): str(v) for k, v in run["tags"].items()},
            {str(k): str(v) for k, v in run["params"].items()},
            tuple((str(key), float(value), int(step)) for key, value, step in run["metrics"]),
            str(run["status"]), int(run["start_ms"]), int(run["end_ms"]), files_writer(run["files"]))
            for run in body["runs"]]
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise BadBatch(f"not a batch of runs ({type(error).__name__}: {error})") from None
    if any(record.status not in ("FINISHED", "FAILED") for record in records):
        raise BadBatch("a run's status must be FINISHED or FAILED")
    twice = [(run_id, count) for run_id, count in Counter(ids).items() if count > 1]
    if twice:
        raise BadBatch(f"run id {twice[0][0]} is given to {twice[0][1]} runs of the batch")
    for record in records:
        numbers = [("start_ms", record.start_ms), ("end_ms", record.end_ms),
                   *((f"the step of metric {key!r}", step) for key, _, step in record.metrics)]
        outside = [(what, value) for what, value in numbers if value not in INT64]
        if outside:
            raise BadBatch(f"run {record.name!r}: {outside[0][0]} {outside[0][1]} is outside the 64-bit integers "
                           "the store keeps")
    return experiment_id, parent_id, ids, records


def files_writer(files: dict):
    """``write_files`` for a run's files sent as {relative path: base64}; a name that leaves the
    run's folder (absolute, ``..``), holds a NUL, or content that is not base64 is refused."""
    decoded = {}
    for name, content in files.items():
        path = PurePosixPath(name)
        if path.is_absolute() or not path.parts or ".." in path.parts or "\x00" in name:
            raise ValueError(f"file name {name!r} leaves the run's folder")
        try:
            decoded[path] = base64.b64decode(content, validate=True)
        except (binascii.Error, TypeError) as error:
            raise ValueError(f"file {name!r} is not base64: {error}") from None

    def write_files(folder: Path) -> None:
        for path, content in decoded.items():
            target = folder.joinpath(*path.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)

    return write_files


def served_upload(artifact_uri: str, record: run_writer.RunRecord) -> None:
    """A run's files where the server keeps them: ``mlflow-artifacts:/<path>`` is ``<path>``
    under ``--artifacts-destination`` (as the server's artifact routes resolve it), written
    there directly when it is a local folder. The path comes from the experiment's artifact
    location, which its creator chose: one that leaves the destination (``..``) or is not
    served by this server (``file:``, ``s3:``, ...) is NotServed."""
    from mlflow.server import ARTIFACTS_DESTINATION_ENV_VAR
    from mlflow.utils.uri import append_to_uri_path

    parsed = urlparse(artifact_uri)
    relative = PurePosixPath(parsed.path.lstrip("/"))
    if parsed.scheme != "mlflow-artifacts" or ".." in relative.parts or not relative.parts:
        raise NotServed(f"{artifact_uri}: not a folder of this server's --artifacts-destination")
    run_writer.upload_files(append_to_uri_path(os.environ[ARTIFACTS_DESTINATION_ENV_VAR], str(relative)), record)
