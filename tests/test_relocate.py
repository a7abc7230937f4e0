import shutil
import subprocess
import sys

import numpy as np

from mtc.store import tracking
from mtc.store.relocate import relocate_if_moved


def make_store(folder):
    """A local store as a sweep leaves it: mlflow.db and mlartifacts/ in one folder, a run
    with labels.npz and a run that logged nothing."""
    folder.mkdir()
    client, experiment = tracking.open_store(f"sqlite:///{folder / 'mlflow.db'}", "mtc", str(folder / "mlartifacts"))
    run_id = client.create_run(experiment).info.run_id
    np.savez(folder / "labels.npz", task1=np.array([0, 1, 1]))
    client.log_artifact(run_id, str(folder / "labels.npz"))
    client.set_terminated(run_id, "FINISHED")
    empty = client.create_run(experiment).info.run_id
    client.set_terminated(empty, "FAILED")
    return experiment, run_id


def relocate(cwd, *args):
    return subprocess.run([sys.executable, "-m", "mtc.store.relocate", *args], cwd=cwd, capture_output=True, text=True)


def test_a_moved_local_store_finds_its_artifacts_again_after_relocate(tmp_path):
    experiment, run_id = make_store(tmp_path / "old")
    shutil.move(tmp_path / "old", tmp_path / "new")
    store = f"sqlite:///{tmp_path / 'new' / 'mlflow.db'}"
    client = tracking.client_for(store)
    moved = client.get_run(run_id)
    assert moved.info.artifact_uri.startswith((tmp_path / "old").as_uri())  # MLflow kept the absolute path
    assert client.list_artifacts(run_id) == []  # so the moved store shows no artifact

    done = relocate(tmp_path / "new")  # the defaults: sqlite:///mlflow.db and mlartifacts in the working folder
    assert done.returncode == 0, done.stderr
    assert f"experiment 'mtc': 2 runs (1 with artifacts), {(tmp_path / 'old' / 'mlartifacts').as_uri()} -> " \
           f"{(tmp_path / 'new' / 'mlartifacts').as_uri()}" in done.stdout
    run = client.get_run(run_id)
    assert run.info.artifact_uri == f"{(tmp_path / 'new' / 'mlartifacts').as_uri()}/{run_id}/artifacts"
    assert [a.path for a in client.list_artifacts(run_id)] == ["labels.npz"]
    labels = tracking.load_labels(client, run_id, run.info.artifact_uri, ["task1"])
    assert labels[0].tolist() == [0, 1, 1]
    assert client.get_experiment(experiment).artifact_location == (tmp_path / "new" / "mlartifacts").as_uri()
    new_run = client.create_run(experiment).info.run_id  # and new runs land beside the old ones
    assert client.get_run(new_run).info.artifact_uri.startswith((tmp_path / "new" / "mlartifacts").as_uri())

    again = relocate(tmp_path / "new")
    assert again.returncode == 0 and "experiment 'mtc': 3 runs, already at" in again.stdout


def test_relocate_leaves_an_experiment_whose_runs_are_not_in_the_given_folder(tmp_path):
    make_store(tmp_path / "old")
    shutil.move(tmp_path / "old", tmp_path / "new")
    (tmp_path / "elsewhere").mkdir()
    done = relocate(tmp_path / "new", "--artifacts", str(tmp_path / "elsewhere"))
    assert done.returncode == 0 and "experiment 'mtc': left at" in done.stdout
    assert "none of its 2 runs' folders is under" in done.stdout


def test_relocate_refuses_what_it_cannot_relocate_in_one_line(tmp_path):
    make_store(tmp_path / "store")
    for args, message in ((["--tracking-uri", "http://127.0.0.1:5000"], "only a local SQLite store"),
                          (["--tracking-uri", f"sqlite:///{tmp_path / 'none.db'}"], "no such file"),
                          (["--artifacts", str(tmp_path / "none")], "no such folder")):
        done = relocate(tmp_path / "store", *args)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and message in done.stderr


def test_mtc_commands_relocate_a_moved_store_when_they_open_it(tmp_path):
    experiment, run_id = make_store(tmp_path / "old")
    shutil.move(tmp_path / "old", tmp_path / "new")
    uri, artifacts = f"sqlite:///{tmp_path / 'new' / 'mlflow.db'}", tmp_path / "new" / "mlartifacts"
    client, opened = tracking.open_store(uri, "mtc", str(artifacts))  # as python -m mtc.sweep opens it
    assert opened == experiment and [a.path for a in client.list_artifacts(run_id)] == ["labels.npz"]
    assert tracking.open_store(uri, "mtc", str(artifacts))[1] == experiment  # nothing missing now: untouched
    assert relocate_if_moved(uri, artifacts) == []
    untouched = make_store(tmp_path / "kept")  # a store in place is never rewritten
    assert relocate_if_moved(f"sqlite:///{tmp_path / 'kept' / 'mlflow.db'}", tmp_path / "new" / "mlartifacts") == []
    assert tracking.client_for(f"sqlite:///{tmp_path / 'kept' / 'mlflow.db'}").get_run(untouched[1]).info.artifact_uri \
        .startswith((tmp_path / "kept").as_uri())
