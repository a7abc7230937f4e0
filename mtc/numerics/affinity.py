"""Affinity matrices between the samples of one task, and pairwise squared distances."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.metrics.pairwise import cosine_similarity, euclidean_distances
from sklearn.preprocessing import normalize

from mtc.numerics.linalg import SYRK_ROWS, as_dense, dense_gram, self_gram

AFFINITIES = ("cosine", "gaussian")
WIDTH_MODES = ("relative", "absolute")  # Gaussian width: x the median distance, or sigma itself


def row_norms_sq(X) -> np.ndarray:
    """||x_i||^2 for every row of a dense or sparse X."""
    return np.asarray(X.multiply(X).sum(axis=1)).ravel() if sp.issparse(X) else np.sum(X * X, axis=1)


# A CSR A times the rows of a dense B one matvec per row while B has at most MATVEC_ROWS rows
# and A's stored entries times them stay under MATVEC_WORK (A is read once per row of B: it must
# stay in cache). One thread, A @ B' against one matvec per row: NG1's last task (114,152
# stored entries) 0.57 / 0.29 ms at 3 rows, 0.57 / 0.37 at 4, 0.64 / 0.79 at 8; NG3's
# (634,957) 2.48 / 1.19 ms at 2 rows, 2.81 / 3.15 at 3.
MATVEC_ROWS = 4
MATVEC_WORK = 1_500_000


def takes_matvecs(A, rows: int) -> bool:
    """Whether A B' for a dense B of ``rows`` rows goes by ``sparse_times_rows``: a CSR A, at
    most MATVEC_ROWS rows, and A's stored entries times them under MATVEC_WORK."""
    return sp.issparse(A) and A.format == "csr" and rows <= MATVEC_ROWS and A.nnz * rows <= MATVEC_WORK


def sparse_times_rows(A, B: np.ndarray) -> np.ndarray:
    """A B' for a CSR A and a dense B of few rows (centroids), one sparse matrix-vector
    product per row of B into its column: scipy's A @ B' first copies B' (d x m, strided)
    into C order and runs its multi-vector kernel, 0.59 ms on an NG1 task (40,674 terms, 3
    centroids) against 0.28 ms this way. Both kernels add a_ik b_jk in the stored order of
    row i from zero, so the same bits (tests/test_hotspots.py)."""
    out = np.empty((A.shape[0], B.shape[0]), dtype=np.result_type(A.dtype, B.dtype))
    for j, row in enumerate(B):  # the rows of B (clusters), not samples
        out[:, j] = A @ row
    return out


def squared_distances(A, B: np.ndarray | None = None, a_sq: np.ndarray | None = None) -> np.ndarray:
    """||a_i - b_j||^2 between the rows of A (dense or sparse) and of B (B = A when omitted),
    clipped at 0; ``a_sq`` are A's squared row norms when already known."""
    a2 = row_norms_sq(A) if a_sq is None else a_sq
    if B is None:  # A A': by row blocks above SYRK_ROWS dense rows (mtc.numerics.linalg.dense_gram)
        products, b2 = self_gram(A), a2
    elif isinstance(B, np.ndarray) and B.ndim == 2 and takes_matvecs(A, B.shape[0]):
        products, b2 = sparse_times_rows(A, B), row_norms_sq(B)
    else:
        products, b2 = np.asarray(A @ B.T), row_norms_sq(B)
    return np.maximum(a2[:, None] + b2[None, :] - 2.0 * products, 0.0)


def cosine_affinity(X) -> np.ndarray:
    """Cosine similarity, negative values clipped to 0 so that SNMF/Ncut get M >= 0."""
    if sp.issparse(X) or X.shape[0] <= SYRK_ROWS:
        M = cosine_similarity(X, dense_output=True)
    else:  # scikit-learn's product of the normalised rows takes SYRK (mtc.numerics.linalg.dense_gram)
        M = dense_gram(normalize(np.asarray(X, dtype=float)))
    np.maximum(M, 0.0, out=M)
    return M


