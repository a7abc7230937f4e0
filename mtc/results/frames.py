"""A store's results as pandas frames, for a notebook (exported by ``mtc.results``).

- ``sweeps``: one row per sweep (its parent run);
- ``trials``: one row per trial: sweep, label, method, data, the grid point's parameters
  under their own names, seed, and every metric under its MLflow name (``acc/mean``);
- ``points``: mean and std of every metric per grid point of one sweep (its ``grid.csv``);
- ``chosen``: the grid point of each selection of every finished sweep, as
  ``mtc.results.compare`` chooses them;
- ``comparison``: ``mtc.results.compare``'s tables (cells, Wilcoxon, Friedman, Nemenyi,
  ranks, size curves) in memory, nothing written.

Each takes the store's URI (default: ``sqlite:///mlflow.db`` in the working folder, where
``python -m mtc.sweep`` writes) and the experiment (default ``mtc``). Nothing here starts Ray
or writes to the store (but for pointing a moved local store at its artifacts again,
mtc.store.relocate): a SQLite store is opened read-only, and a file or database that is not an
MLflow store is refused (``mtc.errors.InputError``) before MLflow's client, which would write
its tables into it, opens it (``mtc.results.reading.open_experiment``).
"""

from __future__ import annotations

import warnings
from collections import Counter

import pandas as pd

from mtc.errors import InputError
from mtc.metrics import UNMOVED
from mtc.results.compare import Comparison, check_criterion, check_metric, parse_point, read_comparison
from mtc.results.reading import (
    benchmark_name,
    finished_sweeps,
    open_experiment,
    point_summaries,
    sweep_label,
    trial_records,
)
from mtc.results.report import DEGENERATE
from mtc.store import tracking

STORE = "sqlite:///mlflow.db"  # python -m mtc.sweep's default store (conf/config.yaml)
EXPERIMENT = "mtc"


def is_parent(run) -> bool:
    return tracking.SWEEP_KEY_TAG in run.data.tags and tracking.PARENT_TAG not in run.data.tags


def sweep_row(run) -> dict:
    """A parent run as one row: names, status, time and its summary metrics."""
    return {"sweep": run.info.run_name, "label": sweep_label(run), "method": run.data.tags.get("mtc.method"),
            "data": run.data.tags.get("mtc.data"), "benchmark": benchmark_name(run), "status": run.info.status,
            "start_time": pd.to_datetime(run.info.start_time, unit="ms"), "run_id": run.info.run_id,
            **run.data.metrics}


def numeric_columns(frame: pd.DataFrame, columns) -> pd.DataFrame:
    """The given text columns as numbers where every value is one."""
    for column in columns:
        numbers = pd.to_numeric(frame[column], errors="coerce")
        if numbers.notna().all():
            frame[column] = numbers
    return frame


def sweeps(tracking_uri: str = STORE, experiment: str = EXPERIMENT) -> pd.DataFrame:
    """One row per sweep of the experiment, newest first: ``sweep`` (its name), ``label``,
    ``method``, ``data``, ``benchmark``, ``status``, ``start_time``, ``run_id`` and the parent
    run's metrics (``best_by_acc/acc/mean``, ``failed_trials``, ...)."""
    client, experiment_id = open_experiment(tracking_uri, experiment, read_only=True)
    rows = [sweep_row(run) for run in tracking.search_all(client, experiment_id) if is_parent(run)]
    if not rows:
        raise InputError(f"no sweep in experiment {experiment!r} of {tracking_uri}; run one with python -m mtc.sweep")
    return pd.DataFrame(rows).sort_values("start_time", ascending=False, ignore_index=True)


def trials(tracking_uri: str = STORE, experiment: str = EXPERIMENT, sweep: str | list[str] | None = None,
           finished_only: bool = True) -> pd.DataFrame:
    """One row per trial of the experiment's sweeps.

    Parameters
    ----------
    tracking_uri, experiment : str
        The store and experiment.
    sweep : str or list of str, optional
        Only these sweeps, by name or parent run id (all when not given).
    finished_only : bool
        Only finished trials (failed and interrupted ones have no scores); the others are
        counted in a warning (TrialsLeftOutWarning) and in ``frame.attrs["left_out"]``
        (status -> count), never dropped silently.

    Returns
    -------
    pandas.DataFrame
        ``sweep``, ``label``, ``method``, ``data``, ``benchmark``, ``point``, the grid point's
        parameters under their own names (numbers where every value is one), ``seed``,
        ``status``, ``outcome`` (``answer``; ``degenerate``: a task in fewer clusters than asked;
        ``never moved``: its labels are its k-means start's; else the status in lower case),
        ``run_id``, ``parent_run_id``, then every metric under its MLflow name.
    """
    client, experiment_id = open_experiment(tracking_uri, experiment, read_only=True)
    runs = tracking.search_all(client, experiment_id)
    parents = {run.info.run_id: run for run in runs if is_parent(run)}
    wanted = {sweep} if isinstance(sweep, str) else set(sweep or [])
    unknown = wanted - set(parents) - {run.info.run_name for run in parents.values()}
    if unknown:
        raise InputError(f"no sweep {', '.join(sorted(unknown))} in experiment {experiment!r} of {tracking_uri}")
    rows, grid, left_out = [], {}, Counter()
    for run in runs:
        parent = parents.get(run.data.tags.get(tracking.PARENT_TAG))
        if parent is None or (wanted and not wanted & {parent.info.run_id, parent.info.run_name}):
            continue
        if finished_only and run.info.status != "FINISHED":
            left_out[run.info.status] += 1
            continue
        point = run.data.tags.get(tracking.POINT_TAG, "defaults")
        values = parse_point(point)
        grid.update(dict.fromkeys(values))
        rows.append({"sweep": parent.info.run_name, "label": sweep_label(parent),
                     "method": run.data.params.get("method", parent.data.tags.get("mtc.method")),
                     "data": run.data.params.get("data.name", parent.data.tags.get("mtc.data")),
                     "benchmark": benchmark_name(parent), "point": point, **values,
                     "seed": int(run.data.params.get("seed", -1)), "status": run.info.status,
                     "outcome": trial_outcome(run.info.status, run.data.metrics), "run_id": run.info.run_id, "parent_run_id": parent.info.run_id, **run.data.metrics})
    if left_out:
        warnings.warn(f"{sum(left_out.values())} trials not FINISHED left out ("
                      + ", ".join(f"{status} {count}" for status, count in sorted(left_out.items()))
                      + "): trials(..., finished_only=False) lists them", TrialsLeftOutWarning, stacklevel=2)
    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame = numeric_columns(frame, grid).sort_values(["sweep", "point", "seed"], ignore_index=True)
    frame.attrs["left_out"] = dict(left_out)
    return frame


