"""The sweep driver: ``python -m mtc.sweep`` (see __main__), or ``mtc.sweep.run`` from Python.

- command: the command line's entry point (a finished sweep reported without the heavy imports);
- planning: SweepPlan, plan_sweep and a finished sweep's logged report;
- driver: plan_sweep -> open_sweep -> run_on_ray (one Tuner for one or many sweeps) ->
  finish_sweep; what a worker runs (fit_trial per seed, then write_fitted: the batch's runs
  at once) and keeps between trials (WORKER_CACHES);
- progress: the one progress line; stopping: stop signals, and the line and exit code a
  stopped or incomplete sweep ends with; stranded: the Tune trials Ray Tune ended with
  retries left, which the driver runs again once.
"""

from __future__ import annotations


def run(method: str, data: str, *overrides: str):
    """Run one sweep from Python (a notebook), as ``python -m mtc.sweep method=<method>
    data=<data> <overrides>`` would, without a shell.

    A local Ray (``ray.address=local``) is started by the first call and kept running for the
    next ones of the process, which thus skip Ray's start (10-20 s); a call asking other
    resources (``ray.num_cpus``, ``ray.object_store_memory``) restarts it, and it is stopped at
    interpreter exit or by ``mtc.sweep.driver.stop_kept_ray()``. An error or a stop signal
    (Ctrl-C) stops it at once, as on the command line. At ``sweep.verbose=0`` (the default) a
    sweep prints its start line and one result line; ``sweep.verbose=1`` prints its report.

    Parameters
    ----------
    method, data : str
        A method config (conf/method/) and a data config (conf/data/).
    *overrides : str
        Hydra overrides, as on the command line: ``"sweep.repeats=3"``,
        ``"+experiment=mtcmrl_paper"``, ``"mlflow.tracking_uri=sqlite:///other.db"``.

    Returns
    -------
    mtc.sweep.driver.SweepResult
        The parent run, report folder, point summaries, chosen points and the store; read its
        trials with ``mtc.results.trials(result.tracking_uri, sweep=result.parent_run_id)``.

    Raises
    ------
    mtc.errors.InputError
        A bad config, data or store, found before anything is created.
    """
    from mtc.cli import check_group_overrides, compose_config
    from mtc.config import settings
    from mtc.errors import InputError
    from mtc.sweep.driver import run_sweep

    for what, value in (("method", method), ("data", data)):
        if not isinstance(value, str):
            example = "'kmeans'" if what == "method" else "'synthetic'"
            raise InputError(f"mtc.sweep.run: {what} is a config name, a string such as {example}; got {value!r}")
    for override in overrides:
        if not isinstance(override, str):
            unpack = " (a list of them: unpack it, *overrides)" if isinstance(override, (list, tuple)) else ""
            raise InputError(f"mtc.sweep.run: overrides are strings, one argument each, e.g. mtc.sweep.run('kmeans', "
                             f"'synthetic', 'sweep.repeats=3'){unpack}; got {type(override).__name__} {override!r}")
        group, sep, choice = override.lstrip("+").partition("=")
        chosen = {"method": method, "data": data}.get(group)
        if sep and chosen is not None and choice != chosen:
            raise InputError(f"mtc.sweep.run({method!r}, {data!r}, ...): the override {override!r} contradicts the "
                             f"{group} argument {chosen!r}; choose the {group} by that argument")
    arguments = [f"method={method}", f"data={data}", *overrides]
    check_group_overrides(arguments)  # an unknown method or data config: one line naming the available ones
    return run_sweep(settings(compose_config(arguments)), keep_ray=True, full_report=False)  # verbose=0: one line
