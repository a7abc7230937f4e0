"""A paper's whole evidence in one command: ``python -m mtc.reproduce <study>``.

A study (``conf/study/<name>.yaml``, or the path of such a file) names a set of sweeps and the
comparisons they feed::

    include: [other_study]            # its sweeps and compares too
    sweeps:                           # each entry: methods x data x sizes
      - methods: [kmeans, snmf]
        data: [reuters]
        experiment: null              # +experiment=<name>
        sizes: []                     # one sweep per data.params.samples_per_task
        label: null                   # sweep.label
        overrides: []                 # any other Hydra overrides
    compare:
      - out: docs/results/compare_reuters
        benchmarks: [reuters]
        methods: []
        metric: acc

One driver runs it: every sweep is planned (config checked, data loaded) before anything
starts; the sweeps whose trials all finished are not touched; the others share one Ray
session (local, or ``ray.address=`` a cluster) and one Ray Tune run, so trials of different
sweeps keep every worker busy; each sweep is then reported as ``python -m mtc.sweep`` would,
and ``python -m mtc.results.compare`` writes each compare folder. A stopped study (Ctrl-C,
SIGTERM, SIGHUP) stops Ray, closes its runs KILLED and exits 128 + the signal's number; the
same command resumes it; a finished study run again
starts no Ray and regenerates nothing (``--compare`` regenerates the folders anyway).
Overrides after the study name (``mlflow.tracking_uri=...``, ``ray.address=...``,
``output_dir=...``, ``sweep.max_concurrent_trials=...``) apply to every sweep.
"""

from __future__ import annotations

if __name__ == "__main__":  # the command, not an import: before the imports below (about 2 s), Ctrl-C is one line
    from mtc.cli import ctrl_c_exits_at_once

    ctrl_c_exits_at_once()

import argparse  # noqa: E402
import contextlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, replace  # noqa: E402
from pathlib import Path  # noqa: E402

import yaml  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from omegaconf.errors import OmegaConfBaseException  # noqa: E402

from mtc import CONF_DIR  # noqa: E402
from mtc.cli import Composer, fail  # noqa: E402
from mtc.config import method_configs, settings  # noqa: E402
from mtc.errors import InputError  # noqa: E402
from mtc.results.recommend import recommendation_sentence, recommendations  # noqa: E402
from mtc.results.reading import NO_LABELS_BEST  # noqa: E402
from mtc.results.report import CRITERIA, left_out_note  # noqa: E402
from mtc.store import preflight, tracking  # noqa: E402
from mtc.store import locks  # noqa: E402
from mtc.sweep.estimates import stored_fit_seconds  # noqa: E402

STUDY_DIR = CONF_DIR / "study"
SWEEP_KEYS = {"methods", "data", "experiment", "sizes", "label", "overrides"}
STUDY_KEYS = {"include", "sweeps", "compare", "skip_unrunnable"}
ALL_METHODS = "all"  # ``methods: all``: every method config in conf/method
COMMAND_LINE = "command_line"  # ``data: command_line``: the data= override given after the study's name
COMPARE_KEYS = {"out", "benchmarks", "methods", "metric"}
DRIVER_SETTINGS = ["sweep.verbose=0"]  # the study draws one progress line for all its sweeps


@dataclass(frozen=True)
class CompareSpec:
    """One ``python -m mtc.results.compare`` of a study: its folder, benchmarks, methods and metric."""

    out: str
    benchmarks: tuple[str, ...]
    methods: tuple[str, ...] = ()
    metric: str = "acc"


@dataclass(frozen=True)
class Study:
    """A study's sweeps (each as its Hydra overrides, in order, without duplicates) and compares."""

    name: str
    sweeps: tuple[tuple[str, ...], ...]
    compares: tuple[CompareSpec, ...]
    data_from_command_line: bool = False  # a sweeps entry with ``data: command_line``
    skip_unrunnable: bool = False  # list the sweeps whose method cannot run on the data, run the others


