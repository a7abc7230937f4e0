"""What tracking costs: a tracked study against the same trials untracked, and the store per trial.

    MTC_DATA_DIR=../shared/data python benchmarks/tracking_cost.py [--problems P ...] [--reuters]
        [--server] [--database] [--no-sqlite]

1. SMT-NMF's Table 5 protocol (the seven table rows x 4 sizes x 30 draws) on ``--problems``
   (default: all four of the study) untracked, ``benchmarks/paper_protocol.py smtnmf`` on all
   CPUs, then the same sweeps tracked, ``mtc.reproduce.run_study`` into a fresh SQLite store (one
   driver, one Ray session, one Tuner), one after the other;
2. prints both wall times, their ratio, the platform time per trial ((tracked - untracked) /
   trials), the store per trial (mlflow.db plus artifacts) and the time to run the finished
   study again (no Ray); then, from the tracked store alone (so a machine whose speed drifts
   between the two sides does not move it), the wall from the first fit's start to the last
   run's end against the fits' own seconds: the platform's cost per trial while the trials
   run, as a share of the fit, apart from what the study pays once (Ray's and the store's
   start, the Tuner's and its workers' start before the first fit, the last reports after the
   last run);
3. with ``--reuters``, the README's sweep (MTCMRL on Reuters, 250 trials) tracked, and its
   store per trial;
4. with ``--server``, the tracked study once more against a tracking server (mtc.stack:
   PostgreSQL + ``mlflow server``, started in a fresh folder under /var/tmp on free ports and
   stopped at the end): its wall time, ratio and platform time per trial (the store is
   PostgreSQL's and the server's artifact folder, not measured);
5. with ``--database``, the tracked study once more straight into that stack's PostgreSQL
   (``mlflow.tracking_uri=postgresql+psycopg2://...``, artifacts in a folder the workers
   write): each Tune trial's runs in one transaction (mtc.store.run_writer) instead of four
   requests per run through the server, which still serves the UI and every reader;
6. ``--no-sqlite`` skips step 1's SQLite store (the untracked side always runs: every ratio
   needs it; ``--reuters`` still writes to SQLite).

Run it on a quiet machine: both sides use every CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mtc import reproduce

TABLE_ROWS = ("smtnmf", "smtnmf_snmf", "smtnmf_a_snmf", "smtnmf_ncut", "smtnmf_a_ncut", "kmeans", "a_kmeans")
ROOT = Path(__file__).resolve().parents[1]


def store_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def store_overrides(folder: Path, server: str | None = None) -> list[str]:
    if server and server.startswith("http"):
        return [f"output_dir={folder / 'outputs'}", f"mlflow.tracking_uri={server}"]
    if server:  # a database: the experiment's artifacts in a local folder (shared storage on a cluster)
        return [f"output_dir={folder / 'outputs'}", f"mlflow.tracking_uri={server}",
                f"mlflow.artifact_root={folder / 'artifacts'}", "mlflow.experiment=mtc-direct"]
    return [f"output_dir={folder / 'outputs'}", f"mlflow.tracking_uri=sqlite:///{folder / 'mlflow.db'}",
            f"mlflow.artifact_root={folder / 'mlartifacts'}"]


def tracked(study: reproduce.Study, folder: Path, server: str | None = None) -> tuple[float, int, float]:
    """Run the study into a fresh store (SQLite in ``folder``, else the ``server``'s fresh
    database); returns wall seconds, trials and the rerun's seconds."""
    plans = reproduce.plan_study(study, store_overrides(folder, server), [])
    start = time.perf_counter()
    reproduce.run_study(study, plans)
    wall = time.perf_counter() - start
    start = time.perf_counter()
    again = reproduce.run_study(study, reproduce.plan_study(study, store_overrides(folder, server), []))
    assert not again["ray_started"]
    return wall, sum(len(p.trials) for p in plans), time.perf_counter() - start


def untracked(problems: list[str], folder: Path) -> tuple[float, int]:
    """benchmarks/paper_protocol.py smtnmf on the problems; returns its wall seconds and trials."""
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "paper_protocol.py"), "smtnmf", "--problems",
                           *problems, "--out", str(folder)], capture_output=True, text=True, check=True)
    found = re.search(r"(\d+) trials in ([\d.]+) s wall", done.stdout)
    return float(found.group(2)), int(found.group(1))


