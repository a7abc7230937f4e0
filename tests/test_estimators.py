"""The common estimator suite, over every method config in conf/method (the method registry):
scikit-learn conventions, declared parameter constraints, determinism, dense vs sparse input,
one and many tasks, and a well-formed fit record."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError, generate_invalid_param_val, make_constraint

from mtc.config import method_configs, reserved_params
from mtc.data.synthetic import make_synthetic
from mtc.errors import InputError
from mtc.record import FitRecord, LabelledMatrix

METHODS = method_configs()


@pytest.fixture(scope="module")
def tasks():
    data = make_synthetic(n_tasks=3, n_clusters=3, n_shared=1, samples_per_cluster=12, n_features=20, seed=5)
    return [np.abs(X) for X in data.matrices], data.n_clusters  # non-negative, so every method accepts it


def invalid_values(constraints):
    """A value breaking each declared constraint and satisfying none of the others."""
    parsed = [make_constraint(c) for c in constraints]
    for constraint in parsed:
        try:
            value = generate_invalid_param_val(constraint)
        except NotImplementedError:
            value = "not-a-valid-value"
        if not any(other.is_satisfied_by(value) for other in parsed):
            yield value


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_parameter_is_declared_and_clone_round_trips(name):
    cls = METHODS[name]
    assert set(cls._get_param_names()) <= set(cls._parameter_constraints), "a parameter without a declared constraint"
    solver = cls(n_clusters=[3, 3], random_state=4)
    copy = clone(solver)
    assert copy.get_params() == solver.get_params() and copy is not solver
    tunable = [p for p in cls._get_param_names() if p not in reserved_params(cls)]
    assert copy.set_params(**{p: solver.get_params()[p] for p in tunable}).get_params() == solver.get_params()
    assert cls.__doc__ and "Parameters" in cls.__doc__ and "Attributes" in cls.__doc__


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_declared_constraint_is_enforced_with_its_message(name, tasks):
    matrices, k = tasks
    cls = METHODS[name]
    checked = 0
    for param in cls._get_param_names():
        for value in invalid_values(cls._parameter_constraints[param]):
            solver = cls(n_clusters=k).set_params(**{param: value})
            with pytest.raises(InvalidParameterError, match=f"The '{param}' parameter of {cls.__name__} must be"):
                solver.fit(matrices)
            checked += 1
    assert checked >= len(cls._get_param_names()) - 1  # n_clusters accepts any array-like


@pytest.mark.parametrize("name", sorted(METHODS))
def test_fit_is_deterministic_and_well_formed(name, tasks):
    matrices, k = tasks
    a = METHODS[name](n_clusters=k, random_state=11).fit(matrices)
    b = METHODS[name](n_clusters=k, random_state=11).fit(matrices)
    for la, lb, X, kt in zip(a.labels_, b.labels_, matrices, k):
        np.testing.assert_array_equal(la, lb)
        assert la.shape == (X.shape[0],) and la.min() >= 0 and la.max() < kt
    np.testing.assert_array_equal(a.objective_trace_, b.objective_trace_)
    assert np.isfinite(a.objective_trace_).all() and a.n_iter_ >= 1 and isinstance(bool(a.converged_), bool)
    check_record(a.record_, matrices, k)


def check_record(record: FitRecord, matrices, k):
    T = len(matrices)
    sizes = {"cluster": k, "sample": [X.shape[0] for X in matrices]}
    for name, value in record.scalars.items():
        assert np.ndim(value) == 0 or np.shape(value) == (T,), name
        assert np.isfinite(value).all(), name
    for name, trace in record.traces.items():
        assert np.ndim(trace) in (1, 2) and (np.ndim(trace) == 1 or np.shape(trace)[1] == T), name
        assert np.isfinite(trace).all(), name
    for name, matrix in record.matrices.items():
        assert isinstance(matrix, LabelledMatrix) and matrix.blocks, name
        for (i, j), block in matrix.blocks.items():
            assert np.isfinite(block).all(), name
            for index, axis, size in ((i, matrix.rows, block.shape[0]), (j, matrix.cols, block.shape[1])):
                expected = T if axis == "task" else len(axis) if isinstance(axis, tuple) else sizes[axis][index]
                assert size == expected, (name, (i, j), axis)


RENAMED_ON_SPARSE = {  # methods whose sparse route sums in another order, so may name clusters otherwise
    "kkm": "the kernel of sparse rows comes from their sparse products (gaussian_affinity): equal to rounding, so "
           "restarts that reach one partition under other names tie to rounding and another may win",
}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_dense_and_sparse_input_give_the_same_labels(name, tasks):
    """The same labels; for RENAMED_ON_SPARSE, the same partition (the same labels once renamed)."""
    matrices, k = tasks
    dense = METHODS[name](n_clusters=k, random_state=2).fit(matrices)
    sparse = METHODS[name](n_clusters=k, random_state=2).fit([sp.csr_matrix(X) for X in matrices])
    for a, b in zip(dense.labels_, sparse.labels_):
        if name in RENAMED_ON_SPARSE:
            pairs = np.unique(np.column_stack([a, b]), axis=0)  # a renaming: each name of a meets one of b
            assert len(pairs) == len(np.unique(a)) == len(np.unique(b)), RENAMED_ON_SPARSE[name]
        else:
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", sorted(METHODS))
@pytest.mark.parametrize("n_tasks", [1, 4])
def test_one_task_and_many_tasks(name, n_tasks):
    data = make_synthetic(n_tasks=n_tasks, n_clusters=3, n_shared=1, samples_per_cluster=10, n_features=15, seed=1)
    matrices = [np.abs(X) for X in data.matrices]
    solver = METHODS[name](n_clusters=data.n_clusters, random_state=0).fit(matrices)
    assert len(solver.labels_) == n_tasks
    check_record(solver.record_, matrices, data.n_clusters)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_complex_input_is_refused(name, tasks):
    matrices, k = tasks
    with pytest.raises(InputError, match="^task 0: complex values; the solvers need real matrices"):
        METHODS[name](n_clusters=k, random_state=0).fit([matrices[0] + 1j, *matrices[1:]])
    with pytest.raises(InputError, match="^task 1: complex values"):
        METHODS[name](n_clusters=k, random_state=0).fit([matrices[0], sp.csr_matrix(matrices[1] * (1 + 1j)), *matrices[2:]])


@pytest.mark.parametrize("scale", [1e30, 1e99])
@pytest.mark.parametrize("name", sorted(METHODS))
def test_huge_entries_give_a_finite_objective_or_one_clear_error(name, tasks, scale):
    """Entries of 1e30-1e99 used to give MTCMRL a NaN objective and SNMF+LR an infinite one,
    returned without a word; now a fit either stays well inside float64 or says why it cannot."""
    matrices, k = tasks
    top = max(X.max() for X in matrices)
    try:
        trace = METHODS[name](n_clusters=k, random_state=0).fit([X / top * scale for X in matrices]).objective_trace_
    except InputError as error:
        assert str(error).startswith(f"{METHODS[name].__name__}: the objective became ")
        assert "rescale the data" in str(error) and "\n" not in str(error)
    else:
        assert np.all(np.abs(trace) < 1e300)


def test_mtcmrl_overflow_names_the_iteration_and_the_scale(tasks):
    matrices, k = tasks
    top = max(X.max() for X in matrices)
    with pytest.raises(InputError, match=r"^MTCMRL: the objective became nan at iteration \d+ \(largest \|x\| in the "
                                         r"data is 1e\+30\)"):
        METHODS["mtcmrl"](n_clusters=k, random_state=0).fit([X / top * 1e30 for X in matrices])


@pytest.mark.parametrize("seed", [-1, 2**32])
def test_seed_outside_legacy_seeding_range_is_refused_before_the_fit(seed, tasks):
    matrices, k = tasks
    with pytest.raises(InvalidParameterError, match="random_state"):
        METHODS["kmeans"](n_clusters=k, random_state=seed).fit(matrices)
    METHODS["kmeans"](n_clusters=k, random_state=2**32 - 1).fit(matrices)
