"""The answer ``every_method`` gives on data nobody here prepared: labelled tables that ship
inside Python packages, split into tasks the way a researcher would, and two text-folder tasks
from the raw newsgroup posts, each run with the tutorial's command and every default.

Data sets (rows with a missing value dropped; the label is the class the methods never see):

- palmerpenguins ``penguins_raw`` by study year (PAL0708, PAL0809, PAL0910: 3 tasks), the six
  measurements (culmen length and depth, flipper length, body mass, the two blood isotope
  ratios: scales from -27 to 6300), label: species (3);
- statsmodels ``anes96`` (the 1996 US election survey) by education (up to some college /
  a degree), nine answers (party identification, left-right placements, TV news, age,
  income, ...), label: the vote (2);
- statsmodels ``modechoice`` (travel between Sydney and Melbourne), the alternative each
  traveller chose, by party size (alone / with others), its terminal time, in-vehicle cost and
  time, generalised cost and household income, label: the mode (air, train, bus, car: 4);
- statsmodels ``grunfeld`` (investment of 11 US firms) by decade (1935-44 / 1945-54), gross
  investment, firm value and capital stock, label: the firm (11);
- text: 20 Newsgroups posts (the bydate archive in the data root), two tasks laid out as the
  tutorial says (one folder per task, one sub-folder per label): task a holds rec.autos and
  sci.space posts, task b rec.motorcycles and sci.med ones, labelled vehicles and science,
  ``--posts`` per group.

Each runs ``python -m mtc.reproduce every_method data=files 'data.params.paths=[...]'
data.params.label_column=... data.name=...`` in its own folder (its own SQLite store), timed.
Then, from each store (mtc.results): the label-free answer (mtc.results.recommend: the method and
point of the highest silhouette among the answers), its accuracy, the oracle (the best accuracy
of any answer) and the gap; what was not in the answers (failed trials, grid points left out
before Ray, chosen points that collapsed or never moved).

    .venv/bin/pip install -q palmerpenguins
    MTC_DATA_DIR=../shared/data .venv/bin/python benchmarks/own_data_answers.py \\
        --out outputs/own_data_answers --markdown docs/results/own_data_answers.md

A data set whose compare folder exists in ``--out`` is read, not run again (delete its folder
to run it again).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import mtc.results
from mtc.data.sources import data_root
from mtc.results.cells import not_an_answer
from mtc.results.reading import NO_LABELS_BEST
from mtc.results.recommend import BALANCE_FLOOR, balance, recommendations


def penguins(folder: Path) -> tuple[list[Path], str]:
    from palmerpenguins import load_penguins_raw

    columns = ["Culmen Length (mm)", "Culmen Depth (mm)", "Flipper Length (mm)", "Body Mass (g)",
               "Delta 15 N (o/oo)", "Delta 13 C (o/oo)"]
    table = load_penguins_raw().dropna(subset=columns)
    table = table.assign(species=table.Species.str.split().str[0])
    return write_tasks(folder, table, "studyName", columns, "species"), "species"


def anes96(folder: Path) -> tuple[list[Path], str]:
    import statsmodels.datasets as datasets

    table = datasets.anes96.load_pandas().data
    table = table.assign(education=table.educ.map(lambda e: "degree" if e >= 5 else "no_degree"),
                         vote=table.vote.astype(int))
    columns = ["popul", "TVnews", "selfLR", "ClinLR", "DoleLR", "PID", "age", "income"]
    return write_tasks(folder, table, "education", columns, "vote"), "vote"


def modechoice(folder: Path) -> tuple[list[Path], str]:
    import statsmodels.datasets as datasets

    table = datasets.modechoice.load_pandas().data
    chosen = table[table.choice == 1]
    chosen = chosen.assign(party=chosen.psize.map(lambda p: "alone" if p == 1 else "with_others"),
                           mode=chosen["mode"].map({1: "air", 2: "train", 3: "bus", 4: "car"}))
    return write_tasks(folder, chosen, "party", ["ttme", "invc", "invt", "gc", "hinc"], "mode"), "mode"


def grunfeld(folder: Path) -> tuple[list[Path], str]:
    import statsmodels.datasets as datasets

    table = datasets.grunfeld.load_pandas().data
    table = table.assign(decade=table.year.map(lambda y: "1935_44" if y < 1945 else "1945_54"))
    return write_tasks(folder, table, "decade", ["invest", "value", "capital"], "firm"), "firm"


def write_tasks(folder: Path, table: pd.DataFrame, task: str, features: list[str], label: str) -> list[Path]:
    """One CSV per value of ``task`` (named by it), the features and the label."""
    paths = []
    for name, rows in table.groupby(task, sort=True):
        path = folder / f"{name}.csv"
        rows[[*features, label]].to_csv(path, index=False)
        paths.append(path)
    return paths


def newsgroups(folder: Path, posts: int) -> tuple[list[Path], None]:
    """Two tasks of text folders (module docstring), ``posts`` per newsgroup."""
    groups = {"rec.autos": ("news_a", "vehicles"), "sci.space": ("news_a", "science"),
              "rec.motorcycles": ("news_b", "vehicles"), "sci.med": ("news_b", "science")}
    taken = dict.fromkeys(groups, 0)
    with tarfile.open(Path(data_root()) / "20newsgroups" / "20news-bydate.tar.xz", "r:xz") as archive:
        for member in archive:
            parts = member.name.split("/")
            group = parts[-2] if len(parts) >= 3 else None
            if not member.isfile() or group not in groups or taken[group] >= posts:
                continue
            task, label = groups[group]
            (folder / task / label).mkdir(parents=True, exist_ok=True)
            (folder / task / label / f"{parts[-3]}_{parts[-1]}.txt").write_bytes(archive.extractfile(member).read())
            taken[group] += 1
    return [folder / "news_a", folder / "news_b"], None


def run_every_method(folder: Path, name: str, paths: list[Path], label: str | None) -> float:
    """The tutorial's command in ``folder``; its wall seconds (its output in every_method.log, the
    seconds in wall_seconds.txt, read back by answer_row)."""
    command = [sys.executable, "-m", "mtc.reproduce", "every_method", "data=files",
               f"data.params.paths=[{','.join(p.name for p in paths)}]", f"data.name={name}",
               *([f"data.params.label_column={label}"] if label else [])]
    start = time.perf_counter()
    with (folder / "every_method.log").open("w") as log:
        subprocess.run(command, cwd=folder, stdout=log, stderr=subprocess.STDOUT, check=True, env=os.environ.copy())
    seconds = time.perf_counter() - start
    (folder / "wall_seconds.txt").write_text(f"{seconds:.1f}\n")
    return seconds


def answer_row(name: str, folder: Path) -> dict:
    """The label-free answer and what was not in the answers, from the data set's store, and
    the command's wall seconds."""
    timed = folder / "wall_seconds.txt"
    seconds = float(timed.read_text()) if timed.exists() else None
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    comparison = mtc.results.comparison(uri, benchmarks=[name])
    [found] = recommendations(comparison.sweeps)
    cells = comparison.cells[(comparison.cells.selection == "acc") & (comparison.cells.task == "mean")
                             & (comparison.cells.metric == "acc")]
    return {"data": name, "tasks": comparison.cells.task.nunique() - 1,
            "methods": len(comparison.sweeps), "recommended": f"{found.method} `{found.point}`" if found.found
            else "no structure found", "silhouette": found.silhouette, "its acc": found.acc,
            "oracle": found.oracle_method, "oracle acc": found.oracle_acc,
            "gap": None if found.acc is None else found.oracle_acc - found.acc,
            "its balance": recommended_balance(comparison, found),
            "its smallest cluster": smallest_cluster(uri, comparison, found),
            "passed over": ", ".join(f"{method} {silhouette:.4f} (balance {share:.2f})"
                                     for method, silhouette, share in found.passed_over),
            "failed trials": sum(s.failed for s in comparison.sweeps),
            "points left out": sum(len(s.left_out) for s in comparison.sweeps),
            "no answer": int(not_an_answer(cells).sum()), "wall s": seconds}