class CosineProduct:
    """The clipped cosine affinity as a product, M = N N' + R: N the rows scaled to unit
    length, R = max(-N N', 0) the sparse part that cosine_affinity's clipping removes (None
    when no cosine is negative, e.g. for non-negative rows). M @ Y costs N (N' Y) and R Y,
    O(n d h + nnz(R) h), instead of a pass over the dense n x n M: 20NG's sparse rows (2 x
    90,000 non-zeros against 1558^2 entries per product), Handdigits' mSDA features (d = 1024
    against n = 5000; at corruption 0.5-0.7 at most 1.1 % of the cosines are negative).

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n, d)
        The rows.
    correction : sparse matrix of shape (n, n) or None, default=None
        R; None when no cosine is negative.
    squared_norm : float or None, default=None
        ||M||_F^2 when already known; otherwise computed (densely) when asked.
    """

    def __init__(self, X, correction=None, squared_norm=None):
        from sklearn.preprocessing import normalize

        unit = normalize(X)  # zero rows stay zero, as in cosine_similarity
        self.N = sp.csr_matrix(unit) if sp.issparse(X) else unit
        self.correction = correction
        self._squared_norm = squared_norm
        self.shape = (X.shape[0], X.shape[0])

    def __matmul__(self, Y: np.ndarray) -> np.ndarray:
        MY = np.asarray(self.N @ (self.N.T @ Y))
        return MY if self.correction is None else MY + self.correction @ Y

    def squared_norm(self) -> float:
        """||M||_F^2; without a correction ||N N'||_F^2 = ||N'N||_F^2, from the smaller of the
        two Gram matrices (d x d for n > d: no n x n array)."""
        if self._squared_norm is None:
            n, d = self.N.shape
            gram = self.N.T @ self.N if d < n else self.N @ self.N.T
            self._squared_norm = float(gram.multiply(gram).sum()) if sp.issparse(gram) else float(np.sum(gram * gram))
        return self._squared_norm

    def diagonal(self) -> np.ndarray:
        """M_ii = ||n_i||^2 (1, or 0 for an empty row; R has a zero diagonal)."""
        return row_norms_sq(self.N)

    def max(self) -> float:
        """max(M): the largest diagonal entry (no cosine exceeds the norms, Cauchy-Schwarz)."""
        return float(self.diagonal().max())


# Above this share of negative cosines, R Y (a sparse product) and N (N'Y) together cost about as
# much as the dense M Y. Handdigits' 5,000 x 1,024 mSDA features, one thread, k = 10: dense M Y
# 40-43 ms; R Y 0.9 ms at a 1 % share, 6.4 ms at 7.2 %, 8.0 ms at 7.9 %, 16.5 ms at 18.8 %; N (N'Y)
# 17-21 ms, or 7-8 ms in SNMF's one pass (mtc.numerics.snmf.iterate_one_pass). R at 20 % holds
# 12 bytes x 0.2 n^2, 30 % of the dense matrix's bytes, 60 % while its row blocks are stacked.
MAX_NEGATIVE_SHARE = 0.2


BLOCK_BYTES = 2**26  # 64 MiB: the rows of N N' computed at once where its negatives are sought


