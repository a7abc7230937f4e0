"""The rooms of docs/architecture.md, checked: who may import whom, and configs that say
each thing once."""

import ast
import inspect
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import mtc
from mtc import CONF_DIR
from mtc.config import RESERVED_PARAMS, method_configs

PACKAGE = Path(mtc.__file__).parent
PLATFORM = ("config", "trial", "tracking", "plots", "report", "results", "sweep", "reproduce", "run", "cli", "tasks",
            "record")


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


@pytest.mark.parametrize("stem", PLATFORM)
def test_platform_modules_name_no_method(stem):
    """Orchestration and rendering are generic over the fit record: no method module, no solver class."""
    path = PACKAGE / f"{stem}.py"
    methods = {name for name in imports(path) if name.startswith("mtc.methods") and
               not name.startswith(("mtc.methods.base", "mtc.methods.validation"))}
    assert methods == set()
    tree = ast.parse(path.read_text())
    identifiers = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    identifiers |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not identifiers & {cls.__name__ for cls in method_configs().values()}


@pytest.mark.parametrize("stem", ["compare", "run", "results", "size_curves", "report"])
def test_reading_results_never_imports_the_ray_driver(stem):
    assert not {name for name in imports(PACKAGE / f"{stem}.py") if name.startswith(("mtc.sweep", "mtc.progress"))}


def test_config_imports_no_tracking_and_data_no_config():
    assert not {n for n in imports(PACKAGE / "config.py") if n.startswith(("mtc.tracking", "mtc.sweep", "mtc.trial"))}
    assert not {n for n in imports(PACKAGE / "data" / "__main__.py") if n.startswith("mtc.config")}


@pytest.mark.parametrize("name", sorted(method_configs()))
def test_method_yaml_holds_target_grid_and_only_non_default_params(name):
    path = CONF_DIR / "method" / f"{name}.yaml"
    config = OmegaConf.to_container(OmegaConf.load(path))
    assert set(config) <= {"_target_", "grid", "params"}, f"{path.name}: unexpected keys {set(config)}"
    solver = method_configs()[name]
    defaults = {key: p.default for key, p in inspect.signature(solver.__init__).parameters.items() if key != "self"}
    for key, value in (config.get("params") or {}).items():
        assert key in defaults and key not in RESERVED_PARAMS, f"{path.name}: {key} is not a tunable parameter"
        assert value != defaults[key], f"{path.name}: params.{key} = {value!r} repeats the default of {solver.__name__}"
        line = next(line for line in path.read_text().splitlines() if line.strip().startswith(f"{key}:"))
        assert "#" in line, f"{path.name}: params.{key} needs a comment saying why (paper section)"
    for key in config.get("grid") or {}:
        assert key in defaults and key not in RESERVED_PARAMS, f"{path.name}: grid key {key} is not a parameter"


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
