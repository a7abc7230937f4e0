"""The method and data catalogues and two API pages, generated at every build.

Run by the mkdocs-gen-files plugin (mkdocs.yml); writes four pages that exist only in the
built site, never in docs/:

- ``catalogue.md``: one entry per ``conf/method/*.yaml`` (``mtc.config.method_configs()``):
  the method's name, its solver class (``_target_``), the YAML's own comment, the first
  paragraph of the class docstring, the grid, the parameters the config sets away from the
  class's defaults with their YAML comments, and every tunable parameter with its default
  and its declared constraints (``_parameter_constraints``).
- ``data_catalogue.md``: one entry per ``conf/data/*.yaml``: its builder, the paper tables it
  follows, the YAML's own comment, its tasks (classes per task) and every other parameter;
- ``reference/methods.md``: mkdocstrings blocks for every module of ``mtc.methods`` and the
  solver classes it defines (``mtc.methods.solver_classes()``);
- ``reference/results.md``: ``mtc.results``, the functions it exports lazily (PEP 562
  ``__all__``, found by importing them: static analysis cannot see them), then
  ``mtc.results.reading``, ``mtc.results.compare``, ``mtc.results.significance`` and ``mtc.metrics``.

Nothing here is a hand-kept list: a new method module and config appear by themselves.
Run it alone (``python docs/gen_catalogue.py``) to print the catalogue.
"""

from __future__ import annotations

import inspect
import math
import re
from pathlib import Path

from omegaconf import OmegaConf
from sklearn.utils._param_validation import StrOptions, make_constraint

from mtc import CONF_DIR
from mtc.config import RESERVED_PARAMS, method_configs
from mtc.methods import solver_classes

CATALOGUE = "catalogue.md"
DATA_CATALOGUE = "data_catalogue.md"
METHODS_REFERENCE = "reference/methods.md"
RESULTS_REFERENCE = "reference/results.md"
RESULTS_MODULES = ("mtc.results.reading", "mtc.results.compare", "mtc.results.significance", "mtc.metrics")
BASE_CLASSES = ("MultiTaskClusterer", "PerTaskClusterer", "PooledClusterer")


def first_paragraph(text: str | None) -> str:
    """The first paragraph of a docstring (``inspect.cleandoc``'d), joined into one line."""
    paragraphs = re.split(r"\n\s*\n", inspect.cleandoc(text or "").strip())
    return " ".join(line.strip() for line in paragraphs[0].splitlines()) if paragraphs[0] else ""


def yaml_comments(path: Path) -> tuple[str, dict[str, str]]:
    """A method YAML's leading comment and the comment of every key under ``params:``.

    A key's comment is what follows ``#`` on its line, plus any comment-only lines indented
    below it (OmegaConf keeps no comments, so the file is read as text).
    """
    lines = path.read_text().splitlines()
    header = []
    for line in lines:
        if not line.startswith("#"):
            break
        header.append(line.lstrip("#").strip())
    comments: dict[str, str] = {}
    in_params, last = False, None
    for line in lines:
        if not line.strip():
            continue
        if not line[0].isspace():
            in_params, last = line.split("#")[0].strip() == "params:", None
            continue
        if not in_params:
            continue
        stripped = line.strip()
        if stripped.startswith("#"):
            if last is not None:
                comments[last] = f"{comments[last]} {stripped.lstrip('#').strip()}".strip()
            continue
        match = re.match(r"([A-Za-z_][\w]*)\s*:([^#]*)(?:#(.*))?$", stripped)
        if match:
            last = match.group(1)
            comments[last] = (match.group(3) or "").strip()
    return " ".join(header), comments


def constraint_text(constraint) -> str:
    """A declared constraint in words, options sorted (a set's order changes between runs)."""
    if isinstance(constraint, StrOptions):
        return "one of " + ", ".join(f"`{option}`" for option in sorted(constraint.options))
    if constraint == "boolean":
        return "a bool"
    if constraint is None:
        return "`None`"
    return str(make_constraint(constraint))


ABBREVIATIONS = ("Sec", "Secs", "Eq", "Eqs", "al", "e.g", "i.e", "vs", "cf", "Fig", "Tab", "Alg")


def first_sentence(text: str) -> str:
    """Text up to its first full stop that ends a sentence (not "Sec. 4.4" or "et al.")."""
    for match in re.finditer(r"\.(\s+|$)", text):
        word = re.findall(r"[\w.]+$", text[:match.start()])
        if not word or word[0] not in ABBREVIATIONS:
            return text[:match.start() + 1]
    return text


def value_text(value) -> str:
    """A parameter value as inline code."""
    return f"`{value!r}`" if isinstance(value, str) else f"`{value}`"


