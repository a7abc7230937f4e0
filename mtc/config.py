"""From a composed Hydra config to validated, absolute, typed sweep settings.

Everything the driver needs is read and checked here, once, before any dataset is loaded,
MLflow run created or Ray started: the method (its class from the config's ``_target_``,
its non-default parameters and its grid, every grid point checked against the solver's
declared constraints), the data config, and the sweep, Ray and MLflow settings. A bad
value is an InputError (the command line prints one line and exits 2).
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import itertools
import json
import math
import os
import re
import sys
import typing
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from mtc import CONF_DIR
from mtc.cli import as_typed, nearest_key
from mtc.data.sources import resolved as resolved_path
from mtc.data.spec import DataSpec, data_spec, with_scale
from mtc.data.text import not_a_regular_file
from mtc.errors import InputError

if typing.TYPE_CHECKING:
    from mtc.methods.base import MultiTaskClusterer

# Set by the platform from the dataset, the trial's seed and the worker, never by a method config.
RESERVED_PARAMS = ("n_clusters", "random_state", "cache")


def reserved_params(solver) -> tuple[str, ...]:
    """The parameters of a solver (class or instance) that the platform sets, never a config:
    RESERVED_PARAMS and those the solver takes from its sweep's grid (its ``grid_siblings``,
    filled by mtc.trial.trial_solver)."""
    return (*RESERVED_PARAMS, *getattr(solver, "grid_siblings", {}))
# Trials (grid points x repeats) of one sweep. Each is an MLflow child run: about 35 KB in the
# store and 25 ms of tracking (docs/results/README.md, tracking_cost.py), so the limit is some
# 3.5 GB and 40 minutes of tracking alone; the driver also holds every trial in memory.
MAX_TRIALS = 100_000
# Ray's own floor for ray.object_store_memory (ray_constants.OBJECT_STORE_MINIMUM_MEMORY_BYTES);
# ray.init raises a ValueError below it.
MIN_OBJECT_STORE_MEMORY = 75 * 1024 * 1024
SECTIONS = ("sweep", "ray", "mlflow")  # the config.yaml blocks whose keys are all known
# The largest seed: NumPy's generators (and scikit-learn's random_state) take 0 .. 2**32 - 1.
MAX_SEED = 2**32 - 1
NAME = r"\w[\w.+=-]*"  # one folder name: sweep.name, and data.name, which names the default sweep and the cache file


def plain(node) -> dict:
    """A config node as a plain dict ({} for a missing node)."""
    return OmegaConf.to_container(node, resolve=True) if node is not None else {}


def config_choice(group: str) -> str:
    """The option chosen for a config group (``method=mtcmrl`` -> "mtcmrl")."""
    if not HydraConfig.initialized():
        raise RuntimeError("no Hydra config is set: compose with mtc.cli.compose_config or run under hydra.main")
    return HydraConfig.get().runtime.choices[group]


def point_label(point: dict) -> str:
    return ",".join(f"{k}={point[k]}" for k in sorted(point)) or "defaults"


@dataclass(frozen=True)
class MethodSpec:
    """A method as configured: its solver class (``_target_``, imported when first asked for),
    non-default parameters and sweep grid."""

    name: str
    target: str
    params: dict
    grid: dict[str, list]

    @property
    def solver(self) -> type[MultiTaskClusterer]:
        """The solver class ``target`` names (an InputError when it does not import or is not a
        MultiTaskClusterer)."""
        return solver_class(self.name, self.target)

    @property
    def n_points(self) -> int:
        """How many grid points the grid has, without listing them."""
        return math.prod(len(values) for values in self.grid.values())

    def grid_points(self) -> list[dict]:
        """Every combination of the grid values."""
        keys = sorted(self.grid)
        return [dict(zip(keys, values)) for values in itertools.product(*(self.grid[k] for k in keys))]

    def prototype(self, **platform_params) -> MultiTaskClusterer:
        """The solver with the configured parameters (and e.g. n_clusters from the dataset)."""
        return self.solver(**self.params, **platform_params)

    def check(self) -> None:
        """Check the configured parameters and every grid point against the solver's constraints."""
        allowed = set(self.solver._get_param_names()) - set(reserved_params(self.solver))
        for what, keys in (("parameter", self.params), ("grid key", self.grid)):
            unknown = sorted(set(keys) - allowed)
            if unknown:
                raise InputError(f"method {self.name!r}: unknown {what} {', '.join(map(repr, unknown))}; "
                                 f"valid parameters: {', '.join(sorted(allowed))}")
        self.check_grid()
        self.check_point({})
        # A constraint bounds one parameter, so every value is checked once (a sum of the grid's
        # lengths, not their product); a bad one is reported in the first grid point that has it.
        first = {key: values[0] for key, values in self.grid.items()}
        for key in sorted(self.grid, reverse=True):
            for value in self.grid[key]:
                self.check_point({**first, key: value}, {key: value})

    def check_grid(self) -> None:
        """Every grid key has a non-empty list of values, and the grid is not too large (what
        can be checked without the solver)."""
        for key, values in self.grid.items():
            if not isinstance(values, list) or not values:
                raise InputError(f"method {self.name!r}: grid values for {key!r} must be a non-empty list, got {values!r}")
        if self.n_points > MAX_TRIALS:
            raise InputError(f"method {self.name!r}: the grid has {self.n_points} points, over the {MAX_TRIALS} trials a "
                             f"sweep may have ({trial_limit_reason()}); split it into several sweeps (sweep.name=...)")

    def check_point(self, point: dict, changed: dict | None = None) -> None:
        """The parameters with ``changed`` (of grid point ``point``) set pass the solver's constraints."""
        from sklearn.utils._param_validation import InvalidParameterError

        try:
            self.prototype().set_params(**(point if changed is None else changed))._validate_params()
        except InvalidParameterError as error:
            where = f"grid point {point_label(point)}" if point else "parameters"
            raise InputError(f"method {self.name!r}, {where}: {error}") from None


