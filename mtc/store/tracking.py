"""MLflow tracking: one parent run per sweep, one child run per trial.

The driver creates the experiment and the parent run before any trial starts (concurrent
creation of a fresh SQLite store races, see STACK_NOTES.md); a Ray Tune trial writes the
child runs of its seeds once they are fitted, finished, in one transaction on a SQL store
(mtc.store.run_writer). A finished child run is never re-created, which is how an
interrupted sweep resumes without duplicating runs.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from mtc.errors import InputError
from mtc.store.run_writer import RunRecord

PARENT_TAG = "mlflow.parentRunId"
SWEEP_KEY_TAG = "mtc.sweep_key"
TRIAL_KEY_TAG = "mtc.trial_key"
POINT_TAG = "mtc.point"
DATASET_HASH_TAG = "mtc.dataset_hash"
MACHINE_TAG = "mtc.machine"  # on every child run: machine_description() of the worker that fitted it
ANSWER_TAG = "mtc.answer"  # on a parent run: its chosen points with their scores (answer_text)
# On a parent run: its answer's first score (answer_scores: the best point's mean accuracy with labels, else the
# highest mean silhouette) as a metric the sweeps view sorts by, and that score's metric ("acc/mean") as a tag.
SCORE, SCORE_TAG = "score", "mtc.score"
LEFT_OUT_TAG = "mtc.left_out_points"  # on a parent run: grid point label -> why its method cannot fit the data (JSON)
# MLflow 3's UI opens an experiment on its GenAI overview unless this tag says otherwise.
EXPERIMENT_KIND_TAG, EXPERIMENT_KIND = "mlflow.experimentKind", "custom_model_development"
# The objective per iteration as a metric: named "objective/..." so that MLflow's charts show
# it in one section with objective/final and objective/relative (the UI groups charts by the
# name before "/"; a bare "objective" lands in the last section, far down). Its chart has a
# log-scale switch; every step of every trace is in the trial's artifact.
OBJECTIVE_TRACE = "objective/trace"
CHART_POINTS = 100  # steps of the objective trace logged as metric rows, at most (chart_steps)
TRIAL_ARTIFACT = "trial.npz"  # one compressed file per trial: labels, every trace, matrices, config
DEFAULT_UI = "http://127.0.0.1:5000"  # mlflow ui's address when started without --host or --port
UI_ADDRESS_ENV = "MTC_MLFLOW_UI"  # the address of the user's mlflow ui, when not DEFAULT_UI (the links name it)
UI_WORKFLOW = "machine_learning"  # the UI's "Model training" mode (its default is "genai"), as a link parameter
# On a child run whose fit left a task with fewer distinct clusters than asked (its trial's metric
# DEGENERATE_TASKS > 0): "true", so that such runs are found by a filter (tags.`mtc.degenerate` = 'true').
DEGENERATE_TAG, DEGENERATE_TASKS = "mtc.degenerate", "degenerate_tasks"
# MLflow 3.17's runs page restores a view (its filter, sort and shown columns) from the experiment
# tag VIEW_TAG_PREFIX + <key> when its URL has ``viewStateShareKey=<key>`` and none of the search
# parameters (its useSharedExperimentViewState); a sweep's trials view is keyed by its parent run's id,
# the experiment's sweeps view by SWEEPS_VIEW.
VIEW_TAG_PREFIX = "mlflow.sharedViewState."
SWEEPS_VIEW = "sweeps"  # the key of the experiment's view of its sweeps (sweeps_view), which the runs link opens
# The sweeps view's columns with their widths in pixels (the UI's default cuts a score after 10 characters, a
# tag after 8): the score and its metric, what the sweep ran (tags of mtc.sweep.planning; the scale applied to a
# user's files, as the resolved config names it) and its answer.
SWEEP_COLUMNS = {f"metrics.`{SCORE}`": 160, f"tags.`{SCORE_TAG}`": 130, "tags.`mtc.method`": 110,
                 "tags.`mtc.data`": 150, "params.`data.params.scale`": 130, f"tags.`{ANSWER_TAG}`": 600}
SUMMARY_TABLE = "summary.json"  # the parent run's chosen points as a table (MLflow's logged-table JSON)
LOGGED_ARTIFACTS_TAG = "mlflow.loggedArtifacts"  # MLflow's list of a run's table artifacts, as log_table keeps it


def client_for(tracking_uri: str):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri)


def open_store(uri: str, experiment: str, artifact_root: str | None):
    """A client of the store at ``uri`` and the experiment's id. The first touch of a new
    SQLite store runs MLflow's schema migrations, which race between processes
    (``alembic ... Online migration expected to match one row``): it is serialised by a
    file lock beside the store, and a new store is a copy of an empty one
    (mtc.store.empty_store), not migrated again. A local store that was moved is pointed at
    ``artifact_root`` (mtc.store.relocate.relocate_if_moved) before anything is logged."""
    from filelock import FileLock

    from mtc.store.empty_store import new_store_from_empty
    from mtc.store.relocate import relocate_if_moved

    if not uri.startswith("sqlite:///"):
        client = client_for(uri)
        return client, ensure_experiment(client, experiment, artifact_root)
    db = Path(uri[len("sqlite:///"):])
    with FileLock(f"{db}.create.lock", timeout=120):
        if db.name != ":memory:" and not db.exists() and db.parent.is_dir():
            new_store_from_empty(db)
        client = client_for(uri)  # MLflow opens the store here (and makes it, if it is not there)
        if artifact_root and "://" not in artifact_root:  # a moved local store: point it at its artifacts
            for line in relocate_if_moved(uri, Path(artifact_root)):
                print(f"the store was moved; {line}")
        return client, ensure_experiment(client, experiment, artifact_root)


def experiment_tags() -> dict[str, str]:
    """The experiment tags the UI reads: EXPERIMENT_KIND_TAG and the sweeps view (sweeps_view)
    that the printed runs link opens (links)."""
    return {EXPERIMENT_KIND_TAG: EXPERIMENT_KIND, f"{VIEW_TAG_PREFIX}{SWEEPS_VIEW}": sweeps_view()}


def ensure_experiment(client, name: str, artifact_root: str | None) -> str:
    """The experiment's id, creating it (with an absolute local artifact root) if needed; two
    drivers creating it at once both get the one that was created. Its experiment_tags are set
    where they are missing or differ (a store of an earlier mtc)."""
    from mlflow.exceptions import MlflowException

    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        for key, value in experiment_tags().items():
            if experiment.tags.get(key) != value:
                with contextlib.suppress(MlflowException):  # another driver set it at the same moment
                    client.set_experiment_tag(experiment.experiment_id, key, value)
        return experiment.experiment_id

    location = None
    if artifact_root:
        location = Path(artifact_root).resolve().as_uri() if "://" not in artifact_root else artifact_root
    try:
        return client.create_experiment(name, artifact_location=location, tags=experiment_tags())
    except MlflowException as error:  # another driver created it since we looked
        if error.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
        return client.get_experiment_by_name(name).experiment_id


def provenance_tags(entry_point: str) -> dict[str, str]:
    """The code that ran: the git commit of the working tree (with ``-dirty`` when it has
    uncommitted changes) as MLflow's own source tags, which its UI shows."""
    import subprocess
    from importlib.metadata import version

    import mtc

    root = Path(mtc.__file__).resolve().parents[1]
    tags = {"mlflow.source.name": entry_point, "mlflow.source.type": "LOCAL", "mtc.version": version("mtc")}
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True,
                               text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return tags
    if commit.returncode == 0:
        tags["mlflow.source.git.commit"] = commit.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    return tags


