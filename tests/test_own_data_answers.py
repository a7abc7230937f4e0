"""Own data, round 2: the answer a researcher acts on is right by construction.

Every documented format runs with every default; the scale applied is the scale recorded;
grid points a method cannot fit are left out before Ray and said; failed, collapsed and
unmoved trials are counted and never ranked as answers; one label-free answer per benchmark."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.io
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_wine

import mtc.results
import mtc.sweep
from mtc.cli import compose_config
from mtc.config import settings
from mtc.data import load_dataset
from mtc.data.scaling import SCALES, text_scale
from mtc.errors import InputError
from mtc.methods.snmf import SymmetricNMF
from mtc.methods.validation import same_partition
from mtc.results.reading import Sweep
from mtc.results.recommend import recommendation_sentence, recommendations
from mtc.results.rendering import overview_table
from mtc.results.report import PointSummary
from mtc.results.significance import rank_table
from mtc.sweep.driver import check_plan, stop_kept_ray
from mtc.sweep.planning import plan_sweep

WINE = load_wine()
FEATURES = [f"f{i}" for i in range(WINE.data.shape[1])]
HALVES = np.array_split(np.random.default_rng(0).permutation(len(WINE.target)), 2)


def frame(rows) -> pd.DataFrame:
    table = pd.DataFrame(WINE.data[rows], columns=FEATURES)
    table["label"] = WINE.target[rows]
    return table


def csv_tasks(folder):
    return [frame(rows).to_csv(folder / f"wine_{t}.csv", index=False) or folder / f"wine_{t}.csv"
            for t, rows in zip("ab", HALVES)]


def tsv_tasks(folder):
    return [frame(rows).to_csv(folder / f"wine_{t}.tsv", sep="\t", index=False) or folder / f"wine_{t}.tsv"
            for t, rows in zip("ab", HALVES)]


def parquet_tasks(folder):
    return [frame(rows).to_parquet(folder / f"wine_{t}.parquet") or folder / f"wine_{t}.parquet"
            for t, rows in zip("ab", HALVES)]


def npz_tasks(folder):
    return [np.savez(folder / f"wine_{t}.npz", X=WINE.data[rows], y=WINE.target[rows]) or folder / f"wine_{t}.npz"
            for t, rows in zip("ab", HALVES)]


def sparse_npz_tasks(folder):
    return [sp.save_npz(folder / f"wine_{t}.npz", sp.csr_matrix(WINE.data[rows])) or folder / f"wine_{t}.npz"
            for t, rows in zip("ab", HALVES)]


def npy_tasks(folder):
    return [np.save(folder / f"wine_{t}.npy", WINE.data[rows]) or folder / f"wine_{t}.npy"
            for t, rows in zip("ab", HALVES)]


def svmlight_tasks(folder):
    return [dump_svmlight_file(WINE.data[rows], WINE.target[rows], str(folder / f"wine_{t}.svm")) or
            folder / f"wine_{t}.svm" for t, rows in zip("ab", HALVES)]


def mat_tasks(folder):
    return [scipy.io.savemat(folder / f"wine_{t}.mat", {"X": WINE.data[rows], "y": WINE.target[rows][:, None]}) or
            folder / f"wine_{t}.mat" for t, rows in zip("ab", HALVES)]


def task_column_file(folder):
    both = pd.concat([frame(rows).assign(site=f"site_{t}") for t, rows in zip("ab", HALVES)])
    both.to_csv(folder / "wine.csv", index=False)
    return [folder / "wine.csv"]


DOCS = {"sport": ["the match ended with a late goal by the striker", "the team won the league and the cup final",
                  "the coach praised the goalkeeper after the match", "a penalty in the final minute won the game"],
        "space": ["the rocket launch put the satellite into orbit", "astronauts on the station watched the comet",
                  "the telescope found a planet orbiting a distant star", "the probe landed on the moon of a planet"]}


def text_folders(folder):
    paths = []
    for t in ("a", "b"):
        for label, docs in DOCS.items():
            (folder / f"news_{t}" / label).mkdir(parents=True)
            for i, doc in enumerate(docs * 3):
                (folder / f"news_{t}" / label / f"{i}.txt").write_text(f"{doc} {t} {i}")
        paths.append(folder / f"news_{t}")
    return paths


# format -> (writer, the overrides its documented command adds, the scale a default run applies)
FORMATS = {
    "csv": (csv_tasks, ["data.params.label_column=label"], "maxabs"),
    "tsv": (tsv_tasks, ["data.params.label_column=label"], "maxabs"),
    "parquet": (parquet_tasks, ["data.params.label_column=label"], "maxabs"),
    "npz": (npz_tasks, ["data.params.label_column=y"], "maxabs"),
    "sparse npz": (sparse_npz_tasks, ["data.params.n_clusters=3"], "maxabs"),
    "npy": (npy_tasks, ["data.params.n_clusters=3"], "maxabs"),
    "svmlight": (svmlight_tasks, [], "maxabs"),
    "mat": (mat_tasks, ["data.params.label_column=y"], "maxabs"),
    "task column": (task_column_file, ["data.params.label_column=label", "data.params.task_column=site"], "maxabs"),
    "text folders": (text_folders, [], "tfidf"),
}


def files_overrides(paths, name="mine"):
    return ["data=files", f"data.params.paths=[{','.join(str(p) for p in paths)}]", f"data.name={name}"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One store, output folder and kept local Ray for the module's sweeps."""
    folder = tmp_path_factory.mktemp("answers")
    yield folder, [f"output_dir={folder / 'outputs'}", f"mlflow.tracking_uri=sqlite:///{folder / 'mlflow.db'}",
                   f"mlflow.artifact_root={folder / 'art'}", "ray.num_cpus=2"]
    stop_kept_ray()


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_documented_format_runs_its_command_with_every_default(store, tmp_path, fmt, capsys):
    """The tutorial's command (mtc.sweep method=... data=files paths name, plus the labels or
    cluster count the format needs), nothing else set: it runs, and the scale it applied is
    the one its runs, its report and its first line name."""
    folder, where = store
    writer, extra, scale = FORMATS[fmt]
    name = fmt.replace(" ", "_")
    result = mtc.sweep.run("kmeans", "files", *files_overrides(writer(tmp_path), name)[1:], *extra, *where)
    assert f"features scaled: {scale}" in capsys.readouterr().out.splitlines()[0]
    trials = mtc.results.trials(result.tracking_uri, sweep=result.parent_run_id)
    assert len(trials) == 10 and (trials.outcome == "answer").all()
    client = __import__("mlflow").MlflowClient(result.tracking_uri)
    assert client.get_run(result.parent_run_id).data.params["data.params.scale"] == scale
    assert client.get_run(trials.run_id[0]).data.params["data.params.scale"] == scale
    assert f"features scaled: {scale}" in Path(result.output_dir, "report.md").read_text()
    if scale == "maxabs":  # a good answer, not a collapse: k-means on the scaled wine halves
        assert result.best["acc"].mean["acc/mean"] > 0.85 if "acc" in result.best else True


