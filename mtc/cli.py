"""What the command-line entry points share: config location and composition, fast input
checks, and the rule that only bad input is one line with exit 2."""

from __future__ import annotations

import difflib
import functools
import os
import re
import signal
import sys
from pathlib import Path

from mtc import CONF_DIR
from mtc.errors import InputError

CONFIG_GROUPS = ("method", "data", "experiment")  # chosen on the command line: method=X, data=X, +experiment=X
HYDRA_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")  # what Hydra writes in <run dir>/.hydra
# Set by launch(): Hydra's run folder as composed then, whether it existed, and the folders on
# the way to it that did not: a refused command removes what Hydra then created
# (discard_hydra_record), so it leaves nothing behind.
_launched: dict = {}


def search_path(argv: list[str]) -> list[Path]:
    """conf/ plus every folder named by a ``hydra.searchpath=[...]`` override."""
    folders = [CONF_DIR]
    for arg in argv:
        key, sep, value = arg.lstrip("+").partition("=")
        if sep and key == "hydra.searchpath":
            entries = value.strip("[]").split(",")
            folders += [Path(entry.strip().strip("'\"").removeprefix("file://")) for entry in entries if entry.strip()]
    return folders


def available(group: str, argv: list[str] | None = None) -> list[str]:
    """The options of a config group in conf/ and the command line's extra search path."""
    return sorted({p.stem for folder in search_path(argv or []) for p in (folder / group).glob("*.yaml")})


def check_group_overrides(argv: list[str]) -> None:
    """Reject `method=X` / `data=X` / `+experiment=X` for an X with no <group>/X.yaml on the search path, in one line."""
    for arg in argv:
        group, sep, choice = arg.lstrip("+").partition("=")
        if sep and group in CONFIG_GROUPS and choice not in available(group, argv):
            raise InputError(f"unknown {group} {choice!r}; available: {', '.join(available(group, argv))}")


def compose_config(overrides: list[str] = ()):
    """The composed config, as ``hydra.main`` would give it (HydraConfig set, so the chosen
    config-group options are known), for tests, benchmarks and other Python callers. An
    override Hydra cannot apply is an InputError naming what to write instead."""
    from omegaconf import open_dict

    cfg = composed_with_hydra(list(overrides))
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


class Composer:
    """``compose_config`` for many override lists that differ mostly in values (a study's
    sweeps). Hydra composes each distinct set of config-group choices and ``hydra.*``
    overrides once (about 0.13 s); a list's value overrides are then applied to a copy of
    that config by Hydra's own override code, as a full compose applies them after merging
    the defaults (about 0.01 s). A value override Hydra cannot apply goes through the full
    compose, for its one-line error. Only ``runtime.choices`` of the ``hydra`` node is kept
    up to date (what ``${hydra:runtime.choices.X}`` reads); the node is dropped, as in
    ``compose_config``."""

    def __init__(self):
        self._bases: dict[tuple[str, ...], object] = {}

    def __call__(self, overrides: list[str]):
        import copy

        from hydra._internal.config_loader_impl import ConfigLoaderImpl
        from hydra.core.hydra_config import HydraConfig
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from hydra.errors import HydraException
        from omegaconf import open_dict

        try:
            parsed = OverridesParser.create().parse_overrides(list(overrides))
        except HydraException:
            return compose_config(overrides)
        folders = search_path(list(overrides))
        chooses = [o for o in parsed if o.is_hydra_override() or o.package is not None
                   or any((folder / o.key_or_group).is_dir() for folder in folders)]
        key = tuple(o.input_line for o in chooses)
        if key not in self._bases:
            self._bases[key] = composed_with_hydra(list(key))
        cfg = copy.deepcopy(self._bases[key])
        try:
            ConfigLoaderImpl._apply_overrides_to_config([o for o in parsed if o not in chooses], cfg)
        except HydraException:
            return compose_config(overrides)
        HydraConfig.instance().set_config(cfg)
        with open_dict(cfg):
            del cfg["hydra"]
        return cfg


