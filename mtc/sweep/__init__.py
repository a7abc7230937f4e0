"""The sweep driver: ``python -m mtc.sweep`` (see __main__).

- driver: plan_sweep -> open_sweep -> run_on_ray (one Tuner for one or many sweeps) ->
  finish_sweep; what a worker runs (fit_and_log, one mtc.trial fit then its run) and keeps
  between trials (WORKER_CACHES);
- progress: the one progress line; locks: one live driver per sweep and per SQLite store.
"""
