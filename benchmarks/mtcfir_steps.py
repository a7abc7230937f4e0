"""MTCFIR per step: wall time and peak memory of mSDA, consistent similarity and SNMF, and
SNMF's time per iteration beside the time of its products.

    MTC_DATA_DIR=../shared/data python benchmarks/mtcfir_steps.py [data ...]   (default: webkb4 handdigits)

For each dataset, at p = 0.5, g = 3, lambda = 0.3 (the middle of Sec. 4.3's grid), one
thread per BLAS call left to the machine: step 1 (mSDA on all tasks stacked), step 2
(relation matrices V^(ts), task weights alpha, and the consistent similarity of every
task, kept sparse as MTCFIR keeps it when at most a quarter of it is non-zero) and step 3
(k-means + 0.2 initialisation and SNMF of every task, one seed), on the sparse similarity
as MTCFIR runs it and on the same matrix dense (the route before issue 15; same trace),
then with the ``hals`` rule (not the paper's: mtc.numerics.snmf), with each task's accuracy.
Peak memory is the largest tracemalloc peak (numpy reports its buffers to it) within the
step, printed beside the size of all n_t x n_s relation matrices, the floor step 2 needs.
Per task, SNMF's time per iteration is printed beside its products (M Y, Y'Y, Y (Y'Y))
timed on the same operands (benchmarks/product_reference.py), and their ratio; then the
same for MTCFIR-nI's SNMF on the clipped cosine of the mSDA features (50 iterations), as
the operator MTCFIR-nI uses (N (N'Y) + R Y where that is cheaper, else the dense matrix).
"""

import math
import sys
import time
import tracemalloc

import numpy as np
import scipy.sparse as sp

from mtc.cli import configured_dataset
from mtc.metrics import accuracy
from mtc.numerics.affinity import CosineProduct, cosine_operator
from mtc.numerics.consistent_similarity import (consistent_similarity, distance_matrices, relation_matrices,
                                                task_weights)
from mtc.numerics.msda import msda_features
from mtc.numerics.seeding import initial_indicator
from mtc.numerics.linalg import as_dense
from mtc.numerics.snmf import snmf

from product_reference import Product, reference_line


def measured(step):
    tracemalloc.start()
    start = time.perf_counter()
    result = step()
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return result, seconds, peak / 2**20


def main(names):
    print(f"{'data':10s} {'step':24s} {'seconds':>8s} {'peak MiB':>9s}")
    for name in names:
        dataset = configured_dataset(name)
        matrices, ks = dataset.matrices, dataset.n_clusters
        stacked = sp.vstack(matrices, format="csr") if any(map(sp.issparse, matrices)) else np.vstack(matrices)
        Z, seconds, peak = measured(lambda: msda_features(stacked, 0.5, 3))
        print(f"{name:10s} {'1 mSDA (N x d(g+1))':24s} {seconds:8.2f} {peak:9.1f}   N={Z.shape[0]} d={stacked.shape[1]}")
        features = np.split(Z, np.cumsum([X.shape[0] for X in matrices])[:-1])
        neighbours = [max(1, math.ceil(0.3 * X.shape[0] / k)) for X, k in zip(matrices, ks)]

        def similarity_step():
            relations = relation_matrices(features)
            alpha = task_weights(relations, neighbours)
            return [consistent_similarity(A, l) for A, l in zip(distance_matrices(features, relations, alpha), neighbours)]

        similarities, seconds, peak = measured(similarity_step)
        floor = sum(a.shape[0] * b.shape[0] for a in features for b in features) * 8 / 2**20
        print(f"{name:10s} {'2 consistent similarity':24s} {seconds:8.2f} {peak:9.1f}   all V^(ts): {floor:.1f} MiB")
        starts = [initial_indicator(F, k, np.random.default_rng(0)) for F, k in zip(features, ks)]
        density = "/".join(f"{M.nnz / M.shape[0] ** 2:.3f}" if sp.issparse(M) else "dense" for M in similarities)
        for label, operands, rule in (("sparse M", similarities, "sqrt"),
                                      ("dense M", [as_dense(M) for M in similarities], "sqrt"),
                                      ("sparse M, hals", similarities, "hals")):
            def snmf_step():
                return [snmf(M, Y, update=rule, stopping="relative", tol=1e-5, max_iter=500)
                        for M, Y in zip(operands, starts)]

            fits, seconds, peak = measured(snmf_step)
            iterations = "/".join(str(fit.n_iter) for _, fit in fits)
            acc = "/".join(f"{accuracy(y, fit.labels):.4f}" for y, (_, fit) in zip(dataset.labels, fits))
            print(f"{name:10s} {'3 SNMF, ' + label:24s} {seconds:8.2f} {peak:9.1f}   iterations {iterations}, "
                  f"non-zeros {density}, acc {acc}")
        # per iteration, timed again outside tracemalloc (which slows every numpy allocation)
        for t, ((Y, fit), M) in enumerate(zip(fits, similarities)):  # the dense fits' Y: only shapes matter
            start = time.perf_counter()
            _, again = snmf(M, starts[t], update="sqrt", stopping="relative", tol=1e-5, max_iter=500)
            per_iteration = (time.perf_counter() - start) / max(again.n_iter, 1)
            products = [Product("M Y", M, Y.shape[1]), Product("Y'Y", np.ascontiguousarray(Y.T), Y.shape[1]),
                        Product("Y (Y'Y)", Y, Y.shape[1])]
            print(reference_line(f"{name:10s} SNMF task {t} (sparse M)", per_iteration, products))
        for t, (F, Y) in enumerate(zip(features, starts)):
            print(reference_line(f"{name:10s} SNMF -nI task {t}", *cosine_iteration(F, Y)))


def cosine_iteration(F, Y, iterations: int = 50) -> tuple[float, list[Product]]:
    """Seconds per SNMF iteration on MTCFIR-nI's cosine operator of F, and its products."""
    M = cosine_operator(F)
    start = time.perf_counter()
    snmf(M, Y, update="sqrt", tol=0, max_iter=iterations)
    per_iteration = (time.perf_counter() - start) / iterations
    k = Y.shape[1]
    if isinstance(M, CosineProduct):
        products = [Product("N'Y", M.N.T, k), Product("N (N'Y)", M.N, k)]
        products += [] if M.correction is None else [Product("R Y", M.correction, k)]
    else:
        products = [Product("M Y", M, k)]
    products += [Product("Y'Y", np.ascontiguousarray(Y.T), k), Product("Y (Y'Y)", Y, k)]
    return per_iteration, products


if __name__ == "__main__":
    main(sys.argv[1:] or ["webkb4", "handdigits"])