def smtnmf_table(problems: list[str]) -> reproduce.Study:
    """The smtnmf study's sweeps of the table's rows (no variant labels) on the problems, no compare."""
    study = reproduce.load_study("smtnmf")
    keep = [s for s in study.sweeps if s[0].removeprefix("method=") in TABLE_ROWS
            and s[1].removeprefix("data=") in problems and not any(o.startswith("sweep.label=") for o in s)]
    return reproduce.Study("smtnmf_table", tuple(keep), ())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=["webkb_pp", "smtnmf_reuters_orgs_vs_people",
                                                          "smtnmf_reuters_orgs_vs_places",
                                                          "smtnmf_reuters_people_vs_places"])
    parser.add_argument("--reuters", action="store_true", help="also the README's MTCMRL sweep on Reuters")
    parser.add_argument("--server", action="store_true", help="also the tracked study against a tracking server")
    parser.add_argument("--database", action="store_true",
                        help="also the tracked study straight into the tracking server's PostgreSQL")
    parser.add_argument("--no-sqlite", action="store_true", help="skip the tracked study's SQLite store")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="mtc-tracking-cost-"))
    plain_wall, plain_trials = untracked(args.problems, base / "untracked")
    print(f"SMT-NMF Table 5 on {' '.join(args.problems)}")
    print(f"  untracked: {plain_trials} trials in {plain_wall:.1f} s wall")
    if not args.no_sqlite:
        on_sqlite(smtnmf_table(args.problems), base, plain_wall)
    if args.reuters:
        study = reproduce.Study("reuters", (("method=mtcmrl", "data=reuters"),), ())
        wall, trials, rerun = tracked(study, base / "reuters")
        size = store_bytes(base / "reuters" / "mlartifacts") + (base / "reuters" / "mlflow.db").stat().st_size
        print(f"MTCMRL on Reuters: {trials} trials in {wall:.1f} s wall (Ray start included); store per trial "
              f"{size / trials / 1024:.1f} KB; run again: {rerun:.2f} s, no Ray")
    if args.server or args.database:
        on_stack(smtnmf_table(args.problems), plain_wall, args.server, args.database)
    print(f"stores in {base}")


def on_sqlite(study: reproduce.Study, base: Path, plain_wall: float) -> None:
    """The tracked study into a fresh SQLite store; prints its wall time, ratio, platform cost
    and store per trial."""
    wall, trials, rerun = tracked(study, base / "tracked")
    size = store_bytes(base / "tracked" / "mlartifacts") + (base / "tracked" / "mlflow.db").stat().st_size
    print(f"  tracked:   {trials} trials in {wall:.1f} s wall (one study: one Ray session, one Tuner)")
    print(f"  ratio tracked / untracked: {wall / plain_wall:.2f}")
    print(f"  platform time per trial: {1000 * (wall - plain_wall) / trials:.1f} ms")
    print(f"  store per trial: {size / trials / 1024:.1f} KB (mlflow.db {(base / 'tracked' / 'mlflow.db').stat().st_size / 1e6:.1f} MB, "
          f"artifacts {store_bytes(base / 'tracked' / 'mlartifacts') / 1e6:.1f} MB)")
    print(f"  the finished study run again: {rerun:.2f} s, no Ray")
    first_fit, last_end, fits, runs = fits_span(base / "tracked" / "mlflow.db")
    cores = os.cpu_count()
    span = last_end - first_fit
    per_trial = 1000 * (cores * span - fits) / runs
    print(f"  from the first fit's start to the last run's end: {span:.1f} s wall; the {runs} fits "
          f"{fits:.1f} s ({fits / cores:.1f} s on {cores} cores); platform per trial in that span "
          f"{per_trial:.1f} ms of a core, {per_trial / (1000 * fits / runs):.2f} of a fit; the rest of the "
          f"tracked wall, {wall - span:.1f} s, is paid once by the study")


def fits_span(database: Path) -> tuple[float, float, float, int]:
    """(first fit's start, last run's end, summed fit_seconds, runs) over the store's runs that
    have a fit (a fit_seconds metric), in seconds."""
    with contextlib.closing(sqlite3.connect(database)) as connection:
        return connection.execute(
            "SELECT min(start_time) / 1000.0, max(end_time) / 1000.0, sum(value), count(*) FROM runs "
            "JOIN latest_metrics USING (run_uuid) WHERE key = 'fit_seconds'").fetchone()


def on_stack(study: reproduce.Study, plain_wall: float, server: bool, database: bool) -> None:
    """The tracked study against a fresh mtc.stack: through its tracking server (``server``)
    and straight into its PostgreSQL (``database``); prints each one's wall time and platform
    cost."""
    from mtc.stack import server as stack
    from mtc.stack.loopback import free_port

    root = Path(tempfile.mkdtemp(prefix="mtc-tracking-cost-server-", dir="/var/tmp"))
    os.chmod(root, 0o755)  # the postgres user reaches the stack folder
    try:
        running = stack.start(root / "stack", port=free_port(), db_port=free_port())
        routes = []
        if server:
            routes.append((f"against the tracking server {running.tracking_uri}", running.tracking_uri, "server"))
        if database:
            routes.append((f"straight into its PostgreSQL {running.database_uri()}", running.database_uri(), "database"))
        for what, uri, folder in routes:
            wall, trials, rerun = tracked(study, root / folder, uri)
            print(f"SMT-NMF Table 5 {what} (mtc.stack, PostgreSQL)")
            print(f"  tracked:   {trials} trials in {wall:.1f} s wall (one study: one Ray session, one Tuner)")
            print(f"  ratio tracked / untracked: {wall / plain_wall:.2f}")
            print(f"  platform time per trial: {1000 * (wall - plain_wall) / trials:.1f} ms")
            print(f"  the finished study run again: {rerun:.2f} s, no Ray")
    finally:
        stack.stop(root / "stack")
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
