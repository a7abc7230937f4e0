"""How close our numbers come to the papers': ``python -m mtc.results.fidelity``.

Reads every committed comparison (``docs/results/compare_*/cells.csv``, sub-folders included)
and the published numbers (``mtc/published_results.csv``), and writes ``fidelity.csv`` and
``fidelity.md`` into the results folder. For every paper, table, benchmark, method of ours and
metric of the published rows (methods with no config here, ``paper:*``, are left out), per task
and for the mean over the table's tasks:

- the published value (the mean over tasks: the mean of the row's task values);
- ours at the paper's protocol: the cell at the best grid point by mean accuracy over tasks
  (selection ``acc``), its mean over seeds; the SPMTC paper's NMI, whose normalisation it does
  not state, is set beside our ``nmi_max`` as docs/results/spmtc.md does (OURS_METRIC);
- the gap in points (ours minus the paper's, x 100, two decimals) and a status: ``within 3
  points`` (|gap| <= 3), ``above``, ``below``, or ``not run`` (no cell of ours);
- where a result page measures or argues why a row differs (status above, below or not run),
  a short reason and a link to it, read from ``fidelity_reasons.yaml`` beside the folders (data,
  not code: the first entry whose paper, benchmark, method, metric and status match gives the
  reason); ``unexplained`` where none does.

A cell that several folders hold (a benchmark shared by two studies) must have the same point
and mean in each; otherwise the command names them and exits 2. ``folders`` lists them, the one
with the most methods on that benchmark first (the one fidelity.md links). ``fidelity.md`` shows the mean
rows, a summary of statuses per paper first (``summary_table``, also quoted in
docs/results/README.md); ``fidelity.csv`` has every row. tests/test_fidelity.py regenerates
both from the committed files and checks they are what is committed.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from mtc.cli import fail
from mtc.config import method_display_names
from mtc.errors import InputError
from mtc.results.cells import PUBLISHED, read_published
from mtc.results.reading import BEST

RESULTS = Path("docs/results")  # relative to the repository root, where the command runs
REASONS = "fidelity_reasons.yaml"
OURS_METRIC = {"acc": "acc", "nmi_max": "nmi_max", "nmi": "nmi_max"}  # published metric -> the metric of ours
WITHIN = 3.0  # points
STATUSES = ("within 3 points", "above", "below", "not run")
UNEXPLAINED = "unexplained"
MATCH_KEYS = ("paper", "benchmark", "method", "metric", "status")
EXPLAIN_KEYS = ("label", "link", "reason")
COLUMNS = ["paper", "table", "benchmark", "method", "metric", "task", "published", "ours", "ours_std", "n",
           "ours_metric", "point", "gap", "status", "reason", "link", "folders"]
SAME = 1e-9  # two folders' means of one cell may differ by no more


def read_cells(results: Path) -> pd.DataFrame:
    """The cells at the best point by accuracy of every ``compare_*/**/cells.csv`` under
    ``results``, one row per (benchmark, method, task, metric) with ``folders``: the folders
    holding it (relative to ``results``, space-separated).

    Raises
    ------
    InputError
        No cells.csv, or two folders whose cells of the same key differ in point or mean.
    """
    paths = sorted(path for folder in sorted(Path(results).glob("compare_*")) for path in folder.rglob("cells.csv"))
    if not paths:
        raise InputError(f"--results {results}: no compare_*/cells.csv (run from the repository root)")
    frames = []
    for path in paths:
        cells = pd.read_csv(path, dtype={"benchmark": str, "method": str, "task": str, "metric": str})
        cells = cells[cells.selection == BEST]
        frames.append(cells[["benchmark", "method", "task", "metric", "point", "mean", "std", "n"]].assign(
            folder=path.parent.relative_to(results).as_posix()))
    cells = pd.concat(frames, ignore_index=True)
    key = ["benchmark", "method", "task", "metric"]
    size = cells.groupby(["benchmark", "folder"]).method.nunique()  # the folder with the most methods first
    cells = cells.assign(size=[-size[b, f] for b, f in zip(cells.benchmark, cells.folder)]).sort_values(
        ["size", "folder"], kind="stable")
    spread = cells.groupby(key).agg(points=("point", "nunique"), low=("mean", "min"), high=("mean", "max"),
                                    folders=("folder", lambda f: " ".join(dict.fromkeys(f))))
    clash = spread[(spread.points > 1) | (spread.high - spread.low > SAME)]
    if len(clash):
        (benchmark, method, task, metric), row = next(clash.iterrows())
        raise InputError(f"{benchmark} {method} {task} {metric}: {row.folders} differ in point or mean; "
                         f"{len(clash)} such cells")
    cells = cells.drop_duplicates(key).drop(columns=["folder", "size"]).sort_index()
    return cells.merge(spread.folders.reset_index(), on=key)


def read_reasons(path: Path) -> tuple[dict, list[dict]]:
    """The papers (id -> title and result page) and the reason entries of ``fidelity_reasons.yaml``.

    Raises
    ------
    InputError
        A missing file, an entry without a label, link and reason, or with another key than
        MATCH_KEYS and EXPLAIN_KEYS.
    """
    if not Path(path).is_file():
        raise InputError(f"--reasons {path}: missing file")
    data = yaml.safe_load(Path(path).read_text()) or {}
    papers, reasons = data.get("papers") or {}, data.get("reasons") or []
    for i, entry in enumerate(reasons):
        unknown = set(entry) - {*MATCH_KEYS, *EXPLAIN_KEYS}
        if unknown or not all(entry.get(key) for key in EXPLAIN_KEYS):
            raise InputError(f"--reasons {path}: entry {i + 1} needs {', '.join(EXPLAIN_KEYS)}, and only "
                             f"{', '.join(MATCH_KEYS)} to match ({', '.join(sorted(unknown)) or 'one missing'})")
    return papers, reasons


def matches(entry: dict, row: dict) -> bool:
    """Whether a reason entry covers a row: each of MATCH_KEYS absent, ``*``, the row's value or
    a list holding it."""
    for key in MATCH_KEYS:
        wanted = entry.get(key, "*")
        if wanted != "*" and row[key] not in (wanted if isinstance(wanted, list) else [wanted]):
            return False
    return True


def status_of(gap: float) -> str:
    """The status of a gap in points (already rounded to two decimals); NaN: ``not run``."""
    if pd.isna(gap):
        return "not run"
    return STATUSES[0] if abs(gap) <= WITHIN else "above" if gap > 0 else "below"


def published_rows(published: pd.DataFrame) -> pd.DataFrame:
    """The published rows compared: methods of ours, metrics of OURS_METRIC, per task and the
    mean over each (paper, table, benchmark, method, metric)'s tasks (task ``mean``). In the
    file's order: per paper, table and benchmark, one metric after the other, each method's tasks
    and then their mean."""
    rows = published[~published.method.str.startswith("paper:") & published.metric.isin(OURS_METRIC)]
    rows = rows.assign(published=pd.to_numeric(rows["mean"]), order=np.arange(len(rows), dtype=float))
    group = ["paper", "table", "benchmark", "method", "metric"]
    means = rows.groupby(group, sort=False).agg(published=("published", "mean"), order=("order", "max"))
    rows = pd.concat([rows[[*group, "task", "published", "order"]],
                      means.reset_index().assign(task="mean", order=lambda f: f.order + 0.5)], ignore_index=True)
    nested = [["paper"], ["paper", "table"], ["paper", "table", "benchmark"], ["paper", "table", "benchmark", "metric"],
              ["paper", "table", "benchmark", "metric", "method"]]
    keys = pd.DataFrame({i: rows.groupby(by, sort=False).order.transform("min") for i, by in enumerate(nested)})
    keys["row"] = rows.order
    return rows.loc[keys.sort_values(list(keys.columns)).index].drop(columns="order").reset_index(drop=True)


def fidelity_frame(published: pd.DataFrame, cells: pd.DataFrame, reasons: list[dict]) -> pd.DataFrame:
    """``fidelity.csv``: COLUMNS, one row per published row compared (``published_rows``)."""
    rows = published_rows(published)
    rows = rows.assign(ours_metric=rows.metric.map(OURS_METRIC))
    ours = cells.rename(columns={"metric": "ours_metric", "mean": "ours", "std": "ours_std"})
    frame = rows.merge(ours, on=["benchmark", "method", "task", "ours_metric"], how="left")
    gap = ((frame.ours - frame.published) * 100).round(2)
    frame = frame.assign(published=frame.published.round(6), ours=frame.ours.round(6),
                         ours_std=frame.ours_std.round(6), n=frame.n.astype("Int64"), gap=gap,
                         status=gap.map(status_of))
    explained = [reason_of(row, reasons) for row in frame.to_dict("records")]
    frame["reason"] = [reason for reason, _ in explained]
    frame["link"] = [link for _, link in explained]
    return frame[COLUMNS]


def reason_of(row: dict, reasons: list[dict]) -> tuple[str, str]:
    """(label, link) of a row: nothing within 3 points, else those of the first entry that
    matches, else UNEXPLAINED."""
    if row["status"] == STATUSES[0]:
        return "", ""
    entry = next((entry for entry in reasons if matches(entry, row)), None)
    return (UNEXPLAINED, "") if entry is None else (str(entry["label"]), str(entry["link"]))


def fidelity_csv(frame: pd.DataFrame) -> str:
    """The text of ``fidelity.csv``."""
    return frame.to_csv(index=False, lineterminator="\n")


def summary_table(frame: pd.DataFrame, papers: dict) -> str:
    """Markdown: per paper, how many of its mean rows (paper, table, benchmark, method, metric)
    have each status, and how many of those above, below or not run are unexplained."""
    means = frame[frame.task == "mean"]
    lines = ["| paper | " + " | ".join(STATUSES) + " | unexplained (of above, below, not run) | rows |",
             "|---|" + "---|" * (len(STATUSES) + 2)]
    for paper, rows in means.groupby("paper", sort=False):
        counts = rows.status.value_counts()
        title = papers.get(paper, {}).get("title", paper)
        lines.append(f"| [{title}](fidelity.md#{anchor(title)}) | "
                     + " | ".join(str(int(counts.get(status, 0))) for status in STATUSES)
                     + f" | {int((rows.reason == UNEXPLAINED).sum())} | {len(rows)} |")
    counts = means.status.value_counts()
    lines.append("| all | " + " | ".join(str(int(counts.get(status, 0))) for status in STATUSES)
                 + f" | {int((means.reason == UNEXPLAINED).sum())} | {len(means)} |")
    return "\n".join(lines)


def anchor(title: str) -> str:
    """The anchor of a heading, as mkdocs (Python-Markdown's toc) and GitHub make it from an ASCII
    title: punctuation but ``-`` and ``_`` dropped, lower case, spaces as ``-``."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", title).strip().lower())