def composed_with_hydra(overrides: list[str]):
    """The composed config with its ``hydra`` node (HydraConfig set); Hydra's errors, and a
    config file that is not valid YAML, as one InputError line."""
    import yaml
    from hydra.errors import HydraException

    try:
        return hydra_compose(overrides)
    except HydraException as error:
        raise InputError(composition_error(overrides, error)) from None
    except yaml.YAMLError as error:
        raise InputError(yaml_error(error)) from None


def yaml_error(error) -> str:
    """One line for a config file YAML cannot read (``yaml.YAMLError``): the file, what is
    wrong and where, lines and columns counted from 1 as an editor counts them."""
    mark = getattr(error, "problem_mark", None)
    if mark is None:
        return f"a config file is not valid YAML ({first_line(error)})"
    context, at = getattr(error, "context", None), getattr(error, "context_mark", None)
    where = f" ({context}" + (f" at line {at.line + 1}, column {at.column + 1}" if at else "") + ")" if context else ""
    return (f"cannot read the config {mark.name}: {error.problem} at line {mark.line + 1}, column {mark.column + 1}"
            f"{where}")


def hydra_compose(overrides: list[str]):
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides, return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    return cfg


def composition_error(overrides: list[str], error: Exception) -> str:
    """One line for an override Hydra refused: the override it cannot read, or, for a key the
    config does not have (Hydra's "Key ... is not in struct"), what to write instead."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    parsed = []
    for text in overrides:
        try:
            parsed.append(parser.parse_override(text))
        except HydraException as bad:
            return (f"cannot read the override {text!r} ({first_line(bad)}); write key=value, e.g. sweep.repeats=3, "
                    "and quote a value with spaces or brackets")
    culprit = missing_key(parsed, error)
    if culprit is None:
        return " ".join(line.strip() for line in str(error).splitlines() if line.strip() and "hydra.cc" not in line)
    rest = [o for o in parsed if o is not culprit]
    while True:  # the config without the culprit, nor any other override of a missing key
        try:
            base = hydra_compose([o.input_line for o in rest])
            break
        except HydraException as other:
            also = missing_key(rest, other)
            if also is None:
                return f"unknown setting {culprit.key_or_group!r}"
            rest.remove(also)
    return unknown_key_message(culprit.key_or_group, culprit.input_line.partition("=")[2], base)  # the value as typed


def missing_key(parsed: list, error: Exception):
    """The override of a key the config does not have that ``error`` is about, if it is one."""
    missing = re.match(r"Could not override '([\w.]+)'", str(error))
    return next((o for o in parsed if missing and o.key_or_group == missing.group(1)), None)


def first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def unknown_key_message(key: str, value: str, cfg) -> str:
    """What to write instead of ``key=value`` for a key ``cfg`` does not have."""
    parts = key.split(".")
    if len(parts) == 3 and parts[0] == "method" and parts[1] in ("params", "grid"):
        return method_key_message(parts[1], parts[2], value, cfg)
    if len(parts) == 3 and parts[:2] == ["data", "params"]:
        return data_key_message(parts[2], value, cfg)
    nearest, lacking = nearest_key(parts, cfg)
    node, depth = cfg, 0
    while depth < lacking and hasattr(node[parts[depth]], "keys"):
        node, depth = node[parts[depth]], depth + 1
    where = ".".join(parts[:depth])
    keys = sorted(str(k) for k in node.keys() if k != "hydra")
    hint = f"did you mean {'.'.join(nearest)}={value}? " if nearest != parts else ""
    return f"unknown setting {key!r}: {hint}{where or 'the top level'} takes: {', '.join(keys)}"


def nearest_key(parts: list[str], node) -> tuple[list[str], int]:
    """The known key path closest to ``parts`` (a dotted key split) in the config ``node``, and
    the depth of the first part the config lacks (``len(parts)`` when it has them all).

    Each part the config has is kept; a part it lacks is replaced by the closest key of its
    level (difflib), and the search goes on below it (``methd.params.n_init`` ->
    ``method.params.n_init``, not ``method``); parts below what the config holds (a method
    config without ``params``) are kept as typed. The top level's ``hydra`` node is no key.
    """
    path, lacking = [], len(parts)
    for depth, part in enumerate(parts):
        keys = [str(k) for k in node.keys() if depth or k != "hydra"] if hasattr(node, "keys") else []
        if part not in keys:
            lacking = min(lacking, depth)
            part = next(iter(difflib.get_close_matches(part, keys, n=1)), part)
        path.append(part)
        try:
            node = node[part] if part in keys else None
        except Exception:  # a value that does not resolve (an interpolation): nothing known below it
            node = None
    return path, lacking


def as_typed(value) -> str:
    """A config value as an override would give it, so that a message shows it as given: a
    string bare when it reads back as itself (``qp``, ``a/b.csv``), else quoted (``'  '``,
    ``''``, ``'3'``); true, false and null; lists and mappings in brackets and braces."""
    if isinstance(value, str):
        if re.fullmatch(r"[A-Za-z_/][\w./:@+-]*", value) and value.lower() not in ("true", "false", "null", "nan",
                                                                                  "inf"):
            return value
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(map(as_typed, value)) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{as_typed(v)}" for k, v in value.items()) + "}"
    return str(value)


def method_key_message(section: str, name: str, value: str, cfg) -> str:
    """``method.params.x=v`` / ``method.grid.x=v`` for an x the method's YAML does not list."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.utils import get_class

    from mtc.config import reserved_params

    method = HydraConfig.get().runtime.choices["method"]
    try:
        solver = get_class(cfg.method._target_)
        names = solver._get_param_names()
    except Exception:  # a _target_ that does not import: mtc.config.method_spec says so
        return f"method {method!r}: {section} {name!r} is not in conf/method/{method}.yaml"
    reserved = reserved_params(solver)
    if name in reserved:
        from_grid = "".join(f", {own} from the sweep's {varied} values" for own, varied in
                            getattr(solver, "grid_siblings", {}).items())
        return (f"method {method!r}: {name} is set by the platform, never by a config (n_clusters from the data, "
                f"random_state from the seed, cache by the worker{from_grid})")
    allowed = sorted(set(names) - set(reserved))
    grid, params = cfg.method.get("grid") or {}, cfg.method.get("params") or {}
    listed = value if value.startswith("[") else f"[{value}]"
    if name in allowed and section == "params" and name in grid:
        return (f"method {method!r} sweeps {name} in its grid ({list(grid[name])}): to fix it at {value} write "
                f"method.grid.{name}={listed}")
    if name in allowed and section == "params":
        return (f"method {method!r}: {name} is not among the params conf/method/{method}.yaml sets; write "
                f"++method.params.{name}={value} (++ adds a key)")
    if name in allowed:
        return (f"method {method!r}: {name} is not in its grid; write ++method.grid.{name}={listed} (++ adds a key; "
                "a grid takes a list)")
    near = difflib.get_close_matches(name, allowed, n=1)
    if near:
        written = value if section == "params" else listed
        plus = "" if near[0] in (params if section == "params" else grid) else "++"
        hint = f"did you mean {plus}method.{section}.{near[0]}={written}? "
    else:
        hint = ""
    return f"method {method!r} has no parameter {name!r}: {hint}its parameters: {', '.join(allowed)}"


