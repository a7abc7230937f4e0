"""Which trials of a study are the same fit in two or more of its sweeps.

A trial's fit is decided by the solver class and parameters (config params and grid point),
its seed, the data (its config and the hash of its draws), the BLAS threads it runs on and the
code (mtc.fitted.code_digest). Trials of different sweeps that agree in all of them get one key:
the first worker to reach it fits and keeps the fit, the others read it (mtc.trial.fit_or_read).
The ``all`` study has 882 such trials of 103,572: MTCFIR's reduced Handdigits sweeps and
``mtcfir_keep`` at p = 0.5 (each a part of the full Handdigits protocol), the SPMTC switch
study's printed-route sweeps (points of Tables 4-7 and the 20 Newsgroups pairs), SNMF on
WebKB4 at its defaults and S-MBC's AAAI-13 protocol on NG1-NG3.
"""

from __future__ import annotations

from collections import defaultdict

from mtc.config import stable_hash
from mtc.fitted import code_digest
from mtc.store import tracking


def fit_identity(plan, trial) -> str:
    """What a trial's fit depends on, as a digest (see the module docstring)."""
    run = plan.run
    return stable_hash(run.method.target, run.method.params, trial.point, trial.seed, run.data.resolved,
                       plan.tags[tracking.DATASET_HASH_TAG], run.sweep.cpus_per_trial, code_digest())


def mark_shared_fits(plans: list) -> int:
    """Fill each plan's ``shared_fits`` (trial key -> fit key) with its trials whose fit another
    of the plans has too; returns how many trials are marked."""
    sweeps_of = defaultdict(set)
    identities = {}
    for plan in plans:
        for trial in plan.trials:
            identity = identities[(plan.name, trial.key)] = fit_identity(plan, trial)
            sweeps_of[identity].add(plan.name)
    for plan in plans:
        plan.shared_fits.clear()
        plan.shared_fits.update({trial.key: identities[(plan.name, trial.key)] for trial in plan.trials
                                 if len(sweeps_of[identities[(plan.name, trial.key)]]) > 1})
    return sum(len(plan.shared_fits) for plan in plans)


def fits_read(plans: list) -> dict[str, int]:
    """Per plan, its trials whose fit an earlier plan of the study has too: in study order, the
    trials a sweep reads rather than fits (the dry run's estimate)."""
    seen, read = set(), {}
    for plan in plans:
        read[plan.name] = sum(key in seen for key in plan.shared_fits.values())
        seen.update(plan.shared_fits.values())
    return read
