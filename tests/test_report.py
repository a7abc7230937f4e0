import numpy as np
import pytest

from mtc.results.report import TrialRecord, best_point, grid_csv, report_markdown, summarize, why_no_point


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
    assert "**1 of 5 trials failed**" in text
    assert text.index("trials failed") < text.index("uses labels")  # said before the chosen points
    assert grid_csv(summarize(records)).splitlines()[0].startswith("point,n_runs,n_failed,n_degenerate,acc/a mean")


def test_no_finished_trial_is_an_error():
    with pytest.raises(ValueError, match="no finished trial"):
        best_point(summarize([record("x=1", 0, 0, status="FAILED")]), "acc")


def test_a_tie_on_accuracy_is_broken_by_nmi_then_grid_order_and_reported():
    from mtc.results.report import tied

    rows = [record("a=1", 0.9, 3.0), record("a=2", 0.9, 2.0), record("a=3", 0.9, 1.0)]
    rows[2].metrics["nmi_max/mean"] = 0.95  # same accuracy, higher NMI
    summaries = summarize(rows)
    assert best_point(summaries, "acc").point == "a=3"
    assert tied(summaries, "acc") == ["a=3", "a=1", "a=2"]
    text = report_markdown("demo", summaries, ["a"])
    assert "tie: `a=3`, `a=1`, `a=2` have the same acc/mean; chosen by the higher mean nmi_max, then the first in " \
           "grid order" in text
    rows[2].metrics["nmi_max/mean"] = 0.9  # a full tie: the first in grid order
    assert best_point(summarize(rows), "acc").point == "a=1"
    rows[2].metrics["nmi_max/mean"] = 0.9 * (1 + 1e-15)  # higher only by summation-order rounding: still a full tie
    assert best_point(summarize(rows), "acc").point == "a=1"
    assert tied(summarize(rows), "acc") == ["a=1", "a=2", "a=3"]


def test_values_equal_up_to_rounding_are_a_tie_broken_by_grid_order():
    from mtc.results.report import tied

    rows = [record("a=1", 0.9, 3.0), record("a=2", 0.9, 3.0), record("a=3", 0.5, 3.0)]
    for row, silhouette in zip(rows, (0.4311, 0.4311 * (1 + 1e-15), 0.2)):
        row.metrics["silhouette/mean"] = silhouette  # a=2 higher only by summation-order rounding
    summaries = summarize(rows)
    assert summaries[1].mean["silhouette/mean"] > summaries[0].mean["silhouette/mean"]
    assert best_point(summaries, "silhouette").point == "a=1"
    assert tied(summaries, "silhouette") == ["a=1", "a=2"]
    assert "tie: `a=1`, `a=2` have the same silhouette/mean; chosen by the first in grid order" in \
        report_markdown("demo", summaries, ["a"])


def test_label_free_choices_and_their_accuracy():
    from mtc.results.report import with_stability

    rows = [record("a=1", 0.9, 3.0), record("a=1", 0.7, 3.0), record("a=2", 0.5, 1.0), record("a=2", 0.5, 1.0)]
    for row, silhouette, relative in zip(rows, (0.4, 0.2, 0.1, 0.1), (0.5, 0.5, 0.9, 0.9)):
        row.metrics.update({"silhouette/mean": silhouette, "objective/relative": relative})
    same, other = np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])
    summaries = with_stability(summarize(rows), {"a=1": [[same], [same]], "a=2": [[same], [other]]})
    assert summaries[0].mean["stability/mean"] == 1.0 and summaries[1].mean["stability/mean"] == pytest.approx(-0.5)
    assert best_point(summaries, "objective").point == "a=2"  # the raw objective
    assert {s: best_point(summaries, s).point for s in ("objective_relative", "silhouette", "stability")} == \
        {"objective_relative": "a=1", "silhouette": "a=1", "stability": "a=1"}
    text = report_markdown("demo", summaries, ["a"])
    assert "| lowest mean final objective | `a=2` | 0.5000 ± 0.0000 | 0.3000 | 0.5000 |" in text
    assert "| highest mean cosine silhouette of the clusters on the input | `a=1` | 0.8000 ± 0.1414 | 0.0000 |" in text


def test_a_criterion_that_chose_no_point_says_why():
    text = report_markdown("demo", summarize([record("a=1", 0.9, 3.0)]), ["a"])
    assert ("| highest mean ARI between the labels of different seeds | (none: it needs the labels of two seeds "
            "or more of the same data at a grid point) | | | |") in text
    assert "| highest mean cosine silhouette of the clusters on the input | (none: the runs do not log silhouette/mean) |" \
        in text
    # every grid point has a seed whose silhouette is NaN (a task predicted as a single cluster)
    rows = [record("a=1", 0.9, 3.0), record("a=1", 0.7, 3.0), record("a=2", 0.5, 1.0), record("a=2", 0.5, 1.0)]
    for row, silhouette in zip(rows, (0.4, float("nan"), float("nan"), 0.1)):
        row.metrics["silhouette/mean"] = silhouette
    summaries = summarize(rows)
    with pytest.raises(ValueError):
        best_point(summaries, "silhouette")
    assert why_no_point(summaries, "silhouette") == \
        "silhouette/mean is NaN in a run of every grid point: a task predicted as a single cluster"
    assert why_no_point(summaries, "objective_relative") == "the runs do not log objective/relative"


