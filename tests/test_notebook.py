"""The notebook API: examples/notebook.py runs as a script (three real sweeps through
mtc.sweep.run), and mtc.results' frames give the same numbers as mtc.results.compare's
cells.csv, the sweep's grid.csv and the runs themselves; and the script prints what
docs/tutorials/notebook.md shows."""

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import mtc.results
import mtc.sweep
from mtc.errors import InputError
from mtc.results.compare import compare
from test_tutorials import NOTEBOOK_PAGE, line_pattern  # the tutorial pages' checks (tests/ is on sys.path)

pytestmark = pytest.mark.slow  # drivers, Ray or servers: run first (tests/conftest.py)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "notebook.py"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The example run once in a folder of its own: (folder, store URI, its stdout)."""
    folder = tmp_path_factory.mktemp("notebook")
    done = subprocess.run([sys.executable, str(EXAMPLE)], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return folder, f"sqlite:///{folder / 'mlflow.db'}", done.stdout


def test_the_example_runs_three_sweeps_and_prints_their_results(store):
    _, _, stdout = store
    assert "kmeans: 4 trials run, best point by accuracy defaults" in stdout
    assert "snmf: 8 trials run, best point by accuracy update=" in stdout
    assert "a_kmeans" in stdout and "benchmark task" in stdout  # the rank table was printed


def test_the_notebook_page_shows_what_the_example_prints(store):
    _, _, stdout = store
    shown = [line for block in re.findall(r"^```text\n(.*?)^```$", NOTEBOOK_PAGE.read_text(), re.M | re.S)
             for line in block.splitlines()]
    printed = stdout.splitlines()
    assert len(shown) == len(printed), f"the page shows {len(shown)} lines, the example printed:\n{stdout}"
    for want, got in zip(shown, printed):
        assert line_pattern(want, any_number=True).fullmatch(got.strip()), f"shown {want!r}, printed {got!r}"


def test_trials_are_one_row_per_run_with_grid_parameters_and_metrics(store):
    _, uri, _ = store
    trials = mtc.results.trials(uri)
    assert len(trials) == 16 and set(trials.label) == {"kmeans", "a_kmeans", "snmf"}
    snmf = trials[trials.label == "snmf"]
    assert set(snmf["update"]) == {"sqrt", "quarter"} and sorted(snmf.seed) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert trials[trials.label == "kmeans"]["update"].isna().all()  # no grid: no value for another sweep's key
    assert {"acc/mean", "acc/task0", "nmi_max/task2", "objective/final", "n_iter", "fit_seconds"} <= set(trials)
    assert set(trials.data) == {"synthetic"} and (trials.status == "FINISHED").all()
    only = mtc.results.trials(uri, sweep="snmf-synthetic")
    pd.testing.assert_frame_equal(only.dropna(axis=1, how="all"),
                                  snmf.reset_index(drop=True).dropna(axis=1, how="all"))
    sweeps = mtc.results.sweeps(uri)
    assert list(sweeps.sweep) == ["snmf-synthetic", "a_kmeans-synthetic", "kmeans-synthetic"]  # newest first
    with pytest.raises(InputError, match="no sweep nope"):
        mtc.results.trials(uri, sweep="nope")


def test_points_are_the_sweeps_grid_csv_and_the_trials_means(store):
    folder, uri, _ = store
    points = mtc.results.points("snmf-synthetic", uri).set_index("point")
    grid = pd.read_csv(folder / "outputs" / "snmf-synthetic" / "grid.csv").set_index("point")
    assert list(points.index) == list(grid.index) and (points.n_runs == 4).all()
    shared = [column for column in grid.columns if column in points.columns]
    assert len(shared) > 40 and "stability/mean mean" in shared
    np.testing.assert_allclose(points[shared].to_numpy(float), grid[shared].to_numpy(float), rtol=1e-5, atol=1e-9)
    trials = mtc.results.trials(uri, sweep="snmf-synthetic").groupby("point")["acc/mean"]
    np.testing.assert_allclose(points["acc/mean mean"], trials.mean().loc[points.index], rtol=1e-12)
    np.testing.assert_allclose(points["acc/mean std"], trials.std(ddof=1).loc[points.index], rtol=1e-12, atol=1e-15)


def test_chosen_points_and_comparison_equal_what_compare_writes(store, tmp_path):
    _, uri, _ = store
    compare(uri, "mtc", tmp_path, log=False)
    written = pd.read_csv(tmp_path / "cells.csv")
    comparison = mtc.results.comparison(uri)
    pd.testing.assert_frame_equal(pd.read_csv(io.StringIO(comparison.cells.to_csv(index=False))), written)
    chosen = mtc.results.chosen(uri)
    pairs = written[["benchmark", "method", "selection", "point"]].drop_duplicates()
    merged = chosen.merge(pairs, on=["benchmark", "method", "selection"], suffixes=("", "_compare"))
    assert len(merged) == len(chosen) == 15 and (merged.point == merged.point_compare).all()
    at_acc = written[(written.selection == "acc") & (written.metric == "acc") & (written.task == "mean")]
    by_method = chosen[chosen.selection == "acc"].set_index("method")["acc/mean"]
    np.testing.assert_allclose(at_acc.set_index("method")["mean"].loc[by_method.index], by_method, rtol=1e-12)
    assert comparison.rank_table.shape == (3, 3)  # three tasks x three methods


def test_a_sweep_from_python_rejects_an_unknown_method_before_anything_starts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="unknown method 'nope'; available: .*kmeans"):
        mtc.sweep.run("nope", "synthetic")
    assert list(tmp_path.iterdir()) == []
