"""Results read back from a store, without Ray: trial records, point summaries and chosen
points (reading), the sweep report (report), comparisons across sweeps (compare, size_curves)
and the figures and readable files of runs (plots)."""
