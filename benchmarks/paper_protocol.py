"""A paper's whole protocol in-process on all CPUs, timed: every problem x sample size x
random draw (or seed) x every method's grid; writes the per-trial scores and prints the
paper's tables (and, with sample sizes, its accuracy-vs-samples figure).

    MTC_DATA_DIR=../shared/data python benchmarks/paper_protocol.py smtnmf|spmtc \
        [--problems ...] [--methods ...] [--draws N] [--jobs 2] [--out DIR] [--summarize CSV ...]

Protocols (``PROTOCOLS``):
- ``smtnmf``: SDM-14 Sec. 5.1, Table 5 and Fig. 3: 4 sample sizes x 30 draws (the data
  configs draw a fresh sample per seed), accuracy "the total average from 120 runs".
- ``spmtc``: Ren et al. Sec. 5.1, Tables 4-7: the fixed data sets x 20 seeds, ACC and NMI
  (``nmi_max``, MALSAR's normalisation), mean over the 20 runs.

A trial here is exactly a sweep's trial (the data config's dataset or draw for the trial's
seed, the method config's prototype with the grid point and seed, ``mtc.trial.run_trial``
scoring it), without Ray and MLflow: the protocols run 10,000-30,000 fits of a fraction of
a second, where a tracked sweep spends most of its time logging. ``python -m mtc.sweep
+experiment=smtnmf_paper|spmtc_paper method=<method> data=<problem>`` runs any one cell
tracked, with the same numbers (docs/results/smtnmf.md compares one). Work is split by
(problem, size, seed); each worker uses one BLAS thread.

Outputs in ``--out``: ``trials.csv`` (one row per trial, failures with their error),
``curves.png`` (with sample sizes: mean accuracy over tasks vs total samples per problem, at
each method's best grid point), and the printed tables: per problem and method the scores
per task averaged over all sizes and seeds at the grid point with the best mean accuracy
over tasks (labels used: the papers' protocol), then that choice beside the best point per
size, the per-column best and the best point per draw (an oracle).
"""

from __future__ import annotations

import argparse
import csv
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from threadpoolctl import threadpool_limits

from mtc.cli import compose_config
from mtc.config import Trial, method_spec
from mtc.data.spec import data_spec
from mtc.numerics.cache import Cache
from mtc.trial import run_trial


@dataclass(frozen=True)
class Protocol:
    problems: list[str]  # the default problems (data configs)
    draws: int  # seeds per (problem, size)
    methods: dict[str, tuple[str, list[str]]]  # label -> (method config, overrides): the table's rows
    variants: dict[str, tuple[str, list[str]]]  # documented knobs, run with --methods
    sizes: dict[str, list[int]] = field(default_factory=dict)  # data-config prefix -> samples_per_task values
    metrics: tuple[str, ...] = ("acc",)


