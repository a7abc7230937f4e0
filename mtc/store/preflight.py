"""Checks before a sweep creates anything: the tracking store, the output folder and the Ray
cluster are reachable and writable, each within a short, stated timeout. A failed check is
an UnreachableError, one line naming what was tried (the command line exits 2), instead of
minutes of client retries after the MLflow runs were created.

Also the environment every driver and worker runs with: telemetry off, and MLflow's HTTP
retries bounded (a tracking server restarted mid-sweep is retried with backoff for about
half a minute, then the trial fails and Ray Tune retries it)."""

from __future__ import annotations

import base64
import functools
import importlib.metadata
import importlib.util
import os
import re
import socket
import sqlite3
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from mtc.errors import InputError

CHECK_TIMEOUT = 10.0  # seconds, for each check below
DATABASE_SCHEMES = ("postgresql", "mysql", "mssql")
# Each is a default: a value already in the environment wins.
QUIET_ENV = {"MLFLOW_DISABLE_TELEMETRY": "true", "RAY_USAGE_STATS_ENABLED": "0",
             "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",  # one bar per downloaded artifact otherwise
             # set_terminated otherwise fetches the whole run again to print its link: one extra
             # request per trial (benchmarks/server_throughput.py, run_links=off)
             "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true"}
# waits 1, 2, 4, ..., 64 s (+ jitter), about 2 minutes in all: a server restarted on a loaded
# machine took more than the 31 s of 5 tries to answer again (2 of 12 results lost in CI)
HTTP_RETRY_ENV = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "7",
                  "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                  "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}
CREDENTIALS = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")  # basic auth (mtc.stack --auth)


class UnreachableError(InputError):
    """The tracking store, the output folder or the Ray cluster cannot be used."""


def process_env() -> dict[str, str]:
    """Set the quiet and retry defaults in this process; returns what workers need (the
    defaults as set here, plus tracking credentials) for Ray's runtime_env."""
    for key, value in {**QUIET_ENV, **HTTP_RETRY_ENV}.items():
        os.environ.setdefault(key, value)
    return {key: os.environ[key] for key in (*QUIET_ENV, *HTTP_RETRY_ENV, *CREDENTIALS) if key in os.environ}


def check_tracking(uri: str, timeout: float = CHECK_TIMEOUT) -> None:
    """The tracking store at ``uri`` answers (and, for a server, accepts our credentials)."""
    scheme = urlparse(uri).scheme.split("+")[0]
    if scheme in ("http", "https"):
        check_server(uri, timeout)
    elif scheme == "sqlite":
        check_sqlite(uri[len("sqlite:///"):], timeout)
    elif scheme in DATABASE_SCHEMES:
        check_database(uri, timeout)
    elif scheme not in ("", "file"):
        raise UnreachableError(f"mlflow.tracking_uri {uri!r}: unsupported scheme {scheme!r}; use sqlite:///<file>.db, "
                               "http(s)://<server>:<port> or a database URI (postgresql://user@host:port/db)")


