import numpy as np
import pytest

from mtc.report import TrialRecord, best_point, grid_csv, report_markdown, summarize


def record(point, acc, objective, status="FINISHED"):
    metrics = {"acc/a": acc, "acc/mean": acc, "objective/final": objective}
    metrics.update({f"{m}/{t}": acc for m in ("nmi", "nmi_max", "ari", "purity") for t in ("a", "mean")})
    return TrialRecord(point, "0", status, metrics, "run")


@pytest.fixture
def records():
    return [record("x=1", 0.9, 10.0), record("x=1", 0.7, 12.0),
            record("x=2", 0.6, 5.0), record("x=2", 0.6, 7.0), record("x=2", 0.0, 0.0, status="FAILED")]


def test_mean_std_per_point_and_the_two_selections(records):
    summaries = summarize(records)
    by_acc, by_objective = best_point(summaries, "acc"), best_point(summaries, "objective")
    assert by_acc.point == "x=1" and by_acc.n_runs == 2
    assert by_acc.mean["acc/a"] == pytest.approx(0.8)
    assert by_acc.std["acc/a"] == pytest.approx(np.std([0.9, 0.7], ddof=1))
    assert by_objective.point == "x=2" and by_objective.n_failed == 1
    assert by_objective.mean["objective/final"] == pytest.approx(6.0)


def test_markdown_labels_both_selections_and_counts_failures(records):
    text = report_markdown("demo", summarize(records), ["a"])
    assert "uses labels" in text and "without labels" in text
    assert "| a | 0.8000 ± 0.1414 |" in text
    assert "1 trial(s) failed" in text
    assert grid_csv(summarize(records)).splitlines()[0].startswith("point,n_runs,n_failed,acc/a mean")


def test_no_finished_trial_is_an_error():
    with pytest.raises(ValueError, match="no finished trial"):
        best_point(summarize([record("x=1", 0, 0, status="FAILED")]), "acc")
