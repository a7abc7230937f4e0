"""Feature scaling of the user's tables and arrays (``data.params.scale``), with scikit-learn's
transformers.

A table's columns come in their own units (one around 1000, another around 0.1): clustered as
read, the largest column decides every distance and affinity, and solvers collapse tasks into
one cluster. ``scale`` names what is done to the features before any solver sees them:

- ``none``: as read;
- ``standard``: each column to mean 0, variance 1 (signed values); sparse features are divided
  by their standard deviation without centring (centring would fill the matrix);
- ``minmax``: each column to [0, 1]; sparse features (non-negative, mostly zeros: their minimum
  is 0) are divided by their maximum, as ``maxabs``, since a shift would fill the matrix;
- ``maxabs``: each column divided by its largest |x| (keeps signs and sparsity);
- ``l2``: each row to unit Euclidean norm;
- ``log1p``: log(1 + x) of every entry (non-negative input: counts, intensities);
- ``tfidf``: term counts to tf-idf weights with unit rows (non-negative counts).

``scale_fit`` says what a column transformer is fitted on: ``pooled`` (default), every task's
rows together, so that one raw value maps to one scaled value in every task: the tasks share
one feature space and the multi-task methods relate them through it (shared centroids,
cross-task similarities); ``per_task``, each task on its own rows, for tasks measured on
different scales (one instrument per task). Row-wise scales (``l2``, ``log1p``) are the same
either way.

``auto`` (the default of ``data=files``) is replaced, before anything loads, by the measured
default for the method's input needs (``DEFAULT_SCALE``; docs/results/scaling_study.md, made by
``benchmarks/scale_study.py``). Text folders are vectorised by their own pipeline
(``data.params.text``, conf/text): ``auto`` names what its settings do, by the names above
(``text_scale``: ``tfidf`` by default), and any other scale is refused, since it would not be
applied. Whatever ``auto`` becomes is what a run records (``resolved_scale``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from mtc.errors import InputError

SCALES = ("none", "standard", "minmax", "maxabs", "l2", "log1p", "tfidf")
SCALE_FITS = ("pooled", "per_task")
AUTO = "auto"
# Scales whose output is non-negative for any input, and those that need non-negative input.
NON_NEGATIVE_OUTPUT = ("minmax", "tfidf")
NEEDS_NON_NEGATIVE = ("log1p", "tfidf")
# The measured defaults (benchmarks/scale_study.py; docs/results/scaling_study.md): for a method
# that takes any real input, and for one that needs non-negative input.
DEFAULT_SCALE = {"any": "maxabs", "non_negative": "minmax"}


def transformer(scale: str, sparse: bool = False):
    """A fresh scikit-learn transformer for ``scale`` (``none``: None) of dense or ``sparse``
    features (module docstring). scikit-learn is imported here: a config that only names a
    scale (a finished sweep's rerun) does not load it."""
    from sklearn.feature_extraction.text import TfidfTransformer
    from sklearn.preprocessing import FunctionTransformer, MaxAbsScaler, MinMaxScaler, Normalizer, StandardScaler

    return {
        "none": None,
        "standard": StandardScaler(with_mean=not sparse),
        "minmax": MaxAbsScaler() if sparse else MinMaxScaler(),
        "maxabs": MaxAbsScaler(),
        "l2": Normalizer(norm="l2"),
        "log1p": FunctionTransformer(np.log1p, accept_sparse=True),
        "tfidf": TfidfTransformer(),
    }[scale]


def default_scale(input_needs) -> str:
    """The measured default scale for a method with these input needs (``input_needs``)."""
    return DEFAULT_SCALE["non_negative" if "non_negative" in input_needs else "any"]


def text_scale(text: dict | None) -> str:
    """What the text pipeline's settings (``data.params.text``) do to the term counts, by the
    names of SCALES: tf-idf with unit rows is ``tfidf``, counts with unit rows ``l2``, raw counts
    ``none``; tf-idf without unit rows has no such name and is said in words."""
    text = text or {}
    tfidf, unit_rows = bool(text.get("tfidf", True)), bool(text.get("l2_normalize", True))
    return {(True, True): "tfidf", (False, True): "l2", (False, False): "none",
            (True, False): "tfidf without unit rows"}[tfidf, unit_rows]


def resolved_scale(scale: str, input_needs=(), text: dict | None = None, text_folders: bool = False) -> str:
    """The scale that is applied, by name: ``auto`` of a table becomes the measured default for
    the input needs (default_scale); text folders are scaled by their pipeline's settings
    (text_scale), so ``auto`` names those and any other value is refused.

    Raises
    ------
    InputError
        A scale for text folders other than ``auto`` or the one their settings give.
    """
    if not text_folders:
        return default_scale(input_needs) if scale == AUTO else scale
    applied = text_scale(text)
    if scale not in (AUTO, applied):
        raise InputError(f"data.params.scale={scale}: text folders are scaled by their vectoriser's settings "
                         f"(data.params.text), which give {applied}; leave scale at auto, or set data.params.text "
                         f"(tfidf=false: counts; l2_normalize=false: rows as counted)")
    return applied


def check_scale(scale: str, scale_fit: str, matrices: list) -> None:
    """One InputError for an unknown scale or fit, or a scale that needs non-negative input
    given negative entries."""
    if scale not in SCALES:
        raise InputError(f"data.params.scale must be one of {', '.join(SCALES)} (or auto), got {scale!r}")
    if scale_fit not in SCALE_FITS:
        raise InputError(f"data.params.scale_fit must be one of {', '.join(SCALE_FITS)}, got {scale_fit!r}")
    if scale in NEEDS_NON_NEGATIVE and any(((X.data if sp.issparse(X) else X) < 0).any() for X in matrices):
        raise InputError(f"data.params.scale={scale} needs non-negative features (counts, intensities); the data has "
                         f"negative entries: use standard, minmax or maxabs")


def scaled(matrices: list, scale: str, scale_fit: str = "pooled") -> list:
    """The task matrices after ``scale``, fitted on the pooled rows or per task.

    Parameters
    ----------
    matrices : list of ndarray or csr_matrix
        One samples x features matrix per task, one shared feature space.
    scale : str
        One of SCALES.
    scale_fit : {"pooled", "per_task"}
        What a column transformer is fitted on (module docstring).

    Returns
    -------
    list
        The scaled matrices, float64, in the input's order (sparse stays sparse).
    """
    check_scale(scale, scale_fit, matrices)
    if scale == "none":
        return list(matrices)
    sparse = any(sp.issparse(X) for X in matrices)
    if scale_fit == "per_task":
        return [as_float(transformer(scale, sparse).fit_transform(X)) for X in matrices]
    stacked = sp.vstack(matrices, format="csr") if sparse else np.vstack(matrices)
    fitted = transformer(scale, sparse).fit(stacked)
    return [as_float(fitted.transform(X)) for X in matrices]


def as_float(X):
    """float64, CSR when sparse."""
    return sp.csr_matrix(X, dtype=np.float64) if sp.issparse(X) else np.asarray(X, dtype=np.float64)
