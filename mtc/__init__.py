"""mtc: a multi-task clustering research platform."""

from pathlib import Path

from mtc.tasks import MultiTaskDataset, Task

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"  # the Hydra configs shipped with mtc

__all__ = ["CONF_DIR", "MultiTaskDataset", "Task"]