def points(value: float) -> str:
    """A fraction as percentage points, two decimals; "" for none."""
    return "" if pd.isna(value) else f"{100 * value:.2f}"


def reasons_list(frame: pd.DataFrame, reasons: list[dict]) -> list[str]:
    """Markdown items, one per reason entry that explains a mean row: its label, its link and
    the reason in full."""
    used = set(frame.loc[frame.task == "mean", "reason"])
    return [f"- **{entry['label']}** ([{str(entry['link']).split('#')[0]}]({entry['link']})): "
            f"{' '.join(str(entry['reason']).split())}" for entry in reasons if entry["label"] in used]


def fidelity_markdown(frame: pd.DataFrame, papers: dict, reasons: list[dict]) -> str:
    """The text of ``fidelity.md``: how it is made, the summary, the reasons, one table of mean
    rows per paper."""
    names = method_display_names()
    parts = ["# Fidelity: our numbers beside the papers'", "",
             "Generated by `python -m mtc.results.fidelity` (from the repository root) from every "
             "`compare_*/cells.csv` of this folder and `mtc/published_results.csv`; not edited by hand "
             "(tests/test_fidelity.py regenerates it and checks it is what is committed).", "",
             "For every table of the papers, benchmark, method of ours and metric: the paper's value (the mean "
             "over the table's tasks), ours at the paper's protocol (the best grid point by mean accuracy over "
             "tasks, mean over seeds, from the compare folder the benchmark links to), the gap in points (ours "
             "minus the paper's) and a status: `within 3 points`, `above` or `below` by more than 3 points, or "
             "`not run` (no cell of ours). The SPMTC paper's NMI, whose normalisation it does not state, is set "
             "beside our `nmi_max`. Where a result page measures or argues why a row differs, *why* links to it "
             "(the map is [fidelity_reasons.yaml](fidelity_reasons.yaml)); `unexplained` where none does. "
             "Per task, and with our std and number of seeds: [fidelity.csv](fidelity.csv). Methods the papers "
             "ran and we have no config for (`paper:*` in the published file) are not listed.", "",
             "## Summary", "", "Mean rows (one per table, benchmark, method and metric) by status:", "",
             summary_table(frame, papers), "",
             "## Reasons", "", "What the result pages measured or argued about the rows they explain:", "",
             *reasons_list(frame, reasons), ""]
    means = frame[frame.task == "mean"]
    for paper, rows in means.groupby("paper", sort=False):
        info = papers.get(paper, {})
        page = f" ([{info['page']}]({info['page']}))" if info.get("page") else ""
        parts += [f"## {info.get('title', paper)}", "",
                  f"`{paper}` in the published file{page}: {', '.join(dict.fromkeys(rows.table))}; values in %.", "",
                  "| table | benchmark | method | metric | paper | ours | gap | status | why |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for row in rows.itertuples(index=False):
            folder = row.folders.split()[0] if isinstance(row.folders, str) else ""
            benchmark = f"[{row.benchmark}]({folder}/compare.md)" if folder else row.benchmark
            name = names.get(row.method, row.method)
            method = f"{name} (`{row.method}`)" if name != row.method else f"`{row.method}`"
            metric = row.metric if row.metric == row.ours_metric else f"{row.metric} (ours: {row.ours_metric})"
            why = f"[{row.reason}]({row.link})" if row.link else row.reason
            gap = "" if pd.isna(row.gap) else f"{row.gap:+.2f}"
            parts.append(f"| {row.table} | {benchmark} | {method} | {metric} | {points(row.published)} | "
                         f"{points(row.ours)} | {gap} | {row.status} | {why} |")
        parts.append("")
    return "\n".join(parts)


def fidelity(results: Path = RESULTS, published: Path = PUBLISHED, reasons: Path | None = None
             ) -> tuple[pd.DataFrame, dict, list[dict]]:
    """The fidelity frame, and the papers and reason entries of the reasons file, in memory
    (nothing written).

    Raises
    ------
    InputError
        A missing or bad published file or reasons file, no cells, cells that disagree.
    """
    check_results(Path(results))
    papers, entries = read_reasons(reasons or Path(results) / REASONS)
    frame = fidelity_frame(read_published(published), read_cells(Path(results)), entries)
    return frame, papers, entries


def check_results(results: Path) -> None:
    """Refuse a ``--results`` that is missing, a file or an empty folder, saying what it should hold.

    Raises
    ------
    InputError
        ``results`` is not a folder, or an empty one.
    """
    if not results.is_dir():
        what = "a file, not a folder" if results.exists() else "no such folder"
    elif not any(results.iterdir()):
        what = "an empty folder"
    else:
        return
    raise InputError(f"--results {results}: {what}; expected the compare_* folders (their cells.csv) and {REASONS} "
                     "in it (run from the repository root, or give the folder that holds them)")


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line of ``python -m mtc.results.fidelity``."""
    parser = argparse.ArgumentParser(prog="python -m mtc.results.fidelity", description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help="the folder of the compare_* folders, written into (default: docs/results)")
    parser.add_argument("--published", type=Path, default=PUBLISHED, help="CSV of published numbers")
    parser.add_argument("--reasons", type=Path, help=f"the reasons map (default: <results>/{REASONS})")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Write fidelity.csv and fidelity.md; bad input is one line on stderr and exit 2."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        frame, papers, reasons = fidelity(args.results, args.published, args.reasons)
    except InputError as error:
        fail(error)
    try:
        (args.results / "fidelity.csv").write_text(fidelity_csv(frame))
        (args.results / "fidelity.md").write_text(fidelity_markdown(frame, papers, reasons))
    except OSError as error:
        fail(InputError(f"cannot write {error.filename} ({error.strerror}); give a writable folder with --results"))
    means = frame[frame.task == "mean"]
    counts = ", ".join(f"{status} {int((means.status == status).sum())}" for status in STATUSES)
    print(f"{len(means)} published means: {counts}; unexplained {int((means.reason == UNEXPLAINED).sum())}: "
          f"{args.results / 'fidelity.md'}")


if __name__ == "__main__":
    main()
