"""Figures and readable files logged with runs (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import LogFormatter  # noqa: E402
from PIL import Image  # noqa: E402

from mtc.numerics.cache import Cache  # noqa: E402
from mtc.store import tracking  # noqa: E402


VISIBLE_FRACTION = 1e-3  # traces closer than this fraction of the y axis's span coincide on the plot


def same_traces(traces: dict[str, np.ndarray]) -> list[list[str]]:
    """Labels grouped by exactly identical traces (same length, every step equal to 1e-12
    relative), in order of first label: the runs that computed the same thing."""
    groups: list[list[str]] = []
    for label, trace in traces.items():
        trace = np.asarray(trace, float)
        for group in groups:
            other = np.asarray(traces[group[0]], float)
            if other.shape == trace.shape and np.allclose(other, trace, rtol=1e-12, atol=0.0):
                group.append(label)
                break
        else:
            groups.append([label])
    return groups


def log_scaled(traces: dict[str, np.ndarray]) -> bool:
    """Whether the convergence figure draws its y axis in log scale: every value positive."""
    return all(np.all(np.asarray(trace, float) > 0) for trace in traces.values())


def overlapping_traces(traces: dict[str, np.ndarray], log: bool | None = None) -> list[list[str]]:
    """Labels grouped by traces that coincide on the convergence figure, in order of first label.

    Two traces coincide when they have the same length (a longer run draws further to the
    right) and, in the plotted scale (log10 when ``log``, by default ``log_scaled``), differ at
    no step by more than VISIBLE_FRACTION (1/1000) of the span of every plotted value: at the
    figure's 605 px height the plot area is under 500 px tall, so such a difference is under
    half a pixel. Each trace is compared with its group's first; non-finite steps must match
    exactly. Exactly identical traces (``same_traces``) always coincide.
    """
    log = log_scaled(traces) if log is None else log
    plotted = {label: np.log10(np.asarray(trace, float)) if log else np.asarray(trace, float)
               for label, trace in traces.items()}
    finite = np.concatenate([values[np.isfinite(values)] for values in plotted.values()] or [np.zeros(0)])
    span = float(finite.max() - finite.min()) if finite.size else 0.0
    tolerance = VISIBLE_FRACTION * span if span > 0 else 0.0

    def coincide(a: np.ndarray, b: np.ndarray) -> bool:
        if a.shape != b.shape:
            return False
        ok_a, ok_b = np.isfinite(a), np.isfinite(b)
        if not np.array_equal(ok_a, ok_b) or not np.array_equal(a[~ok_a], b[~ok_b], equal_nan=True):
            return False
        return bool(np.all(np.abs(a[ok_a] - b[ok_b]) <= tolerance))

    groups: list[list[str]] = []
    for label, values in plotted.items():
        for group in groups:
            if coincide(plotted[group[0]], values):
                group.append(label)
                break
        else:
            groups.append([label])
    return groups


def run_names(labels: list[str]) -> str:
    """Labels said briefly: ``seed 0`` ... ``seed 9`` as "seeds 0-9", "seeds 0-3, 5"; any other
    labels joined by commas."""
    seeds = [label[len("seed "):] for label in labels]
    if len(labels) == 1 or not all(label.startswith("seed ") and seed.isdigit() for label, seed in zip(labels, seeds)):
        return ", ".join(labels)
    numbers = sorted(int(seed) for seed in seeds)
    runs, start = [], numbers[0]
    for previous, number in zip(numbers, [*numbers[1:], None]):
        if number != previous + 1:
            runs.append(f"{start}" if start == previous else f"{start}-{previous}")
            start = number
    return "seeds " + ", ".join(runs)


def convergence_caption(traces: dict[str, np.ndarray], visible: list[list[str]], exact: list[list[str]]) -> str:
    """The convergence figure's second title line: runs, visibly distinct curves, which runs
    overlap, and how many traces are exactly distinct when that differs ("" for one run)."""
    if len(traces) < 2:
        return ""
    curves = f"{len(visible)} visibly distinct curve{'s' if len(visible) != 1 else ''}"
    shared = [group for group in visible if len(group) > 1]
    if shared:
        curves += "; " + "; ".join(f"{run_names(group)} overlap" for group in shared[:3])
        curves += f"; {len(shared) - 3} more groups overlap" if len(shared) > 3 else ""
    if len(exact) != len(visible):
        curves += f" ({len(exact)} exactly distinct traces)"
    return f"{len(traces)} runs, {curves}"


def convergence_figure(traces: dict[str, np.ndarray], title: str) -> Figure:
    """Objective against iteration: one line per group of runs whose traces coincide on the plot
    (``overlapping_traces``), the legend naming the runs of each line, the title saying how many
    curves are visibly distinct of how many runs (and how many traces are exactly distinct,
    ``same_traces``, when that differs); log scale when all values are positive; 1100 x 605 px."""
    fig = Figure(figsize=(10, 5.5), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    log = log_scaled(traces)
    groups = overlapping_traces(traces, log)
    for index, group in enumerate(groups):
        trace = np.asarray(traces[group[0]])
        label = run_names(group) if len(group) == 1 else f"{run_names(group)} ({len(group)} runs, overlapping)"
        ax.plot(np.arange(len(trace)), trace, marker="." if len(trace) < 50 else None, label=label, lw=1.5,
                linestyle=("-", "--", ":", "-.")[index % 4])
    ax.set_xlabel("iteration", fontsize=12)
    ax.set_ylabel("objective", fontsize=12)
    ax.tick_params(labelsize=11)
    shown = convergence_caption(traces, groups, same_traces(traces))
    ax.set_title(f"{title}\n{shown}" if shown else title, fontsize=12)
    ax.grid(alpha=0.3)
    if log:
        ax.set_yscale("log")
        # plain tick labels ("1e+03"): the default's mathtext ("10^3") was a fifth of a sweep's figure
        ax.yaxis.set_major_formatter(LogFormatter())
        ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.4)))
    if len(groups) <= MAX_LEGEND_ENTRIES and (1 < len(groups) <= 12 or len(groups) < len(traces)):
        ax.legend(fontsize=10, ncol=2)
    fig.subplots_adjust(left=0.09, right=0.98, bottom=0.1, top=0.88)  # tight_layout costs a third of the draw
    return fig


MAX_LEGEND_ENTRIES = 40  # more do not fit the figure's 605 px in two columns: the title counts the curves instead


def convergence_plot(traces: dict[str, np.ndarray], path: str, title: str) -> None:
    """``convergence_figure`` saved as a PNG at ``path`` (zlib level 1: a sweep's figure is
    drawn while its trials run, and level 6 took a sixth of it for a tenth of the bytes)."""
    convergence_figure(traces, title).savefig(path, pil_kwargs={"compress_level": 1})


def heatmap_layout(matrix) -> tuple[np.ndarray, tuple]:
    """(values, layout) of a NamedMatrix (mtc.trial) drawn as one picture: block (i, j) at
    block row i and block column j, blocks not given left blank (NaN), tick labels
    "<group>:<name>", lines between blocks, colours from min(0, lowest) to max(1, highest) value,
    the range said on the colour bar."""
    rows, cols = sorted(matrix.row_names), sorted(matrix.col_names)
    row_offsets = np.concatenate([[0], np.cumsum([len(matrix.row_names[i]) for i in rows])])
    col_offsets = np.concatenate([[0], np.cumsum([len(matrix.col_names[j]) for j in cols])])
    full = np.full((row_offsets[-1], col_offsets[-1]), np.nan)
    for (i, j), block in matrix.blocks.items():
        r, c = rows.index(i), cols.index(j)
        full[row_offsets[r]:row_offsets[r + 1], col_offsets[c]:col_offsets[c + 1]] = block

    def ticks(names, groups, order):
        return tuple(f"{groups[b]}:{name}" if groups[b] else name for b in order for name in names[b])

    title = matrix.title
    if len(matrix.blocks) < len(rows) * len(cols):
        title += "\n(blank blocks: pairs the method has no value for, e.g. a task with itself)"
    finite = full[np.isfinite(full)]
    vmin = min(0.0, float(finite.min())) if finite.size else 0.0
    vmax = max(1.0, float(finite.max())) if finite.size else 1.0
    layout = (ticks(matrix.row_names, matrix.row_groups, rows), ticks(matrix.col_names, matrix.col_groups, cols),
              tuple(row_offsets), tuple(col_offsets), title, vmin, vmax)
    return full, layout


def block_heatmap(matrix, path: str, frames: Cache | None = None) -> None:
    """A NamedMatrix as one heatmap PNG (see heatmap_layout).

    Drawn for every trial of a sweep with readable files, so with ``frames`` (a worker's Cache,
    mtc.sweep.driver.WORKER_CACHES) the frame (labels, lines, colour bar: nearly all of the
    0.15-0.25 s a matplotlib draw costs) is rendered once per layout and process and only
    the image is drawn on it (matplotlib's blitting), about 10 ms a trial."""
    full, layout = heatmap_layout(matrix)
    frame = (lambda: _heatmap_frame(*layout))
    figure, image, separators, background = frame() if frames is None else frames.get("heatmap", layout, frame)
    figure.canvas.restore_region(background)
    image.set_data(full)
    image.axes.draw_artist(image)
    for line in separators:
        image.axes.draw_artist(line)
    Image.fromarray(np.asarray(figure.canvas.buffer_rgba())).save(path, compress_level=1)  # fast; flat colours


MAX_TICKS = 80  # an axis with more entries (samples) gets no per-entry tick labels


def _heatmap_frame(row_ticks: tuple[str, ...], col_ticks: tuple[str, ...], row_offsets: tuple[int, ...],
                   col_offsets: tuple[int, ...], title: str, vmin: float, vmax: float) -> tuple:
    """(figure, image artist, separator lines, rendered background) of one heatmap layout."""
    width = min(20.0, max(10.0, 3.5 + 0.22 * min(len(col_ticks), MAX_TICKS)))  # at least 1000 px
    height = min(20.0, max(6.0, 2.5 + 0.22 * min(len(row_ticks), MAX_TICKS)))
    figure = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    image = ax.imshow(np.zeros((len(row_ticks), len(col_ticks))), cmap="viridis", vmin=vmin, vmax=vmax,
                      animated=True, aspect="auto", interpolation="nearest")
    separators = [ax.axhline(edge - 0.5, color="k", lw=0.8, animated=True) for edge in row_offsets[1:-1]]
    separators += [ax.axvline(edge - 0.5, color="k", lw=0.8, animated=True) for edge in col_offsets[1:-1]]
    ax.set_yticks(range(len(row_ticks)) if len(row_ticks) <= MAX_TICKS else [],
                  row_ticks if len(row_ticks) <= MAX_TICKS else [], fontsize=9)
    ax.set_xticks(range(len(col_ticks)) if len(col_ticks) <= MAX_TICKS else [],
                  col_ticks if len(col_ticks) <= MAX_TICKS else [], fontsize=9, rotation=90)
    ax.set_title(title, fontsize=12)
    figure.colorbar(image, ax=ax, shrink=0.7).set_label(f"colour range {vmin:g} to {vmax:g}", fontsize=10)
    figure.subplots_adjust(left=0.25, bottom=0.25, right=0.95, top=0.93)
    figure.canvas.draw()  # everything but the animated artists
    return figure, image, separators, figure.canvas.copy_from_bbox(figure.bbox)


def readable_files(folder: Path, outcome, trial_config: dict, task_names: list[str], frames: Cache | None = None
                   ) -> None:
    """The trial's files for a person: config.json, labels.csv, objective_trace.csv, a labelled
    CSV per matrix block, a heatmap PNG per matrix and the convergence PNG (each figure costs
    0.1-0.2 s of CPU; ``frames``: see block_heatmap).

    labels.csv has one row per sample: ``task``, ``sample``, ``label`` (the cluster id) and
    ``cluster_name``, the name the matrix CSVs and heatmaps give that cluster (the class it
    matches, mtc.trial.AxisNamer), so that a row of a CSV is found in the labels."""
    (folder / "config.json").write_text(json.dumps(trial_config, indent=2, default=str))
    with open(folder / "labels.csv", "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["task", "sample", "label", "cluster_name"])
        for task, labels, names in zip(task_names, outcome.labels, outcome.cluster_names):
            writer.writerows((task, sample, label, names[label]) for sample, label in enumerate(labels.tolist()))
    trace = outcome.objective_trace
    np.savetxt(folder / "objective_trace.csv", np.column_stack([np.arange(trace.size), trace]),
               fmt=["%d", "%.10g"], delimiter=",", header="step,objective", comments="")
    convergence_plot({f"seed {trial_config['seed']}": trace}, str(folder / "convergence.png"),
                     f"{trial_config['method']} on {trial_config['data']['name']}, seed {trial_config['seed']}")
    for name, matrix in outcome.matrices.items():
        for (i, j), block in matrix.blocks.items():
            stem = tracking.block_stem(name, matrix.row_groups[i], matrix.col_groups[j])
            labelled_csv(str(folder / f"{stem}.csv"), block, matrix.row_names[i], matrix.col_names[j])
        block_heatmap(matrix, str(folder / f"{name}.png"), frames)


def labelled_csv(path: str, matrix: np.ndarray, row_names: list[str], col_names: list[str]) -> None:
    """One matrix block as CSV: a ``row`` column of row names, then a column per column name
    (names quoted where they hold a comma or a quote, as in labels.csv)."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["row", *col_names])
        writer.writerows([label, *(f"{v:.6g}" for v in row)] for label, row in zip(row_names, matrix))


def log_convergence_figure(client, parent_id: str, runs: dict[str, tuple[str, str]], path: Path, title: str) -> None:
    """One PNG of the objective trace (every step) of every run ({label: (run id, artifact
    URI)}), logged to the parent run."""
    traces = {label: tracking.load_objective_trace(client, run_id, uri) for label, (run_id, uri) in runs.items()}
    convergence_plot(traces, str(path), title)
    client.log_artifact(parent_id, str(path))
