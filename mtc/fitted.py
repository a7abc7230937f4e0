"""A solver's fitted state as plain arrays, so that one fit can serve several sweeps of a study.

A study lists sweeps whose trials can be the same fit: MTCFIR's reduced Handdigits protocol is
a corner of its full one, ``mtcfir_keep`` at p = 0.5 is MTCFIR at corruption 0.5, and the SPMTC
switch study's printed-route sweeps are points of Tables 4-7. mtc.sweep.shared_fits finds them
when the study is planned and gives each such trial a key naming everything its fit depends on;
the first worker to reach a key fits and keeps the fit's state here as one ``.npz`` file of the
worker's step cache (mtc.numerics.cache, step ``shared_fit``), and the trial of the other sweep
reads it (or waits on its lock while it is computed) instead of fitting again. Reading gives the
same arrays to the bit, so the runs of both sweeps hold the same labels, traces, record and
scores (tests/test_fitted.py); a run whose fit was read has ``fit_read`` 1, no
``step_seconds/shared_fit``, and its ``fit_seconds`` is the reading's.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mtc.record import FitRecord, LabelledMatrix

SHARED_FIT_STEP = "shared_fit"


@dataclass(frozen=True)
class Fitted:
    """What a trial reads from a fitted solver (mtc.trial.run_trial).

    Parameters
    ----------
    labels : list of ndarray
        ``labels_``, one array per task.
    objective_trace : ndarray
        ``objective_trace_``.
    n_iter : int
        ``n_iter_``.
    converged : bool
        ``converged_``.
    degenerate : ndarray
        ``degenerate_``, one bool per task.
    record : FitRecord
        ``record_``.
    """

    labels: list
    objective_trace: np.ndarray
    n_iter: int
    converged: bool
    degenerate: np.ndarray
    record: FitRecord

    @classmethod
    def of(cls, solver) -> Fitted:
        """The fitted state of ``solver``."""
        return cls([np.asarray(labels) for labels in solver.labels_], np.asarray(solver.objective_trace_, dtype=float),
                   int(solver.n_iter_), bool(solver.converged_), np.asarray(solver.degenerate_), solver.record_)

    def arrays(self) -> dict[str, np.ndarray]:
        """Every part as a named array (names kept in index arrays, so any record name works)."""
        record = self.record
        arrays = {"objective_trace": self.objective_trace, "n_iter": np.array(self.n_iter),
                  "converged": np.array(self.converged), "degenerate": self.degenerate,
                  "n_tasks": np.array(len(self.labels)),
                  "scalar_names": np.array(list(record.scalars), dtype=str),
                  "trace_names": np.array(list(record.traces), dtype=str),
                  "matrix_names": np.array(list(record.matrices), dtype=str)}
        arrays.update({f"labels{t}": labels for t, labels in enumerate(self.labels)})
        arrays.update({f"scalar{s}": np.asarray(value) for s, value in enumerate(record.scalars.values())})
        arrays.update({f"trace{s}": np.asarray(value) for s, value in enumerate(record.traces.values())})
        for m, matrix in enumerate(record.matrices.values()):
            arrays[f"matrix{m}_title"] = np.array(matrix.title)
            for axis in ("rows", "cols"):  # a kind is a 0-d string, fixed names a 1-d array
                value = getattr(matrix, axis)
                arrays[f"matrix{m}_{axis}"] = np.array(value if isinstance(value, str) else list(value), dtype=str)
            arrays[f"matrix{m}_blocks"] = np.array(list(matrix.blocks), dtype=int).reshape(-1, 2)
            arrays.update({f"matrix{m}_block{b}": block for b, block in enumerate(matrix.blocks.values())})
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Fitted:
        """``arrays()`` back as a Fitted, in the same order and with the same bits (writable copies)."""
        def names(key: str) -> list[str]:
            return [str(name) for name in arrays[key]]

        def scalar(value: np.ndarray):
            return value.item() if value.ndim == 0 else np.array(value)

        matrices = {}
        for m, name in enumerate(names("matrix_names")):
            rows, cols = (arrays[f"matrix{m}_{axis}"] for axis in ("rows", "cols"))
            blocks = {(int(i), int(j)): np.array(arrays[f"matrix{m}_block{b}"])
                      for b, (i, j) in enumerate(arrays[f"matrix{m}_blocks"])}
            matrices[name] = LabelledMatrix(blocks, str(rows) if rows.ndim == 0 else tuple(str(r) for r in rows),
                                            str(cols) if cols.ndim == 0 else tuple(str(c) for c in cols),
                                            str(arrays[f"matrix{m}_title"]))
        record = FitRecord({name: scalar(arrays[f"scalar{s}"]) for s, name in enumerate(names("scalar_names"))},
                           {name: np.array(arrays[f"trace{s}"]) for s, name in enumerate(names("trace_names"))},
                           matrices)
        return cls([np.array(arrays[f"labels{t}"]) for t in range(int(arrays["n_tasks"]))],
                   np.array(arrays["objective_trace"]), int(arrays["n_iter"]), bool(arrays["converged"]),
                   np.array(arrays["degenerate"]), record)


@functools.cache
def code_digest() -> str:
    """sha1 over the source of the mtc package: a kept fit names the code that computed it, so a
    study resumed after the code changed fits again instead of reading an older code's fit."""
    root = Path(__file__).parent
    digest = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()
