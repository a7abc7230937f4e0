"""Defects of issue 81 (reliability round 5), each against the real component:

- fidelity into a read-only folder (a read-only bind mount: root writes through any file mode) is
  one line and exit 2; a missing, empty or file ``--results`` says so and what belongs there;
- the preflight refuses a store written by a newer MLflow as such (SQLite and PostgreSQL), not as
  out-of-date with MLflow's advice to run ``mlflow db upgrade``; an older store still passes;
- the batch route of ``mlflow server --app-name mtc`` refuses (409, naming the run) a batch that
  reuses stored run ids with other content, and still answers an identical resend 200;
- ``mtc.data root`` on a file says it is a file.
"""

import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa
from test_run_writer import post, record, server_store, servers  # noqa: F401 (servers: the fixture)

from mtc.data.__main__ import main as data_main
from mtc.results.fidelity import REASONS
from mtc.results.fidelity import main as fidelity_main
from mtc.stack import server as stack
from mtc.stack.loopback import free_port
from mtc.store import preflight, run_writer, tracking

REPO = Path(__file__).resolve().parents[1]


def one_error_line(text: str) -> str:
    assert text.startswith("error: ") and text.count("\n") == 1 and "Traceback" not in text, text
    return text


# --- fidelity -----------------------------------------------------------------------------------


def results_folder(path: Path) -> Path:
    """A results folder fidelity reads: one compare folder and an empty reasons map."""
    (path / "compare_a").mkdir(parents=True)
    pd.DataFrame([{"benchmark": "reuters", "method": "kmeans", "task": "mean", "metric": "acc", "selection": "acc",
                   "point": "defaults", "mean": 0.5, "std": 0.0, "n": 10}]).to_csv(path / "compare_a" / "cells.csv",
                                                                                  index=False)
    (path / REASONS).write_text("reasons: []\n")
    return path


def read_only_mount_works(folder: Path) -> bool:
    probe = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} {folder} && ! touch {folder}/probe"
    return subprocess.run(["unshare", "--mount", "sh", "-c", probe], capture_output=True).returncode == 0


