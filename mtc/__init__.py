"""mtc: a multi-task clustering research platform."""

from pathlib import Path

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"  # the Hydra configs shipped with mtc

__all__ = ["CONF_DIR", "MultiTaskDataset", "Task"]


def __getattr__(name: str):
    """``mtc.MultiTaskDataset`` and ``mtc.Task``, imported on first use: ``import mtc``, the first
    step of every ``python -m mtc.<command>``, stays cheap (numpy and scipy cost 0.4 s), so that a
    command's Ctrl-C handling (mtc.cli.ctrl_c_exits_at_once) is in place at once."""
    if name in ("MultiTaskDataset", "Task"):
        from mtc import tasks

        return getattr(tasks, name)
    raise AttributeError(f"module 'mtc' has no attribute {name!r}")
