"""What a solver's dominant products cost on this machine, timed in the same run as the
solver, so a benchmark can print its time per iteration beside the time of the products it
cannot avoid, and the ratio.

A product is named by its operand: a dense matrix (a GEMM with an n x h right-hand side of
random numbers) or a sparse one (an SpMM). Each is timed on its own, best of ``repeats``,
on the real operand of the fit (shapes and sparsity patterns matter: the skinny products of
these solvers are memory-bound, so a peak GFLOP/s figure would mislead).

Run as a script, it prints that line for every iterative family whose iteration we can time
alone (issue 32: every method's iteration within 2x of its dominant products), one thread,
in CPU seconds (iteration and products alike, so a loaded machine slows both the same way):

    MTC_DATA_DIR=../shared/data python benchmarks/product_reference.py [data ...]   (default: reuters)

An iteration's time is (fit of 1 + m iterations - fit of 1 iteration) / m with the stopping
rule off, the seed-free steps (kernels, similarities, mSDA, k-means labels) kept in one Cache
so that both fits share them. Families: MKC and S-MKC (K[:, t] Z^t per task), MBC and S-MBC
(X M' and H'X per task, twice for S-MBC's two candidates), LSSMTC and All ASI with MALSAR's
W step (X'(Omega P), once: the W step's is the next sweep's Eq. 18 product; X M_k, which All
ASI's lambda = 0 leaves out; X W and X'(Omega Y) touch only the l columns MALSAR's W selects;
the eigen step under --asi), MTCFIR
(SNMF on the consistent similarity: M Y, Y'Y, Y (Y'Y) per task), MTCMRL
(benchmarks/mtcmrl_iteration.py's products).
k-means and kernel k-means run library / restart loops (no iteration of ours to time);
SMT-NMF has its own (benchmarks/smtnmf_iteration.py: W V).

Fits run with freed memory kept for the next arrays, as every fit of mtc.trial.run_trial
(mtc.numerics.heap); ``--glibc-defaults`` first leaves malloc as it is, for comparison, and
``--only LSSMTC,All ASI`` times only the families whose labels start with those names,
``--iterations 300`` times 300 iterations instead of 10 (steadier for iterations of a few ms).

    MTC_DATA_DIR=../shared/data python benchmarks/product_reference.py --asi [data]

All ASI's eigen W step before and after issue 32 (``asi_routes``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class Product:
    """``operand @ (a random matrix with `columns` columns)``, counted ``count`` times per
    iteration; ``name`` says what it is in the solver."""

    name: str
    operand: object
    columns: int
    count: int = 1

    @property
    def kind(self) -> str:
        return "SpMM" if sp.issparse(self.operand) else "GEMM"

    def seconds(self, repeats: int = 5, clock=time.perf_counter) -> float:
        """Best time of one product (wall; ``clock=time.process_time`` for CPU seconds, the
        measure for one thread on a shared machine)."""
        right = np.random.default_rng(0).random((self.operand.shape[1], self.columns))
        best = np.inf
        for _ in range(repeats):
            start = clock()
            self.operand @ right
            best = min(best, clock() - start)
        return best


def reference_seconds(products: list[Product], repeats: int = 5,
                      clock=time.perf_counter) -> tuple[float, dict[str, float]]:
    """Seconds per iteration of the products (each timed, times its count) and the total by
    kind (GEMM, SpMM)."""
    by_kind: dict[str, float] = {}
    for product in products:
        by_kind[product.kind] = by_kind.get(product.kind, 0.0) + product.count * product.seconds(repeats, clock)
    return sum(by_kind.values()), by_kind


def reference_line(label: str, per_iteration: float, products: list[Product], clock=time.perf_counter) -> str:
    """One printed line: the measured time per iteration, the products' time (by ``clock``,
    the clock of ``per_iteration``), their ratio."""
    total, by_kind = reference_seconds(products, clock=clock)
    kinds = " + ".join(f"{kind} {1e3 * seconds:.3g}" for kind, seconds in sorted(by_kind.items()))
    return (f"{label}: {1e3 * per_iteration:.3g} ms per iteration; its {sum(p.count for p in products)} dominant "
            f"products {1e3 * total:.3g} ms ({kinds}); ratio {per_iteration / total:.2f}")


def per_iteration(make, matrices, m: int) -> float:
    """CPU seconds per iteration (one thread: its own time even on a shared machine), (fit of
    1 + m iterations - fit of 1) / m, both from ``make(max_iter)``, the best of two each."""
    make(1).fit(matrices)  # fills the cache (and imports) outside the timing

    def cpu(max_iter):
        best = np.inf
        for _ in range(2):
            start = time.process_time()
            fit = make(max_iter).fit(matrices)
            best = min(best, time.process_time() - start)
        return best, fit

    one, _ = cpu(1)
    more, fit = cpu(1 + m)
    assert fit.n_iter_ >= m, f"{type(fit).__name__} stopped after {fit.n_iter_} iterations"
    return (more - one) / m


def families(matrices, ks, cache, only=None):
    """(label, make(max_iter), products) for every family timed here (``only``: the labels
    that start with one of these names)."""
    import scipy.sparse as sp_

    from mtc.methods import MTCMRL
    from mtc.methods.mbc import MBC
    from mtc.methods.mkc import MKC, SMKC
    from mtc.methods.mtcfir import MTCFIR
    from mtc.methods.spmtc import LSSMTC, PooledASI
    from mtc.numerics.kernels import union_kernel

    X = [sp_.csr_matrix(Xt) if sp_.issparse(Xt) else np.asarray(Xt) for Xt in matrices]
    N, d = sum(Xt.shape[0] for Xt in X), X[0].shape[1]
    c, l = max(ks), 8
    rows = []

    def wanted(label: str) -> bool:
        return only is None or label.startswith(tuple(only))

    if N <= 12000 and (wanted("MKC") or wanted("S-MKC")):  # the union kernel, N^2 doubles
        kernel = union_kernel(matrices)
        kernel_products = [Product(f"K[:, {t}] Z", kernel.K[:, slice(*kernel.spans[t])], k) for t, k in enumerate(ks)]
        rows += [("MKC", lambda it: MKC(tol=0.0, max_iter=it, cache=cache, n_clusters=ks, random_state=0),
                  kernel_products),
                 ("S-MKC", lambda it: SMKC(tol=0.0, max_iter=it, cache=cache, n_clusters=ks, random_state=0),
                  kernel_products)]

    def mbc_products(count):
        return [p for Xt, k in zip(X, ks) for p in (Product("X M'", Xt, k, count), Product("H'X", Xt.T, k, count))]

    # MALSAR's W stays a selection of l feature columns: X W and X'(OY) touch those columns alone
    # (LSSMTC._column_selection), and X'(OP) of the W step is the next sweep's Eq. 18 product
    lssmtc_products = [p for Xt in X for p in (Product("X'(OP)", Xt.T, c), Product("X M_k", Xt, c))]
    common = dict(n_clusters=ks, random_state=0)
    rows += [("MBC", lambda it: MBC(tol=0.0, stopping="decrease", max_iter=it, **common), mbc_products(1)),
             ("S-MBC", lambda it: MBC(smart=True, tol=0.0, stopping="decrease", max_iter=it, **common),
              mbc_products(2))]
    if len(set(ks)) == 1:  # the eigen W step: --asi (its once-per-fit null basis outweighs 10 iterations)
        rows.append(("LSSMTC malsar", lambda it: LSSMTC(n_components=l, stopping="none", max_iter=it, n_clusters=c,
                                                        random_state=0), lssmtc_products))
        pooled = sp_.vstack(X).tocsr() if sp_.issparse(X[0]) else np.vstack(X)
        # lambda = 0: no M_k, so no X M_k (LSSMTC._within_term_skipped)
        rows.append(("All ASI malsar", lambda it: PooledASI(n_components=l, stopping="none", max_iter=it, n_clusters=c,
                                                           random_state=0), [Product("X'(OP)", pooled.T, c)]))
    if d <= 5000:  # mSDA solves d x d systems
        rows.append(("MTCFIR", lambda it: MTCFIR(tol=0.0, max_iter=it, cache=cache, **common), None))
    rows.append(("MTCMRL", lambda it: MTCMRL(tol=0.0, max_iter=it, cache=cache, **common), None))
    return [row for row in rows if wanted(row[0])]


def late_products(label, cache, matrices, ks):
    """Products of the families whose operands exist only after a fit (kept in the cache)."""
    if label == "MTCFIR":
        (step,) = cache.results["mtcfir_similarities"].values()
        return [p for M, k in zip(step[1], ks)
                for p in (Product("M Y", M, k), Product("Y'Y", np.ones((k, M.shape[0])), k),
                          Product("Y (Y'Y)", np.ones((M.shape[0], k)), k))]
    from mtcmrl_iteration import iteration_products
    return iteration_products(cache, matrices, ks)


def snmf_per_iteration(cache, ks, m: int) -> float:
    """CPU seconds per iteration of MTCFIR's step 3 (SNMF, Eq. 25) on the similarities the fit
    kept in the cache, from a random + 0.2 start, summed over the tasks."""
    from mtc.numerics.snmf import snmf

    (step,) = cache.results["mtcfir_similarities"].values()
    total = 0.0
    for M, k in zip(step[1], ks):
        Y = np.random.default_rng(0).random((M.shape[0], k)) + 0.2
        seconds = []
        for iterations in (1, 1 + m):
            start = time.process_time()
            snmf(M, Y, tol=0.0, max_iter=iterations)
            seconds.append(time.process_time() - start)
        total += (seconds[1] - seconds[0]) / m
    return total


def main(names, m: int = 10, keep_heap: bool = True, only=None):
    import sys as _sys

    from threadpoolctl import threadpool_limits

    from mtc.cli import configured_dataset
    from mtc.numerics.cache import Cache
    from mtc.numerics.heap import keep_freed_memory

    _sys.path.insert(0, __file__.rsplit("/", 1)[0])
    heap = "freed memory kept" if keep_heap and keep_freed_memory() else "glibc's malloc defaults"
    for name in names:
        dataset = configured_dataset(name)
        matrices, ks = dataset.matrices, dataset.n_clusters
        print(f"{name}: tasks {[X.shape for X in matrices]}, clusters {ks}, {m} timed iterations, one thread, "
              f"{heap}")
        cache = Cache(size=4)
        rows = families(matrices, ks, cache, only)  # imports the solvers: a BLAS loaded inside the limit would escape it
        with threadpool_limits(1):
            for label, make, products in rows:
                seconds = per_iteration(make, matrices, m)
                if label == "MTCFIR":  # hashing the mSDA features per fit outweighs 10 SNMF iterations
                    seconds = snmf_per_iteration(cache, ks, m)
                products = products if products is not None else late_products(label, cache, matrices, ks)
                print("  " + reference_line(f"{label:16s}", seconds, products, clock=time.process_time), flush=True)


def asi_routes(name: str = "comp_vs_sci_counts", literal_iterations: int = 10):
    """Issue 32's All ASI hot spot (one thread): a whole fit with the eigen W step's per-weights
    invariants cached (the default) at l = 16, beside the route before (everything formed every
    iteration), timed over ``literal_iterations`` iterations: CPU seconds per iteration, and the
    1000 iterations (max_iter) it runs on the 20 Newsgroups pairs."""
    from threadpoolctl import threadpool_limits

    from mtc.cli import configured_dataset
    from mtc.methods.spmtc import LSSMTC, PooledASI

    dataset = configured_dataset(name)
    N, d = sum(X.shape[0] for X in dataset.matrices), dataset.matrices[0].shape[1]
    print(f"All ASI, eigen W step, l = 16, on {name} (N = {N}, d = {d}), one thread")
    with threadpool_limits(1):
        for route, max_iter in (("literal", literal_iterations), ("cached", 1000)):
            LSSMTC._eigen_route = route
            cpu, wall = time.process_time(), time.perf_counter()
            fit = PooledASI(n_clusters=dataset.n_clusters, n_components=16, w_update="eigen", max_iter=max_iter,
                            random_state=0).fit(dataset.matrices)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            print(f"  {route:7s}: {fit.n_iter_} iterations in {wall:.2f} s wall, {cpu:.2f} s CPU "
                  f"({cpu / fit.n_iter_:.3f} s CPU per iteration), ||XW||/||X|| = "
                  f"{fit.record_.scalars['w_projection']:.1e}", flush=True)
    LSSMTC._eigen_route = "cached"


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--asi"]:
        asi_routes(*sys.argv[2:3])
    else:
        arguments = sys.argv[1:]
        only = arguments.pop(arguments.index("--only") + 1).split(",") if "--only" in arguments else None
        m = int(arguments.pop(arguments.index("--iterations") + 1)) if "--iterations" in arguments else 10
        defaults = "--glibc-defaults" in arguments
        names = [name for name in arguments if name not in ("--glibc-defaults", "--only", "--iterations")]
        main(names or ["reuters"], m=m, keep_heap=not defaults, only=only)