def study_path(name: str) -> Path:
    """conf/study/<name>.yaml, or ``name`` itself when it is the path of a YAML file (it ends
    in .yaml or .yml, or has a folder in it): InputError when that file is missing."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml") or len(path.parts) > 1:
        if not path.is_file():
            raise InputError(f"missing study file {path}" if not path.exists() else f"study {path} is not a file")
        return path
    path = STUDY_DIR / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in STUDY_DIR.glob("*.yaml")))
        raise InputError(f"unknown study {name!r}; available: {known} (or the path of a study YAML)")
    return path


def sweep_overrides(entry: dict, where: str) -> list[tuple[str, ...]]:
    """One sweeps entry as the Hydra overrides of each sweep: methods x data x sizes."""
    unknown = set(entry) - SWEEP_KEYS
    if unknown or not entry.get("methods") or not entry.get("data"):
        raise InputError(f"{where}: a sweeps entry needs methods and data and takes only {sorted(SWEEP_KEYS)}; "
                         f"got {sorted(entry)}")
    tail = [*([f"sweep.label={entry['label']}"] if entry.get("label") else []), *(entry.get("overrides") or [])]
    methods = sorted(method_configs()) if entry["methods"] == ALL_METHODS else entry["methods"]
    datas = [None] if entry["data"] == COMMAND_LINE else entry["data"]
    sweeps = []
    for method in methods:
        for data in datas:
            for size in entry.get("sizes") or [None]:
                sweeps.append((f"method={method}", *([f"data={data}"] if data is not None else []),
                               *([f"+experiment={entry['experiment']}"] if entry.get("experiment") else []),
                               *([f"data.params.samples_per_task={size}"] if size is not None else []), *tail))
    return sweeps


def compare_spec(entry: dict, where: str, data_from_command_line: bool = False) -> CompareSpec:
    """One compare entry; with data from the command line its ``benchmarks`` may be empty (the
    command line's data) and its ``out`` may hold ``{data}`` (the data's name)."""
    unknown = set(entry) - COMPARE_KEYS
    if unknown or not entry.get("out") or not (entry.get("benchmarks") or data_from_command_line):
        raise InputError(f"{where}: a compare entry needs out and benchmarks and takes only {sorted(COMPARE_KEYS)}; "
                         f"got {sorted(entry)}")
    return CompareSpec(entry["out"], tuple(entry.get("benchmarks") or ()), tuple(entry.get("methods") or ()),
                       entry.get("metric") or "acc")


def study_config(path: Path) -> dict:
    """A study file's mapping; InputError, in one line, for a file that is not YAML or whose
    top level is not a mapping."""
    try:
        config = OmegaConf.to_container(OmegaConf.load(path), resolve=False) or {}
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"study file {path}: cannot read it ({' '.join(str(error).split())})") from None
    except (yaml.YAMLError, OmegaConfBaseException) as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or " ".join(str(error).split())
        raise InputError(f"study file {path}: not valid YAML ({problem}{where})") from None
    if not isinstance(config, dict):
        raise InputError(f"study file {path}: expected a mapping of include, sweeps and compare, "
                         f"got a {type(config).__name__}")
    return config


def load_study(name: str, seen: tuple[str, ...] = ()) -> Study:
    """The study and, first, every study it includes (each sweep and compare once)."""
    path = study_path(name)
    if path.stem in seen:
        raise InputError(f"study {path.stem!r} includes itself ({' -> '.join([*seen, path.stem])})")
    config = study_config(path)
    unknown = sorted(set(config) - STUDY_KEYS)
    if unknown:
        raise InputError(f"study file {path}: unknown keys {', '.join(unknown)}; a study takes {sorted(STUDY_KEYS)}")
    sweeps, compares, from_command_line = [], [], False
    skip = bool(config.get("skip_unrunnable"))
    for included in config.get("include") or []:
        inner = load_study(included, (*seen, path.stem))
        sweeps += inner.sweeps
        compares += inner.compares
        from_command_line |= inner.data_from_command_line
        skip |= inner.skip_unrunnable
    for i, entry in enumerate(config.get("sweeps") or []):
        sweeps += sweep_overrides(entry, f"{path}: sweeps[{i}]")
        from_command_line |= entry.get("data") == COMMAND_LINE
    compares += [compare_spec(entry, f"{path}: compare[{i}]", from_command_line)
                 for i, entry in enumerate(config.get("compare") or [])]
    return Study(path.stem, tuple(dict.fromkeys(sweeps)), tuple(dict.fromkeys(compares)), from_command_line, skip)


def selected(run, only: list[str]) -> bool:
    """Whether ``--only`` keeps a sweep: a token equal to its method, label, data or name."""
    return not only or bool({run.method.name, run.sweep.label, run.data.name, run.sweep.name} & set(only))


def plan_study(study: Study, overrides: list[str], only: list[str], not_run: dict[str, str] | None = None) -> list:
    """Every selected sweep's SweepPlan (config checked, data hashed), one per sweep name. A
    study that ``skip_unrunnable`` puts each sweep whose method cannot run on the data (its
    config or data refused, its input needs or cluster counts unmet: ``check_plan``) into
    ``not_run`` (method -> the one-line reason) instead of refusing the study."""
    from mtc.sweep.driver import check_plan, plan_sweep
    from mtc.sweep.shared_fits import mark_shared_fits

    if study.data_from_command_line and not any(o.split("=", 1)[0] == "data" for o in overrides):
        raise InputError(f"study {study.name!r} takes its data from the command line: add data=<config>, e.g. "
                         "data=files 'data.params.paths=[t1.csv,t2.csv]' data.name=mine")
    if study.skip_unrunnable:
        not_run = {} if not_run is None else not_run
        plans, methods = [], [sweep[0].removeprefix("method=") for sweep in study.sweeps]
        given = {key.lstrip("+"): value for key, _, value in (o.partition("=") for o in overrides)}
        data = {given.get("data"), given.get("data.name")} - {None}
        unknown = [token for token in only if token not in {*methods, *data, *(f"{m}-{d}" for m in methods for d in data)}]
        if unknown:
            raise InputError(f"study {study.name!r}: --only {' '.join(unknown)} names no method of the study, nor its "
                             f"data ({', '.join(sorted(data))}) or a sweep (<method>-<data>); its methods: "
                             f"{', '.join(methods)}")
        for method, sweep in zip(methods, study.sweeps):
            try:
                [plan] = plan_study(replace(study, sweeps=(sweep,), skip_unrunnable=False), overrides, [])
                if selected(plan.run, only):
                    plans.append(check_plan(plan))
            except InputError as error:  # a token that is no method names the data or a sweep: every method's
                if not only or method in only or set(only) - set(methods):
                    not_run[method] = "; ".join(str(error).splitlines())
        if not plans:
            raise InputError(f"study {study.name!r}: no method can run on this data: {grouped_reasons(not_run)}")
        mark_shared_fits(plans)
        return plans
    runs, names, compose = [], {}, Composer()
    for sweep in study.sweeps:
        run = settings(compose([*sweep, *overrides, *DRIVER_SETTINGS]))
        if run.sweep.name in names:  # the same sweep listed twice (two papers share it) runs once
            if names[run.sweep.name][1] != run.resolved:
                raise InputError(f"study {study.name!r}: two different sweeps are named {run.sweep.name!r} "
                                 f"({' '.join(names[run.sweep.name][0])} / {' '.join(sweep)}); give one a sweep.name")
            continue
        names[run.sweep.name] = (sweep, run.resolved)
        if selected(run, only):
            runs.append(run)
    if not runs:
        raise InputError(f"study {study.name!r}: no sweep matches --only {' '.join(only)}")
    provenance = tracking.provenance_tags("python -m mtc.sweep")
    plans = [plan_sweep(run, provenance=provenance) for run in runs]
    mark_shared_fits(plans)
    return plans


def grouped_reasons(not_run: dict[str, str]) -> str:
    """``not_run`` (method -> why) with the methods of one reason together, each reason once:
    "every method: <why>" when one reason holds for all (a file problem, said once)."""
    by_reason: dict[str, list[str]] = {}
    for method, why in not_run.items():
        by_reason.setdefault(why, []).append(method)
    if len(by_reason) == 1:
        return f"every method: {next(iter(by_reason))}" if len(not_run) > 1 else \
            f"{next(iter(not_run))}: {next(iter(by_reason))}"
    return "; ".join(f"{', '.join(methods)}: {why}" for why, methods in by_reason.items())


def finished_counts(plans: list) -> dict[str, int]:
    """How many of each sweep's trials have a FINISHED run in the store (0 without a store)."""
    uri, experiment = plans[0].run.tracking.uri, plans[0].run.tracking.experiment
    if uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).is_file():
        return {plan.name: 0 for plan in plans}
    from mtc.sweep.driver import marked_all_finished, stored_parent

    client = tracking.client_for(uri)
    found = client.get_experiment_by_name(experiment)
    counts = {}
    for plan in plans:
        parent = stored_parent(client, found.experiment_id, plan) if found else None
        if parent is not None and marked_all_finished(parent, plan):
            counts[plan.name] = len(plan.trials)
            continue
        done = set() if parent is None else {
            run.data.tags.get(tracking.TRIAL_KEY_TAG)
            for run in tracking.find_runs(client, found.experiment_id, **{tracking.PARENT_TAG: parent.info.run_id})
            if run.info.status == "FINISHED"}
        counts[plan.name] = sum(trial.key in done for trial in plan.trials)
    return counts


