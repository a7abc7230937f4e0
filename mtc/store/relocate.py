"""Point a moved local MLflow store at its artifacts again:
``python -m mtc.store.relocate [--tracking-uri sqlite:///mlflow.db] [--artifacts mlartifacts]``.

MLflow records every local artifact location as an absolute ``file://`` path (its SQL store
resolves relative paths when an experiment is created, and has no command to change them:
mlflow/mlflow#8226), so a folder holding ``mlflow.db`` and ``mlartifacts/`` that is moved or
copied to another machine loses every artifact in the UI, in ``mtc.results.compare`` and in the
stability criterion. This rewrites the stored locations of the experiments whose artifacts
are found under ``--artifacts`` (the experiment's location and each run's artifact URI, old
prefix to new), in one transaction, and says what it changed. ``python -m mtc.sweep``,
``mtc.run`` and ``mtc.results.compare`` do the same on their own when they open a local store whose
artifact folders are gone (relocate_if_moved); the MLflow UI needs this command once.
Servers keep artifacts behind ``mlflow-artifacts:/`` URIs and need none of this.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

from mtc.errors import InputError


def local_path(location: str) -> Path | None:
    """The folder of a local artifact location (``file://`` URI or plain path), else None."""
    if location.startswith("file://"):
        return Path(unquote(urlparse(location).path))
    return Path(location) if "://" not in location and location else None


def relocate(tracking_uri: str, artifacts: Path) -> list[str]:
    """Rewrite the local artifact locations of the store's experiments whose run folders are
    under ``artifacts``; returns one line per experiment with a local location."""
    import sqlalchemy as sa

    if not tracking_uri.startswith("sqlite:///"):
        raise InputError(f"--tracking-uri {tracking_uri!r}: only a local SQLite store (sqlite:///...) is relocated; "
                         "a tracking server serves its own artifacts")
    store = Path(tracking_uri[len("sqlite:///"):])
    if not store.is_file():
        raise InputError(f"--tracking-uri {tracking_uri!r}: no such file {store}")
    if not artifacts.is_dir():
        raise InputError(f"--artifacts {artifacts}: no such folder")
    new_root = artifacts.resolve().as_uri()
    engine = sa.create_engine(tracking_uri)
    lines = []
    with engine.begin() as connection:  # one transaction: all or nothing
        experiments = connection.execute(sa.text("SELECT experiment_id, name, artifact_location FROM experiments"))
        for experiment_id, name, location in experiments.fetchall():
            old_root = local_path(location or "")
            if old_root is None:
                continue
            uris = [uri for (uri,) in connection.execute(
                sa.text("SELECT artifact_uri FROM runs WHERE experiment_id = :id"), {"id": experiment_id})]
            prefix = location.rstrip("/")
            moved = [uri for uri in uris if uri.startswith(prefix + "/")]  # not a sibling folder "<root>2/"
            if old_root.resolve() == artifacts.resolve():
                lines.append(f"experiment {name!r}: {len(uris)} runs, already at {new_root}")
                continue
            found = sum((artifacts / uri[len(prefix) + 1:]).is_dir() for uri in moved)
            if not found:  # a run that logged nothing has no folder, but an experiment that moved has some
                lines.append(f"experiment {name!r}: left at {location} (none of its {len(moved)} runs' folders is "
                             f"under {artifacts})")
                continue
            connection.execute(sa.text("UPDATE experiments SET artifact_location = :new WHERE experiment_id = :id"),
                               {"new": new_root, "id": experiment_id})
            connection.execute(sa.text(
                "UPDATE runs SET artifact_uri = :new || substr(artifact_uri, :cut) "
                "WHERE experiment_id = :id AND substr(artifact_uri, 1, :length) = :old"),
                {"new": new_root, "cut": len(prefix) + 1, "length": len(prefix) + 1, "old": prefix + "/",
                 "id": experiment_id})
            lines.append(f"experiment {name!r}: {len(moved)} runs ({found} with artifacts), {location} -> {new_root}")
    return lines


def relocate_if_moved(tracking_uri: str, artifacts: Path) -> list[str]:
    """What mtc's own commands do on opening a local store: when an experiment's artifact
    folder is gone (the store was moved or copied) and ``artifacts`` exists, relocate there;
    returns the lines of the experiments that moved (none when nothing was missing)."""
    import sqlalchemy as sa

    store = Path(tracking_uri[len("sqlite:///"):]) if tracking_uri.startswith("sqlite:///") else None
    if store is None or not store.is_file() or not artifacts.is_dir():
        return []
    with sa.create_engine(tracking_uri).connect() as connection:
        locations = [location for (location,) in connection.execute(sa.text("SELECT artifact_location FROM experiments"))]
    folders = [local_path(location or "") for location in locations]
    if not any(folder is not None and not folder.exists() for folder in folders):
        return []
    return [line for line in relocate(tracking_uri, artifacts) if " -> " in line]


def main(argv: list[str] | None = None) -> None:
    from mtc.cli import fail

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tracking-uri", default="sqlite:///mlflow.db", help="the moved MLflow store")
    parser.add_argument("--artifacts", type=Path, default=Path("mlartifacts"),
                        help="the folder now holding its artifacts (one subfolder per run)")
    args = parser.parse_args(argv)
    try:
        lines = relocate(args.tracking_uri, args.artifacts)
    except InputError as error:
        fail(error)
    print("\n".join(lines) or "no experiment with a local artifact location")


if __name__ == "__main__":
    main(sys.argv[1:])
