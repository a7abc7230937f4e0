"""How a driver stops: the stop signals (Ctrl-C, SIGTERM, SIGHUP) raised as Stopped in its main
thread, the exceptions that end a sweep early, and the one line and exit code each ends with.

A stop signal must not end the process on the spot (SIGTERM's default, Ray's handler) or
abort it (Ray's core worker's Abseil handler, exit 134): the driver stops Ray first, then
closes its runs KILLED (mtc.sweep.driver.leave), and the same command resumes. While Ray
starts or stops, and while a sweep's runs are created, a stop signal is noted and raised once
that step is over (deferred): a ``ray.init`` cut short leaves Ray's processes running, or
a half-made core worker that crashes the driver (exit 139) when it is shut down.

Test hook (tests/test_orphans.py, tests/test_sweep.py), off unless set: with
``MTC_DEBUG_MOMENTS=<file>`` a driver appends the name of each moment it reaches to that file,
one a line (``data``: before its data is checked, loaded if not yet; ``ray``: Ray about to
start; ``ray-started``; ``trials``: the Tuner about to run; ``tune-trial-ended``: a Ray Tune
trial ended, before Ray Tune hands its actor to the next trial (mtc.sweep.stranded);
``report``: the report about to be written; ``finished``: the sweep reported, Ray about to
stop; ``compare``: a study's compare folders about to be written), and
``MTC_DEBUG_PAUSE=<moment>=<seconds>`` makes it sleep there once it has written the name, so
that a test's signal (or kill) lands in that moment.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
import time

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


class Noting:
    """deferred's handler: it notes each stop signal, to be raised later."""

    def __init__(self):
        self.noted: list[int] = []

    def __call__(self, signum, frame):
        RECEIVED.append(signum)
        self.noted.append(signum)


def ours(handler) -> bool:
    """Whether ``handler`` is the driver's for a stop signal (stop_signals, deferred)."""
    return handler is raise_stopped or isinstance(handler, Noting)


@contextlib.contextmanager
def deferred(ending: BaseException | None = None):
    """Within, a stop signal that would raise Stopped (stop_signals) is noted instead, and raised
    once the block is over (the first one noted): for the steps a signal must not cut short,
    Ray's start and stop (mtc.sweep.driver.ray_session), the creation of a sweep's runs (leave
    closes them only once they exist), a lease's release. ``ending``: the exception that is
    already ending the driver (the block is its clean-up). What the block ends with is raised
    (signal_outcome); nothing changes where the stop signals do not raise Stopped (another
    thread, another handler: a program that embeds the driver keeps its own)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    note = Noting()
    previous = {signum: signal.signal(signum, note) for signum in STOP_SIGNALS if ours(signal.getsignal(signum))}
    try:
        yield
    except BaseException as error:
        outcome = signal_outcome(note.noted, error) if previous else None
        if outcome is None:
            raise
        raise outcome from error
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
    outcome = signal_outcome(note.noted, ending) if previous else None
    if outcome is not None:
        raise outcome


def signal_outcome(noted: list[int], error: BaseException | None) -> BaseException | None:
    """What to raise when stop signals were ``noted`` while ``error`` (or nothing) ended a block:
    nothing new if none was noted, or if the error is already a stop (KeyboardInterrupt,
    SweepInterrupted, SystemExit); an incomplete sweep stopped as it ended is SweepInterrupted
    with its message; otherwise Stopped (a signal's exit code wins over an error's)."""
    if not noted or isinstance(error, (KeyboardInterrupt, SweepInterrupted, SystemExit)):
        return None
    stop = Stopped(noted[0])
    if isinstance(error, SweepIncomplete):
        return SweepInterrupted(f"{stop.how} as the driver ended; {error}", stop.exit_code)
    return stop


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


@contextlib.contextmanager
def ray_keeps_our_signal_handlers():
    """Within (the driver's ``ray.init``), Ray leaves the driver's handling of the stop signals
    alone: no SIGTERM handler of its own (``ray.init`` sets one that exits at once, mid-way
    through whatever the driver does) and no Abseil failure-signal handler in the driver's core
    worker (it takes SIGTERM too, printing a stack dump on stderr). Ray's processes and workers
    keep theirs: they read their own environment. Only where the stop signals raise Stopped (stop_signals): a program
    that embeds the driver keeps Ray's handlers."""
    import ray._private.ray_constants as ray_constants
    import ray._private.utils as ray_utils

    if threading.current_thread() is not threading.main_thread() or not ours(signal.getsignal(signal.SIGTERM)):
        yield
        return
    install, abseil = ray_utils.set_sigterm_handler, ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER
    ray_utils.set_sigterm_handler = lambda handler: None
    ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True
    try:
        yield
    finally:
        ray_utils.set_sigterm_handler = install
        ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = abseil


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
    exit code: a stop signal 128 + its number (130 for Ctrl-C), an incomplete sweep, a full
    disk or a tracking server that stopped answering (server_unanswered) 1; any other error
    propagates (a bug: its traceback). The stop signals raise Stopped from the start
    (stop_signals: while the config is read and the data planned or loaded too, where SIGTERM
    and SIGHUP would otherwise end the process on the spot)."""
    try:
        with stop_signals():
            yield
    except SweepInterrupted as interrupted:
        exit_with(str(interrupted), interrupted.exit_code)
    except KeyboardInterrupt as error:  # a stop signal before any run existed
        stopped = as_stopped(error)
        exit_with(f"{stopped.how} before any MLflow run was created", stopped.exit_code)
    except SweepIncomplete as incomplete:
        exit_with(f"error: {incomplete}", 1)
    except Exception as error:
        disk, server = full_disk(error), server_unanswered(error)
        if disk is None and server is None:
            raise
        then = f"{disk}; free space and" if disk else f"{server}; once it answers,"
        exit_with(f"error: {then} run the same command again to resume (finished trials are kept)", 1)


def server_unanswered(error: BaseException) -> str | None:
    """One line for the error MLflow raises once a tracking server has not answered a request
    through all its retries ("API request to <url> failed with exception ...", in the driver or
    from a Ray worker): the server and why; None for any other error."""
    text = str(error)
    request = re.search(r"API request to (\S+?)/api/\S* failed with exception (.*)", text)
    if request is None:
        return None
    cause = re.search(r"\(Caused by \w+\((['\"])(.*)\1\)\)", text)
    why = re.sub(r"^HTTPS?Connection(Pool)?\([^)]*\): ", "", cause.group(2)) if cause else request.group(2)[:200]
    return f"the tracking server {request.group(1)} did not answer through MLflow's retries ({why})"


def moment(name: str) -> None:
    """The test hook of this module's docstring: note the moment ``name`` in the file named by
    MTC_DEBUG_MOMENTS, and sleep there if MTC_DEBUG_PAUSE names it; nothing when unset."""
    path = os.environ.get("MTC_DEBUG_MOMENTS")
    if not path:
        return
    with open(path, "a") as handle:
        handle.write(f"{name}\n")
    at, _, seconds = os.environ.get("MTC_DEBUG_PAUSE", "").partition("=")
    if at == name:
        time.sleep(float(seconds))


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
