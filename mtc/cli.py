"""What the command-line entry points share: config location, fast input checks, errors."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
CONFIG_GROUPS = ("method", "data")


def available(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def check_group_overrides(argv: list[str]) -> None:
    """Reject `method=X` / `data=X` for an X with no conf/<group>/X.yaml, in one line."""
    for arg in argv:
        group, sep, choice = arg.partition("=")
        if sep and group in CONFIG_GROUPS and choice not in available(group):
            raise ValueError(f"unknown {group} {choice!r}; available: {', '.join(available(group))}")


def exit_on_bad_input(task):
    """Wrap a Hydra task: a ValueError (bad input) ends it with one line on stderr, exit 2."""

    @functools.wraps(task)
    def wrapper(*args, **kwargs):
        try:
            return task(*args, **kwargs)
        except ValueError as error:
            fail(error)

    return wrapper


def launch(hydra_main) -> None:
    """Check the config-group choices on the command line, then hand over to Hydra."""
    try:
        check_group_overrides(sys.argv[1:])
    except ValueError as error:
        fail(error)
    hydra_main()


def fail(error: ValueError):
    print(f"error: {error}", file=sys.stderr)
    sys.exit(2)