def data_key_message(name: str, value: str, cfg) -> str:
    """``data.params.x=v`` for an x the data config does not list."""
    from mtc.data import builder_parameters

    data = cfg.data.name
    allowed = sorted(builder_parameters(cfg.data.get("builder") or data))
    if name in allowed:
        return (f"dataset {data!r}: {name} is not among the params its data config sets; write "
                f"++data.params.{name}={value} (++ adds a key)")
    near = difflib.get_close_matches(name, allowed, n=1)
    hint = f"did you mean data.params.{near[0]}={value}? " if near else ""
    return f"dataset {data!r} has no parameter {name!r}: {hint}it takes: {', '.join(allowed)}"


def configured_dataset(name: str, *overrides: str, seed: int = 0):
    """The dataset of data config ``name`` (conf/data/<name>.yaml) with Hydra overrides
    (the draw of ``seed`` if the config draws a sample per seed)."""
    from mtc.data.spec import data_spec

    return data_spec(compose_config([f"data={name}", *overrides]).data).load(seed)


def exit_on_bad_input(task):
    """Wrap a Hydra task: bad input ends it with one line on stderr and exit 2; any other
    error keeps its traceback (exit 1)."""

    @functools.wraps(task)
    def wrapper(*args, **kwargs):
        try:
            return task(*args, **kwargs)
        except InputError as error:
            discard_hydra_record()
            fail(error)
        except ValueError as error:  # scikit-learn's InvalidParameterError is one, imported only here (it costs 1.2 s)
            from sklearn.utils._param_validation import InvalidParameterError

            if not isinstance(error, InvalidParameterError):
                raise
            discard_hydra_record()
            fail(error)

    return wrapper