PROTOCOLS = {
    "smtnmf": Protocol(
        problems=["webkb_pp", "smtnmf_reuters_orgs_vs_people", "smtnmf_reuters_orgs_vs_places",
                  "smtnmf_reuters_people_vs_places"],
        draws=30,
        methods={"S-Ncut": ("smtnmf_ncut", []), "S-NMF": ("smtnmf_snmf", []), "S-Kmeans": ("kmeans", []),
                 "A-Ncut": ("smtnmf_a_ncut", []), "A-NMF": ("smtnmf_a_snmf", []), "A-Kmeans": ("a_kmeans", []),
                 "SMT-NMF": ("smtnmf", [])},
        variants={"SMT-NMF sym": ("smtnmf", ["++method.params.normalize=sym"]),
                  "S-NMF sym": ("smtnmf_snmf", ["++method.params.normalize=sym"]),
                  "SMT-NMF quarter a=0.5": ("smtnmf", ["++method.params.update=quarter_split",
                                                       "++method.params.alpha=0.5"])},
        sizes={"webkb_pp": [20, 40, 60, 80], "smtnmf_reuters": [20, 40, 60, 80], "smtnmf_20ng": [10, 20, 30, 40]}),
    "spmtc": Protocol(
        problems=["orgs_vs_people_counts", "orgs_vs_places_counts", "people_vs_places_counts", "webkb4_counts"],
        draws=20,
        methods={"KM": ("kmeans", []), "SC": ("ncut", []), "ASI": ("asi", []), "All KM": ("a_kmeans", []),
                 "All SC": ("a_ncut", []), "All ASI": ("a_asi", []), "LSSMTC": ("lssmtc", []),
                 "SPMTC-h": ("spmtc_h", ["++method.params.unselected_rows=update"]),
                 "SPMTC-s": ("spmtc_s", ["++method.params.unselected_rows=update"])},
        variants={"LSSMTC eigen": ("lssmtc", ["++method.params.w_update=eigen"]),
                  "SPMTC-h eigen": ("spmtc_h", ["++method.params.unselected_rows=update",
                                                "++method.params.w_update=eigen"]),
                  "SPMTC-s eigen": ("spmtc_s", ["++method.params.unselected_rows=update",
                                                "++method.params.w_update=eigen"]),
                  # the unsure points of [SP] Sec. 4.2 (mtc/methods/spmtc.py), one switch at a time
                  "SPMTC-h power 1": ("spmtc_h", ["++method.params.unselected_rows=update", "++method.params.weight_power=1"]),
                  "SPMTC-h round": ("spmtc_h", ["++method.params.unselected_rows=update", "++method.params.quantile_rounding=round"]),
                  "SPMTC-h freeze": ("spmtc_h", ["++method.params.unselected_rows=freeze"]),
                  "SPMTC-s power 1": ("spmtc_s", ["++method.params.unselected_rows=update", "++method.params.weight_power=1"]),
                  "SPMTC-s positive": ("spmtc_s", ["++method.params.unselected_rows=update", "++method.params.chosen=positive"]),
                  "SPMTC-s freeze": ("spmtc_s", ["++method.params.unselected_rows=freeze"]),
                  "SPMTC-s gamma 1": ("spmtc_s", ["++method.params.unselected_rows=update", "++method.params.gamma_ratio=1.0"]),
                  "SPMTC-h l2": ("spmtc_h", ["++method.params.unselected_rows=update",
                                             "++method.params.selection_rows=l2"]),
                  "SPMTC-s l2": ("spmtc_s", ["++method.params.unselected_rows=update",
                                             "++method.params.selection_rows=l2"])},
        metrics=("acc", "nmi_max")),
}


def sizes_of(protocol: Protocol, problem: str) -> list[int | None]:
    return next((sizes for prefix, sizes in protocol.sizes.items() if problem.startswith(prefix)), [None])


FIT_CACHE = Cache(size=2)  # one per joblib worker process, as a sweep's worker keeps one (WORKER_CACHES)


def run_unit(data, methods, problem, size, seed, metrics_):
    """Every method and grid point on the draw of ``seed``: rows for trials.csv."""
    rows = []
    with threadpool_limits(limits=1):
        dataset = data.load(seed)
        for label, spec in methods.items():
            prototype = spec.prototype(n_clusters=dataset.n_clusters)
            for point in spec.grid_points():
                row = {"problem": problem, "size": size or "", "seed": seed,
                       "total": size * len(dataset.tasks) if size else sum(t.n_samples for t in dataset.tasks),
                       "method": label, "point": ",".join(f"{k}={v}" for k, v in sorted(point.items())) or "-",
                       "n_features": dataset.n_features}
                try:
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        outcome = run_trial(dataset, prototype, Trial(point, seed), FIT_CACHE)
                except Exception as error:  # recorded, as a sweep records a failed trial
                    rows.append({**row, "error": f"{type(error).__name__}: {error}"})
                    continue
                row["warnings"] = " | ".join(sorted({str(w.message) for w in caught}))
                metrics = outcome.metrics
                row.update({f"{m}/{t}": metrics[f"{m}/{t}"] for m in metrics_ for t in [*dataset.task_names, "mean"]})
                row.update({"fit_seconds": metrics["fit_seconds"], "n_iter": metrics["n_iter"], "error": ""})
                rows.append(row)
    return rows


def specs(problem: str, size: int | None, labels: dict, data_overrides: list[str]) -> tuple:
    cfg = compose_config([f"data={problem}", *([f"data.params.samples_per_task={size}"] if size else []),
                          *data_overrides])
    methods = {label: method_spec(compose_config([f"method={name}", *extra])) for label, (name, extra) in labels.items()}
    return data_spec(cfg.data), methods


def best_points(rows):
    """(problem, method) -> the grid point with the best mean accuracy over all sizes and draws."""
    sums = {}
    for r in rows:
        if not r["error"]:
            key = (r["problem"], r["method"], r["point"])
            total, count = sums.get(key, (0.0, 0))
            sums[key] = (total + float(r["acc/mean"]), count + 1)
    best = {}
    for (problem, method, point), (total, count) in sums.items():
        if (problem, method) not in best or total / count > best[(problem, method)][1]:
            best[(problem, method)] = (point, total / count)
    return {key: point for key, (point, _) in best.items()}


