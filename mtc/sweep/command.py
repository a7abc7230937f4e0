"""``python -m mtc.sweep``: Hydra's entry point of one sweep.

A sweep that already finished in a SQLite store is reported from the report its driver logged
(mtc.sweep.planning.report_stored) before the solver's class, the driver, Ray, MLflow,
scikit-learn or pandas are imported (the user's files, ``data=files``, are hashed by
mtc.data.sources, without their readers): the config is read without checking
the method's parameters (that needs the solver and scikit-learn, about 1.2 s), since a finished
sweep's key already names parameters that ran. So such a sweep is reported even if its method
config would now be refused (a constraint tightened since, a ``_target_`` that no longer
imports: the key holds the config's name, parameters and grid, not its class). Anything else
is checked in full and run by mtc.sweep.driver.run_sweep, with the plan made here.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from mtc.cli import CONF_DIR, exit_on_bad_input
from mtc.config import Settings, settings
from mtc.store import preflight
from mtc.sweep.planning import SweepPlan, plan_sweep, report_stored
from mtc.sweep.stopping import command_exits


def stored_plan(run: Settings) -> SweepPlan | None:
    """The plan of a sweep whose logged report the store may hold: a resumable sweep in a
    SQLite store (checked as a run checks it), its data's hashes remembered or its synthetic
    data drawn; None otherwise, with nothing checked or loaded (the driver does both)."""
    if not (run.sweep.resume and run.tracking.uri.startswith("sqlite:///")):
        return None
    preflight.check_tracking(run.tracking.uri)
    return plan_sweep(run, load=False)


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
@exit_on_bad_input
def main(cfg: DictConfig) -> None:
    sys.stdout.reconfigure(line_buffering=True)  # each progress line as it happens, also through a pipe (tee, a log)
    with command_exits():
        run = settings(cfg, check_method=False)
        plan = stored_plan(run)
        if plan is not None and report_stored(plan):  # finished: Ray's address is not checked, the report needs no Ray
            return
        run.method.check()
        from mtc.sweep.driver import quiet_store_errors, run_sweep

        quiet_store_errors()
        run_sweep(run, plan)
