"""What a person sees in MLflow's UI after a sweep, read as the UI reads it: through the REST
API of a real ``mlflow server`` on the sweep's store (run names, params, metric names, the
labels' cluster names, the parent's summary table), through the links the sweep prints (the
view the trials link opens, replayed as the UI's own search request) and, where Chromium is
installed, through the runs page itself as a headless browser renders it."""

import contextlib
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import replace
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest

from mtc.cli import compose_config
from mtc.config import Trial, settings
from mtc.metrics import METRIC_NAMES, UNMOVED
from mtc.stack.loopback import free_port, wait_for_port
from mtc.store import run_writer, tracking
from mtc.sweep.driver import report_done, run_sweep
from mtc.trial import TrialOutcome

pytestmark = pytest.mark.slow

GRID = {"alpha": [0.5, 2.0], "lambda_": [0.25, 4.0]}  # two keys; lambda_ was shown as "l=" before
REPEATS = 2
TASKS = ["task0", "task1"]
SAMPLES_PER_TASK = 4 * 5  # the synthetic data's 4 clusters per task, 5 samples each


class Server:
    """A running ``mlflow server``: GET and POST on its REST API as the UI does."""

    def __init__(self, base: str):
        self.base = base

    def get(self, endpoint: str, **query):
        url = f"{self.base}{endpoint}?" + "&".join(f"{key}={value}" for key, value in query.items())
        with urllib.request.urlopen(url, timeout=30) as response:
            body = response.read()
        return json.loads(body) if endpoint.startswith("/api/") else body.decode()

    def search(self, experiment_id: str, filter_string: str, order_by: list[str] | None = None) -> list[dict]:
        request = urllib.request.Request(
            f"{self.base}/api/2.0/mlflow/runs/search", method="POST", headers={"Content-Type": "application/json"},
            data=json.dumps({"experiment_ids": [experiment_id], "filter": filter_string, "max_results": 1000,
                             "order_by": order_by or []}).encode())
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read()).get("runs", [])


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """One small MTCMRL sweep (2 x 2 grid, 2 seeds, readable files on), what it printed, and one
    ``mlflow server`` on its store for the whole module, stopped at the end."""
    tmp = tmp_path_factory.mktemp("ui")
    grid = [f"method.grid.{key}=[{','.join(map(str, values))}]" for key, values in GRID.items()]
    cfg = compose_config([
        f"output_dir={tmp / 'outputs'}", f"mlflow.tracking_uri=sqlite:///{tmp / 'mlflow.db'}",
        f"mlflow.artifact_root={tmp / 'artifacts'}", "mlflow.readable_trial_files=true", "ray.num_cpus=1",
        "sweep.verbose=0", "method=mtcmrl", *grid, "++method.params.max_iter=20", f"sweep.repeats={REPEATS}",
        "data=synthetic", "data.params.n_tasks=2", "data.params.samples_per_cluster=5"])
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result = run_sweep(settings(cfg), full_report=False)  # as mtc.sweep.run from a notebook
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", result.tracking_uri,
                               "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                              env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    try:
        wait_for_port(port, 120)
        yield result, printed.getvalue(), Server(f"http://127.0.0.1:{port}")
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)


def child_runs(result, server: Server) -> list[dict]:
    return server.search(result.experiment_id, f"tags.`{tracking.PARENT_TAG}` = '{result.parent_run_id}'")


def params_of(run: dict) -> dict[str, str]:
    return {p["key"]: p["value"] for p in run["data"].get("params", [])}


def metrics_of(run: dict) -> set[str]:
    return {m["key"] for m in run["data"].get("metrics", [])}


def printed_links(text: str) -> dict[str, str]:
    """The links the sweep printed, by their label ("MLflow runs", ...)."""
    return {label: url for label, url in re.findall(r"^(MLflow [^:]+): (http\S+)", text, re.MULTILINE)}


