"""The sweep lease in a tracking store (mtc locks.server_lease): drivers on two machines see
each other through the store. Exercised here on a real MLflow store through its client (the
lease only reads and writes experiment tags, as it does through a server's REST API); the
two-driver case against a real server is in tests/test_multinode.py."""

import json
import time

import pytest
from mlflow import MlflowClient

from mtc.store import locks

REMOTE = "http://tracking.example:5000"  # any non-SQLite URI: the lease applies


@pytest.fixture()
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(locks, "SETTLE_SECONDS", 0.05)
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    return client, client.create_experiment("lease", artifact_location=str(tmp_path / "artifacts"))


def test_a_second_driver_of_a_leased_sweep_is_refused_in_one_line(store):
    client, experiment = store
    with locks.server_lease(client, experiment, {"k1": "toy-synthetic"}, REMOTE):
        holder = locks.lease_holder(client, experiment, "k1")
        assert holder["holder"].split(" pid ")[1].split()[0].isdigit()
        with pytest.raises(locks.BusyError) as refused:
            with locks.server_lease(client, experiment, {"k2": "other", "k1": "toy-synthetic"}, REMOTE):
                pass
        message = str(refused.value)
        assert message.startswith("sweep 'toy-synthetic' is already running from ") and "\n" not in message
        assert "lapses after 120 s" in message
        assert locks.lease_holder(client, experiment, "k2") is None  # refused before writing anything
    assert locks.lease_holder(client, experiment, "k1") is None  # released at exit
    with locks.server_lease(client, experiment, {"k1": "toy-synthetic"}, REMOTE):  # free again
        pass


def test_a_lapsed_lease_of_a_dead_driver_is_taken_over(store):
    client, experiment = store
    stale = json.dumps({"holder": "node-b pid 4242 deadbeef", "renewed": time.time() - locks.LEASE_SECONDS - 1})
    client.set_experiment_tag(experiment, locks.LEASE_TAG.format(key="k1"), stale)
    assert locks.lease_holder(client, experiment, "k1") is None
    with locks.server_lease(client, experiment, {"k1": "toy"}, REMOTE):
        assert locks.lease_holder(client, experiment, "k1")["holder"] != "node-b pid 4242 deadbeef"


def test_a_live_foreign_lease_written_during_the_settle_wins(store, monkeypatch):
    """Two drivers read "free" together: the later writer keeps the lease, the other backs off."""
    client, experiment = store
    other = json.dumps({"holder": "node-b pid 4242 deadbeef", "renewed": time.time()})
    real_sleep = time.sleep

    def other_driver_writes(seconds):
        client.set_experiment_tag(experiment, locks.LEASE_TAG.format(key="k1"), other)
        real_sleep(seconds)

    monkeypatch.setattr(locks.time, "sleep", other_driver_writes)
    with pytest.raises(locks.BusyError, match="^sweep 'toy' is already running from node-b pid 4242 against"):
        with locks.server_lease(client, experiment, {"k1": "toy"}, REMOTE):
            pass


def test_the_heartbeat_renews_the_lease(store, monkeypatch):
    client, experiment = store
    monkeypatch.setattr(locks, "RENEW_SECONDS", 0.2)
    with locks.server_lease(client, experiment, {"k1": "toy"}, REMOTE):
        first = locks.lease_holder(client, experiment, "k1")["renewed"]
        time.sleep(1.0)
        assert locks.lease_holder(client, experiment, "k1")["renewed"] > first


def test_a_sqlite_store_is_left_to_its_file_lock(store):
    client, experiment = store
    with locks.server_lease(client, experiment, {"k1": "toy"}, "sqlite:////tmp/x.db"):
        assert locks.lease_holder(client, experiment, "k1") is None
