"""docs/results/fidelity.csv and fidelity.md: what ``python -m mtc.results.fidelity`` writes from the
committed compare folders, mtc/published_results.csv and docs/results/fidelity_reasons.yaml.

Regenerated in memory and compared with the committed files; then checked for their structure:
every published mean of a method of ours (paper, table, benchmark, method, metric) appears once,
every published task value once; the status follows from the gap; a reason is given exactly where
a row is not within 3 points, and every reason entry explains some row and links to a heading
that exists; docs/results/README.md quotes the summary as it stands."""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from markdown.extensions.toc import slugify

from mtc.errors import InputError
from mtc.results.cells import PUBLISHED
from mtc.results.fidelity import (
    OURS_METRIC,
    STATUSES,
    UNEXPLAINED,
    anchor,
    fidelity,
    fidelity_csv,
    fidelity_markdown,
    main,
    matches,
    read_cells,
    summary_table,
)

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "results"
KEY = ["paper", "table", "benchmark", "method", "metric"]


@pytest.fixture(scope="module")
def generated():
    return fidelity(RESULTS, PUBLISHED)


@pytest.fixture(scope="module")
def committed():
    return pd.read_csv(RESULTS / "fidelity.csv", dtype={"task": str, "reason": str, "link": str}, keep_default_na=False,
                       na_values={"published": [""], "ours": [""], "ours_std": [""], "n": [""], "gap": [""]})


def test_the_committed_table_is_what_the_command_writes(generated):
    frame, papers, reasons = generated
    assert fidelity_csv(frame) == (RESULTS / "fidelity.csv").read_text(), \
        "docs/results/fidelity.csv is stale: run python -m mtc.results.fidelity"
    assert fidelity_markdown(frame, papers, reasons) == (RESULTS / "fidelity.md").read_text(), \
        "docs/results/fidelity.md is stale: run python -m mtc.results.fidelity"


def test_every_published_mean_and_task_value_appears_once(committed):
    published = pd.read_csv(PUBLISHED, dtype=str)
    ours = published[~published.method.str.startswith("paper:") & published.metric.isin(OURS_METRIC)]
    means = committed[committed.task == "mean"]
    assert not means.duplicated(KEY).any()
    assert set(map(tuple, means[KEY].to_numpy())) == set(map(tuple, ours[KEY].drop_duplicates().to_numpy()))
    tasks = committed[committed.task != "mean"]
    assert not tasks.duplicated([*KEY, "task"]).any()
    assert len(tasks) == len(ours)
    assert set(map(tuple, tasks[[*KEY, "task"]].to_numpy())) == set(map(tuple, ours[[*KEY, "task"]].to_numpy()))
    row_means = ours.assign(mean=ours["mean"].astype(float)).groupby(KEY)["mean"].mean()
    assert np.allclose(means.set_index(KEY).published.reindex(row_means.index), row_means, atol=5e-7)


def test_the_status_follows_from_the_gap(committed):
    assert set(committed.status) <= set(STATUSES)
    run = committed.ours.notna()
    assert (committed.status[~run] == "not run").all() and committed.gap[~run].isna().all()
    gap = committed.gap[run]
    assert np.allclose(gap, 100 * (committed.ours - committed.published)[run], atol=0.0051)
    expected = np.where(gap.abs() <= 3, "within 3 points", np.where(gap > 0, "above", "below"))
    assert (committed.status[run] == expected).all()


def test_ours_are_the_cells_at_the_best_point(committed):
    cells = read_cells(RESULTS).set_index(["benchmark", "method", "task", "metric"])
    rows = committed[committed.ours.notna()]
    found = cells.loc[list(zip(rows.benchmark, rows.method, rows.task, rows.ours_metric)), "mean"].to_numpy()
    assert np.allclose(found, rows.ours, atol=5e-7)
    assert set(committed.ours_metric) <= set(OURS_METRIC.values())


def headings(page: Path) -> set[str]:
    """The anchors of a page's headings (outside fenced code), as mkdocs' toc makes them."""
    found, fenced = set(), False
    for line in page.read_text().splitlines():
        fenced ^= line.lstrip().startswith("```")
        if not fenced and (m := re.match(r"#{1,6}\s+(.*?)\s*$", line)):
            found.add(slugify(m.group(1), "-"))
    return found


def test_a_reason_exactly_where_a_row_is_not_within_3_points_and_every_link_resolves(generated, committed):
    within = committed.status == "within 3 points"
    assert (committed.reason[within] == "").all() and (committed.link[within] == "").all()
    assert (committed.reason[~within] != "").all()
    assert ((committed.link[~within] == "") == (committed.reason[~within] == UNEXPLAINED)).all()
    _, papers, reasons = generated
    for entry in reasons:
        assert any(matches(entry, row) for row in committed.to_dict("records")), f"no row for {entry['label']}"
        page, _, target = entry["link"].partition("#")
        assert (RESULTS / page).is_file(), entry["link"]
        assert not target or target in headings(RESULTS / page), f"{entry['link']}: no such heading"
    for info in papers.values():
        assert (RESULTS / info["page"]).is_file()
        assert anchor(info["title"]) == slugify(info["title"], "-")
    assert len({entry["label"] for entry in reasons}) == len(reasons)


def test_the_results_home_quotes_the_summary(generated):
    frame, papers, _ = generated
    assert summary_table(frame, papers) in (RESULTS / "README.md").read_text(), \
        "docs/results/README.md does not quote fidelity.md's summary as it stands"


def test_folders_that_disagree_on_a_cell_are_named(tmp_path, capsys):
    for folder, mean in (("compare_a", 0.5), ("compare_b", 0.6)):
        (tmp_path / folder).mkdir()
        pd.DataFrame([{"benchmark": "reuters", "method": "kmeans", "task": "mean", "metric": "acc", "selection": "acc",
                       "point": "defaults", "mean": mean, "std": 0.0, "n": 10}]).to_csv(tmp_path / folder / "cells.csv",
                                                                                      index=False)
    with pytest.raises(InputError, match="reuters kmeans mean acc: compare_a compare_b differ"):
        read_cells(tmp_path)
    (tmp_path / "fidelity_reasons.yaml").write_text("reasons:\n  - method: kmeans\n    link: x.md\n")
    with pytest.raises(SystemExit) as stop:
        main(["--results", str(tmp_path)])
    assert stop.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1
