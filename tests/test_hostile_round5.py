"""Defects of issue 81 (reliability round 5), each against the real component:

- fidelity into a read-only folder (a read-only bind mount: root writes through any file mode) is
  one line and exit 2; a missing, empty or file ``--results`` says so and what belongs there;
- the preflight refuses a store written by a newer MLflow as such (SQLite and PostgreSQL), not as
  out-of-date with MLflow's advice to run ``mlflow db upgrade``; an older store still passes;
- the batch route of ``mlflow server --app-name mtc`` refuses (409, naming the run) a batch that
  reuses stored run ids with other content, and still answers an identical resend 200;
- ``mtc.data root`` on a file says it is a file;
- a leaderboard (``--with``) stopped mid-run and run again loses nothing and writes the files
  an uninterrupted one writes, byte for byte; two of the same study started together: one
  refused in one line, the other's files those same bytes; a leaderboard written over another
  replaces each file whole (a concurrent one never logs a half-written file); its MLflow run,
  stopped while its files are logged, is closed KILLED, not left RUNNING;
- the workers a SIGKILLed driver's Ray was starting die with it (they lived 10-25 s).
"""

import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import sqlalchemy as sa
from test_orphans import folder, start  # noqa: F401 (folder: the fixture)
from test_orphans import PLUGIN, STUDY, describe, driver_env, left_behind, stand_in_holder, sweep_args
from test_run_writer import post, record, server_store, servers  # noqa: F401 (servers: the fixture)

from mtc.data.__main__ import main as data_main
from mtc.results.fidelity import REASONS
from mtc.results.fidelity import main as fidelity_main
from mtc.results.leaderboard import build_leaderboard, log_leaderboard
from mtc.results.reading import open_experiment
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


# --- a leaderboard stopped and resumed, two at once ---------------------------------------------

SEARCH_PATH = f"hydra.searchpath=[file://{PLUGIN / 'conf'}]"
# the smallest leaderboard: test_orphans' study of one paper sweep (k-means, 2 trials) and the
# added method slow (the toy solver, 2 s a fit: 2 grid points x 2 seeds), one Tuner on one CPU
BOARD = "leaderboard_study_slow"
TRIALS = ["max_iter=100 s0", "max_iter=100 s1", "shift=0 s0", "shift=0 s1", "shift=1 s0", "shift=1 s1"]


def board_overrides(folder: Path) -> list[str]:
    return [SEARCH_PATH, f"output_dir={folder / 'out'}", f"mlflow.tracking_uri=sqlite:///{folder / 'mlflow.db'}",
            f"mlflow.artifact_root={folder / 'art'}", "ray.num_cpus=1"]


def start_board(folder: Path) -> subprocess.Popen:
    """``python -m mtc.reproduce study.yaml --with slow`` writing into ``folder``."""
    (folder / "study.yaml").write_text(STUDY)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGIN), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.Popen([sys.executable, "-m", "mtc.reproduce", str(folder / "study.yaml"), "--with", "slow",
                             *board_overrides(folder), "--compare-root", str(folder)], cwd=folder, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(command: subprocess.Popen) -> tuple[int, str, str]:
    try:
        out, err = command.communicate(timeout=600)
    finally:
        if command.poll() is None:
            os.killpg(command.pid, signal.SIGKILL)
    return command.returncode, out, err


def stored_runs(folder: Path) -> Counter:
    """(run name, status) of every run of the store, counted."""
    with sqlite3.connect(f"file:{folder / 'mlflow.db'}?mode=ro", uri=True, timeout=30) as connection:
        return Counter(connection.execute("SELECT name, status FROM runs").fetchall())


def slow_trials_finished(folder: Path) -> int:
    """How many trials of the added sweep are FINISHED (0 before the store has its tables)."""
    if not (folder / "mlflow.db").exists():
        return 0
    try:
        return sum(count for (name, status), count in stored_runs(folder).items()
                   if name.startswith("shift=") and status == "FINISHED")
    except sqlite3.OperationalError:  # no table yet
        return 0


def board_files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted((folder / BOARD).iterdir())}


def finished_once() -> Counter:
    """Every trial, both sweeps' parent runs and one leaderboard run FINISHED once, nothing else."""
    return Counter({(name, "FINISHED"): 1 for name in [*TRIALS, "kmeans-synthetic", "slow-synthetic", "leaderboard"]})


@pytest.fixture(scope="module")
def together(tmp_path_factory):
    """Two leaderboards of the study started together on one store and output folder."""
    folder = tmp_path_factory.mktemp("together")
    commands = [start_board(folder), start_board(folder)]
    return folder, [finish(command) for command in commands]


@pytest.mark.slow
def test_two_leaderboards_started_together_one_is_refused_in_one_line(together):
    folder, done = together
    codes = sorted(code for code, _, _ in done)
    assert codes == [0, 2], [err[-2000:] for _, _, err in done]
    [(_, _, refused)] = [result for result in done if result[0] == 2]
    assert re.fullmatch(rf"error: sweep 'kmeans-synthetic' is already running \(driver pid \d+, output folder "
                        rf"{re.escape(str(folder / 'out' / 'kmeans-synthetic'))}\); wait for it, or stop it and run "
                        r"this command again to resume\n", refused), refused
    assert stored_runs(folder) == finished_once()
    assert sorted(board_files(folder)) == ["leaderboard.csv", "leaderboard.md", "not_run.csv", "standing.png",
                                           "tests.csv"]