def test_child_run_names_use_the_params_own_names_and_values(sweep):
    result, _, server = sweep
    runs = child_runs(result, server)
    assert len(runs) == 4 * REPEATS and all(run["info"]["status"] == "FINISHED" for run in runs)
    for run in runs:
        name, params = run["info"]["run_name"], params_of(run)
        *pairs, seed = name.split(" ")
        assert seed == f"s{params['seed']}"
        point = dict(pair.split("=", 1) for pair in pairs)
        assert sorted(point) == sorted(GRID)  # every key whole, none cut to a prefix ("l=")
        assert all(float(value) == float(params[key]) for key, value in point.items())
        assert all(value == value.removesuffix(".0") for value in point.values())  # 2.0 reads "2"
    assert {run["info"]["run_name"] for run in runs} >= {"alpha=0.5 lambda_=0.25 s0", "alpha=2 lambda_=4 s1"}
    # the name reads as the filter it stands for: params.lambda_ matches the runs of that value
    assert len(server.search(result.experiment_id, "params.lambda_ = '4.0'")) == 2 * REPEATS


def test_the_parent_logs_the_seeds_run_and_no_single_seed(sweep):
    result, _, server = sweep
    params = params_of(server.get("/api/2.0/mlflow/runs/get", run_id=result.parent_run_id)["run"])
    assert "seed" not in params
    first, last = map(int, params["seeds"].split("-"))
    assert list(range(first, last + 1)) == list(range(REPEATS))
    assert {int(params_of(run)["seed"]) for run in child_runs(result, server)} == set(range(REPEATS))
    assert params["sweep.repeats"] == str(REPEATS)


def test_children_log_sample_counts_as_params_and_the_documented_metrics(sweep):
    result, _, server = sweep
    per_task = {f"{metric}/{task}" for metric in (*METRIC_NAMES, "silhouette", "balance") for task in [*TASKS, "mean"]}
    documented = per_task | {"n_iter", "converged", "fit_seconds", "objective/final", "objective/relative",
                             tracking.OBJECTIVE_TRACE}  # docs/architecture.md; MTCMRL's record has no scalars
    documented |= {UNMOVED, *(f"{UNMOVED}/{task}" for task in TASKS)}  # docs/usage.md: it starts from k-means labels
    steps = {"step_seconds/mtcmrl_preparation", "step_seconds/kmeans_labels"}  # computed, not read from the cache
    timed = set()
    for summary in child_runs(result, server):
        run = server.get("/api/2.0/mlflow/runs/get", run_id=summary["info"]["run_id"])["run"]
        # no n_samples/<task> metric (no sample-count charts); the degenerate tasks' counts, where logged
        assert documented <= metrics_of(run) <= documented | {f"degenerate/{task}" for task in TASKS} | {
            tracking.DEGENERATE_TASKS} | steps
        timed |= metrics_of(run) & steps
        params = params_of(run)
        assert {params[f"n_samples.{task}"] for task in TASKS} == {str(SAMPLES_PER_TASK)}
    assert timed == steps  # each worker's first fit computes MTCMRL's preparation, each seed its k-means
    history = server.get("/api/2.0/mlflow/metrics/get-history", run_id=summary["info"]["run_id"],
                         metric_key=tracking.OBJECTIVE_TRACE)["metrics"]
    assert [m["step"] for m in history] == sorted(m["step"] for m in history) and history[0]["step"] == 0


def stored_view(result, server: Server, key: str) -> dict:
    """The runs page's view ``key`` (a sweep's trials view: its parent run's id), as the page
    reads it: the experiment's tag ``mlflow.sharedViewState.<key>``, parsed."""
    experiment = server.get("/api/2.0/mlflow/experiments/get", experiment_id=result.experiment_id)["experiment"]
    tags = {tag["key"]: tag["value"] for tag in experiment["tags"]}
    return json.loads(tags[f"mlflow.sharedViewState.{key}"])


