"""The dry run's estimates against the runs they predict (issue 80, item 7).

For each case (a study with its overrides, or every_method on a table made here), in a fresh
folder with a fresh SQLite store, as a user types it:

1. ``python -m mtc.reproduce <case> --dry-run``, timed: its estimate per sweep and in total,
   made before anything ran (no store: no stored fit times; cost curves or one small fit);
2. ``python -m mtc.reproduce <case>``, timed: the run it predicts;
3. the dry run again with ``sweep.resume=false`` (every sweep counted as to run), now from the
   store's fit times (tier 1 for every sweep);

then, per sweep, both estimates against what the run's store measured: the sweep's fits over
the parallel slots (the sum of its runs' ``fit_seconds``, those read from another sweep's fit
left out) and its trials' spans (fit and scores), each sweep's ratio estimate / measured, and
the totals against the command's wall. The platform's share is measured from the store too:
the parent runs' wall (first opened to last closed) times the slots, less every trial's fit,
per trial (what mtc.sweep.estimates.TRIAL_SECONDS stands for); the command's wall less the
parents' wall, the compare folders and the planning (Ray's start and stop, RAY_SECONDS).

    MTC_DATA_DIR=../shared/data .venv/bin/python benchmarks/dry_run_estimates.py \\
        --out /tmp/dry_run_estimates --cases baselines breast_cancer

Cases: ``baselines`` (3 sweeps, 30 trials), ``breast_cancer`` (every_method on scikit-learn's
breast-cancer table in two halves, 3 seeds: 27 sweeps, 1,251 trials), ``mtcmrl_reuters`` and
``mtcmrl_webkb4`` (``mtcmrl --only reuters`` / ``webkb4``).

``--curves`` instead writes mtc/sweep/cost_curves.csv, the dry run's cost curves: for every
method config, the seconds of benchmarks/scaling.py's docs/results/scaling.csv for its family
(the config itself, or the nearest class of its solver's MRO), times the config's fit over the
family's fit measured side by side here on the same 20 Newsgroups draws (CURVE_SIZES samples per
task, one BLAS thread, a fresh cache: a sweep worker's first fit), with the share of that fit
not spent in cached steps, the entries a row of the draws holds (non-zeros a row; the features
for the methods scaling.py fed dense rows) and whether the family's time grows with them. About
ten minutes on 2 cores (MTCFIR and its ablations at 2,000 samples per task the most):

    MTC_DATA_DIR=../shared/data .venv/bin/python benchmarks/dry_run_estimates.py --curves
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^(\S+)\s+(\d+) trials\s+(.+?)(?:  about (\d+(?:\.\d+)?) (s|min) \((.*)\))?(?:; .*)?$")
CASES = {
    "baselines": ["baselines"],
    "breast_cancer": ["every_method", "data=files", "data.params.paths=[t1.csv,t2.csv]",
                      "data.params.label_column=label", "data.name=bc", "sweep.repeats=3"],
    "mtcmrl_reuters": ["mtcmrl", "--only", "reuters"],
    "mtcmrl_webkb4": ["mtcmrl", "--only", "webkb4"],
}


# --- the cost curves (--curves) ------------------------------------------------------------
CURVE_SIZES = (500, 1000, 2000)  # samples per task of the side-by-side fits (--curves)


def config_solver(name: str, n_clusters: list[int], cache):
    """Method config ``name`` as a sweep builds it (its params), seed 0, with ``cache`` if it takes one."""
    from omegaconf import OmegaConf

    from mtc import CONF_DIR
    from mtc.config import method_configs

    params = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "method" / f"{name}.yaml")).get("params") or {}
    solver = method_configs()[name](n_clusters=n_clusters, random_state=0, **params)
    return solver.set_params(cache=cache) if "cache" in solver.get_params() else solver


def family(name: str, measured: set[str]) -> str | None:
    """The config of scaling.csv whose solver class is nearest in ``name``'s MRO, else one whose
    class derives from it (MKC: S-MKC's)."""
    from mtc.config import method_configs

    classes = method_configs()
    by_class = {classes[config]: config for config in sorted(measured)}
    found = next((by_class[cls] for cls in classes[name].__mro__ if cls in by_class), None)
    return found or next((config for cls, config in by_class.items() if issubclass(cls, classes[name])), None)


def one_fit(name: str, tasks: list) -> tuple[float, float]:
    """Seconds of one fit of config ``name`` with a fresh cache and one BLAS thread (as a sweep's
    worker fits its first), and the seconds of it spent in cached steps (a worker's next fits read them)."""
    from threadpoolctl import threadpool_limits

    from mtc.numerics.cache import Cache

    cache = Cache(size=2)
    solver = config_solver(name, [scaling_module().K] * len(tasks), cache)
    with threadpool_limits(limits=1):
        start = time.perf_counter()
        solver.fit(tasks)
        seconds = time.perf_counter() - start
    return seconds, min(sum(cache.compute_seconds.values()), seconds)


def scaling_module():
    sys.path.insert(0, str(Path(__file__).parent))
    import scaling

    return scaling


def curve_rows(scaling_csv: Path, cache: Path) -> list[dict]:
    """The rows of cost_curves.csv, for every method config of the package at the sizes of its
    family's curve in scaling.csv (the config itself, or the nearest class of its solver's MRO):
    the total samples (two tasks), the seconds (scaling.csv's, times the config's fit over its
    family's fit measured side by side here for a config scaling.csv lacks), the share of a fit
    that is not cached steps (measured here; beyond CURVE_SIZES, the largest's), the entries a
    row held and whether the dominant products read each stored entry of a row once per sample
    (scaling.py's EXPECTED exponent 1, on sparse rows: a method fed dense rows keeps other costs
    at other widths)."""
    from mtc.config import method_configs

    scaling = scaling_module()
    rows, half = scaling.corpus(cache)
    with open(scaling_csv, newline="") as handle:
        fitted = [row for row in csv.DictReader(handle) if row["status"] == "ok" and row["method"] in method_configs()]
    families = {name: family(name, {row["method"] for row in fitted}) for name in method_configs()}
    draws = {n: scaling.draw_tasks(rows, half, n) for n in CURVE_SIZES}
    entries = {n: sum(X.nnz for X in scaling.draw_tasks(rows, half, n)) / (2 * n)
               for n in {int(row["n"]) for row in fitted}}
    side_by_side = {}
    for name in sorted(method_configs()):
        if families[name] is None:
            continue
        dense = families[name] in scaling.DENSE
        for n, tasks in draws.items():
            side_by_side[name, n] = one_fit(name, [X.toarray() for X in tasks] if dense else tasks)
            print(f"{name} n={n}: {side_by_side[name, n][0]:.3f} s, cached steps {side_by_side[name, n][1]:.3f} s",
                  flush=True)
    out = []
    for name, of in sorted(families.items()):
        measured = [(n, *side_by_side[name, n], side_by_side[of, n][0]) for n in CURVE_SIZES] if of else []
        for row in (row for row in fitted if row["method"] == of):
            n = int(row["n"])
            near = min(measured, key=lambda m: abs(np.log(m[0] / n)))  # the side-by-side fit nearest in size
            _, seconds, cached, family_seconds = near
            out.append({"method": name, "samples": 2 * n,
                        "seconds": round(float(row["seconds"]) * (1.0 if name == of else seconds / family_seconds), 4),
                        "fit_share": round(1 - cached / seconds, 3),
                        "row_entries": scaling.N_FEATURES if of in scaling.DENSE else round(entries[n], 2),
                        "per_entry": int(scaling.EXPECTED[of][0] == 1 and of not in scaling.DENSE)})
    return out


def write_curves(scaling_csv: Path, cache: Path, out: Path) -> None:
    rows = curve_rows(scaling_csv, cache)
    with open(out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, ["method", "samples", "seconds", "fit_share", "row_entries", "per_entry"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} rows of {len({row['method'] for row in rows})} methods -> {out}")


# --- one case: dry run, run, dry run again -------------------------------------------------
def breast_cancer_tables(folder: Path) -> None:
    """scikit-learn's breast-cancer table in two stratified halves, t1.csv and t2.csv, with a
    label column (as tests/test_own_data.py's fixture makes them)."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    frame = load_breast_cancer(as_frame=True).frame.rename(columns={"target": "label"})
    first, second = train_test_split(frame, test_size=0.5, stratify=frame.label, random_state=0)
    first.to_csv(folder / "t1.csv", index=False)
    second.to_csv(folder / "t2.csv", index=False)


def command(folder: Path, args: list[str]) -> tuple[float, str]:
    """``python -m mtc.reproduce <args>`` in ``folder`` with its own store (and this data root,
    made absolute): wall seconds and stdout."""
    from mtc.data.sources import data_root

    store = [f"mlflow.tracking_uri=sqlite:///{folder / 'mlflow.db'}", f"output_dir={folder / 'outputs'}"]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mtc.reproduce", *args, *store], cwd=folder, capture_output=True,
                          text=True, check=False, env={**os.environ, "MTC_DATA_DIR": str(data_root())})
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds, done.stdout


def estimates(text: str) -> tuple[dict[str, tuple[float, str]], float | None, int]:
    """A dry run's seconds and source per sweep to run, its estimated total and parallel slots."""
    found = {}
    for line in text.splitlines():
        match = LINE.match(line)
        if match and match.group(4):
            found[match.group(1)] = (float(match.group(4)) * (60 if match.group(5) == "min" else 1), match.group(6))
    total = re.search(r"estimated (\d+(?:\.\d+)?) (s|min) in all", text)
    slots = re.search(r"on (\d+) parallel trials", text)
    seconds = float(total.group(1)) * (60 if total.group(2) == "min" else 1) if total else None
    return found, seconds, int(slots.group(1)) if slots else 1


def measured(store: Path) -> tuple[dict[str, dict], tuple[float, float]]:
    """Per sweep (parent run name): its trials, the sum of their fit seconds (fits read from another
    sweep's left out) and of their spans; and the parent runs' first start and last end (s)."""
    with sqlite3.connect(store) as db:
        parents = dict(db.execute("select r.run_uuid, r.name from runs r join tags t on t.run_uuid = r.run_uuid "
                                  "and t.key = 'mtc.sweep_key'"))  # the sweeps' parent runs, not the compares'
        metric = "(select value from metrics m where m.run_uuid = r.run_uuid and m.key = '{}')"
        rows = db.execute(f"""select p.value, r.start_time, r.end_time, {metric.format('fit_seconds')},
                                     {metric.format('fit_read')}
                              from runs r join tags p on p.run_uuid = r.run_uuid and p.key = 'mlflow.parentRunId'""")
        sweeps: dict[str, dict] = {}
        for parent, start, end, fit, read in rows:
            sweep = sweeps.setdefault(parents.get(parent, parent), {"trials": 0, "fits": 0.0, "spans": 0.0})
            sweep["trials"] += 1
            sweep["fits"] += (fit or 0.0) if not read else 0.0
            sweep["spans"] += (end - start) / 1000
        span = db.execute("select min(start_time), max(end_time) from runs where run_uuid in "
                          f"({','.join(repr(p) for p in parents)})").fetchone()
    return {name: sweep for name, sweep in sweeps.items() if name in set(parents.values())}, \
        (span[0] / 1000, span[1] / 1000)


def run_case(name: str, args: list[str], out: Path) -> dict:
    folder = out / name
    if folder.exists():
        raise SystemExit(f"{folder} exists: a case runs in a fresh folder and store (remove it)")
    folder.mkdir(parents=True)
    if name == "breast_cancer":
        breast_cancer_tables(folder)
    dry_seconds, dry = command(folder, [*args, "--dry-run"])
    print(f"== {name}: dry run on a fresh store, {dry_seconds:.1f} s wall\n{dry}", flush=True)
    run_seconds, ran = command(folder, args)
    print(f"== {name}: the run, {run_seconds:.1f} s wall\n{ran[-3000:]}", flush=True)
    # sweep.resume=false: the finished sweeps counted to run again, each estimated from the store's fit times
    again_seconds, again = command(folder, [*args, "--dry-run", "sweep.resume=false"])
    print(f"== {name}: dry run with the store's fit times, {again_seconds:.1f} s wall\n{again}", flush=True)
    return {"dry_seconds": dry_seconds, "dry": dry, "run_seconds": run_seconds, "ran": ran,
            "again_seconds": again_seconds, "again": again, "store": folder / "mlflow.db"}


def report(name: str, case: dict) -> list[str]:
    """The case's table: per sweep the fresh and stored estimates against the store's measure."""
    fresh, fresh_total, slots = estimates(case["dry"])
    stored, stored_total, _ = estimates(case["again"])
    sweeps, (first, last) = measured(case["store"])
    lines = [f"### {name}", "", f"dry run {case['dry_seconds']:.1f} s wall (again, from the store: "
             f"{case['again_seconds']:.1f} s); run {case['run_seconds']:.1f} s wall on {slots} slots", "",
             "| sweep | trials | estimate (fresh) | source | estimate (store) | fits / slots | trials' spans / slots "
             "| fresh / fits | store / fits |", "|---|---|---|---|---|---|---|---|---|"]
    for sweep, (seconds, source) in fresh.items():
        got = sweeps.get(sweep)
        if got is None:
            continue
        fits, spans = got["fits"] / slots, got["spans"] / slots
        again = stored.get(sweep, (float("nan"), ""))[0]
        lines.append(f"| {sweep} | {got['trials']} | {seconds:.1f} | {source} | {again:.1f} | {fits:.1f} | "
                     f"{spans:.1f} | {seconds / fits if fits else float('nan'):.2f} | "
                     f"{again / fits if fits else float('nan'):.2f} |")
    trials = sum(sweep["trials"] for sweep in sweeps.values())
    fits = sum(sweep["fits"] for sweep in sweeps.values())
    parents = last - first
    study = re.search(r"study \S+: .*, (\d+(?:\.\d+)?) s", case["ran"].splitlines()[-1])
    compares = sum(float(x) for x in re.findall(r"compared \d+ sweeps into .* in (\d+(?:\.\d+)?) s", case["ran"]))
    study_seconds = float(study.group(1)) if study else float("nan")
    lines += ["", f"- total: estimated {fresh_total or 0:.0f} s fresh, {stored_total or 0:.0f} s from the store; "
              f"the run took {case['run_seconds']:.0f} s (ratio {(fresh_total or 0) / case['run_seconds']:.2f} fresh, "
              f"{(stored_total or 0) / case['run_seconds']:.2f} from the store)",
              f"- the fits: {fits:.1f} s of {trials} trials ({fits / slots:.1f} s on {slots} slots); the parent runs' "
              f"wall {parents:.1f} s",
              f"- the platform per trial: {(parents * slots - fits) / max(trials, 1) * 1000:.1f} ms of a slot "
              "(parents' wall x slots less the fits, per trial)",
              f"- beyond the parents' wall: the study's own {study_seconds:.1f} s less {parents:.1f} s and the "
              f"compares' {compares:.1f} s = {study_seconds - parents - compares:.1f} s (Ray's start and stop); the "
              f"command's wall less the study's: {case['run_seconds'] - study_seconds:.1f} s (start and planning)", ""]
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", default=["baselines", "breast_cancer"], choices=sorted(CASES))
    parser.add_argument("--out", type=Path, default=Path("outputs/dry_run_estimates"))
    parser.add_argument("--curves", action="store_true", help="write mtc/sweep/cost_curves.csv and stop")
    parser.add_argument("--scaling-csv", type=Path, default=REPO / "docs" / "results" / "scaling.csv")
    parser.add_argument("--cache", type=Path, default=REPO / "outputs" / "scaling" / "20ng_tfidf.npz",
                        help="benchmarks/scaling.py's tf-idf cache (built when missing)")
    args = parser.parse_args(argv)
    if args.curves:
        write_curves(args.scaling_csv, args.cache, REPO / "mtc" / "sweep" / "cost_curves.csv")
        return 0
    lines = []
    for name in args.cases:
        lines += report(name, run_case(name, CASES[name], args.out.resolve()))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
