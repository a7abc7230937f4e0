"""Data configs that draw a fresh sample per seed (``draw: per_seed``), the matfiles builder's
per-draw vocabulary and raw counts, and the checks on bad draw settings."""

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from mtc.cli import compose_config
from mtc.data.sources import data_root
from mtc.data.spec import data_spec
from mtc.errors import InputError


def spec(name, *overrides):
    return data_spec(compose_config([f"data={name}", *overrides]).data)


def test_per_seed_draws_differ_by_seed_and_repeat_for_the_same_seed():
    draws = spec("synthetic", "+data.draw=per_seed").draws(range(3))
    hashes = [draws[s].content_hash() for s in range(3)]
    assert len(set(hashes)) == 3
    assert spec("synthetic", "+data.draw=per_seed").load(1).content_hash() == hashes[1]


def test_once_shares_one_dataset_and_ignores_the_seed():
    draws = spec("synthetic").draws(range(3))
    assert len({id(d) for d in draws.values()}) == 1
    assert spec("synthetic").load(5).content_hash() == draws[0].content_hash()


def test_per_seed_uses_the_trial_seed_not_params_seed():
    a = spec("synthetic", "+data.draw=per_seed", "data.params.seed=0").load(2)
    b = spec("synthetic", "+data.draw=per_seed", "data.params.seed=7").load(2)
    c = spec("synthetic", "data.params.seed=2").load()
    assert a.content_hash() == b.content_hash() == c.content_hash()


def test_per_seed_load_needs_the_seed():
    with pytest.raises(ValueError, match="draws a fresh sample per seed: load\\(seed\\) needs the seed"):
        spec("synthetic", "+data.draw=per_seed").load()


def test_bad_draw_settings_are_rejected_in_one_line():
    with pytest.raises(InputError, match="draw must be one of once, per_seed, got 'each'"):
        spec("synthetic", "+data.draw=each")
    with pytest.raises(InputError, match="draw=per_seed needs a builder that samples with a seed; 'reuters' takes none"):
        spec("reuters", "+data.draw=per_seed")


def stacked(dataset):
    return sp.vstack([task.X for task in dataset.tasks], format="csr")


@pytest.mark.slow  # reads ../shared/data
def test_reuters_draws_have_their_own_vocabulary_in_the_stored_column_order():
    raw = ["data.params.samples_per_task=20", "data.params.tfidf=false", "++data.params.l2_normalize=false"]
    per_draw = spec("smtnmf_reuters_orgs_vs_people", *raw)
    whole = spec("smtnmf_reuters_orgs_vs_people", *raw, "data.params.drop_unused_terms=false")
    widths = []
    for seed in (0, 1):
        X, full = stacked(per_draw.load(seed)), stacked(whole.load(seed))
        assert full.shape == (40, 4771) and X.shape[0] == 40
        used = np.flatnonzero(full.getnnz(axis=0))
        assert X.shape[1] == used.size and (X != full[:, used]).nnz == 0  # same rows, used columns in order
        widths.append(X.shape[1])
    assert widths[0] != widths[1]  # a vocabulary per draw


@pytest.mark.slow  # reads ../shared/data
def test_matfiles_raw_counts_are_the_stored_counts():
    counts = stacked(spec("orgs_vs_people", "++data.params.l2_normalize=false").load())
    mat = {p: scipy.io.loadmat(data_root(None) / f"tsc_reuters/OrgsPeople_{p}.mat") for p in ("src", "tar")}
    stored = sp.vstack([sp.csr_matrix(mat[p][f"OrgsPeople_{p}_data"], dtype=float) for p in ("src", "tar")], format="csr")
    assert (counts != stored).nnz == 0  # every row, in the stored order, unscaled
    normalised = stacked(spec("orgs_vs_people").load())
    norms = np.sqrt(counts.multiply(counts).sum(axis=1)).A1
    np.testing.assert_allclose(normalised.toarray(), counts.toarray() / norms[:, None], atol=1e-12)


@pytest.mark.slow  # reads ../shared/data
def test_text_raw_counts_keep_the_pages_and_the_columns():
    counts, weights = spec("webkb4_counts").load(), spec("webkb4").load()
    for c, w in zip(counts.tasks, weights.tasks):
        assert (c.X.data == np.round(c.X.data)).all() and c.X.data.min() >= 1  # counts, unscaled
        assert ((c.X != 0) != (w.X != 0)).nnz == 0  # the same pages and terms, in the same columns


def test_a_sweep_planned_again_is_keyed_from_the_remembered_hashes_without_loading_its_draws(tmp_path, monkeypatch):
    """The second plan of a per-seed sweep finds every draw's hash beside the processed cache:
    the same tags and key as the plan that loaded the draws, and no draw read until used."""
    from mtc.config import settings
    from mtc.data import cache
    from mtc.sweep.driver import plan_sweep

    monkeypatch.setenv("MTC_CACHE_DIR", str(tmp_path / "cache"))
    run = settings(compose_config(["method=kmeans", "data=webkb_pp", "data.params.samples_per_task=20", "sweep.repeats=3",
                                   f"output_dir={tmp_path / 'out'}", f"mlflow.artifact_root={tmp_path / 'art'}"]))
    first = plan_sweep(run)
    assert "datasets" not in first.__dict__ and first.loaded is not None and len(first.loaded) == 3
    assert first.tags["mtc.data_draws"] == "3"
    monkeypatch.setattr(cache, "load_or_none", lambda path: pytest.fail(f"read {path}"))
    again = plan_sweep(run)
    assert (again.key, again.tags) == (first.key, first.tags) and again.loaded is None
    monkeypatch.undo()
    assert [d.content_hash() for d in again.datasets.values()] == [d.content_hash() for d in first.loaded.values()]