def check_unfinished(plans: list) -> tuple[list, dict[str, int]]:
    """The plans, every sweep with a trial left to run checked by check_plan (its data loads, its
    trials fit in memory; the grid points that cannot fit the data left out), and finished_counts:
    what running them needs, found before anything is created."""
    from mtc.sweep.driver import check_plan

    counts = finished_counts(plans)  # a left-out point has no finished run: the counts hold for the checked plans
    return [check_plan(plan) if counts[plan.name] < len(plan.trials) else plan for plan in plans], counts


def parallel_slots(run) -> int:
    """Trials a local Ray runs at once: the CPUs over the CPUs per trial, at most the cap."""
    from mtc.config import available_cpus

    slots = max((run.ray.num_cpus or available_cpus()) // run.sweep.cpus_per_trial, 1)
    return min(slots, run.sweep.max_concurrent_trials or slots)


def duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f} s"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def dry_run(study: Study, plans: list, only: list[str], estimate: bool = True,
            not_run: dict[str, str] | None = None, planning: float = 0.0) -> None:
    """List the sweeps with their trial counts, what is already finished and (``estimate``) an
    estimated time, each sweep's line printed as soon as it is checked (check_plan, its data read
    once for all the sweeps on it) and estimated (mtc.sweep.estimates: the store's fit times of
    the method on the data, else the method's cost curve at this data's size, else a small fit;
    the trials whose fit an earlier sweep of the study has are read, not fitted:
    mtc.sweep.shared_fits); then the total, with the platform's share and the ``planning``
    seconds the run repeats, the methods that cannot run (``not_run``) and the compares."""
    from mtc.sweep import estimates
    from mtc.sweep.driver import check_plan
    from mtc.sweep.shared_fits import fits_read

    counts, read = finished_counts(plans), fits_read(plans)
    stored = stored_fit_seconds(plans) if estimate else {}
    slots, width = parallel_slots(plans[0].run), max(len(plan.name) for plan in plans)
    fits_seconds, checked = 0.0, []
    for plan in estimates.shared_draws(plans):
        start = time.perf_counter()  # grid points that cannot fit the data left out, as the run checks them
        plan = check_plan(plan) if counts[plan.name] < len(plan.trials) else plan
        planning += time.perf_counter() - start
        checked.append(plan)
        done, total = counts[plan.name], len(plan.trials)
        state = "finished" if done == total else f"{done} finished" if done else "to run"
        line = f"{plan.name:<{width}}  {total:>6} trials  {state}"
        if estimate and done < total:
            left = max(len(plan.trials) - done - read[plan.name], 0)  # those an earlier sweep fits are read
            fit = estimates.fit_time(plan, stored) if left else estimates.FitTime(0.0, "no fit left to compute")
            fits = left * estimates.computed_share(plan)
            seconds = estimates.sweep_seconds(fit, len(plan.trials) - done, fits, slots)
            fits_seconds += seconds
            source = fit.source + (f", {read[plan.name]} trials read the fits of another sweep" if read[plan.name]
                                   else "")
            line += f"  about {duration(seconds)} ({source})"
        print(line + (f"; {left_out_note(plan.unrunnable, bold='')}" if plan.unrunnable else ""), flush=True)
    total = sum(len(plan.trials) for plan in checked)
    left = total - sum(counts.values())
    running = sum(counts[plan.name] < len(plan.trials) for plan in checked)
    platform = estimates.platform_seconds(running) + planning if left else 0.0
    print(f"study {study.name}: {len(plans)} sweeps, {total} trials, {left} to run "
          f"({len(plans) - running} sweeps finished)"
          + (f"; estimated {duration(fits_seconds + platform)} in all on {slots} parallel trials: "
             f"{duration(fits_seconds)} for the trials (fits, scores, runs), {duration(platform)} for Ray's start, "
             "the reports and the planning" if estimate and left else ""))
    for method, why in (not_run or {}).items():
        print(f"cannot run: {method}: {why}")
    for spec in kept_compares(study, only):
        print(f"compare -> {compare_folder(spec, plans[0].run)} ({spec.metric}): "
              f"{' '.join(compared_benchmarks(spec, plans[0].run))}")