def test_verbose_0_prints_the_start_line_and_one_result_line(sweep):
    result, printed, _ = sweep
    best = result.best["acc"]
    assert printed.splitlines() == [
        f"sweep mtcmrl-synthetic: {4 * REPEATS} trials (0 already finished), MLflow parent run {result.parent_run_id}",
        f"sweep mtcmrl-synthetic: {4 * REPEATS} trials, best acc/mean {best.mean['acc/mean']:.4f} at {best.point}; "
        f"report {result.output_dir}/report.md; MLflow trials: "
        f"{tracking.trials_link(result.tracking_uri, result.experiment_id, result.parent_run_id)} after: mlflow ui "
        f"--backend-store-uri {result.tracking_uri}"]


def test_the_printed_links_open_the_sweeps_children_flat_best_first_with_the_metric_shown(sweep, capsys):
    result, _, server = sweep
    report_done(result, full=True)  # the report and the three links
    printed = capsys.readouterr().out
    assert result.markdown in printed
    links = printed_links(printed)
    runs_page = f"/experiments/{result.experiment_id}/runs"
    # the sweeps view: the parent run alone, a row per sweep, best score first (its logged score, the best point's mean)
    assert urlsplit(links["MLflow runs, a row per sweep, best score first"]).fragment == \
        f"{runs_page}?viewStateShareKey=sweeps&workflowType=machine_learning"
    sweeps = stored_view(result, server, "sweeps")
    [parent] = server.search(result.experiment_id, sweeps["searchFilter"], [f"{sweeps['orderByKey']} DESC"])
    assert parent["info"]["run_id"] == result.parent_run_id
    assert {m["key"]: m["value"] for m in parent["data"]["metrics"]}["score"] == result.best["acc"].mean["acc/mean"]
    assert urlsplit(links["MLflow parent run"]).fragment.startswith(f"{runs_page}/{result.parent_run_id}?")
    (label, url), = ((label, url) for label, url in links.items() if label.startswith("MLflow trials"))
    assert "acc/mean" in label
    route, _, query = urlsplit(url).fragment.partition("?")  # the UI's hash route and its query parameters
    assert route == runs_page
    # the share key alone: with any search parameter in the URL, the page ignores the stored view
    assert parse_qs(query, strict_parsing=True) == {"viewStateShareKey": [result.parent_run_id],
                                                    "workflowType": ["machine_learning"]}
    view = stored_view(result, server, result.parent_run_id)
    assert view["searchFilter"] == f"tags.`mlflow.parentRunId` = '{result.parent_run_id}'"
    assert (view["orderByKey"], view["orderByAsc"]) == ("metrics.`acc/mean`", False)
    # the sort metric first among the shown columns, then the other means (degenerate_tasks where the trials
    # log it) and the grid's and seed's params, in the run names' order
    logged = metrics_of(child_runs(result, server)[0])
    assert view["selectedColumns"] == [
        *(f"metrics.`{key}`" for key in ("acc/mean", "nmi/mean", "ari/mean", "silhouette/mean", "objective/final",
                                         tracking.DEGENERATE_TASKS, "n_iter", "fit_seconds") if key in logged),
        *(f"params.`{key}`" for key in sorted(GRID)), "params.`seed`"]
    assert view["columnOrder"] == ["duration", *view["selectedColumns"]]
    # the runs page's own request: filter = searchFilter, order_by = orderByKey + " DESC"
    shown = server.search(result.experiment_id, view["searchFilter"], [f"{view['orderByKey']} DESC"])
    assert {run["info"]["run_id"] for run in shown} == {run["info"]["run_id"] for run in child_runs(result, server)}
    accuracy = [next(m["value"] for m in run["data"]["metrics"] if m["key"] == "acc/mean") for run in shown]
    assert accuracy == sorted(accuracy, reverse=True)
    for column in view["selectedColumns"]:  # every shown column has a value in every run
        kind, name = column.split(".", 1)
        assert all(name.strip("`") in {item["key"] for item in run["data"][kind]} for run in shown)


