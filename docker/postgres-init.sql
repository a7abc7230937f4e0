-- Run once by the postgres image, on an empty data volume: the database of MLflow's basic-auth
-- users, next to the tracking database (POSTGRES_DB=mlflow), as mtc.stack creates both.
CREATE DATABASE mlflow_auth;