def task_names(runs) -> list[str]:
    """The tasks of these rows in the dataset's order (rows of other problems leave theirs empty)."""
    return [k.split("/")[1] for k in runs[0] if k.startswith("acc/") and k != "acc/mean" and runs[0][k] != ""]


def mean_of(runs, key: str) -> float:
    return 100 * float(np.mean([float(r[key]) for r in runs]))


def mean_acc(runs, task: str) -> float:
    return mean_of(runs, f"acc/{task}")


def table(rows, problems, labels, metrics):
    """Per method, each metric per task over all sizes and seeds at the grid point with the
    best mean accuracy over tasks (one point for all sizes)."""
    best = best_points(rows)
    lines = []
    for problem in problems:
        chosen = [r for r in rows if r["problem"] == problem and not r["error"]]
        if not chosen:
            continue
        columns = [(m, t) for t in task_names(chosen) + ["mean"] for m in metrics]
        names = [f"{t} {m.split('_')[0].upper()}" if len(metrics) > 1 else t for m, t in columns]
        lines += [f"### {problem}", "", "| method | grid point | runs | " + " | ".join(names) + " |",
                  "|---|---|---|" + "---|" * len(columns)]
        for label in labels:
            runs = [r for r in chosen if r["method"] == label and r["point"] == best.get((problem, label))]
            if runs:
                cells = [f"{mean_of(runs, f'{m}/{t}'):.2f}" for m, t in columns]
                lines.append(f"| {label} | `{runs[0]['point']}` | {len(runs)} | " + " | ".join(cells) + " |")
        failed = sum(1 for r in rows if r["problem"] == problem and r["error"])
        lines += [""] + ([f"{failed} trial(s) failed (see trials.csv)", ""] if failed else [])
    return "\n".join(lines)


def selection_table(rows, problems, labels):
    """Mean accuracy over tasks under four choices of grid point (all use labels): one point
    for all sizes (Table 5 above), the best point per sample size, per task the best point
    ("per-column best", each task its own point), and the best point per draw (an oracle:
    each (size, seed) its own point, the accuracies then averaged)."""
    lines = ["| problem | method | one point | best point per size | per-column best | best point per draw |",
             "|---|---|---|---|---|---|"]
    for problem in problems:
        for label in labels:
            runs = [r for r in rows if r["problem"] == problem and r["method"] == label and not r["error"]]
            if not runs:
                continue
            tasks = task_names(runs)
            by_point = {}
            for r in runs:
                by_point.setdefault(r["point"], []).append(r)
            one = max(mean_acc(group, "mean") for group in by_point.values())
            per_size = np.mean([max(mean_acc([r for r in group if r["total"] == total], "mean")
                                    for group in by_point.values())
                                for total in sorted({r["total"] for r in runs})])
            per_column = np.mean([max(mean_acc(group, t) for group in by_point.values()) for t in tasks])
            lines.append(f"| {problem} | {label} | {one:.1f} | {per_size:.1f} | {per_column:.1f} | "
                         f"{per_draw_best(runs):.1f} |")
    return "\n".join(lines)


def per_draw_best(runs) -> float:
    """Mean over draws (size, seed) of the best mean accuracy over tasks among the grid points."""
    best = {}
    for r in runs:
        key = (r["total"], r["seed"])
        best[key] = max(best.get(key, 0.0), float(r["acc/mean"]))
    return 100 * float(np.mean(list(best.values())))


