"""Which feature scale should a table get by default? Every method config on labelled tables
that ship inside Python packages, each split into two tasks, under every scale of
mtc.data.scaling.

Data sets (rows with a missing value dropped; the label column is the class):

- scikit-learn: ``iris`` (150 x 4, 3 classes), ``wine`` (178 x 13, 3), ``breast_cancer``
  (569 x 30, 2), ``digits`` (1797 x 64, 10);
- palmerpenguins: ``penguins`` (333 x 4 measurements, 3 species);
- vega_datasets (its locally shipped files): ``cars`` (392 x 6, origin: 3 classes) and
  ``seattle_weather`` (1461 x 4, 5 weather kinds, signed temperatures).

Each is split into two tasks by a stratified random half (seed 0): both tasks have every
class, so every method can run. Each method runs at its config's defaults (what
``python -m mtc.run`` fits; no grid search, which would choose by the labels) for ``--seeds``
seeds, the scaler fitted on the pooled tasks (the platform's default ``scale_fit``). A fit
that the method refuses (input needs, e.g. negative values for SMT-NMF) is recorded as such.

The rule (issue 48): for a method and data set, a scale "wins" when its mean accuracy over
tasks and seeds is within ``--within`` (one point) of that method's best scale there; a
method's best scales are those that win on the most data sets; the default for a group of
methods with the same input needs is the scale that is best for the most of them.

    .venv/bin/pip install -q palmerpenguins vega_datasets
    .venv/bin/python benchmarks/scale_study.py --out outputs/scale_study \\
        --markdown docs/results/scaling_study.md

Writes ``fits.csv`` (one row per method, data set, scale and seed; rerun: rows already there
are kept, so an interrupted study resumes) and the tables into ``--markdown``.
"""

from __future__ import annotations

import argparse
import csv
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

from mtc.config import method_configs
from mtc.data.scaling import SCALES, scaled
from mtc.errors import InputError
from mtc.metrics import score_task

FIELDS = ["method", "data", "scale", "seed", "status", "acc", "nmi_max", "degenerate_tasks", "fit_seconds", "error"]


def sklearn_table(loader) -> tuple[np.ndarray, np.ndarray]:
    bunch = loader()
    return bunch.data.astype(float), bunch.target


def frame_table(frame: pd.DataFrame, label: str, features: list[str]) -> tuple[np.ndarray, np.ndarray]:
    frame = frame[[*features, label]].dropna()
    return frame[features].to_numpy(float), pd.factorize(frame[label])[0]


def tables() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Every data set as (features, labels)."""
    from palmerpenguins import load_penguins
    from sklearn import datasets
    from vega_datasets import local_data

    return {
        "iris": sklearn_table(datasets.load_iris),
        "wine": sklearn_table(datasets.load_wine),
        "breast_cancer": sklearn_table(datasets.load_breast_cancer),
        "digits": sklearn_table(datasets.load_digits),
        "penguins": frame_table(load_penguins(), "species",
                                ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]),
        "cars": frame_table(local_data.cars(), "Origin", ["Miles_per_Gallon", "Cylinders", "Displacement",
                                                          "Horsepower", "Weight_in_lbs", "Acceleration"]),
        "seattle_weather": frame_table(local_data.seattle_weather(), "weather",
                                       ["precipitation", "temp_max", "temp_min", "wind"]),
    }


def two_tasks(X: np.ndarray, y: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """A stratified random half each (seed 0)."""
    rows_a, rows_b = train_test_split(np.arange(len(y)), test_size=0.5, stratify=y, random_state=0)
    return [X[rows_a], X[rows_b]], [y[rows_a], y[rows_b]]


def fit_row(solver_class, matrices, labels, seed) -> dict:
    k = int(len(np.unique(labels[0])))
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        solver = solver_class(n_clusters=k, random_state=seed).fit(matrices)
    scores = [score_task(y, p) for y, p in zip(labels, solver.labels_)]
    return {"status": "ok", "fit_seconds": round(time.perf_counter() - start, 4),
            "acc": float(np.mean([s["acc"] for s in scores])), "nmi_max": float(np.mean([s["nmi_max"] for s in scores])),
            "degenerate_tasks": int(np.count_nonzero(solver.degenerate_))}


def prototypes() -> dict:
    """Each method config's solver at the config's defaults (its non-grid params), as a class-like factory."""
    from mtc.cli import compose_config
    from mtc.config import method_spec

    made = {}
    for name in sorted(method_configs()):
        spec = method_spec(compose_config([f"method={name}", "data=synthetic"]))
        made[name] = lambda n_clusters, random_state, spec=spec: spec.prototype(
            n_clusters=n_clusters).set_params(random_state=random_state)
    return made


def run(out: Path, seeds: int, methods: list[str] | None) -> pd.DataFrame:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "fits.csv"
    done = set()
    if path.exists():
        done = {(r["method"], r["data"], r["scale"], int(r["seed"])) for r in csv.DictReader(path.open())}
    factories = prototypes()
    with path.open("a", newline="") as handle, threadpool_limits(1):
        writer = csv.DictWriter(handle, FIELDS)
        if not done:
            writer.writeheader()
        for data, (X, y) in tables().items():
            matrices, labels = two_tasks(X, y)
            for scale in SCALES:
                try:
                    tasks = scaled(matrices, scale)
                except InputError as error:
                    tasks, refusal = None, str(error).splitlines()[0]
                for method in methods or sorted(factories):
                    for seed in range(seeds):
                        if (method, data, scale, seed) in done:
                            continue
                        row = {"method": method, "data": data, "scale": scale, "seed": seed}
                        if tasks is None:
                            row.update(status="scale refused", error=refusal)
                        else:
                            try:
                                row.update(fit_row(factories[method], tasks, labels, seed))
                            except InputError as error:
                                row.update(status="method refused", error=str(error).splitlines()[0])
                        writer.writerow(row)
                        handle.flush()
                print(f"{data:16s} {scale:9s} done", flush=True)
    return pd.read_csv(path)


def wins(fits: pd.DataFrame, within: float) -> pd.DataFrame:
    """Per method, data set and scale: the mean accuracy and whether it is within ``within`` of
    the method's best scale on that data set."""
    means = fits[fits.status == "ok"].groupby(["method", "data", "scale"]).acc.mean().rename("acc").reset_index()
    best = means.groupby(["method", "data"]).acc.transform("max")
    return means.assign(wins=means.acc >= best - within)


