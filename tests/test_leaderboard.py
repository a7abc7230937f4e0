"""The leaderboard (python -m mtc.reproduce <study> --with METHOD): a method from outside the
package set beside a small study's methods under its protocols, with the benchmark it cannot
run on listed; its scores, ranks and paired tests are compare's cells and statistics on the
same sweeps, Holm-corrected; one MLflow run holds the folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import make_blobs

from mtc import reproduce
from mtc.cli import Composer
from mtc.errors import InputError
from mtc.protocols import added_methods, benchmark_of, plan_leaderboard, protocol_sweeps, with_method
from mtc.results.cells import seed_values
from mtc.results.compare import read_comparison
from mtc.results.reading import open_experiment
from mtc.results.significance import wilcoxon_pair
from mtc.store import tracking

pytestmark = pytest.mark.slow

PLUGIN = Path(__file__).parent / "plugin"
SEARCH_PATH = f"hydra.searchpath=[file://{PLUGIN / 'conf'}]"
STUDY = """# two methods x two benchmarks: synthetic (4 clusters in each of 2 tasks) and uneven (own
# files: 2 clusters in one task, 3 in the other), and an investigation that --with leaves out
sweeps:
  - methods: [kmeans, a_kmeans]
    data: [synthetic]
    overrides: ["++method.grid.max_iter=[100,200]", "sweep.repeats=3", "data.params.n_tasks=2",
                "data.params.samples_per_cluster=12"]
  - methods: [kmeans, a_kmeans]
    data: [files]
    overrides: ["++method.grid.max_iter=[100]", "sweep.repeats=3", "data.params.paths=[{a},{b}]",
                "data.params.label_column=label", "data.name=uneven"]
  - methods: [kmeans]
    data: [synthetic]
    overrides: ["sweep.repeats=2", "sweep.name=kmeans-probe"]
compare:
  - out: compare_small
    benchmarks: [synthetic, uneven]
