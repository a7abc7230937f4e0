"""Symmetric NMF (Kuang, Ding & Park 2012): min_{Y >= 0} ||M - Y Y^T||_F^2.

Update rules (``update=``):
- ``sqrt``: Y <- Y * sqrt(MY / (Y Y^T Y)), MTCFIR Eq. 25 (the papers' default).
- ``plain``: Y <- Y * MY / (Y Y^T Y), MTCMRL Eq. 19 with lambda = 0 ("as printed").
- ``damped``: Y <- Y * (1/2 + MY / (2 Y Y^T Y)), Ding, He & Simon (2005).
- ``quarter``: Y <- Y * (MY / (Y Y^T Y))^(1/4), He, Xie & Zdunek (2011); the objective is
  provably non-increasing under this rule.
``sqrt`` and ``plain`` carry no descent guarantee (DESIGN.md, "Numerics"); pair them with
the ``relative`` stopping rule, which does not stop on a rise.
Initialisation as the papers: one-hot k-means labels of the task's data, plus 0.2.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from sklearn.cluster import KMeans as SklearnKMeans

from mtc.methods.base import PerTaskClusterer, PooledClusterer, SingleFit, seed_from
from mtc.methods.convergence import check_stopping_rule, has_converged
from mtc.similarity import affinity_matrix

UPDATE_RULES = ("sqrt", "plain", "damped", "quarter")
EPS = 1e-12  # only ever added to denominators


def gram_svd(X) -> tuple[np.ndarray, np.ndarray]:
    """(U, s) of the thin SVD X = U S V' computed from the n x n Gram matrix X X' = U S^2 U'
    (cheap when d > n), keeping singular values with s^2 > 1e-12 s_max^2. V = X' U / s."""
    gram = X @ X.T
    s2, U = scipy.linalg.eigh(gram.toarray() if sp.issparse(gram) else gram)
    keep = s2 > 1e-12 * max(s2.max(), 1e-300)
    return U[:, keep], np.sqrt(s2[keep])


def row_space_coordinates(X) -> np.ndarray:
    """n x r coordinates U S of the rows of X in an orthonormal basis of their span: every
    pairwise distance and inner product is kept, so k-means on them is k-means on X, but
    costs O(n r) per step instead of O(n d) when d > n (documents, stacked mSDA features)."""
    U, s = gram_svd(X)
    return U * s[None, :]


def kmeans_indicator(X, k: int, rng: np.random.Generator, offset: float = 0.2) -> np.ndarray:
    """n x k one-hot k-means assignment plus ``offset`` (the papers' SNMF initialisation)."""
    if X.shape[1] > X.shape[0]:
        X = row_space_coordinates(X)
    labels = SklearnKMeans(n_clusters=k, n_init=10, random_state=seed_from(rng)).fit_predict(X)
    Y = np.full((X.shape[0], k), offset)
    Y[np.arange(X.shape[0]), labels] += 1.0
    return Y


def snmf_objective(M: np.ndarray, Y: np.ndarray, MY: np.ndarray, M_sq: float) -> float:
    """||M - YY^T||_F^2 = ||M||^2 - 2 tr(Y^T M Y) + ||Y^T Y||^2, without forming YY^T."""
    YtY = Y.T @ Y
    return float(M_sq - 2.0 * np.sum(Y * MY) + np.sum(YtY * YtY))


def snmf_step(Y: np.ndarray, MY: np.ndarray, rule: str) -> np.ndarray:
    """One multiplicative update of Y given MY = M @ Y."""
    ratio = MY / (Y @ (Y.T @ Y) + EPS)
    if rule == "sqrt":
        return Y * np.sqrt(ratio)  # MTCFIR Eq. 25
    if rule == "plain":
        return Y * ratio  # MTCMRL Eq. 19, lambda = 0
    if rule == "damped":
        return Y * (0.5 + 0.5 * ratio)
    return Y * np.sqrt(np.sqrt(ratio))  # quarter


def snmf(M, Y, *, update="sqrt", stopping="relative", tol=1e-4, max_iter=500) -> tuple[np.ndarray, SingleFit]:
    """Run SNMF from Y; returns (Y, fit) with fit.labels = argmax of each row of Y."""
    if update not in UPDATE_RULES:
        raise ValueError(f"unknown SNMF update {update!r}; choose one of {UPDATE_RULES}")
    check_stopping_rule(stopping)
    M_sq = float(np.sum(M * M))
    MY = M @ Y
    trace = [snmf_objective(M, Y, MY, M_sq)]
    converged = False
    for _ in range(max_iter):
        Y = snmf_step(Y, MY, update)
        MY = M @ Y
        trace.append(snmf_objective(M, Y, MY, M_sq))
        if has_converged(trace[-2], trace[-1], stopping, tol):
            converged = True
            break
    return Y, SingleFit(np.argmax(Y, axis=1), trace, len(trace) - 1, converged)


class SymmetricNMF(PerTaskClusterer):
    """SNMF on each task's affinity matrix (cosine by default, as for documents)."""

    def __init__(self, n_clusters=2, affinity="cosine", kernel_width=1.0, update="sqrt",
                 stopping="relative", tol=1e-4, max_iter=500, random_state=None):
        self.n_clusters = n_clusters
        self.affinity = affinity
        self.kernel_width = kernel_width
        self.update = update
        self.stopping = stopping
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state

    def _fit_one(self, X, k, rng) -> SingleFit:
        M = affinity_matrix(X, self.affinity, self.kernel_width)
        _, fit = snmf(M, kmeans_indicator(X, k, rng), update=self.update,
                      stopping=self.stopping, tol=self.tol, max_iter=self.max_iter)
        return fit


class PooledSymmetricNMF(PooledClusterer, SymmetricNMF):
    """A-NMF: SNMF on the affinity of the union of all tasks."""
