"""Locks that keep concurrent drivers apart: an OS lock (flock) on a file opened close-on-exec,
released by the kernel when its holder dies, even by SIGKILL, so a killed driver never blocks
the next one; the lock file records its holder (pid, host, boot, PID namespace, start time)
and is removed when released.

- One live driver per sweep: a second driver of the same sweep (same output folder) would
  delete and re-create the first one's pending runs.
- One live sweep per SQLite store: SQLite takes one writer at a time, and MLflow's schema
  migrations of a new store race (``alembic ... Online migration expected to match one
  row``); concurrent sweeps belong on a tracking server (python -m mtc.stack start).

A lock outlives its holder only in a process that shares its open file (a fork that did not
exec: close-on-exec keeps it from every program a driver starts). If the recorded holder is
gone from this machine and such a process still holds the lock, it is a leftover of the dead
driver: it is ended and the lock taken (``held``).

A file lock only sees drivers on one machine. Against a tracking server or a database, two
drivers of one sweep may run on two machines with two output folders; there the sweep is
leased on the server (``server_lease``): an experiment tag per sweep key names the driver and
is renewed by a heartbeat. A lease whose holder was on this machine and is gone is taken over
at once; one held from another machine lapses after LEASE_SECONDS.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import json
import os
import signal
import socket
import threading
import time
import uuid
from pathlib import Path

from mtc.errors import InputError


class BusyError(InputError):
    """Another live driver holds the lock."""


@functools.cache
def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


@functools.cache
def pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot, /proc/<pid>/stat), or None if it
    does not run here."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process here that has not exited (a zombie has)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def this_process() -> dict:
    """What names this process to a driver that finds its lock or lease: pid, host, boot, PID
    namespace and start time (a pid reused by a later process is told apart)."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "boot": boot_id(), "pidns": pid_namespace(),
            "started": start_time(os.getpid())}


def gone(holder: dict) -> bool:
    """Whether the process a holder record names has ended, as far as this machine can tell: it
    ran here (this host, this boot, this PID namespace) and its pid runs no more, or runs a
    process started at another time. A holder elsewhere is never gone by this test."""
    pid = holder.get("pid")
    if not isinstance(pid, int) or not holder.get("boot") or not holder.get("pidns"):
        return False
    if (holder.get("host"), holder["boot"], holder["pidns"]) != (socket.gethostname(), boot_id(), pid_namespace()):
        return False
    return not alive(pid) or start_time(pid) != holder.get("started")


def end_processes(pids, grace: float = 5.0) -> list[int]:
    """SIGTERM to each of ``pids``, SIGKILL to those still alive ``grace`` seconds later (at once
    without a grace), and a short wait for them to go; returns the pids that were alive."""
    ended = []
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM if grace > 0 else signal.SIGKILL)
            ended.append(pid)
    deadline = time.monotonic() + grace
    while any(alive(pid) for pid in ended) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in ended:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while any(alive(pid) for pid in ended) and time.monotonic() < deadline:
        time.sleep(0.05)
    return ended


def take(path: Path) -> int | None:
    """A descriptor holding the lock at ``path`` (the file created if needed, close-on-exec), or
    None if another process holds it. A file its previous holder removed while this one waited
    is not taken: the lock is then on the new file."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.EAGAIN, errno.EACCES):
                return None
            raise
        except BaseException:
            os.close(fd)
            raise
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def release(path: Path, fd: int) -> None:
    """Remove the lock file, then let go of the lock (in that order: a process that opened the
    old file and takes its lock next sees it removed, see take)."""
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    finally:
        os.close(fd)


def read_holder(path: Path) -> dict | None:
    """The holder record in the lock file at ``path``, or None (no file, or not yet written)."""
    try:
        holder = json.loads(Path(path).read_text() or "null")
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


def lock_holders(path: Path) -> list[int]:
    """The processes whose open file holds the flock on ``path`` (/proc/<pid>/fdinfo lists the
    locks an open file holds, in every process that shares it)."""
    try:
        inode = os.stat(path).st_ino
    except OSError:
        return []
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            for info in (proc / "fdinfo").iterdir():
                with contextlib.suppress(OSError):
                    text = info.read_text()
                    if any(line.startswith("lock:") and "FLOCK" in line and line.split()[-3].endswith(f":{inode}")
                           for line in text.splitlines()):
                        found.append(int(proc.name))
                        break
    return found


def take_or_free(path: Path) -> tuple[int | None, dict | None]:
    """take(path); when another holds the lock but the holder it records is gone (gone), the
    processes still holding it (a dead driver's leftovers) are ended and the lock taken.
    Returns (descriptor or None, the holder record found)."""
    fd = take(path)
    if fd is not None:
        return fd, None
    holder = read_holder(path)
    if holder is not None and gone(holder):
        end_processes(lock_holders(path))
        fd = take(path)
    return fd, holder


def held_by_another(path: Path) -> bool:
    """Whether another live process holds the lock at ``path``, the file left as it is (neither
    created nor removed): none holds a file that does not exist, nor one whose recorded holder
    is gone (gone), whatever leftover of it still holds the file."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno not in (errno.EAGAIN, errno.EACCES):
            raise
        holder = read_holder(path)
        return not (holder is not None and gone(holder))
    finally:
        os.close(fd)  # a lock it took goes with it
    return False


@contextlib.contextmanager
def held(path: Path, busy_message: str):
    """Hold the lock at ``path`` (its file records the holder: this_process), or raise BusyError
    with ``busy_message`` (``{pid}`` is filled in) if another live process holds it."""
    fd, holder = take_or_free(Path(path))
    if fd is None:
        raise BusyError(busy_message.format(pid=(holder or {}).get("pid", "?"))) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(this_process()).encode(), 0)
        yield
    finally:
        release(Path(path), fd)


