"""``python -m mtc.sweep``: Hydra's entry point of one sweep.

A sweep that already finished in a SQLite store is reported from the report its driver logged
(mtc.sweep.planning.report_stored) before the solver's class, the driver, Ray, MLflow,
scikit-learn or pandas are imported: the config is read without checking the method's
parameters (that needs the solver and scikit-learn, about 1.2 s), since a finished sweep's key
already names parameters that ran. Anything else is checked in full and run by
mtc.sweep.driver.run_sweep.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from mtc.cli import CONF_DIR, exit_on_bad_input
from mtc.config import Settings, settings
from mtc.store import preflight
from mtc.sweep.planning import plan_sweep, report_stored
from mtc.sweep.stopping import command_exits


def reported_finished(run: Settings) -> bool:
    """Whether the sweep had finished and its logged report was printed: its store checked as a
    run would check it, its data's hashes remembered (nothing is loaded here). Ray's address is
    not checked: the report needs no Ray."""
    preflight.check_tracking(run.tracking.uri)
    plan = plan_sweep(run, load=False)
    return plan is not None and report_stored(plan)


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
@exit_on_bad_input
def main(cfg: DictConfig) -> None:
    sys.stdout.reconfigure(line_buffering=True)  # each progress line as it happens, also through a pipe (tee, a log)
    with command_exits():
        run = settings(cfg, check_method=False)
        if reported_finished(run):
            return
        run.method.check()
        from mtc.sweep.driver import quiet_store_errors, run_sweep

        quiet_store_errors()
        run_sweep(run)
