"""Inputs that used to be taken at face value (issue 50, reliability round 4), each against the
real component: the batch route of ``mlflow server --app-name mtc`` on PostgreSQL as mtc.stack
starts it, the readers of mtc.results on real files, and the commands as a user runs them.

- The batch route acknowledges only runs it stored: an id that is another run's (the parent's)
  is refused in one line and writes nothing, files included; the same batch sent again, even
  twice at once, is answered 200 and written once; its other refusals are one readable line.
- Readers open a store read-only: a file that is not an MLflow store (empty, not SQLite,
  another program's SQLite, damaged) is refused in one line and left as it was, byte for byte.
- ``compare --published`` with a bad CSV and ``reproduce`` with a bad or missing study file
  are one line and exit 2; a stack whose PostgreSQL does not start says PostgreSQL's reason.
"""

import base64
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from mlflow.exceptions import MlflowException
from test_run_writer import post, record

import mtc.results
from mtc.errors import InputError
from mtc.results import compare
from mtc.results.reading import open_experiment
from mtc.stack import server as stack
from mtc.stack.loopback import free_port
from mtc.store import run_writer, tracking

pytestmark = pytest.mark.slow  # drivers, Ray or servers: run first (tests/conftest.py)

SQL_WORDS = ("psycopg2", "sqlalchemy", "[SQL", "[parameters", "INSERT INTO", "sqlalche.me")


@pytest.fixture(scope="module")
def server():
    """PostgreSQL and ``mlflow server --app-name mtc`` started by mtc.stack on loopback in a
    fresh folder (reachable by the postgres user); only what it started is stopped after."""
    root = Path(tempfile.mkdtemp(prefix="mtc-stack-", dir="/var/tmp"))
    started = stack.start(root, port=free_port(), db_port=free_port())
    try:
        yield started
    finally:
        stack.stop(root)
        subprocess.run(["rm", "-rf", str(root)], check=False)


def new_sweep(server) -> tuple:
    """A client of the server, a fresh experiment and a RUNNING parent run in it."""
    client = tracking.client_for(server.tracking_uri)
    experiment = tracking.ensure_experiment(client, f"hostile-{uuid.uuid4().hex[:8]}", None)
    return client, experiment, client.create_run(experiment).info.run_id


def runs_of(client, experiment: str) -> list:
    return tracking.find_runs(client, experiment)


def run_folders(server, run_ids: list[str]) -> list[Path]:
    """The artifact folders the server holds for these run ids."""
    return [path for run_id in run_ids for path in Path(server.dir, "artifacts").rglob(run_id)]


def assert_one_readable_line(message: str) -> None:
    assert "\n" not in message and not any(word.lower() in message.lower() for word in SQL_WORDS), message


def test_a_batch_whose_first_id_is_the_parents_is_refused_and_writes_nothing(server):
    client, experiment, parent = new_sweep(server)
    body = run_writer.batch_payload(experiment, parent, [record("a"), record("b")])
    body["runs"][0]["id"] = parent
    status, answer = post(server.tracking_uri, body)
    assert status == 400 and "run_ids" not in answer
    assert answer["message"] == f"run id {parent} is already the parent run's id; nothing written"
    assert [run.info.run_id for run in runs_of(client, experiment)] == [parent]
    assert client.get_run(parent).info.status == "RUNNING" and not run_folders(server, [parent, body["runs"][1]["id"]])


def test_a_batch_with_another_runs_id_leaves_that_run_and_its_files_alone(server):
    client, experiment, parent = new_sweep(server)
    other = client.create_run(experiment).info.run_id
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "keep.txt").write_text("the other run's file")
        client.log_artifacts(other, folder)
    body = run_writer.batch_payload(experiment, parent, [record("a"), record("b")])
    body["runs"][1].update(id=other, files={"keep.txt": base64.b64encode(b"overwritten").decode()})
    status, answer = post(server.tracking_uri, body)
    assert status == 400 and answer["message"] == f"run id {other} is already another run's id; nothing written"
    assert sorted(run.info.run_id for run in runs_of(client, experiment)) == sorted([parent, other])
    assert Path(client.download_artifacts(other, "keep.txt")).read_text() == "the other run's file"
    assert not run_folders(server, [body["runs"][0]["id"]])


def test_a_batch_sent_again_is_acknowledged_and_written_once_even_after_the_parent_closed(server):
    client, experiment, parent = new_sweep(server)
    body = run_writer.batch_payload(experiment, parent, [record("a"), record("b")])
    ids = [run["id"] for run in body["runs"]]
    assert post(server.tracking_uri, body) == post(server.tracking_uri, body) == (200, {"run_ids": ids})
    client.set_terminated(parent, "FINISHED")  # the driver closed the sweep before the lost answer was resent
    assert post(server.tracking_uri, body) == (200, {"run_ids": ids})
    children = [run for run in runs_of(client, experiment) if run.info.run_id != parent]
    assert sorted((run.info.run_id, run.info.run_name) for run in children) == sorted(zip(ids, ["a", "b"]))


