"""A paper's protocols, for a method the paper never ran: what ``python -m mtc.reproduce <study>
--with METHOD`` runs.

A paper's protocol on a benchmark is how its study runs the paper's own methods there: the
data config, the experiment (seeds, draws, per-task sizes: ``+experiment=smtnmf_paper`` is 30
draws at each size, ``+experiment=spmtc_paper`` 20 runs on term counts), the per-task size and
the data and sweep-name overrides; the selection rule is the comparison's (the best grid point
by accuracy). The added method keeps its own grid (its YAML).

The protocol sweeps of a study are its sweeps of a paper's method under the method's own
name: not the study's variant rows (an entry with a ``label``, e.g. smtnmf_sym, or an
experiment that names one, e.g. mtcmrl_printed) nor its investigations (a sweep given a fixed
``sweep.name``, e.g. snmf-webkb4_tf). The added method's sweep on a benchmark is the protocol
sweep shared by most of the paper's methods there, with ``method=`` replaced and the paper
method's own ``method.*`` overrides left out. The benchmarks are those of the study's compare
folders (the papers' tables), each with the paper's methods the folder compares.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from mtc.cli import Composer, available
from mtc.config import method_configs, settings
from mtc.errors import InputError
from mtc.results.reading import pool_members

ALL_METHODS = "all"  # --with all: every method config of the package


@dataclass(frozen=True)
class PaperBoard:
    """One paper's part of a leaderboard: its study and, per benchmark of its compare folders,
    the paper's methods (sweep labels) the added methods are set beside.

    Attributes
    ----------
    paper : str
        The study's name (mtcmrl, smtnmf, ...).
    benchmarks : dict[str, tuple[str, ...]]
        Benchmark (a data config, a sweep-name suffix or a pooled ``<data>@<n1>+<n2>``) to the
        paper's methods compared there.
    """

    paper: str
    benchmarks: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass
class LeaderboardPlan:
    """What ``--with`` runs and reads back.

    Attributes
    ----------
    methods : list of str
        The added methods (method config names).
    boards : list of PaperBoard
        Per paper, the benchmarks the added methods run on and the paper's methods there.
    plans : list of SweepPlan
        The sweeps to run: the paper's protocol sweeps of the kept benchmarks, then the added
        methods' sweeps (a sweep that is both runs once).
    not_run : dict[str, str]
        ``"<method> on <paper> <benchmark>"`` to the one-line reason it cannot run there.
    """

    methods: list[str]
    boards: list[PaperBoard]
    plans: list
    not_run: dict[str, str]


def added_methods(text: str) -> list[str]:
    """``--with``'s value: method configs separated by commas, or ``all`` (every method config
    of the package); a method outside the package is found through Hydra's search path."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise InputError("--with needs a method config name (--with a_kmeans, --with a_kmeans,snmf or --with all)")
    if ALL_METHODS in names:
        return sorted(method_configs())
    return list(dict.fromkeys(names))


def paper_studies(name: str) -> list:
    """The papers' studies a study stands for: one that only includes others (``all``) stands for
    each of them, any other for itself."""
    from mtc.reproduce import load_study, study_config, study_path

    config = study_config(study_path(name))
    if config.get("include") and not config.get("sweeps") and not config.get("compare"):
        return [study for included in config["include"] for study in paper_studies(included)]
    return [load_study(name)]


def sets_method(override: str) -> bool:
    """Whether a Hydra override sets a method parameter or grid (``method.grid.x=...``,
    ``++method.params.y=...``), not the method itself."""
    return override.lstrip("+~").startswith("method.")


def fixed_name(override: str) -> bool:
    """A ``sweep.name=`` override that names the sweep outright (an investigation's row), not
    through the method's name (``${hydra:runtime.choices.method}-...``: a protocol's naming)."""
    key, _, value = override.lstrip("+").partition("=")
    return key == "sweep.name" and "${hydra:runtime.choices.method}" not in value


def benchmark_of(run) -> str:
    """The benchmark a sweep is compared on: its name without ``<label>-``, else its data
    (as mtc.results.reading.benchmark_name reads it back)."""
    prefix = f"{run.sweep.label}-"
    name = run.sweep.name
    return name[len(prefix):] if name.startswith(prefix) and len(name) > len(prefix) else run.data.name


def with_method(sweep: tuple[str, ...], method: str) -> tuple[str, ...]:
    """A protocol sweep with ``method=`` replaced by ``method`` and the method overrides left out."""
    return (f"method={method}", *(override for override in sweep[1:] if not sets_method(override)))


