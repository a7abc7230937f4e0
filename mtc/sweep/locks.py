"""Locks that keep concurrent drivers apart (filelock: an OS lock, released by the kernel
when its holder dies, even by SIGKILL, so a killed driver never blocks the next one).

- One live driver per sweep: a second driver of the same sweep (same output folder) would
  delete and re-create the first one's pending runs.
- One live sweep per SQLite store: SQLite takes one writer at a time, and MLflow's schema
  migrations of a new store race (``alembic ... Online migration expected to match one
  row``); concurrent sweeps belong on a tracking server (python -m mtc.stack start).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from filelock import FileLock, Timeout

from mtc.errors import InputError


class BusyError(InputError):
    """Another live driver holds the lock."""


@contextlib.contextmanager
def held(path: Path, busy_message: str):
    """Hold the lock at ``path`` (a sibling file records the holder's pid), or raise BusyError
    with ``busy_message`` (``{pid}`` is filled in) if another process holds it."""
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        holder = read_holder(path)
        raise BusyError(busy_message.format(pid=holder)) from None
    owner = path.with_name(path.name + ".pid")
    try:
        owner.write_text(str(os.getpid()))
        yield
    finally:
        owner.unlink(missing_ok=True)
        lock.release()


def read_holder(path: Path) -> str:
    try:
        return path.with_name(path.name + ".pid").read_text().strip() or "?"
    except OSError:
        return "?"


@contextlib.contextmanager
def driver_locks(output_dir: Path, sweep_name: str, tracking_uri: str):
    """The locks a sweep's driver holds for its whole life."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(held(output_dir / ".driver.lock",
                                 f"sweep {sweep_name!r} is already running (driver pid {{pid}}, output folder "
                                 f"{output_dir}); wait for it, or stop it and run this command again to resume"))
        stack.enter_context(store_lock(tracking_uri))
        yield


@contextlib.contextmanager
def store_lock(tracking_uri: str):
    """One live driver (a sweep or a study) per SQLite store; nothing for a server."""
    if not tracking_uri.startswith("sqlite:///"):
        yield
        return
    store = Path(tracking_uri[len("sqlite:///"):])
    with held(store.with_name(store.name + ".lock"),
              f"another sweep (driver pid {{pid}}) is writing to the SQLite store {store}; "
              "SQLite takes one sweep at a time: wait for it, or run concurrent sweeps "
              "against a tracking server (python -m mtc.stack start; docs/cluster.md)"):
        yield