def run_study(study: Study, plans: list, force_compare: bool = False, compare_root: Path = Path("."),
              keep_ray: bool = False, not_run: dict[str, str] | None = None) -> dict:
    """Run the study's unfinished sweeps in one Ray session and one Tuner, report each, then
    regenerate its compare folders when a sweep ran (or ``force_compare``). ``keep_ray`` (from
    Python, a notebook): a local Ray is kept running for the process's next sweeps and studies
    (mtc.sweep.driver.ray_session), instead of being started and stopped for this one. ``not_run``:
    the methods plan_study found unable to run, listed in every compare folder. Returns what
    happened: ``ran`` and ``finished`` sweep names, ``ray_started``, ``compared`` folders,
    ``seconds``. A stop signal closes every open sweep's runs KILLED (SweepInterrupted); a
    sweep with trials that have no result is FAILED and, after the compares (which note it),
    raised as SweepIncomplete."""
    from mtc.sweep.stopping import stop_signals

    with stop_signals():
        return drive_study(study, plans, force_compare, compare_root, keep_ray, not_run)


def drive_study(study: Study, plans: list, force_compare: bool, compare_root: Path, keep_ray: bool = False,
                not_run: dict[str, str] | None = None) -> dict:
    from mtc.sweep.driver import (
        TunerOutcome,
        check_plan,
        complete,
        finish_sweep,
        leased_store,
        leave,
        open_sweep,
        ray_session,
        remove_dead_drivers_ray_folders,
        reopen_finished,
        run_on_ray,
        store_has_experiment,
    )
    from mtc.sweep.finishing import Finisher
    from mtc.sweep.stopping import SweepIncomplete, SweepInterrupted, as_stopped, deferred, moment, shielded

    start = time.perf_counter()
    first = plans[0].run
    worker_env = preflight.process_env()
    first = replace(first, ray=replace(first.ray, address=preflight.check_ray(first.ray.address)))  # auto: the cluster checked
    preflight.check_tracking(first.tracking.uri)
    plans, _ = check_unfinished(plans)
    for plan in plans:
        plan.output_dir.mkdir(parents=True, exist_ok=True)
    outcome = {"ran": [], "finished": [], "ray_started": False, "compared": []}
    incomplete = []
    with study_locks(plans, first.tracking.uri):
        todo, client, experiment_id = [], None, None
        if store_has_experiment(first.tracking):
            client, experiment_id = tracking.open_store(first.tracking.uri, first.tracking.experiment,
                                                        first.tracking.artifact_root)
        for plan in plans:
            stored = reopen_finished(plan, client, experiment_id) if client else None
            if stored is None:
                todo.append(plan)
            elif client.get_run(stored.parent_id).info.status != "FINISHED":  # its report was interrupted
                complete(stored, TunerOutcome(), False)
                outcome["ran"].append(plan.name)
            else:
                outcome["finished"].append(plan.name)
        shared = sum(len(plan.shared_fits) for plan in todo)
        print(f"study {study.name}: {len(plans)} sweeps, {len(outcome['finished'])} finished, {len(todo)} to run"
              + (f"; {shared} of their trials are a fit that another sweep of the study has too (fitted once)"
                 if shared else ""))
        # checked above unless its runs changed since (another driver): cheap when loaded
        todo = [check_plan(plan) for plan in todo]
        if not todo:
            remove_dead_drivers_ray_folders()  # as a study that starts Ray does: a killed driver's agents go
        if todo:
            every_sweep_ended = False
            try:
                # drivers on other machines see the sweeps as taken (a server or database store): before Ray
                with leased_store(first.tracking, {plan.key: plan.name for plan in todo}) as store, \
                        ray_session(first, worker_env, keep_ray) as cpus:
                    outcome["ray_started"] = True
                    client, experiment_id = store()
                    opened = []
                    try:
                        with deferred():  # the runs are created whole, then a stop signal closes them
                            for plan in todo:
                                opened.append(open_sweep(plan, client, experiment_id))
                    except BaseException as error:
                        if not opened:
                            raise
                        raise leave(opened, error) from None
                    by_name = {sweep.plan.name: sweep for sweep in opened}
                    # each sweep reported as soon as its trials have ended, while the others run
                    finisher = Finisher(lambda name: finish_sweep(by_name[name], TunerOutcome(), True))
                    try:
                        tuner = run_on_ray(opened, cpus, f"study {study.name}",
                                           first.sweep.output_dir / "studies" / study.name / "ray_results", first,
                                           finisher)
                        finisher.join()
                    except BaseException as error:  # a stop signal or an error: Ray stopped, every sweep's runs closed
                        with shielded():  # the sweep being reported ends FINISHED (or as it failed)
                            finisher.join()
                        raise leave([o for o in opened if o.plan.name not in finisher.reported], error) from None
                    reported = finisher.reported
                    for i, sweep in enumerate(opened):
                        name = sweep.plan.name
                        try:
                            if finisher.error and finisher.error[0] == name:
                                raise finisher.error[1]
                            if name in finisher.incomplete:
                                raise SweepIncomplete(finisher.incomplete[name])
                            result = finisher.results[name] if name in reported else finish_sweep(sweep, tuner, True)
                        except SweepIncomplete as error:  # its parent is FAILED; the other sweeps are still reported
                            incomplete.append(str(error))
                            outcome["ran"].append(name)
                            continue
                        except BaseException as error:
                            raise leave([o for o in opened[i:] if o.plan.name not in reported], error) from None
                        print(sweep_line(sweep.plan, result))
                        outcome["ran"].append(sweep.plan.name)
                    every_sweep_ended = True
            except KeyboardInterrupt as error:  # Ray stopping once every sweep was reported
                if not every_sweep_ended:
                    raise
                stop = as_stopped(error)
                raise SweepInterrupted(f"{stop.how} after the study's sweeps ended ({len(outcome['ran'])} run), before "
                                       "its compare folders were written; run the same command with --compare to "
                                       "write them", stop.exit_code) from None
    if outcome["ran"] or force_compare:
        try:
            moment("compare")
            outcome["compared"] = run_compares(study, first, compare_root, not_run)
        except KeyboardInterrupt as error:
            stop = as_stopped(error)
            raise SweepInterrupted(f"{stop.how} while writing the compare folders; the study's sweeps are done: run the "
                                   "same command with --compare to write them", stop.exit_code) from None
    elif study.compares:
        print("no sweep ran: the compare folders are as the last run left them (--compare regenerates them)")
    outcome["seconds"] = time.perf_counter() - start
    if incomplete:
        raise SweepIncomplete("; ".join(incomplete))
    return outcome


