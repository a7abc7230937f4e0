"""A finished sweep's report as its driver logged it, read from a SQLite store without MLflow.

Running a finished sweep again from the command line reports it and starts no Ray. Reading
its runs back through MLflow's client costs more than the rest of such a command: importing
MLflow (0.74 s) and opening its SQLAlchemy store (0.9 s), against about 2 ms for the query
below (docs/results/README.md). When the sweep's parent run is FINISHED and marked done for
exactly the planned trials (the driver's ALL_FINISHED_TAG, written with its report), the
report and grid it logged as artifacts are the report of those runs: this module finds that
parent with the standard library's ``sqlite3`` (read-only; MLflow's tables ``experiments``,
``runs`` and ``tags``) and hands back the folder holding them. Anything else (another kind of
store, an artifact store that is not a local folder, a moved store, a locked or older
database) gives None, and the caller reads the runs through MLflow as before.
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

REPORT_FILES = ("report.md", "grid.csv")

# The newest active run with the sweep's key (the parent the driver itself would find: its search
# orders by start time, newest first), its status, artifact folder and the tags read here.
_PARENT = """
SELECT runs.run_uuid, runs.experiment_id, runs.artifact_uri, runs.status,
       (SELECT value FROM tags WHERE tags.run_uuid = runs.run_uuid AND tags.key = ?),
       EXISTS (SELECT 1 FROM tags WHERE tags.run_uuid = runs.run_uuid AND tags.key = 'mtc.best_by_acc')
FROM runs JOIN experiments ON experiments.experiment_id = runs.experiment_id
WHERE experiments.name = ? AND experiments.lifecycle_stage = 'active' AND runs.lifecycle_stage = 'active'
  AND EXISTS (SELECT 1 FROM tags WHERE tags.run_uuid = runs.run_uuid AND tags.key = ? AND tags.value = ?)
ORDER BY runs.start_time DESC, runs.run_uuid
LIMIT 1
"""


@dataclass(frozen=True)
class StoredReport:
    """A finished sweep's parent run and the local folder of its logged report.

    Attributes
    ----------
    experiment_id, parent_id : str
        Where the sweep is in the store.
    folder : pathlib.Path
        The parent's artifact folder, holding ``report.md`` and ``grid.csv``.
    labelled : bool
        Whether the sweep chose a point by accuracy (its data has labels).
    """

    experiment_id: str
    parent_id: str
    folder: Path
    labelled: bool


def local_folder(artifact_uri: str) -> Path | None:
    """The folder of a ``file:`` (or plain path) artifact URI, else None."""
    parsed = urlparse(artifact_uri)
    if parsed.scheme not in ("", "file") or parsed.netloc not in ("", "localhost"):
        return None
    return Path(unquote(parsed.path))


def stored_report(tracking_uri: str, experiment: str, sweep_key: str, key_tag: str, digest: str,
                  done_tag: str) -> StoredReport | None:
    """The report of the sweep whose parent run has tag ``key_tag`` = ``sweep_key`` and
    ``done_tag`` = ``digest`` (every planned trial FINISHED), is FINISHED, and whose report
    files are in a local artifact folder; None otherwise (see the module's docstring)."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    database = Path(tracking_uri[len("sqlite:///"):])
    if not database.is_file():
        return None
    try:  # sqlite3's own context manager only commits: closing() closes
        with contextlib.closing(sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True, timeout=1)) as db:
            row = db.execute(_PARENT, (done_tag, experiment, key_tag, sweep_key)).fetchone()
    except sqlite3.Error:  # locked by a writer, not an MLflow database, an older schema: MLflow's client decides
        return None
    if row is None:
        return None
    parent_id, experiment_id, artifact_uri, status, done, labelled = row
    folder = local_folder(artifact_uri or "")
    if status != "FINISHED" or done != digest or folder is None or not all((folder / name).is_file()
                                                                            for name in REPORT_FILES):
        return None
    return StoredReport(str(experiment_id), parent_id, folder, bool(labelled))
