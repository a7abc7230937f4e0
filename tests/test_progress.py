"""The progress line (mtc.sweep.progress.ProgressLine) counts seeds: failed where a result is
lost, to run again where Ray Tune ended a trial with retries left (the driver runs it again
once: mtc.sweep.stranded; in that second Tuner, failed), and each sweep of a study once all its
Tune trials ended."""

from __future__ import annotations

import re
from types import SimpleNamespace

from mtc.sweep.progress import ProgressLine


def tune_trial(batch: str, status: str = "RUNNING", retries_left: bool = False):
    """What the line reads of a Ray Tune trial: its batch, its status and Ray Tune's retry rule."""
    return SimpleNamespace(config={"batch": batch}, status=status, should_recover=lambda: retries_left)


def last_postfix(err: str) -> str:
    """The counts the line drew last (tqdm redraws it with carriage returns)."""
    return [part for part in re.split(r"[\r\n]", err) if "running" in part][-1]


def test_a_trial_ended_with_retries_left_is_to_run_again_not_failed(capsys):
    line = ProgressLine({"a": 3, "b": 2, "c": 1}, "toy", runs_again=True)
    a, b, c = tune_trial("a", retries_left=True), tune_trial("b"), tune_trial("c")
    line.setup()
    line.on_trial_error(0, [a, b, c], a)  # its worker died while it waited for it: run again by the driver
    line.on_trial_error(0, [a, b, c], b)  # its retries used up: lost
    line.on_trial_result(0, [a, b, c], c, {"failed_seeds": 0, "degenerate_seeds": 1})
    line.on_trial_complete(0, [a, b, c], c)
    a.status, b.status, c.status = "ERROR", "ERROR", "TERMINATED"
    line.on_experiment_end([a, b, c])
    assert (line.failed, line.run_again, line.degenerate) == (2, 3, 1)
    drawn = last_postfix(capsys.readouterr().err)
    assert "6/6" in drawn and "running 0, failed 2, retried 0, to run again 3, degenerate 1" in drawn, drawn


def test_the_second_tuners_line_counts_a_trial_ended_with_retries_left_failed(capsys):
    """The driver's second Tuner (``<sweep> again``) runs no StrandedTrials: what ends there is lost."""
    line = ProgressLine({"a": 3, "b": 1}, "toy again")
    a, b = tune_trial("a", retries_left=True), tune_trial("b")
    line.setup()
    line.on_trial_error(0, [a, b], a)
    line.on_trial_complete(0, [a, b], b)
    a.status, b.status = "ERROR", "TERMINATED"
    line.on_experiment_end([a, b])
    assert (line.failed, line.run_again) == (3, 0)
    drawn = last_postfix(capsys.readouterr().err)
    assert "4/4" in drawn and "running 0, failed 3, retried 0" in drawn and "to run again" not in drawn, drawn


def test_nothing_to_run_again_is_not_drawn_and_a_studys_sweeps_are_counted_when_their_trials_end(capsys):
    line = ProgressLine({"x1": 2, "x2": 2, "y1": 1}, "study", {"x1": "x", "x2": "x", "y1": "y"})
    trials = [tune_trial(batch) for batch in ("x1", "x2", "y1")]
    line.setup()
    line.on_trial_result(0, trials, trials[0], {"failed_seeds": 1})  # one fit of the batch raised
    line.on_trial_complete(0, trials, trials[0])
    line.on_trial_complete(0, trials, trials[2])
    line.on_step_end(0, trials)
    assert line.postfix == "sweeps 1/2, running 3, failed 1, retried 0"  # drawn with tqdm's next redraw
    line.on_trial_complete(0, trials, trials[1])
    for trial in trials:
        trial.status = "TERMINATED"
    line.on_experiment_end(trials)
    drawn = last_postfix(capsys.readouterr().err)
    assert "sweeps 2/2, running 0, failed 1, retried 0" in drawn and "to run again" not in drawn, drawn