@contextlib.contextmanager
def study_locks(plans: list, tracking_uri: str):
    """The locks of ``python -m mtc.sweep`` for every sweep of the study (one live driver per
    sweep, one live driver per SQLite store), held together."""
    with contextlib.ExitStack() as stack:
        for plan in plans:
            stack.enter_context(locks.held(plan.output_dir / ".driver.lock",
                                           locks.driver_message(plan.name, plan.output_dir)))
        stack.enter_context(locks.store_lock(tracking_uri))
        yield


def sweep_line(plan, result) -> str:
    """A study's line on one finished sweep: its trials, those not in its answer (failed,
    degenerate, never moved; grid points left out before Ray), and its chosen point with the
    score that chose it: accuracy with labels, else the silhouette (as compare ranks)."""
    summaries = result.summaries
    counts = {"failed": sum(s.n_failed for s in summaries), "degenerate": sum(s.n_degenerate for s in summaries),
              "never moved": sum(s.n_unmoved for s in summaries)}
    held = [f"{count} {what}" for what, count in counts.items() if count]
    held += [f"{len(plan.unrunnable)} grid points left out (cannot fit the data)"] if plan.unrunnable else []
    line = f"{plan.name}: {len(plan.trials)} trials" + (f" ({', '.join(held)})" if held else "")
    selection = "acc" if "acc" in result.best else NO_LABELS_BEST
    chosen = result.best.get(selection)
    if chosen is None:
        return f"{line}, no point chosen: every trial degenerate"
    key = CRITERIA[selection][0]
    return f"{line}, best by {key.split('/')[0]} `{chosen.point}` {chosen.mean[key]:.4f}"


