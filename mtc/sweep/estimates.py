"""How long a sweep will take, estimated before it runs (``python -m mtc.reproduce --dry-run``).

The seconds of one fit come from the first of three sources that has them (``fit_time``):

1. **the store**: the mean ``fit_seconds`` of the FINISHED trials it holds of the same method
   on the same data (any sweep of it, any grid point; stored_fit_seconds);
2. **the method's cost curve**: the seconds of one fit of the method config against the total
   samples of the data (over every task), kept beside this module in ``cost_curves.csv``:
   those benchmarks/scaling.py measured (docs/results/scaling.csv: two tasks of 500 to 50,000
   20 Newsgroups tf-idf rows each, 2,000 terms, about 51 non-zeros a row, 4 clusters a task;
   the methods it lists as dense got the rows as dense arrays), and for a config it did not
   measure (an ablation, a pooled or parametrised variant) its family's (the config of the
   nearest class in its solver's MRO) times their ratio measured side by side on the same rows;
   with the share of a fit that is not cached steps (``fit_share``: a fresh fit computes the
   seed-free steps that a worker's next fits read from its cache, mtc.numerics.cache; MTCFIR's
   mSDA features are most of its first fit). ``python benchmarks/dry_run_estimates.py
   --curves`` writes the file. The curve is interpolated log-log at this data's total samples
   and extended above its largest size by the power law fitted to it. A method whose dominant
   products read each stored entry of a sparse row once per sample (the exponent 1 of
   benchmarks/scaling.py's EXPECTED: k-means, MBC, MTCMRL) is further scaled by the entries a
   row of this data holds (its non-zeros when sparse, its features when dense) against a row
   of the curve's. Below the curve's smallest size (1,000 samples) fixed costs rule and the
   curve is no guide (a tenth to thirty times the fits of a 569-sample table): such data is
   small enough for 3;
3. **a small fit**: fits of the sweep's grid points (its middle, ends and quarters, until they
   took SMALL_FIT_SECONDS or SMALL_FIT_POINTS were fitted), first seed, on at most SAMPLED_ROWS
   rows of this data (drawn from every task in proportion), with a cache as a sweep's worker
   has (mtc.numerics.cache). The steps the first kept in that cache (seed-free work that a
   worker's next fits read) are counted once per parallel slot, the rest once per fit; both
   are scaled to the whole data by the power of the samples that the cost curve of the
   solver's family follows (a curve of a method config whose solver class is in this one's
   MRO), else linearly.

A sweep's seconds are its computed fits (mtc.trial.computed_fits: one per group of trials that
one fit decides; without the trials whose fit an earlier sweep of the study has,
mtc.sweep.shared_fits) times the fit's seconds plus the platform's work per trial
(TRIAL_SECONDS), over the parallel slots; a study adds Ray's start and each sweep's report
(platform_seconds). benchmarks/dry_run_estimates.py sets these estimates against the runs they
predict.
"""

from __future__ import annotations

import csv
import functools
import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mtc.store import tracking

CURVES = Path(__file__).with_name("cost_curves.csv")  # written by benchmarks/dry_run_estimates.py --curves
SAMPLED_ROWS = 2000  # the small fits' rows at most (over every task): a second or so for most methods
SMALL_FIT_POINTS, SMALL_FIT_SECONDS = 5, 0.5  # grid points a small fit times at most, and the seconds that suffice
# A study's wall beyond its fits over the slots and its planning: least squares over the five
# paper studies run from a fresh store on 2 quiet cores (docs/results/lab_notes.md, "Wall time
# per study": mtcmrl, smtnmf, aaai13, spmtc, mtcfir; each within 14 s of its measure).
# benchmarks/dry_run_estimates.py measures the first two on a run's store.
TRIAL_SECONDS = 0.0074  # a trial's scores, its run written, Ray Tune's loop: seconds of one slot
SWEEP_SECONDS = 1.7  # a sweep's parent run opened, its report and its rows of the compare folders
RAY_SECONDS = 19.0  # Ray's start and stop, the compare folders' fixed part


@dataclass(frozen=True)
class FitTime:
    """The seconds of a sweep's fits on one slot: ``first`` the extra of a worker's first fit
    (the steps its next fits read from its cache), ``each`` every fit's; ``source`` says where
    they come from, as the dry run's line shows it."""

    each: float
    source: str
    first: float = 0.0


