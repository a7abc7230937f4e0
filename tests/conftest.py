import os
import secrets

import pytest

# One Ray auth token and token auth for the whole session (Ray 2.60 reads RAY_AUTH_TOKEN before
# ~/.ray/auth_token and caches what it read in the process; it reads RAY_AUTH_MODE when imported,
# so a fixture that sets it after any test module imported Ray is too late: on a machine whose
# address is not the loopback, the two-node cluster then refused the drivers of test_multinode):
# local clusters, the two-node cluster and every driver then agree, in any test order.
os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
os.environ.setdefault("RAY_AUTH_MODE", "token")

from mtc.cli import compose_config as compose


def pytest_collection_modifyitems(items):
    """The files with a ``slow`` test (drivers, Ray, servers, whole corpora) first, each file's
    tests kept together and in order: with the README's ``--dist loadfile --no-loadscope-reorder``
    the two pytest processes take the long files first and end on short ones, instead of one
    process running a long file alone at the end (xdist's own order is by test count, which put
    the cluster and lease files of a few long tests last)."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


@pytest.fixture
def compose_config(tmp_path):
    """Compose the real Hydra config with overrides; outputs and MLflow go to tmp_path."""

    def _compose(*overrides):
        return compose([
            f"output_dir={tmp_path / 'outputs'}",
            f"mlflow.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
            f"mlflow.artifact_root={tmp_path / 'artifacts'}",
            *overrides,
        ])

    return _compose


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory):
    """Processed datasets go to a fresh cache for the session (the raw corpora stay read-only)."""
    import os

    path = tmp_path_factory.mktemp("mtc-cache")
    previous = os.environ.get("MTC_CACHE_DIR")
    os.environ["MTC_CACHE_DIR"] = str(path)
    yield path
    if previous is None:
        os.environ.pop("MTC_CACHE_DIR", None)
    else:
        os.environ["MTC_CACHE_DIR"] = previous
