"""The Ray Tune trials that Ray Tune ended in ERROR with retries left, to be run again once.

Ray Tune (2.60) recovers a failed trial only while it is RUNNING
(``TuneController._process_trial_failure``). With ``reuse_actors=True`` (ours: a worker's
imports and caches outlive its trial) a finished trial's actor is handed to a PENDING trial,
whose ``reset`` task is then scheduled on it. When that actor's worker has died meanwhile (killed,
out of memory, its host lost), the death reaches the trial twice: its train task fails while it
is RUNNING (recovered: PENDING again, one failure counted) and its reset fails while it is
PENDING, which ends it in ERROR whatever ``sweep.max_failures`` says: the sweep then lacked
that trial's seeds though its retries were not used up (seen once on a lost worker host,
docs/results/lab_notes.md). The driver (mtc.sweep.driver.run_on_ray) runs such trials again,
once, in a second Tuner; their finished seeds are skipped there as in any retry. A trial whose
failures did use up ``max_failures`` (Ray Tune's count) is not run again.
"""

from __future__ import annotations

from ray.tune import Callback

from mtc.sweep.stopping import moment


class StrandedTrials(Callback):
    """A Ray Tune callback collecting the ``batch`` of each Tune trial that ended in ERROR while
    Ray Tune's own rule still allowed a retry (``trial.should_recover()``: fewer failures than
    ``max_failures`` + 1).

    Attributes
    ----------
    batches : list of str
        Those trials' batches, in the order they ended.
    """

    def __init__(self):
        self.batches: list[str] = []

    def on_trial_complete(self, iteration, trials, trial, **info):
        # the test hook (mtc.sweep.stopping.moment): a Tune trial has ended and Ray Tune has not
        # yet handed its actor to the next trial
        moment("tune-trial-ended")

    def on_trial_error(self, iteration, trials, trial, **info):
        if trial.should_recover():
            self.batches.append(trial.config["batch"])