def cell(text: str) -> str:
    """Text for a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def summary_table(configs: dict) -> list[str]:
    lines = ["| method | solver | grid points | what the config says |", "|---|---|---|---|"]
    for name, (solver, config, header) in configs.items():
        grid = OmegaConf.to_container(config.get("grid") or OmegaConf.create({}))
        points = math.prod(len(values) for values in grid.values()) if grid else 1
        summary = first_sentence(header)
        lines.append(f"| [`{name}`](#{name}) | `{solver.__name__}` | {points} | {cell(summary)} |")
    return lines


def method_entry(name: str, solver: type, config, path: Path) -> list[str]:
    """The catalogue's section for one method config."""
    header, comments = yaml_comments(path)
    target = config["_target_"]
    params = OmegaConf.to_container(config.get("params") or OmegaConf.create({}))
    grid = OmegaConf.to_container(config.get("grid") or OmegaConf.create({}))
    defaults = solver().get_params()
    module = inspect.getmodule(solver)
    lines = [f"## `{name}`", "",
             f"**In the papers**: {config.get('display') or name}  ",
             f"**Solver**: [`{target}`][{solver.__module__}.{solver.__qualname__}]  ",
             f"**Config**: `conf/method/{name}.yaml` · run it with `python -m mtc.sweep method={name} data=...`",
             ""]
    if module is not None and module.__doc__:
        lines += [f"**Module** `{module.__name__}`: {first_paragraph(module.__doc__)}", ""]
    if header:
        lines += [f"**The config**: {header}", ""]
    doc = first_paragraph(solver.__doc__)
    if doc:
        lines += [f"**The class**: {doc}", ""]
    if grid:
        points = math.prod(len(values) for values in grid.values())
        lines += [f"**Grid** ({points} points):", "", "| parameter | values | default |", "|---|---|---|"]
        lines += [f"| `{key}` | {', '.join(value_text(v) for v in values)} | {value_text(defaults[key])} |"
                  for key, values in grid.items()]
        lines.append("")
    else:
        lines += ["**Grid**: none (one point: the class's defaults).", ""]
    if params:
        lines += ["**Parameters set away from the defaults**:", "", "| parameter | value | default | why |",
                  "|---|---|---|---|"]
        lines += [f"| `{key}` | {value_text(value)} | {value_text(defaults[key])} | {cell(comments.get(key, ''))} |"
                  for key, value in params.items()]
        lines.append("")
    else:
        lines += ["**Parameters set away from the defaults**: none.", ""]
    tunable = [key for key in inspect.signature(solver.__init__).parameters
               if key in defaults and key not in RESERVED_PARAMS]
    lines += ['??? info "Every tunable parameter, its default and its declared constraints"', "",
              "    | parameter | default | allowed |", "    |---|---|---|"]
    for key in tunable:
        allowed = " or ".join(constraint_text(c) for c in solver._parameter_constraints.get(key, []))
        lines.append(f"    | `{key}` | {value_text(defaults[key])} | {cell(allowed or 'not declared')} |")
    lines += ["", f"    Set one with `++method.params.{tunable[0]}=...` or sweep it with "
                  f"`++method.grid.{tunable[0]}=[...]`." if tunable else "", ""]
    return lines


def catalogue() -> str:
    """The whole catalogue page."""
    configs = {}
    for name, solver in method_configs().items():
        path = CONF_DIR / "method" / f"{name}.yaml"
        configs[name] = (solver, OmegaConf.load(path), yaml_comments(path)[0])
    lines = ["# Method catalogue", "",
             "Every method config in `conf/method/`, generated at each build of this site from the "
             "configs and the solver classes (`docs/gen_catalogue.py`). A config names its solver class "
             "(`_target_`), the grid a sweep runs, and only the parameters where the sweep differs from "
             "the class's defaults, each with the paper section that says so. Every value is checked "
             "against the class's declared constraints before a sweep starts.", "",
             f"{len(configs)} configs over {len({s for s, _, _ in configs.values()})} solver classes.", ""]
    lines += summary_table(configs) + [""]
    for name, (solver, config, _) in configs.items():
        lines += method_entry(name, solver, config, CONF_DIR / "method" / f"{name}.yaml")
    return "\n".join(lines).rstrip() + "\n"


def described(value) -> str:
    """A task's definition in a config (its classes, or the file and variables it is read from) in words."""
    if isinstance(value, dict):
        return "; ".join(f"{key}: {described(item)}" for key, item in value.items())
    if isinstance(value, list):
        return ", ".join(described(item) for item in value)
    return str(value)


