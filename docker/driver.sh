#!/bin/bash
# The sweep driver of docker/compose.yaml. A Ray driver must run on a Ray node (ray.init attaches
# to a raylet on its own machine), so this container joins the cluster as a node with no CPUs
# (no trial runs here), runs one sweep, and leaves. Arguments are Hydra overrides; they come last,
# so they win over the defaults below:
#   docker compose run --rm driver method=kkm data=synthetic
set -euo pipefail

head="${RAY_HEAD_ADDRESS:-head:6379}"
ray start --address="$head" --num-cpus=0 --object-store-memory=500000000 --disable-usage-stats
trap 'ray stop >/dev/null 2>&1 || true' EXIT

# The driver loads the data (MTC_DATA_DIR) and ships it to the trials through Ray's object
# store; it also passes MLFLOW_TRACKING_USERNAME/PASSWORD to the trials (mtc/sweep/driver.py).
python -m mtc.sweep ray.address="$head" mlflow.tracking_uri="${MTC_TRACKING_URI:-http://mlflow:5000}" "$@"
