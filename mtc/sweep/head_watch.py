"""A driver joined to a Ray cluster watches its head: when the head's GCS has not answered for
``ray.head_lost_seconds`` (30 by default), the driver ends with one line of its own (exit 1)
and the same command resumes the study once the head is back.

Without it, Ray's core worker ends the driver itself when it cannot reach the GCS for
``gcs_rpc_server_reconnect_timeout_s`` (60 s by default), with Ray's own line ("Failed to
connect to GCS within 60 seconds") and exit 1; and until then the Tuner waits. The driver
ends at once (``os._exit``) rather than closing its runs: Ray's shutdown waits on the lost
GCS, and the tracking server runs on the head in the documented cluster (docs/cluster.md).
Its runs stay as they were (the parents RUNNING, the finished trials FINISHED); the same
command takes them up again.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Callable

from mtc.store.preflight import speaks_grpc

PROBE_SECONDS = 2.0


def head_answers(address: str, timeout: float) -> bool:
    """Whether Ray's GCS at ``host:port`` accepts a connection and answers as a gRPC server."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as connection:
            return speaks_grpc(connection)
    except OSError:
        return False


def head_lost_line(address: str, seconds: float) -> str:
    return (f"error: the Ray head at {address} has not answered for {seconds:.0f} s (its host lost, or its Ray "
            "stopped); the driver stopped and left its runs as they were; once the head is back and the workers "
            "have joined it again (ray start), run the same command to resume: finished trials are kept, the others "
            "run again")


def exit_head_lost(line: str) -> None:
    """End the process with ``line`` on stderr and exit 1, from the watch thread (the progress
    line ended first)."""
    from mtc.sweep.progress import end_open_lines

    end_open_lines()
    with contextlib.suppress(OSError):
        print(line, file=sys.stderr, flush=True)
    os._exit(1)


@contextlib.contextmanager
def watching_head(address: str, lost_after: float, probe_every: float = PROBE_SECONDS,
                  on_lost: Callable[[str], None] = exit_head_lost):
    """Within, a thread asks the head's GCS at ``address`` every ``probe_every`` seconds
    whether it answers; after ``lost_after`` seconds without an answer it calls ``on_lost``
    with the line to print (by default the process ends: exit_head_lost) and watches no more."""
    stopping = threading.Event()

    def watch():
        answered = time.monotonic()
        while not stopping.wait(probe_every):
            if head_answers(address, timeout=probe_every):
                answered = time.monotonic()
            elif time.monotonic() - answered >= lost_after and not stopping.is_set():
                on_lost(head_lost_line(address, time.monotonic() - answered))
                return

    thread = threading.Thread(target=watch, name="mtc-head-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopping.set()
        thread.join()