"""


@pytest.fixture(scope="module")
def small_study(tmp_path_factory):
    folder = tmp_path_factory.mktemp("leaderboard")
    for name, centers in (("a", 2), ("b", 3)):
        X, y = make_blobs(n_samples=30 * centers, centers=centers, n_features=4, random_state=centers)
        pd.DataFrame(X, columns=[f"f{i}" for i in range(4)]).assign(label=y).to_csv(folder / f"{name}.csv", index=False)
    path = folder / "small.yaml"
    path.write_text(STUDY.format(a=folder / "a.csv", b=folder / "b.csv"))
    store = [f"mlflow.tracking_uri=sqlite:///{folder / 'mlflow.db'}", f"mlflow.artifact_root={folder / 'art'}",
             f"output_dir={folder / 'outputs'}", "ray.num_cpus=1"]
    return folder, path, store


def command(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGIN), *filter(None, [os.environ.get("PYTHONPATH")])])}
    return subprocess.run([sys.executable, "-m", "mtc.reproduce", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=900)


def test_the_protocol_of_a_benchmark_is_the_papers_sweep_with_the_method_replaced(small_study, monkeypatch):
    folder, path, store = small_study
    monkeypatch.syspath_prepend(str(PLUGIN))
    study = reproduce.load_study(str(path))
    found = protocol_sweeps(study, [SEARCH_PATH, *store], Composer())
    assert sorted(benchmark_of(run) for run in found.values()) == ["synthetic", "synthetic", "uneven", "uneven"]
    sweep = next(s for s in found if s[0] == "method=kmeans" and "data=synthetic" in s)
    assert with_method(sweep, "toy") == ("method=toy", "data=synthetic", "sweep.repeats=3", "data.params.n_tasks=2",
                                         "data.params.samples_per_cluster=12")  # its own grid, the paper's seeds
    plan = plan_leaderboard(str(path), ["toy_shared"], [SEARCH_PATH, *store], [])
    assert [(b.paper, b.benchmarks) for b in plan.boards] == [("small", {"synthetic": ("a_kmeans", "kmeans")})]
    [(where, why)] = plan.not_run.items()
    assert where == "toy_shared on small uneven"
    assert "SharedColumnsToy needs the same number of clusters in every task" in why and "[2, 3]" in why
    assert sorted(p.name for p in plan.plans) == ["a_kmeans-synthetic", "kmeans-synthetic", "toy_shared-synthetic"]
    assert plan_leaderboard(str(path), ["toy"], [SEARCH_PATH, *store], ["uneven"]).boards[0].benchmarks == {
        "uneven": ("a_kmeans", "kmeans")}  # --only keeps a benchmark
    with pytest.raises(InputError, match="no benchmark of its compare folders to run toy_shared on with --only uneven"):
        plan_leaderboard(str(path), ["toy_shared"], [SEARCH_PATH, *store], ["uneven"])
    with pytest.raises(InputError, match="^--with: no method config 'nosuch'; known: a_asi, "):
        plan_leaderboard(str(path), ["nosuch"], [SEARCH_PATH, *store], [])
    with pytest.raises(InputError, match="--with needs a method config name"):
        added_methods(" , ")
    assert "kmeans" in added_methods("all") and "toy" not in added_methods("all")


def test_a_method_outside_the_package_against_a_small_study(small_study, monkeypatch):
    folder, path, store = small_study
    done = command(folder, str(path), "--with", "toy_shared", SEARCH_PATH, *store)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "cannot run: toy_shared on small uneven: sweep toy_shared-uneven:" in done.stdout
    board = folder / "leaderboard_small_toy_shared"
    assert "leaderboard: leaderboard_small_toy_shared/leaderboard.md (MLflow run " in done.stdout

    scores = pd.read_csv(board / "leaderboard.csv")
    assert sorted(zip(scores.benchmark, scores.method, scores.metric)) == [
        ("synthetic", "toy_shared", "acc"), ("synthetic", "toy_shared", "nmi_max")]
    client, experiment_id = open_experiment(f"sqlite:///{folder / 'mlflow.db'}", "mtc")
    comparison = read_comparison(client, experiment_id, "acc", ["synthetic"], ["kmeans", "a_kmeans", "toy_shared"])
    cells = comparison.cells[(comparison.cells.selection == "acc") & (comparison.cells.task == "mean")]
    acc = cells[cells.metric == "acc"].set_index("method")
    mine = scores[scores.metric == "acc"].iloc[0]
    assert mine["mean"] == acc.loc["toy_shared", "mean"] and mine["std"] == acc.loc["toy_shared", "std"]
    assert mine.point == acc.loc["toy_shared", "point"] and mine.n == 3
    others = acc.loc[["kmeans", "a_kmeans"], "mean"]
    assert mine.rank_ours == 1 + (others > mine["mean"]).sum() and mine.of_ours == 3
    assert np.isnan(mine.rank_published)  # no published numbers for this benchmark

    tests = pd.read_csv(board / "tests.csv")
    values = seed_values(comparison.sweeps, "acc")
    values = values[values.task != "mean"].set_index(["task", "seed"])  # pairs: every task x seed
    acc_tests = tests[tests.metric == "acc"].set_index("other")
    assert set(acc_tests.index) == {"kmeans", "a_kmeans"}
    expected = {other: wilcoxon_pair(values[values.method == "toy_shared"].value, values[values.method == other].value)
                for other in ("kmeans", "a_kmeans")}
    for other, test in expected.items():
        assert acc_tests.loc[other, "n_pairs"] == test["n_pairs"] == 6  # 2 tasks x 3 seeds
        assert acc_tests.loc[other, "p"] == pytest.approx(test["p"], nan_ok=True)
    p = pd.Series({other: test["p"] for other, test in expected.items()}).dropna().sort_values()
    holm = np.minimum(1, np.maximum.accumulate(p.to_numpy() * (len(p) - np.arange(len(p)))))  # Holm's step-down
    for other, adjusted in zip(p.index, holm):
        assert acc_tests.loc[other, "p_holm"] == pytest.approx(adjusted)

    friedman = pd.read_csv(board / "friedman_small.csv")
    assert set(friedman.method) == {"kmeans", "a_kmeans", "toy_shared"} and (friedman.n_cells == 2).all()
    not_run = pd.read_csv(board / "not_run.csv")
    assert list(not_run["where"]) == ["toy_shared on small uneven"]
    page = (board / "leaderboard.md").read_text()
    assert "Read from the SQLite store ../mlflow.db." in page and str(folder) not in page
    assert "| synthetic | toy_shared |" in page and "## Benchmarks a method cannot run on" in page
    assert "## The machines that fitted the trials\n\nThe trials read were fitted on one machine;" in page
    assert re.search(rf"^- `{re.escape(tracking.machine_description())}`: \d+ trials of \d+ sweeps$", page, re.M)
    assert (board / "standing.png").stat().st_size > 10_000
    [run] = [r for r in client.search_runs([experiment_id]) if r.data.tags.get("mtc.kind") == "leaderboard"]
    assert run.info.status == "FINISHED" and run.data.params == {"study": "small", "methods": "toy_shared"}
    assert {a.path for a in client.list_artifacts(run.info.run_id)} >= {"leaderboard.md", "leaderboard.csv",
                                                                       "tests.csv", "standing.png"}

    dry = command(folder, str(path), "--with", "toy_shared", "--dry-run", SEARCH_PATH, *store)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert re.search(r"^toy_shared-synthetic +6 trials  finished$", dry.stdout, re.M), dry.stdout
    assert "cannot run: toy_shared on small uneven" in dry.stdout
    again = command(folder, str(path), "--with", "toy_shared", SEARCH_PATH, *store)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "3 finished, 0 to run" in again.stdout  # nothing run twice
    assert pd.read_csv(board / "leaderboard.csv").equals(scores)

    monkeypatch.syspath_prepend(str(PLUGIN))  # the dry run's estimate: the fit times the store holds
    plans = plan_leaderboard(str(path), ["toy_shared"], [SEARCH_PATH, *store], []).plans
    stored = reproduce.stored_fit_seconds(plans)
    fits = [r.data.metrics["fit_seconds"] for r in client.search_runs([experiment_id], "tags.`mtc.method` = 'toy_shared'")
            if "fit_seconds" in r.data.metrics]
    assert len(fits) == 6 and stored["toy_shared-synthetic"] == pytest.approx((sum(fits) / 6, 6))
