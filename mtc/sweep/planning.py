"""A sweep before anything is created: its plan (settings, trials, output folder, tags, key)
and, for a sweep that already finished in a SQLite store, the report its driver logged.

Kept apart from the driver so that the command line finds a finished sweep without importing
Ray, MLflow, scikit-learn or pandas (mtc.sweep.command): this module and what it imports stay
light (tests/test_sweep.py asserts which libraries that path imports).
"""

from __future__ import annotations

import functools
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from mtc.config import Settings, Trial, stable_hash, trial_list
from mtc.results.report import CRITERIA
from mtc.store import disk, preflight, tracking
from mtc.store.stored_report import REPORT_FILES, stored_report

# On a FINISHED parent run: the digest of the planned trials (trials_digest), written when every
# one of them has a FINISHED run; a rerun then knows the sweep is done without reading its runs.
# (Deleting a child run by hand does not clear it: delete the parent run to run the sweep again.)
ALL_FINISHED_TAG = "mtc.all_trials_finished"


@dataclass(frozen=True)
class SweepPlan:
    """A sweep before anything is created: its settings, trials, output folder, the
    tags of its runs and its key (the parent run a resumed sweep finds); its data (``datasets``)
    is loaded when first used, so a finished sweep is found without reading its draws."""

    run: Settings
    trials: list[Trial]
    output_dir: Path
    tags: dict
    key: str
    loaded: dict | None = field(default=None, repr=False, compare=False)  # the datasets, when planning read them
    # trial key -> key of a fit that another sweep of its study has too (mtc.sweep.shared_fits)
    shared_fits: dict = field(default_factory=dict, repr=False, compare=False)
    # grid point label -> why its method cannot fit this data (left out before Ray: mtc.sweep.driver.runnable)
    unrunnable: dict = field(default_factory=dict, compare=False)

    @property
    def name(self) -> str:
        return self.run.sweep.name

    @functools.cached_property
    def datasets(self) -> dict:
        """Seed -> dataset (one shared object unless the data config draws per seed)."""
        return self.loaded if self.loaded is not None else self.run.data.draws(range(self.run.sweep.repeats))


def plan_sweep(run: Settings, load: bool = True, provenance: dict[str, str] | None = None) -> SweepPlan | None:
    """Check the output folder and the artifact folder (mtc.store.preflight) and hash the data
    (the hashes remembered beside the processed cache, else by loading it; with ``load`` False
    None instead of reading or building a corpus, while synthetic data, generated in memory, is
    drawn); creates nothing. ``provenance``: tracking.provenance_tags when the caller plans
    many sweeps (two git commands, 13 ms, once for all). Before running it, check_plan (the
    driver)."""
    sweep = run.sweep
    output_dir = sweep.output_dir / sweep.name
    preflight.check_writable(output_dir)
    if run.tracking.artifact_root and "://" not in run.tracking.artifact_root:
        preflight.check_writable(Path(run.tracking.artifact_root), "artifact folder", "mlflow.artifact_root")
    disk.watch(run)  # a full disk that Ray Tune's errors do not name is told by its folder
    hashes, datasets = run.data.remembered_hashes(range(sweep.repeats)), None
    if hashes is None:
        if not (load or run.data.in_memory):
            return None
        datasets = run.data.draws(range(sweep.repeats))
    data_tags = tracking.draws_tags(datasets) if datasets is not None else tracking.hashes_tags(hashes)
    tags = {**data_tags, **(provenance or tracking.provenance_tags("python -m mtc.sweep")),
            "mtc.method": run.method.name, "mtc.label": sweep.label, "mtc.data": run.data.name}
    # The name is part of the key: two sweeps of the same grid under different names (two
    # output folders, so two driver locks) must not resume into one parent run.
    key = stable_hash(sweep.name, run.method.name, run.method.params, run.method.grid, sweep.repeats,
                      run.data.resolved, tags[tracking.DATASET_HASH_TAG])
    return SweepPlan(run, trial_list(run.method, sweep.repeats), output_dir, tags, key, datasets)


def trials_digest(trials: list[Trial]) -> str:
    """A digest of the trial keys a sweep plans (its grid points and seeds)."""
    return stable_hash(sorted(trial.key for trial in trials))


def print_report(markdown: str, output_dir: Path, tracking_uri: str, experiment_id: str, parent_id: str,
                 labelled: bool) -> None:
    """The report, where it was written and the MLflow links, sorted by accuracy when the data
    has labels, else by silhouette."""
    print(markdown)
    sort_metric = CRITERIA["acc" if labelled else "silhouette"][0]
    print(f"report: {output_dir / 'report.md'}\n" + tracking.links(tracking_uri, experiment_id, parent_id, sort_metric))


def report_stored(plan: SweepPlan) -> bool:
    """Report a finished sweep from the report its driver logged (mtc.store.stored_report: a
    SQLite store, read without MLflow's client), copied into its output folder; False when
    that store cannot tell, and the driver reads the runs back instead. Like that re-report,
    it starts no Ray and writes nothing to the store."""
    run = plan.run
    if not run.sweep.resume:
        return False
    stored = stored_report(run.tracking.uri, run.tracking.experiment, plan.key, tracking.SWEEP_KEY_TAG,
                           trials_digest(plan.trials), ALL_FINISHED_TAG)
    if stored is None:
        return False
    plan.output_dir.mkdir(parents=True, exist_ok=True)
    for name in REPORT_FILES:
        shutil.copyfile(stored.folder / name, plan.output_dir / name)
    print(f"sweep {plan.name}: all {len(plan.trials)} trials already finished, MLflow parent run {stored.parent_id}; "
          "its report as logged when it finished (no Ray)")
    print_report((plan.output_dir / "report.md").read_text(), plan.output_dir, run.tracking.uri,
                 stored.experiment_id, stored.parent_id, stored.labelled)
    return True
