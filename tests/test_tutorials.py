"""The commands of docs/getting_started.md and docs/tutorials/*.md run as written.

A ```bash block right after a line ``<!-- runnable -->`` is run, and must be followed by a
```text block right after a line ``<!-- output -->``: the lines the reader should see. Each
page's runnable blocks run in order, as a reader runs them, with bash, in a fresh working
folder (so a fresh ``./mlflow.db``) beside ``shared/data``, a link to the corpora, as the
README lays them out; ``python`` is this interpreter's (the venv activated), the user
settings are a fresh folder (XDG_CONFIG_HOME) and MTC_DATA_DIR is unset, so a page that
needs the corpora must say how it finds them. A block must exit 0 and print every line of
its output block (blank lines aside), in that order, among its other lines (stdout and
stderr together); ``...`` in a shown line stands for any text.

docs/tutorials/notebook.md shows examples/notebook.py cell by cell (snippets by line range)
with a ```text block of what the cells print; a fresh run of the script must print those
lines, one for one, with the same words (column names, row labels, method names) and any
numbers. That run is tests/test_notebook.py's (its ``store`` fixture runs the script once),
so the check is there, with ``line_pattern`` and ``NOTEBOOK_PAGE`` from here.
"""

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mtc.data.sources import data_root

pytestmark = pytest.mark.slow  # drivers, Ray or servers: run first (tests/conftest.py)

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "docs" / "getting_started.md", *sorted((REPO / "docs" / "tutorials").glob("*.md"))]
MARKER = re.compile(r"<!-- (runnable|output) -->")
NUMBER = r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.])"
NOTEBOOK_PAGE = REPO / "docs" / "tutorials" / "notebook.md"
NOTEBOOK = REPO / "examples" / "notebook.py"


@dataclass
class Block:
    """A runnable block of a page: where it starts, its script and the output it shows."""

    line: int
    script: str
    shown: list[str] = field(default_factory=list)


def runnable_blocks(page: Path) -> list[Block]:
    """The page's runnable blocks, each with its output block.

    Parameters
    ----------
    page : Path
        A Markdown page.

    Returns
    -------
    list of Block
        In page order.

    Raises
    ------
    AssertionError
        A marker not followed by its kind of fence, an output block with no runnable block
        before it, or a runnable block without an output block.
    """
    lines = page.read_text().splitlines()
    blocks, owner = [], None  # owner: the runnable block whose output block may come next
    for number, line in enumerate(lines, 1):
        marker = MARKER.fullmatch(line.strip())
        if not marker:
            continue
        kind = marker.group(1)
        fence = "```bash" if kind == "runnable" else "```text"
        where = f"{page.relative_to(REPO)}:{number}"
        assert lines[number:number + 1] == [fence], f"{where}: <!-- {kind} --> must be followed by a {fence} line"
        body = lines[number + 1:lines.index("```", number + 1)]
        if kind == "runnable":
            assert owner is None, f"{where}: the runnable block above has no <!-- output --> block"
            owner = Block(number + 1, "\n".join(body))
            blocks.append(owner)
        else:
            assert owner is not None, f"{where}: an output block without a runnable block before it"
            owner.shown, owner = body, None
    assert owner is None, f"{page.relative_to(REPO)}:{owner and owner.line}: a runnable block without output"
    return blocks


def line_pattern(shown: str, any_number: bool = False) -> re.Pattern:
    """A shown line as a pattern: ``...`` is any text; with ``any_number``, a number standing
    alone is any number and a run of spaces any run of spaces (a table's widths follow its
    numbers)."""
    if not any_number:
        return re.compile(".*".join(map(re.escape, shown.split("..."))))
    parts = []
    for piece in re.split(rf"(\.\.\.|{NUMBER}|\s+)", shown.strip()):
        if piece == "...":
            parts.append(".*")
        elif re.fullmatch(NUMBER, piece):
            parts.append(NUMBER)
        else:
            parts.append(r"\s+" if piece.isspace() else re.escape(piece))
    return re.compile("".join(parts))