def recommended_balance(comparison, found) -> float | None:
    """The recommended point's mean ``balance/mean`` over its trials (mtc.results.recommend)."""
    if not found.found:
        return None
    sweep = next(s for s in comparison.sweeps if s.method == found.method)
    return balance(sweep.points[NO_LABELS_BEST])


def smallest_cluster(uri: str, comparison, found) -> str:
    """The recommended point's smallest cluster in seed 0's fit, against its task's size
    ("8 of 444"): a silhouette that an outlier split wins shows here."""
    if not found.found:
        return ""
    import mlflow

    sweep = next(s for s in comparison.sweeps if s.method == found.method)
    run_id = mtc.results.trials(uri, sweep=sweep.run_id).query("point == @found.point and seed == 0").run_id.iloc[0]
    arrays = np.load(mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="trial.npz", tracking_uri=uri))
    sizes = [np.bincount(arrays[key]) for key in arrays.files if key.startswith("labels/")]
    smallest = min(sizes, key=lambda counts: counts[counts > 0].min() / counts.sum())
    return f"{smallest[smallest > 0].min()} of {smallest.sum()}"


def markdown(rows: list[dict], command: str) -> str:
    table = pd.DataFrame(rows)
    shown = table.assign(**{key: table[key].map(lambda v: "" if pd.isna(v) else f"{v:.4f}")
                            for key in ("silhouette", "its acc", "oracle acc", "gap")},
                         **{"its balance": table["its balance"].map(lambda v: "" if pd.isna(v) else f"{v:.2f}")},
                         **{"wall s": table["wall s"].map(lambda v: "" if pd.isna(v) else f"{v:.0f}")})
    within = int((table.gap.dropna() <= 0.05).sum())
    lines = ["# every_method on data nobody prepared: the answer without labels", "",
             "What `python -m mtc.reproduce every_method` recommends without labels on four labelled tables that ship "
             "inside Python packages, split into tasks the way a researcher would, and on two text-folder tasks of "
             "raw newsgroup posts; beside it, the best accuracy of any method (the oracle, which needs the labels). "
             f"The recommendation is within 5 points of the oracle on {within} of {len(table.gap.dropna())} data sets.",
             "", "Each data set ran with the tutorial's command and every default (the scale, the grids, 10 seeds). "
             "`no answer`: methods whose chosen point collapsed or never left its k-means start (not ranked); "
             "`points left out`: grid points a method cannot fit on the data, left out before Ray; `its smallest "
             "cluster`: in seed 0's fit at the recommended point, against its task's rows; `its balance`: its smallest "
             "cluster against an even share, averaged over its trials and tasks; `passed over`: answers of a "
             "higher silhouette left aside as outlier splits, their smallest cluster under "
             f"{BALANCE_FLOOR:g} of an even share on average (`balance`, mtc.results.recommend). `wall s`: the command's "
             "wall time on 2 cores, measured while other test runs shared the machine (not a quiet figure).", "",
             "| " + " | ".join(shown.columns) + " |", "|" + "---|" * len(shown.columns)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in shown.itertuples(index=False)]
    misses = table[table.gap > 0.05]
    if len(misses):
        lines += ["", "## Where the answer misses, and why", ""]
    for row in misses.itertuples(index=False):
        why = ("its smallest cluster is under a fifth of an even share: the silhouette rewards splitting off a few "
               "outlying rows, well separated from the rest, rather than the classes"
               if row[table.columns.get_loc("its balance")] < BALANCE_FLOOR else
               f"its clusters are balanced (balance {row[table.columns.get_loc('its balance')]:.2f}) and well separated "
               "on the input, but not along the classes")
        lines.append(f"- {row.data}: {row.recommended} has the highest silhouette of the balanced answers "
                     f"({row.silhouette:.4f}) and "
                     f"accuracy {row[table.columns.get_loc('its acc')]:.4f}, {row.gap:.4f} below {row.oracle}; {why}.")
    lines += ["", "Made by:", "", "```bash", command, "```", ""]
    return "\n".join(lines)


