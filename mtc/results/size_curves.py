"""A score against the sample size, for a benchmark pooled over sample sizes.

A pooled benchmark (``<data>@<n1>+<n2>``, mtc.results.compare) reads one sweep per size and names each
seed ``n<size>/<seed>``. The papers that pool sizes also plot the score against the size
(SMT-NMF's Fig. 3): each method at its one grid point chosen over all sizes (the point the
comparison's tables use), the mean over tasks per run, then the mean and std over the draws
of each size. mtc.results.compare writes these as ``size_curves.csv``, a table per benchmark and one
figure per benchmark.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SIZE_SEPARATOR = "/"  # a pooled seed: "<member's size label>/<seed>", e.g. "n20/3"
COLUMNS = ["benchmark", "method", "point", "size", "mean", "std", "n"]


def size_of(label: str) -> int:
    """The per-task sample size of a member's label: ``"n20"`` -> 20."""
    digits = label[1:]
    if not (label.startswith("n") and digits.isdigit()):
        raise ValueError(f"pooled seed label {label!r}: expected n<size>")
    return int(digits)


def size_curve_frame(sweeps, selection: str, metric: str) -> pd.DataFrame:
    """Mean and std (ddof = 1) over draws of ``<metric>/mean`` per sample size, at each pooled
    sweep's point of ``selection``; one row per (benchmark, method, size), sizes ascending.
    Sweeps that are not pooled (no ``n<size>/`` seeds) have no curve."""
    rows = []
    for sweep in sweeps:
        seeds = sweep.trials.seed.astype(str)
        if not seeds.str.contains(SIZE_SEPARATOR, regex=False).all():
            continue
        point = sweep.points[selection].point
        at_point = sweep.trials[sweep.trials.point == point]
        sizes = at_point.seed.astype(str).str.split(SIZE_SEPARATOR, n=1).str[0].map(size_of)
        per_size = at_point[f"{metric}/mean"].groupby(sizes).agg(["mean", "std", "size"])
        rows += [{"benchmark": sweep.benchmark, "method": sweep.method, "point": point, "size": int(size),
                  "mean": row["mean"], "std": row["std"], "n": int(row["size"])} for size, row in per_size.iterrows()]
    return pd.DataFrame(rows, columns=COLUMNS).sort_values(["benchmark", "method", "size"], ignore_index=True)


def size_table(curves: pd.DataFrame) -> pd.DataFrame:
    """Methods x sizes of one benchmark's curves, "mean ± std (n)"; the highest per size in bold."""
    shown = curves.assign(cell=[f"{m:.4f} ± {s:.4f} ({n})" for m, s, n in zip(curves["mean"], curves["std"], curves.n)])
    best = curves.groupby("size")["mean"].transform("max")
    shown.loc[np.isclose(curves["mean"], best, rtol=0, atol=1e-12), "cell"] = "**" + shown.cell + "**"
    table = shown.pivot(index="method", columns="size", values="cell")
    return table.rename(columns=lambda size: f"n = {size}").reset_index()


def draw_size_curves(curves: pd.DataFrame, benchmark: str, metric: str, path: Path | None = None,
                     title: str | None = None, names: dict[str, str] | None = None) -> Figure:
    """One line per method (the mean over draws) with a band of ± one std over draws (the
    ``std`` column; none where a size has one draw), the size on the x axis; saved at ``path``
    when given. ``title`` says what the benchmark is (by default its name), ``names`` maps a
    method label to its name in the figure (mtc.results.compare.display_names). The bands are
    light so that the lines stay readable where they overlap; where they overlap, the table
    beside the figure (``size_table``) gives the numbers."""
    from matplotlib.figure import Figure  # imported when drawing: reading a sweep back draws nothing

    names = names or {}
    fig = Figure(figsize=(12, 6.5), dpi=100)
    ax = fig.subplots()
    order = sorted(curves.method.unique(), key=lambda method: (names.get(method, method).lower(), method))
    for index, method in enumerate(order):
        curve = curves[curves.method == method].sort_values("size")
        line, = ax.plot(curve["size"], curve["mean"], marker="o", lw=2, label=names.get(method, method),
                        linestyle=("-", "--", ":", "-.")[index % 4])
        ax.fill_between(curve["size"].to_numpy(float), (curve["mean"] - curve["std"]).to_numpy(float),
                        (curve["mean"] + curve["std"]).to_numpy(float), color=line.get_color(), alpha=0.12, lw=0)
    ax.set_xticks(sorted(curves["size"].unique()))
    ax.set_xlabel("samples per task (the pooled sweeps' n)", fontsize=14)
    ax.set_ylabel(f"mean {metric} over tasks", fontsize=14)
    ax.tick_params(labelsize=13)
    ax.set_title(f"{title or benchmark}\nmean over draws (line) ± 1 std over draws (band), at each method's point "
                 "chosen over all sizes", fontsize=13)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=12, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    if path is not None:
        fig.savefig(path)
    return fig