def discard_hydra_record() -> None:
    """Remove what Hydra wrote before a refused command's task ran (its run folder, with
    .hydra/ and an empty job log, and the folders launch() saw missing), so bad input leaves
    nothing behind. Removes only those files and folders that are then empty, and nothing when
    the command was not started by launch()."""
    from hydra.core.hydra_config import HydraConfig

    if not _launched or not HydraConfig.initialized():
        return
    run_dir = Path(HydraConfig.get().runtime.output_dir).resolve()
    if run_dir.parent != _launched["run_dir"].parent:
        return
    for name in HYDRA_FILES:
        (run_dir / ".hydra" / name).unlink(missing_ok=True)
    log = run_dir / f"{HydraConfig.get().job.name}.log"
    if log.is_file() and log.stat().st_size == 0:
        log.unlink()
    kept = {_launched["run_dir"]} if _launched["existed"] else set()
    for folder in (run_dir / ".hydra", run_dir, *_launched["fresh"]):
        if folder in kept:
            break
        try:
            folder.rmdir()
        except OSError:  # not empty (or not there): kept
            break


def output_dir(argv: list[str]) -> Path:
    """The ``output_dir`` the command will use (Hydra writes its record of the command there)."""
    from omegaconf import OmegaConf

    value = OmegaConf.load(CONF_DIR / "config.yaml").output_dir
    for arg in argv:
        key, sep, given = arg.lstrip("+").partition("=")
        if sep and key == "output_dir":
            value = given
    return Path(value).expanduser().resolve()


def launch(hydra_main) -> None:
    """Check the config-group choices, that the output folder takes files (Hydra writes there
    before any of our code runs) and that Hydra can apply every override (one line naming what
    to write instead, not Hydra's own seven), then hand over to Hydra."""
    from mtc.store.preflight import check_writable

    argv = sys.argv[1:]
    try:
        check_group_overrides(argv)
        check_writable(output_dir(argv))
        if not any(arg.startswith("-") for arg in argv):  # Hydra's own flags (--help, --cfg, -m) go to Hydra
            run_dir = Path(str(composed_with_hydra(argv).hydra.run.dir)).resolve()
            _launched.update(run_dir=run_dir, existed=run_dir.exists(),
                             fresh=[folder for folder in run_dir.parents if not folder.exists()])
    except InputError as error:
        fail(error)
    hydra_main()


def ctrl_c_exits_at_once() -> None:
    """From now until a command's own handling of the stop signals takes over (a sweep's or a
    study's: mtc.sweep.stopping.command_exits, while no MLflow run is open before or after it),
    Ctrl-C ends the process at once with one line and exit 130, instead of a KeyboardInterrupt
    traceback from wherever it landed: an import (where it can even surface as another error,
    a RuntimeError of a class being created) or Hydra's start. A SIGINT this process ignores
    (a job started with ``&``) stays ignored."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, exit_interrupted)


def exit_interrupted(signum, frame):
    """ctrl_c_exits_at_once's handler: the line, then exit 130 without unwinding (nothing is open)."""
    sys.stdout.flush()
    print("interrupted (Ctrl-C) while no MLflow run was open", file=sys.stderr, flush=True)
    os._exit(128 + signal.SIGINT)


def fail(error: Exception):
    print(f"error: {error}", file=sys.stderr)
    sys.exit(2)
