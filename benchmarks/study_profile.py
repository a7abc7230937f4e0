"""Where a study's fit time goes: the fits of a store, summed by method and benchmark, and by
grid point, the largest first.

    python benchmarks/study_profile.py sqlite:///mlflow.db [--experiment mtc] [--top 10]

Reads every sweep's parent run and its child runs (one per trial) and sums the trials'
``fit_seconds`` (the solver's ``fit``, timed by mtc.trial.run_trial; a trial of one CPU, so
about its CPU time). Prints

- the store's trials and fit seconds, and that sum over 2 cores: the least wall time any
  driver could reach with these fits;
- the ``--top`` (method, benchmark) pairs by fit seconds, with their share of the whole, the
  mean seconds and iterations per fit and the share of fits that stopped unconverged (at
  ``max_iter``);
- the ``--top`` grid points by fit seconds;
- the fit seconds per method.

Finished trials only (a failed fit has no ``fit_seconds``). The fit record holds no timings
of a fit's steps yet (k-means starts, eigendecompositions, iterations): what a step costs is
measured by the per-method benchmarks (mtcfir_steps.py, smtnmf_iteration.py, ...).
"""

from __future__ import annotations

import argparse

import pandas as pd

from mtc.results.reading import benchmark_name, open_experiment, sweep_label, sweep_parents
from mtc.store import tracking

CORES = 2


def trial_frame(uri: str, experiment: str) -> pd.DataFrame:
    """One row per finished trial: method, benchmark, grid point, fit seconds, iterations and
    whether it converged."""
    client, experiment_id = open_experiment(uri, experiment, read_only=True)
    parents = {run.info.run_id: run for run in sweep_parents(client, experiment_id)}
    rows = []
    for run in tracking.runs_with_tag(client, experiment_id, tracking.PARENT_TAG):
        parent = parents.get(run.data.tags[tracking.PARENT_TAG])
        metrics = run.data.metrics
        if parent is None or run.info.status != "FINISHED" or "fit_seconds" not in metrics:
            continue
        rows.append({"method": sweep_label(parent), "benchmark": benchmark_name(parent),
                     "point": run.data.tags.get(tracking.POINT_TAG, "?"), "fit_seconds": metrics["fit_seconds"],
                     "n_iter": metrics.get("n_iter", float("nan")),
                     "unconverged": 1.0 - metrics.get("converged", float("nan"))})
    return pd.DataFrame(rows, columns=["method", "benchmark", "point", "fit_seconds", "n_iter", "unconverged"])


def by(trials: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Trials, fit seconds, share of all fit seconds, mean seconds and iterations per fit and the
    share of unconverged fits, per ``keys``, the largest fit seconds first."""
    grouped = trials.groupby(keys, sort=False).agg(
        trials=("fit_seconds", "size"), fit_seconds=("fit_seconds", "sum"), seconds_per_fit=("fit_seconds", "mean"),
        iterations_per_fit=("n_iter", "mean"), unconverged=("unconverged", "mean"))
    grouped.insert(2, "share", grouped["fit_seconds"] / trials["fit_seconds"].sum())
    return grouped.sort_values("fit_seconds", ascending=False).reset_index()


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
    args = parser.parse_args()
    trials = trial_frame(args.store, args.experiment)
    if trials.empty:
        raise SystemExit(f"error: no finished trial with fit_seconds in experiment {args.experiment!r}")
    total = trials["fit_seconds"].sum()
    print(f"{len(trials)} finished trials, fits {total:.1f} s, {total / CORES:.1f} s on {CORES} cores")
    print(f"\nThe top {args.top} (method, benchmark) by fit seconds:\n")
    print(markdown(by(trials, ["method", "benchmark"]).head(args.top)))
    print(f"\nThe top {args.top} grid points by fit seconds:\n")
    print(markdown(by(trials, ["method", "benchmark", "point"]).head(args.top)))
    print("\nBy method:\n")
    print(markdown(by(trials, ["method"])))


if __name__ == "__main__":
    main()