def check_server(uri: str, timeout: float) -> None:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=timeout):
            pass
    except (urllib.error.URLError, OSError) as error:
        raise UnreachableError(f"the tracking server {uri} does not answer ({reason(error)}; waited up to "
                               f"{timeout:.0f} s); start it (python -m mtc.stack start) or fix mlflow.tracking_uri") from None
    request = urllib.request.Request(f"{uri}/api/2.0/mlflow/experiments/search?max_results=1")
    if all(key in os.environ for key in CREDENTIALS):
        token = base64.b64encode(":".join(os.environ[key] for key in CREDENTIALS).encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            pass
    except urllib.error.HTTPError as error:
        if error.code in (401, 403):
            raise UnreachableError(f"the tracking server {uri} refused the request (HTTP {error.code}); set "
                                   "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD to an account of "
                                   "its basic-auth app") from None
        raise UnreachableError(f"the tracking server {uri} answered HTTP {error.code} to a search") from None
    except (urllib.error.URLError, OSError) as error:
        raise UnreachableError(f"the tracking server {uri} did not answer a search ({reason(error)})") from None


def check_sqlite(path: str, timeout: float) -> None:
    """An existing store opens and is not of a newer MLflow (check_schema); for a new one, its
    folder (or the nearest existing parent) takes files. Nothing is created here."""
    revision = None
    try:
        if Path(path).exists():
            connection = sqlite3.connect(f"{Path(path).as_uri()}?mode=ro", uri=True, timeout=timeout)
            try:
                if connection.execute("SELECT 1 FROM sqlite_master WHERE name = 'alembic_version'").fetchone():
                    revision = connection.execute("SELECT version_num FROM alembic_version").fetchone()
            finally:
                connection.close()
        else:
            check_can_create(Path(path).parent)
    except (OSError, sqlite3.Error) as error:
        raise UnreachableError(f"cannot open the SQLite tracking store {path} ({reason(error)}); choose a writable "
                               "place with mlflow.tracking_uri=sqlite:///<path>.db") from None
    check_schema(path, revision and revision[0])


def check_database(uri: str, timeout: float) -> None:
    import sqlalchemy

    engine = sqlalchemy.create_engine(uri, connect_args={"connect_timeout": int(timeout)}, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect() as connection:
            connection.execute(sqlalchemy.text("SELECT 1"))
            revision = connection.execute(sqlalchemy.text("SELECT version_num FROM alembic_version")).scalar() \
                if sqlalchemy.inspect(connection).has_table("alembic_version") else None
    except Exception as error:  # the driver's own errors (psycopg2.OperationalError, ...), or a missing driver
        first = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        raise UnreachableError(f"cannot reach the tracking database {safe(uri)} ({first})") from None
    finally:
        engine.dispose()
    check_schema(safe(uri), revision)


def check_schema(store: str, revision: str | None) -> None:
    """Refuse a store whose MLflow schema revision (its ``alembic_version``) this MLflow does not
    know: a newer MLflow wrote it, and MLflow's own error would call it out-of-date and advise
    ``mlflow db upgrade``, which cannot help. A new store (no revision) and an older one (which
    ``mlflow db upgrade`` does bring up to date) pass.

    Parameters
    ----------
    store : str
        The store as named in the message (a path or a URI without its password).
    revision : str or None
        The store's schema revision.

    Raises
    ------
    UnreachableError
        The revision is not one of this MLflow's.
    """
    if revision is None:
        return
    known = mlflow_revisions()
    if revision not in known:
        newest = (set(known) - set(known.values())).pop()  # the revision no other one follows
        raise UnreachableError(f"the tracking store {store} was written by a newer MLflow (schema revision {revision}, "
                               f"unknown to this mlflow {importlib.metadata.version('mlflow')}, whose newest is "
                               f"{newest}): this MLflow cannot read it; upgrade mlflow, or choose another store")


MIGRATION_FIELD = re.compile(r"""^(revision|down_revision)\s*=\s*["']?([0-9a-f]+|None)["']?""", re.M)


@functools.cache
def mlflow_revisions() -> dict[str, str | None]:
    """This MLflow's schema revisions, each with the one it follows, read from its migration
    files (``revision = "..."``, ``down_revision = "..."``) without importing MLflow: a finished
    sweep's rerun checks its store and imports no MLflow (mtc.sweep.command)."""
    folder = Path(importlib.util.find_spec("mlflow").submodule_search_locations[0]) / "store" / "db_migrations" / "versions"
    found = {}
    for path in folder.glob("*.py"):
        fields = dict(MIGRATION_FIELD.findall(path.read_text()))
        if "revision" in fields:
            found[fields["revision"]] = None if fields.get("down_revision", "None") == "None" else fields["down_revision"]
    return found


def check_writable(folder: Path, what: str = "output folder", setting: str = "output_dir") -> None:
    """Files can be written in ``folder``, or in its nearest existing parent if it does not
    exist yet. Nothing is created here."""
    try:
        check_can_create(folder)
    except OSError as error:
        raise UnreachableError(f"cannot write to the {what} {folder} ({reason(error)}); run from a writable "
                               f"folder or set {setting}=<writable folder>") from None


def check_can_create(folder: Path) -> None:
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not existing.is_dir():
        raise NotADirectoryError(f"{existing} is not a folder")
    with tempfile.TemporaryFile(dir=existing):  # the real test: access(2) says yes to root on any mode
        pass


def check_ray(address: str, timeout: float = CHECK_TIMEOUT) -> str:
    """Something that answers as Ray's GCS listens at a ``host:port`` Ray address; ``auto`` is
    resolved first (ray_auto_address: only a cluster of the user's own, printed in one line).
    Returns the address to join (``local`` and ``ray://`` addresses as given)."""
    if address in ("local", "None") or address.startswith("ray://"):
        return address
    if address == "auto":
        address, how = ray_auto_address()
        check_ray(address, timeout)
        print(f"ray.address=auto: joining the Ray cluster at {address} ({how})", flush=True)
        return address
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise UnreachableError(f"ray.address {address!r}: expected local, auto or <host>:<port> (the head's GCS port)")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as connection:
            answers = speaks_grpc(connection)
    except OSError as error:
        raise UnreachableError(f"no Ray head listens at {address} ({reason(error)}; waited up to {timeout:.0f} s); "
                               "start one (ray start --head) or use ray.address=local") from None
    if not answers:
        raise UnreachableError(f"{address} is not a Ray head: something listens there but does not answer as Ray's "
                               f"GCS (gRPC) does within {timeout:.0f} s; give the head's GCS port (ray start --head "
                               "prints it) or use ray.address=local")
    return address


RAY_ADDRESS_FILE = "ray_current_cluster"  # written by `ray start`, in Ray's temp folder; never removed by `ray stop`


def ray_temp_dir() -> Path:
    """Ray's temp folder, as Ray finds it (ray._common.utils.get_default_ray_temp_dir)."""
    return Path(os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp") / "ray"


def local_raylets() -> list[tuple[int, int, str]]:
    """(pid, uid, GCS address) of every raylet on this machine: the clusters Ray's ``auto``
    may join, found as Ray finds them (a process named raylet, its ``--gcs-address``)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            uid = proc.stat().st_uid
        except OSError:  # gone, or not ours to read
            continue
        if "raylet" not in os.path.basename(argv[0]):
            continue
        found += [(int(proc.name), uid, arg.split("=", 1)[1]) for arg in " ".join(argv).split()
                  if arg.startswith("--gcs-address=")]
    return found


def user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def ray_auto_address() -> tuple[str, str]:
    """The cluster ``ray.address=auto`` joins, and how it was found: RAY_ADDRESS when set (the
    user's explicit choice); else the address in Ray's ray_current_cluster file, or with no
    file the one cluster running here, but only when a raylet of this user serves it. Ray
    itself follows a stale file into whatever cluster now has that port, another user's too."""
    if os.environ.get("RAY_ADDRESS", "auto") != "auto":
        return os.environ["RAY_ADDRESS"], "RAY_ADDRESS"
    raylets = local_raylets()
    mine = {address: pid for pid, uid, address in raylets if uid == os.getuid()}
    file = ray_temp_dir() / RAY_ADDRESS_FILE
    try:
        address, source = file.read_text().strip(), f"named in {file}"
    except FileNotFoundError:
        clusters = sorted({address for _, _, address in raylets})
        if len(clusters) != 1:
            found = f"{len(clusters)} run on this machine ({', '.join(clusters)})" if clusters else "none runs here"
            raise UnreachableError(f"ray.address=auto: no {file} and {found}; give ray.address=<host>:<port> of your "
                                   "cluster (ray start --head prints it) or use ray.address=local") from None
        address, source = clusters[0], "the only cluster on this machine"
    except OSError as error:
        raise UnreachableError(f"ray.address=auto: cannot read {file} ({reason(error)}); give ray.address=<host>:<port> "
                               "or use ray.address=local") from None
    if address in mine:
        return address, f"{source}; its raylet, pid {mine[address]}, is yours"
    others = sorted({user_name(uid) for _, uid, served in raylets if served == address})
    if others:
        raise UnreachableError(f"ray.address=auto: the Ray cluster at {address} ({source}) is run by {', '.join(others)}, "
                               "not by you; give your own cluster's address (ray.address=<host>:<port>) or use "
                               "ray.address=local")
    raise UnreachableError(f"ray.address=auto: {file} names {address}, but no Ray node of yours runs here (a stale file: "
                           "ray stop leaves it); start one (ray start --head), give ray.address=<host>:<port> or use "
                           "ray.address=local")


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"  # RFC 9113 Sec. 3.4, what every HTTP/2 client sends first
HTTP2_EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # a SETTINGS frame with no settings
HTTP2_SETTINGS = 0x4


def speaks_grpc(connection: socket.socket) -> bool:
    """Whether the peer answers the HTTP/2 connection preface with a SETTINGS frame, as every
    gRPC server (Ray's GCS) must (RFC 9113 Sec. 3.4); a port that listens but is something else
    (or nothing that answers) does not, and Ray would retry it for 300 s. Asked by hand: the
    grpc package is not among Ray's or our dependencies, and this is the smallest question a
    gRPC server answers. The socket's timeout bounds the wait."""
    try:
        connection.sendall(HTTP2_PREFACE + HTTP2_EMPTY_SETTINGS)
        header = b""
        while len(header) < 9:
            chunk = connection.recv(9 - len(header))
            if not chunk:
                return False
            header += chunk
    except (socket.timeout, ConnectionError):
        return False
    return header[3] == HTTP2_SETTINGS


def reason(error: BaseException) -> str:
    inner = getattr(error, "reason", None)
    return str(inner if inner is not None else error) or type(error).__name__


def safe(uri: str) -> str:
    """``uri`` without a password."""
    parsed = urlparse(uri)
    return uri.replace(f":{parsed.password}@", ":***@") if parsed.password else uri
