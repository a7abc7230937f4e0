"""Memory known before a sweep starts (issue 32, part 2): each family's estimate against the
peak tracemalloc measures for a real fit, and the one-line refusal of a sweep whose
concurrent trials cannot fit."""

import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from mtc.errors import InputError
from mtc.methods.kmeans import PooledKMeans
from mtc.methods.memory import Shapes, check_sweep_memory, estimate_peak_bytes
from mtc.methods.mkc import SMKC
from mtc.methods.mtcmrl import MTCMRL
from mtc.methods.smtnmf import SMTNMF
from mtc.methods.snmf import PooledSymmetricNMF, SymmetricNMF
from mtc.methods.spectral import NormalizedCut


@pytest.fixture(scope="module")
def tasks():
    return [sp.random(2500, 2000, density=0.01, random_state=seed, format="csr") for seed in (1, 2)]


SOLVERS = {
    "snmf-dense": lambda: SymmetricNMF(n_clusters=[4, 4], route="dense", max_iter=3),
    "snmf-implicit": lambda: SymmetricNMF(n_clusters=[4, 4], route="implicit", max_iter=3),
    "a-nmf-dense": lambda: PooledSymmetricNMF(n_clusters=[4, 4], route="dense", max_iter=3),
    "ncut-dense": lambda: NormalizedCut(n_clusters=[4, 4], route="dense", n_init=2),
    "mtcmrl": lambda: MTCMRL(n_clusters=[4, 4], max_iter=2),
    "smtnmf-dense": lambda: SMTNMF(n_clusters=4, route="dense", max_iter=3),
    "smtnmf-implicit": lambda: SMTNMF(n_clusters=4, route="implicit", max_iter=3),
    "smkc-sparse": lambda: SMKC(n_clusters=[4, 4], max_iter=3),  # the N x N union kernel, rows kept sparse
}


def traced_peak(solver, tasks) -> int:
    """The peak bytes tracemalloc traces while ``solver`` fits ``tasks``."""
    PooledKMeans(n_clusters=[4, 4], random_state=0).fit(tasks)  # scikit-learn's one-time set-up, not the fit's
    tracemalloc.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            solver.fit(tasks)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_estimate_is_within_2x_of_the_measured_peak(tasks, name):
    solver = SOLVERS[name]().set_params(random_state=0)
    peak = traced_peak(solver, tasks)
    estimate = estimate_peak_bytes(solver, Shapes.of(tasks, [4, 4]))
    assert 0.5 <= estimate / peak <= 2.0, (estimate, peak)


@pytest.mark.parametrize("shift", [0.0, 0.5, 3.0])
def test_mtcmrl_on_signed_narrow_rows_is_within_2x(shift):
    """Signed dense rows with d <= n / 4: cosine_operator seeks the clipped part R in blocks of
    N N' (shift 0.5: some cosines negative, kept as R; 3.0: none) or, past its share, takes the
    dense affinity (shift 0: half the cosines negative). Budgeted as non-negative rows, the
    estimate was 9.8 MiB against a peak near 135 MiB."""
    rng = np.random.default_rng(0)
    tasks = [rng.standard_normal((2400, 100)) + shift for _ in range(2)]
    solver = MTCMRL(n_clusters=[4, 4], max_iter=2, random_state=0)
    peak = traced_peak(solver, tasks)
    shapes = Shapes.of(tasks, [4, 4])
    assert not shapes.non_negative
    assert 0.5 <= estimate_peak_bytes(solver, shapes) / peak <= 2.0


def test_the_implicit_route_turns_a_7_gb_estimate_into_a_small_one():
    shapes = Shapes((30_000, 30_000), 2_000, (4, 4), (600_000, 600_000))
    dense = estimate_peak_bytes(SymmetricNMF(route="dense"), shapes)
    auto = estimate_peak_bytes(SymmetricNMF(), shapes)
    assert dense >= 2 * 30_000**2 * 8 and auto < 30_000**2 * 8 / 10