def data_entry(path: Path) -> list[str]:
    """The data catalogue's section for one data config: builder, source, comment, tasks, parameters."""
    config = OmegaConf.load(path)
    header, comments = yaml_comments(path)
    params = OmegaConf.to_container(config.get("params") or OmegaConf.create({}))
    tasks = params.pop("tasks", None)
    params.pop("text", None)
    lines = [f"## `{path.stem}`", "", f"**Builder**: `{config.get('builder', path.stem)}` · "
             f"run a method on it with `python -m mtc.sweep method=... data={path.stem}`  "]
    if config.get("follows"):
        lines.append(f"**Follows**: {config['follows']}  ")
    if config.get("draw"):
        lines.append(f"**Draw**: `{config['draw']}` (a fresh sample of the data per seed)  ")
    lines.append("")
    if header:
        lines += [header, ""]
    if isinstance(tasks, list):  # [{name: ..., <what it holds>}, ...]
        tasks = {task.pop("name", f"task{i + 1}"): task for i, task in enumerate(tasks)}
    if tasks:
        lines += ["| task | what it holds |", "|---|---|"]
        lines += [f"| `{task}` | {cell(described(held))} |" for task, held in tasks.items()]
        lines.append("")
    if params:
        lines += ["| parameter | value | note |", "|---|---|---|"]
        lines += [f"| `{key}` | {cell(value_text(value))} | {cell(comments.get(key, ''))} |"
                  for key, value in params.items()]
        lines.append("")
    return lines


def data_catalogue() -> str:
    """The whole data catalogue page."""
    paths = sorted((CONF_DIR / "data").glob("*.yaml"))
    lines = ["# Data catalogue", "",
             "Every data config in `conf/data/`, generated at each build of this site from the configs "
             "(`docs/gen_catalogue.py`). The text compositions share the preprocessing of "
             "`conf/text/default.yaml`; `python -m mtc.data describe <name>` prints a composition's tasks "
             "with their class counts. Your own files: [`files`](#files) and the "
             "[tutorial](tutorials/own_data.md).", "",
             f"{len(paths)} configs.", ""]
    for path in paths:
        lines += data_entry(path)
    return "\n".join(lines).rstrip() + "\n"


def methods_reference() -> str:
    """The API page of mtc.methods: the package, the bases, then every solver module and its classes."""
    by_module: dict[str, list[str]] = {}
    for name, solver in sorted(solver_classes().items(), key=lambda item: (item[1].__module__, item[0])):
        by_module.setdefault(solver.__module__, []).append(name)
    lines = ["# mtc.methods", "",
             "The solvers, scikit-learn style. Every class below can be imported from `mtc.methods` "
             "(`from mtc.methods import MTCMRL`); this page is generated from "
             "`mtc.methods.solver_classes()`, so a new module appears here by itself. Which config runs "
             "which class, with which grid: the [method catalogue](../catalogue.md).", "",
             "::: mtc.methods", "    options:", "      members: [solver_classes]", "      show_root_heading: true", "",
             "::: mtc.methods.base", "    options:", f"      members: [{', '.join(BASE_CLASSES)}]", ""]
    for module, names in by_module.items():
        lines += [f"::: {module}", "    options:", f"      members: [{', '.join(names)}]", ""]
    return "\n".join(lines)


def results_reference() -> str:
    """The API page of mtc.results: the package, its exports by defining module, then reading
    and compare."""
    import mtc.results as package

    exported: dict[str, list[str]] = {}
    for name in getattr(package, "__all__", []):
        exported.setdefault(getattr(package, name).__module__, []).append(name)
    lines = ["# mtc.results", "",
             "Reading a store's results back, without Ray. How a sweep's runs are laid out in MLflow: "
             "[Architecture, \"What is stored where\"](../architecture.md#what-is-stored-where).", "",
             "::: mtc.results", ""]
    for module, names in exported.items():
        if module != package.__name__:
            lines += [f"::: {module}", "    options:", f"      members: [{', '.join(names)}]", ""]
    for module in RESULTS_MODULES:
        lines += [f"::: {module}", ""]
    return "\n".join(lines)


def main() -> None:
    import mkdocs_gen_files

    with mkdocs_gen_files.open(CATALOGUE, "w") as page:
        page.write(catalogue())
    with mkdocs_gen_files.open(DATA_CATALOGUE, "w") as page:
        page.write(data_catalogue())
    with mkdocs_gen_files.open(METHODS_REFERENCE, "w") as page:
        page.write(methods_reference())
    with mkdocs_gen_files.open(RESULTS_REFERENCE, "w") as page:
        page.write(results_reference())


if __name__ == "__main__":
    print(catalogue())
else:  # imported by mkdocs-gen-files
    main()
