# %% [markdown]
# # Sweeps and their results from Python
#
# A notebook's view of mtc (this file runs as a script too, and in CI: cells are `# %%`, as
# Jupytext and VS Code read them). Three small sweeps on synthetic data (three tasks of four
# Gaussian clusters, two of them shared, close enough to be confused) go into a store in the
# working folder; `mtc.results` then reads the store into pandas, with the same numbers as
# `python -m mtc.results.compare`.

# %%
import mtc.results
import mtc.sweep

STORE = "sqlite:///mlflow.db"  # the default of python -m mtc.sweep, in the working folder
settings = ["sweep.repeats=4", "data.params.samples_per_cluster=20", "data.params.separation=0.5", "sweep.verbose=0",
            "ray.num_cpus=2"]

# %% [markdown]
# ## Run three sweeps
# `mtc.sweep.run(method, data, *overrides)` is `python -m mtc.sweep method=... data=...` without
# a shell. It returns the sweep's result: its parent run, point summaries and chosen points.
# Running the same sweep again resumes it (a finished one is reported without Ray).

# %%
results = {method: mtc.sweep.run(method, "synthetic", *settings) for method in ("kmeans", "a_kmeans", "snmf")}
for method, result in results.items():  # snmf's grid: update in (sqrt, quarter)
    best = result.best["acc"]
    print(f"{method}: {result.trials_run} trials run, best point by accuracy {best.point}, "
          f"mean accuracy {best.mean['acc/mean']:.4f}")

# %% [markdown]
# ## Read the store
# One row per sweep, one row per trial (grid parameters and every metric under its MLflow
# name), and a sweep's grid points with mean and std (its report's grid.csv).

# %%
print(mtc.results.sweeps(STORE)[["sweep", "label", "status", "best_by_acc/acc/mean"]].to_string())

# %%
trials = mtc.results.trials(STORE)
print(trials.groupby(["label", "point"])["acc/mean"].agg(["mean", "std", "count"]).round(4).to_string())

# %%
points = mtc.results.points(results["snmf"].parent_run_id, STORE)
print(points[["point", "n_runs", "acc/mean mean", "acc/mean std", "objective/final mean"]].to_string())

# %% [markdown]
# ## Compare the methods
# `chosen` gives the grid point of every selection (by accuracy, and the label-free ones);
# `comparison` gives compare's tables in memory (`.cells` is its cells.csv; `.rank_table` the
# per-task accuracies that the Friedman test ranks).

# %%
chosen = mtc.results.chosen(STORE)
print(chosen[["benchmark", "method", "selection", "point", "acc/mean"]].to_string())

# %%
comparison = mtc.results.comparison(STORE)
mean_cells = comparison.cells.query("task == 'mean' and selection == 'acc'")
print(mean_cells[["benchmark", "method", "metric", "point", "mean", "std", "n"]].to_string())
print(comparison.rank_table.to_string())
