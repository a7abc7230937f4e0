"""One label-free answer per benchmark: the method and grid point a researcher without labels
would take, and the criterion that chose it.

Each sweep offers its point of the highest mean cosine silhouette of the clusters on the input
(``NO_LABELS_BEST``, its report's row of that criterion); of those points that are answers
(mtc.results.cells.is_answer: not collapsed, not left at the k-means start) and not outlier
splits, the highest silhouette is recommended. The silhouette compares across methods (one
scale, [-1, 1], on the same input), which the objectives do not. When no answer's silhouette is
above 0 (no clustering is better separated than chance would give) nothing is recommended:
"no structure found". With labels, the recommendation's accuracy is set beside the best
accuracy of any answer (the oracle), whose gap measures the label-free answer.

An outlier split is a point whose smallest cluster holds, on average over its trials and tasks,
less than BALANCE_FLOOR of an even split (trial metric ``balance/mean``,
mtc.metrics.cluster_balance): a few outlying rows split off the rest are well separated, so the
silhouette ranks such a partition high whatever the classes (own data: 9 of 500 survey answers
split off scored 0.43, a partition at accuracy 0.87 scored 0.42; docs/results/own_data_answers.md).
It is recommended only when every answer is one. The floor, a fifth of an even share, sits
between the outlier splits passed over there (balance 0.00-0.04) and the points recommended
(0.57-0.98); runs logged before the metric count as balanced.

compare.md (``recommendation_lines``), ``python -m mtc.reproduce``'s closing lines and the
compare run in MLflow all read ``recommendations``, so they name the same method and point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mtc.metrics import BALANCE
from mtc.results.cells import is_answer
from mtc.results.reading import BEST, NO_LABELS_BEST, Sweep
from mtc.results.report import CRITERIA, SELECTIONS

SILHOUETTE = CRITERIA[NO_LABELS_BEST][0]  # silhouette/mean
BALANCE_FLOOR = 0.2  # below it, a point's smallest cluster makes it an outlier split (module docstring)


@dataclass(frozen=True)
class Recommendation:
    """The label-free answer on one benchmark.

    Attributes
    ----------
    benchmark : str
        The benchmark (data name).
    method, point : str or None
        The recommended sweep label and its grid point; None when no structure was found.
    silhouette : float
        Its mean cosine silhouette (the highest of the answers'; NaN when none had one).
    acc : float or None
        Its mean accuracy over tasks (None without labels).
    oracle_method : str or None
        The answer with the highest mean accuracy at its best point (None without labels).
    oracle_acc : float or None
        That accuracy.
    passed_over : tuple of (str, float, float)
        The outlier splits (method, silhouette, balance) whose silhouette was above the
        recommendation's: left aside for their smallest cluster (module docstring).
    """

    benchmark: str
    method: str | None
    point: str | None
    silhouette: float
    acc: float | None = None
    oracle_method: str | None = None
    oracle_acc: float | None = None
    passed_over: tuple[tuple[str, float, float], ...] = ()

    @property
    def found(self) -> bool:
        """Whether an answer's silhouette is above 0 (some structure was found)."""
        return self.method is not None


def answer(summary) -> bool:
    """Whether a chosen point (a PointSummary) is an answer: not collapsed, not unmoved."""
    return bool(is_answer(summary.n_degenerate, summary.n_unmoved, summary.n_runs))


def balance(summary) -> float:
    """A point's mean ``balance/mean`` over its trials (1 for runs logged before the metric)."""
    return summary.mean.get(f"{BALANCE}/mean", 1.0)


def outlier_split(summary) -> bool:
    """Whether a point's smallest cluster is under BALANCE_FLOOR of an even split."""
    return balance(summary) < BALANCE_FLOOR


def recommendations(sweeps: list[Sweep]) -> list[Recommendation]:
    """Per benchmark of ``sweeps``, the label-free answer (module docstring)."""
    found = []
    for benchmark in sorted({sweep.benchmark for sweep in sweeps}):
        here = [s for s in sweeps if s.benchmark == benchmark]
        offered = [(s, s.points[NO_LABELS_BEST]) for s in here
                   if NO_LABELS_BEST in s.points and answer(s.points[NO_LABELS_BEST])
                   and np.isfinite(s.points[NO_LABELS_BEST].mean.get(SILHOUETTE, np.nan))]
        oracle = max(((s, s.points[BEST]) for s in here if BEST in s.points and answer(s.points[BEST])),
                     key=lambda pair: pair[1].mean["acc/mean"], default=None)
        oracle_fields = {} if oracle is None else {"oracle_method": oracle[0].method,
                                                   "oracle_acc": oracle[1].mean["acc/mean"]}
        offered.sort(key=lambda pair: pair[1].mean[SILHOUETTE], reverse=True)
        balanced = [i for i, (_, point) in enumerate(offered) if not outlier_split(point)]
        first = balanced[0] if balanced else 0  # every answer an outlier split: the highest silhouette still
        passed = tuple((s.method, p.mean[SILHOUETTE], balance(p)) for s, p in offered[:first])
        if not offered or offered[first][1].mean[SILHOUETTE] <= 0:
            found.append(Recommendation(benchmark, None, None, offered[first][1].mean[SILHOUETTE] if offered else np.nan,
                                        **oracle_fields, passed_over=passed))
            continue
        sweep, point = offered[first]
        found.append(Recommendation(benchmark, sweep.method, point.point, point.mean[SILHOUETTE],
                                    point.mean.get("acc/mean"), **oracle_fields, passed_over=passed))
    return found


def recommendation_sentence(found: Recommendation) -> str:
    """One line: the recommended method and point, the criterion that chose it, and (labels)
    its accuracy beside the oracle's; or why nothing is recommended; then the outlier splits
    passed over."""
    criterion = SELECTIONS[NO_LABELS_BEST]
    if not found.found:
        why = (f"the highest {'balanced ' if found.passed_over else ''}answer's silhouette is {found.silhouette:.4f}"
               if np.isfinite(found.silhouette) else "no method gave an answer with a silhouette")
        text = f"{found.benchmark}: no structure found without labels ({why}, at or below 0: nothing to recommend)"
    else:
        text = (f"{found.benchmark}: without labels, take {found.method} at `{found.point}` "
                f"(chosen by the {criterion}: {found.silhouette:.4f})")
        if found.acc is not None:
            text += f"; its accuracy {found.acc:.4f}"
    if found.oracle_method is not None:
        text += f"; the best accuracy (labels): {found.oracle_method} {found.oracle_acc:.4f}"
    if found.passed_over:
        text += (f"; passed over as outlier splits (a smallest cluster under {BALANCE_FLOOR:g} of an even share): "
                 + ", ".join(f"{method} {silhouette:.4f} (balance {share:.2f})"
                             for method, silhouette, share in found.passed_over))
    return text


def recommendation_lines(sweeps: list[Sweep]) -> list[str]:
    """compare.md's section on the label-free answer, one bullet per benchmark."""
    return ["## The answer without labels", "",
            "Of every method's point of the highest mean cosine silhouette that is an answer (not collapsed, not "
            "left at its k-means start), the highest silhouette, passing over outlier splits (a smallest cluster under "
            f"{BALANCE_FLOOR:g} of an even share, unless every answer is one); none when no silhouette is above 0.", "",
            *(f"- {recommendation_sentence(found)}" for found in recommendations(sweeps)), ""]
