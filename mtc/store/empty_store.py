"""New local (SQLite) MLflow stores copied from an empty one instead of migrated afresh.

MLflow builds a new SQLite store's schema by running every one of its Alembic migrations,
about 1 s of CPU on this machine each time a sweep, a study or a test starts on a new store.
The empty store is that migrated schema without MLflow's Default experiment: MLflow adds it
itself when it first opens the copy (its artifact location from that process, as in a store
it made), so a copied store is what MLflow would have made. One empty store per MLflow
version, kept with the processed datasets (``$MTC_CACHE_DIR``, else ~/.cache/mtc/processed)
and made by whichever process needs it first; where that folder cannot be written, MLflow
makes the store as before.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
import uuid
from pathlib import Path


def empty_store_path() -> Path:
    import mlflow

    from mtc.data.cache import cache_dir

    return cache_dir() / f"mlflow-{mlflow.__version__}-empty-store.db"


def make_empty_store(path: Path) -> None:
    """MLflow's schema at ``path``, migrated by MLflow itself, its Default experiment removed;
    written beside and moved into place (two processes making it at once both succeed)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as folder:
        made = Path(folder) / "store.db"
        store = SqlAlchemyStore(f"sqlite:///{made}", str(Path(folder) / "artifacts"))
        store.engine.dispose()
        with contextlib.closing(sqlite3.connect(made)) as connection, connection:
            connection.execute("DELETE FROM experiments WHERE experiment_id = 0")
        os.replace(made, path)


def new_store_from_empty(db: Path) -> bool:
    """Make the SQLite store ``db`` (absent) a copy of the empty store; False where the empty
    store cannot be made or read (MLflow then makes ``db`` when it opens it). A file that
    appears at ``db`` meanwhile is left as it is."""
    template = empty_store_path()
    copy = db.with_name(f".{db.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        if not template.is_file():
            make_empty_store(template)
        shutil.copyfile(template, copy)
    except (OSError, sqlite3.Error):
        copy.unlink(missing_ok=True)  # a copy cut short
        return False
    try:
        os.link(copy, db)  # never over a store that appeared meanwhile
    except FileExistsError:
        pass
    except OSError:
        return False
    finally:
        copy.unlink(missing_ok=True)
    return True
