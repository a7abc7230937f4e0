"""Where a study's fit time goes: the fits of a store, summed by method and benchmark, and by
grid point, the largest first.

    python benchmarks/study_profile.py sqlite:///mlflow.db [--experiment mtc] [--top 10]
        [--since "2026-11-30 14:31"]

Reads every sweep's parent run and its child runs (one per trial) and sums the trials'
``fit_seconds`` (the solver's ``fit``, timed by mtc.trial.run_trial; a trial of one CPU, so
about its CPU time). Prints

- the store's trials and fit seconds, and that sum over 2 cores: the least wall time any
  driver could reach with these fits;
- the ``--top`` (method, benchmark) pairs by fit seconds, with their share of the whole, the
  mean seconds and iterations per fit and the share of fits that stopped unconverged (at
  ``max_iter``);
- the ``--top`` items: a method's cached step on a benchmark (``step_seconds/<step>``: the
  k-means starts, affinities, eigendecompositions and kernels a sweep's fits share, timed when
  computed, mtc.numerics.cache), or the rest of its fits (the solver's own iterations);
- the ``--top`` grid points by fit seconds;
- the fit seconds per method.

``--since`` (a UTC time) keeps the trials whose runs started at or after it: one sitting's
fits in a store that earlier sittings filled. Finished trials only (a failed fit has no
``fit_seconds``). Stores written before the step
timings show only the rest. Inside a solver's own work, the per-method benchmarks
(mtcfir_steps.py, smtnmf_iteration.py, ...) time the parts.
"""

from __future__ import annotations

import argparse

import pandas as pd

from mtc.results.reading import benchmark_name, open_experiment, sweep_label, sweep_parents
from mtc.store import tracking

CORES = 2
STEP = "step_seconds/"  # a fit's seconds in one cached step (mtc.trial.step_seconds)
OWN = "the solver's own (the rest)"


def trial_frame(uri: str, experiment: str, since_ms: int = 0) -> pd.DataFrame:
    """One row per finished trial started at or after ``since_ms`` (ms since the epoch):
    method, benchmark, grid point, fit seconds, iterations and whether it converged."""
    client, experiment_id = open_experiment(uri, experiment, read_only=True)
    parents = {run.info.run_id: run for run in sweep_parents(client, experiment_id)}
    rows = []
    for run in tracking.runs_with_tag(client, experiment_id, tracking.PARENT_TAG):
        parent = parents.get(run.data.tags[tracking.PARENT_TAG])
        metrics = run.data.metrics
        if (parent is None or run.info.status != "FINISHED" or "fit_seconds" not in metrics
                or run.info.start_time < since_ms):
            continue
        rows.append({"method": sweep_label(parent), "benchmark": benchmark_name(parent),
                     "point": run.data.tags.get(tracking.POINT_TAG, "?"), "fit_seconds": metrics["fit_seconds"],
                     "n_iter": metrics.get("n_iter", float("nan")),
                     "unconverged": 1.0 - metrics.get("converged", float("nan")),
                     **{key: value for key, value in metrics.items() if key.startswith(STEP)}})
    columns = ["method", "benchmark", "point", "fit_seconds", "n_iter", "unconverged"]
    frame = pd.DataFrame(rows, columns=[*columns, *sorted({key for row in rows for key in row} - set(columns))])
    return frame.fillna({column: 0.0 for column in frame if column.startswith(STEP)})


def since_ms(text: str) -> int:
    """A UTC time ("2026-11-30 14:31[:20]" or ISO 8601) as MLflow's start times count it."""
    try:
        moment = pd.Timestamp(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"not a time: {text!r} ({error})") from None
    moment = moment.tz_localize("UTC") if moment.tzinfo is None else moment.tz_convert("UTC")
    return int(moment.timestamp() * 1000)


def by(trials: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Trials, fit seconds, share of all fit seconds, mean seconds and iterations per fit and the
    share of unconverged fits, per ``keys``, the largest fit seconds first."""
    grouped = trials.groupby(keys, sort=False).agg(
        trials=("fit_seconds", "size"), fit_seconds=("fit_seconds", "sum"), seconds_per_fit=("fit_seconds", "mean"),
        iterations_per_fit=("n_iter", "mean"), unconverged=("unconverged", "mean"))
    grouped.insert(2, "share", grouped["fit_seconds"] / trials["fit_seconds"].sum())
    return grouped.sort_values("fit_seconds", ascending=False).reset_index()


def steps(trials: pd.DataFrame) -> pd.DataFrame:
    """Per (method, benchmark), the seconds of each cached step its fits computed and the rest
    (the solver's own work), with their share of all fit seconds, the largest first."""
    columns = [column for column in trials if column.startswith(STEP)]
    sums = trials.groupby(["method", "benchmark"], sort=False)[["fit_seconds", *columns]].sum()
    sums[OWN] = sums["fit_seconds"] - sums[columns].sum(axis=1)
    items = sums.drop(columns="fit_seconds").rename(columns=lambda column: column.removeprefix(STEP))
    items = items.rename_axis(columns="step").stack().rename("seconds").reset_index()
    items = items[items["seconds"] > 0].assign(share=lambda frame: frame["seconds"] / trials["fit_seconds"].sum())
    return items.sort_values("seconds", ascending=False, kind="stable").reset_index(drop=True)


def markdown(table: pd.DataFrame) -> str:
    """A table as Markdown: shares as percentages, other numbers to two decimals (pandas'
    to_markdown would need tabulate, which nothing else here uses)."""
    def cell(column: str, value) -> str:
        if column in ("share", "unconverged"):
            return f"{100 * value:.1f} %"
        return f"{value:.2f}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(cell(column, value) for column, value in row.items()) + " |"
              for _, row in table.iterrows()]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", help="the study's store: sqlite:///<path>.db, a database URI or a server's address")
    parser.add_argument("--experiment", default="mtc")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--since", type=since_ms, default=0, help='UTC time, e.g. "2026-11-30 14:31": only the runs '
                        "started at or after it")
    args = parser.parse_args()
    trials = trial_frame(args.store, args.experiment, args.since)
    if trials.empty:
        raise SystemExit(f"error: no finished trial with fit_seconds in experiment {args.experiment!r}"
                         + (" started since then" if args.since else ""))
    total = trials["fit_seconds"].sum()
    print(f"{len(trials)} finished trials, fits {total:.1f} s, {total / CORES:.1f} s on {CORES} cores")
    print(f"\nThe top {args.top} (method, benchmark) by fit seconds:\n")
    print(markdown(by(trials, ["method", "benchmark"]).head(args.top)))
    print(f"\nThe top {args.top} items (a method's cached step, or the rest of its fits, on a benchmark):\n")
    print(markdown(steps(trials).head(args.top)))
    print(f"\nThe top {args.top} grid points by fit seconds:\n")
    print(markdown(by(trials, ["method", "benchmark", "point"]).head(args.top)))
    print("\nBy method:\n")
    print(markdown(by(trials, ["method"])))


if __name__ == "__main__":
    main()
