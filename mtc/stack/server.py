"""The tracking stack for cluster mode: PostgreSQL and an MLflow tracking server, on loopback.

    python -m mtc.stack start [--dir DIR] [--port 5000] [--db-port 5433] [--host 127.0.0.1] [--auth]
    python -m mtc.stack restart [--dir DIR] [--port ...] [--host ...] [--auth]
    python -m mtc.stack status [--dir DIR]
    python -m mtc.stack stop [--dir DIR]

``start`` creates (once) a PostgreSQL cluster in ``DIR/pgdata`` with Debian's ``initdb``
(as the ``postgres`` user when run as root, which PostgreSQL requires), starts it on
127.0.0.1, creates the ``mlflow`` database, then starts ``mlflow server`` with that database
as its backend store and its artifacts served through the server (``--serve-artifacts``,
stored in ``DIR/artifacts``): runs record ``mlflow-artifacts:/`` URIs, never a path of the
machine that ran them. ``--auth`` turns on MLflow's basic-auth app (users in the
``mlflow_auth`` database; the admin's name and password come from ``MTC_MLFLOW_USERNAME``
and ``MTC_MLFLOW_PASSWORD``); clients then set ``MLFLOW_TRACKING_USERNAME`` and
``MLFLOW_TRACKING_PASSWORD``. Sweeps use it with ``mlflow.tracking_uri=<the printed URI>``.
``DIR`` defaults to ``$MTC_STACK_DIR``, else ``~/.cache/mtc/stack`` (``/var/tmp/mtc-stack`` as
root); ``DIR/stack.json`` records what runs, and a later command reuses its settings unless
given others.

The two parts are looked after apart: ``start`` brings up whichever of them is down and
leaves a running one as it is (a stale ``postmaster.pid``, left by a PostgreSQL that was
killed, is removed once no live PostgreSQL of ``DIR/pgdata`` holds its pid, as PostgreSQL
advises); ``restart`` stops and starts the tracking server, and brings PostgreSQL up if it is
down. On an error, neither stops a part that ran before it. ``status`` says which part is up
(exit 0 when both are, else 3). ``stop`` stops exactly what runs from ``DIR``.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from mtc.errors import InputError

DB_USER = "mtc"
DB_NAME = "mlflow"
AUTH_DB_NAME = "mlflow_auth"
STATE_FILE = "stack.json"
DEFAULTS = {"host": "127.0.0.1", "port": 5000, "db_port": 5433, "auth": False}
AUTH_CACHE_SECONDS = 60  # a changed or removed password is refused at most this long after


@dataclass(frozen=True)
class Stack:
    """A started stack: where it lives, its ports, and the server's process group."""

    dir: str
    host: str
    port: int
    db_port: int
    auth: bool
    server_pid: int | None = None

    @property
    def tracking_uri(self) -> str:
        return f"http://{self.host}:{self.port}"

    def database_uri(self, name: str = DB_NAME) -> str:
        return f"postgresql+psycopg2://{DB_USER}@127.0.0.1:{self.db_port}/{name}"


def stack_dir(configured: str | None) -> Path:
    """``--dir``, else $MTC_STACK_DIR, else ~/.cache/mtc/stack (as root: /var/tmp/mtc-stack, a
    folder the postgres user can reach; root's home is closed to it)."""
    default = "/var/tmp/mtc-stack" if os.geteuid() == 0 else "~/.cache/mtc/stack"
    return Path(configured or os.environ.get("MTC_STACK_DIR") or default).expanduser().resolve()


def postgres_binary(name: str) -> str:
    """A PostgreSQL server program (initdb, pg_ctl): on PATH or in Debian's versioned folder."""
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if not found:
        raise InputError(f"PostgreSQL's {name} was not found: install the server (Debian: apt-get install postgresql)")
    return found


def as_database_owner(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: run its programs as the postgres user then."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def run(command: list[str], what: str) -> str:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {result.returncode}): {(result.stderr or result.stdout).strip()}")
    return result.stdout


LOG_LINE = re.compile(r"^\S+ \S+ \S+ \[\d+\] (FATAL|ERROR|PANIC|LOG|WARNING|HINT):\s+(.*)$")


def log_reasons(log: Path, offset: int) -> str:
    """Why PostgreSQL stopped, from what it wrote to ``log`` after ``offset`` (pg_ctl itself
    says only "could not start server, examine the log output"): its FATAL and ERROR lines,
    after the warnings and hints that say why (a port in use, a stale postmaster.pid), as one
    line; empty if it wrote none."""
    try:
        with log.open("rb") as file:
            file.seek(offset)
            lines = file.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    found = [match.groups() for match in map(LOG_LINE.match, lines) if match]
    failures = ("FATAL", "ERROR", "PANIC")
    said = [text for level, text in found if level in failures]
    why = [text for level, text in found if level not in failures and
           ("could not" in text or level == "HINT" or "lock file" in text)]
    return "; ".join(dict.fromkeys(text.rstrip(".") for text in [*said, *why])) if said else ""


