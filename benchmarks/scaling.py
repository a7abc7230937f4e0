"""Time and memory against the samples per task, every family (issue 32, part 1).

Two tasks of 20 Newsgroups documents (tf-idf of the 2000 most frequent terms over the whole
corpus, English stop words out; the documents with fewer than MIN_TERMS of those terms left out,
so that every document shares a term with another, as SMT-NMF's Eq. 3.10 needs): task 0 draws from the first ten groups, task 1 from the other
ten, n documents each, 4 clusters each. Up to the documents a half holds (about 9,400) they are
drawn without replacement; beyond, **with replacement** (duplicate rows). Methods that work on
dense features (``DENSE``) get the same tf-idf rows as a dense array. Each fit runs in a fresh
subprocess (``--child``) with the method's defaults (``kkm_nystroem``: kernel k-means with
``route="nystroem"``, an approximation of the kernel, ROUTES), and measures:

- fit seconds and iterations (``n_iter_``);
- peak traced bytes (tracemalloc, started right before ``fit``; the input not counted) and the
  process's peak RSS (VmHWM) with its peak RSS before the fit;
- the estimate of mtc.methods.memory and its ratio to the traced peak (checked within 2x).

Then per method the least-squares slope of log(time) and log(peak) against log(n) over the
sizes that ran, printed beside the exponent the dominant products imply (``EXPECTED``).
Writes ``scaling.csv`` and ``scaling.png`` (time and memory against n, every method) into
``--out`` and, with ``--markdown``, the table into that file. ``--route-accuracy 20ng`` instead
compares the dense route's accuracy with the approximate knn route's on a data config.

    MTC_DATA_DIR=../shared/data .venv/bin/python benchmarks/scaling.py \
        --sizes 500 1000 2000 5000 10000 20000 50000 --timeout 900 --out outputs/scaling \
        --markdown docs/results/scaling.md
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import scipy.sparse as sp

SIZES = (500, 1000, 2000, 5000, 10000, 20000, 50000)
LARGE = 5000  # slopes are also fitted from this size on: fixed costs, and the dense routes below it, left out
METHODS = ("kmeans", "snmf", "ncut", "mtcmrl", "mtcfir", "smtnmf", "mbc", "smkc", "lssmtc", "spmtc_s", "asi", "kkm",
           "kkm_nystroem")
ROUTES = {"kkm_nystroem": ("kkm", {"route": "nystroem"})}  # a method config with parameters of another route
DENSE = {"mtcfir", "smkc", "lssmtc", "spmtc_s", "asi"}  # fitted on dense rows
K, N_FEATURES, MIN_TERMS = 4, 2000, 5
# exponent of n in the dominant products of one fit at fixed d, k, iterations (route as "auto" takes it)
EXPECTED = {
    "kmeans": (1, "Lloyd: nnz k per iteration"),
    "snmf": (2, "dense M Y: n^2 k (n < 5000); implicit N(N'Y): nnz k above"),
    "ncut": (3, "scikit-learn's shift-invert ARPACK on the dense Laplacian: n^3 (n < 5000); implicit nnz k above"),
    "mtcmrl": (1, "N(N'Y) and X W: nnz h per iteration; d^3 ridge factor once"),
    "mtcfir": (2, "relation matrices n_t n_s and l-neighbour similarities"),
    "smtnmf": (2, "dense W V: N^2 k (N < 5000); implicit D(B'V): nnz k above"),
    "mbc": (1, "distances n k d per iteration"),
    "smkc": (2, "Gaussian kernels n^2 per task pair"),
    "lssmtc": (1, "X P, X'OP: n d l per iteration; d^2 l"),
    "spmtc_s": (1, "as LSSMTC, per self-paced round"),
    "asi": (1, "n d k per iteration; d^3 eigen W step"),
    "kkm": (2, "the Gaussian kernel n^2 d once; K H: n^2 k per iteration"),
    "kkm_nystroem": (1, "Nyström features n m d once (m = 500 rows drawn); n m k per iteration"),
}


# --- data ---------------------------------------------------------------------------------
def corpus(cache: Path):
    """(tf-idf rows, half) of all 18,846 documents, half = 0 for the first ten groups; kept
    in ``cache`` (npz) so that each child process loads it in a moment."""
    if cache.exists():
        saved = np.load(cache)
        rows = sp.csr_matrix((saved["data"], saved["indices"], saved["indptr"]), shape=tuple(saved["shape"]))
        return rows, saved["half"]
    from sklearn.feature_extraction.text import TfidfVectorizer

    from mtc.data.corpora import read_newsgroups

    root = Path(os.environ.get("MTC_DATA_DIR", "../shared/data"))
    archive = root / "20newsgroups" / "20news-bydate.tar.xz"
    groups = sorted({name.split("/")[1] for name in tar_names(archive)})
    posts = read_newsgroups(archive, tuple(groups))
    texts = [text for group in groups for _, text in posts[group]]
    half = np.concatenate([np.full(len(posts[group]), int(i >= len(groups) // 2)) for i, group in enumerate(groups)])
    rows = TfidfVectorizer(max_features=N_FEATURES, stop_words="english").fit_transform(texts).tocsr()
    kept = np.diff(rows.indptr) >= MIN_TERMS
    rows, half = rows[kept], half[kept]
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, data=rows.data, indices=rows.indices, indptr=rows.indptr, shape=rows.shape, half=half)
    return rows, half


def tar_names(archive: Path) -> list[str]:
    import tarfile

    with tarfile.open(archive, "r:xz") as tar:
        return [member.name for member in tar if member.isdir() and member.name.count("/") == 1]


def draw_tasks(rows, half, n: int, seed: int = 0) -> list:
    """Two tasks of n rows, task t from half t; with replacement when n exceeds the half."""
    rng = np.random.default_rng(seed)
    tasks = []
    for t in (0, 1):
        pool = np.flatnonzero(half == t)
        tasks.append(rows[rng.choice(pool, size=n, replace=n > pool.size)])
    return tasks


# --- one fit (child process) -------------------------------------------------------------
def tasks_for(method: str, n: int, cache: Path) -> list:
    tasks = draw_tasks(*corpus(cache), n)
    return [X.toarray() for X in tasks] if method in DENSE else tasks


def solver_for(method: str):
    from mtc.config import method_configs

    config, params = ROUTES.get(method, (method, {}))
    return method_configs()[config](n_clusters=[K, K], random_state=0, **params)


def peak_rss_bytes() -> int:
    """This process's peak resident set (VmHWM of /proc/self/status). Not ``ru_maxrss``: Linux
    folds the forked image's resident set into it at exec, so a child started by a parent
    holding 900 MB reported 900 MB before loading anything."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))


