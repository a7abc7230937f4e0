"""Marginalized stacked denoising autoencoder (mSDA; Chen et al. 2012), MTCFIR Eq. 1-6.

One layer on inputs X (N x d, rows = samples) with a constant feature appended, x_bar =
[x; 1], and feature corruption probability p (the constant is never corrupted), q =
[1-p, ..., 1-p, 1]. With S = X_bar' X_bar:

  E[P]_ij = S_ij q_j (Eq. 5),   E[Q]_ij = S_ij q_i q_j (i != j), S_ii q_i (i = j) (Eq. 6),
  W = E[P] E[Q]^-1 (Eq. 4), output h = tanh(W_{1:d,:} x_bar).

E[Q] = diag(q) S diag(q) + D with D = diag(S_ii q_i (1 - q_i)) + reg I (reg = 1e-5, Chen et
al.'s ridge; here also on the constant, which changes W by O(reg / N)). Two exact routes:
``dense`` solves the (d+1) x (d+1) system (Eq. 4, no inverse formed) and is used when
d + 1 <= N; ``woodbury`` works in the N x N space: with U = diag(q) X_bar' (so E[Q] = D +
U U'), E[P] = X' U' and the layer output is h' = tanh(X_bar E[Q]^-1 U X), where
X_bar E[Q]^-1 U = A - A (I + B)^-1 B, A = X_bar D^-1 U, B = U' D^-1 U (Woodbury identity).
Cost O(N^2 d) instead of O(d^3): documents have N << d.

The features depend on the data, p and the number of layers only, so every grid point of a
study that shares them (MTCFIR's neighbour ratios at one corruption, and MTCFIR-nR and -nI on the
same data) needs the same matrix: ``kept_msda_features`` keeps it in a solver's Cache and, when
computed on one BLAS thread (a sweep's trials), as a file in the Cache's folder, so that a study
computes it once instead of once per sweep and worker (the mtcmrl study's profile: 443 s of
mSDA for MTCFIR and -nR on 20NG, 2026-11-29). A file is named by what the numbers depend on
beyond the data: MSDA_VERSION, the numpy and scipy versions (their BLAS builds) and the
machine's architecture.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from mtc.numerics.cache import Cache, blas_threads, library_versions
from mtc.numerics.linalg import as_dense, self_gram

REGULARISATION = 1e-5
MSDA_VERSION = 1  # of the kept features' files: bump when msda_features computes them otherwise


def _with_constant(X):
    ones = np.ones((X.shape[0], 1))
    return sp.hstack([X, ones], format="csr") if sp.issparse(X) else np.hstack([X, ones])


def msda_layer(X, p: float, route: str = "auto") -> np.ndarray:
    """One marginalized denoising layer: returns tanh(W_{1:d,:} x_bar) for every row (N x d)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"corruption probability p must be in [0, 1), got {p}")
    n, d = X.shape
    Xb = _with_constant(X)
    q = np.full(d + 1, 1.0 - p)
    q[-1] = 1.0
    if route == "auto":
        route = "dense" if d + 1 <= n else "woodbury"
    if route == "dense":
        S = self_gram(Xb.T)
        EQ = S * np.outer(q, q)
        np.fill_diagonal(EQ, np.diag(S) * q + REGULARISATION)  # Eq. 6
        EP = S[:d] * q[None, :]  # Eq. 5
        W = scipy.linalg.solve(EQ, EP.T, assume_a="pos").T  # Eq. 4: E[P] E[Q]^-1, E[Q] symmetric
        return np.tanh(as_dense(Xb @ W.T))
    if route != "woodbury":
        raise ValueError(f"unknown mSDA route {route!r}; choose dense, woodbury or auto")
    diag_S = np.asarray(Xb.multiply(Xb).sum(axis=0)).ravel() if sp.issparse(Xb) else np.sum(Xb * Xb, axis=0)
    D = diag_S * q * (1.0 - q) + REGULARISATION
    Ut = as_dense(Xb) * q[None, :]  # U' = X_bar diag(q), N x (d+1)
    A = (as_dense(Xb) / D[None, :]) @ Ut.T  # X_bar D^-1 U
    B = (Ut / D[None, :]) @ Ut.T
    K = A - A @ scipy.linalg.solve(np.eye(n) + B, B)
    return np.tanh(K @ as_dense(X))


def msda_features(X, p: float, n_layers: int, route: str = "auto") -> np.ndarray:
    """[h^0, h^1, ..., h^g] side by side (N x d(g+1)), h^0 = X (MTCFIR Algorithm 2)."""
    layers = [as_dense(X)]
    for _ in range(n_layers):
        layers.append(msda_layer(layers[-1], p, route))
    return np.hstack(layers)


def kept_msda_features(X, p: float, n_layers: int, key, cache: Cache | None) -> np.ndarray:
    """``msda_features(X, p, n_layers)``, kept in ``cache`` by ``key`` (which must name X, p and
    n_layers: MTCFIR's features key) and, when computed on one BLAS thread, as a file in the
    cache's folder (the same bits as computing it afresh on one thread)."""
    if cache is None:
        return msda_features(X, p, n_layers)
    threads = blas_threads()
    file_key = (key, threads, MSDA_VERSION, *library_versions())
    shape = (X.shape[0], X.shape[1] * (n_layers + 1))
    return cache.get("msda_features", file_key, lambda: msda_features(X, p, n_layers), persist=threads == 1,
                     valid=lambda Z: Z.shape == shape and Z.dtype == np.float64)