def test_without_accuracy_the_trials_link_sorts_by_the_silhouette(sweep, capsys):
    result, _, _ = sweep
    report_done(replace(result, best={key: point for key, point in result.best.items() if key != "acc"}), full=True)
    label = next(label for label in printed_links(capsys.readouterr().out) if label.startswith("MLflow trials"))
    assert "best silhouette/mean first" in label
    view = json.loads(tracking.trials_view("p", "silhouette/mean", ["metrics.`silhouette/mean`"]))
    assert view["orderByKey"] == "metrics.`silhouette/mean`" and view["selectedColumns"][0] == view["orderByKey"]


def rendered_view(url: str, server: Server) -> tuple[str, list[str]]:
    """A printed link's runs page as Chromium renders it (on ``server``, not the link's default
    address): its DOM and the columns shown after Run Name and Created, in order (the grid
    renders the columns that fit in the window)."""
    url = url.replace("http://127.0.0.1:5000", server.base)
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(["chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
                              f"--user-data-dir={profile}", "--window-size=1600,900", "--virtual-time-budget=20000",
                              "--dump-dom", url], capture_output=True, text=True, timeout=180).stdout
    cells = [dict(re.findall(r'(aria-colindex|col-id)="([^"]*)"', tag)) for tag in re.findall(r"<div [^>]*>", dom)]
    header = {int(cell["aria-colindex"]): cell["col-id"] for cell in cells if {"aria-colindex", "col-id"} <= set(cell)}
    shown = [header[index] for index in sorted(header)]
    return dom, [column for column in shown if column.startswith(("duration", "metrics.", "tags."))]


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Chromium (apt-get install chromium)")
def test_the_trials_link_shows_the_sorted_metric_without_a_click_in_a_browser(sweep):
    """The trials link's page: the shared view's notice, the sweep's runs only, and the metric
    columns in the view's order, the sort metric first."""
    result, _, server = sweep
    dom, shown = rendered_view(tracking.trials_link(result.tracking_uri, result.experiment_id, result.parent_run_id),
                               server)
    assert "You're viewing a shared view" in dom and f"<strong>{4 * REPEATS}</strong> matching runs" in dom
    assert shown[:4] == ["duration", "metrics.`acc/mean`", "metrics.`nmi/mean`", "metrics.`ari/mean`"]


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Chromium (apt-get install chromium)")
def test_the_runs_link_shows_each_sweeps_score_without_a_click_in_a_browser(sweep):
    """The runs link's page: the sweep's parent run alone, with its score, the score's metric
    and what it ran as the first columns."""
    result, _, server = sweep
    dom, shown = rendered_view(tracking.view_link(result.tracking_uri, result.experiment_id, tracking.SWEEPS_VIEW),
                               server)
    assert "You're viewing a shared view" in dom and "<strong>1</strong> matching run<" in dom  # one sweep
    assert shown[:4] == ["duration", "metrics.`score`", "tags.`mtc.score`", "tags.`mtc.method`"]


def test_the_parent_shows_its_chosen_points_as_a_table(sweep):
    result, _, server = sweep
    parent = server.get("/api/2.0/mlflow/runs/get", run_id=result.parent_run_id)["run"]
    tags = {tag["key"]: tag["value"] for tag in parent["data"]["tags"]}
    assert {"path": "summary.json", "type": "table"} in json.loads(tags["mlflow.loggedArtifacts"])
    table = json.loads(server.get("/get-artifact", path="summary.json", run_uuid=result.parent_run_id))
    assert table["columns"] == ["metric", *(f"best by {selection}" for selection in result.best)]
    rows = {row[0]: row[1:] for row in table["data"]}
    assert rows["point"] == [summary.point for summary in result.best.values()]
    assert rows["finished runs"] == [str(REPEATS)] * len(result.best)
    acc = result.best["acc"]
    assert rows["acc/mean"][0] == f"{acc.mean['acc/mean']:.4g} ± {acc.std['acc/mean']:.2g}"
    assert {"nmi/mean", "silhouette/mean", "objective/final", "n_iter"} <= set(rows)
    # the best points' means stay parent metrics too: mtc.results reads them (mtc.results.sweeps)
    assert {m["key"]: m["value"] for m in parent["data"]["metrics"]}["best_by_acc/acc/mean"] == acc.mean["acc/mean"]