def test_every_scale_is_applied_or_refused_before_anything_runs(tmp_path):
    """Text folders are scaled by their vectoriser's settings: auto and the scale those give run,
    every other scale is refused at settings (before Ray, before the data loads); a table gets
    every scale it names, recorded by name."""
    folders = files_overrides(text_folders(tmp_path))
    for scale in ("auto", *SCALES):
        overrides = ["method=snmf", *folders, f"data.params.scale={scale}"]
        if scale in ("auto", "tfidf"):
            assert settings(compose_config(overrides)).data.params["scale"] == "tfidf"
        else:
            with pytest.raises(InputError, match=f"scale={scale}: text folders are scaled by their vectoriser's "
                                                 "settings .* which give tfidf"):
                settings(compose_config(overrides))
    counts = settings(compose_config(["method=snmf", *folders, "data.params.text.tfidf=false",
                                      "data.params.text.l2_normalize=false"]))
    assert counts.data.params["scale"] == "none" == text_scale({"tfidf": False, "l2_normalize": False})
    assert counts.resolved["data"]["params"]["scale"] == "none"  # what the parent run records
    tables = csv_tasks(tmp_path)
    for scale in ("auto", *SCALES):
        dataset = load_dataset("wine", "files", {"paths": [str(p) for p in tables], "label_column": "label",
                                                 "scale": scale}, cache_dir=str(tmp_path / "cache"))
        assert dataset.meta["scale"] == ("maxabs" if scale == "auto" else scale)


def three_features(folder):
    """The wine halves on three columns, of scales 10 to 1e3 (fewer features than LSSMTC's
    larger subspaces)."""
    paths = []
    for t, rows in zip("ab", HALVES):
        table = frame(rows)[["f0", "f9", "f12", "label"]]
        table.to_csv(folder / f"narrow_{t}.csv", index=False)
        paths.append(folder / f"narrow_{t}.csv")
    return paths


