"""Studies (python -m mtc.reproduce): a set of sweeps in one driver, one Ray session and one
Tuner, then its compare folders; resumable and idempotent. On local Ray and a SQLite store;
tests/test_multinode.py runs a study against the two-node cluster and the PostgreSQL server."""

import contextlib
import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mtc import reproduce
from mtc.store import tracking
from mtc.sweep import driver as sweep

pytestmark = pytest.mark.slow

TINY = Path(__file__).parent / "studies" / "tiny.yaml"
PLUGIN = Path(__file__).parent / "plugin"


def store_overrides(tmp: Path) -> list[str]:
    """The study's store, outputs and processed-data cache in its folder: the cache's kept fits
    (steps/shared_fit) are this study's alone, not those of a tiny study another module ran."""
    return [f"output_dir={tmp / 'outputs'}", f"mlflow.tracking_uri=sqlite:///{tmp / 'mlflow.db'}",
            f"mlflow.artifact_root={tmp / 'artifacts'}", f"data.cache_dir={tmp / 'cache'}", "ray.num_cpus=1"]


def dry_run_text(study, overrides, only=()) -> str:
    plans = reproduce.plan_study(study, overrides, list(only))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        reproduce.dry_run(study, plans, list(only))
    return out.getvalue()


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("study")
    study, overrides = reproduce.load_study(str(TINY)), store_overrides(tmp)
    before = dry_run_text(study, overrides)
    outcome = reproduce.run_study(study, reproduce.plan_study(study, overrides, []), compare_root=tmp)
    return tmp, study, overrides, before, outcome


def test_a_study_expands_its_entries_and_lists_them_in_a_dry_run(tiny_study):
    tmp, study, overrides, before, _ = tiny_study
    assert len(study.sweeps) == 5 and [c.out for c in study.compares] == ["compare_tiny"]
    lines = before.splitlines()
    assert [line.split()[0] for line in lines[:5]] == ["kmeans-synthetic", "a_kmeans-synthetic", "kmeans-hard",
                                                       "a_kmeans-hard", "kmeans_reduced-synthetic"]
    assert all(line.split()[1:5] == ["6", "trials", "to", "run"] and " about " in line for line in lines[:4])
    # 120 samples, below the cost curves' sizes: fits on the whole data (mtc.sweep.estimates)
    assert all(re.search(r"\((one fit|2 fits) on the data: [\d.e-]+ s each\)$", line) for line in lines[:4])
    # its three trials are kmeans-synthetic's fits at max_iter 200: read, not fitted again
    assert lines[4].split()[1:5] == ["3", "trials", "to", "run"] and lines[4].endswith(
        ", 3 trials read the fits of another sweep)")
    assert lines[5].startswith("study tiny: 5 sweeps, 27 trials, 27 to run (0 sweeps finished); estimated ")
    after = dry_run_text(study, overrides).splitlines()
    assert all(line.endswith("finished") for line in after[:5])
    assert after[5] == "study tiny: 5 sweeps, 27 trials, 0 to run (5 sweeps finished)"
    only = dry_run_text(study, overrides, ["a_kmeans"]).splitlines()
    assert [line.split()[0] for line in only[:2]] == ["a_kmeans-synthetic", "a_kmeans-hard"] and len(only) == 3