@functools.cache
def machine_description() -> str:
    """What a fit's last bits depend on beyond its code, data and seed, as one line for a run's
    MACHINE_TAG: the CPU model, each BLAS library loaded with the kernels it chose for that CPU
    (threadpoolctl's ``architecture``), and numpy's, scipy's and scikit-learn's versions. Two
    runs whose lines differ may round the same fit differently: an eigendecomposition's last
    bits, and so the k-means starts taken in its coordinates (docs/results/lab_notes.md).
    Computed once per process."""
    import scipy
    import scipy.linalg  # noqa: F401 (loads scipy's own BLAS, so that every process lists the same libraries)
    import sklearn
    from threadpoolctl import threadpool_info

    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    blas = sorted({" ".join(str(info.get(key) or "") for key in ("internal_api", "version", "architecture")).strip()
                   for info in threadpool_info() if info["user_api"] == "blas"})
    return (f"{cpu}; BLAS {', '.join(blas) or 'none found'}; numpy {np.__version__}, scipy {scipy.__version__}, "
            f"scikit-learn {sklearn.__version__}")


def log_dataset_input(client, run_id: str, name: str, datasets: dict, data_config: dict) -> None:
    """The sweep's data as an MLflow dataset input: name, content hash, the data config as
    its source and the samples and features per task as its profile."""
    from mlflow.entities import Dataset, DatasetInput

    first = datasets[min(datasets)]
    profile = {"draws": len({id(d) for d in datasets.values()}),
               "tasks": {task.name: {"samples": task.n_samples, "features": int(X.shape[1]),
                                     "classes": len(task.class_names)}
                         for task, X in zip(first.tasks, first.matrices)}}
    from mlflow.exceptions import MlflowException

    digest = draws_tags(datasets)[DATASET_HASH_TAG]
    inputs = [DatasetInput(Dataset(name, digest[:36], "mtc", json.dumps(data_config, default=str),
                                   profile=json.dumps(profile)))]
    try:
        client.log_inputs(run_id, datasets=inputs)
    except MlflowException:  # two sweeps inserted the same dataset at once (unique key): it exists now
        client.log_inputs(run_id, datasets=inputs)


