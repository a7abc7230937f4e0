"""The cluster stack: ``python -m mtc.stack`` (PostgreSQL + the MLflow tracking server,
server) and a Ray cluster of several nodes on one machine (loopback; docs/cluster.md)."""