def method_configs(folder: Path | None = None) -> dict[str, type[MultiTaskClusterer]]:
    """Every method config's name and solver class (``_target_``) in ``folder`` (conf/method):
    the registry of methods, derived from the configs."""
    folder = folder or CONF_DIR / "method"
    return {path.stem: get_class(OmegaConf.load(path)["_target_"]) for path in sorted(folder.glob("*.yaml"))}


def method_display_names(folder: Path | None = None) -> dict[str, str]:
    """Every method config's name in its paper's terms, for figures (``display:`` in its YAML,
    e.g. ``A-Ncut``; the config name when it has none). Tables, CSVs and runs keep the config
    names; a sweep reads only ``_target_``, ``params`` and ``grid``."""
    return dict(display_names_in(folder or CONF_DIR / "method"))


@functools.cache
def display_names_in(folder: Path) -> tuple[tuple[str, str], ...]:
    """(config name, display name) of every method config in ``folder``, read once per process
    (a study reports every sweep with it: 60 ms of YAML each time)."""
    return tuple((path.stem, str(OmegaConf.load(path).get("display") or path.stem)) for path in sorted(folder.glob("*.yaml")))


def method_spec(cfg: DictConfig, check: bool = True) -> MethodSpec:
    """The MethodSpec of ``cfg.method`` (``_target_``, ``params``, ``grid``), checked (its class
    imported, its parameters and every grid point against the solver's constraints) unless
    ``check`` is False: the command line finds a finished sweep by its key without importing the
    solver (and scikit-learn with it, about 1.2 s), then checks before running anything."""
    name = config_choice("method")
    target = cfg.method.get("_target_")
    if not target:
        raise InputError(f"method {name!r}: the config has no _target_ (the solver class, e.g. mtc.methods.snmf.SymmetricNMF)")
    grid = plain(cfg.method.get("grid"))
    grid, repeated = distinct_grid(grid)
    spec = MethodSpec(name, target, plain(cfg.method.get("params")), grid)
    if check:
        spec.check()
    else:
        spec.check_grid()
    if repeated:
        print(f"note: method {name!r}: repeated grid values dropped ({'; '.join(repeated)}); "
              f"{spec.n_points} grid point(s) remain", file=sys.stderr)
    return spec


@functools.cache
def solver_class(name: str, target: str) -> type[MultiTaskClusterer]:
    """The class a method config's ``_target_`` names, imported once per process."""
    from mtc.methods.base import MultiTaskClusterer

    try:
        solver = get_class(target)
    except Exception as error:
        raise InputError(f"method {name!r}: cannot import _target_ {target!r} ({error})") from None
    if not (isinstance(solver, type) and issubclass(solver, MultiTaskClusterer)):
        raise InputError(f"method {name!r}: _target_ {target!r} is not a MultiTaskClusterer")
    return solver


