"""A trial's time in a worker beside its fit: scoring and the run record, one thread, no Ray.

    MTC_DATA_DIR=../shared/data python benchmarks/trial_scoring.py [override ...]

Fits the first 320 trials of the sweep the Hydra overrides give (default: ``method=smtnmf
data=smtnmf_reuters_orgs_vs_people sweep.repeats=30``, SMT-NMF on 30 of its Reuters orgs vs
people draws), timing the last 300 (the first 20 warm the caches), with one Cache, as one worker
of a sweep does, through mtc.trial.run_trial (the fit, the scores, the silhouette, the named
matrices) and tracking.trial_record (the run's rows and files, not written), and prints per
trial: the fit, the rest of run_trial, and trial_record. Writing the runs to a store and Ray
Tune's loop come on top (benchmarks/tracking_cost.py).
"""

import sys
import tempfile
import time
from pathlib import Path

from threadpoolctl import threadpool_limits

from mtc.cli import compose_config
from mtc.config import settings
from mtc.numerics.cache import Cache
from mtc.store import tracking
from mtc.sweep.planning import plan_sweep
from mtc.trial import run_trial, trial_params

WARM_UP, TIMED = 20, 300
DEFAULT = ["method=smtnmf", "data=smtnmf_reuters_orgs_vs_people", "sweep.repeats=30"]


def main(overrides: list[str]):
    folder = Path(tempfile.mkdtemp(prefix="mtc-trial-scoring-"))
    run = settings(compose_config([*(overrides or DEFAULT), f"output_dir={folder}",
                                   f"mlflow.tracking_uri=sqlite:///{folder / 'mlflow.db'}"]))
    plan = plan_sweep(run)
    datasets = plan.datasets
    prototype = run.method.prototype(n_clusters=datasets[min(datasets)].n_clusters)
    chosen = plan.trials[:WARM_UP + TIMED]
    cache, fit, rest, record = Cache(size=4), 0.0, 0.0, 0.0
    with threadpool_limits(1):
        for index, trial in enumerate(chosen):
            dataset = datasets[trial.seed]
            start = time.perf_counter()
            outcome = run_trial(dataset, prototype, trial, cache)
            scored = time.perf_counter()
            config = trial_params(run.method.name, prototype, trial, run.data.resolved)
            tracking.trial_record("0" * 32, trial, {}, 0, outcome, config, dataset.task_names, None)
            if index >= WARM_UP:
                fit += outcome.metrics["fit_seconds"]
                rest += scored - start - outcome.metrics["fit_seconds"]
                record += time.perf_counter() - scored
    timed = len(chosen) - WARM_UP
    print(f"{run.method.name} on {run.data.name}, {timed} trials after {WARM_UP}: fit {1e3 * fit / timed:.2f} ms, the rest of run_trial "
          f"{1e3 * rest / timed:.2f} ms, trial_record {1e3 * record / timed:.2f} ms a trial")


if __name__ == "__main__":
    main(sys.argv[1:])