def test_a_batch_sent_twice_at_once_is_acknowledged_twice_and_written_once(server):
    """The client sends a batch again when an answer is late: the second sending can arrive
    while the first is being written. Both are answered 200 with the ids, the runs stored once.
    The files (a few MB) keep the first sending busy long enough for the second to find no run."""
    client, experiment, parent = new_sweep(server)
    for attempt in range(3):
        body = run_writer.batch_payload(experiment, parent, [record(f"{attempt}a"), record(f"{attempt}b")])
        for run in body["runs"]:
            run["files"]["big.bin"] = base64.b64encode(os.urandom(4_000_000)).decode()
        answers = [None, None]

        def send(i):
            answers[i] = post(server.tracking_uri, body)

        threads = [threading.Thread(target=send, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert answers == [(200, {"run_ids": [run["id"] for run in body["runs"]]})] * 2
    names = sorted(run.info.run_name for run in runs_of(client, experiment) if run.info.run_id != parent)
    assert names == sorted(f"{attempt}{run}" for attempt in range(3) for run in "ab")


@pytest.mark.parametrize("change, message", [
    (lambda body: body["runs"][1].update(id=body["runs"][0]["id"]), "is given to 2 runs of the batch"),
    (lambda body: body["runs"][0].update(metrics=[["acc/mean", "0.5", 2**63]]),
     f"run 'a': the step of metric 'acc/mean' {2**63} is outside the 64-bit integers the store keeps"),
    (lambda body: body["runs"][0].update(end_ms=2**63), f"run 'a': end_ms {2**63} is outside the 64-bit integers"),
    (lambda body: body["runs"][0].update(metrics=[["acc/mean", "0.5", -2**63 - 1]]), "is outside the 64-bit"),
], ids=["duplicate id", "step out of range", "end out of range", "step below range"])
def test_the_routes_refusals_are_one_readable_line_and_write_nothing(server, change, message):
    client, experiment, parent = new_sweep(server)
    body = run_writer.batch_payload(experiment, parent, [record("a"), record("b")])
    change(body)
    status, answer = post(server.tracking_uri, body)
    assert status == 400 and message in answer["message"]
    assert_one_readable_line(answer["message"])
    assert [run.info.run_id for run in runs_of(client, experiment)] == [parent]
    assert not run_folders(server, [run["id"] for run in body["runs"]])


def test_the_client_raises_the_routes_one_line(server):
    """What a worker sees of a refusal: the route's line in a RuntimeError."""
    _, experiment, parent = new_sweep(server)
    with pytest.raises(RuntimeError, match="outside the 64-bit integers") as refused:
        run_writer.post_batch(server.tracking_uri, experiment, parent,
                              [run_writer.RunRecord("a", {}, {}, (("acc/mean", 0.5, 2**63),), "FINISHED", 1, 2,
                                                    lambda folder: None)])
    assert_one_readable_line(str(refused.value))


# --- readers ------------------------------------------------------------------------------


def mlflow_store(path: Path) -> Path:
    """A real MLflow store: one sweep (a parent run and a finished child) in experiment mtc."""
    client = tracking.client_for(f"sqlite:///{path}")
    experiment = tracking.ensure_experiment(client, "mtc", str(path.parent / "artifacts"))
    parent = client.create_run(experiment, run_name="kmeans-synthetic",
                               tags={tracking.SWEEP_KEY_TAG: "key", "mtc.method": "kmeans"}).info.run_id
    child = client.create_run(experiment, tags={tracking.PARENT_TAG: parent, tracking.POINT_TAG: "defaults"})
    client.log_param(child.info.run_id, "seed", "0")
    client.log_metric(child.info.run_id, "acc/mean", 0.5)
    client.set_terminated(child.info.run_id, "FINISHED")
    client.set_terminated(parent, "FINISHED")
    return path


PAGE = 4096  # SQLite's page size in MLflow's stores
TABLE_LEAF = 0x0D  # the first byte of a table's leaf page


def damaged(path: Path, offset: int, garbage: bytes) -> Path:
    """A real MLflow store with ``garbage`` written at ``offset`` of its first table leaf page
    after page 1 (whose header starts past the file's own 100-byte header)."""
    return corrupted(mlflow_store(path), offset, garbage)


def corrupted(path: Path, offset: int, garbage: bytes) -> Path:
    """The store at ``path`` with ``garbage`` written at ``offset`` of its first table leaf page
    after page 1."""
    data = bytearray(path.read_bytes())
    page = next(i for i in range(1, len(data) // PAGE) if data[i * PAGE] == TABLE_LEAF)
    data[page * PAGE + offset:page * PAGE + offset + len(garbage)] = garbage
    path.write_bytes(data)
    return path


def written(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def other_programs_sqlite(path: Path) -> Path:
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE notes (text)")
        connection.execute("INSERT INTO notes VALUES ('mine')")
    connection.close()
    return path


NOT_STORES = {
    "empty file": (lambda path: written(path, b""), "is an empty file, not an MLflow tracking store"),
    "8 KB of text": (lambda path: written(path, b"not a database; " * 512),
                     "as an MLflow tracking store (file is not a database)"),
    "another program's SQLite": (other_programs_sqlite, "is a SQLite file but not an MLflow tracking store (no table "
                                                        "experiments, runs, alembic_version)"),
    # a page header of 0xff: not a page type, SQLite calls the file malformed
    "a page-corrupted store": (lambda path: damaged(path, 0, b"\xff" * 16),
                               "is damaged (database disk image is malformed); restore it from a copy"),
    # 32 fragmented bytes claimed that the page does not have: SQLite opens it, quick_check finds it
    "a store quick_check faults": (lambda path: damaged(path, 7, b"\x20"), "free space corruption); restore it"),
}


def test_a_store_is_read_through_for_damage_once_until_it_is_written_again(tmp_path, monkeypatch):
    """check_sqlite_store reads every page (quick_check); a study's compares and leaderboard
    open the same store one after another: a store that passed is not read again until it is
    written, and a damage written afterwards is still refused."""
    from mtc.results import reading

    path = mlflow_store(tmp_path / "store.db")
    opened = []
    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *args, **kwargs: opened.append(args) or connect(*args, **kwargs))
    reading.check_sqlite_store(path)
    reading.check_sqlite_store(path)
    assert len(opened) == 1  # read once
    corrupted(path, 0, b"\xff" * 16)  # written again: its modification time moves
    with pytest.raises(InputError, match="is damaged \\(database disk image is malformed\\)"):
        reading.check_sqlite_store(path)
    assert len(opened) == 2


def state(folder: Path) -> dict:
    """Every file under ``folder`` with its bytes and modification time."""
    return {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.mark.parametrize("kind", NOT_STORES)
def test_a_file_that_is_not_an_mlflow_store_is_refused_in_one_line_and_left_as_it_was(tmp_path, kind):
    make, message = NOT_STORES[kind]
    path = make(tmp_path / "store.db")
    before = state(tmp_path)
    for read in (mtc.results.trials, mtc.results.sweeps, mtc.results.chosen):
        with pytest.raises(InputError) as refused:
            read(f"sqlite:///{path}")
        assert message in str(refused.value) and "\n" not in str(refused.value)
    assert state(tmp_path) == before  # same files, bytes and times: nothing created beside it either


@pytest.mark.parametrize("kind", ["empty file", "another program's SQLite", "a page-corrupted store"])
def test_compare_on_a_file_that_is_not_an_mlflow_store_is_one_line_exit_2_and_writes_nothing(tmp_path, kind):
    make, message = NOT_STORES[kind]
    path = make(tmp_path / "store.db")
    before = state(tmp_path)
    done = subprocess.run([sys.executable, "-m", "mtc.results.compare", "--tracking-uri", f"sqlite:///{path}",
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert state(tmp_path) == before and not (tmp_path / "out").exists()


@pytest.mark.parametrize("uri, message", [
    (None, "the tracking URI must be a non-empty string, got None"),
    (42, "the tracking URI must be a non-empty string, got 42"),
    ("", "the tracking URI must be a non-empty string, got ''"),
    ("sqlite:///missing.db", "no tracking store at "),
])
def test_a_uri_that_names_no_store_is_one_line_and_creates_nothing(tmp_path, monkeypatch, uri, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as refused:
        mtc.results.trials(uri)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []  # trials("") created ./mlflow.db


def test_a_store_is_opened_read_only_and_a_new_one_is_still_created_by_its_writer(tmp_path):
    path = mlflow_store(tmp_path / "mlflow.db")
    before = state(tmp_path)
    trials = mtc.results.trials(f"sqlite:///{path}")
    assert list(trials["acc/mean"]) == [0.5] and list(mtc.results.sweeps(f"sqlite:///{path}").sweep) == [
        "kmeans-synthetic"]
    assert state(tmp_path) == before and sorted(tmp_path.iterdir()) == [path]
    client, _ = open_experiment(f"sqlite:///{path}", "mtc", read_only=True)
    with pytest.raises(MlflowException, match="readonly database"):
        client.create_experiment("a write")
    assert state(tmp_path) == before
    created = tmp_path / "new" / "mlflow.db"  # a sweep's store is created by its writer as before
    tracking.open_store(f"sqlite:///{created}", "mtc", str(tmp_path / "artifacts"))
    assert mtc.results.trials(f"sqlite:///{created}").empty


def test_a_database_that_is_not_an_mlflow_store_is_refused_without_creating_tables(server):
    empty = f"postgresql+psycopg2://{stack.DB_USER}@127.0.0.1:{server.db_port}/postgres"
    with pytest.raises(InputError, match="is not an MLflow tracking store"):
        mtc.results.trials(empty)
    engine = sa.create_engine(empty, poolclass=sa.pool.NullPool)
    assert sa.inspect(engine).get_table_names() == []
    engine.dispose()


# --- command lines ------------------------------------------------------------------------


@pytest.mark.parametrize("text, message", [
    ("benchmark,method\nreuters,kmeans\n", "no column paper, table, task, metric, mean, std"),
    ("paper,table,benchmark,method,task,metric,mean,std\np,T,reuters,kmeans,t1,acc,0.5,0.1\n\"open,quote\n",
     "not a readable CSV (Error tokenizing data"),
    ("paper,table,benchmark,method,task,metric,mean,std\np,T,reuters,kmeans,t1,acc,high,\n",
     "line 2 lacks a name or a number"),
    ("", "not a readable CSV (No columns to parse from file)"),
], ids=["missing columns", "unclosed quote", "a word for a mean", "empty"])
def test_compare_with_a_bad_published_csv_is_one_line_and_exit_2(tmp_path, capsys, text, message):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracking.open_store(uri, "mtc", str(tmp_path / "artifacts"))
    (tmp_path / "bad.csv").write_text(text)
    capsys.readouterr()  # MLflow's lines on creating the schema
    with pytest.raises(SystemExit) as exit_:
        compare.main(["--tracking-uri", uri, "--out", str(tmp_path / "out"), "--published", str(tmp_path / "bad.csv")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and f"--published {tmp_path / 'bad.csv'}: {message}" in err
    assert not (tmp_path / "out").exists()


def reproduce(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mtc.reproduce", *args, "--dry-run"], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)


@pytest.mark.parametrize("text, message", [
    ("sweeps: [\n  - methods: [kmeans\n", "not valid YAML (expected the node content, but found '-' at line 2, column 3)"),
    ("sweeps: []\nsweeps: []\n", "not valid YAML (found duplicate key sweeps at line 2, column 1)"),
    ("- kmeans\n- snmf\n", "expected a mapping of include, sweeps and compare, got a list"),
], ids=["unclosed list", "duplicate key", "a list"])
def test_reproduce_with_a_malformed_study_file_is_one_line_and_exit_2(tmp_path, text, message):
    (tmp_path / "study.yaml").write_text(text)
    done = reproduce(tmp_path, "study.yaml")
    assert done.returncode == 2 and done.stderr == f"error: study file study.yaml: {message}\n"


def test_reproduce_calls_a_missing_study_file_missing(tmp_path):
    for name in ("gone.yaml", "studies/gone"):
        done = reproduce(tmp_path, name)
        assert done.returncode == 2 and done.stderr == f"error: missing study file {name}\n"
    assert "unknown study 'nope'" in reproduce(tmp_path, "nope").stderr  # a name, not a path: the known studies


def test_a_stack_whose_database_port_is_taken_says_why_postgresql_did_not_start(tmp_path):
    """pg_ctl says only "could not start server, examine the log output": the one line says
    PostgreSQL's own reason, and its log; the folder's database is not left running."""
    root = Path(tempfile.mkdtemp(prefix="mtc-stack-", dir="/var/tmp"))
    try:
        with socket.create_server(("127.0.0.1", 0)) as taken:
            db_port = taken.getsockname()[1]
            done = subprocess.run([sys.executable, "-m", "mtc.stack", "start", "--dir", str(root), "--db-port",
                                   str(db_port), "--port", str(free_port())], capture_output=True, text=True,
                                  timeout=120)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        assert lines[0].startswith(f"error: PostgreSQL did not start on 127.0.0.1:{db_port}: could not create any "
                                   "TCP/IP sockets; could not bind IPv4 address \"127.0.0.1\": Address already in use")
        assert lines[0].endswith(f"(its log: {root / 'postgres.log'})")
        assert not (root / "pgdata" / "postmaster.pid").exists()
    finally:
        stack.stop(root)
        subprocess.run(["rm", "-rf", str(root)], check=False)
