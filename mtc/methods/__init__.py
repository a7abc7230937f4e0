"""Solvers, scikit-learn style: ``Solver(**params).fit(list_of_task_matrices)``."""

from mtc.methods.base import MultiTaskClusterer
from mtc.methods.kernel_kmeans import KernelKMeans
from mtc.methods.kmeans import KMeansClusterer, PooledKMeans
from mtc.methods.mtcfir import MTCFIR, MTCFIRnF, MTCFIRnI, MTCFIRnR
from mtc.methods.mtcmrl import MTCMRL, SNMFLR
from mtc.methods.registry import METHODS, build_solver, check_params, solver_class
from mtc.methods.snmf import PooledSymmetricNMF, SymmetricNMF
from mtc.methods.spectral import NormalizedCut, PooledNormalizedCut

__all__ = [
    "METHODS", "MTCFIR", "MTCFIRnF", "MTCFIRnI", "MTCFIRnR", "MTCMRL", "SNMFLR", "KMeansClusterer", "KernelKMeans", "MultiTaskClusterer", "NormalizedCut",
    "PooledKMeans", "PooledNormalizedCut", "PooledSymmetricNMF", "SymmetricNMF",
    "build_solver", "check_params", "solver_class",
]
