"""One progress line for a sweep or a study (tqdm, on stderr) in place of Ray Tune's boxed
tables: seeds done of all, sweeps done (a study), Tune trials running, failed and retried, and
tqdm's rate and ETA. Failed counts seeds: fits that raised, seeds whose runs could not be
logged (a full disk), and the seeds of Tune trials whose worker died more often than retried.
To run again counts the seeds of Tune trials that Ray Tune ended in ERROR with retries left,
which the driver runs again once in a second Tuner, under a line of its own (mtc.sweep.stranded):
not lost, so not failed. That second Tuner's line counts them failed: nothing runs them a third
time.
Degenerate counts the finished seeds whose fit put a task into fewer clusters than asked.
Nodes lost counts the cluster's nodes that died during the run (Ray marks them dead; their
trials are retried on the others), looked up when a trial is retried or fails.
``sweep.verbose=1`` or higher gives Ray Tune's own output back."""

from __future__ import annotations

import contextlib
import time

import ray
from ray.tune import Callback
from tqdm import tqdm


NODE_CHECK_SECONDS = 5.0  # after a retry, the cluster's dead nodes are counted again at most this often


def dead_nodes() -> int:
    """How many nodes of the connected Ray cluster are marked dead (0 when none is connected)."""
    if not ray.is_initialized():
        return 0
    return sum(not node["Alive"] for node in ray.nodes())


class ProgressLine(Callback):
    """A Ray Tune callback; ``batch_sizes`` maps each Tune trial's ``batch`` to its seeds and,
    for a study, ``sweep_of`` maps it to its sweep (the line then counts finished sweeps).
    ``runs_again``: a trial that Ray Tune ends in ERROR with retries left will be run again (a
    ``StrandedTrials`` collects it beside this line), so its seeds count to run again, not failed."""

    def __init__(self, batch_sizes: dict[str, int], description: str, sweep_of: dict[str, str] | None = None,
                 runs_again: bool = False):
        self.batch_sizes = batch_sizes
        self.runs_again = runs_again
        self.description = description
        self.sweep_of = sweep_of
        self.left = {}  # sweep -> its Tune trials not yet ended
        for batch, sweep in (sweep_of or {}).items():
            self.left[sweep] = self.left.get(sweep, 0) + 1
        self.bar = None
        self.failed = self.retried = self.degenerate = self.nodes_lost = 0
        self.run_again = 0  # seeds of Tune trials ended in ERROR with retries left (mtc.sweep.stranded)
        self.dead_before = 0  # nodes already dead when the run started (an earlier run's)
        self.nodes_checked = 0.0  # time.monotonic() of the last count
        self.postfix = ""

    def seeds(self, trial) -> int:
        return self.batch_sizes[trial.config["batch"]]

    def setup(self, **info):
        self.dead_before = dead_nodes()
        self.bar = tqdm(total=sum(self.batch_sizes.values()), desc=self.description, unit="trial",
                        dynamic_ncols=True, mininterval=1.0)

    def on_step_end(self, iteration, trials, **info):
        if self.retried and time.monotonic() - self.nodes_checked > NODE_CHECK_SECONDS:  # Ray marks a node dead late
            self.nodes_lost = dead_nodes() - self.dead_before
        running = sum(trial.status == "RUNNING" for trial in trials)
        postfix = f"running {running}, failed {self.failed}, retried {self.retried}"
        if self.run_again:
            postfix += f", to run again {self.run_again}"
        if self.degenerate:
            postfix += f", degenerate {self.degenerate}"
        if self.nodes_lost:
            postfix += f", nodes lost {self.nodes_lost}"
        if self.sweep_of:
            done = sum(left == 0 for left in self.left.values())
            postfix = f"sweeps {done}/{len(self.left)}, {postfix}"
        if postfix != self.postfix:  # redraw on a change only (tqdm redraws on updates by itself)
            self.postfix = postfix
            self.bar.set_postfix_str(postfix, refresh=False)  # drawn with the next update: a log gets a line per trial, not three

    def ended(self, trial):
        if self.sweep_of:
            self.left[self.sweep_of[trial.config["batch"]]] -= 1

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.failed += result.get("failed_seeds", 0)  # fits that raised, seeds whose runs could not be logged
        self.degenerate += result.get("degenerate_seeds", 0)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.ended(trial)
        self.bar.update(self.seeds(trial))

    def count_lost_nodes(self):
        self.nodes_lost, self.nodes_checked = dead_nodes() - self.dead_before, time.monotonic()

    def on_trial_recover(self, iteration, trials, trial, **info):
        self.retried += 1
        self.count_lost_nodes()
        self.on_step_end(iteration, trials)

    def on_trial_error(self, iteration, trials, trial, **info):
        self.count_lost_nodes()
        self.ended(trial)
        if self.runs_again and trial.should_recover():  # StrandedTrials' rule: the driver runs it again once
            self.run_again += self.seeds(trial)
        else:
            self.failed += self.seeds(trial)
        self.bar.update(self.seeds(trial))

    def on_experiment_end(self, trials, **info):
        self.on_step_end(0, trials)
        self.close()

    def close(self):
        """End the line (also when the Tuner is interrupted, so later messages start a line)."""
        if self.bar is not None:
            with contextlib.suppress(OSError):  # SIGHUP: the terminal may be gone
                self.bar.close()


def end_open_lines() -> None:
    """End every progress line still drawn (the driver ends from another thread: its next line
    must start a line of its own)."""
    for bar in list(getattr(tqdm, "_instances", ())):  # tqdm makes the set with its first bar
        with contextlib.suppress(Exception):  # drawn by the main thread meanwhile, or the terminal gone
            bar.close()