def test_a_sweep_that_does_not_fit_is_refused_in_one_line_naming_the_fix():
    shapes = Shapes((10_000, 10_000), 500, (4, 4), (50_000, 50_000))
    solver = SymmetricNMF(route="dense")
    peak = estimate_peak_bytes(solver, shapes)
    assert check_sweep_memory(solver, shapes, [{}], concurrent=2, available=2 * peak + 1) == peak
    with pytest.raises(InputError) as error:
        check_sweep_memory(solver, shapes, [{}], concurrent=4, available=int(2.5 * peak))
    message = str(error.value)
    assert "\n" not in message and message.startswith("SymmetricNMF: a fit needs about 1.5 GiB (estimate)")
    assert "set sweep.max_concurrent_trials=2" in message and "route=implicit" in message
    with pytest.raises(InputError, match="not even one trial fits: use fewer samples per task"):
        check_sweep_memory(solver, shapes, [{}], concurrent=1, available=peak // 2)
    # the grid's largest point decides: the dense point of a grid over the route
    with pytest.raises(InputError, match="max_concurrent_trials=1"):
        check_sweep_memory(SymmetricNMF(), shapes, [{"route": "implicit"}, {"route": "dense"}], concurrent=2,
                           available=int(1.5 * peak))


def test_reserved_memory_counts_and_unknown_solvers_are_not_checked():
    shapes = Shapes((1000,), 50, (3,))
    solver = NormalizedCut(route="dense")
    peak = estimate_peak_bytes(solver, shapes)
    with pytest.raises(InputError):
        check_sweep_memory(solver, shapes, [{}], concurrent=1, available=peak + 10, reserved=20)

    class Unknown:
        def get_params(self):
            return {}

    assert estimate_peak_bytes(Unknown(), shapes) is None


def test_shapes_of_dense_and_sparse_tasks():
    dense = Shapes.of([np.ones((5, 3)), np.ones((4, 3))], 2)
    assert dense == Shapes((5, 4), 3, (2, 2), None) and not dense.sparse
    sparse = Shapes.of([sp.eye(5, 3, format="csr"), sp.eye(4, 3, format="csr")], [2, 3])
    assert sparse.nnz == (3, 3) and sparse.pooled() == Shapes((9,), 3, (3,), (6,))
    signed = Shapes.of([np.ones((5, 3)), -sp.eye(4, 3, format="csr")], 2)
    assert dense.non_negative and sparse.non_negative and not signed.non_negative
    assert not signed.pooled().non_negative and not signed.task(0).non_negative


def test_a_fit_that_cannot_fit_in_memory_is_refused_in_one_line_before_it_allocates():
    """MTCFIR on two tasks of 50,000 documents (issue 32's size): its n x n relations alone are
    hundreds of GB, so fit refuses with its estimate before allocating anything of that size."""
    from mtc.methods.memory import check_fit_memory
    from mtc.methods.mtcfir import MTCFIR

    X = sp.random(50_000, 2000, density=0.001, random_state=3, format="csr")
    estimate = estimate_peak_bytes(MTCFIR(n_clusters=[4, 4]), Shapes.of([X, X], [4, 4]))
    assert estimate > 100 * 2**30
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match=r"^MTCFIR: a fit on 2 tasks of 50000 samples needs about \d+\.\d GiB "
                                             r"\(estimate, mtc.methods.memory\) but \d+\.\d GiB is free: use fewer "
                                             r"samples per task$"):
            MTCFIR(n_clusters=[4, 4]).fit([X, X])
        assert tracemalloc.get_traced_memory()[1] < 50 * 2**20  # the check, not the fit
    finally:
        tracemalloc.stop()
    # a solver with an exact implicit route says so
    shapes = Shapes((30_000, 30_000), 2_000, (4, 4), (600_000, 600_000))
    with pytest.raises(InputError, match=r"use fewer samples per task, or route='implicit' \(exact, no n x n affinity\)$"):
        check_fit_memory(SymmetricNMF(route="dense"), shapes, available=2**30)
    assert check_fit_memory(SymmetricNMF(), shapes, available=2**30) < 2**30  # its default (implicit) route fits