def best_scales(table: pd.DataFrame) -> pd.DataFrame:
    """Per method: data sets won by each scale, and the scales that win the most."""
    counts = table.pivot_table(index="method", columns="scale", values="wins", aggfunc="sum").fillna(0).astype(int)
    counts["best"] = [", ".join(s for s in counts.columns if row[s] == row.max()) for _, row in counts.iterrows()]
    return counts


def needs_group(method: str) -> str:
    return "non_negative" if "non_negative" in method_configs()[method].input_needs else "any"


def markdown(fits: pd.DataFrame, within: float, seeds: int, command: str) -> str:
    table = wins(fits, within)
    counts = best_scales(table)
    mean_acc = table.pivot_table(index="method", columns="scale", values="acc", aggfunc="mean")
    lines = ["# Which scale for a table: the measurement behind data.params.scale=auto", "",
             f"Generated by `{command}`.", ""]
    for group in ("any", "non_negative"):
        members = [m for m in counts.index if needs_group(m) == group]
        if not members:
            continue
        tally = {scale: sum(scale in counts.loc[m, "best"].split(", ") for m in members) for scale in SCALES}
        lines += [f"## methods whose input needs are: {group}", "",
                  f"{len(members)} methods; methods for which each scale wins on the most data sets "
                  f"(within {within:.2f} accuracy of the best scale, ties count for each):", "",
                  "| scale | methods |", "|---|---|", *[f"| {s} | {n} |" for s, n in tally.items()], "",
                  f"**default: {max(tally, key=tally.get)}**", ""]
    lines += ["## data sets won per method and scale", "",
              "| method | " + " | ".join(SCALES) + " | best |", "|---" * (len(SCALES) + 2) + "|"]
    lines += [f"| {m} | " + " | ".join(str(counts.loc[m].get(s, 0)) for s in SCALES) + f" | {counts.loc[m, 'best']} |"
              for m in counts.index]
    lines += ["", f"## mean accuracy over data sets (mean over tasks and {seeds} seeds, then data sets)", "",
              "| method | " + " | ".join(SCALES) + " |", "|---" * (len(SCALES) + 1) + "|"]
    lines += [f"| {m} | " + " | ".join(f"{mean_acc.loc[m].get(s, np.nan):.3f}" for s in SCALES) + " |"
              for m in mean_acc.index]
    refused = fits[fits.status != "ok"].groupby(["status", "error"]).size()
    if len(refused):
        lines += ["", "## fits not run", ""] + [f"- {n} fits, {status}: {error}" for (status, error), n in refused.items()]
    degenerate = fits[fits.status == "ok"].groupby("scale").degenerate_tasks.apply(lambda d: float((d > 0).mean()))
    lines += ["", "## share of fits with a degenerate task, per scale", "", "| scale | share |", "|---|---|"]
    lines += [f"| {s} | {degenerate.get(s, np.nan):.3f} |" for s in SCALES]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("outputs/scale_study"))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--within", type=float, default=0.01)
    parser.add_argument("--methods", nargs="*", help="method configs (default: all)")
    parser.add_argument("--markdown", type=Path, help="write the tables into this file")
    args = parser.parse_args()
    fits = run(args.out, args.seeds, args.methods)
    text = markdown(fits, args.within, args.seeds, "benchmarks/scale_study.py --seeds "
                    f"{args.seeds} --within {args.within}")
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
