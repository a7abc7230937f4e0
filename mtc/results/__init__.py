"""Results read back from a store, without Ray: trial records, point summaries and chosen
points (reading), the sweep report (report), comparisons across sweeps (compare, size_curves),
the figures and readable files of runs (plots), and all of it as pandas frames for a notebook
(frames: ``mtc.results.trials(...)``, ``sweeps``, ``points``, ``chosen``, ``comparison``).

The frames are imported on first use (PEP 562): a sweep's workers import ``results.report``
and ``results.plots`` and should not pay for compare's statistics (about 1 s)."""

__all__ = ["chosen", "comparison", "points", "sweeps", "trials"]


def __getattr__(name: str):
    if name in __all__:
        from mtc.results import frames

        return getattr(frames, name)
    raise AttributeError(f"module 'mtc.results' has no attribute {name!r}")