def test_without_labels_the_report_says_so_and_shows_the_label_free_choices_only():
    from mtc.results.report import NO_LABELS, with_stability

    def unlabelled(point, seed, objective, relative, silhouette, status="FINISHED"):
        return TrialRecord(point, seed, status, {"objective/final": objective, "objective/relative": relative,
                                                  "silhouette/t": silhouette, "silhouette/mean": silhouette}, "run")

    rows = [unlabelled("a=1", "0", 3.0, 0.5, 0.4), unlabelled("a=1", "1", 5.0, 0.7, 0.2),
            unlabelled("a=2", "0", 1.0, 0.9, 0.1), unlabelled("a=2", "1", 1.0, 0.9, 0.1),
            unlabelled("a=2", "2", 0.0, 0.0, 0.0, status="FAILED")]
    same, other = np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])
    summaries = with_stability(summarize(rows), {"a=1": [[same], [same]], "a=2": [[same], [other]]})
    text = report_markdown("demo", summaries, ["t"], "samples per task: t 4", labelled=False)
    assert text == f"""# demo

samples per task: t 4

**1 of 5 trials failed**; their errors are on the MLflow child runs (tag mtc.error).

{NO_LABELS}

## grid points chosen without labels

| chosen by | grid point | runs | criterion | value |
|---|---|---|---|---|
| lowest mean final objective | `a=2` | 2 | objective/final | 1 |
| lowest mean final / first objective | `a=1` | 2 | objective/relative | 0.6 |
| highest mean cosine silhouette of the clusters on the input | `a=1` | 2 | silhouette/mean | 0.3 |
| highest mean ARI between the labels of different seeds | `a=1` | 2 | stability/mean | 1 |

## silhouette per task at the point of the highest mean cosine silhouette of the clusters on the input: `a=1` (2 runs)

| task | silhouette |
|---|---|
| t | 0.3000 ± 0.1414 |
| mean | 0.3000 ± 0.1414 |

"""
    assert NO_LABELS == ("The data has no labels (no accuracy, NMI, ARI or purity): grid points are chosen by the "
                         "label-free criteria only.")
    assert grid_csv(summaries).splitlines()[0] == (
        "point,n_runs,n_failed,n_degenerate,objective/final mean,objective/final std,objective/relative mean,"
        "objective/relative std,silhouette/mean mean,silhouette/mean std,silhouette/t mean,silhouette/t std,"
        "stability/mean mean,stability/mean std")
    # no silhouette point (a single cluster in a run of every point): the report says why, without the per-task table
    for row in rows:
        row.metrics["silhouette/mean"] = float("nan") if row.seed == "0" else 0.2
    text = report_markdown("demo", summarize(rows), ["t"], labelled=False)
    assert ("| highest mean cosine silhouette of the clusters on the input | (none: silhouette/mean is NaN in a run "
            "of every grid point: a task predicted as a single cluster) | | | |") in text
    assert "silhouette per task" not in text



def test_trials_read_in_any_store_order_give_the_same_means_to_the_bit():
    """A store returns child runs in the order they were written; read back, they are ordered
    by point and seed (numbers by value), so that a mean over seeds is summed in one order and
    two runs of a study that made the same runs give the same bits (and the same ties)."""
    from types import SimpleNamespace
    from unittest import mock

    from mtc.results.reading import pooled_records, records_of
    from mtc.store import tracking

    rng = np.random.default_rng(0)
    values = rng.random((2, 20)) * 1e-3 + 0.6

    def run(point, seed, value):
        return SimpleNamespace(
            data=SimpleNamespace(tags={tracking.POINT_TAG: point}, params={"seed": str(seed)},
                                 metrics={"acc/mean": float(value)}),
            info=SimpleNamespace(status="FINISHED", run_id=f"{point}-{seed}", artifact_uri=""))

    def means(records):
        return {s.point: s.mean["acc/mean"] for s in summarize(records)}

    runs = [run(f"x={p}", s, values[p, s]) for p in range(2) for s in range(20)]
    orders = [runs, runs[::-1], [runs[i] for i in rng.permutation(len(runs))]]
    read = [records_of(order) for order in orders]
    assert [r.seed for r in read[0][:12]] == [str(s) for s in range(12)]  # "2" before "10"
    assert read[0] == read[1] == read[2]
    assert means(read[0]) == means(read[1]) == means(read[2])
    as_stored = [records_of([r])[0] for r in orders[2]]  # the store's order, not sorted
    assert means(as_stored) != means(read[0])  # that order moves a last bit here

    parents = [SimpleNamespace(info=SimpleNamespace(run_id=size)) for size in ("20", "40")]
    children = {"20": runs[:20][::-1], "40": [runs[i] for i in rng.permutation(20)]}  # one point, two sizes
    with mock.patch("mtc.results.reading.benchmark_name", side_effect=lambda parent: f"b-n{parent.info.run_id}"):
        pooled = pooled_records(parents, children)
    assert [r.seed for r in pooled[:3]] == ["n20/0", "n20/1", "n20/2"]
    assert [r.seed for r in pooled[20:23]] == ["n40/0", "n40/1", "n40/2"]
