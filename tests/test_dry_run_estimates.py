"""The dry run's estimate (mtc.sweep.estimates): which source each sweep's fit time comes from
(the store, the method's cost curve, one small fit), the curve's arithmetic, and that a dry run
fits nothing on the whole data when a curve answers. No Ray: the sweeps are planned, not run.
How close the estimates come to the runs is benchmarks/dry_run_estimates.py's (no timed test)."""

import contextlib
import io
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import mtc.trial
from mtc import reproduce
from mtc.store import tracking
from mtc.sweep import estimates

TINY = Path(__file__).parent / "studies" / "tiny.yaml"  # k-means and A-kmeans on synthetic data, no Ray here
SAMPLES = 1200  # two tasks of 4 clusters x 150: from the smallest size of the cost curves (1,000) on


def planned(tmp_path: Path, samples_per_cluster: int = 150, only=("kmeans-synthetic",)) -> list:
    study = reproduce.load_study(str(TINY))
    overrides = [f"output_dir={tmp_path / 'outputs'}", f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
                 f"data.params.samples_per_cluster={samples_per_cluster}", "ray.num_cpus=2"]
    return reproduce.plan_study(study, overrides, list(only))


@pytest.fixture
def fits(monkeypatch):
    """Every run_trial call's dataset (the dry run's small fits go through it)."""
    calls, real = [], mtc.trial.run_trial

    def counted(dataset, *args, **kwargs):
        calls.append(dataset)
        return real(dataset, *args, **kwargs)

    monkeypatch.setattr(mtc.trial, "run_trial", counted)
    return calls


def test_a_cost_curve_is_interpolated_log_log_linear_below_and_a_power_law_above():
    curve = estimates.Curve(samples=np.array([1000.0, 4000.0]), seconds=np.array([1.0, 16.0]),
                            fit_share=np.array([0.2, 0.6]), row_entries=np.array([50.0, 50.0]), per_entry=True)
    assert curve.exponent == pytest.approx(2.0)
    assert curve.seconds_at(2000) == pytest.approx(4.0)  # (2000 / 1000) ** 2
    assert curve.seconds_at(1000) == pytest.approx(1.0) and curve.seconds_at(4000) == pytest.approx(16.0)
    assert curve.seconds_at(8000) == pytest.approx(64.0)  # the fitted power law beyond the largest size
    assert curve.seconds_at(500) == pytest.approx(0.5)  # linear below the smallest
    assert curve.fit_share_at(2000) == pytest.approx(0.4)  # halfway in log samples
    assert curve.width(2000, 100.0) == pytest.approx(2.0)  # rows twice as wide, a per-entry method
    assert replace(curve, per_entry=False).width(2000, 100.0) == 1  # products of samples by samples


def test_the_package_has_a_cost_curve_for_every_method_config_with_a_family():
    from mtc.config import method_configs

    curves = estimates.cost_curves()
    assert set(curves) <= set(method_configs()) and {"kmeans", "mtcmrl", "mtcfir_nf", "smbc"} <= set(curves)
    for curve in curves.values():
        assert np.all(np.diff(curve.samples) > 0) and np.all(curve.seconds > 0)
        assert np.all((curve.fit_share > 0) & (curve.fit_share <= 1))


def test_a_sweep_of_a_method_with_a_curve_is_estimated_from_it_without_a_fit(tmp_path, fits):
    [plan] = planned(tmp_path)
    fit = estimates.fit_time(plan, {})
    assert fit.source.startswith(f"cost curve of kmeans at {SAMPLES:,} samples") and fit.each > 0
    assert fits == []


def test_the_store_s_fit_times_of_the_method_with_its_parameters_come_first(tmp_path, fits, monkeypatch):
    """A store holding FINISHED runs of the method on the same data: the mean fit time of those
    with the sweep's parameters beside its grid (another experiment's are another method), no fit;
    a sweep of another grid of the same method reads the same runs."""
    from mlflow.entities import Metric, Param

    plan, reduced = planned(tmp_path, only=("kmeans-synthetic", "kmeans_reduced-synthetic"))
    client = tracking.client_for(plan.run.tracking.uri)
    experiment = client.create_experiment(plan.run.tracking.experiment)
    tags = {key: plan.tags[key] for key in ("mtc.method", "mtc.data", tracking.DATASET_HASH_TAG)}
    params = estimates.fixed_params(plan)
    assert params["n_init"] == "10" and "max_iter" not in params and "random_state" not in params
    for seconds, changed in ((0.5, {}), (1.5, {}), (10.0, {"n_init": "1"})):
        run = client.create_run(experiment, tags=tags)
        client.log_batch(run.info.run_id, metrics=[Metric("fit_seconds", seconds, 0, 0)],
                         params=[Param(key, value) for key, value in {**params, **changed}.items()])
        client.set_terminated(run.info.run_id, "FINISHED")
    stored = reproduce.stored_fit_seconds([plan, reduced])
    assert stored == {plan.name: (1.0, 2), reduced.name: (1.0, 2)}
    assert estimates.fit_time(plan, stored) == estimates.FitTime(1.0, "mean of 2 stored fits")
    assert fits == []
    # S-MKC's fit of a seed decides its other lambdas: a trial's mean, per computed fit
    monkeypatch.setattr(estimates, "computed_share", lambda plan: 0.1)
    assert estimates.fit_time(plan, stored).each == pytest.approx(10.0)