@pytest.mark.slow
def test_a_leaderboard_stopped_mid_run_resumes_to_the_files_of_an_uninterrupted_one(together, tmp_path):
    """SIGTERM once the added sweep has a finished trial and others to run; the same command
    again runs the rest: every trial FINISHED once, and the leaderboard folder byte for byte
    that of the leaderboard run uninterrupted in a fresh store (its timing is on stdout only)."""
    reference, _ = together
    stopped = start_board(tmp_path)
    try:
        deadline = time.monotonic() + 300
        while not slow_trials_finished(tmp_path):
            assert stopped.poll() is None and time.monotonic() < deadline, stopped.stderr.read()[-3000:]
            time.sleep(0.05)
        stopped.send_signal(signal.SIGTERM)
    finally:
        code, _, err = finish(stopped)
    assert code == 143, err[-3000:]
    assert re.search(r"^stopped by SIGTERM: [123] of 4 trials finished \(MLflow parent run \w+, KILLED\); run the same "
                     r"command again to resume", err, re.M), err[-3000:]
    code, out, err = finish(start_board(tmp_path))
    assert code == 0, err[-3000:]
    assert re.search(r"^sweep slow-synthetic: 4 trials \([123] already finished\)", out, re.M), out
    assert stored_runs(tmp_path) == finished_once()
    assert board_files(tmp_path) == board_files(reference)


@pytest.mark.slow
def test_a_leaderboard_written_over_another_replaces_each_file_whole(together, monkeypatch):
    """Another leaderboard of the folder, later (the store's sweeps all finished: no lock keeps
    it out), moves each file in whole (a new inode), nothing rewritten in place where the first
    one is logging it, and leaves no folder of its own behind."""
    from mtc.protocols import plan_leaderboard

    folder, _ = together
    monkeypatch.syspath_prepend(str(PLUGIN))
    before = {name: os.stat(folder / BOARD / name).st_ino for name in board_files(folder)}
    files = board_files(folder)
    plan = plan_leaderboard(str(folder / "study.yaml"), ["slow"], board_overrides(folder), [])
    client, experiment_id = open_experiment(f"sqlite:///{folder / 'mlflow.db'}", "mtc")
    built = build_leaderboard(client, experiment_id, plan.boards, ["slow"], folder / BOARD, plan.not_run,
                              "the SQLite store ../mlflow.db")
    assert sorted(path.name for path in built["paths"]) == sorted(files)
    assert board_files(folder) == files
    assert not any(os.stat(folder / BOARD / name).st_ino == inode for name, inode in before.items())


def test_a_leaderboard_run_stopped_while_its_files_are_logged_is_closed_killed(tmp_path, monkeypatch):
    client = tracking.client_for(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = tracking.ensure_experiment(client, "mtc", str(tmp_path / "artifacts"))
    (tmp_path / "leaderboard.md").write_text("# Leaderboard\n")

    def stopped(*args):
        raise KeyboardInterrupt  # what the command's handler raises on Ctrl-C or SIGTERM (mtc.sweep.stopping)

    monkeypatch.setattr(client, "log_artifact", stopped)
    with pytest.raises(KeyboardInterrupt):
        log_leaderboard(client, experiment, "study", ["slow"], [tmp_path / "leaderboard.md"])
    [run] = tracking.find_runs(client, experiment)
    assert (run.info.run_name, run.info.status) == ("leaderboard", "KILLED")


# --- the workers of a SIGKILLed driver ----------------------------------------------------------


def starting_workers(folder: Path) -> list[int]:
    """The Ray workers of the sessions in ``folder`` (TMPDIR) not yet connected: Ray's setup
    before the worker proper, or the worker before it takes its ``ray::`` title."""
    found = []
    for pid in left_behind(folder, wait=0):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        # not the raylet, whose arguments hold the workers' command
        if (b"setup_worker.py" in command or b"default_worker.py" in command) \
                and not command.split(b"\0")[0].endswith(b"/raylet"):
            found.append(pid)
    return found


def ray_workers(folder: Path) -> list[int]:
    """Those and the connected ones (``ray::IDLE``, ``ray::ImplicitFunc.train``, ...); not Ray's
    agents, which the next sweep ends (tests/test_orphans.py)."""
    titled = []
    for pid in left_behind(folder, wait=0):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if command.startswith(b"ray::") and not command.startswith((b"ray::DashboardAgent", b"ray::RuntimeEnvAgent")):
            titled.append(pid)
    return sorted({*starting_workers(folder), *titled})


@pytest.mark.slow
def test_the_workers_a_killed_driver_was_starting_die_with_it(folder):  # noqa: F811
    """SIGKILL to the driver alone (the OOM killer) while its Ray starts a worker: the GCS and
    the raylet die with the driver, and so do the workers. A worker caught in Ray's setup lived
    10-25 s more (ray._private.node.Node retrying the GCS that is gone); within 6 s here."""
    driver = start(folder, sweep_args(folder), driver_env(folder))
    stand_in = None
    try:
        deadline = time.monotonic() + 240
        while not starting_workers(folder):
            assert driver.poll() is None and time.monotonic() < deadline, driver.stderr.read()[-3000:]
            time.sleep(0.02)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=60)
        killed = time.monotonic()
        # no sweep of a test beside this one ends them first (remove_dead_drivers_ray_folders)
        stand_in = stand_in_holder(next(folder.glob(f"mtc-ray-{driver.pid}-*.lock")))
        while ray_workers(folder) and time.monotonic() < killed + 6:
            time.sleep(0.1)
        left = ray_workers(folder)
        assert not left, describe(left)
    finally:
        if stand_in is not None:
            os.close(stand_in)
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
