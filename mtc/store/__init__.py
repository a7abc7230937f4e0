"""The tracking store: what is written to MLflow and read back raw (tracking), checks made
before anything is created (preflight), moving a local store (relocate), the locks and
leases that keep concurrent drivers apart (locks) and full disks (disk)."""
