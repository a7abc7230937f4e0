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

The rule (issue 48): for each method, the scales whose mean accuracy over the data sets (each
the mean over its two tasks and the seeds) is the method's best or within ``--within`` (one
point) of it; the default for a group of methods with the same input needs is the scale that is
so for the most of them. A scale refused on some data set has no mean there, so it is not
eligible (a default must run on any table). The page also shows, as a second view, on how many
data sets each scale is within a point of the method's best there.

    .venv/bin/pip install -q palmerpenguins vega_datasets
    .venv/bin/python benchmarks/scale_study.py --out outputs/scale_study \\
        --markdown docs/results/scaling_study.md

Writes ``fits.csv`` (one row per method, data set, scale and seed; rerun: rows already there
are kept, so an interrupted study resumes) into ``--out``, and the tables into ``--markdown``
with every fit beside them (``scaling_study.csv`` for ``scaling_study.md``).
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


def method_means(fits: pd.DataFrame) -> pd.DataFrame:
    """Methods x scales: the mean accuracy over data sets (each the mean over tasks and seeds);
    a scale that did not run on every data set (refused, e.g. log1p on signed values) has none."""
    per_data = fits[fits.status == "ok"].groupby(["method", "data", "scale"]).acc.mean().unstack("scale")
    per_data = per_data.reindex(columns=list(SCALES))
    complete = per_data.reindex(pd.MultiIndex.from_product([per_data.index.levels[0], sorted(fits.data.unique())]))
    return complete.groupby(level=0).apply(lambda group: group.mean(skipna=False))


def within_best(means: pd.DataFrame, within: float) -> pd.DataFrame:
    """Methods x scales: whether the scale's mean accuracy is the method's best or within ``within`` of it."""
    return means.ge(means.max(axis=1) - within, axis=0)


def data_sets_won(fits: pd.DataFrame, within: float) -> pd.DataFrame:
    """A second view: per method and scale, on how many data sets the scale is within
    ``within`` of that method's best scale there (noisier: small data sets tie many scales)."""
    per_data = fits[fits.status == "ok"].groupby(["method", "data", "scale"]).acc.mean().unstack("scale")
    won = per_data.ge(per_data.max(axis=1) - within, axis=0)
    return won.groupby(level=0).sum().reindex(columns=list(SCALES)).fillna(0).astype(int)


def needs_group(method: str) -> str:
    return "non_negative" if "non_negative" in method_configs()[method].input_needs else "any"


def chosen_defaults(fits: pd.DataFrame, within: float) -> dict[str, tuple[str, dict[str, int]]]:
    """Per input-needs group: the scale that is best or within ``within`` of the best for the
    most methods (by mean accuracy over the data sets), and each scale's count."""
    best = within_best(method_means(fits), within)
    chosen = {}
    for group in ("any", "non_negative"):
        members = [m for m in best.index if needs_group(m) == group]
        if members:
            tally = {scale: int(best.loc[members, scale].sum()) for scale in SCALES}
            chosen[group] = (max(tally, key=tally.get), tally)
    return chosen


def row(cells) -> str:
    return "| " + " | ".join(map(str, cells)) + " |"


def markdown(fits: pd.DataFrame, within: float, seeds: int, command: str) -> str:
    means = method_means(fits)
    best = within_best(means, within)
    defaults = chosen_defaults(fits, within)
    lines = ["# Which scale for a table: the measurement behind data.params.scale=auto", "",
             "What `auto` gives a table or array of your own (mtc.data.scaling.DEFAULT_SCALE): "
             + "; ".join(f"**{default}** for a method whose input needs are {group}"
                         for group, (default, _) in defaults.items())
             + f". Measured on {fits.data.nunique()} labelled tables that ship inside Python packages, each split "
             f"into two tasks, every method config at its defaults under every scale.", "",
             f"Generated by `{command}` (benchmarks/scale_study.py says what it runs).", "",
             f"The rule: for each method, the scales whose mean accuracy over the {fits.data.nunique()} data sets is its "
             f"best or within {within:.2f} of it; the default of a group of methods with the same input needs is the "
             "scale that is so for the most of them. A scale refused on a data set (log1p and tfidf on signed "
             "values, any scale with negative output for a method that needs non-negative input) has no mean.", ""]
    for group, (default, tally) in defaults.items():
        members = sum(needs_group(m) == group for m in means.index)
        lines += [f"## methods whose input needs are: {group} ({members} methods): default **{default}**", "",
                  row(["scale", "methods for which it is best or within a point"]), "|---|---|",
                  *[row([scale, count]) for scale, count in tally.items()], ""]
    lines += [f"## mean accuracy over data sets (mean over two tasks and {seeds} seeds each; * best or within "
              f"{within:.2f})", "", row(["method", *SCALES]), "|---" * (len(SCALES) + 1) + "|"]
    lines += [row([m, *(("" if np.isnan(means.loc[m, s]) else f"{means.loc[m, s]:.3f}" + "*" * bool(best.loc[m, s]))
                        for s in SCALES)]) for m in means.index]
    won = data_sets_won(fits, within)
    lines += ["", f"## a second view: data sets on which each scale is within {within:.2f} of the method's best there",
              "", row(["method", *SCALES]), "|---" * (len(SCALES) + 1) + "|"]
    lines += [row([m, *won.loc[m]]) for m in won.index]
    ok = fits[fits.status == "ok"]
    per_data = ok.groupby(["method", "data", "scale"]).acc.mean().unstack("scale")
    gap = (per_data.max(axis=1).to_numpy()[:, None] - per_data).mean().reindex(list(SCALES))
    degenerate = ok.groupby("scale").degenerate_tasks.apply(lambda d: float((d > 0).mean())).reindex(list(SCALES))
    by_data = per_data.groupby(level=1).mean().reindex(columns=list(SCALES))
    lines += ["", "## per scale: mean gap to the best scale (over methods and data sets where it ran) and the share "
              "of fits with a degenerate task", "", row(["scale", "mean gap", "degenerate fits"]), "|---|---|---|"]
    lines += [row([s, f"{gap[s]:.3f}", f"{degenerate[s]:.3f}"]) for s in SCALES]
    lines += ["", "## mean accuracy per data set (over methods)", "", row(["data", *SCALES]),
              "|---" * (len(SCALES) + 1) + "|"]
    lines += [row([d, *(("" if np.isnan(v) else f"{v:.3f}") for v in by_data.loc[d])]) for d in by_data.index]
    refused = fits[fits.status != "ok"].groupby(["status", "error"]).size()
    if len(refused):
        lines += ["", "## fits not run", ""] + [f"- {n} fits, {status}: {error}" for (status, error), n in refused.items()]
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
    if args.markdown:  # the tables, and every fit beside them (<markdown>.csv)
        args.markdown.write_text(text)
        fits.to_csv(args.markdown.with_suffix(".csv"), index=False)


if __name__ == "__main__":
    main()
