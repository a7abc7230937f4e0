"""A griffe extension for the API reference (mkdocs.yml): the docstring of a solver class that
builds it at import time.

The pooled solvers (``PooledKMeans``, ``PooledSymmetricNMF``, ...) set
``__doc__ = "..." + POOLED_ATTRIBUTES``, which griffe's static analysis cannot read, so their
reference entries would show no text. For a class of ``mtc.methods`` without a static
docstring, this imports the class (method modules have no side effects) and takes its
runtime ``__doc__``. Nothing else is imported: no command module runs.
"""

from __future__ import annotations

import importlib
import inspect

import griffe


class RuntimeDocstrings(griffe.Extension):
    """Fill a missing class docstring of ``mtc.methods.*`` from the imported class."""

    def on_class_members(self, *, cls: griffe.Class, **kwargs) -> None:
        if cls.docstring is not None or not cls.path.startswith("mtc.methods."):
            return
        module_path, _, name = cls.path.rpartition(".")
        try:
            runtime = getattr(importlib.import_module(module_path), name)
        except (ImportError, AttributeError):
            return
        if runtime.__dict__.get("__doc__"):
            cls.docstring = griffe.Docstring(inspect.cleandoc(runtime.__doc__), parent=cls)
