"""Benchmark scripts that a test can run in seconds, run on the inputs that broke them once the
package moved under them: a composition drawn per seed (fit_units.py and data_loading.py called
``load()`` without the seed it needs), and a store whose newest runs are a sweep's many children
(mlflow_ui_screenshots.py looked for the parent among the 200 newest runs and found none)."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
START = 1_700_000_000_000  # a run start in epoch ms (0 would be taken as "now")
PER_SEED = "smtnmf_reuters_orgs_vs_people"  # draws a fresh 80-document sample per seed


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def script():
    loaded = []

    def _load(name: str):
        loaded.append(name)
        return load_script(name)

    yield _load
    for name in loaded:
        sys.modules.pop(name, None)


def test_fit_units_runs_on_a_per_seed_composition(script, capsys):
    fit_units = script("fit_units")
    fit_units.main(["smtnmf", PER_SEED, "lambda_inter=0.2", "--seeds", "0", "1"])
    lines = capsys.readouterr().out.splitlines()
    fits = [line.split() for line in lines if line.startswith("lambda_inter=0.2")]
    assert [fit[1] for fit in fits] == ["0", "1"]
    assert all(float(fit[2]) > 0 and int(fit[4]) > 0 for fit in fits)  # CPU s, iterations
    assert lines[-1].startswith("mean ")


def test_data_loading_times_per_seed_compositions_and_skips_files(script, monkeypatch, tmp_path):
    data_loading = script("data_loading")
    monkeypatch.setenv("MTC_CACHE_DIR", str(tmp_path))
    times = data_loading.load_all([PER_SEED, "synthetic"])
    assert set(times) == {PER_SEED, "synthetic"} and all(seconds > 0 for seconds in times.values())
    timed = []
    monkeypatch.setattr(data_loading, "load_all", lambda names: timed.append(list(names)) or dict.fromkeys(names, 1.0))
    data_loading.main()
    assert "files" not in timed[0] and PER_SEED in timed[0]


def test_screenshots_find_the_newest_sweep_under_its_children(script, tmp_path):
    """More finished children than the 200 runs the script once searched, all newer than
    their parent: the parent is still found, and the CSV a readable trial logs with it."""
    from mtc.store import tracking

    screenshots = script("mlflow_ui_screenshots")
    client, experiment = tracking.open_store(f"sqlite:///{tmp_path / 'mlflow.db'}", "mtc", str(tmp_path / "artifacts"))
    sweeps = []
    for sweep, n_children in (("older", 2), ("newer", 201)):
        parent = client.create_run(experiment, start_time=START + len(sweeps) * 1000,
                                   tags={tracking.SWEEP_KEY_TAG: sweep}).info.run_id
        children = [client.create_run(experiment, start_time=START + len(sweeps) * 1000 + 1 + i,
                                      tags={tracking.PARENT_TAG: parent}).info.run_id for i in range(n_children)]
        for run_id in (parent, *children):
            client.set_terminated(run_id)
        sweeps.append((parent, children))
    (tmp_path / "objective_trace.csv").write_text("step,objective\n0,1.0\n")
    newer_parent, newer_children = sweeps[1]
    for child in newer_children:
        client.log_artifact(child, str(tmp_path / "objective_trace.csv"))
    found_experiment, parent, child, csv = screenshots.newest_sweep(client)
    assert (found_experiment, parent) == (experiment, newer_parent)
    assert child in newer_children and csv == "objective_trace.csv"