class TrialsLeftOutWarning(UserWarning):
    """trials() left out trials that did not finish (finished_only): how many, by status."""


def trial_outcome(status: str, metrics: dict) -> str:
    """What a trial gave: ``answer``, ``degenerate`` (a task in fewer clusters than asked),
    ``never moved`` (every task's labels are its k-means start's), or, unfinished, its status."""
    if status != "FINISHED":
        return status.lower()
    return "degenerate" if metrics.get(DEGENERATE, 0) > 0 else "never moved" if metrics.get(UNMOVED, 0) > 0 else "answer"


def find_parent(client, experiment_id: str, sweep: str):
    """The parent run of a sweep named ``sweep`` (the newest if several) or with that run id."""
    found = [run for run in tracking.search_all(client, experiment_id)
             if is_parent(run) and sweep in (run.info.run_id, run.info.run_name)]
    if not found:
        raise InputError(f"no sweep {sweep!r} in the store")
    return max(found, key=lambda run: run.info.start_time)


# Per-task metrics that name a sweep's tasks: the silhouette, which every run logs (with or
# without labels), and the sample counts of runs logged before the silhouette existed (then
# metrics; now the params n_samples.<task>).
TASK_METRICS = ("silhouette/", "n_samples/")


def task_names(records: list) -> list[str]:
    """The tasks of a sweep's trial records, from their per-task metric keys (TASK_METRICS)."""
    return sorted({key.split("/", 1)[1] for record in records for key in record.metrics
                   if key.startswith(TASK_METRICS)} - {"mean"})


def points(sweep: str, tracking_uri: str = STORE, experiment: str = EXPERIMENT) -> pd.DataFrame:
    """Every grid point of one sweep (by name or parent run id), as its report's ``grid.csv``:
    ``point``, ``n_runs``, ``n_failed``, ``n_degenerate``, ``n_unmoved``, and ``<metric> mean`` / ``<metric> std``
    of every metric, with ``stability/mean`` when every seed clustered the same data."""
    client, experiment_id = open_experiment(tracking_uri, experiment, read_only=True)
    parent = find_parent(client, experiment_id, sweep)
    records = trial_records(client, experiment_id, parent.info.run_id)
    tasks = task_names(records)
    same_data = parent.data.tags.get("mtc.data_draws", "1") == "1"
    rows = [{"point": s.point, "n_runs": s.n_runs, "n_failed": s.n_failed, "n_degenerate": s.n_degenerate,
             "n_unmoved": s.n_unmoved, **{f"{key} {stat}": getattr(s, stat)[key] for key in sorted(s.mean) for stat in ("mean", "std")}}
            for s in point_summaries(client, records, tasks, same_data)]
    return pd.DataFrame(rows)


def chosen(tracking_uri: str = STORE, experiment: str = EXPERIMENT, benchmarks: list[str] | None = None,
           methods: list[str] | None = None) -> pd.DataFrame:
    """The grid point of each selection (``acc``, when the data has labels, and the label-free
    ones of ``mtc.results.report.SELECTIONS``) of the newest finished sweep of every benchmark
    and method, as ``mtc.results.compare`` chooses them: ``benchmark``, ``method``,
    ``selection``, ``point``, ``n_runs``, then the mean of every metric at that point."""
    client, experiment_id = open_experiment(tracking_uri, experiment, read_only=True)
    found, _ = finished_sweeps(client, experiment_id, benchmarks, methods, criterion=None)
    rows = [{"benchmark": sweep.benchmark, "method": sweep.method, "selection": selection, "point": summary.point,
             "n_runs": summary.n_runs, **summary.mean}
            for sweep in found for selection, summary in sweep.points.items()]
    return pd.DataFrame(rows)


def comparison(tracking_uri: str = STORE, experiment: str = EXPERIMENT, metric: str = "acc",
               benchmarks: list[str] | None = None, methods: list[str] | None = None,
               criterion: str | None = None) -> Comparison:
    """``mtc.results.compare``'s tables for ``metric``, in memory: ``.cells`` (``cells.csv``),
    ``.wilcoxon``, ``.friedman``, ``.nemenyi``, ``.rank_table``, ``.size_curves``, ``.notes``,
    and the ``.criterion`` that chose the points (``criterion`` None: accuracy, or silhouette
    when the data has no labels); ``<data>@<n1>+<n2>`` in ``benchmarks`` pools sample sizes,
    as on the command line."""
    check_metric(metric)
    check_criterion(criterion)
    client, experiment_id = open_experiment(tracking_uri, experiment, read_only=True)
    return read_comparison(client, experiment_id, metric, benchmarks, methods, criterion)