def outcome_with(metrics: dict[str, float]) -> TrialOutcome:
    """A handcrafted fit of one task of three samples."""
    return TrialOutcome(metrics, np.array([2.0, 1.0]), {}, [np.array([0, 0, 1])], {}, True, {"t0": 3}, [["0", "1"]])


@pytest.mark.parametrize("path", ["batch", "log_trial"])
def test_a_run_with_a_degenerate_task_is_tagged_so(tmp_path, path):
    client = tracking.client_for(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = tracking.ensure_experiment(client, "t", str(tmp_path / "artifacts"))
    parent = client.create_run(experiment).info.run_id
    tags = {}
    for name, metrics in {"two": {"acc/mean": 0.5, tracking.DEGENERATE_TASKS: 2.0},
                          "none": {"acc/mean": 0.9, tracking.DEGENERATE_TASKS: 0.0},
                          "unsaid": {"acc/mean": 0.9}}.items():
        outcome, config = outcome_with(metrics), {"seed": 0, "method": "m"}
        if path == "batch":  # a sweep's runs (run_writer.write_runs)
            record = tracking.trial_record(parent, Trial({"n": name}, 0), {}, 0, outcome, config, ["t0"])
            [run_id] = run_writer.write_runs(client, experiment, parent, [record])
        else:  # python -m mtc.run's run
            run = client.create_run(experiment)
            run_id = run.info.run_id
            tracking.log_trial(client, run_id, run.info.artifact_uri, outcome, config, ["t0"])
        tags[name] = client.get_run(run_id).data.tags.get("mtc.degenerate")
    assert tags == {"two": "true", "none": None, "unsaid": None}
    found = client.search_runs([experiment], "tags.`mtc.degenerate` = 'true'")
    assert [run.data.metrics[tracking.DEGENERATE_TASKS] for run in found] == [2.0]


def test_labels_csv_names_each_cluster_as_the_matrix_csvs_do(sweep):
    result, _, server = sweep
    run_id = child_runs(result, server)[0]["info"]["run_id"]
    rows = list(csv.DictReader(io.StringIO(server.get("/get-artifact", path="labels.csv", run_uuid=run_id))))
    assert list(rows[0]) == ["task", "sample", "label", "cluster_name"] and len(rows) == 2 * SAMPLES_PER_TASK
    g_rows = {task: [line.split(",")[0] for line in server.get(
        "/get-artifact", path=f"G_{task}__{other}.csv", run_uuid=run_id).splitlines()[1:]]
        for task, other in (("task0", "task1"), ("task1", "task0"))}
    for task in TASKS:
        names = {}
        for row in rows:
            if row["task"] == task:
                assert names.setdefault(row["label"], row["cluster_name"]) == row["cluster_name"]  # one name an id
        assert len(set(names.values())) == len(names) and set(names.values()) <= set(g_rows[task])


def test_the_tasks_of_old_and_new_runs_are_found_from_their_metrics():
    """Stores written before the silhouette named their tasks by the n_samples/<task> metrics."""
    from mtc.results.frames import task_names
    from mtc.results.report import TrialRecord

    new = TrialRecord("a=1", "0", "FINISHED", {"silhouette/t1": 0.5, "silhouette/t0": 0.4, "silhouette/mean": 0.45}, "r")
    old = TrialRecord("a=1", "0", "FINISHED", {"n_samples/t0": 20.0, "n_samples/t1": 30.0, "acc/t0": 1.0}, "r")
    assert task_names([new]) == task_names([old]) == ["t0", "t1"]
