"""One LSSMTC iteration at d = 2000-4771: ours (mtc.methods.spmtc, no d x d object) against a
literal transcription of MALSAR's LSSMTC.m (C = XX' and WW' every iteration, left-to-right
products), same process, same start; identical labels; peak memory (tracemalloc) of one of
our iterations against d^2 x 8 bytes.

    MTC_DATA_DIR=../shared/data python benchmarks/lssmtc_iteration.py [data ...]
"""

import sys
import time
import tracemalloc

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from mtc.cli import configured_dataset
from mtc.methods.spmtc import LSSMTC
from mtc.record import FitRecord


def literal_iteration(cellX, cellP, W, lam, eps=1e-9):
    """LSSMTC.m l.85-140, one sweep (columns = samples; cellX sparse d x n as MATLAB's)."""
    X = sp.hstack(cellX).tocsr()
    P = np.vstack(cellP)
    M = (W.T @ X) @ P @ np.linalg.inv(P.T @ P)
    cellP = list(cellP)
    for k in range(len(cellX)):
        Mk = (cellX[k] @ cellP[k]) @ np.linalg.inv(cellP[k].T @ cellP[k])
        A = lam * (cellX[k].T @ Mk) + (1 - lam) * ((cellX[k].T @ W) @ M)
        B = lam * Mk.T @ Mk + (1 - lam) * M.T @ M
        PA, NA, PB, NB = (abs(A) + A) / 2, (abs(A) - A) / 2, (abs(B) + B) / 2, (abs(B) - B) / 2
        cellP[k] = cellP[k] * np.sqrt((PA + cellP[k] @ NB) / (NA + cellP[k] @ PB + eps))
    P = np.vstack(cellP)
    C = (X @ X.T).toarray()
    D = (X @ P) @ M.T
    PC, NC, PD, ND = (abs(C) + C) / 2, (abs(C) - C) / 2, (abs(D) + D) / 2, (abs(D) - D) / 2
    tmp = W @ W.T
    W = W * np.sqrt((NC @ W + tmp @ PC @ W + PD + tmp @ ND) / (PC @ W + tmp @ NC @ W + ND + tmp @ PD + eps))
    return cellP, W


def ours_after_setup(matrices, c, l, lam, P0):
    s = LSSMTC(n_clusters=c, n_components=l, lambda_=lam)
    s._validate_params()
    s.record_ = FitRecord()
    s._setup(matrices, [c] * len(matrices), np.random.default_rng(0))
    s.P_ = [P.copy() for P in P0]
    return s


def main(names):
    for name in names:
        data = configured_dataset(name)
        matrices = [sp.csr_matrix(X) for X in data.matrices]
        d, c, l, lam = matrices[0].shape[1], data.n_clusters[0], 16, 0.75
        P0 = [np.random.default_rng(0).random((X.shape[0], c)) for X in matrices]
        with threadpool_limits(1):
            s = ours_after_setup(matrices, c, l, lam, P0)
            t0 = time.perf_counter()
            s._iterate()
            fast = time.perf_counter() - t0
            tracemalloc.start()
            s._iterate()
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            s2 = ours_after_setup(matrices, c, l, lam, P0)
            s2._iterate()
            t0 = time.perf_counter()
            cellP, W = literal_iteration([X.T.tocsr() for X in matrices], P0, np.eye(d, l), lam)
            slow = time.perf_counter() - t0
        same = all(np.array_equal(np.argmax(a, 1), np.argmax(b, 1)) for a, b in zip(s2.P_, cellP))
        dP = max(float(np.max(np.abs(a - b))) for a, b in zip(s2.P_, cellP))
        dW = float(np.max(np.abs(s2.W_ - W)))
        print(f"{name}: d={d} N={sum(X.shape[0] for X in matrices)} nnz={sum(X.nnz for X in matrices)} l={l} "
              f"| ours {fast:.4f} s/iter, literal {slow:.2f} s/iter, x{slow / fast:.0f} | labels identical: {same}, "
              f"max|dP|={dP:.1e}, max|dW|={dW:.1e} | peak of one iteration {peak / 2**20:.1f} MiB vs d^2*8 = "
              f"{d * d * 8 / 2**20:.1f} MiB ({peak / (d * d * 8):.3f})", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["comp_vs_sci", "orgs_vs_people"])
