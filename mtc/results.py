"""Reading results back from an MLflow store: the one place that does it, for the sweep's
report, ``mtc.run``, ``mtc.compare`` and ``mtc.reproduce``.

- ``open_experiment``: a client of an existing store (a moved local store is relocated
  first) and the experiment's id;
- ``trial_records``: a sweep's child runs as TrialRecord;
- ``point_summaries``: mean and std per grid point, with the stability across seeds;
- ``chosen_points``: the grid point of every selection of ``mtc.report.SELECTIONS``.

Nothing here starts Ray or writes to the store.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from mtc import preflight, tracking
from mtc.errors import InputError
from mtc.report import SELECTIONS, PointSummary, TrialRecord, best_point, summarize, with_stability


def open_experiment(uri: str, experiment: str):
    """A client of the tracking store and the experiment's id.

    Raises
    ------
    InputError
        The store does not exist or does not answer, or has no such experiment.
    """
    from mtc.relocate import relocate_if_moved

    if uri.startswith("sqlite:///"):
        path = Path(uri[len("sqlite:///"):]).resolve()
        if not path.is_file():
            raise InputError(f"no tracking store at {path}; pass the sweeps' store with --tracking-uri "
                             "sqlite:///<path>.db")
        uri = f"sqlite:///{path}"
    preflight.check_tracking(uri)
    if uri.startswith("sqlite:///"):  # a moved store, laid out as a sweep leaves it (mlartifacts/ beside it)
        for line in relocate_if_moved(uri, Path(uri[len("sqlite:///"):]).parent / "mlartifacts"):
            print(f"the store was moved; {line}")
    client = tracking.client_for(uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        names = ", ".join(e.name for e in client.search_experiments()) or "none"
        raise InputError(f"no experiment {experiment!r} in {uri} (experiments: {names}); choose one with --experiment")
    return client, found.experiment_id


def trial_records(client, experiment_id: str, parent_id: str) -> list[TrialRecord]:
    """Every child run of a sweep's parent run, as read back."""
    return [TrialRecord(run.data.tags.get(tracking.POINT_TAG, "?"), run.data.params.get("seed", "?"), run.info.status,
                        run.data.metrics, run.info.run_id, run.info.artifact_uri)
            for run in tracking.find_runs(client, experiment_id, **{tracking.PARENT_TAG: parent_id})]


def seed_labels(client, records: list[TrialRecord], task_names: list[str]) -> dict[str, list[list[np.ndarray]]]:
    """Every finished trial's labels, by grid point (for the stability criterion)."""
    labels: dict[str, list[list[np.ndarray]]] = {}
    for record in records:
        if record.status == "FINISHED":
            labels.setdefault(record.point, []).append(
                tracking.load_labels(client, record.run_id, record.artifact_uri, task_names))
    return labels


def point_summaries(client, records: list[TrialRecord], task_names: list[str], same_data: bool = True):
    """Mean and std per grid point of the runs' metrics, with the stability across seeds when
    every seed clustered the same data (``same_data``): labels of different draws (a data
    config with ``draw: per_seed``) label different samples, and their ARI means nothing."""
    summaries = summarize(records)
    return with_stability(summaries, seed_labels(client, records, task_names)) if same_data else summaries


def chosen_points(summaries: list[PointSummary]) -> dict[str, PointSummary]:
    """The grid point of every selection whose criterion was logged."""
    chosen = {}
    for selection in SELECTIONS:
        with contextlib.suppress(ValueError, KeyError):
            chosen[selection] = best_point(summaries, selection)
    return chosen