def protocol_sweeps(study, overrides: list[str], compose: Composer) -> dict[tuple[str, ...], object]:
    """The study's protocol sweeps (see the module's docstring), each with its composed settings."""
    found = {}
    for sweep in study.sweeps:
        if any(o.lstrip("+").startswith("sweep.label=") or fixed_name(o) for o in sweep[1:]):
            continue
        run = settings(compose([*sweep, *overrides]), check_method=False)
        if run.sweep.label == sweep[0].removeprefix("method="):
            found[sweep] = run
    return found


def plan_leaderboard(study_name: str, methods: list[str], overrides: list[str], only: list[str]) -> LeaderboardPlan:
    """The sweeps of the leaderboard of ``methods`` against the papers of ``study_name``, and the
    benchmarks it reads; ``only`` keeps the benchmarks whose added sweeps it selects (a method,
    data config or sweep name, as mtc.reproduce --only). A benchmark an added method cannot
    run on (its config or data refused, its input needs or cluster counts unmet) goes into
    ``not_run`` with the reason.

    Raises
    ------
    InputError
        A bad study or override, or no benchmark left to run an added method on.
    """
    from mtc.reproduce import DRIVER_SETTINGS, Study, plan_study, selected
    from mtc.sweep.driver import check_plan

    known = available("method", overrides)
    unknown = [method for method in methods if method not in known]
    if unknown:
        raise InputError(f"--with: no method config {', '.join(map(repr, unknown))}; known: {', '.join(known)} (a method "
                         "outside the package needs its folder on hydra.searchpath=[file://...] and PYTHONPATH)")
    compose = Composer()
    boards, kept_protocols, added_plans, not_run = [], {}, {}, {}
    for study in paper_studies(study_name):
        protocols = protocol_sweeps(study, [*overrides, *DRIVER_SETTINGS], compose)
        board = PaperBoard(study.name)
        for spec in (spec for spec in study.compares if spec.metric == "acc"):
            for benchmark in spec.benchmarks:
                members = pool_members(benchmark)
                templates = {sweep: run for sweep, run in protocols.items()
                             if benchmark_of(run) in members and (not spec.methods or run.sweep.label in spec.methods)}
                paper_methods = sorted({run.sweep.label for run in templates.values()})
                if not paper_methods or benchmark in board.benchmarks:
                    continue
                kept = {}
                for method in methods:
                    where = f"{method} on {study.name} {benchmark}"
                    try:
                        plans = [plan_study(Study(study.name, (sweep,), ()), overrides, [])[0]
                                 for sweep in added_for(method, templates, members)]
                        if only and not all(selected(plan.run, only) for plan in plans):
                            continue
                        plans = [check_plan(plan) for plan in plans]
                    except InputError as error:
                        not_run[where] = str(error).splitlines()[0]
                        continue
                    kept[method] = plans
                if kept:
                    board.benchmarks[benchmark] = tuple(m for m in paper_methods if m not in kept)
                    kept_protocols.update(dict.fromkeys(templates))
                    added_plans.update({plan.name: plan for plans in kept.values() for plan in plans})
        if board.benchmarks:
            boards.append(board)
    if not boards:
        by_reason: dict[str, list[str]] = {}
        for where, why in not_run.items():
            by_reason.setdefault(why, []).append(where)
        reasons = "; ".join(f"{', '.join(wheres)}: {why}" for why, wheres in by_reason.items())  # each reason once
        raise InputError(f"study {study_name!r}: no benchmark of its compare folders to run {', '.join(methods)} on"
                         + (f" with --only {' '.join(only)}" if only else "") + (f" ({reasons})" if reasons else ""))
    plans = plan_study(Study(study_name, tuple(kept_protocols), ()), overrides, [])
    plans += [plan for name, plan in added_plans.items() if name not in {p.name for p in plans}]
    return LeaderboardPlan(methods, boards, plans, not_run)


def added_for(method: str, templates: dict, members: list[str]) -> list[tuple[str, ...]]:
    """The added method's sweep on each member of a benchmark (one for a plain benchmark, one
    per size for a pooled one): the protocol that most of the paper's methods share there."""
    added = []
    for member in members:
        shared = Counter(with_method(sweep, method) for sweep, run in templates.items() if benchmark_of(run) == member)
        if shared:
            added.append(shared.most_common(1)[0][0])
    return added
