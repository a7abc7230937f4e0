"""A study's sweeps reported while its Tuner still runs.

A study's Tuner runs its sweeps' trials in the order of the sweeps, so most sweeps are complete
long before the last trial. Reporting a sweep (mtc.sweep.driver.finish_sweep: one read of its
runs, report.md and grid.csv, two convergence figures, the parent run FINISHED) takes the driver
about 0.7 s on SQLite; done one after the other once the Tuner has ended, a study of 112 sweeps
spent 80 s there with one of two cores idle. The Finisher, a Ray Tune callback, hands each sweep
whose Tune trials have all ended to a thread of the driver, which reports it while the workers
run the next sweeps' trials.

Only a clean sweep is reported early: every Tune trial of it completed (none errored after its
retries) and no seed of it was lost (its runs could not be written). Any other sweep is left to
the driver after the Tuner, as before, since its one-line message needs the whole Tuner's outcome.
The driver joins the thread before it touches the sweeps itself: after the Tuner, and when a stop
signal or an error ends the Tuner (the sweeps reported by then stay FINISHED; the others are
closed as before).
"""

from __future__ import annotations

import queue
import threading
from collections import Counter
from collections.abc import Callable

from ray.tune import Callback

from mtc.sweep.stopping import SweepIncomplete


class Finisher(Callback):
    """Reports each clean sweep of a study as soon as its last Tune trial ends (see the module).

    Parameters
    ----------
    finish : callable
        ``finish(name)`` reports the sweep of that name and returns its result; it raises
        SweepIncomplete for a sweep that has no report (its parent run is then FAILED).

    Attributes
    ----------
    results : dict of str to object
        What ``finish`` returned, by sweep name.
    incomplete : dict of str to str
        The one-line message of each sweep ``finish`` found incomplete.
    error : tuple of (str, BaseException) or None
        The first other error ``finish`` raised, with its sweep; no sweep is reported after it.
    """

    def __init__(self, finish: Callable[[str], object]):
        self.finish = finish
        self.results: dict[str, object] = {}
        self.incomplete: dict[str, str] = {}
        self.error: tuple[str, BaseException] | None = None
        self._sweep_of: dict[str, str] = {}
        self._left: Counter = Counter()
        self._unclean: set[str] = set()
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def __getstate__(self) -> dict:
        """Ray Tune pickles its callbacks into its experiment checkpoint: nothing of this one (a
        thread, a queue, the driver's sweeps) goes there; a resumed study reads the store."""
        return {}

    def __setstate__(self, state: dict) -> None:
        self.__init__(finish=None)

    def expect(self, sweep_of: dict[str, str]) -> None:
        """The Tune trials to come (each ``batch`` -> its sweep's name); starts the thread."""
        self._sweep_of = dict(sweep_of)
        self._left = Counter(self._sweep_of.values())
        self._thread = threading.Thread(target=self._report, name="mtc-finisher", daemon=True)
        self._thread.start()

    @property
    def reported(self) -> set[str]:
        """The sweeps this finisher closed: reported (FINISHED) or found incomplete (FAILED);
        not the one it failed on (``error``), whose parent run is still open."""
        return set(self.results) | set(self.incomplete)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if result.get("lost_seeds"):
            self._unclean.add(self._sweep_of[trial.config["batch"]])

    def on_trial_error(self, iteration, trials, trial, **info):
        self._unclean.add(self._sweep_of[trial.config["batch"]])
        self._ended(trial)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self._ended(trial)

    def _ended(self, trial) -> None:
        sweep = self._sweep_of[trial.config["batch"]]
        self._left[sweep] -= 1
        if self._left[sweep] == 0 and sweep not in self._unclean:
            self._queue.put(sweep)

    def _report(self) -> None:
        while (name := self._queue.get()) is not None:
            if self.error is not None:
                continue
            try:
                self.results[name] = self.finish(name)
            except SweepIncomplete as incomplete:  # its parent is FAILED, its message kept for the driver
                self.incomplete[name] = str(incomplete)
            except BaseException as error:  # a full disk, a store that fails: the driver raises it
                self.error = (name, error)

    def join(self) -> None:
        """Wait for the sweep being reported, if any, and end the thread (the sweeps still
        queued are left to the driver). Called again after a stop signal cut it short, it
        waits again."""
        if self._thread is None:
            return
        while True:  # drop what is queued: the driver reports those itself
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._queue.put(None)
        self._thread.join()
        self._thread = None
