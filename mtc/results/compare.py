"""Compare methods across finished sweeps: ``python -m mtc.results.compare``.

Every FINISHED parent run of the experiment is one sweep of one method on one benchmark:
the method is the sweep's label (tag ``mtc.label``, ``sweep.label``: the method's config
name unless an experiment names a variant, e.g. ``smbc_sequential``), the benchmark the run
name without its ``<label>-`` prefix, else the tag ``mtc.data``; of several sweeps of the
same (benchmark, method) the newest is read. A variant is matched with the published
numbers of its method (tag ``mtc.method``). A benchmark ``<data>@<n1>+<n2>+...`` asked for
with ``--benchmarks`` pools the sweeps ``<data>-n<n1>``, ... of each method, as a paper's
table averages over sample sizes (``mtc.results.reading.pool_members``; mtc.results reads the sweeps
back, this module compares them). For each sweep the grid points
of every selection of ``mtc.results.report.SELECTIONS`` are found (the best by accuracy, which
uses labels, and the label-free ones), and this module writes to ``--out``:

- ``compare.md``: per benchmark, methods x tasks "mean ± std" over seeds at the best grid
  point beside the published numbers (``mtc/published_results.csv``), the accuracy at each
  label-free point with its gap to the best point, Wilcoxon signed-rank tests (paired by
  seed) of the best method against each other one, grid heatmaps; over all benchmarks, the
  Friedman test, average ranks, Nemenyi post-hoc p-values and, from MIN_CD_CELLS cells on, a
  critical-difference diagram (below, compare.md says why there is none: ``cd_refusal``);
- for a pooled benchmark, the mean accuracy over tasks per sample size at each method's best
  point over all sizes, as a table and a figure (mtc.results.size_curves: the papers' accuracy against
  the number of samples);
- ``cells.csv``, ``wilcoxon.csv``, ``friedman.csv``, ``nemenyi.csv``, ``size_curves.csv`` (with a
  pooled benchmark) and the PNGs;

and logs the same files to an MLflow run of their own (run name ``compare``, tag
``mtc.kind=compare``) unless ``--no-log``. Bad input (no store, no finished sweep, an
unknown metric) is one line and exit 2.

The figures name methods in the papers' terms (a method config's ``display``, e.g. A-Ncut; a
variant keeps its label), print ranks with two decimals and name a pooled benchmark in words.
A grid heatmap's colours span a stated range (0 to 1 for the scores), its title names the
parameters with no effect, and a red box marks the cell of the point the tables use.

``--criterion`` says what chooses each sweep's point and ranks the methods: ``acc`` (the
default) or the label-free ``silhouette``, then the tables, tests and ranks are of the
silhouette at its point and nothing about accuracy is shown. It is used, with a note, when no
sweep has accuracy (data without labels). The objectives do not compare across methods and
the stability has no value per seed and task, so neither ranks methods.

The work is split by job: ``mtc.results.cells`` (the published numbers, ``cells.csv``, the
per-seed values), ``mtc.results.significance`` (Wilcoxon, the rank table, Friedman and
Nemenyi, the critical difference) and ``mtc.results.rendering`` (figures, markdown tables,
compare.md, the files written); this module is the command, and every name of those modules
that it always offered is importable from it as before (``__all__``).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from mtc.cli import fail
from mtc.errors import InputError
from mtc.metrics import METRIC_NAMES
from mtc.results.cells import (
    PUBLISHED,
    PUBLISHED_COLUMNS,
    SECOND_METRIC,
    cell_frame,
    load_published,
    seed_values,
    summary_rows,
    task_order,
)
from mtc.results.reading import (
    BEST,
    NO_LABELS_BEST,
    Sweep,
    comparison_criterion,
    finished_sweeps,
    open_experiment,
)
from mtc.results.rendering import (
    BOUNDED_SCORES,
    CHOSEN_BY,
    FIGURE_DPI,
    LABEL_FREE,
    NO_EFFECT,
    accuracy_loss_parts,
    benchmark_section,
    benchmark_title,
    chosen_cell,
    colour_range,
    compare_markdown,
    criteria_table,
    display_names,
    draw_cd_diagram,
    draw_heatmap,
    friedman_section,
    grid_statistics,
    heatmap_figure,
    label_free_table,
    markdown_table,
    mean_std,
    overview_table,
    parse_point,
    score_table,
    store_description,
    sweep_heatmap,
    value_order,
    wilcoxon_markdown,
    without_effect,
    write_outputs,
)
from mtc.results.recommend import recommendation_sentence, recommendations
from mtc.results.report import CRITERIA
from mtc.results.significance import (
    ALPHA,
    FRIEDMAN_COLUMNS,
    MIN_CD_CELLS,
    MIN_PAIRS,
    cd_refusal,
    critical_difference,
    friedman_frames,
    rank_table,
    shared_methods,
    wilcoxon_frame,
    wilcoxon_pair,
)
from mtc.results.size_curves import size_curve_frame
from mtc.store import preflight

__all__ = [  # the command, and the names of cells, significance and rendering it has always offered
    "ALPHA", "BOUNDED_SCORES", "CHOSEN_BY", "FIGURE_DPI", "FRIEDMAN_COLUMNS", "KIND_TAG", "LABEL_FREE", "MIN_CD_CELLS",
    "MIN_PAIRS", "NOT_RANKING", "NO_EFFECT", "PUBLISHED", "PUBLISHED_COLUMNS", "RANKING", "SECOND_METRIC",
    "Comparison", "accuracy_loss_parts", "benchmark_section", "benchmark_title", "build_comparison", "cd_refusal",
    "cell_frame", "check_criterion", "check_metric", "chosen_cell", "colour_range", "compare", "compare_markdown",
    "criteria_table", "criterion_metric", "critical_difference", "display_names",
    "draw_cd_diagram", "draw_heatmap", "friedman_frames", "friedman_section", "grid_statistics", "heatmap_figure",
    "label_free_table", "load_published", "log_run", "main", "markdown_table", "mean_std", "overview_table",
    "parse_args", "parse_point", "rank_table", "read_comparison", "score_table", "seed_values", "shared_methods",
    "summary_rows", "sweep_heatmap", "task_order", "value_order", "wilcoxon_frame", "wilcoxon_markdown",
    "wilcoxon_pair", "without_effect", "write_outputs",
]

RANKING = (BEST, NO_LABELS_BEST)  # the selections that can rank methods (--criterion)
NOT_RANKING = {  # why the other selections cannot
    "objective": "each method minimises its own objective, whose values do not compare across methods",
    "objective_relative": "each method minimises its own objective, whose values do not compare across methods",
    "stability": "it is one value per grid point (the ARI between pairs of seeds), no score per seed and task",
}
KIND_TAG = "mtc.kind"


@dataclass(frozen=True)
class Comparison:
    """Everything ``compare.md`` shows; each frame is also written as a CSV.

    Attributes
    ----------
    sweeps : list of Sweep
        The sweeps compared.
    cells, wilcoxon, friedman, nemenyi, rank_table, size_curves : pandas.DataFrame
        The tables (``cells.csv``, ``wilcoxon.csv``, ...).
    notes : list of str
        What was left out or is worth knowing.
    criterion : str
        The selection of the points that the tables, tests and ranks use (``acc``, or
        ``silhouette`` for data without labels).
    metric : str
        The score the tables, tests and ranks compare (``acc``, ``nmi_max``, ...; the
        criterion's own metric for a label-free criterion).
    """

    sweeps: list[Sweep]
    cells: pd.DataFrame
    wilcoxon: pd.DataFrame
    friedman: pd.DataFrame
    nemenyi: pd.DataFrame
    rank_table: pd.DataFrame
    size_curves: pd.DataFrame
    notes: list[str]
    criterion: str = BEST
    metric: str = BEST


# --- the command ----------------------------------------------------------------------


def check_metric(metric: str) -> None:
    """Raise InputError unless ``metric`` is one of the per-task scores (METRIC_NAMES)."""
    if metric not in METRIC_NAMES:
        raise InputError(f"unknown --metric {metric!r}; choose one of {', '.join(METRIC_NAMES)}")


def check_criterion(criterion: str | None) -> None:
    """Raise InputError unless ``criterion`` is None (chosen by the sweeps) or one of RANKING."""
    if criterion is None or criterion in RANKING:
        return
    why = f"--criterion {criterion}: {NOT_RANKING[criterion]}" if criterion in NOT_RANKING else \
        f"unknown --criterion {criterion!r}"
    raise InputError(f"{why}; choose one of {', '.join(RANKING)}")


def criterion_metric(criterion: str, metric: str) -> str:
    """The score the tables show: ``metric`` at the best point by accuracy, else the label-free
    criterion's own (``silhouette``).

    Raises
    ------
    InputError
        A ``metric`` other than acc with a label-free criterion.
    """
    if criterion == BEST:
        return metric
    if metric != "acc":
        raise InputError(f"--metric {metric} needs --criterion acc (labels); by {criterion} the tables show "
                         f"{CRITERIA[criterion][0]}")
    return CRITERIA[criterion][0].split("/")[0]


def build_comparison(sweeps: list[Sweep], notes: list[str], metric: str, published: pd.DataFrame,
                     criterion: str = BEST) -> Comparison:
    """Cells, tests and ranks of the sweeps for ``metric`` at the points of ``criterion`` (and
    acc and nmi_max in cells when the criterion is accuracy)."""
    tabled = [metric, "acc", SECOND_METRIC] if criterion == BEST else [metric]
    cells = cell_frame(sweeps, list(dict.fromkeys(tabled)), published)
    table = rank_table(cells, metric, criterion)
    if table.shape[1] >= 3 and len(table) >= 2 and (table.nunique(axis=1) > 1).any():
        friedman, nemenyi = friedman_frames(table)
    else:
        friedman, nemenyi = pd.DataFrame(columns=FRIEDMAN_COLUMNS), pd.DataFrame(index=pd.Index([], name="method"))
    return Comparison(sweeps, cells, wilcoxon_frame(seed_values(sweeps, metric, criterion), metric, cells, criterion),
                      friedman, nemenyi, table, size_curve_frame(sweeps, criterion, metric), notes, criterion, metric)


def read_comparison(client, experiment_id: str, metric: str = BEST, benchmarks: list[str] | None = None,
                    methods: list[str] | None = None, criterion: str | None = None,
                    published: Path = PUBLISHED) -> Comparison:
    """The comparison of the experiment's newest finished sweeps, in memory (what ``compare``
    writes and ``mtc.results.comparison`` returns); ``criterion`` None: accuracy, or silhouette
    when no sweep has accuracy (``comparison_criterion``)."""
    numbers = load_published(published)  # a bad file is found before the sweeps are read
    sweeps, notes = finished_sweeps(client, experiment_id, benchmarks, methods, criterion)
    criterion = criterion or comparison_criterion([sweep.points for sweep in sweeps])
    metric = criterion_metric(criterion, metric)
    return build_comparison(sweeps, notes, metric, numbers, criterion)


def log_run(client, experiment_id: str, paths: list[Path], metric: str, sweeps: list[Sweep],
            criterion: str = BEST) -> str:
    """A new MLflow run "compare" (tag mtc.kind=compare) holding the files and, per benchmark, the
    label-free answer (mtc.results.recommend: tags ``mtc.recommended/<benchmark>``, metrics
    ``recommended_silhouette/<benchmark>`` and, with labels, ``recommended_acc/<benchmark>``);
    returns its id."""
    run = client.create_run(experiment_id, run_name="compare", tags={KIND_TAG: "compare"})
    run_id = run.info.run_id
    client.log_param(run_id, "metric", metric)
    client.log_param(run_id, "criterion", criterion)
    client.log_param(run_id, "sweeps", len(sweeps))
    for found in recommendations(sweeps):
        client.set_tag(run_id, f"mtc.recommended/{found.benchmark}", recommendation_sentence(found)[:5000])
        if found.found:
            client.log_metric(run_id, f"recommended_silhouette/{found.benchmark}", found.silhouette)
            if found.acc is not None:
                client.log_metric(run_id, f"recommended_acc/{found.benchmark}", found.acc)
    for path in paths:
        client.log_artifact(run_id, str(path))
    client.set_terminated(run_id, "FINISHED")
    return run_id


def compare(tracking_uri: str, experiment: str, out: Path, metric: str = "acc", benchmarks: list[str] | None = None,
            methods: list[str] | None = None, log: bool = True, published: Path = PUBLISHED,
            criterion: str | None = None) -> dict:
    """Compare the finished sweeps of an experiment; write and (when ``log``) log the outputs.

    Parameters
    ----------
    tracking_uri, experiment : str
        The MLflow store and experiment holding the sweeps.
    out : pathlib.Path
        Folder for compare.md, the CSVs and the PNGs.
    metric : str
        The score of the tables, tests and ranks (one of METRIC_NAMES) with the criterion acc.
    benchmarks, methods : list of str, optional
        Keep only these (all when not given).
    log : bool
        Log the files to a new MLflow run "compare".
    published : pathlib.Path
        The CSV of published numbers.
    criterion : str, optional
        What chooses each sweep's point and ranks the methods: ``acc`` or ``silhouette``
        (RANKING); by default acc, or silhouette, with a note, when no sweep has accuracy.

    Returns
    -------
    dict
        ``comparison`` (Comparison), ``paths`` (files written), ``run_id`` (None without ``log``).

    Raises
    ------
    InputError
        Unknown metric or criterion, a metric other than acc with a label-free criterion, no
        store, no such experiment, no finished sweep (after the filters).
    """
    check_metric(metric)
    check_criterion(criterion)
    client, experiment_id = open_experiment(tracking_uri, experiment)
    comparison = read_comparison(client, experiment_id, metric, benchmarks, methods, criterion, published)
    paths = write_outputs(comparison, comparison.metric, out,
                          f"experiment `{experiment}` of {store_description(tracking_uri, Path(out).resolve())}")
    read_only = log and read_only_store(tracking_uri)
    if read_only:  # the outputs are what was asked for; a store that takes no run keeps them unlogged
        comparison.notes.append(f"not logged to MLflow: {read_only} is read-only; the outputs are in {out}")
    run_id = log_run(client, experiment_id, paths, comparison.metric, comparison.sweeps,
                     comparison.criterion) if log and not read_only else None
    return {"comparison": comparison, "paths": paths, "run_id": run_id}


def read_only_store(tracking_uri: str) -> str | None:
    """The SQLite store's file when it, or its folder, takes no writes (a read-only filesystem,
    or a file without write permission), else None; a server or database store is not judged."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    path = Path(tracking_uri[len("sqlite:///"):]).resolve()
    return None if os.access(path, os.W_OK) and os.access(path.parent, os.W_OK) else str(path)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line of ``python -m mtc.results.compare``."""
    parser = argparse.ArgumentParser(prog="python -m mtc.results.compare", description=__doc__.splitlines()[0])
    parser.add_argument("--tracking-uri", default="sqlite:///mlflow.db", help="the sweeps' MLflow store")
    parser.add_argument("--experiment", default="mtc")
    parser.add_argument("--out", type=Path, default=Path("outputs/compare"), help="folder for the outputs")
    parser.add_argument("--metric", default="acc", help=f"one of {', '.join(METRIC_NAMES)} (with --criterion acc)")
    parser.add_argument("--criterion", help=f"what chooses each sweep's grid point and ranks the methods: "
                                            f"{' or '.join(RANKING)} (label-free; the tables then show it); default: "
                                            "acc, or silhouette when no sweep has accuracy (data without labels)")
    parser.add_argument("--benchmarks", nargs="+",
                        help="only these benchmarks; <data>@<n1>+<n2> pools the sweeps <data>-n<n1>, <data>-n<n2>")
    parser.add_argument("--methods", nargs="+", help="only these methods (sweep labels, e.g. smbc_sequential)")
    parser.add_argument("--published", type=Path, default=PUBLISHED, help="CSV of published numbers")
    parser.add_argument("--no-log", action="store_true", help="do not log the outputs to an MLflow run")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run the command; bad input is one line on stderr and exit 2."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    preflight.process_env()
    try:
        result = compare(args.tracking_uri, args.experiment, args.out, args.metric, args.benchmarks, args.methods,
                         not args.no_log, args.published, args.criterion)
    except InputError as error:
        fail(error)
    comparison = result["comparison"]
    for note in comparison.notes:
        print(note)
    print(f"compared {len(comparison.sweeps)} sweeps: {result['paths'][0]}")
    if result["run_id"]:
        print(f"MLflow compare run: {result['run_id']}")


if __name__ == "__main__":
    main()