@dataclass(frozen=True)
class Curve:
    """A method config's cost curve: one fresh fit's seconds against the total samples of the
    data it was measured on (increasing), the share of it that is not cached steps, the entries
    a row of that data held, and whether the method's dominant products read every entry of a
    row once per sample (``per_entry``: its time then grows with the row entries too; not for
    products of samples by samples)."""

    samples: np.ndarray
    seconds: np.ndarray
    fit_share: np.ndarray  # of a fresh fit, the part a worker's next fits pay too (the rest: cached steps)
    row_entries: np.ndarray
    per_entry: bool

    @functools.cached_property
    def exponent(self) -> float:
        """The power of the samples that the seconds follow: the least-squares slope in log-log
        (1 for a curve of one size)."""
        if len(self.samples) < 2:
            return 1.0
        return float(np.polyfit(np.log(self.samples), np.log(self.seconds), 1)[0])

    def seconds_at(self, samples: float) -> float:
        """One fit's seconds at ``samples``: log-log interpolation between the measured sizes,
        the fitted power law above the largest, linear below the smallest (where a family's
        curve scales a small fit of fewer samples)."""
        low, high = self.samples[0], self.samples[-1]
        if samples < low:
            return float(self.seconds[0] * samples / low)
        if samples > high:
            return float(self.seconds[-1] * (samples / high) ** self.exponent)
        return float(np.exp(np.interp(np.log(samples), np.log(self.samples), np.log(self.seconds))))

    def fit_share_at(self, samples: float) -> float:
        """The share of a fresh fit near ``samples`` that a worker's next fits pay too."""
        return float(np.interp(np.log(samples), np.log(self.samples), self.fit_share))

    def width(self, samples: float, row_entries: float) -> float:
        """How many times a row of ``row_entries`` costs a row of the curve's data near
        ``samples``: their ratio for a per-entry method, else 1."""
        return row_entries / float(np.interp(samples, self.samples, self.row_entries)) if self.per_entry else 1.0


@functools.cache
def cost_curves(path: Path = CURVES) -> dict[str, Curve]:
    """Every method config's cost curve in ``path`` (columns method, samples, seconds,
    fit_share, row_entries, per_entry), by config name."""
    rows: dict[str, list] = {}
    with open(path, newline="") as handle:
        for row in csv.DictReader(handle):
            rows.setdefault(row["method"], []).append(
                tuple(float(row[key]) for key in ("samples", "seconds", "fit_share", "row_entries", "per_entry")))
    curves = {}
    for method, points in rows.items():
        *columns, per_entry = map(np.array, zip(*sorted(points)))
        curves[method] = Curve(*columns, bool(per_entry[0]))
    return curves


def data_size(dataset) -> tuple[int, float]:
    """A dataset's total samples (every task) and the entries a row holds: its non-zeros for
    sparse tasks, its features for dense ones."""
    matrices = dataset.matrices
    samples = sum(X.shape[0] for X in matrices)
    if all(sp.issparse(X) for X in matrices):
        return samples, sum(X.nnz for X in matrices) / max(samples, 1)
    return samples, float(matrices[0].shape[1])


def curve_fit_time(curve: Curve, dataset, name: str) -> FitTime:
    """Tier 2: the curve at this data's total samples, times the cost of its rows against the
    curve's (Curve.width)."""
    samples, entries = data_size(dataset)
    width = curve.width(samples, entries)
    seconds, share = curve.seconds_at(samples) * width, curve.fit_share_at(samples)
    rows = f", rows x{width:.2g} as costly" if abs(width - 1) > 0.05 else ""
    return FitTime(seconds * share, f"cost curve of {name} at {samples:,} samples{rows}: {seconds:.2g} s a fresh fit"
                   + (f", {seconds * share:.2g} s the next" if share < 0.95 else ""), seconds * (1 - share))


def family_curve(solver: type) -> Curve | None:
    """The cost curve of the nearest class in ``solver``'s MRO that a method config with a curve
    uses (an ablation or a pooled variant grows as its family does), or None."""
    by_class = curves_by_class()
    return next((by_class[cls] for cls in solver.__mro__ if cls in by_class), None)


@functools.cache
def curves_by_class() -> dict[type, Curve]:
    """Solver class -> the cost curve of a method config of that class (read once: the configs'
    YAML files take a third of a second)."""
    from mtc.config import method_configs

    classes = method_configs()
    return {classes[name]: curve for name, curve in cost_curves().items() if name in classes}


