"""Does a label-free choice ever land on a collapse? For every finished sweep of a store: its
degenerate trials (a task in fewer clusters than asked), and the grid point each label-free
criterion chose with how many of its trials are degenerate.

    .venv/bin/python benchmarks/label_free_collapse.py sqlite:///mlflow.db

Prints the sweeps with degenerate trials, the label-free choices on a point with a degenerate
trial, and one summary line: choices on a point whose every trial is degenerate (never, by
mtc.results.report's rule) and on one with some.
"""

from __future__ import annotations

import argparse

import pandas as pd

import mtc.results

LABEL_FREE = ("objective", "objective_relative", "silhouette", "stability")


def collapse_table(uri: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per sweep: trials and degenerate trials; per label-free choice: its point's trials and
    degenerate trials)."""
    found = mtc.results.sweeps(uri)
    found = found[found.status == "FINISHED"]
    chosen = pd.concat([mtc.results.chosen(uri, benchmarks=[benchmark])  # per benchmark: with or without labels
                        for benchmark in found.benchmark.unique()])
    sweeps, choices = [], []
    for _, sweep in found.iterrows():
        points = mtc.results.points(sweep.run_id, uri).set_index("point")
        sweeps.append({"benchmark": sweep.benchmark, "method": sweep.label, "trials": int(points.n_runs.sum()),
                       "degenerate": int(points.n_degenerate.sum())})
        mine = chosen[(chosen.benchmark == sweep.benchmark) & (chosen.method == sweep.label)
                      & chosen.selection.isin(LABEL_FREE)]
        choices += [{"benchmark": sweep.benchmark, "method": sweep.label, "selection": row.selection,
                     "point": row.point, "trials": int(points.loc[row.point, "n_runs"]),
                     "degenerate": int(points.loc[row.point, "n_degenerate"])} for row in mine.itertuples()]
    return pd.DataFrame(sweeps), pd.DataFrame(choices)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tracking_uri")
    sweeps, choices = collapse_table(parser.parse_args().tracking_uri)
    print(sweeps[sweeps.degenerate > 0].to_string(index=False))
    print(choices[choices.degenerate > 0].to_string(index=False))
    print(f"{len(sweeps)} sweeps, {int(sweeps.trials.sum())} trials, {int(sweeps.degenerate.sum())} degenerate; "
          f"{len(choices)} label-free choices: {int((choices.degenerate == choices.trials).sum())} on a point whose "
          f"every trial is degenerate, {int((choices.degenerate > 0).sum())} on a point with some")


if __name__ == "__main__":
    main()
