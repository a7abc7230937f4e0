"""The tracking server of ``mtc.stack``: MLflow's own server plus one route that takes a Ray Tune
trial's finished runs in one request.

Through MLflow's REST API a run costs four requests (create_run, log_batch, the files,
set_terminated), each through MLflow's ORM: 29-41 ms of server CPU per run (docs/cluster.md), 85.4
ms of platform time per trial against 6.6 ms straight into the server's PostgreSQL. The route
``run_writer.BATCH_ENDPOINT`` takes a whole batch (every run's tags, params, metrics, status,
times and files) and writes it as the SQL route does (``run_writer.write_sql``: files first, then
one transaction of bulk INSERTs through MLflow's models, the parent's status checked inside it):
the same rows as the client's calls (tests/test_run_writer.py). The workers then need the
server's address only, not the database's.

``mlflow server --app-name mtc`` serves it (``mtc-basic-auth``: behind MLflow's basic-auth app,
which checks the route as it checks ``create_run``: a user who is not an admin needs the right to
create runs in the experiment).
A plain ``mlflow server`` has no such route: the client sees 404 and sends each run's requests
(``run_writer.write_runs``).
"""

from __future__ import annotations

import base64
import binascii
import os
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
    if auth:  # the route's check is create_run's: the sender may create runs in the experiment
        from mlflow.server import auth as basic_auth

        basic_auth.BEFORE_REQUEST_VALIDATORS[(run_writer.BATCH_ENDPOINT, "POST")] = basic_auth.validate_can_create_run
        return basic_auth.create_app(app)
    if _MLFLOW_SGI_NAME.get() == "uvicorn":
        from mlflow.server.fastapi_app import create_fastapi_app

        return create_fastapi_app(app)
    return app


class BadBatch(ValueError):
    """A request body that is not a batch of runs."""


def write_batch():
    """POST ``{"experiment_id", "parent_id", "runs": [...]}`` (``run_writer.batch_payload``):
    200 with the run ids in order; 409 when the parent is no longer RUNNING (nothing written);
    400 for a malformed body or a parent of another experiment. Behind basic auth, MLflow's app
    has answered 401/403 before this runs for a sender who may not create runs there."""
    from flask import jsonify, request
    from mlflow.exceptions import MlflowException
    from mlflow.server import handlers

    body = request.get_json(silent=True)
    try:
        experiment_id, parent_id, records = parsed_batch(body)
    except BadBatch as error:
        return jsonify(error_code="INVALID_PARAMETER_VALUE", message=str(error)), 400
    store = handlers._get_tracking_store()
    try:
        if store.get_run(parent_id).info.experiment_id != experiment_id:
            return jsonify(error_code="INVALID_PARAMETER_VALUE",
                           message=f"parent run {parent_id} is not in experiment {experiment_id}"), 400
        ids = run_writer.write_sql(store, experiment_id, parent_id, records, upload=served_upload)
    except run_writer.ParentClosed as error:
        return jsonify(error_code="PARENT_CLOSED", message=str(error)), 409
    except NotServed as error:  # the client sends each run's requests instead
        return jsonify(error_code="NOT_IMPLEMENTED", message=str(error)), 501
    except OSError as error:  # the files (a full disk): not retried by the client, unlike a 500
        return jsonify(error_code="INTERNAL_ERROR", message=full_disk(error) or f"{type(error).__name__}: {error}"), 507
    except MlflowException as error:  # the database refused the rows
        return jsonify(error_code=error.error_code, message=error.message), error.get_http_status_code()
    return jsonify(run_ids=ids)


def parsed_batch(body) -> tuple[str, str, list[run_writer.RunRecord]]:
    """(experiment id, parent id, records) of a request body; BadBatch when it is malformed."""
    try:
        experiment_id, parent_id = str(body["experiment_id"]), str(body["parent_id"])
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
    return experiment_id, parent_id, records


def files_writer(files: dict):
    """``write_files`` for a run's files sent as {relative path: base64}; a path that leaves
    the run's folder (absolute, ``..``) or content that is not base64 is refused at once."""
    decoded = {}
    for name, content in files.items():
        path = PurePosixPath(name)
        if path.is_absolute() or not path.parts or ".." in path.parts:
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


class NotServed(Exception):
    """A run's files belong in ``mlflow-artifacts:/`` but this server was started without
    ``--serve-artifacts``."""


def served_upload(artifact_uri: str, record: run_writer.RunRecord) -> None:
    """A run's files where the server keeps them: ``mlflow-artifacts:/<path>`` is ``<path>``
    under ``--artifacts-destination`` (as the server's artifact routes resolve it), written
    there directly when it is a local folder; any other URI as a worker would write it
    (run_writer.upload_files)."""
    if urlparse(artifact_uri).scheme == "mlflow-artifacts":
        from mlflow.server import ARTIFACTS_DESTINATION_ENV_VAR
        from mlflow.utils.uri import append_to_uri_path

        destination = os.environ.get(ARTIFACTS_DESTINATION_ENV_VAR)
        if destination is None:
            raise NotServed(f"{artifact_uri}: this server does not serve artifacts (--serve-artifacts)")
        artifact_uri = append_to_uri_path(destination, urlparse(artifact_uri).path.lstrip("/"))
    run_writer.upload_files(artifact_uri, record)