def child(method: str, n: int, cache: Path) -> dict:
    tasks = tasks_for(method, n, cache)
    solver = solver_for(method)
    rss_before = peak_rss_bytes()
    tracemalloc.start()
    start = time.perf_counter()
    solver.fit(tasks)
    seconds = time.perf_counter() - start
    _, traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"method": method, "n": n, "seconds": round(seconds, 3), "n_iter": int(getattr(solver, "n_iter_", 0)),
            "traced_mb": round(traced / 2**20, 2),
            "rss_mb": round(peak_rss_bytes() / 2**20, 1),
            "rss_before_mb": round(rss_before / 2**20, 1), "status": "ok"}


def estimate(method: str, n: int, cache: Path) -> float | None:
    """mtc.methods.memory's estimate (MiB) for the fit of ``method`` at n, on the same draw."""
    from mtc.methods.memory import Shapes, estimate_peak_bytes

    peak = estimate_peak_bytes(solver_for(method), Shapes.of(tasks_for(method, n, cache), [K, K]))
    return None if peak is None else round(peak / 2**20, 2)


def with_estimate(row: dict, cache: Path) -> dict:
    """The row with the estimate and its ratio to the traced peak (checked within 2x)."""
    mb = estimate(row["method"], int(row["n"]), cache)
    traced = float(row["traced_mb"]) if row.get("traced_mb") not in (None, "") else None
    ratio = round(mb / traced, 2) if mb is not None and traced else None
    return {**row, "estimate_mb": mb, "estimate_ratio": ratio, "within_2x": None if ratio is None else 0.5 <= ratio <= 2}