@dataclass(frozen=True)
class Postmaster:
    """A live PostgreSQL of a stack's folder: its pid and its port on 127.0.0.1."""

    pid: int
    port: int


def running_database(root: Path) -> Postmaster | None:
    """The PostgreSQL that runs on ``root/pgdata``, else None. Its ``postmaster.pid`` names a
    pid; that pid counts only while its process runs in the data folder (PostgreSQL works there),
    not after it exited (a zombie has no folder) nor when the pid went to another process."""
    data = root / "pgdata"
    try:
        lines = (data / "postmaster.pid").read_text().splitlines()  # pid, folder, start time, port, ...
        found = Postmaster(int(lines[0]), int(lines[3]))
        return found if os.readlink(f"/proc/{found.pid}/cwd") == str(data.resolve()) else None
    except (OSError, ValueError, IndexError):  # no file, a file being written, no such process
        return None


def start_database(root: Path, port: int) -> None:
    """Create the cluster once, start it on 127.0.0.1:port unless it runs, and create the
    databases. The lock files of a PostgreSQL that no longer runs are removed first: PostgreSQL
    refuses to start while the pid they name is alive, whatever program now has it."""
    data = root / "pgdata"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        if subprocess.run(as_database_owner(["test", "-w", str(root)])).returncode != 0:
            raise InputError(f"the postgres user cannot reach {root} (a parent folder is closed to it): "
                             "choose a --dir under /var/tmp or /srv")
    if not (data / "PG_VERSION").exists():
        run(as_database_owner([postgres_binary("initdb"), "-D", str(data), "-U", DB_USER, "--auth=trust",
                               "-E", "UTF8"]), "initdb")
    if running_database(root) is None:
        for lock in [data / "postmaster.pid", *root.glob(".s.PGSQL.*.lock")]:
            lock.unlink(missing_ok=True)
        options = f"-p {port} -c listen_addresses=127.0.0.1 -k {root}"
        log = root / "postgres.log"
        logged = log.stat().st_size if log.exists() else 0
        try:
            run(as_database_owner([postgres_binary("pg_ctl"), "-D", str(data), "-l", str(log),
                                   "-o", options, "-w", "-t", "60", "start"]), "starting PostgreSQL")
        except RuntimeError as error:
            reasons = log_reasons(log, logged)
            if not reasons:
                raise
            raise RuntimeError(f"PostgreSQL did not start on 127.0.0.1:{port}: {reasons} (its log: {log})") from error
    import psycopg2

    connection = psycopg2.connect(host="127.0.0.1", port=port, user=DB_USER, dbname="postgres")
    connection.autocommit = True  # CREATE DATABASE cannot run in a transaction
    try:
        with connection.cursor() as cursor:
            for name in (DB_NAME, AUTH_DB_NAME):
                cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
                if cursor.fetchone() is None:
                    cursor.execute(f'CREATE DATABASE "{name}"')
    finally:
        connection.close()


def stop_database(root: Path) -> None:
    """Stop the PostgreSQL of ``root`` if it runs."""
    if running_database(root):
        run(as_database_owner([postgres_binary("pg_ctl"), "-D", str(root / "pgdata"), "-m", "fast", "-w", "stop"]),
            "stopping PostgreSQL")


def auth_config(stack: Stack) -> Path:
    """The basic-auth app's ini: users in PostgreSQL, admin from the environment, READ by default.
    A checked login is remembered for AUTH_CACHE_SECONDS (MLflow's own auth cache, off by
    default): without it every request re-derives the password hash, 288 ms per request on
    this machine against 6 ms without auth (benchmarks/cluster_modes.py)."""
    username = os.environ.get("MTC_MLFLOW_USERNAME", "admin")
    password = os.environ.get("MTC_MLFLOW_PASSWORD")
    if not password:
        raise InputError("--auth needs the admin password in MTC_MLFLOW_PASSWORD (and optionally MTC_MLFLOW_USERNAME)")
    path = Path(stack.dir) / "auth.ini"
    path.write_text("[mlflow]\ndefault_permission = READ\n"
                    f"database_uri = {stack.database_uri(AUTH_DB_NAME)}\n"
                    f"admin_username = {username}\nadmin_password = {password}\n"
                    "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
                    f"auth_cache_ttl_seconds = {AUTH_CACHE_SECONDS}\n")
    path.chmod(0o600)
    return path