def missing_line(shown: list[str], printed: str) -> str | None:
    """The first shown line not printed after the ones before it, None when all are."""
    lines = [line.rstrip() for line in printed.splitlines()]
    at = 0
    for want in (line.rstrip() for line in shown if line.strip()):
        pattern = line_pattern(want)
        at = next((i + 1 for i in range(at, len(lines)) if pattern.fullmatch(lines[i])), None)
        if at is None:
            return want
    return None


RUNNABLE = {page: runnable_blocks(page) for page in PAGES}


def test_the_pages_mark_their_quick_commands_runnable():
    counts = {page.stem: len(blocks) for page, blocks in RUNNABLE.items()}
    assert counts["getting_started"] >= 4 and counts["reproducing_a_paper"] >= 1, counts


def test_shown_lines_match_in_order_with_ellipses():
    printed = "noise\nloaded in 2.73 s\nmore\nreport: /tmp/x/report.md\n"
    assert missing_line(["loaded in ... s", "", "report: .../report.md"], printed) is None
    assert missing_line(["report: .../report.md", "loaded in ... s"], printed) == "loaded in ... s"
    assert missing_line(["loaded in 2 s"], printed) == "loaded in 2 s"
    table = line_pattern("1  a_kmeans-synthetic  FINISHED   0.782292  task0 1e-05 ...", any_number=True)
    assert table.fullmatch("10 a_kmeans-synthetic    FINISHED 1.000000  task0 -2 x y")
    assert not table.fullmatch("1  a_kmeans-synthetic  FINISHED   0.782292  task1 1e-05 x")


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """A folder with ``shared/data``, a link to the corpora this session reads (MTC_DATA_DIR)."""
    folder = tmp_path_factory.mktemp("tutorials")
    (folder / "shared").mkdir()
    (folder / "shared" / "data").symlink_to(data_root(), target_is_directory=True)
    return folder


@pytest.mark.parametrize("page", [page for page, blocks in RUNNABLE.items() if blocks], ids=lambda page: page.stem)
def test_the_runnable_commands_print_what_the_page_shows(page, sandbox):
    work = sandbox / page.stem
    work.mkdir()
    bin_dir = str(Path(sys.executable).parent)
    env = {key: value for key, value in os.environ.items() if key != "MTC_DATA_DIR"} | {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(Path(bin_dir).parent),
        "XDG_CONFIG_HOME": str(sandbox / f"{page.stem}-config"), "PYTHONUNBUFFERED": "1"}
    for block in RUNNABLE[page]:
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.script], cwd=work, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
        where = f"{page.relative_to(REPO)}:{block.line}"
        assert done.returncode == 0, f"{where} exited {done.returncode}:\n{done.stdout[-3000:]}"
        missing = missing_line(block.shown, done.stdout)
        assert missing is None, f"{where} did not print {missing!r} (in order); it printed:\n{done.stdout[-3000:]}"


def test_the_notebook_page_shows_every_cell_of_the_example_once_in_order():
    ranges = [(int(first), int(last)) for first, last in
              re.findall(r'--8<-- "examples/notebook\.py:(\d+):(\d+)"', NOTEBOOK_PAGE.read_text())]
    script = NOTEBOOK.read_text().splitlines()
    shown = [number for first, last in ranges for number in range(first, last + 1)]
    assert shown == sorted(set(shown)) and shown[-1] <= len(script), f"overlapping or out-of-order ranges {ranges}"
    assert all(script[first - 1].startswith("# %%") for first, _ in ranges), f"a range starts inside a cell: {ranges}"
    left_out = [number for number, line in enumerate(script, 1) if line.strip() and number not in shown]
    assert not left_out, f"examples/notebook.py lines {left_out} are not on docs/tutorials/notebook.md"