def test_grid_points_a_method_cannot_fit_are_left_out_before_ray_and_said(store, tmp_path, capsys):
    """LSSMTC's n_components 4, 8 and 16 on three features: left out of the plan with the
    reason (no trial fails for it), said in the sweep's first lines, its report, its parent
    run and compare; a grid with no point that fits is refused, naming the reason."""
    folder, where = store
    overrides = [*files_overrides(three_features(tmp_path), "narrow"), "data.params.label_column=label", *where]
    run = settings(compose_config(["method=lssmtc", *overrides, "sweep.repeats=2"]))
    plan = check_plan(plan_sweep(run))
    assert set(plan.unrunnable) == {f"lambda_={lam},n_components={k}" for lam in run.method.grid["lambda_"]
                                    for k in (4, 8, 16)}
    assert set(plan.unrunnable.values()) == {f"n_components={k} exceeds the 3 features" for k in (4, 8, 16)}
    assert {trial.point["n_components"] for trial in plan.trials} == {2}
    result = mtc.sweep.run("lssmtc", "files", *overrides[1:], "sweep.repeats=2", "method.grid.lambda_=[0.25,0.75]")
    printed = capsys.readouterr().out
    assert "6 grid point(s) left out before Ray (the method cannot fit this data): n_components=4 exceeds the 3 " \
           "features (2 points)" in printed
    trials = mtc.results.trials(result.tracking_uri, sweep=result.parent_run_id, finished_only=False)
    assert len(trials) == 4 and (trials.status == "FINISHED").all()  # nothing failed for a known reason
    assert "**6 grid point(s) left out before Ray**" in Path(result.output_dir, "report.md").read_text()
    parent = __import__("mlflow").MlflowClient(result.tracking_uri).get_run(result.parent_run_id)
    assert parent.data.metrics["left_out_points"] == 6 and parent.data.metrics["failed_trials"] == 0
    with pytest.raises(InputError, match="sweep lssmtc-narrow: no grid point can fit the data "
                                         r"\(n_components=4 exceeds the 3 features\)"):
        check_plan(plan_sweep(settings(compose_config(["method=lssmtc", *overrides, "method.grid.n_components=[4,8]"]))))
    comparison = mtc.results.comparison(result.tracking_uri, benchmarks=["narrow"])
    assert len(comparison.sweeps[0].left_out) == 6
    from mtc.results.compare import compare

    compare(result.tracking_uri, "mtc", folder / "compare_narrow", benchmarks=["narrow"], log=False)
    assert "| narrow | lssmtc | 0 | 6 |  | n_components=4 exceeds the 3 features; n_components=8" in \
        (folder / "compare_narrow" / "compare.md").read_text()


def test_a_fit_that_never_left_its_start_is_flagged_unmoved():
    """SNMF on two well-separated clusters ends at its k-means start's partition (unmoved in
    both tasks); on three overlapping ones it moves. same_partition reads labels up to their
    numbering."""
    rng = np.random.default_rng(0)
    overlapping = [np.abs(rng.normal(size=(60, 5))) + np.repeat(np.eye(5)[:3] * 0.8, 20, axis=0) for _ in (0, 1)]
    separated = [np.abs(rng.normal(size=(40, 5))) + np.repeat(np.eye(5)[:2] * 6, 20, axis=0) for _ in (0, 1)]
    still = SymmetricNMF(n_clusters=2, random_state=0).fit(separated)
    np.testing.assert_array_equal(still.record_.scalars["unmoved"], [1.0, 1.0])
    moved = SymmetricNMF(n_clusters=3, random_state=0).fit(overlapping)
    np.testing.assert_array_equal(moved.record_.scalars["unmoved"], [0.0, 0.0])
    assert all(not same_partition(a, b) for a, b in zip(moved.labels_, moved.start_labels_))
    assert same_partition(np.array([0, 0, 1, 2]), np.array([2, 2, 0, 1]))
    assert not same_partition(np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1]))


def cells(rows):
    return pd.DataFrame([{"benchmark": "mine", "method": method, "task": task, "metric": "acc", "selection": "acc",
                          "point": "defaults", "mean": mean, "std": 0.01, "n": 10, "degenerate": degenerate,
                          "unmoved": unmoved, "paper_mean": None, "paper_std": None}
                         for method, mean, degenerate, unmoved in rows for task in ("t1", "t2", "mean")])


