"""Sweep overhead: wall time per trial beyond the fit itself, and how busy the CPUs are.

    python benchmarks/sweep_overhead.py [n_points] [repeats] [seeds_per_trial]

Runs k-means (n_init=1) on a tiny synthetic dataset as a grid of n_points points x repeats
seeds (default 40 x 1) on local Ray with all CPUs, with sweep.seeds_per_trial (default
auto), then prints: Tuner wall time (Ray start-up excluded), the summed fit time
read back from MLflow, the overhead per trial = (wall x CPUs - summed fit) / n_trials, and
the machine's CPU utilisation during the Tuner (from /proc/stat).
"""

import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from mtc.cli import compose_config
from mtc.config import settings
from mtc.store import tracking
from mtc.sweep.driver import run_sweep


def cpu_times():
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def main(n_points: int = 40, repeats: int = 1, seeds_per_trial: str = "auto"):
    tmp = Path(tempfile.mkdtemp(prefix="mtc-bench-"))
    cfg = compose_config([
        f"output_dir={tmp}", f"mlflow.tracking_uri=sqlite:///{tmp / 'mlflow.db'}",
        f"mlflow.artifact_root={tmp / 'artifacts'}", "sweep.verbose=0", "method=kmeans",
        "++method.params.n_init=1", f"++method.grid.max_iter=[{','.join(str(300 + i) for i in range(n_points))}]",
        f"sweep.repeats={repeats}", f"sweep.seeds_per_trial={seeds_per_trial}", "data.params.n_tasks=2", "data.params.samples_per_cluster=20",
    ])
    samples = []
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            samples.append((time.perf_counter(), *cpu_times()))
            time.sleep(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    result = run_sweep(settings(cfg))
    stop.set()
    sampler.join()
    client = tracking.client_for(result.tracking_uri)
    runs = tracking.find_runs(client, result.experiment_id, **{tracking.PARENT_TAG: result.parent_run_id})
    fit_total = sum(run.data.metrics["fit_seconds"] for run in runs)
    cpus = os.cpu_count()
    wall = result.tuner.seconds
    # utilisation over the busiest window as long as the Tuner ran
    best = 0.0
    for i, (t0, busy0, total0) in enumerate(samples):
        for t1, busy1, total1 in samples[i + 1:]:
            if t1 - t0 >= 0.8 * wall:
                best = max(best, (busy1 - busy0) / max(total1 - total0, 1))
                break
    print(f"trials: {result.trials_run} in {result.tuner.tune_trials} Ray Tune trials  CPUs: {cpus}")
    print(f"Tuner wall time (Ray start-up excluded): {wall:.2f} s")
    print(f"summed fit time: {fit_total:.2f} s (mean {fit_total / len(runs):.3f} s per trial)")
    print(f"overhead per trial beyond the fit: {(wall * cpus - fit_total) / len(runs):.3f} s of a CPU "
          f"({(wall - fit_total / cpus) / len(runs):.3f} s of wall time)")
    print(f"CPU utilisation while trials ran: {100 * best:.0f}%")


if __name__ == "__main__":
    main(*(int(arg) if arg.isdigit() else arg for arg in sys.argv[1:4]))
