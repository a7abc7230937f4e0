"""The documentation site (mkdocs.yml): `mkdocs build --strict` passes (no broken link or
anchor, no unresolved cross-reference, no docstring warning), the generated method catalogue
has an entry for every method config, the API reference an entry for every solver class, and
the getting-started page quotes the README's two commands as they stand."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mtc.config import method_configs
from mtc.methods import solver_classes

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site built once with --strict into a temporary folder (run from the repository root,
    as mkdocs.yml's snippets and catalogue script expect)."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "DISABLE_MKDOCS_2_WARNING": "true", "NO_MKDOCS_2_WARNING": "1"}  # the plugins' banners
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, f"mkdocs build --strict failed:\n{build.stdout[-3000:]}\n{build.stderr[-6000:]}"
    return out


def test_the_catalogue_lists_every_method_config_with_its_solver(site):
    page = (site / "catalogue" / "index.html").read_text()
    for name, solver in method_configs().items():
        assert f'id="{name}"' in page, f"no catalogue entry for method config {name!r}"
        assert f"{solver.__module__}.{solver.__name__}" in page, f"{name}: solver {solver.__name__} not named"


def test_the_api_reference_has_every_solver_class(site):
    page = (site / "reference" / "methods" / "index.html").read_text()
    assert 'id="mtc.methods.mtcmrl.MTCMRL"' in page and "MTCMRL (Algorithm 1)" in page
    for name, solver in solver_classes().items():
        assert f'id="{solver.__module__}.{name}"' in page, f"{name} is missing from the mtc.methods reference"


def test_the_results_reference_has_what_the_package_exports(site):
    import mtc.results

    page = (site / "reference" / "results" / "index.html").read_text()
    for module in ("mtc.results", "mtc.results.reading", "mtc.results.compare"):
        assert f'id="{module}"' in page
    for name in getattr(mtc.results, "__all__", []):  # exported lazily (PEP 562), defined in a submodule
        assert f'id="{getattr(mtc.results, name).__module__}.{name}"' in page, f"mtc.results.{name} is not documented"


def test_every_reference_page_is_built(site):
    for page in ("tasks", "config", "data", "results", "sweep", "reproduce", "store"):
        html = (site / "reference" / page / "index.html").read_text()
        assert 'class="doc doc-object' in html, f"reference/{page}.md rendered no object"


def readme_command(marker: str) -> str:
    """The command on the line after ``<!-- marker -->`` and its opening fence (as .ci/run reads it)."""
    lines = (REPO / "README.md").read_text().splitlines()
    return lines[lines.index(f"<!-- {marker} -->") + 2]


@pytest.mark.parametrize("marker", ["main-command", "test-command"])
def test_getting_started_quotes_the_readme_commands(marker):
    command = readme_command(marker)
    assert command.strip() and not command.startswith("```")
    page = (REPO / "docs" / "getting_started.md").read_text()
    assert command in page.splitlines(), f"docs/getting_started.md no longer quotes the README's {marker}: {command}"


def test_the_site_is_git_ignored():
    assert re.search(r"^/?site/?$", (REPO / ".gitignore").read_text(), re.MULTILINE)


def test_the_data_catalogue_lists_every_data_config(site):
    from mtc import CONF_DIR

    page = (site / "data_catalogue" / "index.html").read_text()
    for path in sorted((CONF_DIR / "data").glob("*.yaml")):
        assert f'id="{path.stem}"' in page, f"no data catalogue entry for {path.name}"
    assert "comp.graphics" in page and "ModApte" in page  # a task's classes and a config's own comment


def test_every_public_class_has_a_docstring():
    """No undocumented public class (the API reference would show it bare): a class defined in
    an mtc module, not starting with "_", has a docstring of its own (a dataclass's generated
    signature does not count; the pooled solvers build theirs at import, so __doc__ is read)."""
    import importlib
    import inspect
    import pkgutil

    import mtc

    bare = []
    for info in pkgutil.walk_packages(mtc.__path__, "mtc."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or name.startswith("_"):
                continue
            doc = (cls.__doc__ or "").strip()
            if not doc or doc.startswith(f"{name}("):
                bare.append(f"{info.name}.{name}")
    assert bare == []
