"""Reading results back from an MLflow store: the one place that does it, for the sweep's
report, ``mtc.run``, ``mtc.results.compare`` and ``mtc.reproduce``.

- ``open_experiment``: a client of an existing store (a moved local store is relocated
  first) and the experiment's id;
- ``trial_records``: a sweep's child runs as TrialRecord;
- ``point_summaries``: mean and std per grid point, with the stability across seeds;
- ``chosen_points``: the grid point of every selection of ``mtc.results.report.SELECTIONS``;
- ``finished_sweeps``: every finished sweep of an experiment (the newest per benchmark and
  method; sample sizes pooled as ``<data>@<n1>+<n2>``) as a ``Sweep``: its chosen points and
  one row per trial (what ``mtc.results.compare`` compares); sweeps of data without labels
  are compared by a label-free criterion (``comparison_criterion``).

Nothing here starts Ray or writes to the store.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import quote, urlparse

import numpy as np
import pandas as pd

from mtc.errors import InputError
from mtc.results.report import (
    SELECTIONS,
    PointSummary,
    TrialRecord,
    best_point,
    is_degenerate,
    summarize,
    why_no_point,
    with_stability,
)
from mtc.results.size_curves import SIZE_SEPARATOR
from mtc.store import preflight, tracking

BEST = "acc"  # the selection the comparison tables, tests and ranks use (the papers' protocol)
NO_LABELS_BEST = "silhouette"  # ... when no sweep has accuracy (data without labels)
NOT_RECORDED = "not recorded"  # the machine of a run from before tracking.MACHINE_TAG
POOL_MARK = "@"  # <data>@<n1>+<n2>: a benchmark pooling the sweeps of several sample sizes (pool_members)


@dataclass(frozen=True)
class Sweep:
    """One finished sweep as read back from MLflow.

    Attributes
    ----------
    benchmark, method : str
        The benchmark (data config or sweep-name suffix) and method (the sweep's label) of
        the sweep.
    run_id : str
        Its parent run.
    points : dict[str, PointSummary]
        The grid point of each selection of ``SELECTIONS`` that its runs allow.
    trials : pandas.DataFrame
        One row per finished trial: ``point``, ``seed`` and one column per metric.
    published_as : str
        The method config whose published numbers it is shown beside (``method`` unless
        the sweep is a variant).
    machines : dict[str, int]
        Its finished trials per machine that fitted them (``machine_counts``).
    failed : int
        Its trials that failed (every grid point).
    left_out : dict[str, str]
        The grid points it left out before Ray, with why its method cannot fit the data
        (the parent's tag ``mtc.left_out_points``).
    """

    benchmark: str
    method: str
    run_id: str
    points: dict[str, PointSummary]
    trials: pd.DataFrame
    published_as: str
    machines: dict[str, int] = field(default_factory=dict)
    failed: int = 0
    left_out: dict[str, str] = field(default_factory=dict)


def open_experiment(uri: str, experiment: str, read_only: bool = False):
    """A client of an existing tracking store and the experiment's id.

    The store is checked first without writing to it: MLflow's client writes its tables into
    any SQL database it opens, so a file or database that is not an MLflow store is refused
    before the client touches it (check_sqlite_store, check_database_store).

    Parameters
    ----------
    uri : str
        The store: ``sqlite:///<path>.db``, a database URI or a tracking server's address.
    experiment : str
        The experiment's name.
    read_only : bool
        Open a SQLite store read-only (sqlite_read_only), for readers that write nothing:
        the client cannot write to it. A moved local store is still relocated first
        (mtc.store.relocate).

    Returns
    -------
    client : mlflow.MlflowClient
        A client of the store.
    experiment_id : str
        The experiment's id.

    Raises
    ------
    InputError
        ``uri`` or ``experiment`` is not a non-empty string; the store does not exist, does not
        answer, is not an MLflow store, is damaged or cannot be read; it has no such experiment.
    """
    from mlflow.exceptions import MlflowException

    from mtc.store.relocate import relocate_if_moved

    if not isinstance(uri, str) or not uri.strip():
        raise InputError(f"the tracking URI must be a non-empty string, got {uri!r}" + STORE_HINT)
    if not isinstance(experiment, str) or not experiment.strip():
        raise InputError(f"the experiment must be a non-empty name, got {experiment!r}")
    opened = uri
    if uri.startswith("sqlite:///"):
        path = Path(uri[len("sqlite:///"):]).resolve()
        if not path.is_file():
            raise InputError(f"no tracking store at {path}" + STORE_HINT)
        check_sqlite_store(path)
        preflight.check_sqlite(str(path), preflight.CHECK_TIMEOUT)  # not a store of a newer MLflow
        uri = opened = f"sqlite:///{path}"
        for line in relocate_if_moved(uri, path.parent / "mlartifacts"):  # laid out as a sweep leaves it
            print(f"the store was moved; {line}")
        if read_only:
            opened = sqlite_read_only(path)
    else:
        preflight.check_tracking(uri)
        check_database_store(uri)
    try:
        client = tracking.client_for(opened)
        found = client.get_experiment_by_name(experiment)
        names = "" if found else ", ".join(e.name for e in client.search_experiments()) or "none"
    except MlflowException as error:
        raise InputError(f"cannot read the tracking store {preflight.safe(uri)} ({first_line(error.message)})") from None
    if found is None:
        raise InputError(f"no experiment {experiment!r} in {uri} (experiments: {names}); choose one with --experiment")
    return client, found.experiment_id


STORE_HINT = "; pass the sweeps' store with --tracking-uri sqlite:///<path>.db"
MLFLOW_TABLES = ("experiments", "runs", "alembic_version")  # in every MLflow SQL store, whatever its version


def first_line(message) -> str:
    """The first line of an error's message (SQLAlchemy appends the statement and its
    parameters on further lines)."""
    return (str(message).strip().splitlines() or [""])[0]


# Stores that passed check_sqlite_store in this process: {path: file_state when checked}
_checked_stores: dict[Path, tuple] = {}


def file_state(path: Path) -> tuple:
    """What changes when a SQLite file is written: its and its write-ahead log's inode, size
    and modification time."""
    wal = Path(f"{path}-wal")
    return tuple((s.st_ino, s.st_size, s.st_mtime_ns) for s in (path.stat(), *([wal.stat()] if wal.exists() else [])))


def check_sqlite_store(path: Path) -> None:
    """Refuse, in one line, a file that is not a readable MLflow store: empty, not SQLite,
    damaged (SQLite's quick_check, which reads every page: 0.4 s for 550 MB here, 38.6 s for
    the 3.5 GB store of the five studies) or without MLflow's tables. The file is opened
    read-only: nothing is written to it. A file that passed in this process and has not been
    written since (file_state) is not read again: a study's compares and its leaderboard
    check the store once.

    Raises
    ------
    InputError
        What is wrong with the file.
    """
    state = file_state(path)
    if _checked_stores.get(path) == state:
        return
    if path.stat().st_size == 0:
        raise InputError(f"{path} is an empty file, not an MLflow tracking store" + STORE_HINT)
    damaged = f"{path} is damaged ({{}}); restore it from a copy"
    try:
        connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=preflight.CHECK_TIMEOUT)
        try:
            tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            damage = next((line for (line,) in connection.execute("PRAGMA quick_check") if line != "ok"), None)
        finally:
            connection.close()
    except sqlite3.Error as error:
        if getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_CORRUPT:
            raise InputError(damaged.format(first_line(error))) from None
        raise InputError(f"cannot read {path} as an MLflow tracking store ({first_line(error)})" + STORE_HINT) from None
    if damage is not None:  # its finding ends its first line: "*** in database main ***\nPage 2: ..."
        raise InputError(damaged.format(damage.strip().splitlines()[-1]))
    missing = [table for table in MLFLOW_TABLES if table not in tables]
    if missing:
        raise InputError(f"{path} is a SQLite file but not an MLflow tracking store (no table {', '.join(missing)})"
                         + STORE_HINT)
    _checked_stores[path] = state


def check_database_store(uri: str) -> None:
    """Refuse, in one line, a database (``postgresql://``, ...) without MLflow's tables: only
    their names are read."""
    import sqlalchemy as sa

    if urlparse(uri).scheme.split("+")[0] not in preflight.DATABASE_SCHEMES:
        return
    engine = sa.create_engine(uri, poolclass=sa.pool.NullPool)
    try:
        tables = set(sa.inspect(engine).get_table_names())
    except sa.exc.SQLAlchemyError as error:
        raise InputError(f"cannot read the tables of {preflight.safe(uri)} "
                         f"({first_line(getattr(error, 'orig', None) or error)})") from None
    finally:
        engine.dispose()
    missing = [table for table in MLFLOW_TABLES if table not in tables]
    if missing:
        raise InputError(f"the database {preflight.safe(uri)} is not an MLflow tracking store (no table "
                         f"{', '.join(missing)})")


def sqlite_read_only(path: Path) -> str:
    """The URI of a SQLite store opened read-only (SQLite's ``mode=ro``), for MLflow's client.
    The whole path is percent-encoded, its slashes too: SQLite decodes it, and MLflow, which
    creates the parent folders of the path it finds after ``sqlite:///``, finds none."""
    return f"sqlite:///file:{quote(str(path), safe='')}?mode=ro&uri=true"


def trial_records(client, experiment_id: str, parent_id: str) -> list[TrialRecord]:
    """Every child run of a sweep's parent run, as read back."""
    return records_of(tracking.find_runs(client, experiment_id, **{tracking.PARENT_TAG: parent_id}))


def records_of(runs: list) -> list[TrialRecord]:
    """Child runs (MLflow Run objects, as found) as trial records, in ``trial_order``."""
    return sorted((TrialRecord(run.data.tags.get(tracking.POINT_TAG, "?"), run.data.params.get("seed", "?"),
                               run.info.status, run.data.metrics, run.info.run_id, run.info.artifact_uri,
                               run.data.tags.get(tracking.MACHINE_TAG, ""))
                   for run in runs), key=trial_order)


def trial_order(record: TrialRecord) -> tuple:
    """By grid point, then seed (numbers by value), then run id: a store returns its rows in the
    order they were written, which two runs of the same study do not share, and a mean over
    seeds summed in another order can differ in its last bit (and so break a tie between
    methods that the same runs make equal)."""
    seed = record.seed.rsplit(SIZE_SEPARATOR, 1)[-1]
    return record.point, record.seed[:len(record.seed) - len(seed)], not seed.isdigit(), \
        int(seed) if seed.isdigit() else 0, seed, record.run_id


def seed_labels(client, records: list[TrialRecord], task_names: list[str]) -> dict[str, list[list[np.ndarray]]]:
    """Every finished trial's labels, by grid point (for the stability criterion)."""
    labels: dict[str, list[list[np.ndarray]]] = {}
    for record in records:
        if record.status == "FINISHED":
            labels.setdefault(record.point, []).append(
                tracking.load_labels(client, record.run_id, record.artifact_uri, task_names))
    return labels


def point_summaries(client, records: list[TrialRecord], task_names: list[str], same_data: bool = True):
    """Mean and std per grid point of the runs' metrics, with the stability across seeds when
    every seed clustered the same data (``same_data``): labels of different draws (a data
    config with ``draw: per_seed``) label different samples, and their ARI means nothing."""
    summaries = summarize(records)
    kept = [record for record in records if not is_degenerate(record.metrics)]  # stability of the other seeds only
    return with_stability(summaries, seed_labels(client, kept, task_names)) if same_data else summaries


def chosen_points(summaries: list[PointSummary]) -> dict[str, PointSummary]:
    """The grid point of every selection whose criterion was logged."""
    chosen = {}
    for selection in SELECTIONS:
        with contextlib.suppress(ValueError, KeyError):
            chosen[selection] = best_point(summaries, selection)
    return chosen


def sweep_parents(client, experiment_id: str) -> list:
    """The parent runs of sweeps (a ``mtc.sweep_key`` tag, no parent of their own), any status."""
    return [run for run in tracking.runs_with_tag(client, experiment_id, tracking.SWEEP_KEY_TAG)
            if tracking.PARENT_TAG not in run.data.tags]


def unfinished_notes(parents: list, read: dict) -> list[str]:
    """A note for each (benchmark, method) whose newest sweep did not finish (interrupted,
    failed or still running), so that a table without it is not taken for the whole picture:
    ``read`` maps the pairs to the finished sweep that is read instead, if any."""
    newest: dict[tuple[str, str], object] = {}
    for run in parents:
        pair = (benchmark_name(run), sweep_label(run))
        if pair not in newest or run.info.start_time > newest[pair].info.start_time:
            newest[pair] = run
    notes = []
    for pair, run in sorted(newest.items()):
        if run.info.status == "FINISHED":
            continue
        what = f"{pair[1]} on {pair[0]}: the newest sweep ({run.info.run_id}, {run.info.status}) did not finish"
        notes.append(f"{what}; the older finished one ({read[pair].info.run_id}) is read" if pair in read else
                     f"{what} and is left out; the same sweep command resumes it")
    return notes


def sweep_label(run) -> str:
    """The method a sweep is shown as: its ``mtc.label`` tag, else (sweeps logged before the
    tag) its method."""
    return run.data.tags.get("mtc.label") or run.data.tags.get("mtc.method", "?")


def benchmark_name(run) -> str:
    """The run name without its ``<label>-`` prefix, else the sweep's data config."""
    prefix = f"{sweep_label(run)}-"
    name = run.info.run_name or ""
    if name.startswith(prefix) and len(name) > len(prefix):
        return name[len(prefix):]
    return run.data.tags.get("mtc.data", "?")


def newest_per_pair(runs: list) -> tuple[dict[tuple[str, str], object], list[str]]:
    """The newest run per (benchmark, method), and a note for each pair that had several.

    Parameters
    ----------
    runs : list of mlflow.entities.Run
        Parent runs of finished sweeps.

    Returns
    -------
    newest : dict
        ``{(benchmark, method): run}``.
    notes : list of str
        Which older runs were left out.
    """
    groups: dict[tuple[str, str], list] = {}
    for run in runs:
        groups.setdefault((benchmark_name(run), sweep_label(run)), []).append(run)
    newest, notes = {}, []
    for pair, group in sorted(groups.items()):
        group.sort(key=lambda run: run.info.start_time, reverse=True)
        newest[pair] = group[0]
        if len(group) > 1:
            older = ", ".join(run.info.run_id for run in group[1:])
            notes.append(f"{pair[1]} on {pair[0]}: {len(group)} finished sweeps; the newest "
                         f"({group[0].info.run_id}) is read, not {older}")
    return newest, notes


def select(parents: dict, benchmarks: list[str] | None, methods: list[str] | None) -> dict:
    """The (benchmark, method) pairs that ``--benchmarks`` and ``--methods`` keep (all when not given)."""
    return {pair: run for pair, run in parents.items()
            if (not benchmarks or pair[0] in benchmarks) and (not methods or pair[1] in methods)}


def pool_members(benchmark: str) -> list[str]:
    """The benchmarks a pooled one reads: ``<data>@<n1>+<n2>+...`` is the sweeps ``<data>-n<n1>``,
    ``<data>-n<n2>``, ... (one sweep per per-task sample size, as ``+experiment=smtnmf_paper``
    names them); any other name is itself."""
    if POOL_MARK not in benchmark:
        return [benchmark]
    data, sizes = benchmark.split(POOL_MARK, 1)
    return [f"{data}-n{size}" for size in sizes.split("+")]


def pool(parents: dict, benchmarks: list[str], methods: list[str] | None) -> tuple[dict, dict, list[str]]:
    """The methods that have a finished sweep of every member of a pooled benchmark.

    A pooled benchmark is one row of the papers' tables that averages several sample sizes
    (SMT-NMF's Table 5: 30 draws at each of four sizes); its trials are all its members' trials.

    Parameters
    ----------
    parents : dict
        ``{(benchmark, method): run}``, the newest finished sweep of each pair.
    benchmarks : list of str
        The benchmarks asked for; those with ``POOL_MARK`` are pooled.
    methods : list of str, optional
        Only these methods (all when not given).

    Returns
    -------
    pooled : dict
        ``{(pooled benchmark, method): [run of each member]}``.
    read : dict
        ``{(member, method): run}`` of every member read.
    notes : list of str
        The methods with some members but not all, left out of a pooled benchmark.
    """
    pooled, read, notes = {}, {}, []
    for benchmark in (b for b in benchmarks if POOL_MARK in b):
        members = pool_members(benchmark)
        for method in sorted({m for (b, m) in parents if b in members and (not methods or m in methods)}):
            missing = [member for member in members if (member, method) not in parents]
            if missing:
                notes.append(f"{method} on {benchmark}: no finished sweep of {', '.join(missing)}; left out")
                continue
            pooled[(benchmark, method)] = [parents[(member, method)] for member in members]
            read.update({(member, method): parents[(member, method)] for member in members})
    return pooled, read, notes


def trial_frame(records) -> pd.DataFrame:
    """The finished trials of a sweep: ``point``, ``seed`` and one column per metric."""
    return pd.DataFrame([{"point": r.point, "seed": r.seed, **r.metrics} for r in records if r.status == "FINISHED"])


def machine_counts(records) -> dict[str, int]:
    """The finished trials per machine line (tracking.MACHINE_TAG; ``NOT_RECORDED`` for runs
    from before the tag), the most first: a fit's last bits can follow the machine."""
    counts = Counter(r.machine or NOT_RECORDED for r in records if r.status == "FINISHED")
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def selection_points(summaries: list[PointSummary]) -> tuple[dict[str, PointSummary], list[str]]:
    """The grid point of every selection of ``SELECTIONS``; a selection whose metric the runs
    lack (older sweeps) is left out, and named in the returned list."""
    points, missing = {}, []
    for selection in SELECTIONS:
        try:
            points[selection] = best_point(summaries, selection)
        except (KeyError, ValueError):
            missing.append(selection)
    return points, missing


def comparison_criterion(points: list[dict[str, PointSummary]]) -> str:
    """The selection a comparison chooses points and ranks by when none is given: ``BEST``
    when a sweep has a point by accuracy (``points``: each sweep's chosen points), else
    ``NO_LABELS_BEST`` (no sweep logged accuracy: data without labels)."""
    return BEST if any(BEST in chosen for chosen in points) else NO_LABELS_BEST


def pooled_records(runs: list, children: dict[str, list]) -> list[TrialRecord]:
    """The trials of one sweep, or of a pooled benchmark's member sweeps with each seed named
    ``<member's size>/<seed>`` (``n20/3``) so that seeds stay distinct and pair across methods
    (``children``: each parent run's child runs, tracking.find_children)."""
    if len(runs) == 1:
        return records_of(children[runs[0].info.run_id])
    return sorted((replace(record, seed=f"{benchmark_name(run).rsplit('-', 1)[1]}{SIZE_SEPARATOR}{record.seed}")
                   for run in runs for record in records_of(children[run.info.run_id])), key=trial_order)


def load_sweeps(client, experiment_id: str, parents: dict, criterion: str | None = BEST
                ) -> tuple[list[Sweep], list[str]]:
    """Read every chosen sweep's child runs (``parents``: pair -> its run, or a pooled
    benchmark's member runs; all sweeps' children read together); returns the sweeps with a
    point of ``criterion`` (None: ``comparison_criterion``, said in a note when it is not
    accuracy) and notes on what was left out."""
    children = tracking.find_children(client, experiment_id, [run.info.run_id for runs in parents.values() for run in runs])
    read = []
    for (benchmark, method), runs in parents.items():
        records = pooled_records(runs, children)
        tasks = sorted({key.split("/", 1)[1] for r in records for key in r.metrics  # no accuracy without labels
                        if key.startswith(("acc/", "silhouette/")) and key not in ("acc/mean", "silhouette/mean")})
        same_data = len(runs) == 1 and runs[0].data.tags.get("mtc.data_draws", "1") == "1"
        summaries = point_summaries(client, records, tasks, same_data)
        read.append((benchmark, method, runs, records, summaries, same_data, *selection_points(summaries)))
    sweeps, notes, drawn_per_seed = [], [], []
    if criterion is None:
        criterion = comparison_criterion([points for *_, points, _ in read])
        if criterion != BEST:
            notes.append(f"no sweep has accuracy (data without labels): points chosen and methods ranked by "
                         f"{criterion}, the {SELECTIONS[criterion]} (--criterion)")
    for benchmark, method, runs, records, summaries, same_data, points, missing in read:
        run, run_id = runs[0], " + ".join(r.info.run_id for r in runs)
        if criterion not in points:
            why = "no finished trial with accuracy" if criterion == BEST else \
                f"no {criterion} point ({why_no_point(summaries, criterion)})"
            notes.append(f"{method} on {benchmark} ({run_id}): {why}; left out")
            continue
        if not same_data:
            drawn_per_seed.append(f"{method} on {benchmark}")
            missing.remove("stability")
        notes += [f"{method} on {benchmark}: no {selection} point ({why_no_point(summaries, selection)})"
                  for selection in missing if selection != BEST]  # a kept sweep lacks accuracy only without labels
        left_out = {label: why for r in runs
                    for label, why in json.loads(r.data.tags.get(tracking.LEFT_OUT_TAG, "{}")).items()}
        sweeps.append(Sweep(benchmark, method, run_id, points, trial_frame(records),
                            run.data.tags.get("mtc.method", method), machine_counts(records),
                            sum(s.n_failed for s in summaries), left_out))
    if drawn_per_seed:
        notes.append(f"no stability point for {len(drawn_per_seed)} sweep(s) whose seeds each cluster their own draw "
                     f"of the data (the labels of different samples do not compare): {', '.join(drawn_per_seed)}")
    return sweeps, notes


def finished_sweeps(client, experiment_id: str, benchmarks: list[str] | None = None,
                    methods: list[str] | None = None, criterion: str | None = BEST) -> tuple[list[Sweep], list[str]]:
    """The newest finished sweep of every (benchmark, method) that ``benchmarks`` and ``methods``
    keep (all when not given; ``<data>@<n1>+<n2>`` pools sample sizes), read back with their
    chosen points, and notes on what was left out or did not finish. A sweep without a point
    of ``criterion`` is left out (None: ``comparison_criterion``, see ``load_sweeps``).

    Raises
    ------
    InputError
        No finished sweep (after the filters), or none with a finished trial.
    """
    every_parent = sweep_parents(client, experiment_id)
    parents, notes = newest_per_pair([run for run in every_parent if run.info.status == "FINISHED"])
    pooled, read, pool_notes = pool(parents, benchmarks or [], methods)
    single = select(parents, benchmarks, methods)
    chosen = {**{pair: [run] for pair, run in single.items()}, **pooled}
    asked = [member for benchmark in benchmarks for member in pool_members(benchmark)] if benchmarks else None
    wanted = [run for run in every_parent if select({(benchmark_name(run), sweep_label(run)): run}, asked, methods)]
    notes += pool_notes + unfinished_notes(wanted, {**single, **read})
    experiment = client.get_experiment(experiment_id).name
    if not chosen:
        which = " matching --benchmarks/--methods" if parents else ""
        raise InputError(f"no finished sweep{which} in experiment {experiment!r} of {client.tracking_uri}; run one "
                         "with python -m mtc.sweep")
    sweeps, skipped = load_sweeps(client, experiment_id, chosen, criterion)
    if not sweeps:
        raise InputError(f"no sweep of experiment {experiment!r} has a point to compare: {'; '.join(skipped)}")
    return sweeps, notes + skipped