# --- the sweep over sizes (parent) -------------------------------------------------------
def run_one(method: str, n: int, cache: Path, timeout: float) -> dict:
    """One fit in a fresh subprocess; skipped when the estimate exceeds the free memory."""
    from mtc.methods.memory import available_bytes

    mb = estimate(method, n, cache)
    if mb is not None and mb * 2**20 > available_bytes():
        return {"method": method, "n": n, "status": f"skipped: estimate {mb:.0f} MiB exceeds the free memory"}
    command = [sys.executable, __file__, "--child", method, str(n), "--cache", str(cache)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"method": method, "n": n, "status": f"timeout>{timeout:g}s"}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"method": method, "n": n, "status": f"failed: {last[:120]}"}
    return with_estimate(json.loads(done.stdout.strip().splitlines()[-1]), cache)


def slope(rows: list[dict], key: str) -> float | None:
    points = [(float(row["n"]), float(row[key])) for row in rows if row.get("status") == "ok" and row.get(key)]
    if len(points) < 2:
        return None
    x, y = np.log([p[0] for p in points]), np.log([p[1] for p in points])
    return float(np.polyfit(x, y, 1)[0])


def figure(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    colours = plt.get_cmap("tab20").colors
    for i, method in enumerate(dict.fromkeys(row["method"] for row in results)):
        rows = [row for row in results if row["method"] == method and row.get("status") == "ok"]
        if rows:
            ns = [float(row["n"]) for row in rows]
            style = {"marker": "osD^v<>"[i % 7], "color": colours[(2 * i) % 20 + (i >= 10)], "label": method}
            left.plot(ns, [float(row["seconds"]) for row in rows], **style)
            right.plot(ns, [float(row["traced_mb"]) for row in rows], **style)
    for axis, label in ((left, "fit time (s)"), (right, "peak traced memory (MiB)")):
        axis.set(xscale="log", yscale="log", xlabel="samples per task (2 tasks)", ylabel=label)
        axis.grid(True, which="both", alpha=0.3)
    right.legend(fontsize=8, loc="upper left")
    fig.suptitle("Time and memory against the samples per task, 20 Newsgroups tf-idf (d = 2000, k = 4)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def table(results: list[dict], methods: list[str]) -> list[str]:
    lines = [("| method | n per task | seconds | iterations | traced MiB | peak RSS MiB (before fit) | estimate MiB | "
              "estimate / traced | status |"), "|---|---|---|---|---|---|---|---|---|"]
    for row in results:
        lines.append(f"| {row['method']} | {row['n']} | {row.get('seconds', '')} | {row.get('n_iter', '')} | "
                     f"{row.get('traced_mb', '')} | {row.get('rss_mb', '')} ({row.get('rss_before_mb', '')}) | "
                     f"{row.get('estimate_mb', '')} | {row.get('estimate_ratio', '')} | {row['status']} |")
    lines += ["", (f"| method | time slope | time per iteration slope | memory slope | the three from n = {LARGE} on "
                   "| expected exponent (dominant products) |"), "|---|---|---|---|---|---|"]
    for method in methods:
        rows = [row for row in results if row["method"] == method]
        per_iteration = [{**row, "per_iteration": float(row["seconds"]) / max(float(row["n_iter"]), 1)}
                         for row in rows if row.get("status") == "ok"]
        large = [[row for row in chosen if int(row["n"]) >= LARGE] for chosen in (rows, per_iteration)]
        slopes = [slope(rows, "seconds"), slope(per_iteration, "per_iteration"), slope(rows, "traced_mb")]
        above = [slope(large[0], "seconds"), slope(large[1], "per_iteration"), slope(large[0], "traced_mb")]
        exponent, why = EXPECTED[method]
        cells = " | ".join("" if value is None else f"{value:.2f}" for value in slopes)
        large_cells = " / ".join("-" if value is None else f"{value:.2f}" for value in above)
        lines.append(f"| {method} | {cells} | {large_cells} | {exponent}: {why} |")
    return lines


def route_accuracy(data: str, seeds: int) -> list[str]:
    """Mean accuracy over tasks (mean +- std over ``seeds``) of SNMF and N-cut on a configured
    composition, dense route against the approximate knn route (10 and 50 neighbours)."""
    from mtc.cli import configured_dataset
    from mtc.methods.snmf import SymmetricNMF
    from mtc.methods.spectral import NormalizedCut
    from mtc.metrics import accuracy

    dataset = configured_dataset(data)
    routes = (("dense", {}), ("knn", {"n_neighbors": 10}), ("knn", {"n_neighbors": 50}))
    lines = ["| method | dense | knn, 10 neighbours | knn, 50 neighbours |", "|---|---|---|---|"]
    for cls in (SymmetricNMF, NormalizedCut):
        cells = []
        for route, extra in routes:
            scores = [np.mean([accuracy(y, labels) for y, labels in zip(dataset.labels, cls(
                n_clusters=dataset.n_clusters, route=route, random_state=seed, **extra).fit(dataset.matrices).labels_)])
                for seed in range(seeds)]
            cells.append(f"{np.mean(scores):.4f} +- {np.std(scores):.4f}")
        lines.append(f"| {cls.__name__} | {' | '.join(cells)} |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--max-n", type=int, default=None, help="drop sizes above this")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per fit; larger sizes of a method "
                                                                      "that timed out are skipped")
    parser.add_argument("--out", type=Path, default=Path("outputs/scaling"))
    parser.add_argument("--cache", type=Path, default=None, help="tf-idf cache (default: <out>/20ng_tfidf.npz)")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the tables to this file")
    parser.add_argument("--from-csv", type=Path, default=None, help="fit nothing: recompute the estimates, slopes, "
                                                                    "figure and tables of an earlier scaling.csv")
    parser.add_argument("--route-accuracy", metavar="DATA", default=None, help="fit nothing else: SNMF and N-cut "
                                                                                "on this data config, dense against "
                                                                                "knn routes")
    parser.add_argument("--seeds", type=int, default=3, help="seeds of --route-accuracy")
    parser.add_argument("--child", nargs=2, metavar=("METHOD", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cache = args.cache or args.out / "20ng_tfidf.npz"
    if args.route_accuracy:
        print("\n".join(route_accuracy(args.route_accuracy, args.seeds)))
        return 0
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), cache)))
        return 0
    corpus(cache)  # built once, before the children
    sizes = [n for n in args.sizes if args.max_n is None or n <= args.max_n]
    results = []
    if args.from_csv:
        with open(args.from_csv) as handle:
            results = [with_estimate(row, cache) if row["status"] == "ok" else row for row in csv.DictReader(handle)]
        args.methods = [method for method in args.methods if any(row["method"] == method for row in results)]
    for method in args.methods if not args.from_csv else []:
        for n in sizes:
            row = run_one(method, n, cache, args.timeout)
            results.append(row)
            print(json.dumps(row), flush=True)
            if row["status"] != "ok":
                break  # larger sizes would not do better
    args.out.mkdir(parents=True, exist_ok=True)
    keys = ["method", "n", "seconds", "n_iter", "traced_mb", "rss_mb", "rss_before_mb", "estimate_mb",
            "estimate_ratio", "within_2x", "status"]
    with open(args.out / "scaling.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, keys)
        writer.writeheader()
        writer.writerows({key: row.get(key, "") for key in keys} for row in results)
    figure(results, args.out / "scaling.png")
    lines = table(results, args.methods)
    print("\n".join(lines))
    if args.markdown:
        command = "benchmarks/scaling.py " + " ".join(argv if argv is not None else sys.argv[1:])
        args.markdown.write_text("\n".join([f"Command: `{command}`", "", *lines, ""]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
