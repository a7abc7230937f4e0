"""Figures logged with runs (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def convergence_plot(trace: np.ndarray, path: str, title: str) -> None:
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=80)
    ax.plot(np.arange(len(trace)), trace, marker="." if len(trace) < 50 else None)
    ax.set_xlabel("iteration")
    ax.set_ylabel("objective")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    if np.all(np.asarray(trace) > 0):
        ax.set_yscale("log")
    fig.subplots_adjust(left=0.16, right=0.97, bottom=0.15, top=0.9)  # tight_layout costs a third of the draw
    fig.savefig(path)
    plt.close(fig)


def block_heatmap(blocks: dict[tuple[int, int], np.ndarray], row_labels: list[list[str]], task_names: list[str],
                  path: str, title: str) -> None:
    """All G^(t,s) in one picture: block (t, s) of a sum_t h_t square matrix, blocks not
    given (MTCMRL's diagonal) left blank, tick labels "<task>:<class>", lines between tasks.
    One axes keeps this fast enough to draw for every trial (values are in the .csv files)."""
    offsets = np.concatenate([[0], np.cumsum([len(labels) for labels in row_labels])])
    full = np.full((offsets[-1], offsets[-1]), np.nan)
    for (t, s), matrix in blocks.items():
        full[offsets[t]:offsets[t + 1], offsets[s]:offsets[s + 1]] = matrix
    ticks = [f"{task}:{label}" for task, labels in zip(task_names, row_labels) for label in labels]
    side = 2.5 + 0.22 * len(ticks)
    fig, ax = plt.subplots(figsize=(side + 1.0, side), dpi=72)
    image = ax.imshow(full, cmap="viridis", vmin=0.0)
    for edge in offsets[1:-1]:
        ax.axhline(edge - 0.5, color="k", lw=0.8)
        ax.axvline(edge - 0.5, color="k", lw=0.8)
    ax.set_yticks(range(len(ticks)), ticks, fontsize=6)
    ax.set_xticks(range(len(ticks)), ticks, fontsize=6, rotation=90)
    ax.set_title(title, fontsize=8)
    fig.colorbar(image, ax=ax, shrink=0.7)
    fig.subplots_adjust(left=0.25, bottom=0.25, right=0.95, top=0.93)
    fig.savefig(path)
    plt.close(fig)
