"""Full disks: which error a full disk caused, and which of a sweep's local folders is full."""

from __future__ import annotations

import errno
import logging
import os
import shutil
from pathlib import Path

from mtc.config import Settings


def local_folders(run: Settings) -> list[tuple[str, str]]:
    """The sweep's local folders a full disk can stop: (what, path) of its artifact folder,
    SQLite store and output folder, those that are local."""
    store = run.tracking.uri[len("sqlite:///"):] if run.tracking.uri.startswith("sqlite:///") else None
    artifacts = run.tracking.artifact_root if run.tracking.artifact_root and "://" not in run.tracking.artifact_root \
        else None
    return [(what, str(path)) for what, path in (("the artifact folder", artifacts), ("the SQLite store", store),
                                                 ("the output folder", run.sweep.output_dir)) if path is not None]


def full_among(folders: list[tuple[str, str]], least: int = 1 << 20) -> list[str]:
    """Of (what, path) folders, those whose disk has less than ``least`` bytes free, each named
    with what is free."""
    named = []
    for what, path in dict.fromkeys(folders):
        existing = next((p for p in (Path(path), *Path(path).parents) if p.exists()), None)
        if existing is None:
            continue
        free = shutil.disk_usage(existing).free
        if free < least:
            named.append(f"{what} {path} has {free // 1024} KiB free")
    return named


def full_folders(run: Settings, least: int = 1 << 20) -> list[str]:
    """The sweep's local folders (artifact folder, SQLite store, output folder) whose disk has
    less than ``least`` bytes free, each named with what is free."""
    return full_among(local_folders(run), least)


WATCHED: list[tuple[str, str]] = []  # the local folders of the sweeps this process planned (watch)


def watch(run: Settings) -> None:
    """Remember a planned sweep's local folders: a full-disk error that names no file (Ray
    Tune's pyarrow writes) is then told by the folder whose disk is full (full_disk)."""
    WATCHED.extend(folder for folder in local_folders(run) if folder not in WATCHED)


FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


def full_disk(error: BaseException) -> str | None:
    """One line for an error that a full disk caused (ENOSPC, a quota, SQLite's "database or
    disk is full"), naming the file it failed to write; None for any other error."""
    seen, chain = error, set()
    while seen is not None and id(seen) not in chain:
        chain.add(id(seen))
        if isinstance(seen, OSError) and seen.errno in FULL_DISK:
            if seen.filename:
                return f"{os.strerror(seen.errno).lower()} writing {seen.filename}"
            full = full_among(WATCHED)  # pyarrow's errors name no file: the watched folder that is full
            return os.strerror(seen.errno).lower() + (f" ({', '.join(full)})" if full else "")
        if "database or disk is full" in str(seen):
            return "the disk of the SQLite store is full (database or disk is full)"
        seen = seen.__cause__ or seen.__context__
    return None


class FullDiskInOneLine(logging.Filter):
    """A log filter: a record whose error a full disk caused (full_disk) loses its traceback and
    becomes one warning line, printed once per cause; other records pass unchanged.

    Ray Tune logs a failed save of its experiment state under the output folder with pyarrow's
    traceback, at every save until its run ends, and goes on (every result is in MLflow, and the
    driver names the full disk in its last line when it then cannot write the report)."""

    def __init__(self, template: str):
        super().__init__()
        self.template = template
        self.told: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        cause = full_disk(error) if error is not None else None
        if cause is None:
            return True
        if cause in self.told:
            return False
        self.told.add(cause)
        record.msg, record.args = self.template.format(cause=cause), ()
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def full_disk_in_one_line(logger_name: str, template: str) -> None:
    """Install FullDiskInOneLine on the logger ``logger_name`` (once per process); ``template``
    is its line, with ``{cause}`` for full_disk's words."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(existing, FullDiskInOneLine) for existing in logger.filters):
        logger.addFilter(FullDiskInOneLine(template))