def kept_compares(study: Study, only: list[str]) -> tuple:
    """The compares a run with ``--only`` writes: a study of command-line data (every_method) keeps
    its folder, which ranks every method of the store on that data; a paper's study writes none,
    since its folders are the papers' whole tables."""
    return tuple(study.compares) if not only or study.data_from_command_line else ()


def compare_folder(spec: CompareSpec, run) -> str:
    """A compare's folder, ``{data}`` replaced by the data's name (a study of command-line data)."""
    return spec.out.replace("{data}", run.data.name)


def compared_benchmarks(spec: CompareSpec, run) -> list[str]:
    """A compare's benchmarks; none listed: the command line's data."""
    return list(spec.benchmarks) or [run.data.name]


def write_not_run(out: Path, not_run: dict[str, str]) -> None:
    """``not_run.csv`` (method, reason) in a compare folder, and a section at the end of its
    compare.md listing the methods that could not run on the data."""
    import csv

    with (out / "not_run.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["method", "reason"])
        writer.writerows(not_run.items())
    lines = ["", "## methods that cannot run on this data", "", "| method | reason |", "|---|---|"]
    lines += [f"| {method} | {why.replace('|', '/')} |" for method, why in not_run.items()]
    with (out / "compare.md").open("a") as handle:
        handle.write("\n".join(lines) + "\n")


def run_compares(study: Study, run, root: Path, not_run: dict[str, str] | None = None) -> list[Path]:
    """``python -m mtc.results.compare`` into each of the study's folders (relative to ``root``),
    with the methods that could not run (``not_run``) listed in each."""
    from mtc.results.compare import compare

    written = []
    for spec in study.compares:
        out = (root / compare_folder(spec, run)).resolve()
        start = time.perf_counter()
        result = compare(run.tracking.uri, run.tracking.experiment, out, spec.metric, compared_benchmarks(spec, run),
                         list(spec.methods) or None)
        if not_run:
            write_not_run(out, not_run)
        notes = result["comparison"].notes
        print(f"compared {len(result['comparison'].sweeps)} sweeps into {out} in {time.perf_counter() - start:.1f} s"
              + (f" ({len(notes)} notes in compare.md)" if notes else ""))
        for found in recommendations(result["comparison"].sweeps):
            print(f"answer on {recommendation_sentence(found)}")
        written.append(out)
    return written


def run(study: str, *overrides: str, only: tuple[str, ...] = (), compare_root: str | Path = ".") -> dict:
    """Run a study from Python (a notebook), as ``python -m mtc.reproduce <study> <overrides>``
    would: a local Ray is started by the first sweep or study of the process and kept for the
    next ones (mtc.sweep.driver.ray_session), so a second call pays no Ray start.

    Parameters
    ----------
    study : str
        A study of conf/study (``every_method``, ``mtcmrl``, ...) or the path of a study YAML.
    *overrides : str
        Hydra overrides for every sweep, e.g. ``"data=files"``, ``"data.params.paths=[a.csv,b.csv]"``,
        ``"data.name=mine"``, ``"sweep.repeats=3"``.
    only : tuple of str
        Only the sweeps of these methods, labels, data configs or sweep names (a paper's study
        then writes no compare; a study of command-line data keeps its compare folder).
    compare_root : str or Path
        The folder the compare folders are relative to.

    Returns
    -------
    dict
        What ``run_study`` returns (``ran``, ``finished``, ``ray_started``, ``compared``,
        ``seconds``) and ``not_run``: the methods that cannot run on the data, with the reason.

    Raises
    ------
    mtc.errors.InputError
        A bad study, config, data or store, found before anything is created.
    """
    if any(not isinstance(override, str) for override in overrides):
        raise InputError("overrides are strings, one per argument: run('every_method', 'data=files', ...)")
    loaded = load_study(study)
    not_run: dict[str, str] = {}
    plans = plan_study(loaded, list(overrides), list(only), not_run)
    outcome = run_study(replace(loaded, compares=kept_compares(loaded, only)), plans, compare_root=Path(compare_root),
                        keep_ray=True, not_run=not_run)
    return {**outcome, "not_run": not_run}


def leaderboard_folder(study: str, methods: list[str], root: Path) -> Path:
    """Where ``--with`` writes: ``<root>/leaderboard_<study>_<method>[+<method>...]``."""
    named = "+".join(methods) if len(methods) <= 3 else f"{len(methods)}_methods"
    return Path(root) / f"leaderboard_{Path(study).stem}_{named}"


def leaderboard(study: str, methods: str | list[str], *overrides: str, only: tuple[str, ...] = (),
                out: str | Path | None = None, compare_root: str | Path = ".", keep_ray: bool = True) -> dict:
    """Set ``methods`` beside the papers of ``study`` under their protocols, as ``python -m
    mtc.reproduce <study> --with METHODS`` does (mtc.protocols plans the sweeps: the papers'
    methods on the benchmarks kept and the added methods; finished sweeps are not run again),
    then write the leaderboard folder (mtc.results.leaderboard) and log it as one MLflow run.

    Parameters
    ----------
    study : str
        A paper's study (mtcmrl, smtnmf, ...), ``all``, or the path of a study YAML.
    methods : str or list of str
        Method configs (``"a_kmeans,snmf"``, ``["a_kmeans"]``) or ``"all"``; one outside the
        package is found through ``hydra.searchpath=[file://...]`` among the overrides.
    *overrides : str
        Hydra overrides for every sweep (store, Ray, search path, ...).
    only : tuple of str
        Only the benchmarks whose added sweeps these select (methods, data configs, sweep names).
    out : str or Path, optional
        The leaderboard folder (default: leaderboard_folder under ``compare_root``).
    keep_ray : bool
        Keep a local Ray for the process's next sweeps (a notebook); the command does not.

    Returns
    -------
    dict
        ``folder``, ``run_id`` (the MLflow leaderboard run), ``scores`` and ``tests`` (as
        leaderboard.csv and tests.csv), ``not_run`` and what run_study returns under ``study``.
    """
    from mtc.protocols import added_methods, plan_leaderboard
    from mtc.results.leaderboard import build_leaderboard, log_leaderboard
    from mtc.results.rendering import store_description
    from mtc.results.reading import open_experiment

    names = added_methods(methods if isinstance(methods, str) else ",".join(methods))
    plan = plan_leaderboard(study, names, list(overrides), list(only))
    for where, why in plan.not_run.items():
        print(f"cannot run: {where}: {why}")
    folder = Path(out) if out is not None else leaderboard_folder(study, names, Path(compare_root))
    outcome = run_study(Study(folder.name, (), ()), plan.plans, keep_ray=keep_ray)
    first = plan.plans[0].run
    client, experiment_id = open_experiment(first.tracking.uri, first.tracking.experiment)
    built = build_leaderboard(client, experiment_id, plan.boards, names, folder, plan.not_run,
                              store_description(first.tracking.uri, folder.resolve()))
    run_id = log_leaderboard(client, experiment_id, Path(study).stem, names, built["paths"])
    return {"folder": folder, "run_id": run_id, "scores": built["scores"], "tests": built["tests"],
            "not_run": plan.not_run, "study": outcome}


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="python -m mtc.reproduce", description=__doc__.splitlines()[0])
    parser.add_argument("study", help="a study in conf/study (mtcmrl, mtcfir, smtnmf, aaai13, spmtc, all) or a YAML path")
    parser.add_argument("--dry-run", action="store_true", help="list the sweeps, their trials and what is finished")
    parser.add_argument("--only", nargs="+", default=[],
                        help="only the sweeps of these methods, labels, data configs or sweep names (a paper's study then "
                             "writes no compare; every_method keeps its compare folder)")
    parser.add_argument("--no-estimate", action="store_true",
                        help="with --dry-run: no estimated time (no small fits where no cost curve answers)")
    parser.add_argument("--with", dest="with_methods", metavar="METHOD[,METHOD...]", action="append",
                        help="the leaderboard: these method configs (or all) under every protocol of the study's "
                             "papers, beside the papers' methods and published numbers (mtc.protocols); given "
                             "twice, the methods of both")
    parser.add_argument("--out", type=Path, help="with --with: the leaderboard folder (default: "
                                                 "leaderboard_<study>_<methods> under --compare-root)")
    parser.add_argument("--compare", action="store_true", help="regenerate the compare folders even if no sweep ran")
    parser.add_argument("--compare-root", type=Path, default=Path("."),
                        help="the folder the compare folders are relative to (default: here)")
    args, overrides = parser.parse_known_args(argv)
    # --only takes every token after it; the overrides written after it (key=value: no sweep,
    # method, label or data name holds "=") are overrides, not names
    overrides += [token for token in args.only if "=" in token]
    args.only = [token for token in args.only if "=" not in token]
    # the study is the one token without "=", wherever it stands among the overrides
    tokens = [args.study, *overrides]
    names = [token for token in tokens if "=" not in token]
    if len(names) != 1:
        fail(InputError(f"one study and Hydra overrides (key=value), got {len(names)} names: {' '.join(names)}"
                        if names else "no study named, only overrides (key=value)"))
    args.study, overrides = names[0], [token for token in tokens if "=" in token]
    args.with_methods = ",".join(args.with_methods) if args.with_methods else None
    return args, overrides