def sampled(dataset, rows: int, seed: int = 0):
    """The dataset with at most ``rows`` rows in all, drawn from each task in proportion to its
    size (at least its clusters' number), in their order; the dataset itself when it is no larger."""
    from mtc.tasks import MultiTaskDataset, Task

    total = sum(task.n_samples for task in dataset.tasks)
    if total <= rows:
        return dataset
    rng = np.random.default_rng(seed)
    tasks = []
    for task in dataset.tasks:
        keep = np.sort(rng.choice(task.n_samples, max(task.n_samples * rows // total, task.n_clusters), replace=False))
        tasks.append(Task(task.name, task.X[keep], None if task.y is None else task.y[keep], task.class_names))
    return MultiTaskDataset(dataset.name, tuple(tasks), dataset.meta)


def spread(points: tuple, most: int) -> list:
    """At most ``most`` of the grid ``points``, spread over it: its middle, ends, then quarters."""
    n = len(points)
    order = dict.fromkeys([n // 2, 0, n - 1, n // 4, 3 * n // 4, *range(n)])
    return [points[i] for i in list(order)[:most]]


def small_fit_time(plan) -> FitTime:
    """Tier 3: fits on at most SAMPLED_ROWS rows of the sweep's data (its first seed), with one
    cache and the BLAS threads of one trial as a worker fits them: grid points spread over the
    grid (spread) until their fits took SMALL_FIT_SECONDS or SMALL_FIT_POINTS were fitted (a fit's
    time varies along the grid: LSSMTC's from 0.02 to 0.5 s on Reuters). The first fit's cached
    steps are a worker's first-fit extra; the rest, and the steps a later point computed again
    (they hang on its parameters), each fit's: both scaled to the whole data by the family's
    cost curve (else linearly)."""
    from threadpoolctl import threadpool_limits

    from mtc.config import Trial
    from mtc.methods.memory import Shapes
    from mtc.numerics.cache import Cache
    from mtc.trial import run_trial

    dataset = plan.datasets[min(plan.datasets)]
    small = sampled(dataset, SAMPLED_ROWS)
    prototype = plan.run.method.prototype(n_clusters=dataset.n_clusters)
    points = tuple({trial.label: trial.point for trial in plan.trials}.values())
    shapes = Shapes.of(small.matrices, small.n_clusters)
    fitting = [point for point in points
               if not prototype.__class__(**{**prototype.get_params(), **point}).cannot_fit(shapes)]
    if not fitting:  # every point needs more samples than the sample has: the whole data
        small, fitting = dataset, points
    cache, seconds = Cache(size=2), []
    with threadpool_limits(limits=plan.run.sweep.cpus_per_trial):
        for point in spread(tuple(fitting), SMALL_FIT_POINTS):
            outcome = run_trial(small, prototype, Trial(point, plan.trials[0].seed), cache=cache, points=points)
            seconds.append(outcome.metrics["fit_seconds"])  # its scores are the platform's share (TRIAL_SECONDS)
            if len(seconds) == 1:  # the first fit's cached steps: what the next fits read
                kept = min(sum(cache.compute_seconds.values()), seconds[0])
            if sum(seconds) >= SMALL_FIT_SECONDS:
                break
    each = (sum(seconds) - kept) / len(seconds)
    fits = f"{len(seconds)} fits" if len(seconds) > 1 else "one fit"
    cached = f", {kept:.2g} s of cached steps" if kept > 0.05 * seconds[0] else ""
    if small is dataset:
        return FitTime(each, f"{fits} on the data: {each:.2g} s each{cached}", kept)
    (n_small, _), (n, _) = data_size(small), data_size(dataset)
    scale, how = growth(plan.run.method.solver, n_small, n)
    return FitTime(each * scale, f"{fits} on {n_small:,} of {n:,} samples: {each:.2g} s each{cached}, "
                   f"x{scale:.3g} {how}", kept * scale)


def growth(solver: type, sampled_samples: int, samples: int) -> tuple[float, str]:
    """How much longer a fit on ``samples`` takes than on ``sampled_samples``, and how that was
    found: the power of the samples that the family's cost curve follows (Curve.exponent: its
    points, measured at other iteration counts, rise and fall between neighbours; ASI's from
    3.6 s at 2,000 samples to 1.7 s at 4,000), else in proportion."""
    curve = family_curve(solver)
    if curve is None:
        return samples / sampled_samples, "linearly"
    power = curve.exponent
    return (samples / sampled_samples) ** power, f"as its family's cost curve grows (power {power:.2g})"


def stored_fit_seconds(plans: list) -> dict[str, tuple[float, int]]:
    """Per sweep, the mean ``fit_seconds`` of the FINISHED trials the store holds of the same
    method with the same parameters beside its grid on the same data (method, data config and
    data hash: any sweep of it, any grid point; an experiment's other parameters are another
    method: MTCMRL's printed rules fit 5 times faster on WebKB4; not those that read another
    sweep's fit, ``fit_read``) and how many there are; sweeps with none are left out (no store:
    none)."""
    uri, experiment = plans[0].run.tracking.uri, plans[0].run.tracking.experiment
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).is_file():
        return {}
    client = tracking.client_for(uri)
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return {}
    seconds = {}
    for plan in plans:
        same = {key: plan.tags[key] for key in ("mtc.method", "mtc.data", tracking.DATASET_HASH_TAG)}
        params = fixed_params(plan)
        fits = [run.data.metrics["fit_seconds"] for run in tracking.find_runs(client, found.experiment_id, **same)
                if run.info.status == "FINISHED" and "fit_seconds" in run.data.metrics
                and not run.data.metrics.get("fit_read")  # a fit read from another sweep's costs no fit
                and all(run.data.params.get(key) == value for key, value in params.items())]
        if fits:
            seconds[plan.name] = (sum(fits) / len(fits), len(fits))
    return seconds


def fixed_params(plan) -> dict[str, str]:
    """The solver's parameters outside the sweep's grid, as its trials' runs record them
    (mtc.trial.trial_params: under their own names, MLflow's strings)."""
    from mtc.config import reserved_params

    prototype = plan.run.method.prototype(n_clusters=plan.datasets[min(plan.datasets)].n_clusters)
    left_out = {*reserved_params(prototype), *plan.run.method.grid}
    return tracking.flatten({key: value for key, value in prototype.get_params().items() if key not in left_out})


def fit_time(plan, stored: dict[str, tuple[float, int]]) -> FitTime:
    """The sweep's fit time from the first source that has it: the store, the method's cost
    curve (from its smallest size on), a small fit."""
    if plan.name in stored:  # a mean over trials, of which a trial whose fit another decided costs none
        mean, fits = stored[plan.name]
        return FitTime(mean / computed_share(plan), f"mean of {fits} stored fits")
    curve, dataset = cost_curves().get(plan.run.method.name), plan.datasets[min(plan.datasets)]
    if curve is not None and data_size(dataset)[0] >= curve.samples[0]:
        return curve_fit_time(curve, dataset, plan.run.method.name)
    return small_fit_time(plan)


def computed_share(plan) -> float:
    """The share of the sweep's trials that compute a fit (mtc.trial.computed_fits)."""
    from mtc.trial import computed_fits

    prototype = plan.run.method.prototype(n_clusters=plan.datasets[min(plan.datasets)].n_clusters)
    return computed_fits(prototype, plan.trials) / len(plan.trials)


def sweep_seconds(fit: FitTime, trials: int, fits: float, slots: int) -> float:
    """Wall seconds of a sweep's ``trials`` of which ``fits`` compute a fit, on ``slots``
    parallel slots: a worker's first-fit extra once (the slots pay it at once), each fit and
    each trial's platform work spread over the slots."""
    if not trials:
        return 0.0
    return fit.first * (fits > 0) + (fit.each * fits + TRIAL_SECONDS * trials) / slots


def platform_seconds(sweeps: int) -> float:
    """A study's seconds beyond its trials: Ray's start and each sweep's report (none without a
    sweep to run)."""
    return RAY_SECONDS + SWEEP_SECONDS * sweeps if sweeps else 0.0


def shared_draws(plans: list) -> list:
    """The plans with one loaded copy of each data config's draws (sweeps of several methods on
    the same data read it once)."""
    loaded, shared = {}, []
    for plan in plans:
        key = (json.dumps(plan.run.data.resolved, sort_keys=True, default=str), plan.run.sweep.repeats)
        if key in loaded:
            plan = replace(plan, loaded=loaded[key])
        else:
            loaded[key] = plan.datasets
        shared.append(plan)
    return shared
