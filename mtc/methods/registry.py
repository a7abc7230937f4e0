"""Method registry: a method name -> its solver class.

Each method's defaults and sweep grid live in ``conf/method/<name>.yaml``; this registry
checks those against the class's ``__init__`` parameters and builds the solver.
"""

from __future__ import annotations

from mtc.methods.base import MultiTaskClusterer
from mtc.methods.kernel_kmeans import KernelKMeans
from mtc.methods.kmeans import KMeansClusterer, PooledKMeans
from mtc.methods.mtcfir import MTCFIR, MTCFIRnF, MTCFIRnI, MTCFIRnR
from mtc.methods.mtcmrl import MTCMRL, SNMFLR
from mtc.methods.snmf import PooledSymmetricNMF, SymmetricNMF
from mtc.methods.spectral import NormalizedCut, PooledNormalizedCut

METHODS: dict[str, type[MultiTaskClusterer]] = {
    "kmeans": KMeansClusterer,
    "kkm": KernelKMeans,
    "snmf": SymmetricNMF,
    "ncut": NormalizedCut,
    "a_kmeans": PooledKMeans,
    "a_nmf": PooledSymmetricNMF,
    "a_ncut": PooledNormalizedCut,
    "mtcmrl": MTCMRL,
    "snmf_lr": SNMFLR,
    "mtcfir": MTCFIR,
    "mtcfir_nf": MTCFIRnF,
    "mtcfir_ni": MTCFIRnI,
    "mtcfir_nr": MTCFIRnR,
}

# Set by the platform from the dataset and the trial, never by a method config.
RESERVED_PARAMS = ("n_clusters", "random_state")


def solver_class(name: str) -> type[MultiTaskClusterer]:
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; known methods: {', '.join(sorted(METHODS))}") from None


def check_params(name: str, keys, what: str = "parameter") -> None:
    """Raise if any key is not a tunable __init__ parameter of the method's solver."""
    allowed = set(solver_class(name)._get_param_names()) - set(RESERVED_PARAMS)
    unknown = sorted(set(keys) - allowed)
    if unknown:
        raise ValueError(
            f"method {name!r}: unknown {what} {', '.join(map(repr, unknown))}; "
            f"valid parameters: {', '.join(sorted(allowed))}"
        )


def build_solver(name: str, params: dict, n_clusters, random_state) -> MultiTaskClusterer:
    check_params(name, params)
    return solver_class(name)(n_clusters=n_clusters, random_state=random_state, **params)
