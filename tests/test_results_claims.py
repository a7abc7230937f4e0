"""The numbers quoted in the method result pages (docs/results/{mtcfir,mtcmrl,smtnmf,mbc,spmtc}.md)
come from the generated comparison folders, or say where else they come from.

The convention (stated at the top of docs/results/README.md):

- A *score* is a decimal written as a fraction with three or more decimals (0.5037) or as a
  percentage with one or two decimals between 10 and 100 (50.37, 79.7). Each must equal, to the
  decimals it is written with, a value of a CSV under docs/results/compare_*/ (cells, size
  curves, Wilcoxon, Friedman, Nemenyi; a fraction or its percentage) or a paper value of
  mtc/published_results.csv (a mean, a std, or the mean over the tasks of one table row).
  When a section names compare folders, only those folders count.
- A *gap* is a number followed by "point(s)" ("2.5 points", "4.4-17.8 points"), a signed
  decimal ("+2.3", "-0.13"; points), or a fraction of three or more decimals followed by
  "above"/"below" ("0.0054 above"). Each
  must equal the difference of two scores quoted in the same paragraph (or in the table just
  before it), within the rounding of the three numbers. An integer bound after "within",
  "more than", "less than", "at most" or "up to" ("within 3 points") is a criterion, not a gap.
- Exempt: fenced code blocks (a program's printed output, its command named before it);
  `key=value` grid points; numbers followed by a unit (s, ms, MiB, x, ...); and anything a
  `<!-- from: SOURCE -->` comment covers: the paragraph or table that contains it; standing
  alone, the next block; standing alone right under a heading, that whole section (down to the
  next heading of the same or a higher level).
"""

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "results"
PAGES = ("mtcfir.md", "mtcmrl.md", "smtnmf.md", "mbc.md", "spmtc.md")

MARKER = re.compile(r"<!--\s*from:\s*\S.*?-->")
HEADING = re.compile(r"^(#{1,6})\s")
FOLDER = re.compile(r"\bcompare_[a-z0-9_]+[a-z0-9]")
PARAMETER = re.compile(r"[\w.]+=[-+\w.,\[\]]*")
UNIT = r"(?:s|ms|min|minutes|h|MiB|MB|GB|KB|KiB|x)\b|e-|/\w"
GAP = re.compile(
    r"(?:(?P<bound>\b(?:within(?:\s+about)?|more\s+than|less\s+than|at\s+most|up\s+to)\s+))?"
    r"(?<![\w.^/])(?P<a>\d+(?:\.\d+)?)(?:\s*(?:-|–|to)\s*(?P<b>\d+(?:\.\d+)?))?\s+points?\b"
    r"|(?<![\w.)/^])[+−-](?P<s>\d+\.\d+)(?![\d.])"
    r"|(?<![\w.])(?P<f>0\.\d{3,})\s+(?:above|below)\b"
)
SCORE = re.compile(
    r"(?<![\w.^/:])(?:0\.\d{3,}|[1-9]\d\.\d{1,2}|100\.0{1,2})(?![\d.])" rf"(?!\s*(?:{UNIT}))"
)


@dataclass(frozen=True)
class Number:
    text: str
    line: int
    fraction: bool  # a share (0.5037) rather than percentage points (50.37, 2.5)

    @property
    def percent(self):
        """The value in percentage points."""
        return float(self.text) * (100 if self.fraction else 1)

    @property
    def rounding(self):
        """Half a unit of the last written decimal, in percentage points."""
        decimals = len(self.text.partition(".")[2])
        return 0.5 * 10.0 ** -decimals * (100 if self.fraction else 1)


def _score(text, line):
    return Number(text, line, fraction=text.startswith("0."))


def _csv_values(folder):
    """Every number of the CSVs under `folder`, as fractions and as percentages, sorted."""
    values = []
    for path in sorted(folder.rglob("*.csv")):
        frame = pd.read_csv(path)
        numeric = frame.apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float).ravel()
        values.append(numeric[np.isfinite(numeric)])
    flat = np.concatenate(values) if values else np.empty(0)
    return np.unique(np.concatenate([flat, 100 * flat]))


def load_pools():
    """Values per compare folder, plus the published values every section may quote."""
    published = pd.read_csv(REPO / "mtc" / "published_results.csv")
    row_means = published.groupby(["paper", "table", "benchmark", "method", "metric"])["mean"].mean()
    paper = np.concatenate([published[["mean", "std"]].to_numpy(dtype=float).ravel(), row_means.to_numpy()])
    paper = paper[np.isfinite(paper)]
    folders = {path.name: _csv_values(path) for path in sorted(RESULTS.glob("compare_*")) if path.is_dir()}
    return folders, np.unique(np.concatenate([paper, 100 * paper]))


@pytest.fixture(scope="module")
def pools():
    return load_pools()


def _appears(number, values):
    """Whether some value (a fraction or its percentage) rounds to `number` as written."""
    value, tolerance = float(number.text), 0.5 * 10.0 ** -len(number.text.partition(".")[2]) + 1e-9
    i = np.searchsorted(values, value - tolerance)
    return i < len(values) and values[i] <= value + tolerance


@dataclass
class Block:
    lines: list  # (line index, text)
    folders: frozenset  # compare folders named in the section
    exempt: bool  # a `from:` marker covers it
    table: bool


def _raw_blocks(lines):
    """Runs of non-blank lines as lists of (index, line); a heading is a run of its own and fenced
    code blocks are left out."""
    blocks, current, fenced = [], [], False
    for i, line in enumerate(lines):
        fence = line.lstrip().startswith("```")
        fenced ^= fence
        if fence or fenced or not line.strip() or HEADING.match(line):
            blocks += [current] if current else []
            blocks += [[(i, line)]] if HEADING.match(line) and not (fence or fenced) else []
            current = []
        else:
            current.append((i, line))
    return blocks + ([current] if current else [])


