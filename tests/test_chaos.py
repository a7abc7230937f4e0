"""Issue 81's chaos run, short (benchmarks/chaos_run.py runs it for 30 minutes): a small study on
the three-host cluster of tests/netns_cluster.py, first without faults, then in a fresh
experiment while one fault of each kind hits it at a random moment (a worker host's Ray, the
tracking server, PostgreSQL, the driver; each brought back as an operator does). Every planned
trial ends with one FINISHED run, every finished run's files are readable, the compare folder's
cells equal those of the run without faults, and nothing is left behind."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import chaos_run  # noqa: E402
from netns_cluster import PLUGIN, NetnsCluster, unavailable  # noqa: E402

pytestmark = pytest.mark.slow

SEED = 0
SHARE = 0.5  # the faults fall in the first half of the run without faults' span of trials
REPEATS = 10
# The slow toy (its fits sleep 2 s) on its two grid points and k-means, 10 seeds each: 30 trials,
# about 15 s of trials on the workers' 4 CPUs.
STUDY = """\
sweeps:
  - methods: [slow, kmeans]
    data: [synthetic]
compare:
  - out: compare
    benchmarks: [synthetic]
"""
OVERRIDES = (f"hydra.searchpath=[file://{PLUGIN / 'conf'}]", f"sweep.repeats={REPEATS}", "data.params.n_tasks=2",
             "data.params.samples_per_cluster=10", *chaos_run.SETTINGS)


@pytest.fixture(scope="module")
def cluster():
    reason = unavailable()
    if reason:
        pytest.skip(f"no network namespaces here: {reason}")
    with NetnsCluster(chaos_run.cluster_env(), workers=2, worker_cpus=2, head_env=chaos_run.HEALTH_CHECKS) as started:
        yield started


def test_a_study_loses_nothing_while_each_part_of_the_cluster_is_killed_once(cluster, tmp_path):
    study = chaos_run.Study(STUDY, OVERRIDES)
    reference = chaos_run.run_study(cluster, study, tmp_path / "reference", "reference", [], max_runs=1)
    faults = chaos_run.plan_faults(random.Random(SEED), len(chaos_run.KINDS), chaos_run.fault_window(reference, SHARE))
    faulted = chaos_run.run_study(cluster, study, tmp_path / "faults", "faults", faults, max_runs=8)
    checks = chaos_run.verify(cluster, faulted, reference)
    print("\n" + "\n".join(f"{e.at:.1f} s {e.kind}: {e.killed}; {e.back} ({e.seconds:.1f} s)" for e in faulted.events))
    print("\n".join(chaos_run.summary(reference, faulted, checks)))
    trials = 3 * REPEATS  # the slow toy's two grid points and k-means' one
    assert sorted(event.kind for event in faulted.faults) == sorted(chaos_run.KINDS)
    assert checks.planned == checks.finished == trials
    assert checks.lost == checks.duplicated == 0
    assert checks.statuses == {"FINISHED": trials}  # none RUNNING, FAILED or KILLED
    assert checks.parents == {"FINISHED": 2}
    assert checks.runs_read == trials + 2 and checks.files_read > 2 * checks.runs_read and not checks.unreadable
    assert checks.cells > 0 and not checks.cells_differ and checks.seeds_differ == 0, checks.cells_lines
    assert checks.strays == [] and checks.locks == [] and checks.leases == []
    assert len(faulted.runs) >= 2 and faulted.runs[-1].code == 0  # the driver's fault: the same command again
    assert len(reference.runs) == 1 and reference.faults == []