def main_leaderboard(args: argparse.Namespace, overrides: list[str]) -> None:
    """``--with``: the leaderboard's dry run (its sweeps, their estimated time, the benchmarks
    an added method cannot run on), or the leaderboard."""
    from mtc.protocols import added_methods, plan_leaderboard

    start = time.perf_counter()
    if args.dry_run:
        names = added_methods(args.with_methods)
        print(f"leaderboard of {', '.join(names)} on {Path(args.study).stem}: planning its sweeps")
        plan = plan_leaderboard(args.study, names, overrides, args.only)
        dry_run(Study(leaderboard_folder(args.study, names, args.compare_root).name, (), ()), plan.plans, [],
                not args.no_estimate, plan.not_run, time.perf_counter() - start)
        return
    result = leaderboard(args.study, args.with_methods, *overrides, only=tuple(args.only), out=args.out,
                         compare_root=args.compare_root, keep_ray=False)
    print(f"leaderboard: {result['folder'] / 'leaderboard.md'} (MLflow run {result['run_id']}), "
          f"{time.perf_counter() - start:.1f} s")


def main(argv: list[str] | None = None) -> None:
    """Run the command: bad input is one line and exit 2; a stopped study exits 128 + the
    signal's number (130 for Ctrl-C); an incomplete sweep or a full disk is one line, exit 1
    (mtc.sweep.stopping.command_exits)."""
    from mtc.sweep.driver import quiet_store_errors
    from mtc.sweep.stopping import command_exits

    sys.stdout.reconfigure(line_buffering=True)
    quiet_store_errors()
    args, overrides = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        with command_exits():
            if args.with_methods:
                main_leaderboard(args, overrides)
                return
            study = load_study(args.study)
            not_run, start = {}, time.perf_counter()
            if args.dry_run:  # planning a large study takes a while: say so at once
                print(f"study {study.name}: planning {len(study.sweeps)} sweeps (configs composed, data hashed)")
            plans = plan_study(study, overrides, args.only, not_run)
            if args.dry_run:
                dry_run(study, plans, args.only, not args.no_estimate, not_run, time.perf_counter() - start)
                return
            for method, why in not_run.items():
                print(f"cannot run: {method}: {why}")
            outcome = run_study(replace(study, compares=kept_compares(study, args.only)), plans,
                                args.compare, args.compare_root, not_run=not_run)
    except InputError as error:
        fail(error)
    print(f"study {study.name}: {len(outcome['ran'])} sweeps run, {len(outcome['finished'])} already finished, "
          f"{len(outcome['compared'])} compare folders written, {outcome['seconds']:.1f} s"
          + ("" if outcome["ray_started"] else " (no Ray started)"))


if __name__ == "__main__":
    main()