def curve_table(rows, problems, labels):
    """The figure's numbers: mean accuracy over tasks per total sample size, best grid point."""
    best = best_points(rows)
    totals = sorted({int(r["total"]) for r in rows})
    lines = ["| problem | method | " + " | ".join(map(str, totals)) + " |", "|---|---|" + "---|" * len(totals)]
    for problem in problems:
        for label in labels:
            runs = [r for r in rows if r["problem"] == problem and r["method"] == label
                    and r["point"] == best.get((problem, label)) and not r["error"]]
            cells = [f"{mean_acc(group, 'mean'):.1f}" if group else "" for group in
                     ([r for r in runs if int(r["total"]) == t] for t in totals)]
            if runs:
                lines.append(f"| {problem} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def curves(rows, problems, labels, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    best = best_points(rows)
    columns = min(len(problems), 3)
    rows_n = -(-len(problems) // columns)
    fig, axes = plt.subplots(rows_n, columns, figsize=(5.2 * columns, 3.8 * rows_n), squeeze=False, dpi=110)
    for ax, problem in zip(axes.flat, problems):
        for label in labels:
            runs = [r for r in rows if r["problem"] == problem and r["method"] == label
                    and r["point"] == best.get((problem, label)) and not r["error"]]
            totals = sorted({int(r["total"]) for r in runs})
            if totals:
                means = [100 * np.mean([float(r["acc/mean"]) for r in runs if int(r["total"]) == t]) for t in totals]
                ax.plot(totals, means, marker="o", label=label, linewidth=2.2 if label == "SMT-NMF" else 1.2)
        ax.set_title(problem.removeprefix("smtnmf_"), fontsize=11)
        ax.set_xlabel("samples (total over tasks)")
        ax.set_ylabel("accuracy (%), mean over tasks")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(problems):]:
        ax.axis("off")
    handles, names = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=len(names), fontsize=10, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("protocol", choices=sorted(PROTOCOLS))
    parser.add_argument("--problems", nargs="+", help="data configs (default: the protocol's)")
    parser.add_argument("--draws", type=int, help="seeds per problem and size (default: the protocol's)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--methods", nargs="+", help="table rows and/or documented knobs (default: the table's rows)")
    parser.add_argument("--set", action="append", default=[], metavar="data.KEY=VALUE",
                        help="a Hydra override of the data configs, e.g. data.params.text.min_df=2")
    parser.add_argument("--method-set", action="append", default=[], metavar="method.KEY=VALUE",
                        help="a Hydra override of every method config, e.g. method.grid.lambda_=[0.15] (one point)")
    parser.add_argument("--out", type=Path, help="default: outputs/<protocol>_protocol")
    parser.add_argument("--summarize", nargs="+", type=Path, metavar="CSV",
                        help="print the tables and draw the figure from earlier trials.csv files, run nothing")
    args = parser.parse_args(argv)
    protocol = PROTOCOLS[args.protocol]
    known = {**protocol.methods, **protocol.variants}
    unknown = sorted(set(args.methods or []) - set(known))
    if unknown:
        parser.error(f"unknown method(s) {unknown} for {args.protocol}; known: {list(known)}")
    labels = {label: (known[label][0], [*known[label][1], *args.method_set])
              for label in (args.methods or protocol.methods)}
    out = args.out or Path(f"outputs/{args.protocol}_protocol")
    if args.summarize:
        rows = [row for path in args.summarize for row in csv.DictReader(open(path))]
        problems = list(dict.fromkeys(r["problem"] for r in rows))
        present = list(dict.fromkeys(r["method"] for r in rows))
        return report(rows, problems, present, protocol.metrics, out)
    problems = args.problems or protocol.problems
    units = []
    for problem in problems:
        for size in sizes_of(protocol, problem):
            data, methods = specs(problem, size, labels, args.set)
            units += [(data, methods, problem, size, seed, protocol.metrics) for seed in range(args.draws or protocol.draws)]
    trials = len(units) and sum(len(spec.grid_points()) for spec in units[0][1].values()) * len(units)
    print(f"{len(units)} draws x {len(labels)} methods ({trials} trials) on {args.jobs} processes")
    start = time.perf_counter()
    results = Parallel(n_jobs=args.jobs)(delayed(run_unit)(*unit) for unit in units)
    seconds = time.perf_counter() - start
    rows = [row for unit in results for row in unit]
    out.mkdir(parents=True, exist_ok=True)
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(out / "trials.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, keys)
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} trials in {seconds:.1f} s wall ({sum(float(r.get('fit_seconds') or 0) for r in rows):.1f} s "
          f"in fits); {out / 'trials.csv'}")
    report(rows, problems, list(labels), protocol.metrics, out)


def report(rows, problems, labels, metrics, out: Path):
    print(table(rows, problems, labels, metrics))
    print(selection_table(rows, problems, labels))
    if any(len({r["total"] for r in rows if r["problem"] == problem}) > 1 for problem in problems):
        out.mkdir(parents=True, exist_ok=True)
        print(curve_table(rows, problems, labels))
        curves(rows, problems, labels, out / "curves.png")
        print(f"figure: {out / 'curves.png'}")


if __name__ == "__main__":
    main()
