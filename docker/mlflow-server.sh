#!/bin/sh
# The MLflow tracking server of docker/compose.yaml, set up as `python -m mtc.stack start --auth`
# sets up its own (mtc/stack/server.py): PostgreSQL as the backend store, artifacts served through the
# server (runs record mlflow-artifacts:/ URIs), and MLflow's basic-auth app with its users in a
# second database, mlflow_auth (created by docker/postgres-init.sql), as mtc's app (mtc-basic-auth:
# the route that takes a Ray Tune trial's runs in one request, mtc.store.server_app). Everything secret comes
# from the environment; the auth ini is written at start-up, readable by this user only.
set -eu

: "${MTC_DB_PASSWORD:?set MTC_DB_PASSWORD (PostgreSQL password of user mlflow)}"
: "${MTC_MLFLOW_PASSWORD:?set MTC_MLFLOW_PASSWORD (the MLflow admin password)}"
: "${MLFLOW_FLASK_SERVER_SECRET_KEY:?set MLFLOW_FLASK_SERVER_SECRET_KEY (the basic-auth app needs a fixed one)}"
db_host="${MTC_DB_HOST:-postgres}"
db="postgresql+psycopg2://mlflow:${MTC_DB_PASSWORD}@${db_host}:5432"

umask 077
auth_ini="${TMPDIR:-/tmp}/mlflow-auth.ini"
cat > "$auth_ini" <<EOF
[mlflow]
default_permission = READ
database_uri = ${db}/mlflow_auth
admin_username = ${MTC_MLFLOW_USERNAME:-admin}
admin_password = ${MTC_MLFLOW_PASSWORD}
authorization_function = mlflow.server.auth:authenticate_request_basic_auth
auth_cache_ttl_seconds = 60
EOF

export MLFLOW_AUTH_CONFIG_PATH="$auth_ini"
export MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false
exec mlflow server --app-name mtc-basic-auth \
    --backend-store-uri "${db}/mlflow" \
    --serve-artifacts --artifacts-destination /mlartifacts \
    --host 0.0.0.0 --port 5000 --workers 1