def test_fidelity_into_a_read_only_folder_is_one_line(tmp_path):
    """The folder is bind-mounted read-only in a mount namespace of the command alone (gone with
    it): writes fail with EROFS, the error class users meet on a read-only file system, whereas
    a chmod 0555 folder does not stop root."""
    results = results_folder(tmp_path / "results")
    if not read_only_mount_works(results):
        pytest.skip("needs unshare --mount and mount --bind (root)")
    command = (f"mount --bind {results} {results} && mount -o remount,bind,ro {results} {results} && "
               f"exec {sys.executable} -m mtc.results.fidelity --results {results}")
    done = subprocess.run(["unshare", "--mount", "sh", "-c", command], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2
    assert one_error_line(done.stderr) == (f"error: cannot write {results / 'fidelity.csv'} (Read-only file system); "
                                           "give a writable folder with --results\n")
    assert not (results / "fidelity.csv").exists()


@pytest.mark.parametrize("make, what", [
    (lambda path: path, "no such folder"),
    (lambda path: path.mkdir(), "an empty folder"),
    (lambda path: path.write_text("x"), "a file, not a folder"),
], ids=["missing", "empty", "file"])
def test_fidelity_says_what_is_wrong_with_the_results_folder_and_what_belongs_there(tmp_path, capsys, make, what):
    results = tmp_path / "results"
    make(results)
    with pytest.raises(SystemExit) as stop:
        fidelity_main(["--results", str(results)])
    assert stop.value.code == 2
    assert one_error_line(capsys.readouterr().err) == (
        f"error: --results {results}: {what}; expected the compare_* folders (their cells.csv) and {REASONS} in it "
        "(run from the repository root, or give the folder that holds them)\n")


# --- a store of a newer MLflow ------------------------------------------------------------------


def known_revisions() -> tuple[list[str], str]:
    """This MLflow's schema revisions, oldest first, and one that is not among them."""
    from alembic.script import ScriptDirectory
    from mlflow.store.db.utils import _get_alembic_config

    known = [revision.revision for revision in ScriptDirectory.from_config(_get_alembic_config("")).walk_revisions()]
    return known[::-1], next(r for r in ("9f8e7d6c5b4a", "0123456789ab", "fedcba987654") if r not in known)


def set_revision(uri: str, revision: str) -> None:
    engine = sa.create_engine(uri, poolclass=sa.pool.NullPool)
    with engine.begin() as connection:
        connection.execute(sa.text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
    engine.dispose()


def newer_message(store: str, revision: str) -> str:
    import mlflow

    head = known_revisions()[0][-1]
    return (f"the tracking store {store} was written by a newer MLflow (schema revision {revision}, unknown to this "
            f"mlflow {mlflow.__version__}, whose newest is {head}): this MLflow cannot read it; upgrade mlflow, or "
            "choose another store")


def test_a_sqlite_store_of_a_newer_mlflow_is_named_so_and_an_older_one_passes(tmp_path):
    path = tmp_path / "mlflow.db"
    uri = f"sqlite:///{path}"
    tracking.client_for(uri).search_experiments()  # MLflow's tables, at this MLflow's revision
    known, newer = known_revisions()
    preflight.check_tracking(uri)
    set_revision(uri, known[-2])  # older: MLflow's own out-of-date error and its `mlflow db upgrade` are right
    preflight.check_tracking(uri)
    set_revision(uri, newer)
    with pytest.raises(preflight.UnreachableError) as refused:
        preflight.check_tracking(uri)
    assert str(refused.value) == newer_message(str(path), newer)
    done = subprocess.run([sys.executable, "-m", "mtc.sweep", "method=kmeans", "data=synthetic",
                           f"mlflow.tracking_uri={uri}", f"output_dir={tmp_path / 'out'}", "ray.address=local"],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2
    assert one_error_line(done.stderr) == f"error: {newer_message(str(path), newer)}\n"


@pytest.mark.slow
def test_a_postgresql_store_of_a_newer_mlflow_is_named_so():
    root = Path(tempfile.mkdtemp(prefix="mtc-stack-", dir="/var/tmp"))  # reachable by the postgres user
    started = stack.start(root, port=free_port(), db_port=free_port())
    try:
        uri = started.database_uri()
        _, newer = known_revisions()
        preflight.check_tracking(uri)
        set_revision(uri, newer)
        with pytest.raises(preflight.UnreachableError) as refused:
            preflight.check_tracking(uri)
        assert str(refused.value) == newer_message(preflight.safe(uri), newer)
    finally:
        stack.stop(root)
        subprocess.run(["rm", "-rf", str(root)], check=False)


# --- the batch route ----------------------------------------------------------------------------


def metric_changed(body: dict) -> None:
    body["runs"][0]["metrics"] = [[key, "0.25" if key == "acc/mean" else value, step]
                                  for key, value, step in body["runs"][0]["metrics"]]


@pytest.mark.slow
@pytest.mark.parametrize("change, parts", [
    (metric_changed, "metrics"),
    (lambda body: body["runs"][0]["params"].update(alpha="0.9"), "params"),
    (lambda body: body["runs"][0].update(status="FAILED"), "status"),
], ids=["metric", "param", "status"])
def test_a_batch_reusing_stored_run_ids_with_other_content_is_refused_and_a_resend_is_not(servers, change,  # noqa: F811
                                                                                          parts):
    client, experiment, parent, _ = server_store(servers, "mtc")
    body = run_writer.batch_payload(experiment, parent, [record("a"), record("b")])
    ids = [run["id"] for run in body["runs"]]
    assert post(client.tracking_uri, body) == (200, {"run_ids": ids})
    assert post(client.tracking_uri, body) == (200, {"run_ids": ids})  # the retry path stays idempotent
    other = run_writer.batch_payload(experiment, parent, [record("a"), record("c")])
    other["runs"][0] = {**body["runs"][0], "params": dict(body["runs"][0]["params"])}
    change(other)
    status, answer = post(client.tracking_uri, other)
    assert status == 409 and answer["error_code"] == "RUN_CHANGED"
    assert answer["message"] == (f"run 'a' ({ids[0]}) is stored with other {parts} than this batch's: a batch may "
                                 "not reuse stored run ids; nothing written")
    kept = client.get_run(ids[0])
    assert (kept.data.metrics["acc/mean"], kept.data.params["alpha"], kept.info.status) == (0.75, "0.5", "FINISHED")
    names = sorted(run.info.run_name for run in tracking.find_runs(client, experiment) if run.info.run_id != parent)
    assert names == ["a", "b"]  # c, the batch's new run, is not written either


# --- the data root ------------------------------------------------------------------------------


def test_the_data_root_on_a_file_says_it_is_a_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    (tmp_path / "corpora.tar").write_text("x")
    assert data_main(["root", str(tmp_path / "corpora.tar")]) == 2
    assert one_error_line(capsys.readouterr().err) == (f"error: {tmp_path / 'corpora.tar'} is a file, not a folder: "
                                                       "give the folder that holds the corpora (e.g. reuters21578/)\n")
    assert data_main(["root", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.startswith(f"error: no folder {tmp_path / 'nope'}: ")
    assert not (tmp_path / "home" / ".config").exists()
