"""One Ray session per Python process (issue 48): sweeps run from Python (mtc.sweep.run, a
notebook) start a local Ray once and reuse it, restart it when they ask other resources, and
leave nothing behind at interpreter exit; with ``sweep.verbose=0`` each sweep prints its start
line and one result line, not its report. Run in a Python process of its own, as a notebook's
kernel is."""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from mtc.cli import compose_config
from mtc.config import Trial, settings
from mtc.store import tracking
from mtc.trial import run_trial

pytestmark = pytest.mark.slow

# Three sweeps in one process: a and b ask the same resources (b on other data), c one CPU fewer.
# ray.init is counted as the driver calls it; after each sweep the driver's Ray node is noted.
SCRIPT = """
import json, sys
import ray
import mtc.sweep

calls = []
init = ray.init
def counted(*args, **kwargs):
    calls.append(kwargs.get("num_cpus"))
    return init(*args, **kwargs)
ray.init = counted

common = sys.argv[2:]
sweeps = {"a": [], "b": ["data.params.samples_per_cluster=15"], "c": ["ray.num_cpus=1"]}
seen = {}
for name, extra in sweeps.items():
    result = mtc.sweep.run("kmeans", "synthetic", *common, f"sweep.name={name}", *extra)
    context, node = ray.get_runtime_context(), ray._private.worker.global_worker.node
    seen[name] = {"node": context.get_node_id(), "gcs": context.gcs_address, "parent": result.parent_run_id,
                  "experiment": result.experiment_id, "best": result.best["acc"].mean["acc/mean"],
                  "temp": node.get_temp_dir_path(), "pids": [process.pid for _, process in node.live_processes()]}
with open(sys.argv[1], "w") as out:
    json.dump({"calls": calls, "sweeps": seen}, out)
"""


def alive(pids: list[int]) -> list[int]:
    """The processes of ``pids`` that still run (a zombie has ended)."""
    running = []
    for pid in pids:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                running.append(pid)
    return running


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    """The three sweeps run by one Python process, with a temp folder of its own (short, for
    Ray's socket paths): (folder, the overrides, what the process noted, its stdout)."""
    folder = tmp_path_factory.mktemp("reuse")
    temp = Path(tempfile.mkdtemp(prefix="mtc-t", dir="/tmp"))
    common = [f"output_dir={folder / 'outputs'}", f"mlflow.tracking_uri=sqlite:///{folder / 'mlflow.db'}",
              f"mlflow.artifact_root={folder / 'artifacts'}", "sweep.repeats=2", "ray.num_cpus=2", "sweep.verbose=0"]
    try:
        done = subprocess.run([sys.executable, "-c", SCRIPT, str(folder / "seen.json"), *common], cwd=folder,
                              capture_output=True, text=True, timeout=600, env={**os.environ, "TMPDIR": str(temp)})
        assert done.returncode == 0, done.stderr[-3000:]
        seen = json.loads((folder / "seen.json").read_text())
        pids = [pid for sweep in seen["sweeps"].values() for pid in sweep["pids"]]
        deadline = time.monotonic() + 30
        while alive(pids) and time.monotonic() < deadline:
            time.sleep(0.5)
        yield folder, common, seen, done.stdout, temp
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def test_sweeps_asking_the_same_resources_share_one_ray_and_others_restart_it(notebook):
    folder, _, seen, _, _ = notebook
    a, b, c = (seen["sweeps"][name] for name in "abc")
    assert seen["calls"] == [2, 1]  # ray.init twice: for a (2 CPUs) and for c (1 CPU); b reused a's session
    assert a["node"] == b["node"] != c["node"] and a["gcs"] == b["gcs"] != c["gcs"]
    assert a["temp"] == b["temp"] != c["temp"]
    client = tracking.client_for(f"sqlite:///{folder / 'mlflow.db'}")
    for sweep in (a, b, c):  # every trial ran on the Ray node the driver had when its sweep ended
        runs = tracking.find_runs(client, sweep["experiment"], **{tracking.PARENT_TAG: sweep["parent"]})
        assert len(runs) == 2 and {run.data.tags["mtc.node_id"] for run in runs} == {sweep["node"]}


def test_each_sweep_of_a_reused_ray_has_its_own_right_results(notebook):
    folder, common, seen, _, _ = notebook
    client = tracking.client_for(f"sqlite:///{folder / 'mlflow.db'}")
    for name, extra in (("a", []), ("b", ["data.params.samples_per_cluster=15"])):
        run = settings(compose_config(["method=kmeans", "data=synthetic", *common, f"sweep.name={name}", *extra]))
        sweep = seen["sweeps"][name]
        runs = {int(r.data.params["seed"]): r
                for r in tracking.find_runs(client, sweep["experiment"], **{tracking.PARENT_TAG: sweep["parent"]})}
        assert sorted(runs) == [0, 1] and {r.info.status for r in runs.values()} == {"FINISHED"}
        accuracy = []
        for seed, child in runs.items():  # each child run holds what its seed's fit gives here, on its data
            data = run.data.draws([seed])[seed]
            expected = run_trial(data, run.method.prototype(n_clusters=data.n_clusters), Trial({}, seed), None)
            assert child.data.params["n_samples.task0"] == str(data.tasks[0].n_samples)
            for key in ("acc/mean", "nmi/mean", "objective/final"):
                assert child.data.metrics[key] == pytest.approx(expected.metrics[key], rel=1e-9)
            accuracy.append(expected.metrics["acc/mean"])
        assert sweep["best"] == pytest.approx(sum(accuracy) / 2, rel=1e-12)
    samples = {name: client.get_run(runs_of["parent"]).data.params["data.params.samples_per_cluster"]
               for name, runs_of in seen["sweeps"].items() if name != "c"}
    assert samples == {"a": "50", "b": "15"}  # the data config's default, and b's


def test_the_kept_ray_is_stopped_at_interpreter_exit(notebook):
    _, _, seen, _, temp = notebook
    a, b, c = (seen["sweeps"][name] for name in "abc")
    assert len(c["pids"]) >= 2 and set(a["pids"]) == set(b["pids"]) != set(c["pids"])  # GCS, raylet, ...
    assert alive(a["pids"] + c["pids"]) == []  # c's Ray stopped at exit (a's and b's when c restarted it)
    assert list(temp.glob("mtc-ray-*")) == []  # every session folder removed, with its lock


def test_verbose_0_prints_a_start_line_and_one_result_line_per_sweep(notebook):
    folder, _, seen, stdout, _ = notebook
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    lines = stdout.splitlines()
    assert len(lines) == 6, stdout
    for (start, end), (name, sweep) in zip(zip(lines[::2], lines[1::2]), seen["sweeps"].items()):
        assert start == f"sweep {name}: 2 trials (0 already finished), MLflow parent run {sweep['parent']}"
        link = tracking.trials_link(uri, sweep["experiment"], sweep["parent"])
        assert end == (f"sweep {name}: 2 trials, best acc/mean {sweep['best']:.4f} at defaults; report "
                       f"{folder / 'outputs' / name / 'report.md'}; MLflow trials: {link} after: mlflow ui "
                       f"--backend-store-uri {uri}")
