"""LSSMTC, SPMTC-h and SPMTC-s fits on the shared sparse-product route (X B by columns, X'Omega P
kept for the next sweep's Eq. 18, and while MALSAR's W selects l feature columns, X W, X'Omega Y
and the W step on those columns alone) against the literal route (every product formed apart,
on the full d x l arrays, X B by rows): one thread, the routes
alternated, the least of ``--repeats`` runs of three seeds per setting; the fits' objective
traces, labels and W compared to the bit.

    MTC_DATA_DIR=../shared/data python benchmarks/lssmtc_products.py [data ...]
"""

import argparse
import time

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from mtc.cli import configured_dataset
from mtc.methods.spmtc import LSSMTC, SPMTCh, SPMTCs

SETTINGS = [(cls, l, lam) for cls in (LSSMTC, SPMTCh, SPMTCs) for l in (2, 16) for lam in (0.15, 0.75)]


def fits(cls, matrices, c, l, lam, route):
    LSSMTC._product_route = route
    start = time.perf_counter()
    fitted = [cls(n_clusters=c, n_components=l, lambda_=lam, random_state=seed).fit(matrices) for seed in range(3)]
    return (time.perf_counter() - start) / 3, fitted


def same_bits(a, b) -> bool:
    return (a.objective_trace_.tobytes() == b.objective_trace_.tobytes() and a.W_.tobytes() == b.W_.tobytes()
            and all(np.array_equal(x, y) for x, y in zip(a.labels_, b.labels_)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="*", default=["orgs_vs_people_counts", "webkb4_counts", "rec_vs_talk_counts"])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    totals = {"literal": 0.0, "shared": 0.0}
    for name in args.data:
        data = configured_dataset(name)
        matrices = [sp.csr_matrix(X) for X in data.matrices]
        c = data.n_clusters[0]
        for cls, l, lam in SETTINGS:
            best, fitted = {"literal": [], "shared": []}, {}
            with threadpool_limits(1):
                for _ in range(args.repeats):
                    for route in ("literal", "shared"):
                        seconds, fitted[route] = fits(cls, matrices, c, l, lam, route)
                        best[route].append(seconds)
            LSSMTC._product_route = "shared"
            identical = all(same_bits(a, b) for a, b in zip(fitted["literal"], fitted["shared"]))
            literal, shared = min(best["literal"]), min(best["shared"])
            totals["literal"] += literal
            totals["shared"] += shared
            print(f"{name} {cls.__name__} l={l} lambda={lam}: literal {literal:.3f} s a fit, shared {shared:.3f} s "
                  f"({shared / literal:.2f}); iterations {fitted['shared'][0].n_iter_}; same bits: {identical}",
                  flush=True)
    print(f"all settings: literal {totals['literal']:.2f} s, shared {totals['shared']:.2f} s "
          f"({totals['shared'] / totals['literal']:.2f})")


if __name__ == "__main__":
    main()
