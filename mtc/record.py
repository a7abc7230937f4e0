"""The fit record: what a solver learned besides its labels, for tracking to render.

Every solver fills one ``FitRecord`` (``record_``) with

- ``scalars``: a number, or one number per task (a length-T array);
- ``traces``: one value per iteration (1-D), or one per iteration and task (iterations x T);
- ``matrices``: ``LabelledMatrix`` objects whose axes say what their rows and columns are.

An axis is a kind, one of ``AXIS_KINDS``, or a tuple of fixed names:

- ``"task"``: one entry per task (block index 0);
- ``"cluster"``: the clusters of task t in block row/column t (tracking maps them to the
  classes they match, as the accuracy does, and orders them by class);
- ``"sample"``: the samples of task t in block row/column t;
- a tuple of names: those entries, the same for every block (block index 0).

A matrix is a set of blocks keyed (i, j): block (i, j)'s rows are entry i of the row axis,
its columns entry j of the column axis. MTCMRL's G^(t,s) is one matrix with blocks (t, s)
and axes ("cluster", "cluster"); MTCFIR's task weights one block (0, 0) with axes ("task",
"task"); per-sample weights per task blocks (t, 0) with axes ("sample", ("weight",)).
Tracking and plots render any record the same way (docs/architecture.md): nothing in them
names a method or a matrix.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

AXIS_KINDS = ("task", "cluster", "sample")


@dataclass(frozen=True)
class LabelledMatrix:
    """Blocks of one labelled matrix, see the module docstring.

    Parameters
    ----------
    blocks : dict of (int, int) to ndarray
        Block (i, j): rows from entry i of ``rows``, columns from entry j of ``cols``.
    rows, cols : str or tuple of str
        An axis kind from AXIS_KINDS, or fixed entry names.
    title : str
        What the matrix is, for figures.
    """

    blocks: dict[tuple[int, int], np.ndarray]
    rows: str | tuple[str, ...]
    cols: str | tuple[str, ...]
    title: str

    def __post_init__(self):
        for axis in (self.rows, self.cols):
            if isinstance(axis, str) and axis not in AXIS_KINDS:
                raise ValueError(f"unknown axis kind {axis!r}; use one of {AXIS_KINDS} or a tuple of names")
        for (i, j), block in self.blocks.items():
            if np.ndim(block) != 2:
                raise ValueError(f"block {(i, j)} of {self.title!r} is not 2-D")
            for index, axis, size in ((i, self.rows, block.shape[0]), (j, self.cols, block.shape[1])):
                if isinstance(axis, tuple) and (index != 0 or size != len(axis)):
                    raise ValueError(f"block {(i, j)} of {self.title!r}: an axis of fixed names {axis} has "
                                     f"one block (index 0) of {len(axis)} entries")

    @classmethod
    def single(cls, values: np.ndarray, rows, cols, title: str) -> LabelledMatrix:
        """A matrix of one block, (0, 0)."""
        return cls({(0, 0): np.asarray(values)}, rows, cols, title)


@dataclass
class FitRecord:
    """Scalars, traces and labelled matrices of one fit (see the module docstring)."""

    scalars: dict[str, float | np.ndarray] = field(default_factory=dict)
    traces: dict[str, np.ndarray] = field(default_factory=dict)
    matrices: dict[str, LabelledMatrix] = field(default_factory=dict)