def test_a_study_runs_every_sweep_in_one_tuner_and_writes_its_compare_folder(tiny_study):
    tmp, _, _, _, outcome = tiny_study
    assert outcome["ray_started"] and len(outcome["ran"]) == 5 and outcome["compared"] == [tmp / "compare_tiny"]
    client = tracking.client_for(f"sqlite:///{tmp / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("mtc").experiment_id
    parents = [r for r in client.search_runs([experiment]) if tracking.PARENT_TAG not in r.data.tags
               and tracking.SWEEP_KEY_TAG in r.data.tags]
    assert sorted(r.info.run_name for r in parents) == sorted(outcome["ran"])
    for parent in parents:
        assert parent.info.status == "FINISHED"
        keys = [r.data.tags[tracking.TRIAL_KEY_TAG] for r in
                tracking.find_runs(client, experiment, **{tracking.PARENT_TAG: parent.info.run_id})]
        grid = (200,) if parent.info.run_name == "kmeans_reduced-synthetic" else (100, 200)
        assert sorted(keys) == sorted(f"max_iter={m}|seed={s}" for m in grid for s in range(3))
    cells = pd.read_csv(tmp / "compare_tiny" / "cells.csv")
    assert set(zip(cells.benchmark, cells.method)) == {(b, m) for b in ("synthetic", "hard")
                                                       for m in ("kmeans", "a_kmeans")}
    assert (tmp / "outputs" / "kmeans-hard" / "report.md").is_file()


def test_a_fit_two_sweeps_of_the_study_have_is_fitted_once_and_both_sweeps_runs_hold_it(tiny_study):
    """kmeans_reduced-synthetic's trials are kmeans-synthetic's at max_iter 200 (mtc.sweep.shared_fits):
    one of each pair fitted and kept the fit (step_seconds/shared_fit), the other read it; both
    runs hold the same scores, labels and traces."""
    from mtc.fitted import SHARED_FIT_STEP
    from mtc.numerics.cache import Cache, library_versions

    tmp, study, overrides, _, _ = tiny_study
    client = tracking.client_for(f"sqlite:///{tmp / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("mtc").experiment_id
    parents = {r.info.run_name: r.info.run_id for r in client.search_runs([experiment])
               if tracking.SWEEP_KEY_TAG in r.data.tags}
    runs = {(name, r.data.tags[tracking.TRIAL_KEY_TAG]): r for name in ("kmeans-synthetic", "kmeans_reduced-synthetic")
            for r in tracking.find_runs(client, experiment, **{tracking.PARENT_TAG: parents[name]})}
    plans = {plan.name: plan for plan in reproduce.plan_study(study, overrides, [])}
    steps = Cache(folder=tmp / "cache" / "steps")
    for seed in range(3):
        key = f"max_iter=200|seed={seed}"
        full, reduced = runs[("kmeans-synthetic", key)], runs[("kmeans_reduced-synthetic", key)]
        assert plans["kmeans-synthetic"].shared_fits[key] == plans["kmeans_reduced-synthetic"].shared_fits[key]
        fitted = ["step_seconds/shared_fit" in run.data.metrics for run in (full, reduced)]
        assert sorted(fitted) == [False, True]  # one computed it, the other read it
        assert [run.data.metrics["fit_read"] for run in (full, reduced)] == [float(not f) for f in fitted]
        for metric in ("acc/mean", "nmi/mean", "objective/final", "n_iter", "silhouette/mean"):
            assert full.data.metrics[metric] == reduced.data.metrics[metric]
        files = [np.load(Path(run.info.artifact_uri.removeprefix("file://")) / tracking.TRIAL_ARTIFACT)
                 for run in (full, reduced)]
        assert files[0].files == files[1].files and any(name.startswith("labels") for name in files[0].files)
        for name in files[0].files:
            np.testing.assert_array_equal(files[0][name], files[1][name])
        # kept under the fit's key, the libraries and the one BLAS thread of a one-CPU trial
        kept = steps.path(SHARED_FIT_STEP, (plans["kmeans-synthetic"].shared_fits[key], library_versions(), 1))
        assert kept.with_suffix(".npz").is_file()
    assert sorted(plans["kmeans-synthetic"].shared_fits) == [f"max_iter=200|seed={seed}" for seed in range(3)]
    # the dry run's stored fit times of k-means on this data: the 9 runs but the 3 that read a fit
    assert reproduce.stored_fit_seconds(list(plans.values()))["kmeans_reduced-synthetic"][1] == 6


def test_a_finished_study_run_again_starts_no_ray_and_regenerates_nothing(tiny_study, monkeypatch):
    tmp, study, overrides, _, _ = tiny_study
    cells = (tmp / "compare_tiny" / "cells.csv").read_text()

    def no_ray(*args, **kwargs):
        raise AssertionError("Ray was started for a finished study")

    cleaned = []  # a killed driver's Ray agents are ended by the next study here, even one that starts no Ray
    monkeypatch.setattr(sweep, "ray_session", no_ray)
    monkeypatch.setattr(sweep, "remove_dead_drivers_ray_folders", lambda: cleaned.append(True))
    outcome = reproduce.run_study(study, reproduce.plan_study(study, overrides, []), compare_root=tmp)
    assert not outcome["ray_started"] and outcome["ran"] == [] and len(outcome["finished"]) == 5 and cleaned
    assert outcome["compared"] == []
    forced = reproduce.run_study(study, reproduce.plan_study(study, overrides, []), force_compare=True,
                                 compare_root=tmp)
    assert forced["compared"] == [tmp / "compare_tiny"] and not forced["ray_started"]
    assert (tmp / "compare_tiny" / "cells.csv").read_text() == cells  # the same cells from the same runs


def test_a_bad_study_is_one_line():
    with pytest.raises(reproduce.InputError, match="unknown study 'nope'; available: .*smtnmf"):
        reproduce.load_study("nope")


def test_a_study_whose_trials_cannot_fit_in_memory_is_refused_before_anything_is_created(tmp_path):
    """The memory check of the sweeps left to run comes before their folders, locks and runs;
    a dry run refuses them the same way."""
    study = reproduce.Study("memory", (("method=snmf", "data=synthetic", "sweep.repeats=1"),), ())
    overrides = [*store_overrides(tmp_path), "ray.num_cpus=100000000"]  # as many concurrent trials
    with pytest.raises(reproduce.InputError, match="^sweep snmf-synthetic: SymmetricNMF: a fit needs about .* "
                                                   "concurrent trials .* is free: set sweep.max_concurrent_trials="):
        reproduce.run_study(study, reproduce.plan_study(study, overrides, []), compare_root=tmp_path)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(reproduce.InputError, match="is free: set sweep.max_concurrent_trials="):
        reproduce.dry_run(study, reproduce.plan_study(study, overrides, []), [])


def test_a_sweep_whose_method_needs_equal_cluster_counts_is_refused_on_unequal_ones_before_anything_is_created(
        tmp_path):
    """LSSMTC shares its cluster centres across tasks: on data with 2 and 3 clusters every trial
    would fail (the mtcmrl study ran 760 such trials on 20ng before its config left LSSMTC
    out); the study refuses the sweep in one line instead, creating nothing, as fit does."""
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        np.save(data / f"{name}.npy", rng.random((12, 5)))
    study = reproduce.Study("counts", (("method=lssmtc", "data=files", "data.name=mine", "sweep.repeats=1",
                                        f"data.params.paths=[{data / 'a.npy'},{data / 'b.npy'}]",
                                        "data.params.n_clusters=[2,3]"),), ())
    with pytest.raises(reproduce.InputError, match=r"^sweep lssmtc-mine: LSSMTC needs the same number of clusters in "
                                                   r"every task \(the cluster centres M have c columns shared by "
                                                   r"every task\), got \[2, 3\]$"):
        reproduce.run_study(study, reproduce.plan_study(study, store_overrides(tmp_path), []), compare_root=tmp_path)
    # no store, outputs or compare folder; the processed-data cache may remember the files' hash
    assert sorted(path.name for path in tmp_path.iterdir() if path.name != "cache") == ["data"]


def test_a_sweep_whose_every_trial_fails_is_one_line_and_the_studys_other_sweeps_are_reported(tmp_path, monkeypatch):
    """Every fit of one sweep raises (the toy method's fail switch): that sweep ends FAILED with
    its first error in one line, as a sweep with lost trials does, and the study's other sweep
    is still reported and FINISHED (the report of a sweep without one finished trial used to
    raise ValueError, which closed every sweep not yet reported)."""
    monkeypatch.syspath_prepend(str(PLUGIN))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(PLUGIN), *filter(None, [os.environ.get("PYTHONPATH")])]))
    small = ("sweep.repeats=2", "data.params.n_tasks=2", "data.params.samples_per_cluster=10")
    study = reproduce.Study("failing", (("method=toy", "data=synthetic", "++method.grid.fail=[true]", *small),
                                        ("method=kmeans", "data=synthetic", *small)), ())
    overrides = [f"hydra.searchpath=[file://{PLUGIN / 'conf'}]", *store_overrides(tmp_path)]
    with pytest.raises(sweep.SweepIncomplete, match=r"^sweep toy-synthetic: no trial finished, 4 of 4 failed in "
                                                    r"their fit \(first error: FloatingPointError: toy failure.*\); "
                                                    r"MLflow parent run \w+ is FAILED; fix the cause, then run the "
                                                    r"same command again$"):
        reproduce.run_study(study, reproduce.plan_study(study, overrides, []), compare_root=tmp_path)
    client = tracking.client_for(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("mtc")
    parents = {run.info.run_name: run for run in tracking.find_runs(client, experiment.experiment_id)
               if tracking.PARENT_TAG not in run.data.tags}
    assert parents["toy-synthetic"].info.status == "FAILED"
    assert "toy failure" in parents["toy-synthetic"].data.tags["mtc.error"]
    assert parents["kmeans-synthetic"].info.status == "FINISHED"
    assert (tmp_path / "outputs" / "kmeans-synthetic" / "report.md").is_file()
    assert not (tmp_path / "outputs" / "toy-synthetic" / "report.md").exists()


def parents_by_name(db) -> dict:
    """The store's parent runs by name, read with sqlite3 (cheap enough to poll): name -> status."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(db, timeout=30)) as connection:
        try:
            return dict(connection.execute(
                "SELECT runs.name, runs.status FROM runs JOIN tags ON tags.run_uuid = runs.run_uuid "
                "WHERE tags.key = ?", (tracking.SWEEP_KEY_TAG,)).fetchall())
        except sqlite3.OperationalError:  # the schema is not created yet
            return {}


def test_a_terminated_study_closes_its_runs_and_the_same_command_resumes(tmp_path):
    """SIGTERM mid-study (a scheduler's time limit): every parent and child run is closed, none
    RUNNING; the same command then runs only what did not finish: no run lost or duplicated.
    The study's first sweep, whose trials ended before the signal, was reported while the
    Tuner ran the others (mtc.sweep.finishing): it stays FINISHED, and the resumed study leaves
    it as it was."""
    study = tmp_path / "slow.yaml"
    small = "'sweep.repeats=3', 'sweep.seeds_per_trial=1', 'data.params.n_tasks=2', 'data.params.samples_per_cluster=10'"
    study.write_text("sweeps:\n  - methods: [toy]\n    data: [synthetic]\n"
                     f"    overrides: ['++method.grid.shift=[3.0]', {small}, 'sweep.name=toy-quick']\n"
                     "  - methods: [toy]\n    data: [synthetic]\n"
                     f"    overrides: ['++method.grid.shift=[0.0,1.0]', '++method.params.delay=1.5', {small}]\n"
                     "  - methods: [toy]\n    data: [synthetic]\n"
                     f"    overrides: ['++method.grid.shift=[2.0]', '++method.params.delay=1.5', {small},"
                     " 'sweep.name=toy-other']\n")
    db = tmp_path / "mlflow.db"
    args = [str(study), f"hydra.searchpath=[file://{PLUGIN / 'conf'}]", *store_overrides(tmp_path)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGIN), *filter(None, [os.environ.get("PYTHONPATH")])])}
    driver = subprocess.Popen([sys.executable, "-m", "mtc.reproduce", *args], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    from test_cli import child_runs, finished_children

    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and (finished_children(db) < 5
                                           or parents_by_name(db).get("toy-quick") != "FINISHED"):
        time.sleep(0.5)
    driver.send_signal(signal.SIGTERM)
    driver.communicate(timeout=240)
    assert driver.returncode != 0
    _, children, parents = child_runs(db)
    status = {p.info.run_name: p.info.status for p in parents}
    assert status == {"toy-quick": "FINISHED", "toy-synthetic": "KILLED", "toy-other": "KILLED"}
    assert (tmp_path / "outputs" / "toy-quick" / "report.md").is_file()
    statuses = [r.info.status for r in children]
    assert "RUNNING" not in statuses and 5 <= statuses.count("FINISHED") < 12
    kept = {(r.data.tags[tracking.PARENT_TAG], r.data.tags[tracking.TRIAL_KEY_TAG]): r.info.run_id
            for r in children if r.info.status == "FINISHED"}
    quick = {p.info.run_name: p for p in parents}["toy-quick"]

    done = subprocess.run([sys.executable, "-m", "mtc.reproduce", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    _, children, parents = child_runs(db)
    assert len(parents) == 3 and {p.info.status for p in parents} == {"FINISHED"}
    again = {p.info.run_name: p for p in parents}["toy-quick"]
    assert (again.info.run_id, again.info.end_time) == (quick.info.run_id, quick.info.end_time)  # not touched
    finished = [(r.data.tags[tracking.PARENT_TAG], r.data.tags[tracking.TRIAL_KEY_TAG], r.info.run_id)
                for r in children if r.info.status == "FINISHED"]
    assert len(finished) == 12 and len({(p, k) for p, k, _ in finished}) == 12  # none lost, none twice
    assert all(kept[(p, k)] == run_id for p, k, run_id in finished if (p, k) in kept)  # finished runs kept


def test_overrides_written_after_only_are_overrides_not_names():
    from mtc.reproduce import parse_args

    args, overrides = parse_args(["spmtc", "--only", "lssmtc", "spmtc_h_l2", "mlflow.tracking_uri=sqlite:////x.db",
                                  "--dry-run", "output_dir=/tmp/o"])
    assert args.only == ["lssmtc", "spmtc_h_l2"] and args.dry_run
    assert sorted(overrides) == ["mlflow.tracking_uri=sqlite:////x.db", "output_dir=/tmp/o"]
