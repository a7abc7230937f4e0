"""What a tracking server holds of one sweep, for the tests that stop and resume sweeps against
a real server (tests/test_multinode.py, tests/test_lease.py)."""

from __future__ import annotations

from mlflow import MlflowClient

from mtc.store import tracking


def sweep_runs(uri: str, name: str) -> tuple[list, list]:
    """(parents, children) of the sweep named ``name`` in experiment ``mtc`` on the server:
    its parent runs, and the child runs of the first one."""
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("mtc")
    runs = client.search_runs([experiment.experiment_id]) if experiment else []
    parents = [r for r in runs if r.info.run_name == name and tracking.PARENT_TAG not in r.data.tags]
    children = [r for r in runs if parents and r.data.tags.get(tracking.PARENT_TAG) == parents[0].info.run_id]
    return parents, children
