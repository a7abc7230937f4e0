"""Solvers, scikit-learn style: ``Solver(**params).fit(list_of_task_matrices)``.

Every solver class of every module in this package can be imported from here
(``from mtc.methods import MTCMRL``); the names are found by looking, not kept in a list,
so a new module needs no edit here.
"""

from __future__ import annotations

import importlib
import pkgutil

from mtc.methods.base import MultiTaskClusterer


def solver_classes() -> dict[str, type[MultiTaskClusterer]]:
    """Every solver class defined in this package (the bases in ``base`` aside), by name."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for name, value in vars(module).items():
            if isinstance(value, type) and issubclass(value, MultiTaskClusterer) and value.__module__ == module.__name__:
                found[name] = value
    return found


def __getattr__(name: str):
    if any(info.name == name for info in pkgutil.iter_modules(__path__)):  # a module asked for as an attribute (as
        return importlib.import_module(f"{__name__}.{name}")  # Hydra's _locate does): that module alone is imported
    classes = solver_classes()
    if name in classes:
        return classes[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
