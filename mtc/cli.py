"""What the command-line entry points share: config location and composition, fast input
checks, and the rule that only bad input is one line with exit 2."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from sklearn.utils._param_validation import InvalidParameterError

from mtc import CONF_DIR
from mtc.errors import InputError

CONFIG_GROUPS = ("method", "data")


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
    """Reject `method=X` / `data=X` for an X with no <group>/X.yaml on the search path, in one line."""
    for arg in argv:
        group, sep, choice = arg.partition("=")
        if sep and group in CONFIG_GROUPS and choice not in available(group, argv):
            raise InputError(f"unknown {group} {choice!r}; available: {', '.join(available(group, argv))}")


def compose_config(overrides: list[str] = ()):
    """The composed config, as ``hydra.main`` would give it (HydraConfig set, so the chosen
    config-group options are known), for tests, benchmarks and other Python callers."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides), return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


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
        except (InputError, InvalidParameterError) as error:
            fail(error)

    return wrapper


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
    """Check the config-group choices and that the output folder takes files (Hydra writes
    there before any of our code runs), then hand over to Hydra."""
    from mtc.store.preflight import check_writable

    try:
        check_group_overrides(sys.argv[1:])
        check_writable(output_dir(sys.argv[1:]))
    except InputError as error:
        fail(error)
    hydra_main()


def fail(error: Exception):
    print(f"error: {error}", file=sys.stderr)
    sys.exit(2)
