"""The rooms of docs/architecture.md, checked: who may import whom, and configs that say
each thing once."""

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import mtc
from mtc import CONF_DIR
from mtc.config import method_configs, reserved_params

PACKAGE = Path(mtc.__file__).parent
CORE = ("mtc", "mtc.config", "mtc.trial", "mtc.fitted", "mtc.tasks", "mtc.record", "mtc.errors", "mtc.metrics",
        "mtc.cli", "mtc.numerics.cache", "mtc.data", "mtc.methods.base", "mtc.methods.memory")
COMMANDS = ("mtc.run", "mtc.reproduce", "mtc.protocols")  # protocols: reproduce --with's plan
# package -> the platform packages it may import besides itself and the core (docs/architecture.md)
LAYERS = {"store": (), "results": ("mtc.store",), "sweep": ("mtc.store", "mtc.results"), "stack": ()}
PLATFORM_PACKAGES = ("store", "results", "sweep", "stack")


def imports(path: Path) -> set[str]:
    """Every mtc module a file imports (lazy imports inside functions included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mtc"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("mtc"))
    return found


def modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).glob("*.py"))


@pytest.mark.parametrize("path", modules("numerics"), ids=lambda p: p.name)
def test_numerics_import_only_numerics(path):
    assert {name for name in imports(path) if not name.startswith("mtc.numerics")} == set()


@pytest.mark.parametrize("path", [p for p in modules("methods") if p.stem not in ("__init__", "base", "validation")],
                         ids=lambda p: p.name)
def test_a_method_imports_numerics_and_base_never_another_method(path):
    allowed = ("mtc.numerics", "mtc.methods.base", "mtc.record", "mtc.errors")
    assert {name for name in imports(path) if not name.startswith(allowed)} == set()


@pytest.mark.parametrize("path", [p for p in modules("data") if p.stem != "__main__"], ids=lambda p: p.name)
def test_data_imports_no_orchestration(path):
    allowed = ("mtc.data", "mtc.tasks", "mtc.errors")
    assert {name for name in imports(path) if not name.startswith(allowed)} == set()


def platform_modules() -> list[Path]:
    """Every module outside numerics, methods and data: the core, the packages, the commands."""
    return sorted(path for path in PACKAGE.rglob("*.py") if path.relative_to(PACKAGE).parts[0] not in
                  ("numerics", "methods", "data"))


def test_every_platform_module_is_in_a_room():
    rooms = {f"mtc.{stem}" for stem in ("config", "trial", "fitted", "tasks", "record", "errors", "metrics", "cli",
                                        "__init__")}
    rooms |= set(COMMANDS) | {f"mtc.{package}" for package in PLATFORM_PACKAGES}
    for path in platform_modules():
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        assert f"mtc.{parts[0]}" in rooms, f"{path.name}: not a room of docs/architecture.md"
    assert len(platform_modules()) >= 25


def name_of(path: Path) -> str:
    return ".".join(("mtc", *path.relative_to(PACKAGE).with_suffix("").parts))


@pytest.mark.parametrize("path", platform_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_platform_modules_name_no_method(path):
    """Orchestration and rendering are generic over the fit record: no method module, no solver class."""
    methods = {name for name in imports(path) if name.startswith("mtc.methods") and
               not name.startswith(("mtc.methods.base", "mtc.methods.validation", "mtc.methods.memory"))}
    assert methods == set()
    tree = ast.parse(path.read_text())
    identifiers = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    identifiers |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not identifiers & {cls.__name__ for cls in method_configs().values()}


def within(name: str, allowed) -> bool:
    return any(name == root or name.startswith(root + ".") for root in allowed)


@pytest.mark.parametrize("path", [p for p in platform_modules() if p.parent != PACKAGE],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_package_imports_only_the_layers_below_it(path):
    package = path.relative_to(PACKAGE).parts[0]
    allowed = (f"mtc.{package}", *CORE, *LAYERS[package])
    assert {name for name in imports(path) if not within(name, allowed)} == set()


@pytest.mark.parametrize("path", [p for p in platform_modules() if p.parent == PACKAGE and name_of(p) not in COMMANDS],
                         ids=lambda p: p.name)
def test_the_core_imports_no_platform_package(path):
    found = {name for name in imports(path) if within(name, [f"mtc.{p}" for p in PLATFORM_PACKAGES] + list(COMMANDS))}
    assert found <= ({"mtc.store.preflight", "mtc.store.preflight.check_writable"} if path.stem == "cli" else set())


@pytest.mark.parametrize("path", [PACKAGE / "run.py", *sorted((PACKAGE / "results").glob("*.py"))],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_reading_results_never_imports_the_ray_driver(path):
    """compare, run and reading results back need no Ray: none imports mtc.sweep, lazily or not."""
    assert not {name for name in imports(path) if within(name, ["mtc.sweep"])}


def test_reading_results_loads_neither_ray_nor_the_driver():
    code = ("import sys, mtc.run, mtc.results.compare, mtc.results.reading, mtc.results.plots; "
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith(('ray.', 'mtc.sweep'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_config_imports_no_tracking_and_data_no_config():
    assert not {n for n in imports(PACKAGE / "config.py") if within(n, ["mtc.store", "mtc.sweep", "mtc.trial"])}
    assert not {n for n in imports(PACKAGE / "data" / "__main__.py") if n.startswith("mtc.config")}


@pytest.mark.parametrize("name", sorted(method_configs()))
def test_method_yaml_holds_target_grid_and_only_non_default_params(name):
    path = CONF_DIR / "method" / f"{name}.yaml"
    config = OmegaConf.to_container(OmegaConf.load(path))
    assert set(config) <= {"_target_", "grid", "params", "display"}, f"{path.name}: unexpected keys {set(config)}"
    assert isinstance(config.get("display", ""), str), f"{path.name}: display (the name figures show) is a string"
    solver = method_configs()[name]
    defaults = {key: p.default for key, p in inspect.signature(solver.__init__).parameters.items() if key != "self"}
    for key, value in (config.get("params") or {}).items():
        assert key in defaults and key not in reserved_params(solver), f"{path.name}: {key} is not a tunable parameter"
        assert value != defaults[key], f"{path.name}: params.{key} = {value!r} repeats the default of {solver.__name__}"
        line = next(line for line in path.read_text().splitlines() if line.strip().startswith(f"{key}:"))
        assert "#" in line, f"{path.name}: params.{key} needs a comment saying why (paper section)"
    for key in config.get("grid") or {}:
        assert key in defaults and key not in reserved_params(solver), f"{path.name}: grid key {key} is not a parameter"


def test_library_and_sweep_run_the_same_solver():
    """With no params in a method YAML, the sweep's prototype is the library's default solver."""
    for name, solver in method_configs().items():
        config = OmegaConf.load(CONF_DIR / "method" / f"{name}.yaml")
        configured = solver(**(config.get("params") or {}))
        differing = {k for k, v in configured.get_params().items() if solver().get_params()[k] != v}
        assert differing == set((config.get("params") or {}).keys()), name


def test_method_classes_are_found_without_a_hand_kept_list():
    from mtc import methods

    assert set(method_configs().values()) <= set(methods.solver_classes().values())
    assert methods.MTCMRL is method_configs()["mtcmrl"]
