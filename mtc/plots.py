"""Figures logged with runs (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from PIL import Image  # noqa: E402

from mtc.methods.memo import Memo  # noqa: E402


def convergence_plot(traces: dict[str, np.ndarray], path: str, title: str) -> None:
    """Objective against iteration, one line per labelled trace (log scale when all positive)."""
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=80)
    for label, trace in traces.items():
        ax.plot(np.arange(len(trace)), trace, marker="." if len(trace) < 50 else None, label=label, lw=1)
    ax.set_xlabel("iteration")
    ax.set_ylabel("objective")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    if all(np.all(np.asarray(trace) > 0) for trace in traces.values()):
        ax.set_yscale("log")
    if 1 < len(traces) <= 10:
        ax.legend(fontsize=6, ncol=2)
    fig.subplots_adjust(left=0.16, right=0.97, bottom=0.15, top=0.9)  # tight_layout costs a third of the draw
    fig.savefig(path)
    plt.close(fig)


def block_heatmap(blocks: dict[tuple[int, int], np.ndarray], row_labels: list[list[str]], task_names: list[str],
                  path: str, title: str) -> None:
    """All G^(t,s) in one picture: block (t, s) of a sum_t h_t square matrix, blocks not
    given (MTCMRL's diagonal) left blank, tick labels "<task>:<class>", lines between tasks,
    colours from 0 to max(1, largest value) (G's rows are on the simplex).

    Drawn for every trial, so the frame (labels, lines, colour bar: nearly all of the
    0.15-0.25 s a matplotlib draw costs) is rendered once per layout and process and only
    the image is drawn on it (matplotlib's blitting), about 10 ms a trial."""
    offsets = np.concatenate([[0], np.cumsum([len(labels) for labels in row_labels])])
    full = np.full((offsets[-1], offsets[-1]), np.nan)
    for (t, s), matrix in blocks.items():
        full[offsets[t]:offsets[t + 1], offsets[s]:offsets[s + 1]] = matrix
    ticks = tuple(f"{task}:{label}" for task, labels in zip(task_names, row_labels) for label in labels)
    vmax = max(1.0, float(np.nanmax(full))) if np.isfinite(full).any() else 1.0
    layout = (ticks, tuple(offsets), title, vmax)
    frame = _HEATMAP_FRAMES.get(layout, lambda: _heatmap_frame(*layout))
    figure, image, separators, background = frame
    figure.canvas.restore_region(background)
    image.set_data(full)
    image.axes.draw_artist(image)
    for line in separators:
        image.axes.draw_artist(line)
    Image.fromarray(np.asarray(figure.canvas.buffer_rgba())).save(path)


def _heatmap_frame(ticks: tuple[str, ...], offsets: tuple[int, ...], title: str, vmax: float) -> tuple:
    """(figure, image artist, separator lines, rendered background) of one heatmap layout."""
    side = 2.5 + 0.22 * len(ticks)
    figure = Figure(figsize=(side + 1.0, side), dpi=72)
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    image = ax.imshow(np.zeros((len(ticks), len(ticks))), cmap="viridis", vmin=0.0, vmax=vmax, animated=True)
    separators = []
    for edge in offsets[1:-1]:
        separators += [ax.axhline(edge - 0.5, color="k", lw=0.8, animated=True),
                       ax.axvline(edge - 0.5, color="k", lw=0.8, animated=True)]
    ax.set_yticks(range(len(ticks)), ticks, fontsize=6)
    ax.set_xticks(range(len(ticks)), ticks, fontsize=6, rotation=90)
    ax.set_title(title, fontsize=8)
    figure.colorbar(image, ax=ax, shrink=0.7)
    figure.subplots_adjust(left=0.25, bottom=0.25, right=0.95, top=0.93)
    figure.canvas.draw()  # everything but the animated artists
    return figure, image, separators, figure.canvas.copy_from_bbox(figure.bbox)


_HEATMAP_FRAMES = Memo(size=4)