def server_is_up(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, http.client.HTTPException):  # the last: a port that speaks no HTTP/1
        return False


def start_server(stack: Stack, timeout: float = 120.0) -> int:
    """``mlflow server`` in its own process group (it spawns workers); returns its pid."""
    root = Path(stack.dir)
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", "MLFLOW_ENABLE_TELEMETRY": "false",
           "DO_NOT_TRACK": "true"}
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", stack.database_uri(),
               "--serve-artifacts", "--artifacts-destination", str(root / "artifacts"),
               "--host", stack.host, "--port", str(stack.port), "--workers", "1",
               "--app-name", "mtc-basic-auth" if stack.auth else "mtc"]  # + one request per batch of runs
    if stack.auth:
        env["MLFLOW_AUTH_CONFIG_PATH"] = str(auth_config(stack))
        env.setdefault("MLFLOW_FLASK_SERVER_SECRET_KEY", os.urandom(16).hex())
    with open(root / "server.log", "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        if answers(stack, lambda: process.poll() is None, timeout):
            return process.pid
        if process.poll() is not None:
            tail = (root / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"mlflow server exited with {process.returncode}; end of {root / 'server.log'}:\n{tail}")
        raise RuntimeError(f"mlflow server did not answer on {stack.tracking_uri}/health within {timeout:.0f} s")
    except BaseException:  # not left running, retrying a database that start stops on the way out
        stop_process_group(process.pid)
        raise


def answers(stack: Stack, alive, timeout: float) -> bool:
    """Whether the server answers on ``/health`` within ``timeout`` seconds; asked again only
    while ``alive()`` (a callable: does its process still run) holds."""
    deadline = time.monotonic() + timeout
    while not server_is_up(stack.tracking_uri):
        if not alive() or time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def server_runs(stack: Stack) -> bool:
    """Whether a process of the recorded server's process group runs with ``--port <its port>``
    (the leader may have died and left its uvicorn serving). An exited process (a zombie not
    yet reaped) has no command line, and a pid that went to another program is not counted."""
    mark = f"--port\0{stack.port}\0".encode()
    for process in Path("/proc").glob("[0-9]*") if stack.server_pid else ():
        with contextlib.suppress(OSError, ValueError, IndexError):
            group = int((process / "stat").read_text().rsplit(")", 1)[1].split()[2])  # after the command's name
            if group == stack.server_pid and mark in (process / "cmdline").read_bytes():
                return True
    return False


def stop_process_group(pid: int, grace: float = 10.0) -> None:
    """SIGTERM to the group of ``pid``, SIGKILL after ``grace`` seconds if any of it is left.
    A leader started by this process (start, then stop or restart_server in one process: a
    test's fixture) is reaped as it exits: as a zombie it would keep its group alive for
    ``killpg`` and every stop would wait the whole grace, then SIGKILL a server that had exited."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        reap(pid)
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    reap(pid)


def reap(pid: int) -> None:
    """Collect ``pid``'s exit status if it is an exited child of this process (else nothing)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def load_state(root: Path) -> Stack | None:
    path = root / STATE_FILE
    return Stack(**json.loads(path.read_text())) if path.exists() else None


def start(root: Path, host: str | None = None, port: int | None = None, db_port: int | None = None,
          auth: bool | None = None, restart: bool = False) -> Stack:
    """Bring up whichever part of this folder's stack is down and leave a running part alone.

    Parameters
    ----------
    root : Path
        The stack's folder.
    host, port, db_port, auth : optional
        The settings; None keeps the recorded one (``root/stack.json``), else the default
        (DEFAULTS). One that differs from what a running part uses is refused (InputError).
    restart : bool, default=False
        Stop and start the tracking server even if it runs (``restart``).

    Returns
    -------
    Stack
        What runs now (also written to ``root/stack.json``).

    Notes
    -----
    The server counts as running while it answers on ``/health`` or ``server_runs`` finds it
    (one that does not answer yet is waited for); PostgreSQL, while ``running_database`` finds
    it. On an error, only a part this call started is stopped.
    """
    recorded = load_state(root)
    database = running_database(root)
    old_server = bool(recorded and server_runs(recorded))
    keep_server = bool(recorded and not restart and (old_server or server_is_up(recorded.tracking_uri)))
    running = asdict(recorded) if keep_server else {}
    if database:
        running["db_port"] = database.port
    given = {"host": host, "port": port, "db_port": db_port, "auth": auth}
    for key, value in given.items():
        if value is not None and key in running and value != running[key]:
            flag = f"--{key.replace('_', '-')}"
            raise InputError(f"the stack in {root} runs with {flag} {running[key]}: to use {flag} {value}, stop it "
                             f"first (python -m mtc.stack stop --dir {root})")
    chosen = {key: value for key, value in given.items() if value is not None}
    stack = Stack(**{**DEFAULTS, **(asdict(recorded) if recorded else {}), **chosen, **running, "dir": str(root)})
    root.mkdir(parents=True, exist_ok=True)
    (root / "artifacts").mkdir(exist_ok=True)
    try:
        start_database(root, stack.db_port)
        if keep_server and not answers(stack, lambda: server_runs(stack), 60):  # starting, or on its way out
            if server_runs(stack):
                raise RuntimeError(f"the tracking server (process group {stack.server_pid}) runs but does not answer "
                                   f"on {stack.tracking_uri}/health (its log: {root / 'server.log'}); replace it with "
                                   f"python -m mtc.stack restart --dir {root}")
            keep_server = False
        if not keep_server:
            if restart and old_server:
                stop_process_group(recorded.server_pid)
            stack = replace(stack, server_pid=start_server(stack))
    except BaseException:
        if database is None:  # PostgreSQL was down before: leave it down (one that never started
            with contextlib.suppress(RuntimeError):  # cannot be stopped: the first error says why)
                stop_database(root)
        raise
    (root / STATE_FILE).write_text(json.dumps(asdict(stack), indent=1))
    return stack


def stop(root: Path) -> None:
    """Stop the server's process group and the database of this folder."""
    stack = load_state(root)
    if stack and server_runs(stack):
        stop_process_group(stack.server_pid)
    stop_database(root)
    (root / STATE_FILE).unlink(missing_ok=True)


def restart_server(root: Path, **settings) -> Stack:
    """Stop and start this folder's tracking server; PostgreSQL is brought up if it is down,
    never stopped. ``settings``: as ``start`` takes them."""
    if load_state(root) is None:
        raise InputError(f"no stack in {root}; start one with python -m mtc.stack start")
    return start(root, **settings, restart=True)


def status(root: Path) -> tuple[list[str], bool]:
    """One line per part of this folder's stack (up or down, pid, address), and whether both are up."""
    recorded = load_state(root)
    database = running_database(root)
    if recorded is None and database is None:
        return [f"no stack in {root}"], False
    server_up = bool(recorded and server_is_up(recorded.tracking_uri))
    pid = recorded.server_pid if recorded and server_runs(recorded) else None
    lines = [f"PostgreSQL: up, pid {database.pid}, 127.0.0.1:{database.port}" if database else
             f"PostgreSQL: down, 127.0.0.1:{recorded.db_port}",
             f"tracking server: {'up' if server_up else 'down'}, " + (f"pid {pid}, " if pid else "") +
             (recorded.tracking_uri if recorded else f"not recorded ({root / STATE_FILE} is missing)")]
    return lines, bool(database) and server_up


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mtc.stack", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["start", "stop", "restart", "status"])
    parser.add_argument("--dir", help="the stack's folder (default $MTC_STACK_DIR, else ~/.cache/mtc/stack)")
    parser.add_argument("--host", help="the server's address (default: the recorded one, else 127.0.0.1)")
    parser.add_argument("--port", type=int, help="the tracking server's port (default: the recorded one, else 5000)")
    parser.add_argument("--db-port", type=int, help="PostgreSQL's port on 127.0.0.1 (default: the recorded one, "
                                                    "else 5433)")
    parser.add_argument("--auth", action="store_true", default=None,
                        help="MLflow basic auth (admin from MTC_MLFLOW_PASSWORD; default: as recorded, else off)")
    args = parser.parse_args(argv)
    root = stack_dir(args.dir)
    settings = {"host": args.host, "port": args.port, "db_port": args.db_port, "auth": args.auth}
    try:
        if args.command == "start":
            stack = start(root, **settings)
            print(f"tracking server {stack.tracking_uri} (PostgreSQL on 127.0.0.1:{stack.db_port}, artifacts "
                  f"served from {root / 'artifacts'}{', basic auth' if stack.auth else ''}); sweeps: "
                  f"mlflow.tracking_uri={stack.tracking_uri}; stop: python -m mtc.stack stop --dir {root}")
        elif args.command == "restart":
            stack = restart_server(root, **settings)
            print(f"restarted the tracking server {stack.tracking_uri} (pid {stack.server_pid}; PostgreSQL on "
                  f"127.0.0.1:{stack.db_port})")
        elif args.command == "stop":
            stop(root)
            print(f"stopped the stack in {root}")
        else:
            lines, up = status(root)
            print("\n".join(lines))
            return 0 if up else 3
    except (InputError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0
