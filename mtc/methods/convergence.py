"""Stopping rules for iterative solvers.

``decrease`` is the papers' literal rule: stop once the objective decreased by less than
``tol`` (MTCMRL Sec. 4.7 uses tol = 1). It also stops at once when the objective rises,
which the printed SNMF updates do in their first iterations (see DESIGN.md, "Numerics").
``relative`` is robust to a rise: stop once |f_prev - f| <= tol * max(|f_prev|, 1e-12).
"""

from __future__ import annotations

STOPPING_RULES = ("relative", "decrease")


def check_stopping_rule(rule: str) -> None:
    if rule not in STOPPING_RULES:
        raise ValueError(f"unknown stopping rule {rule!r}; choose one of {STOPPING_RULES}")


def has_converged(previous: float, current: float, rule: str, tol: float) -> bool:
    if rule == "decrease":
        return previous - current < tol
    return abs(previous - current) <= tol * max(abs(previous), 1e-12)