def _blocks(text):
    """The page's paragraphs and tables (`Block`), headings and marker-only blocks consumed."""
    lines = text.splitlines()
    headings = [(i, len(m.group(1))) for i, line in enumerate(lines) if (m := HEADING.match(line))]
    starts = [-1] + [i for i, _ in headings]
    ends = [i for i, _ in headings] + [len(lines)]

    def covered_by_heading(i, level):
        return next((s for s, lv in headings if s > i and lv <= level), len(lines))

    blocks, exempt_ranges, cover_next, previous = [], [], False, None
    for block in _raw_blocks(lines):
        first, body = block[0][0], " ".join(line for _, line in block)
        if HEADING.match(block[0][1]):
            cover_next, previous = False, block
            continue
        if MARKER.fullmatch(body.strip()):
            if previous is not None and HEADING.match(previous[0][1]):
                level = len(HEADING.match(previous[0][1]).group(1))
                exempt_ranges.append((first, covered_by_heading(previous[0][0], level)))
            else:
                cover_next = True
            previous = block
            continue
        k = int(np.searchsorted(starts, first, side="right")) - 1
        section_text = "\n".join(lines[max(starts[k], 0):ends[k]])
        exempt = cover_next or MARKER.search(body) is not None or any(s <= first < e for s, e in exempt_ranges)
        blocks.append(Block(block, frozenset(FOLDER.findall(section_text)), exempt,
                            table=block[0][1].lstrip().startswith("|")))
        cover_next, previous = False, block
    return blocks


def _numbers(block):
    """The block's scores as (Number, is a std after ±) and its gaps as Numbers."""
    scores, gaps = [], []
    for index, line in block.lines:
        text = PARAMETER.sub(" ", MARKER.sub(" ", line))
        for match in GAP.finditer(text):
            if match.group("f"):
                gaps.append(Number(match.group("f"), index + 1, fraction=True))
                continue
            parts = (match.group("s"),) if match.group("s") else (match.group("a"), match.group("b"))
            criterion = match.group("bound") is not None
            gaps += [Number(part, index + 1, fraction=False) for part in parts
                     if part and not (criterion and "." not in part)]
        rest = GAP.sub(" ", text)
        stds = {m.end() for m in re.finditer(r"±\s*", rest)}
        scores += [(_score(m.group(), index + 1), m.start() in stds) for m in SCORE.finditer(rest)]
    return scores, gaps


def _justified(gap, scores):
    """Whether the gap is the difference of two quoted scores, within the three roundings."""
    if len(scores) < 2:
        return False
    value = np.array([s.percent for s in scores])
    rounding = np.array([s.rounding for s in scores])
    error = np.abs(np.abs(value[:, None] - value[None, :]) - gap.percent)
    return bool((error <= gap.rounding + rounding[:, None] + rounding[None, :] + 1e-6).any())


def check_page(path, folders, published):
    """Every unexplained number of one page, as 'page:line: message' strings."""
    name, problems, table_before = path.name, [], []
    for block in _blocks(path.read_text()):
        scores, gaps = _numbers(block)
        quoted = [s for s, is_std in scores if not is_std]
        basis, table_before = quoted + table_before, quoted if block.table and not block.exempt else []
        if block.exempt:
            continue
        allowed = [folders[f] for f in sorted(block.folders) if f in folders] or list(folders.values())
        pool = np.unique(np.concatenate(allowed + [published]))
        for score, _ in scores:
            if not _appears(score, pool):
                where = ", ".join(sorted(block.folders & folders.keys())) or "any compare_* folder"
                problems.append(f"{name}:{score.line}: {score.text} is in no CSV of {where} "
                                f"nor in mtc/published_results.csv")
        for gap in gaps:
            if not _justified(gap, basis):
                problems.append(f"{name}:{gap.line}: the gap {gap.text} is no difference of two "
                                f"scores quoted in its paragraph")
    return problems


@pytest.mark.parametrize("page", PAGES)
def test_every_number_quoted_comes_from_the_cells_or_says_where_from(page, pools):
    folders, published = pools
    problems = check_page(RESULTS / page, folders, published)
    assert not problems, f"{len(problems)} unexplained numbers:\n" + "\n".join(problems)


def test_the_check_catches_a_number_the_cells_do_not_hold(pools, tmp_path):
    """The handdigits cells quoted right pass; a score off by 0.06 and an unsupported gap fail;
    the same numbers under a marker pass."""
    folders, published = pools
    page = tmp_path / "page.md"
    page.write_text("## X\n\nIn [compare_handdigits](compare_handdigits/compare.md) -nR is 50.37 "
                    "against the paper's 59.25, 8.9 points below; USPS 65.46.\n")
    assert check_page(page, folders, published) == []
    page.write_text("## X\n\nIn compare_handdigits -nR is 50.31 against 59.25, within 2.5 points.\n")
    assert [p.split(": ", 1)[1] for p in check_page(page, folders, published)] == [
        "50.31 is in no CSV of compare_handdigits nor in mtc/published_results.csv",
        "the gap 2.5 is no difference of two scores quoted in its paragraph"]
    page.write_text("## X\n\n<!-- from: benchmarks/x.py -->\n\n50.31 against 59.25, 2.5 points.\n\n"
                    "## Y\n\nSpeed 50.31, 2.5 points. <!-- from: benchmarks/y.py -->\n")
    assert check_page(page, folders, published) == []
