"""The tracking store: what is written to MLflow and read back raw (tracking), checks made
before anything is created (preflight), and moving a local store (relocate)."""
