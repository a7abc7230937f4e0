"""Locks that keep concurrent drivers apart (filelock: an OS lock, released by the kernel
when its holder dies, even by SIGKILL, so a killed driver never blocks the next one).

- One live driver per sweep: a second driver of the same sweep (same output folder) would
  delete and re-create the first one's pending runs.
- One live sweep per SQLite store: SQLite takes one writer at a time, and MLflow's schema
  migrations of a new store race (``alembic ... Online migration expected to match one
  row``); concurrent sweeps belong on a tracking server (python -m mtc.stack start).

A file lock only sees drivers on one machine. Against a tracking server or a database, two
drivers of one sweep may run on two machines with two output folders; there the sweep is
leased on the server (``server_lease``): an experiment tag per sweep key names the driver and
is renewed by a heartbeat.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
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


LEASE_TAG = "mtc.lease.{key}"
LEASE_SECONDS = 120.0  # a lease not renewed for this long belongs to a dead driver
RENEW_SECONDS = 30.0
SETTLE_SECONDS = 2.0  # longer than a read-then-write of two drivers starting together


def lease_holder(client, experiment_id: str, key: str) -> dict | None:
    """The live lease of sweep ``key`` (holder, renewed), or None if none or expired."""
    tag = client.get_experiment(experiment_id).tags.get(LEASE_TAG.format(key=key))
    if not tag:
        return None
    lease = json.loads(tag)
    return lease if time.time() - lease["renewed"] < LEASE_SECONDS else None


@contextlib.contextmanager
def server_lease(client, experiment_id: str, sweeps: dict[str, str], tracking_uri: str):
    """Hold a lease on each sweep (``{key: name}``) in the store, or raise BusyError naming
    the live driver that holds one; nothing for a SQLite store (its file lock covers it).

    MLflow has no compare-and-set, so the lease is written, then read back after
    SETTLE_SECONDS: of two drivers that read "free" at the same moment, the later writer keeps
    it and the other backs off. Freshness compares the holder's clock with ours (hosts in one
    cluster keep NTP time; a skew above LEASE_SECONDS would matter). A driver killed by
    SIGKILL stops renewing, and its lease lapses after LEASE_SECONDS.
    """
    if tracking_uri.startswith("sqlite:///") or not sweeps:
        yield
        return
    me = f"{socket.gethostname()} pid {os.getpid()} {uuid.uuid4().hex[:8]}"

    def refuse_if_taken():
        for key, name in sweeps.items():
            lease = lease_holder(client, experiment_id, key)
            if lease and lease["holder"] != me:
                age = time.time() - lease["renewed"]
                raise BusyError(f"sweep {name!r} is already running from {lease['holder'].rsplit(' ', 1)[0]} against "
                                f"this tracking store (its lease was renewed {age:.0f} s ago); wait for it, or stop it "
                                f"and run this command again to resume (a dead driver's lease lapses after "
                                f"{LEASE_SECONDS:.0f} s)")

    def renew():
        value = json.dumps({"holder": me, "renewed": time.time()})
        for key in sweeps:
            client.set_experiment_tag(experiment_id, LEASE_TAG.format(key=key), value)

    refuse_if_taken()
    renew()
    time.sleep(SETTLE_SECONDS)
    refuse_if_taken()
    stop = threading.Event()

    def heartbeat():
        while not stop.wait(RENEW_SECONDS):
            with contextlib.suppress(Exception):  # a server restarting: the next beat renews
                renew()

    beat = threading.Thread(target=heartbeat, name="mtc-lease-heartbeat", daemon=True)
    beat.start()
    try:
        yield
    finally:
        stop.set()
        beat.join()
        with contextlib.suppress(Exception):  # a store gone at exit: the lease lapses by itself
            for key in sweeps:
                if (lease_holder(client, experiment_id, key) or {}).get("holder") == me:
                    client.delete_experiment_tag(experiment_id, LEASE_TAG.format(key=key))