def dataset_tags(dataset) -> dict[str, str]:
    """The dataset's content hash and, for cached corpora, its cache key."""
    return hashes_tags([(dataset.content_hash(), dataset.meta.get("cache_key"))])


def draws_tags(datasets: dict) -> dict[str, str]:
    """Tags of a sweep's data: one dataset's tags, or for a draw per seed a hash over every
    draw's content hash (in seed order) and the number of draws."""
    distinct = list({id(d): d for d in datasets.values()}.values())
    draws = distinct if len(distinct) == 1 else [datasets[s] for s in sorted(datasets)]
    return hashes_tags([(d.content_hash(), d.meta.get("cache_key")) for d in draws])


def hashes_tags(hashes: list[tuple[str, str | None]]) -> dict[str, str]:
    """draws_tags from each draw's (content hash, cache key or None), in seed order."""
    if len(hashes) == 1:
        content_hash, cache_key = hashes[0]
        return {DATASET_HASH_TAG: content_hash, **({"mtc.data_cache_key": cache_key} if cache_key else {})}
    digest = hashlib.sha256("\n".join(content_hash for content_hash, _ in hashes).encode())
    return {DATASET_HASH_TAG: digest.hexdigest(), "mtc.data_draws": str(len(hashes))}


def flatten(mapping: dict, prefix: str = "") -> dict[str, str]:
    """Nested dict -> {"a.b.c": "value"} with values as MLflow param strings."""
    flat = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = json.dumps(value) if isinstance(value, (list, dict)) else str(value)
    return flat