DATA_SETS = {"penguins_by_year": penguins, "anes96_by_education": anes96, "modechoice_by_party": modechoice,
             "grunfeld_by_decade": grunfeld}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("outputs/own_data_answers"))
    parser.add_argument("--markdown", type=Path, help="write the table there")
    parser.add_argument("--posts", type=int, default=150, help="posts per newsgroup in the text tasks")
    parser.add_argument("--only", nargs="+", help="only these data sets (names as in the table, or news)")
    args = parser.parse_args(argv)
    rows = []
    makers = {**DATA_SETS, "news_by_pair": lambda folder: newsgroups(folder, args.posts)}
    for name, make in makers.items():
        if args.only and name not in args.only:
            continue
        folder = (args.out / name).resolve()
        if not (folder / "outputs" / "every_method" / name / "compare.md").exists():
            folder.mkdir(parents=True, exist_ok=True)
            paths, label = make(folder)
            run_every_method(folder, name, paths, label)
        rows.append(answer_row(name, folder))
        print(rows[-1], flush=True)
    if args.markdown:
        args.markdown.write_text(markdown(rows, "MTC_DATA_DIR=../shared/data .venv/bin/python "
                                                "benchmarks/own_data_answers.py --out outputs/own_data_answers "
                                                f"--markdown {args.markdown}"))


if __name__ == "__main__":
    main()