def clipped_part(N, max_share: float | None = None):
    """(R, ||max(N N', 0)||_F^2) with R = max(-N N', 0) sparse, from blocks of BLOCK_BYTES of
    rows of N N' (never all n^2 entries at once); None when R would hold more than ``max_share``
    of the n^2 entries (checked as the blocks come)."""
    n = N.shape[0]
    rows = max(1, BLOCK_BYTES // (8 * n))
    parts, total, kept = [], 0.0, 0
    for start in range(0, n, rows):  # n / rows blocks, each vectorised
        C = as_dense(N[start:start + rows] @ N.T)
        kept += int(np.count_nonzero(C < 0))
        if max_share is not None and kept > max_share * n * n:  # given up before building the block
            return None
        parts.append(sp.csr_matrix(np.maximum(-C, 0.0)))
        np.maximum(C, 0.0, out=C)
        total += float(np.sum(C * C))
    R = sp.vstack(parts, format="csr")
    return (R if R.nnz else None), total


def is_non_negative(X) -> bool:
    values = X.data if sp.issparse(X) else X
    return values.size == 0 or values.min() >= 0


def cosine_product(X) -> CosineProduct:
    """The clipped cosine affinity of X as products, whatever its rows (the implicit route):
    no correction for non-negative rows, else R from clipped_part."""
    if is_non_negative(X):
        return CosineProduct(X)
    operator = CosineProduct(X)
    operator.correction, operator._squared_norm = clipped_part(operator.N)
    return operator


def cosine_operator(X):
    """What multiplies by the clipped cosine affinity of X (equal products to rounding):
    - non-negative rows, sparse with fewer than n^2 / 2 non-zeros or dense of width d <= n / 4:
      CosineProduct (M = N N', no cosine is negative);
    - rows of width d <= n / 4 whose cosines are at most MAX_NEGATIVE_SHARE negative:
      CosineProduct with the sparse clipped part R (4 n d + nnz(R) instead of 2 n^2 flops
      per column of Y), R sought in row blocks of N N';
    - otherwise cosine_affinity(X), dense."""
    n, d = X.shape
    narrow = 4 * d <= n
    if is_non_negative(X) and (2 * X.nnz < n**2 if sp.issparse(X) else narrow):
        return CosineProduct(X)
    if not narrow:
        return cosine_affinity(X)
    operator = CosineProduct(X)
    parts = clipped_part(operator.N, MAX_NEGATIVE_SHARE)
    if parts is None:
        return cosine_affinity(X)
    operator.correction, operator._squared_norm = parts
    return operator


ROUTES = ("auto", "dense", "implicit")
IMPLICIT_MIN_SAMPLES = 5000  # auto: a dense affinity of 5000 rows is 200 MB, of 30,000 rows 7.2 GB


def uses_implicit(X, kind: str, route: str) -> bool:
    """Whether ``route`` (one of ROUTES) multiplies by the affinity without forming it: "auto"
    for the cosine affinity of sparse rows, at least IMPLICIT_MIN_SAMPLES of them."""
    if route == "auto":
        return kind == "cosine" and sp.issparse(X) and X.shape[0] >= IMPLICIT_MIN_SAMPLES
    return route == "implicit"


def affinity_operator(X, kind: str, width: float = 1.0, route: str = "auto"):
    """The ``kind`` affinity of X's rows: the dense matrix, or on the implicit route (see
    uses_implicit) an exact product form of it, CosineProduct (cosine only: a Gaussian kernel
    has no exact low-rank form)."""
    if not uses_implicit(X, kind, route):
        return affinity_matrix(X, kind, width)
    if kind != "cosine":
        raise ValueError(f"the {kind} affinity has no exact implicit route; only cosine has")
    return cosine_operator(X) if route == "auto" else cosine_product(X)


def route_affinity(X, kind: str, width: float, route: str, n_neighbors: int = 10):
    """M on one of ROUTES or the approximate "knn" route (knn_affinity)."""
    if route == "knn":
        return knn_affinity(X, kind, width, n_neighbors)
    return affinity_operator(X, kind, width, route)


def route_problem(kind: str, route: str) -> str | None:
    """One line naming the fix when ``route`` cannot give the ``kind`` affinity exactly."""
    if route == "implicit" and kind != "cosine":
        return (f"route='implicit' is exact only for the cosine affinity, not {kind!r}: use route='dense' or the "
                "approximate route='knn'")
    return None


def median_positive(D2: np.ndarray) -> float:
    """Median of the non-zero off-diagonal squared distances (bandwidth heuristic)."""
    return median_positive_values(D2[np.triu_indices_from(D2, k=1)])


def gaussian_sigma2(width: float, mode: str, median_d2) -> float:
    """sigma^2 of a Gaussian kernel: width^2 x the median squared distance (``relative``, the
    MTCMRL/MTCFIR papers' heuristic) or width^2 (``absolute``: width is sigma, as the AAAI-13
    paper's grid {0.1, 1, 10, 100}). ``median_d2`` is a value or a function returning it (only
    called in the relative mode)."""
    if mode == "absolute":
        return float(width) ** 2
    if mode == "relative":
        return width**2 * (median_d2() if callable(median_d2) else median_d2)
    raise ValueError(f"unknown width mode {mode!r}; choose one of {WIDTH_MODES}")


def gaussian_affinity(X, width: float = 1.0, mode: str = "relative") -> np.ndarray:
    """exp(-||x_i - x_j||^2 / (2 sigma^2)) with sigma^2 = width^2 * median squared distance
    (``mode="relative"``) or sigma = width (``mode="absolute"``).

    Sparse rows stay sparse: the distances come from their sparse products (scikit-learn's
    ``euclidean_distances``), never from an n x d dense copy (20NG's ng3, 6,393 x 85,832 tf-idf
    rows: 4.4 GB and 75 s of dense products, against 0.3 s). The kernel equals the dense rows'
    to rounding (1e-16), not to the bit: the products are summed in another order."""
    if sp.issparse(X) or X.shape[0] <= SYRK_ROWS:
        D2 = euclidean_distances(X, squared=True)
    else:  # scikit-learn's X X' takes SYRK, which crashes OpenBLAS there (mtc.numerics.linalg.dense_gram)
        D2 = squared_distances(np.asarray(X))
        np.fill_diagonal(D2, 0.0)
    sigma2 = gaussian_sigma2(width, mode, lambda: median_positive(D2))
    return np.exp(-D2 / (2.0 * sigma2))


def nystroem_features(X, width: float, mode: str, n_components: int, rng: np.random.Generator) -> np.ndarray:
    """**Not any paper's kernel**, an approximation for large n: features Phi (n x m) whose
    Phi Phi' is the Nyström approximation of gaussian_affinity's kernel from m =
    min(n_components, n) rows drawn at random (scikit-learn's ``Nystroem``, sparse rows kept
    sparse); no n x n array is formed. A relative width takes the median squared distance
    among m rows drawn at random (the dense route's median is over all pairs). Both draws come
    from ``rng``."""
    from sklearn.kernel_approximation import Nystroem

    n = X.shape[0]
    m = min(int(n_components), n)
    sample = X[np.sort(rng.choice(n, size=m, replace=False))]
    sigma2 = gaussian_sigma2(width, mode, lambda: median_positive(euclidean_distances(sample, squared=True)))
    nystroem = Nystroem(kernel="rbf", gamma=1.0 / (2.0 * sigma2), n_components=m,
                        random_state=int(rng.integers(2**31 - 1)))
    return nystroem.fit_transform(X)


def knn_affinity(X, kind: str, width: float = 1.0, n_neighbors: int = 10):
    """**Not any paper's affinity**, an approximation for large n: the ``kind`` affinity kept
    only between each row and its ``n_neighbors`` nearest rows (itself included, cosine or
    Euclidean distance, brute force in sklearn's memory-bounded chunks), symmetrised by the
    larger of M_ij and M_ji; sparse, O(n n_neighbors). The Gaussian width is relative to the
    median of the squared distances to the neighbours found (the dense route's median is over
    all pairs)."""
    from sklearn.neighbors import NearestNeighbors

    n = X.shape[0]
    m = min(n_neighbors + 1, n)
    if kind not in AFFINITIES:
        raise ValueError(f"unknown affinity {kind!r}; choose one of {AFFINITIES}")
    metric = "cosine" if kind == "cosine" else "euclidean"
    distances, neighbours = NearestNeighbors(n_neighbors=m, metric=metric, algorithm="brute").fit(X).kneighbors(X)
    if kind == "cosine":
        values = np.maximum(1.0 - distances, 0.0)
    else:
        d2 = distances**2
        values = np.exp(-d2 / (2.0 * gaussian_sigma2(width, "relative", lambda: median_positive_values(d2[:, 1:]))))
    M = sp.csr_matrix((values.ravel(), neighbours.ravel(), np.arange(0, n * m + 1, m)), shape=(n, n))
    return M.maximum(M.T).tocsr()


def median_positive_values(values: np.ndarray) -> float:
    """Median of the positive entries (1 when there is none)."""
    positive = values[values > 0]
    return float(np.median(positive)) if positive.size else 1.0


def affinity_matrix(X, kind: str, width: float = 1.0) -> np.ndarray:
    """The ``kind`` affinity (one of AFFINITIES) between the rows of X."""
    if kind == "cosine":
        return cosine_affinity(X)
    if kind == "gaussian":
        return gaussian_affinity(X, width)
    raise ValueError(f"unknown affinity {kind!r}; choose one of {AFFINITIES}")