def search_all(client, experiment_id: str, filter_string: str = "") -> list:
    """Every active run of the experiment that matches ``filter_string``, page by page (all of
    them, unfiltered, read in a few SQL queries on a SQL store: mtc.store.run_reader)."""
    from mtc.store import run_reader

    store = None if filter_string else run_reader.sql_store(client)
    if store is not None:
        return run_reader.read_runs(store, experiment_id)
    runs, token = [], None
    while True:
        page = client.search_runs([experiment_id], filter_string=filter_string, max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def find_runs(client, experiment_id: str, **tags) -> list:
    """Active runs of the experiment whose tags equal the given values (read in a few SQL
    queries on a SQL store: mtc.store.run_reader)."""
    from mtc.store import run_reader

    store = run_reader.sql_store(client)
    if store is not None:
        return run_reader.read_runs(store, experiment_id, tags)
    return search_all(client, experiment_id, " and ".join(f"tags.`{key}` = '{value}'" for key, value in tags.items()))


def find_children(client, experiment_id: str, parent_ids: list[str]) -> dict[str, list]:
    """Each parent's active child runs, as ``find_runs`` finds them by its PARENT_TAG (on a SQL
    store in a few queries for all parents together: mtc.store.run_reader.read_children)."""
    from mtc.store import run_reader

    store = run_reader.sql_store(client)
    if store is not None:
        return run_reader.read_children(store, experiment_id, PARENT_TAG, parent_ids)
    return {parent: find_runs(client, experiment_id, **{PARENT_TAG: parent}) for parent in dict.fromkeys(parent_ids)}


def runs_with_tag(client, experiment_id: str, key: str) -> list:
    """Active runs of the experiment that have the tag ``key``, whatever its value."""
    from mtc.store import run_reader

    store = run_reader.sql_store(client)
    if store is not None:
        return run_reader.read_runs(store, experiment_id, has_tag=key)
    return search_all(client, experiment_id, f"tags.`{key}` LIKE '%'")


def open_parent_run(client, experiment_id: str, sweep_key: str, run_name: str, params: dict,
                    tags: dict, resume: bool) -> str:
    """The parent run of this sweep: the existing one when resuming, else a new one."""
    if resume:
        existing = find_runs(client, experiment_id, **{SWEEP_KEY_TAG: sweep_key})
        if existing:
            run_id = existing[0].info.run_id
            client.update_run(run_id, status="RUNNING")
            return run_id
    run = client.create_run(experiment_id, run_name=run_name, tags={SWEEP_KEY_TAG: sweep_key, **tags})
    log_params(client, run.info.run_id, params)
    return run.info.run_id


def prepare_child_runs(client, experiment_id: str, parent_id: str, trials: list) -> tuple[list, list]:
    """Return ([trials still to run], [finished child runs]) of a new or resumed sweep.

    Finished children are kept; unfinished ones (a crash or an interrupt left them
    RUNNING/FAILED/KILLED) are deleted. No run is created here: a trial's run is created once
    its fit is done (trial_record, run_writer.write_runs), with the fit's start as the run's start time."""
    children = find_runs(client, experiment_id, **{PARENT_TAG: parent_id})
    finished = [run for run in children if run.info.status == "FINISHED"]
    for run in children:
        if run.info.status != "FINISHED":
            client.delete_run(run.info.run_id)
    done = {run.data.tags.get(TRIAL_KEY_TAG) for run in finished}
    return [trial for trial in trials if trial.key not in done], finished


def earlier_runs(client, experiment_id: str, parent_id: str, point_label: str) -> dict[str, list]:
    """The child runs an earlier attempt of a Ray Tune trial left for one grid point, by trial
    key (one search per seed batch, not per seed). A retried Tune trial (its worker died) keeps
    their FINISHED runs and replaces the others (skip_or_clear)."""
    runs: dict[str, list] = {}
    for run in find_runs(client, experiment_id, **{PARENT_TAG: parent_id, POINT_TAG: point_label}):
        runs.setdefault(run.data.tags.get(TRIAL_KEY_TAG), []).append(run)
    return runs


def skip_or_clear(client, earlier: list) -> dict | None:
    """A trial's runs from an earlier attempt: the metrics of a FINISHED one (the trial is
    done), else None after deleting the others (a fit that died half-logged), so that the
    trial still ends with exactly one run and no metric is logged twice."""
    for run in earlier:
        if run.info.status == "FINISHED":
            return run.data.metrics
    for run in earlier:
        client.delete_run(run.info.run_id)
    return None


def trial_tags(parent_id: str, trial, tags: dict) -> dict[str, str]:
    """A trial's child run tags: its parent, trial key and grid point, then ``tags``."""
    return {PARENT_TAG: parent_id, TRIAL_KEY_TAG: trial.key, POINT_TAG: trial.label, **tags}


def close_unfinished(client, runs: list, status: str, reason: str) -> list[str]:
    """End every run of ``runs`` (a sweep's child runs, as found) still RUNNING with ``status``
    and ``reason`` (tag mtc.error); returns their ids. An interrupted driver, or a trial whose
    worker died more often than Ray Tune retries (on a tracking server, with its run open),
    leaves them open otherwise."""
    open_runs = [run.info.run_id for run in runs if run.info.status == "RUNNING"]
    for run_id in open_runs:
        client.set_tag(run_id, "mtc.error", reason)
        client.set_terminated(run_id, status)
    return open_runs


def log_params(client, run_id: str, params: dict) -> None:
    from mlflow.entities import Param

    client.log_batch(run_id, params=[Param(k, v[:6000]) for k, v in flatten(params).items()])


def chart_steps(n_steps: int, points: int = CHART_POINTS) -> np.ndarray:
    """The steps of a trace that MLflow gets as a metric: all of them up to ``points``, else
    about ``points`` log-spaced steps, the first and the last kept (the early steps, where the
    objective moves most, stay dense)."""
    if n_steps <= points:
        return np.arange(n_steps)
    return np.unique(np.concatenate([[0], np.rint(np.geomspace(1, n_steps - 1, points - 1)).astype(int)]))


def trial_arrays(outcome, trial_config: dict, task_names: list[str]) -> dict[str, np.ndarray]:
    """Everything a trial learned, as the arrays of its one artifact TRIAL_ARTIFACT:
    ``labels/<task>`` with ``clusters/<task>`` (the name of each cluster id, as the matrices
    name them), ``trace/objective`` and ``trace/<name>`` (every step), ``matrix/<stem>`` with
    ``rows/<stem>`` and ``cols/<stem>`` (the names of its rows and columns) and ``config`` (the
    trial's config as JSON)."""
    arrays = {f"labels/{task}": labels for task, labels in zip(task_names, outcome.labels)}
    arrays.update({f"clusters/{task}": np.array(names) for task, names in zip(task_names, outcome.cluster_names)})
    arrays["trace/objective"] = np.asarray(outcome.objective_trace, float)
    arrays.update({f"trace/{name}": np.asarray(values, float) for name, values in outcome.traces.items()})
    for name, matrix in outcome.matrices.items():
        for (i, j), block in matrix.blocks.items():
            stem = block_stem(name, matrix.row_groups[i], matrix.col_groups[j])
            arrays[f"matrix/{stem}"] = block
            arrays[f"rows/{stem}"], arrays[f"cols/{stem}"] = np.array(matrix.row_names[i]), np.array(matrix.col_names[j])
    arrays["config"] = np.array(json.dumps(trial_config, default=str))
    return arrays


def run_params(trial_config: dict, n_samples: dict[str, int]) -> dict:
    """A child run's params: the solver's parameters, seed and method, the data config's name
    only (its whole config is on the parent run and in the trial's artifact) and the samples
    per task as ``n_samples.<task>`` (facts about the input, not scores: as metrics they gave
    every run's charts a section of sample-count bars), and the scale applied to the user's
    files (``data.params.scale``, by name: never ``auto``)."""
    data = trial_config.get("data")
    named = {}
    if isinstance(data, dict):
        named["data.name"] = data.get("name")
        if (data.get("params") or {}).get("scale") is not None:
            named["data.params.scale"] = data["params"]["scale"]
    return {**{k: v for k, v in trial_config.items() if k != "data"}, **named, "n_samples": n_samples}


def trial_metrics(outcome) -> tuple[tuple[str, float, int], ...]:
    """A trial's metrics as (key, value, step): its scores and fit scalars at step 0 and the
    objective trace at CHART_POINTS log-spaced steps at most."""
    trace = np.asarray(outcome.objective_trace, float)
    return (*((key, float(value), 0) for key, value in outcome.metrics.items()),
            *((OBJECTIVE_TRACE, float(trace[step]), int(step)) for step in chart_steps(trace.size)))


def trial_param_values(outcome, trial_config: dict) -> dict[str, str]:
    """A trial's params as MLflow strings (run_params, flattened, 6000 characters at most)."""
    return {key: value[:6000] for key, value in flatten(run_params(trial_config, outcome.n_samples)).items()}


def write_trial_files(folder: Path, outcome, trial_config: dict, task_names: list[str],
                      extra_files: Callable[[Path], None] | None = None) -> None:
    """A trial's artifacts into ``folder``: TRIAL_ARTIFACT (trial_arrays, compressed) and what
    ``extra_files(folder)`` writes (mtc.results.plots.readable_files: the files a person opens
    one by one, for a single run or ``mlflow.readable_trial_files=true``)."""
    np.savez_compressed(folder / TRIAL_ARTIFACT, **trial_arrays(outcome, trial_config, task_names))
    if extra_files is not None:
        extra_files(folder)


def degenerate_tags(metrics: dict[str, float]) -> dict[str, str]:
    """DEGENERATE_TAG for a trial whose metrics count degenerate tasks (DEGENERATE_TASKS > 0),
    else no tag."""
    return {DEGENERATE_TAG: "true"} if metrics.get(DEGENERATE_TASKS, 0) > 0 else {}


def trial_record(parent_id: str, trial, tags: dict, start_ms: int, outcome, trial_config: dict,
                 task_names: list[str], extra_files: Callable[[Path], None] | None = None) -> RunRecord:
    """A fitted trial's FINISHED child run, ready for mtc.store.run_writer.write_runs (tagged
    DEGENERATE_TAG when a task of its fit is degenerate)."""
    return RunRecord(trial.name, {**trial_tags(parent_id, trial, tags), **degenerate_tags(outcome.metrics)},
                     trial_param_values(outcome, trial_config),
                     trial_metrics(outcome), "FINISHED", start_ms, int(time.time() * 1000),
                     lambda folder: write_trial_files(folder, outcome, trial_config, task_names, extra_files))


def failed_record(parent_id: str, trial, tags: dict, start_ms: int, error: BaseException) -> RunRecord:
    """The FAILED child run of a trial whose fit raised: the error in tag mtc.error, its
    traceback as error.txt."""
    text = "".join(traceback.format_exception(error))
    return RunRecord(trial.name, {**trial_tags(parent_id, trial, tags), "mtc.error": f"{type(error).__name__}: {error}"[:5000]},
                     {}, (), "FAILED", start_ms, int(time.time() * 1000),
                     lambda folder: (folder / "error.txt").write_text(text))


def log_trial(client, run_id: str, artifact_uri: str, outcome, trial_config: dict, task_names: list[str],
              extra_files: Callable[[Path], None] | None = None) -> None:
    """Log one trial into an open run (mtc.run's): params, metrics (trial_metrics) and
    DEGENERATE_TAG (degenerate_tags) in one ``log_batch``, then its files (write_trial_files).
    A sweep's trials go through trial_record and run_writer.write_runs instead, a batch at a time."""
    import mlflow.entities as entities

    now = int(time.time() * 1000)
    client.log_batch(run_id, metrics=[entities.Metric(k, v, now, step) for k, v, step in trial_metrics(outcome)],
                     params=[entities.Param(k, v) for k, v in trial_param_values(outcome, trial_config).items()],
                     tags=[entities.RunTag(k, v) for k, v in degenerate_tags(outcome.metrics).items()])
    with tempfile.TemporaryDirectory() as tmp:
        write_trial_files(Path(tmp), outcome, trial_config, task_names, extra_files)
        artifact_repository(client, artifact_uri).log_artifacts(tmp)


def artifact_repository(client, artifact_uri: str):
    """The run's artifact store, addressed by the URI its creation returned (MlflowClient's
    log_artifact would look the run up again first); a server's ``mlflow-artifacts:/`` URI is
    resolved against the client's tracking URI, not the process default."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    return get_artifact_repository(artifact_uri, tracking_uri=client.tracking_uri)


def load_trial_arrays(client, run_id: str, artifact_uri: str, keys: list[str] | None = None
                      ) -> dict[str, np.ndarray] | None:
    """A finished trial's TRIAL_ARTIFACT as a dict of arrays (only ``keys`` when given: each
    array is decompressed when read, a trace alone in a seventh of the whole file's time), read
    in place from a local artifact store, else downloaded; None for a run logged before it
    existed (its labels are then in labels.npz, its traces in metrics)."""
    with artifact_path(client, run_id, artifact_uri, TRIAL_ARTIFACT) as path:
        if path is None:
            return None
        with np.load(path) as stored:
            return {key: stored[key] for key in (stored.files if keys is None else keys)}


@contextlib.contextmanager
def artifact_path(client, run_id: str, artifact_uri: str, name: str):
    """Within, where artifact ``name`` of a run can be read: in place in a local store, else
    downloaded into a temporary folder that is removed after (made only then: a compare reads
    tens of thousands of local trials, and a folder made and removed per trial cost more than
    reading its labels); None when the run has no such artifact."""
    from urllib.parse import unquote, urlparse

    from mlflow.exceptions import MlflowException

    if artifact_uri.startswith("file://"):
        folder = Path(unquote(urlparse(artifact_uri).path))
        if not folder.is_dir():
            raise InputError(f"run {run_id}: its artifact folder {folder} is gone; if the store was moved, "
                             "run python -m mtc.store.relocate beside it (README: moving a local store)")
        yield folder / name if (folder / name).is_file() else None
        return
    with tempfile.TemporaryDirectory() as tmp:
        try:
            path = Path(client.download_artifacts(run_id, name, tmp))
        except (MlflowException, OSError):
            path = None
        yield path


def load_labels(client, run_id: str, artifact_uri: str, task_names: list[str]) -> list[np.ndarray]:
    """A finished trial's predicted labels per task (from its TRIAL_ARTIFACT, or the labels.npz
    of a run logged before it)."""
    keys = [f"labels/{name}" for name in task_names]
    arrays = load_trial_arrays(client, run_id, artifact_uri, keys)
    if arrays is not None:
        return [arrays[key] for key in keys]
    with artifact_path(client, run_id, artifact_uri, "labels.npz") as path:
        if path is None:
            raise InputError(f"run {run_id} has neither {TRIAL_ARTIFACT} nor labels.npz")
        with np.load(path) as stored:
            return [stored[name] for name in task_names]


def load_objective_trace(client, run_id: str, artifact_uri: str) -> np.ndarray:
    """A trial's objective at every step: from its TRIAL_ARTIFACT, else (a run logged before
    it) from the metric history."""
    arrays = load_trial_arrays(client, run_id, artifact_uri, ["trace/objective"])
    if arrays is not None:
        return arrays["trace/objective"]
    history = sorted(client.get_metric_history(run_id, OBJECTIVE_TRACE), key=lambda m: m.step)
    return np.array([m.value for m in history])


def block_stem(name: str, row_group: str, col_group: str) -> str:
    """File stem of one block: the matrix name, then its task(s) ("G_task1__task2")."""
    groups = "__".join(group for group in (row_group, col_group) if group)
    return f"{name}_{groups}" if groups else name


def summary_table(best: dict, failed: int) -> dict:
    """The chosen points as a table in MLflow's logged-table JSON (pandas' ``split`` orient, as
    ``MlflowClient.log_table`` writes it): a column per selection ("best by acc", ...), a row
    for the point, its finished runs, the sweep's failed trials and each mean metric
    ("mean +- std" over seeds, 4 significant digits)."""
    keys = sorted({key for summary in best.values() for key in summary.mean
                   if key.endswith("/mean") or key in ("objective/final", "n_iter", "fit_seconds", DEGENERATE_TASKS)})
    rows = [["point", *(summary.point for summary in best.values())],
            ["finished runs", *(str(summary.n_runs) for summary in best.values())],
            ["failed trials (sweep)", *(str(failed) for _ in best)]]
    rows += [[key, *(f"{summary.mean[key]:.4g} ± {summary.std.get(key, 0.0):.2g}" if key in summary.mean else ""
                     for summary in best.values())] for key in keys]
    return {"columns": ["metric", *(f"best by {selection}" for selection in best)], "data": rows}


def log_sweep_summary(client, parent_id: str, best: dict, failed: int, report: str, grid: dict,
                      left_out: dict | None = None) -> None:
    """Best-point means as parent metrics ("best_by_<selection>/<metric>/mean", read by
    mtc.results), points as tags, the report as the run's description (the MLflow UI shows it on
    the run's page), the swept values as params ``swept.<key>`` and the chosen points as the
    table SUMMARY_TABLE (summary_table), which the UI shows as a table among the run's
    artifacts (the metrics' charts have one point each); the failed trials and the grid points
    left out before Ray (``left_out``: label -> why, also as the tag LEFT_OUT_TAG) as metrics;
    the answer's first score as the metric SCORE, which the experiment's sweeps view shows
    (sweeps_view), named by the tag SCORE_TAG."""
    from mlflow.entities import Metric, Param, RunTag

    now = int(time.time() * 1000)
    left_out = left_out or {}
    metrics = [Metric("failed_trials", float(failed), now, 0), Metric("left_out_points", float(len(left_out)), now, 0)]
    tags = [RunTag(LEFT_OUT_TAG, json.dumps(left_out)[:5000])] if left_out else []
    for selection, summary in best.items():
        metrics += [Metric(f"best_by_{selection}/{key}", value, now, 0)
                    for key, value in summary.mean.items() if key.endswith("/mean")]
        tags.append(RunTag(f"mtc.best_by_{selection}", summary.point))
    tags.append(RunTag(ANSWER_TAG, answer_text(best)))
    for metric, value, _ in answer_scores(best)[:1]:
        metrics.append(Metric(SCORE, value, now, 0))
        tags.append(RunTag(SCORE_TAG, metric))
    tags.append(RunTag("mlflow.note.content", report))
    parent = client.get_run(parent_id)
    tables = json.loads(parent.data.tags.get(LOGGED_ARTIFACTS_TAG, "[]"))
    if {"path": SUMMARY_TABLE, "type": "table"} not in tables:
        tags.append(RunTag(LOGGED_ARTIFACTS_TAG, json.dumps([*tables, {"path": SUMMARY_TABLE, "type": "table"}])))
    with tempfile.TemporaryDirectory() as tmp:  # written whole (log_table would append to a resumed sweep's)
        path = Path(tmp) / SUMMARY_TABLE
        path.write_text(json.dumps(summary_table(best, failed)))
        client.log_artifact(parent_id, str(path))
    params = [Param(f"swept.{key}", json.dumps(values)[:6000]) for key, values in sorted(grid.items())]
    existing = parent.data.params  # a resumed sweep logged them already
    client.log_batch(parent_id, metrics=metrics, tags=tags, params=[p for p in params if p.key not in existing])


def answer_scores(best: dict) -> list[tuple[str, float, str]]:
    """(metric, mean, point) of the best point by accuracy (labels) and of the point of the
    highest silhouette (without labels), those chosen, in this order."""
    return [(metric, best[selection].mean[metric], best[selection].point) for selection in ("acc", "silhouette")
            if selection in best for metric in [f"{selection}/mean"] if metric in best[selection].mean]


def answer_text(best: dict) -> str:
    """The parent's ANSWER_TAG: answer_scores, each score before its point, which the
    overview's tags show first (MLflow's UI cuts a tag's value after about 30 characters)."""
    return "; ".join(f"{metric} {value:.4f} at {point}" for metric, value, point in answer_scores(best)) \
        or "no point chosen"


def view_state(search_filter: str, sort_key: str, columns: list[str], widths: dict[str, int] | None = None) -> str:
    """A runs page view as an experiment tag VIEW_TAG_PREFIX + <key> holds it (JSON): the runs
    that ``search_filter`` matches (``searchFilter``), highest ``sort_key`` first
    (``orderByKey``, ``orderByAsc``), and the columns the table shows (``selectedColumns``, the
    UI's column keys ``metrics.`<name>```, ``params.`<name>``` or ``tags.`<name>```) in place
    of its default ones, which leave every metric behind "Show more columns", in this order
    after Run Name, Created and Duration (``columnOrder``; the UI otherwise sorts a group's
    columns by name), ``widths`` (pixels by column key) as ``columnWidths`` when given."""
    return json.dumps({"searchFilter": search_filter, "orderByKey": sort_key, "orderByAsc": False,
                       "selectedColumns": columns, "columnOrder": ["duration", *columns],
                       **({"columnWidths": widths} if widths else {})})


def trials_view(parent_id: str, sort_metric: str, columns: list[str]) -> str:
    """The runs page's view of a sweep's trials (view_state), under the parent's id: the
    children alone (on PARENT_TAG), best ``sort_metric`` first, with ``columns``."""
    return view_state(f"tags.`{PARENT_TAG}` = '{parent_id}'", f"metrics.`{sort_metric}`", columns)


def sweeps_view() -> str:
    """The runs page's view of the experiment's sweeps (view_state), under SWEEPS_VIEW: the
    parent runs alone, a row per sweep (only they carry SWEEP_KEY_TAG; a compare's or a
    leaderboard's run has none), best SCORE first, with SWEEP_COLUMNS shown."""
    return view_state(f"tags.`{SWEEP_KEY_TAG}` LIKE '%'", f"metrics.`{SCORE}`", list(SWEEP_COLUMNS), SWEEP_COLUMNS)


def log_trials_view(client, experiment_id: str, parent_id: str, sort_metric: str, params: list[str],
                    metrics: list[str]) -> None:
    """Store the sweep's trials view (trials_view) that the printed trials link opens
    (trials_link): ``sort_metric`` then ``metrics`` and the child runs' ``params`` as columns."""
    columns = [f"metrics.`{sort_metric}`", *(f"metrics.`{key}`" for key in metrics if key != sort_metric),
               *(f"params.`{key}`" for key in params)]
    client.set_experiment_tag(experiment_id, f"{VIEW_TAG_PREFIX}{parent_id}", trials_view(parent_id, sort_metric,
                                                                                       columns))


def ui_base(tracking_uri: str) -> tuple[str, str]:
    """The UI's address for a store, and how to open it: a tracking server's own address, or for
    a local store the ``mlflow ui`` at UI_ADDRESS_ENV's address (its default 127.0.0.1:5000)
    with the command that starts it there."""
    if tracking_uri.startswith(("http://", "https://")):
        return tracking_uri.rstrip("/"), ""
    base = os.environ.get(UI_ADDRESS_ENV, "").rstrip("/") or DEFAULT_UI
    port = urlsplit(base).port
    return base, f" after: mlflow ui --backend-store-uri {tracking_uri}" + (f" --port {port}" if port not in (None, 5000)
                                                                             else "")


def view_link(tracking_uri: str, experiment_id: str, key: str) -> str:
    """The runs page opened on the experiment's stored view ``key`` (view_state):
    ``viewStateShareKey`` alone, since the page ignores the stored view when the URL has a
    search parameter."""
    base, _ = ui_base(tracking_uri)
    return f"{base}/#/experiments/{experiment_id}/runs?viewStateShareKey={key}&workflowType={UI_WORKFLOW}"


def trials_link(tracking_uri: str, experiment_id: str, parent_id: str) -> str:
    """The runs page opened on the sweep's trials view (log_trials_view)."""
    return view_link(tracking_uri, experiment_id, parent_id)


def links(tracking_uri: str, experiment_id: str, parent_id: str, sort_metric: str) -> str:
    """Where a person looks at a sweep, in the tracking server or in ``mlflow ui`` on a local
    store: the runs table on the experiment's sweeps, a row each, best SCORE first (the
    sweeps view, which ensure_experiment stores), the parent run, and the sweep's child runs alone, best
    ``sort_metric`` first, with that metric among the columns shown (trials_link: the view
    the driver stored when the sweep finished). The child runs show flat, with the full width
    of the Run Name column: the UI nests them under their parent only when neither a filter
    nor a sort other than by date is set (its ``shouldNestChildrenAndFetchParents``)."""
    base, how = ui_base(tracking_uri)
    view = f"?workflowType={UI_WORKFLOW}"  # MLflow 3.17's UI otherwise opens in its GenAI mode
    runs = f"{base}/#/experiments/{experiment_id}/runs"
    trials = trials_link(tracking_uri, experiment_id, parent_id)
    return (f"MLflow runs, a row per sweep, best {SCORE} first: {view_link(tracking_uri, experiment_id, SWEEPS_VIEW)}"
            f"{how}\n"
            f"MLflow parent run: {runs}/{parent_id}{view}\n"
            f"MLflow trials of this sweep, best {sort_metric} first: {trials}")
