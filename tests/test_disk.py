"""mtc.store.disk: a full disk's errors told in one line."""

import errno
import logging
import os

from mtc.store.disk import FullDiskInOneLine, full_disk, full_disk_in_one_line


def logged(logger: logging.Logger, error: BaseException | None, message: str = "save failed") -> None:
    try:
        if error is not None:
            raise error
        logger.error(message)
    except Exception:
        logger.error(message, exc_info=True)


def captured_records(name: str) -> tuple[logging.Logger, list[logging.LogRecord]]:
    logger = logging.getLogger(name)
    logger.propagate = False
    kept: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = kept.append
    logger.addHandler(handler)
    return logger, kept


def test_a_full_disk_error_is_one_warning_line_once_per_cause_and_other_records_pass():
    logger, kept = captured_records("mtc.test.full_disk")
    full_disk_in_one_line(logger.name, "could not save: {cause}")
    full_disk_in_one_line(logger.name, "installed twice: {cause}")
    assert sum(isinstance(f, FullDiskInOneLine) for f in logger.filters) == 1
    no_space = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/data/state.json")
    for _ in range(3):
        logged(logger, no_space)
    logged(logger, OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), "/data/state.json"))
    logged(logger, PermissionError(errno.EACCES, "denied", "/data/state.json"))
    logged(logger, None, "plain")
    assert [r.getMessage() for r in kept] == [f"could not save: {full_disk(no_space)}",
                                              "could not save: disk quota exceeded writing /data/state.json",
                                              "save failed", "plain"]
    assert [(r.levelname, r.exc_info is None) for r in kept] == [("WARNING", True), ("WARNING", True),
                                                                ("ERROR", False), ("ERROR", True)]
    assert kept[0].getMessage() == "could not save: no space left on device writing /data/state.json"


def test_a_full_disk_error_reached_through_its_cause_is_caught_too():
    logger, kept = captured_records("mtc.test.full_disk_cause")
    full_disk_in_one_line(logger.name, "lost: {cause}")
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("sync failed") from inner
    except RuntimeError:
        logger.error("saving failed", exc_info=True)
    assert len(kept) == 1 and kept[0].getMessage().startswith("lost: no space left on device")  # and a full folder, if watched