def test_a_collapse_or_an_unmoved_start_is_marked_never_bold_and_not_ranked():
    frame_ = cells([("mkc", 0.95, 10, 0), ("mtcmrl", 0.9, 0, 10), ("kmeans", 0.8, 0, 0), ("kkm", 0.7, 2, 0),
                    ("snmf", 0.6, 0, 0)])
    overview = overview_table(frame_, "acc").set_index("benchmark").loc["mine"]
    assert overview["mkc"] == "0.9500 ± 0.0100 (collapsed)"
    assert overview["mtcmrl"] == "0.9000 ± 0.0100 (never moved)"
    assert overview["kmeans"] == "**0.8000 ± 0.0100**"  # the best answer, below two non-answers
    assert overview["kkm"] == "0.7000 ± 0.0100 (2 of 10 degenerate)"  # still an answer: ranked
    assert sorted(rank_table(frame_, "acc").columns) == ["kkm", "kmeans", "snmf"]


def summary(point, silhouette, acc=None, degenerate=0, unmoved=0, balance=None):
    mean = {"silhouette/mean": silhouette, **({"acc/mean": acc} if acc is not None else {}),
            **({"balance/mean": balance} if balance is not None else {})}
    return PointSummary(point, 10, 0, mean, {}, degenerate, {}, unmoved)


def test_one_label_free_answer_and_no_structure_when_every_silhouette_is_at_or_below_zero():
    def sweep(method, sil, acc, degenerate=0):
        chosen = summary("a=1", sil, acc, degenerate)
        return Sweep("mine", method, method, {"acc": summary("a=2", sil, acc + 0.05, degenerate),
                                              "silhouette": chosen}, pd.DataFrame(), method)

    found = recommendations([sweep("kmeans", 0.3, 0.7), sweep("mkc", 0.6, 0.5, degenerate=10),
                             sweep("kkm", 0.2, 0.8)])
    [answer] = found
    assert (answer.method, answer.point, answer.silhouette, answer.acc) == ("kmeans", "a=1", 0.3, 0.7)
    assert (answer.oracle_method, answer.oracle_acc) == ("kkm", pytest.approx(0.85))
    assert recommendation_sentence(answer) == (
        "mine: without labels, take kmeans at `a=1` (chosen by the highest mean cosine silhouette of the clusters on "
        "the input: 0.3000); its accuracy 0.7000; the best accuracy (labels): kkm 0.8500")
    [none] = recommendations([sweep("kmeans", -0.1, 0.4), sweep("kkm", 0.0, 0.45)])
    assert not none.found and "no structure found without labels" in recommendation_sentence(none)


def test_an_outlier_split_is_passed_over_unless_every_answer_is_one():
    def sweep(method, sil, acc, balance):
        chosen = summary("a=1", sil, acc, balance=balance)
        return Sweep("mine", method, method, {"acc": chosen, "silhouette": chosen}, pd.DataFrame(), method)

    [found] = recommendations([sweep("ncut", 0.43, 0.57, 0.04), sweep("mtcfir", 0.42, 0.87, 0.96),
                               sweep("kmeans", 0.41, 0.90, None)])  # None: a run logged before the metric
    assert (found.method, found.passed_over) == ("mtcfir", (("ncut", 0.43, 0.04),))
    assert recommendation_sentence(found).endswith(
        "; the best accuracy (labels): kmeans 0.9000; passed over as outlier splits (a smallest cluster under 0.2 of an "
        "even share): ncut 0.4300 (balance 0.04)")
    [found] = recommendations([sweep("ncut", 0.43, 0.57, 0.04), sweep("a_ncut", 0.33, 0.29, 0.19)])
    assert (found.method, found.passed_over) == ("ncut", ())  # every answer an outlier split: the highest silhouette
    [none] = recommendations([sweep("ncut", 0.43, 0.57, 0.04), sweep("kmeans", -0.01, 0.5, 0.9)])
    assert not none.found and none.silhouette == -0.01
    assert "the highest balanced answer's silhouette is -0.0100" in recommendation_sentence(none)


def test_a_trial_outcome_names_what_it_gave():
    from mtc.results.frames import trial_outcome

    assert trial_outcome("FAILED", {}) == "failed"
    assert trial_outcome("FINISHED", {"degenerate_tasks": 1.0}) == "degenerate"
    assert trial_outcome("FINISHED", {"unmoved": 1.0}) == "never moved"
    assert trial_outcome("FINISHED", {"degenerate_tasks": 0.0, "unmoved": 0.0}) == "answer"