def distinct_grid(grid: dict) -> tuple[dict, list[str]]:
    """The grid with each key's repeated values dropped (the first kept, order kept; 1 and 1.0
    are one value), and what was dropped ("alpha: 1.0 2 times")."""
    distinct, repeated = {}, []
    for key, values in grid.items():
        if not isinstance(values, list):
            distinct[key] = values
            continue
        seen = {}
        for value in values:
            seen.setdefault(value_key(value), value)
        distinct[key] = list(seen.values())
        counts = Counter(map(value_key, values))
        repeated += [f"{key}: {seen[k]!r} {n} times" for k, n in counts.items() if n > 1]
    return distinct, repeated


def value_key(value):
    """What makes two grid values the same: equal values (1 == 1.0), but True is not 1."""
    return (type(value) is bool, json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value)


def trial_limit_reason() -> str:
    return "each trial is an MLflow run of about 35 KB and 25 ms of tracking, 3.5 GB and 40 min at the limit"


@dataclass(frozen=True)
class Trial:
    """One (grid point, seed) of a sweep; ``run_id`` is its MLflow child run once created."""

    point: dict
    seed: int
    run_id: str = ""

    @property
    def label(self) -> str:
        return point_label(self.point)

    @property
    def name(self) -> str:
        """The run name: every grid value under its parameter's own name, then the seed
        ("alpha=2 lambda_=0.25 s0").

        The keys are written out, never cut, so that a name reads as the filter it stands for
        (``params.lambda_``); the values are written as short as they read back (``compact``:
        2.0 as "2", 1e-05 as "1e-5"), and the seed, which every run has and its ``seed`` param
        holds, as ``s<seed>`` at the end, where the runs table's ellipsis cuts first. In MLflow
        3.17's runs table (Run Name column 190 px wide) a name has 146 px when the sweep's runs
        are shown flat, as the sweep's third link opens them (``mtc.store.tracking.links``):
        "alpha=4 lambda_=0.25 s1" takes 139 px there (headless Chromium), where "seed=1" would
        not fit. Nested under the parent run a name has 98 px (the two levels' indent): two
        spelled-out keys are then cut at the end, as any honest name of them would be.
        """
        return " ".join([*(f"{key}={compact(self.point[key])}" for key in sorted(self.point)), f"s{self.seed}"])

    @property
    def key(self) -> str:
        """Stable across runs of the same sweep: how a resumed sweep finds finished trials."""
        return f"{self.label}|seed={self.seed}"

    def with_run(self, run_id: str) -> Trial:
        return replace(self, run_id=run_id)


def compact(value) -> str:
    """A grid value as short as it reads back: a float in the shorter of its shortest
    round-trip form and ``%g``, a trailing ".0" and the exponent's sign and zeros dropped
    (2.0 -> "2", 0.25 -> "0.25", 1e-05 -> "1e-5", 1000000.0 -> "1e6"); anything else as
    ``str``."""
    if not isinstance(value, float):
        return str(value)
    forms = [repr(value), *[text for text in [f"{value:g}"] if float(text) == value]]
    tidy = [re.sub(r"e\+?(-?)0*(\d)", r"e\1\2", text.removesuffix(".0")) for text in forms]
    return min(tidy, key=len)


def trial_list(spec: MethodSpec, repeats: int) -> list[Trial]:
    """Grid x seeds, grid point by grid point."""
    return [Trial(point, seed) for point in spec.grid_points() for seed in range(repeats)]


