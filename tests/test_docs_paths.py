"""What the committed pages and tables under docs/ must not hold: the absolute paths of one machine
(a home or work folder, an absolute SQLite store, a scratch folder of /tmp that no command on the
page writes), which mean nothing on a reader's machine (write ``../shared/data``, ``<fresh>``,
``sqlite:///mlflow.db``); and issue numbers in headings, which mean nothing to a reader either
(the text may still cite an issue)."""

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MACHINE = re.compile(r"(?<![\w.~/-])/(?:work|home|root|Users)/|sqlite:////")
SCRATCH = re.compile(r"(?<![\w.~/-])/tmp/([^/\s`'\")]+)/")
EXAMPLE_SCRATCH = {  # /tmp folders a page may name: examples, or written by the command it quotes
    "work",  # tutorials/own_data.md: the reader's own folder of files in an example session
    "ray",  # bad_inputs.md: Ray's session folder under the temporary directory, in Ray's message
    "h_smtnmf",  # results/smtnmf.md: the output folders of the protocol runs it prints
    "scaling_small",  # results/scaling.md: the corpus cache benchmarks/scaling.py --cache writes
}
ISSUE = re.compile(r"\bissues?\s*#?\d+", re.IGNORECASE)


def committed_docs() -> list[Path]:
    """The .md and .csv files under docs/ that git tracks (every such file when git cannot say)."""
    try:
        listed = subprocess.run(["git", "ls-files", "docs"], cwd=REPO, capture_output=True, text=True, check=True)
        paths = [REPO / line for line in listed.stdout.splitlines()]
    except (OSError, subprocess.CalledProcessError):
        paths = list((REPO / "docs").rglob("*"))
    return sorted(path for path in paths if path.suffix in (".md", ".csv") and path.is_file())


def machine_paths(text: str) -> list[str]:
    """Every machine path of a text, as 'line N: the path's neighbourhood'."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        hits = [m.start() for m in MACHINE.finditer(line)]
        hits += [m.start() for m in SCRATCH.finditer(line) if m.group(1) not in EXAMPLE_SCRATCH]
        found += [f"line {number}: ...{line[max(0, start - 20):start + 40]}..." for start in sorted(hits)]
    return found


def headings_with_issues(text: str) -> list[str]:
    """Markdown headings (outside fenced code) that name an issue number."""
    found, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        fenced ^= line.lstrip().startswith(("```", "~~~"))
        if not fenced and re.match(r"#{1,6}\s", line) and ISSUE.search(line):
            found.append(f"line {number}: {line}")
    return found


def test_the_docs_are_listed():
    names = {path.relative_to(REPO).as_posix() for path in committed_docs()}
    assert {"docs/results/README.md", "docs/results/fidelity.csv", "docs/results/compare_reuters/cells.csv"} <= names


@pytest.mark.parametrize("path", committed_docs(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_path_of_one_machine(path):
    found = machine_paths(path.read_text(errors="replace"))
    assert not found, f"{path.relative_to(REPO)}: a path of one machine (write a relative or example path):\n" + \
        "\n".join(found)


@pytest.mark.parametrize("path", [p for p in committed_docs() if p.suffix == ".md"],
                         ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_issue_number_in_a_heading(path):
    found = headings_with_issues(path.read_text())
    assert not found, f"{path.relative_to(REPO)}: say what the section is, not its issue:\n" + "\n".join(found)


def test_the_checks_catch_what_they_are_for():
    assert machine_paths("MTC_DATA_DIR=/work/shared/data python -m mtc.sweep") == [
        "line 1: ...MTC_DATA_DIR=/work/shared/data python -m mtc.sweep..."]
    assert len(machine_paths("--tracking-uri sqlite:////home/me/mlflow.db")) == 1
    assert len(machine_paths("a store in /tmp/tmpa1b2c3/mlflow.db")) == 1
    assert machine_paths("MTC_DATA_DIR=../shared/data, /tmp/work/u_a.csv, ../../work/x, sqlite:///mlflow.db") == []
    assert headings_with_issues("## Hot spots (issue 32, item 4)\n```\n# issue 3 in a comment\n```\n## Speed") == [
        "line 1: ## Hot spots (issue 32, item 4)"]