def test_a_method_without_a_curve_is_timed_by_a_small_fit_on_a_sample_of_the_rows(tmp_path, fits, monkeypatch):
    """Fits on at most SAMPLED_ROWS rows drawn from every task, scaled to the whole data (k-means'
    own curve when it has no line of its own)."""
    curves = {name: curve for name, curve in estimates.cost_curves().items() if name != "kmeans"}
    monkeypatch.setattr(estimates, "cost_curves", lambda: curves)
    monkeypatch.setattr(estimates, "SAMPLED_ROWS", 300)
    [plan] = planned(tmp_path)
    fit = estimates.fit_time(plan, {})
    assert fits and all([X.shape[0] for X in dataset.matrices] == [150, 150] for dataset in fits)
    assert re.match(rf"(one fit|2 fits) on 300 of {SAMPLES:,} samples: [\d.e-]+ s each, x", fit.source) and fit.each > 0


def test_data_below_the_curve_s_sizes_is_timed_by_fits_on_all_of_it(tmp_path, fits):
    [plan] = planned(tmp_path, samples_per_cluster=15)  # 120 samples: the curve's fixed costs are no guide
    fit = estimates.fit_time(plan, {})
    assert fits and all(dataset is plan.datasets[0] for dataset in fits)
    assert re.match(r"(one fit|2 fits) on the data: ", fit.source)


def test_the_small_fit_runs_grid_points_from_the_middle_with_one_cache_and_a_trial_s_threads(tmp_path, monkeypatch):
    from threadpoolctl import threadpool_info, threadpool_limits

    calls, real = [], mtc.trial.run_trial

    def recorded(dataset, prototype, trial, cache, points):
        calls.append((trial, cache, points, {pool["num_threads"] for pool in threadpool_info()
                                             if pool["user_api"] == "blas"}))
        return real(dataset, prototype, trial, cache, points)

    monkeypatch.setattr(mtc.trial, "run_trial", recorded)
    monkeypatch.setattr(estimates, "SMALL_FIT_SECONDS", 60.0)  # every point within the budget
    [plan] = planned(tmp_path, samples_per_cluster=15)
    plan = replace(plan, run=replace(plan.run, sweep=replace(plan.run.sweep, cpus_per_trial=2)))
    with threadpool_limits(limits=1):  # the driver's own limit is not the one the fits run with
        estimates.small_fit_time(plan)
    assert [trial.point for trial, *_ in calls] == [{"max_iter": 200}, {"max_iter": 100}]  # the middle first
    assert all(points == ({"max_iter": 100}, {"max_iter": 200}) for _, _, points, _ in calls)
    assert {trial.seed for trial, *_ in calls} == {plan.trials[0].seed} and calls[0][1] is calls[1][1] is not None
    assert all(threads == {2} for *_, threads in calls)
    assert estimates.spread(tuple(range(9)), 5) == [4, 0, 8, 2, 6] and estimates.spread((7,), 5) == [7]


def test_a_sweep_s_seconds_pay_the_first_fit_s_extra_once_and_spread_the_rest_over_the_slots():
    fit = estimates.FitTime(each=2.0, source="", first=5.0)
    assert estimates.sweep_seconds(fit, trials=10, fits=4, slots=2) == pytest.approx(
        5.0 + (2.0 * 4 + estimates.TRIAL_SECONDS * 10) / 2)
    assert estimates.sweep_seconds(fit, trials=0, fits=0, slots=2) == 0.0
    assert estimates.platform_seconds(0) == 0.0
    assert estimates.platform_seconds(3) == pytest.approx(estimates.RAY_SECONDS + 3 * estimates.SWEEP_SECONDS)


def test_a_dry_run_reads_each_data_config_once_and_fits_nothing_when_curves_answer(tmp_path, fits):
    plans = planned(tmp_path, only=("kmeans-synthetic", "a_kmeans-synthetic", "kmeans-hard"))
    shared = estimates.shared_draws(plans)
    assert shared[0].datasets is shared[1].datasets is not shared[2].datasets  # "hard" is other data
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        reproduce.dry_run(reproduce.load_study(str(TINY)), plans, [])
    lines = out.getvalue().splitlines()
    assert all(f"(cost curve of {name} at {SAMPLES:,} samples" in line
               for name, line in zip(("kmeans", "a_kmeans", "kmeans"), lines))
    assert lines[3].startswith("study tiny: 3 sweeps, 18 trials, 18 to run (0 sweeps finished); estimated ")
    assert fits == []


def test_the_command_installs_the_one_line_ctrl_c_before_its_imports_and_an_import_does_not():
    """``python -m mtc.reproduce`` sets mtc.cli's Ctrl-C handler before OmegaConf, numpy and the
    rest are imported (a Ctrl-C meanwhile: one line, exit 130); importing the module (a notebook
    running a study) leaves the handler alone."""
    script = """
import runpy, signal, sys
import mtc.cli
def recorded():
    print("installed before omegaconf:", "omegaconf" not in sys.modules, "numpy:", "numpy" not in sys.modules)
mtc.cli.ctrl_c_exits_at_once = recorded
sys.argv = ["python -m mtc.reproduce", "--help"]
try:
    runpy.run_module("mtc.reproduce", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.splitlines()[0] == "installed before omegaconf: True numpy: True"
    imported = subprocess.run([sys.executable, "-c", "import signal; before = signal.getsignal(signal.SIGINT); "
                               "import mtc.reproduce; print(signal.getsignal(signal.SIGINT) is before)"],
                              capture_output=True, text=True, timeout=120, check=True)
    assert imported.stdout.strip() == "True"  # a notebook importing mtc.reproduce keeps its own handler