def seeds_per_trial(setting, n_trials: int, repeats: int, parallel_slots: int, grid_points: int | None = None) -> int:
    """How many seeds of one grid point a Ray Tune trial runs.

    An int is taken as it is; "auto" takes the largest batch (at most ``repeats``) that still
    leaves four Tune trials per parallel slot, so small sweeps and big clusters keep one seed
    per trial and only long sweeps on few CPUs batch (each Tune trial and report adds driver
    and worker overhead: benchmarks/sweep_overhead.py). A sweep of fewer ``grid_points`` than
    slots has its seeds split so that it alone can keep every slot busy: a study's
    single-point sweep of slow fits otherwise ran as one Tune trial on one CPU while the
    others idled (``all --with a_kmeans``: A-kmeans on NG3's 10 seeds, 8 minutes on one core).
    """
    if setting != "auto":
        return setting
    slots = max(1, parallel_slots)
    size = max(1, min(repeats, n_trials // (4 * slots)))
    if grid_points and grid_points < slots:
        size = min(size, -(-repeats // -(-slots // grid_points)))  # ceil(repeats / ceil(slots / points))
    return size


def seed_batches(trials: list[Trial], size: int) -> dict[str, list[Trial]]:
    """The trials in batches of at most ``size`` seeds of one grid point, keyed by a name
    for the Tune trial ("<point> seeds=<first>-<last>"); the order of ``trials`` is kept."""
    by_point: dict[str, list[Trial]] = {}
    for trial in trials:
        by_point.setdefault(trial.label, []).append(trial)
    batches = {}
    for label, point_trials in by_point.items():
        for start in range(0, len(point_trials), size):
            batch = point_trials[start:start + size]
            seeds = f"{batch[0].seed}" if len(batch) == 1 else f"{batch[0].seed}-{batch[-1].seed}"
            batches[f"{label} seeds={seeds}"] = batch
    return batches


def staggered(batch: list[Trial], index: int, slots: int) -> list[Trial]:
    """The ``index``-th batch's seeds rotated by (index mod slots) shares of the batch, so that
    the batches that start together (consecutive ones, one per parallel slot) fit different
    seeds first. Seed-dependent steps that a worker keeps as files for every grid point sharing
    them (mtc.numerics.cache: each seed's k-means start) are then computed by one batch and read
    by the other, instead of by both at once. A fit does not depend on the order of its batch."""
    slots = max(1, slots)
    shift = (index % slots) * math.ceil(len(batch) / slots) % max(1, len(batch))
    return batch[shift:] + batch[:shift]


def stable_hash(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def absolute_tracking_uri(uri: str, base_dir: str) -> str:
    """Make a sqlite:/// or plain-path tracking URI absolute against base_dir; keep servers."""
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return "sqlite:///" + str((Path(base_dir) / uri[len("sqlite:///"):]).resolve())
    if "://" not in uri and not uri.startswith("sqlite:"):
        return str((Path(base_dir) / uri).resolve())
    return uri


@dataclass(frozen=True)
class TrackingSettings:
    """MLflow: absolute tracking URI, experiment, absolute artifact root (or None), figures."""

    uri: str
    experiment: str
    artifact_root: str | None
    readable_trial_files: bool


@dataclass(frozen=True)
class RaySettings:
    """``address``: "local" starts Ray here; anything else joins that cluster, whose head the
    driver then watches: lost for ``head_lost_seconds``, the driver stops (mtc.sweep.head_watch)."""

    address: str
    num_cpus: int | None
    object_store_memory: int
    head_lost_seconds: int

    @property
    def local(self) -> bool:
        return self.address in (None, "local")


@dataclass(frozen=True)
class SweepSettings:
    """The sweep block of the config (conf/config.yaml ``sweep``), checked: its name and label,
    seeds per grid point, CPUs and concurrency per trial, seeds per Ray trial, resuming, retries
    and the output folder."""

    name: str
    label: str
    repeats: int
    cpus_per_trial: int
    max_concurrent_trials: int | None
    seeds_per_trial: int | str
    resume: bool
    max_failures: int
    verbose: int
    output_dir: Path


@dataclass(frozen=True)
class Settings:
    """Everything a sweep or a single run reads, checked and with absolute paths."""

    method: MethodSpec
    data: DataSpec
    sweep: SweepSettings
    ray: RaySettings
    tracking: TrackingSettings
    seed: int
    resolved: dict = field(repr=False)  # the whole resolved config, logged on the parent run


def positive_int(value, what: str, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{what} must be a positive integer{' or null' if allow_none else ''}, got {value!r}")
    return value


def non_negative_int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{what} must be a non-negative integer, got {value!r}")
    return value


def tracking_settings(cfg: DictConfig, base: str) -> TrackingSettings:
    """A tracking server keeps its own artifact root (``mlflow server --serve-artifacts``: runs
    record mlflow-artifacts:/ URIs), so ``mlflow.artifact_root`` applies to local stores only."""
    uri = absolute_tracking_uri(cfg.mlflow.tracking_uri, base)
    root = cfg.mlflow.get("artifact_root")
    if uri.startswith(("http://", "https://")):
        root = None
    elif root and "://" not in root:
        root = str((Path(base) / root).resolve())
    experiment = cfg.mlflow.experiment
    if not isinstance(experiment, str) or not experiment.strip():
        raise InputError(f"mlflow.experiment must be a non-empty name, got {experiment!r}")
    return TrackingSettings(uri, experiment, root or None, bool(cfg.mlflow.readable_trial_files))


def sweep_settings(cfg: DictConfig, method: str, data: str, base: str) -> SweepSettings:
    setting = cfg.sweep.seeds_per_trial
    if setting != "auto":
        positive_int(setting, "sweep.seeds_per_trial (or 'auto')")
    repeats = positive_int(cfg.sweep.repeats, "sweep.repeats")
    if repeats > MAX_TRIALS:
        raise InputError(f"sweep.repeats={repeats} is over the {MAX_TRIALS} trials a sweep may have "
                         f"({trial_limit_reason()}); use fewer repeats")
    label = cfg.sweep.get("label") or method
    if not isinstance(label, str) or not re.fullmatch(r"[\w.]+", label):
        raise InputError(f"sweep.label must be letters, digits, '_' or '.', got {label!r}")
    return SweepSettings(
        name=sweep_name(cfg.sweep.name, f"{label}-{data}"), label=label, repeats=repeats,
        cpus_per_trial=positive_int(cfg.sweep.cpus_per_trial, "sweep.cpus_per_trial"),
        max_concurrent_trials=positive_int(cfg.sweep.max_concurrent_trials, "sweep.max_concurrent_trials", True),
        seeds_per_trial=setting, resume=bool(cfg.sweep.resume), max_failures=non_negative_int(cfg.sweep.max_failures,
                                                                                              "sweep.max_failures"),
        verbose=non_negative_int(cfg.sweep.verbose, "sweep.verbose"),
        output_dir=(Path(base) / cfg.output_dir).resolve())


def sweep_name(name, default: str) -> str:
    """``sweep.name`` (else ``default``) as one folder inside output_dir: a single path
    component, so that no name writes elsewhere (``..``, ``../../x``, ``/tmp/x``)."""
    name = default if name is None else name
    if not isinstance(name, str) or not re.fullmatch(NAME, name):
        raise InputError(f"sweep.name must be one folder name (letters, digits and '_', then also '.', '-', '+' "
                         f"or '='; no '/', not '..'), got {name!r}")
    return name


def check_data_name(name) -> None:
    """``data.name`` names the sweep (``<label>-<data.name>``), its output folder, its cache
    file and its benchmark in mtc.results.compare: one folder name, as ``sweep.name``."""
    if not isinstance(name, str) or not re.fullmatch(NAME, name):
        raise InputError(f"data.name must be one name (letters, digits and '_', then also '.', '-', '+' or '='; "
                         f"not empty, no '/'): it names the sweep, its output folder and its cache file; got "
                         f"{name!r}")


def check_data_paths(data: DataSpec) -> None:
    """The user's files (``data=files``) that are neither a regular file nor a folder, refused
    from their status before anything opens them: hashing them for the cache key (the first
    read) would block on a FIFO or never end on ``/dev/zero``. mtc.data.files checks the rest."""
    if data.builder != "files":
        return
    for path in map(resolved_path, data.params.get("paths") or []):
        problem = not_a_regular_file(path)
        if problem:
            raise InputError(f"{path}: {problem}")


def check_seed(seed) -> int:
    """``seed``: an integer from 0 to MAX_SEED, what NumPy's generators take."""
    non_negative_int(seed, "seed")
    if seed > MAX_SEED:
        raise InputError(f"seed must be an integer from 0 to {MAX_SEED} (2**32 - 1, the seeds NumPy's generators "
                         f"take), got {seed}")
    return seed


def ray_settings(cfg: DictConfig) -> RaySettings:
    memory = positive_int(cfg.ray.object_store_memory, "ray.object_store_memory")
    if memory < MIN_OBJECT_STORE_MEMORY:
        raise InputError(f"ray.object_store_memory={memory} is below Ray's minimum of {MIN_OBJECT_STORE_MEMORY} "
                         "bytes (75 MiB); the default is 500000000")
    return RaySettings(str(cfg.ray.address), positive_int(cfg.ray.num_cpus, "ray.num_cpus", True), memory,
                       positive_int(cfg.ray.head_lost_seconds, "ray.head_lost_seconds"))


def available_cpus() -> int:
    """The CPUs a local Ray gives a sweep, counted as Ray counts them
    (ray._private.utils.get_num_cpus): the machine's, capped by a cgroup v2 CPU quota (a
    container's limit)."""
    cpus = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            cpus = min(cpus, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return cpus


def check_local_cpus(sweep: SweepSettings, ray: RaySettings) -> None:
    """A trial's CPUs fit the local Ray (a cluster's CPUs are known only once joined)."""
    if not ray.local:
        return
    cpus = ray.num_cpus or available_cpus()
    if sweep.cpus_per_trial > cpus:
        where = f"ray.num_cpus={ray.num_cpus}" if ray.num_cpus else f"this machine has {cpus} CPU(s)"
        raise InputError(f"sweep.cpus_per_trial={sweep.cpus_per_trial} but {where}: no trial could start; "
                         f"set sweep.cpus_per_trial={cpus} or less")


@functools.cache
def known_keys() -> dict[str, frozenset[str]]:
    """The settings conf/config.yaml declares: its top-level keys (with the method and data
    groups) under "", and the keys of each of its sweep, ray and mlflow blocks. Read once per
    process (a study's planning checks every sweep's config: 11 ms a read, 3.8 s for smtnmf's 352)."""
    declared = OmegaConf.load(CONF_DIR / "config.yaml")
    known = {"": frozenset(set(declared) - {"defaults", "hydra"} | {"method", "data"})}
    known.update({section: frozenset(declared[section]) for section in SECTIONS})
    return known


def check_known_keys(cfg: DictConfig) -> None:
    """No setting outside what conf/config.yaml declares (``+sweep.repeatz=2`` would be ignored
    silently otherwise); the nearest known key is named."""
    known = known_keys()
    for section, keys in known.items():
        node = cfg if not section else cfg.get(section)
        if not isinstance(node, DictConfig):
            continue
        for key in node:
            if key not in keys:
                below, value = first_leaf(OmegaConf.to_container(node, resolve=False)[key])
                path = ".".join([*filter(None, [section]), str(key), *below])
                near = difflib.get_close_matches(str(key), sorted(keys), n=1)
                hint = ""
                if near:  # the closest known key path, below the key too (+methd.params.n_init=2)
                    start = [*filter(None, [section]), near[0]]
                    rest = nearest_key(below, OmegaConf.select(cfg, ".".join(start)))[0] if below else []
                    hint = f"did you mean {'.'.join(start + rest)}={as_typed(value)}? "
                raise InputError(f"unknown setting {path!r}: {hint}"
                                 f"{section or 'the top level'} takes: {', '.join(sorted(keys))}")


def first_leaf(value) -> tuple[list[str], object]:
    """The keys down to the first value under nested mappings (``{'params': {'n_init': 2}}``
    -> ``(['params', 'n_init'], 2)``), and that value; ``([], value)`` for a value that is not
    a non-empty mapping."""
    keys = []
    while isinstance(value, dict) and value:
        key, value = next(iter(value.items()))
        keys.append(str(key))
    return keys, value


def settings(cfg: DictConfig, check_method: bool = True) -> Settings:
    """Read and check the whole config; paths are made absolute against the launch directory.
    With ``check_method`` False the method's parameters are not checked (method_spec): the
    caller checks them (``settings(cfg, False).method.check()``) before running anything."""
    base = os.getcwd()
    try:
        resolved = OmegaConf.to_container(cfg, resolve=True)
    except InterpolationResolutionError as error:
        raise InputError(f"cannot resolve the config: {str(error).splitlines()[0]}") from None
    check_known_keys(cfg)
    method = method_spec(cfg, check_method)
    data = data_spec(cfg.data)
    check_data_name(data.name)
    check_data_paths(data)
    if data.builder == "files":  # the scale applied, by name, in the data and in what runs record
        data = with_scale(data, method.solver.input_needs)
        resolved = {**resolved, "data": data.resolved}
    seed = check_seed(cfg.get("seed", 0))
    sweep, ray = sweep_settings(cfg, method.name, data.name, base), ray_settings(cfg)
    if method.n_points * sweep.repeats > MAX_TRIALS:
        raise InputError(f"{method.n_points} grid points x {sweep.repeats} repeats = {method.n_points * sweep.repeats} "
                         f"trials, over the {MAX_TRIALS} a sweep may have ({trial_limit_reason()}); split the grid "
                         "into several sweeps or use fewer repeats")
    check_local_cpus(sweep, ray)
    return Settings(method, data, sweep, ray, tracking_settings(cfg, base), seed, resolved)
