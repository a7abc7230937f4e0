"""Peak memory of a fit, estimated before it runs (issue 32, part 2).

One function per family gives the bytes a fit allocates at its peak (what tracemalloc
reports, the input matrices not counted) from the shapes of the tasks (``Shapes``: samples
per task, features, non-zeros per task, clusters) and the solver's parameters, on the route
the solver will take. The terms are the dominant arrays of each solver's code (n x n
affinities, Gram matrices, kernels, factors); benchmarks/scaling.py checks every estimate
against the measured peak (within 2x, docs/results/scaling.md). ``check_sweep_memory`` is
what the sweep driver calls before Ray starts: a sweep whose concurrent trials cannot fit in
the memory available is refused in one line naming the estimate and what to change.

Solvers are found by class name along their MRO (this module imports no other method
module): an ablation subclass is estimated as its family.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import scipy.sparse as sp

from mtc.errors import InputError
from mtc.numerics.affinity import BLOCK_BYTES, IMPLICIT_MIN_SAMPLES, is_non_negative

FLOAT = 8  # bytes of a float64
SPARSE = 12  # bytes of a CSR entry: float64 value + int32 column
KMEANS_OVERHEAD = 2**18  # scikit-learn's KMeans buffers beyond those counted below, measured
FIT_OVERHEAD = 2**18  # labels, traces, small factors


@dataclass(frozen=True)
class Shapes:
    """What an estimate reads of the data: samples ``n`` and non-zeros ``nnz`` per task (nnz
    None for dense tasks), features ``d``, clusters ``k`` per task, and whether every entry is
    non-negative (the cosine affinity's product route needs it: cosine_product_route)."""

    n: tuple[int, ...]
    d: int
    k: tuple[int, ...]
    nnz: tuple[int, ...] | None = None
    non_negative: bool = True

    @classmethod
    def of(cls, matrices, n_clusters) -> Shapes:
        ks = [int(n_clusters)] * len(matrices) if isinstance(n_clusters, int) else [int(k) for k in n_clusters]
        sparse = all(sp.issparse(X) for X in matrices)
        return cls(tuple(X.shape[0] for X in matrices), int(matrices[0].shape[1]), tuple(ks),
                   tuple(int(X.nnz) for X in matrices) if sparse else None,
                   all(is_non_negative(X) for X in matrices))

    @property
    def sparse(self) -> bool:
        return self.nnz is not None

    def pooled(self) -> Shapes:
        """The one task of a pooled ("all-task") solver: every row, max k clusters."""
        return Shapes((sum(self.n),), self.d, (max(self.k),), None if self.nnz is None else (sum(self.nnz),),
                      self.non_negative)

    def task(self, t: int) -> Shapes:
        return Shapes((self.n[t],), self.d, (self.k[t],), None if self.nnz is None else (self.nnz[t],),
                      self.non_negative)

    def data_bytes(self, t: int) -> int:
        """One task's matrix as stored (CSR or dense)."""
        return SPARSE * self.nnz[t] + 4 * self.n[t] if self.sparse else FLOAT * self.n[t] * self.d


def gram_bytes(shapes: Shapes, t: int, features: bool = False) -> int:
    """The smaller Gram matrix of task t, n x n or d x d (d x d when ``features``): dense, or
    for sparse rows the expected non-zeros of uniformly placed entries (1 - (1 - rho^2)^m of
    the pairs, m the other side)."""
    n, d = shapes.n[t], shapes.d
    side = d if features else min(n, d)
    if not shapes.sparse:
        return FLOAT * side * side
    rho = shapes.nnz[t] / (n * d)
    other = n if side == d else d
    fill = 1.0 - math.exp(-other * rho * rho)  # (1 - rho^2)^other
    return int(min(SPARSE * side * side * fill, FLOAT * side * side))


def per_task(shapes: Shapes, one) -> int:
    """The largest of one task's estimates (per-task solvers fit the tasks one after another)."""
    return max(one(shapes.task(t), t) for t in range(len(shapes.n)))


# --- one function per family -------------------------------------------------------------
def kmeans_bytes(shapes: Shapes, params: dict, row_space: bool = False) -> int:
    """k-means per task: scikit-learn's buffers, distances n x k, centres k x d, a copy of the
    data; with ``row_space`` (the SNMF solvers' seeding, seeding.kmeans_coordinates) the n x n
    Gram matrix and its eigenvectors when d > n."""
    def one(s, t):
        n = s.n[0]
        data = 2 * s.data_bytes(0) if s.sparse else s.data_bytes(0)
        seeding = FLOAT * 3 * n * n if row_space and s.d > n else 0
        return int(KMEANS_OVERHEAD + max(data, seeding) + FLOAT * (4 * n * s.k[0] + 3 * s.k[0] * s.d))
    return per_task(shapes, one)


def snmf_bytes(shapes: Shapes, params: dict) -> int:
    """SNMF per task: the dense route holds M (n^2) and one n^2 temporary (the unit-row copy and
    M * M for ||M||^2; the Gaussian affinity its distances); the implicit route the unit rows,
    their Gram matrix (for ||M||^2) and a few n x k factors; plus the k-means start."""
    def one(s, t):
        n, k = s.n[0], s.k[0]
        if implicit_route(s, params):
            body = 2 * s.data_bytes(0) + 2 * gram_bytes(s, 0) + FLOAT * 8 * n * k
        elif params.get("route") == "knn":
            m = params.get("n_neighbors", 10) + 1
            body = 6 * SPARSE * n * m + FLOAT * 8 * n * k
        else:
            body = FLOAT * (2 if params.get("affinity", "cosine") == "cosine" else 3) * n * n
        return max(body, kmeans_bytes(s, params, row_space=True))
    return per_task(shapes, one)


def ncut_bytes(shapes: Shapes, params: dict) -> int:
    """N-cut per task: scikit-learn's dense route holds the affinity, its Laplacian and two
    copies (4 n^2); the implicit route the unit rows and ARPACK's n x max(2k + 1, 20) basis."""
    def one(s, t):
        n, k = s.n[0], s.k[0]
        if implicit_route(s, params):
            return 2 * s.data_bytes(0) + FLOAT * n * (max(2 * k + 1, 20) + 4 * k)
        if params.get("route") == "knn":
            return 8 * SPARSE * n * (params.get("n_neighbors", 10) + 1) + KMEANS_OVERHEAD
        return FLOAT * 4 * n * n
    return per_task(shapes, one)


def cosine_product_route(shapes: Shapes, t: int) -> bool:
    """Whether cosine_operator multiplies by task t's cosine affinity as N N' (non-negative rows,
    sparse with fewer than n^2 / 2 non-zeros or of width d <= n / 4). Signed rows are budgeted
    as the dense affinity: how many of their cosines are negative, which decides between the
    clipped part R (up to 20 % of n^2 entries) and the dense matrix, is not known before the fit."""
    n = shapes.n[t]
    return shapes.non_negative and (4 * shapes.d <= n or (shapes.sparse and 2 * shapes.nnz[t] < n * n))


def clipped_search_bytes(shapes: Shapes, t: int) -> int:
    """The transient part of cosine_operator on signed rows of width d <= n / 4: its search for
    the clipped part R holds three row blocks of N N' at once (at most BLOCK_BYTES each). What
    it keeps, R (up to MAX_NEGATIVE_SHARE of n^2 entries) or past that share the dense
    affinity, is at most the dense n^2 (how many cosines are negative is not known before)."""
    return 3 * min(BLOCK_BYTES, FLOAT * shapes.n[t] ** 2)


def implicit_route(shapes: Shapes, params: dict) -> bool:
    """Whether the affinity is applied without forming it (mtc.numerics.affinity.uses_implicit,
    then cosine_operator on "auto")."""
    route = params.get("route", "auto")
    if route == "auto":
        return (params.get("affinity", "cosine") == "cosine" and shapes.sparse and shapes.n[0] >= IMPLICIT_MIN_SAMPLES
                and cosine_product_route(shapes, 0))
    return route == "implicit"


def mtcmrl_bytes(shapes: Shapes, params: dict) -> int:
    """MTCMRL: every task's similarity (n_t^2 when dense: non-cosine, or cosine_operator's
    dense cases and signed rows), the ridge factors (a min(n, d)^2 Gram matrix, its eigenvectors and V, d x r),
    the row space when taken ((N + 1)^2 Gram matrix); the Sylvester route's n x n Gram."""
    total = 0
    for t, n in enumerate(shapes.n):
        r = min(n, shapes.d)
        dense_m = params.get("affinity", "cosine") != "cosine" or not cosine_product_route(shapes, t)
        total += FLOAT * n * n if dense_m else 2 * shapes.data_bytes(t) + gram_bytes(shapes, t)
        total += FLOAT * (r * r + shapes.d * r) + FLOAT * 10 * n * shapes.k[t]  # kept: ridge factor
        if params.get("w_solver") == "sylvester":
            total += FLOAT * 3 * n * n
    total += FLOAT * min(max(shapes.n), shapes.d) ** 2  # the largest factor's eigendecomposition
    narrow = [t for t, n in enumerate(shapes.n) if 4 * shapes.d <= n]
    if params.get("affinity", "cosine") == "cosine" and not shapes.non_negative and narrow:
        total += max(clipped_search_bytes(shapes, t) for t in narrow)  # one task's search at a time
    N = sum(shapes.n) + 1
    if params.get("row_space", "auto") is True or (params.get("row_space", "auto") == "auto" and N < shapes.d):
        total += FLOAT * 3 * N * N
    return total + KMEANS_OVERHEAD


def smtnmf_bytes(shapes: Shapes, params: dict) -> int:
    """SMT-NMF on the N stacked rows: the dense route builds G from the sparse product D B'
    (up to N^2 entries) and holds G and W (3 N^2 measured); the implicit route three d x d
    Grams per task (for ||W||^2) and a few N x k factors."""
    N, k = sum(shapes.n), max(shapes.k)
    route = params.get("route", "auto")
    if route == "implicit" or (route == "auto" and N >= IMPLICIT_MIN_SAMPLES):
        each = [gram_bytes(shapes, t, features=True) for t in range(len(shapes.n))]
        grams = 3 * sum(each) + 2 * max(each)  # kept, and the temporaries of one inner product
        data = 4 * sum(shapes.data_bytes(t) for t in range(len(shapes.n)))
        return grams + data + FLOAT * 12 * N * k + FIT_OVERHEAD
    return FLOAT * 3 * N * N + FIT_OVERHEAD


def mtcfir_bytes(shapes: Shapes, params: dict) -> int:
    """MTCFIR (coarse): mSDA features of the stacked rows (dense N x d, a few layers' worth, and
    d x d mappings), every task's relation matrices n_t x n_s and similarity n_t^2."""
    N, d = sum(shapes.n), shapes.d
    features = FLOAT * (3 * N * d + 3 * d * d) * (1 if params.get("common_features", True) else 0)
    relations = FLOAT * 3 * sum(n * m for n in shapes.n for m in shapes.n)
    return features + relations + KMEANS_OVERHEAD


def mbc_bytes(shapes: Shapes, params: dict) -> int:
    """MBC (measured: linear in n): a copy of each task's rows, n x k distances and k x d
    centres per task and task pair."""
    T = len(shapes.n)
    return sum(shapes.data_bytes(t) + FLOAT * (4 * n * k * T + k * shapes.d * T)
               for t, (n, k) in enumerate(zip(shapes.n, shapes.k)))


def mkc_bytes(shapes: Shapes, params: dict) -> int:
    """S-MKC / MKC. Dense rows (measured: 5 N d up to n = 2000 per task, linear in n there):
    feature-sized temporaries of the stacked rows and one task's n x n kernel. Sparse rows are
    never densified (mtc.numerics.kernels.union_kernel): the stacked CSR copy and the N x N
    union kernel with its squared distances (two N x N arrays; 20NG's ng3, N = 15,177 rows of
    85,832 terms, would be 52 GB as dense rows, 3.7 GB this way)."""
    N = sum(shapes.n)
    if shapes.sparse:
        return SPARSE * 2 * sum(shapes.nnz) + FLOAT * 2 * N ** 2 + KMEANS_OVERHEAD
    return FLOAT * (5 * N * shapes.d + max(shapes.n) ** 2) + KMEANS_OVERHEAD


def spmtc_bytes(shapes: Shapes, params: dict) -> int:
    """LSSMTC / SPMTC (measured: one task's rows' worth for dense rows up to n = 2000, d = 2000):
    a dense copy of the largest task and l x d factors."""
    return max(FLOAT * shapes.n[t] * shapes.d for t in range(len(shapes.n))) + KMEANS_OVERHEAD


def asi_bytes(shapes: Shapes, params: dict) -> int:
    """ASI per task (measured as LSSMTC): a dense copy of the task's rows."""
    return per_task(shapes, lambda s, t: FLOAT * s.n[0] * s.d) + KMEANS_OVERHEAD


def kernel_kmeans_bytes(shapes: Shapes, params: dict) -> int:
    """Kernel k-means: every task's Gaussian kernel (a sweep's worker keeps them for the next
    seeds, KernelKMeans' ``cache``) and the largest task's distances and temporary (2 n^2); on
    the Nyström route, per task, the n x m kernel to the drawn rows, its features and a
    product's temporary (3 n m)."""
    if params.get("route") == "nystroem":
        return per_task(shapes, lambda s, t: FLOAT * 3 * s.n[0] * min(params["n_components"], s.n[0])) + KMEANS_OVERHEAD
    return FLOAT * (sum(n**2 for n in shapes.n) + 2 * max(shapes.n) ** 2) + KMEANS_OVERHEAD


FAMILIES = {  # solver class name -> its family's estimate; subclasses found through the MRO
    "KMeansClusterer": kmeans_bytes, "SymmetricNMF": snmf_bytes, "NormalizedCut": ncut_bytes,
    "KernelKMeans": kernel_kmeans_bytes, "MTCMRL": mtcmrl_bytes, "MTCFIR": mtcfir_bytes, "SMTNMF": smtnmf_bytes,
    "MBC": mbc_bytes, "MKC": mkc_bytes, "LSSMTC": spmtc_bytes, "ASI": asi_bytes,
}


def estimate_peak_bytes(solver, shapes: Shapes) -> int | None:
    """Estimated peak bytes of ``solver.fit`` on tasks of ``shapes`` (None for a solver of no
    known family); a pooled solver is estimated on the stacked rows."""
    names = [cls.__name__ for cls in type(solver).__mro__]
    family = next((FAMILIES[name] for name in names if name in FAMILIES), None)
    if family is None:
        return None
    params = solver.get_params()
    return int(family(shapes.pooled() if "PooledClusterer" in names else shapes, params) + FIT_OVERHEAD)


def available_bytes() -> int:
    """Memory available to new processes: psutil when installed, else /proc/meminfo's
    MemAvailable, else the free pages."""
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        return int(psutil.virtual_memory().available)
    try:
        with open("/proc/meminfo") as lines:
            for line in lines:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def gigabytes(count: int) -> str:
    return f"{count / 2**30:.1f} GiB"


def check_sweep_memory(solver, shapes: Shapes, points: list[dict], concurrent: int, available: int | None = None,
                       reserved: int = 0) -> int | None:
    """The largest estimated peak over the grid ``points`` (parameter overrides of ``solver``);
    an InputError in one line when ``concurrent`` trials of it do not fit in ``available``
    bytes (default: available_bytes()) less ``reserved`` (Ray's object store). None when the
    solver's family is unknown (nothing is checked)."""
    peaks = [estimate_peak_bytes(solver.__class__(**{**solver.get_params(), **point}), shapes) for point in points or [{}]]
    if None in peaks:
        return None
    peak = max(peaks)
    free = (available_bytes() if available is None else available) - reserved
    if concurrent * peak <= free:
        return peak
    name = type(solver).__name__
    fits = free // peak
    route = implicit_hint(solver.get_params(), "+method.params.route=implicit")
    if fits >= 1:
        raise InputError(f"{name}: a fit needs about {gigabytes(peak)} (estimate) and {concurrent} concurrent trials "
                         f"{gigabytes(concurrent * peak)}, but {gigabytes(free)} is free: set "
                         f"sweep.max_concurrent_trials={fits}{route}")
    raise InputError(f"{name}: a fit needs about {gigabytes(peak)} (estimate) but {gigabytes(free)} is free, not even "
                     f"one trial fits: use fewer samples per task{route}")


def implicit_hint(params: dict, setting: str) -> str:
    """", or <setting> (exact, ...)" for a solver on the dense route that has an exact implicit
    one (cosine affinity), else ""."""
    implicit = params.get("route") not in (None, "implicit") and params.get("affinity", "cosine") == "cosine"
    return f", or {setting} (exact, no n x n affinity)" if implicit else ""


ESTIMATE_SLACK = 2  # the estimates are within 2x of the measured peaks (benchmarks/scaling.py)


def check_fit_memory(solver, shapes: Shapes, available: int | None = None) -> int | None:
    """What ``fit`` checks before it allocates (issue 32): an InputError in one line, with the
    estimate, when a fit of ``solver`` on tasks of ``shapes`` cannot fit in the memory
    available (default: available_bytes()) even if the estimate is ESTIMATE_SLACK times the
    peak; returns the estimate (None: a solver of no known family, nothing checked). Only the
    hopeless fit is refused here: a sweep's trials are checked against the whole estimate
    before Ray starts (check_sweep_memory), and a fit the estimate overstates still runs."""
    peak = estimate_peak_bytes(solver, shapes)
    if peak is None:
        return None
    free = available_bytes() if available is None else available
    if peak > ESTIMATE_SLACK * free:
        hint = implicit_hint(solver.get_params(), "route='implicit'")
        raise InputError(f"{type(solver).__name__}: a fit on {len(shapes.n)} tasks of {max(shapes.n)} samples needs "
                         f"about {gigabytes(peak)} (estimate, mtc.methods.memory) but {gigabytes(free)} is free: use "
                         f"fewer samples per task{hint}")
    return peak
