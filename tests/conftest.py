import pytest

from mtc.cli import compose_config as compose


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
