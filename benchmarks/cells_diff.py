"""Two compare folders' cells side by side: which cells a regeneration changed, and by how much.

    python benchmarks/cells_diff.py OLD/cells.csv NEW/cells.csv [--tolerance 1e-9]

A cell is a row of ``cells.csv`` (``mtc.results.compare``), keyed by benchmark, method, task,
metric and selection. Prints how many cells both hold, how many only one holds (by benchmark
and method), how many have another chosen grid point, and, per (benchmark, method), the
largest difference of ``mean`` and ``std`` beyond ``--tolerance`` (the rounding of a sum
taken in another order); exits 1 when any cell differs, so that a reproduction can be checked
by its exit code (docs/results/README.md).
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

KEY = ["benchmark", "method", "task", "metric", "selection"]


def compare_cells(old: pd.DataFrame, new: pd.DataFrame, tolerance: float) -> tuple[list[str], bool]:
    """The report's lines and whether any cell differs."""
    both = old.merge(new, on=KEY, how="outer", suffixes=("_old", "_new"), indicator=True)
    lines, differs = [], False
    shared = both[both["_merge"] == "both"]
    lines.append(f"{len(shared)} cells in both, {int((both['_merge'] == 'left_only').sum())} only in the old, "
                 f"{int((both['_merge'] == 'right_only').sum())} only in the new")
    for side, label in (("left_only", "only in the old"), ("right_only", "only in the new")):
        alone = both[both["_merge"] == side]
        for (benchmark, method), group in alone.groupby(["benchmark", "method"]):
            differs = True
            lines.append(f"  {label}: {benchmark} {method} ({len(group)} cells)")
    moved = shared[shared["point_old"].astype(str) != shared["point_new"].astype(str)]
    if len(moved):
        differs = True
        lines.append(f"{len(moved)} cells with another chosen point:")
        for _, row in moved.head(20).iterrows():
            lines.append(f"  {row.benchmark} {row.method} {row.task} {row.metric} {row.selection}: "
                         f"{row.point_old} -> {row.point_new}")
    for column in ("mean", "std"):
        gap = (shared[f"{column}_old"] - shared[f"{column}_new"]).abs()
        far = shared.assign(gap=gap)[gap > tolerance]
        if len(far):
            differs = True
            lines.append(f"{len(far)} cells whose {column} differs by more than {tolerance:g}:")
            for (benchmark, method), group in far.groupby(["benchmark", "method"]):
                lines.append(f"  {benchmark} {method}: {len(group)} cells, largest {group.gap.max():.3g}")
    if not differs:
        lines.append(f"every shared cell equal (point, and mean and std within {tolerance:g})")
    return lines, differs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--tolerance", type=float, default=1e-9)
    args = parser.parse_args()
    lines, differs = compare_cells(pd.read_csv(args.old), pd.read_csv(args.new), args.tolerance)
    print("\n".join(lines))
    sys.exit(1 if differs else 0)


if __name__ == "__main__":
    main()
