"""Cluster mode in numbers: a tracking server on PostgreSQL against a local SQLite store, the
cost of logging one trial to each, and the speed-up of a second Ray node.

    MTC_DATA_DIR=../shared/data python benchmarks/cluster_modes.py [--parts server logging speedup]

- server: the 12-trial two-node sweep of the CI test (MTCMRL, synthetic data) with
  ``mlflow.tracking_uri`` on a tracking server (mtc.stack, basic auth) and on SQLite; wall
  time of the whole sweep and of the Tuner.
- logging: what one trial's MLflow traffic costs, without Ray: look for an earlier attempt's
  runs (tracking.earlier_runs), create the trial's run, log the outcome (one batch of params and
  metrics, one trial.npz), close it. Median over ``--repeats`` trials per store.
- speedup: a CPU-bound grid (MTCFIR on WebKB4, one CPU per trial, 16 Ray Tune trials of 4
  seeds each) on one node with one CPU, then on two nodes with one CPU each (loopback);
  Tuner wall times and their ratio.

Run it alone on the machine (it times things); the nodes and the server it starts are
stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))  # before Ray is imported: it caches the token
os.environ["RAY_AUTH_MODE"] = "token"

from mtc.stack import server as stack  # noqa: E402
from mtc.store import run_writer, tracking  # noqa: E402
from mtc.cli import compose_config  # noqa: E402
from mtc.config import Trial, settings  # noqa: E402
from mtc.stack.loopback import LoopbackCluster, free_port, loopback_cluster, wait_for_nodes  # noqa: E402
from mtc.sweep.driver import run_sweep  # noqa: E402
from mtc.trial import (
    run_trial,  # noqa: E402
    trial_params,  # noqa: E402
)

USER, PASSWORD = "admin", secrets.token_urlsafe(16)
SERVER_SWEEP = ["method=mtcmrl", "++method.grid.lambda_=[0.5,1.0,2.0]", "++method.grid.alpha=[1.0]",
                "sweep.repeats=4", "data.params.samples_per_cluster=15"]
# One corruption per grid point: each Ray Tune trial computes its own mSDA features (about 2 s
# of the 2.8 s a trial takes), so no node is helped by another trial's cache.
SPEEDUP_SWEEP = ["method=mtcfir", "data=webkb4", "++method.grid.corruption=[0.05,0.1,0.15,0.2,0.25,0.3,0.35,0.4,0.45,0.5,0.55,0.6,0.65,0.7,0.75,0.8]",
                 "++method.grid.neighbour_ratio=[0.1]", "sweep.repeats=4", "sweep.seeds_per_trial=4"]


def timed_sweep(folder: Path, uri: str, address: str, overrides: list[str]) -> tuple[float, dict]:
    cfg = compose_config([f"output_dir={folder / 'outputs'}", f"mlflow.tracking_uri={uri}",
                          f"mlflow.artifact_root={folder / 'artifacts'}", f"ray.address={address}", *overrides])
    start = time.perf_counter()
    result = run_sweep(settings(cfg))
    return time.perf_counter() - start, result


def with_server(folder: Path):
    """A started stack (PostgreSQL + mlflow server with basic auth) in ``folder``."""
    os.environ.update(MTC_MLFLOW_USERNAME=USER, MTC_MLFLOW_PASSWORD=PASSWORD, MLFLOW_TRACKING_USERNAME=USER,
                      MLFLOW_TRACKING_PASSWORD=PASSWORD)
    return stack.start(folder, port=free_port(), db_port=free_port(), auth=True)


def server_part(folder: Path, server) -> None:
    with loopback_cluster(dict(os.environ), nodes=2) as cluster:
        rows = []
        for label, uri in (("SQLite", f"sqlite:///{folder / 'server-part.db'}"), ("server", server.tracking_uri)):
            wall, result = timed_sweep(folder / label, uri, cluster.address, SERVER_SWEEP)
            rows.append((label, wall, result.tuner.seconds, result.trials_run))
    print("\n12-trial two-node sweep (MTCMRL, synthetic), tracking store vs wall time")
    print(f"{'store':8s} {'trials':>6s} {'sweep s':>8s} {'Tuner s':>8s}")
    for label, wall, tuner, trials in rows:
        print(f"{label:8s} {trials:6d} {wall:8.2f} {tuner:8.2f}")


def log_one(client, experiment_id: str, parent_id: str, trial: Trial, outcome, params: dict,
            task_names: list[str]) -> float:
    start = time.perf_counter()
    tracking.earlier_runs(client, experiment_id, parent_id, trial.label)
    record = tracking.trial_record(parent_id, trial, {"mtc.benchmark": "logging"}, int(time.time() * 1000), outcome,
                                   params, task_names)
    run_writer.write_runs(client, experiment_id, parent_id, [record])
    return time.perf_counter() - start


def logging_part(folder: Path, server, repeats: int) -> None:
    cfg = compose_config(["method=mtcmrl", "data.params.samples_per_cluster=15"])
    run = settings(cfg)
    dataset = run.data.load()
    prototype = run.method.prototype(n_clusters=dataset.n_clusters)
    trial = Trial({}, 0)
    outcome = run_trial(dataset, prototype, trial, cache=None)
    params = trial_params(run.method.name, prototype, trial, run.data.resolved)
    print(f"\none trial's MLflow traffic (MTCMRL on synthetic: {len(outcome.metrics)} metrics, "
          f"{sum(len(t) for t in outcome.traces.values()) + len(outcome.objective_trace)} trace points, "
          f"{len(outcome.matrices)} matrices), median of {repeats}; fit itself "
          f"{outcome.metrics['fit_seconds'] * 1000:.0f} ms")
    print(f"{'store':8s} {'ms/trial':>9s} {'min':>7s} {'max':>7s}")
    for label, uri in (("SQLite", f"sqlite:///{folder / 'logging.db'}"), ("server", server.tracking_uri)):
        client, experiment_id = tracking.open_store(uri, "logging-benchmark", str(folder / "artifacts"))
        parent_id = client.create_run(experiment_id, tags={"mtc.benchmark": "logging"}).info.run_id
        times = [log_one(client, experiment_id, parent_id, Trial({}, seed), outcome, params, dataset.task_names)
                 for seed in range(repeats)]
        print(f"{label:8s} {statistics.median(times) * 1000:9.1f} {min(times) * 1000:7.1f} {max(times) * 1000:7.1f}")


def speedup_part(folder: Path) -> None:
    rows = []
    with LoopbackCluster(dict(os.environ), cpus_per_node=1) as cluster:
        wait_for_nodes(cluster.address, 1)
        for nodes in (1, 2):
            if nodes == 2:
                cluster.add_node()
            wall, result = timed_sweep(folder / f"nodes{nodes}", f"sqlite:///{folder / f'speedup{nodes}.db'}",
                                       cluster.address, SPEEDUP_SWEEP)
            rows.append((nodes, wall, result.tuner.seconds, result.trials_run))
    print("\nCPU-bound grid (MTCFIR on WebKB4, 16 grid points x 4 seeds, the 4 seeds of a point in one Ray Tune "
          "trial, 1 CPU per trial), 1 CPU per node")
    print(f"{'nodes':5s} {'trials':>6s} {'sweep s':>8s} {'Tuner s':>8s} {'speed-up':>8s}")
    for nodes, wall, tuner, trials in rows:
        print(f"{nodes:5d} {trials:6d} {wall:8.2f} {tuner:8.2f} {rows[0][2] / tuner:8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", nargs="+", default=["server", "logging", "speedup"],
                        choices=["server", "logging", "speedup"])
    parser.add_argument("--repeats", type=int, default=20, help="trials logged per store (logging part)")
    args = parser.parse_args()
    os.environ.setdefault("MTC_CACHE_DIR", tempfile.mkdtemp(prefix="mtc-cache-"))
    with tempfile.TemporaryDirectory(prefix="mtc-bench-", dir="/var/tmp") as name:
        folder = Path(name)
        os.chmod(folder, 0o755)  # the postgres user reaches the stack folder
        server = with_server(folder / "stack") if {"server", "logging"} & set(args.parts) else None
        try:
            if "server" in args.parts:
                server_part(folder, server)
            if "logging" in args.parts:
                logging_part(folder, server, args.repeats)
            if "speedup" in args.parts:
                speedup_part(folder)
        finally:
            if server:
                stack.stop(folder / "stack")


if __name__ == "__main__":
    main()
