"""Figures logged with runs (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def convergence_plot(trace: np.ndarray, path: str, title: str) -> None:
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=100)
    ax.plot(np.arange(len(trace)), trace, marker="." if len(trace) < 50 else None)
    ax.set_xlabel("iteration")
    ax.set_ylabel("objective")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def heatmap(matrix: np.ndarray, path: str, title: str, row_labels=None, col_labels=None) -> None:
    fig, ax = plt.subplots(figsize=(1.2 + 0.5 * matrix.shape[1], 1.0 + 0.45 * matrix.shape[0]), dpi=100)
    image = ax.imshow(matrix, cmap="viridis", aspect="auto")
    for (i, j), value in np.ndenumerate(matrix):
        ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7, color="w")
    if row_labels is not None:
        ax.set_yticks(range(matrix.shape[0]), row_labels, fontsize=7)
    if col_labels is not None:
        ax.set_xticks(range(matrix.shape[1]), col_labels, fontsize=7, rotation=45, ha="right")
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
