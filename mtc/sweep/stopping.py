"""How a driver stops: the stop signals (Ctrl-C, SIGTERM, SIGHUP) raised as Stopped in its main
thread, the exceptions that end a sweep early, and the one line and exit code each ends with.

A stop signal must not end the process on the spot (SIGTERM's default, Ray's handler) or
abort it (Ray's core worker's Abseil handler, exit 134): the driver stops Ray first, then
closes its runs KILLED (mtc.sweep.driver.leave), and the same command resumes.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

from mtc.store.disk import full_disk


class SweepInterrupted(Exception):
    """A stop signal ended the sweep; the message says how far it got and how to resume, and
    ``exit_code`` is 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP)."""

    def __init__(self, message: str, exit_code: int = 130):
        super().__init__(message)
        self.exit_code = exit_code


class SweepIncomplete(Exception):
    """Some planned trials have no result (their Ray worker died and its retries ran out, or
    their run could not be logged: a full disk, a store that refuses writes), or every trial
    failed in its fit; the parent run is FAILED and the message is one line saying why and how
    to resume."""


class Stopped(KeyboardInterrupt):
    """A stop signal raised in the driver's main thread: Ctrl-C (SIGINT), SIGTERM (``kill``, a
    scheduler's time limit, a container stop) or SIGHUP (the terminal closed). A subclass of
    KeyboardInterrupt, so that Ray Tune stops on each as on Ctrl-C."""

    def __init__(self, signum: int = signal.SIGINT):
        self.signum = signal.Signals(signum)
        super().__init__(self.signum.name)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def how(self) -> str:
        return {signal.SIGINT: "interrupted (Ctrl-C)", signal.SIGHUP: "stopped by SIGHUP (the terminal closed)"}.get(
            self.signum, f"stopped by {self.signum.name}")


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


RECEIVED: list[int] = []  # the stop signals received in this process, in order


def raise_stopped(signum, frame):
    RECEIVED.append(signum)
    raise Stopped(signum)


def as_stopped(error: KeyboardInterrupt) -> Stopped:
    """The stop signal behind a KeyboardInterrupt: Ray's blocking calls turn whatever a signal
    handler raised into a plain KeyboardInterrupt, so the last signal received says which."""
    if isinstance(error, Stopped):
        return error
    return Stopped(RECEIVED[-1] if RECEIVED else signal.SIGINT)


@contextlib.contextmanager
def signals_handled_by(handler, signals=STOP_SIGNALS):
    """Within, ``signals`` go to ``handler`` in the main thread, except one this process ignores
    (the shell ignores SIGINT for ``cmd &``, nohup SIGHUP: they stay ignored); the previous
    handlers are restored afterwards. Nothing outside the main thread (Python takes signals
    there only)."""
    previous = {} if threading.current_thread() is not threading.main_thread() else {
        signum: signal.signal(signum, handler) for signum in signals if signal.getsignal(signum) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def stop_signals():
    """Within, SIGINT, SIGTERM and SIGHUP raise Stopped in the main thread, so the driver closes
    its runs KILLED on each (SIGTERM and SIGHUP otherwise end the process on the spot, and
    Ray's SIGTERM handler aborts it, see mtc.sweep.driver.ray_session)."""
    return signals_handled_by(raise_stopped)


@contextlib.contextmanager
def ray_processes_in_a_group_of_their_own():
    """Within, the processes a local ``ray.init`` starts (GCS, raylet, and through the raylet
    the workers) are put in a process group of their own, as Ray does on Windows.

    A stop signal sent to the driver's process group (``kill -- -PGID``, a terminal's Ctrl-C
    or hang-up) then reaches the driver alone, which stops Ray in order and closes its runs
    (mtc.sweep.driver.leave). In the driver's group, the raylet could die of the same signal
    first, and Ray's core worker ends a driver whose raylet died at once (exit 1, its runs
    left RUNNING, its Ray folder left behind). They still die with the driver: Ray sets their
    parent-death signal on Linux. Ray (pinned) starts them with
    ``ray._private.services.ConsolePopen``, which is what is wrapped here; no public option
    does this."""
    from ray._private import services

    popen = services.ConsolePopen

    class InTheirOwnGroup(popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, process_group=0, **kwargs)

    services.ConsolePopen = InTheirOwnGroup
    try:
        yield
    finally:
        services.ConsolePopen = popen


def shielded():
    """While a stopped or failed driver stops Ray and closes its runs, a further stop signal (a
    second Ctrl-C) says so in one line and is otherwise ignored: the closing is not cut short."""

    def closing(signum, frame):
        with contextlib.suppress(OSError):  # SIGHUP: the terminal may be gone
            print(f"{signal.Signals(signum).name}: still closing the sweep's runs; the driver exits after that",
                  file=sys.stderr)

    return signals_handled_by(closing)


@contextlib.contextmanager
def command_exits():
    """Within, a sweep's or a study's end other than success becomes one line on stderr and its
    exit code: a stop signal 128 + its number (130 for Ctrl-C), an incomplete sweep or a full
    disk 1; any other error propagates (a bug: its traceback)."""
    try:
        yield
    except SweepInterrupted as interrupted:
        exit_with(str(interrupted), interrupted.exit_code)
    except KeyboardInterrupt as error:  # a stop signal before any run existed
        stopped = as_stopped(error)
        exit_with(f"{stopped.how} before any MLflow run was created", stopped.exit_code)
    except SweepIncomplete as incomplete:
        exit_with(f"error: {incomplete}", 1)
    except Exception as error:
        disk = full_disk(error)
        if disk is None:
            raise
        exit_with(f"error: {disk}; free space and run the same command again to resume (finished trials are kept)", 1)


def exit_with(line: str, code: int):
    with contextlib.suppress(OSError):  # SIGHUP: the terminal may be gone
        print(line, file=sys.stderr)
    sys.exit(code)


def workers_exit_quietly_on_sigterm() -> None:
    """Ray's worker setup hook (``runtime_env["worker_process_setup_hook"]``, run in each
    worker's main thread before its task loop): the SIGTERM handler Ray then installs
    (``ray._private.utils.set_sigterm_handler`` in ``Worker.main_loop``) raises SystemExit at
    whatever bytecode the worker is running, often a garbage-collection callback, where Python
    prints "Exception ignored … SystemExit" and goes on. Ray stops its workers with SIGTERM at
    every ``ray.shutdown``, so successful sweeps printed that traceback; here the worker exits
    at once instead. Nothing is lost: a trial's run is logged before its result reaches Tune,
    and a worker stopped mid-trial is what a SIGTERM means either way."""
    import os

    import ray._private.utils as ray_utils

    install = ray_utils.set_sigterm_handler

    def set_sigterm_handler(handler):
        def exit_now(signum, frame):
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(1)

        install(exit_now)

    ray_utils.set_sigterm_handler = set_sigterm_handler