def driver_message(sweep_name: str, output_dir: Path) -> str:
    """The refusal of a second driver of a sweep (``{pid}``: the first one's)."""
    return (f"sweep {sweep_name!r} is already running (driver pid {{pid}}, output folder {output_dir}); wait for it, "
            "or stop it and run this command again to resume")


@contextlib.contextmanager
def driver_locks(output_dir: Path, sweep_name: str, tracking_uri: str):
    """The locks a sweep's driver holds for its whole life."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(held(output_dir / ".driver.lock", driver_message(sweep_name, output_dir)))
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
    """The live lease of sweep ``key`` (holder, renewed and the holder's process, this_process),
    or None if none, expired, or held by a driver of this machine that is gone (gone)."""
    tag = client.get_experiment(experiment_id).tags.get(LEASE_TAG.format(key=key))
    if not tag:
        return None
    lease = json.loads(tag)
    if time.time() - lease["renewed"] >= LEASE_SECONDS or gone(lease.get("process") or {}):
        return None
    return lease


def remove_lapsed_leases(client, experiment_id: str) -> list[str]:
    """Delete the experiment's lease tags that no live driver holds (lease_holder: lapsed, or
    its driver gone from this machine); the keys removed. A driver killed by SIGKILL leaves a
    lease on each of its sweeps, and the next driver takes over only those it runs: the leases
    of sweeps that finished before the kill stayed in the store (benchmarks/chaos_run.py)."""
    prefix = LEASE_TAG.format(key="")
    keys = [name[len(prefix):] for name in client.get_experiment(experiment_id).tags if name.startswith(prefix)]
    lapsed = [key for key in keys if lease_holder(client, experiment_id, key) is None]
    for key in lapsed:
        client.delete_experiment_tag(experiment_id, LEASE_TAG.format(key=key))
    return lapsed


@contextlib.contextmanager
def server_lease(client, experiment_id: str, sweeps: dict[str, str], tracking_uri: str, confirm_later: bool = False):
    """Hold a lease on each sweep (``{key: name}``) in the store, or raise BusyError naming
    the live driver that holds one; nothing for a SQLite store (its file lock covers it).

    MLflow has no compare-and-set, so the lease is written, then read back after
    SETTLE_SECONDS: of two drivers that read "free" at the same moment, the later writer keeps
    it and the other backs off. Freshness compares the holder's clock with ours (hosts in one
    cluster keep NTP time; a skew above LEASE_SECONDS would matter). A driver killed by
    SIGKILL stops renewing, and its lease lapses after LEASE_SECONDS; on the machine it ran
    on, the same command takes it over at once (the lease names the holder's process, which
    is seen gone there). The heartbeat thread takes no stop signal (the driver's main thread
    does, see mtc.sweep.stopping).

    Yields ``confirm``: the read back after SETTLE_SECONDS, done before the block unless
    ``confirm_later`` (the caller then calls it, its wait overlapping other work: a driver
    starts Ray meanwhile), and nothing to do a second time. Dead drivers' leases of any sweep
    of the experiment go first (remove_lapsed_leases).
    """
    if tracking_uri.startswith("sqlite:///") or not sweeps:
        yield lambda: None
        return
    remove_lapsed_leases(client, experiment_id)
    me = f"{socket.gethostname()} pid {os.getpid()} {uuid.uuid4().hex[:8]}"
    process = this_process()

    def refuse_if_taken():
        for key, name in sweeps.items():
            lease = lease_holder(client, experiment_id, key)
            if lease and lease["holder"] != me:
                age = time.time() - lease["renewed"]
                raise BusyError(f"sweep {name!r} is already running from {lease['holder'].rsplit(' ', 1)[0]} against "
                                f"this tracking store (its lease was renewed {age:.0f} s ago); wait for it, or stop it "
                                f"and run this command again to resume (a dead driver's lease lapses after "
                                f"{LEASE_SECONDS:.0f} s; on the machine it ran on, at once)")

    def renew():
        value = json.dumps({"holder": me, "renewed": time.time(), "process": process})
        for key in sweeps:
            client.set_experiment_tag(experiment_id, LEASE_TAG.format(key=key), value)

    stop = threading.Event()

    def heartbeat():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
        while not stop.wait(RENEW_SECONDS):
            with contextlib.suppress(Exception):  # a server restarting: the next beat renews
                renew()

    beat = threading.Thread(target=heartbeat, name="mtc-lease-heartbeat", daemon=True)
    confirmed = []

    def confirm():
        if not confirmed:
            time.sleep(max(0.0, SETTLE_SECONDS - (time.monotonic() - written)))
            refuse_if_taken()
            confirmed.append(True)

    refuse_if_taken()
    try:
        renew()
        written = time.monotonic()
        if not confirm_later:
            confirm()
        beat.start()
        yield confirm
    finally:
        stop.set()
        if beat.is_alive():
            beat.join()
        with contextlib.suppress(Exception):  # a store gone at exit: the lease lapses by itself
            for key in sweeps:
                if (lease_holder(client, experiment_id, key) or {}).get("holder") == me:
                    client.delete_experiment_tag(experiment_id, LEASE_TAG.format(key=key))
