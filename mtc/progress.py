"""One progress line for a sweep (tqdm, on stderr) in place of Ray Tune's boxed tables:
seeds done of all, Tune trials running, failed and retried, and tqdm's rate and ETA.
``sweep.verbose=1`` or higher gives Ray Tune's own output back."""

from __future__ import annotations

from ray.tune import Callback
from tqdm import tqdm


class ProgressLine(Callback):
    """A Ray Tune callback; ``batch_sizes`` maps each Tune trial's ``batch`` to its seeds."""

    def __init__(self, batch_sizes: dict[str, int], description: str):
        self.batch_sizes = batch_sizes
        self.description = description
        self.bar = None
        self.failed = self.retried = 0
        self.postfix = ""

    def seeds(self, trial) -> int:
        return self.batch_sizes[trial.config["batch"]]

    def setup(self, **info):
        self.bar = tqdm(total=sum(self.batch_sizes.values()), desc=self.description, unit="trial",
                        dynamic_ncols=True, mininterval=1.0)

    def on_step_end(self, iteration, trials, **info):
        running = sum(trial.status == "RUNNING" for trial in trials)
        postfix = f"running {running}, failed {self.failed}, retried {self.retried}"
        if postfix != self.postfix:  # redraw on a change only (tqdm redraws on updates by itself)
            self.postfix = postfix
            self.bar.set_postfix_str(postfix)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.bar.update(self.seeds(trial))

    def on_trial_recover(self, iteration, trials, trial, **info):
        self.retried += 1

    def on_trial_error(self, iteration, trials, trial, **info):
        self.failed += self.seeds(trial)
        self.bar.update(self.seeds(trial))

    def on_experiment_end(self, trials, **info):
        self.on_step_end(0, trials)
        self.close()

    def close(self):
        """End the line (also when the Tuner is interrupted, so later messages start a line)."""
        if self.bar is not None:
            self.bar.close()
