"""mtc: a multi-task clustering research platform."""

from mtc.tasks import MultiTaskDataset, Task

__all__ = ["MultiTaskDataset", "Task"]
