"""Full disks: which error a full disk caused, and which of a sweep's local folders is full."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from mtc.config import Settings


def full_folders(run: Settings, least: int = 1 << 20) -> list[str]:
    """The sweep's local folders (artifact folder, SQLite store, output folder) whose disk has
    less than ``least`` bytes free, each named with what is free."""
    store = run.tracking.uri[len("sqlite:///"):] if run.tracking.uri.startswith("sqlite:///") else None
    artifacts = run.tracking.artifact_root if run.tracking.artifact_root and "://" not in run.tracking.artifact_root \
        else None
    named = []
    for what, path in (("the artifact folder", artifacts), ("the SQLite store", store),
                       ("the output folder", run.sweep.output_dir)):
        if path is None:
            continue
        existing = next(p for p in (Path(path), *Path(path).parents) if p.exists())
        free = shutil.disk_usage(existing).free
        if free < least:
            named.append(f"{what} {path} has {free // 1024} KiB free")
    return named


FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


def full_disk(error: BaseException) -> str | None:
    """One line for an error that a full disk caused (ENOSPC, a quota, SQLite's "database or
    disk is full"), naming the file it failed to write; None for any other error."""
    seen, chain = error, set()
    while seen is not None and id(seen) not in chain:
        chain.add(id(seen))
        if isinstance(seen, OSError) and seen.errno in FULL_DISK:
            where = f" writing {seen.filename}" if seen.filename else ""
            return f"{os.strerror(seen.errno).lower()}{where}"
        if "database or disk is full" in str(seen):
            return "the disk of the SQLite store is full (database or disk is full)"
        seen = seen.__cause__ or seen.__context__
    return None
