"""How a task's samples are drawn (``data.params.sampling``): ``balanced``, the default,
takes samples_per_task // n_classes per class; ``random`` takes samples_per_task rows
uniformly from the task, every class present (SMT-NMF's "picked randomly")."""

import numpy as np
import pytest
from scipy.stats import hypergeom

from mtc.cli import compose_config
from mtc.data.compositions import balanced_sample, random_sample, sample_rows
from mtc.data.spec import data_spec
from mtc.errors import InputError

LABELS = np.array([0] * 30 + [1] * 10)  # a task with 75% / 25% classes


def spec(name, tmp_path, *overrides):
    return data_spec(compose_config([f"data={name}", f"data.cache_dir={tmp_path}", *overrides]).data)


def test_random_draws_have_the_size_every_class_and_repeat_by_seed():
    draws = [random_sample(np.random.default_rng(seed), LABELS, 8) for seed in range(50)]
    assert all(rows.size == 8 and np.unique(rows).size == 8 and (np.diff(rows) > 0).all() for rows in draws)
    assert all(set(LABELS[rows]) == {0, 1} for rows in draws)
    again = [random_sample(np.random.default_rng(seed), LABELS, 8) for seed in range(50)]
    assert all(np.array_equal(a, b) for a, b in zip(draws, again))
    assert len({tuple(rows) for rows in draws}) == 50
    np.testing.assert_array_equal(random_sample(np.random.default_rng(0), LABELS, None), np.arange(40))


def test_random_draws_follow_the_task_proportions_where_balanced_draws_do_not():
    seeds = range(400)
    random_share = [LABELS[random_sample(np.random.default_rng(s), LABELS, 8)].mean() for s in seeds]
    balanced_share = [LABELS[balanced_sample(np.random.default_rng(s), LABELS, 8)].mean() for s in seeds]
    assert set(balanced_share) == {0.5}
    expected = 0.25 / (1 - hypergeom(40, 10, 8).pmf(0))  # the task's 25%, given class 1 is drawn: 0.2706
    assert abs(np.mean(random_share) - expected) < 0.02
    assert len(set(random_share)) >= 4


def test_a_random_draw_that_misses_a_class_is_redrawn_and_an_impossible_one_refused():
    rare = np.array([0] * 98 + [1] * 2)
    for seed in range(20):  # a plain draw of 2 misses class 1 96% of the time
        assert sorted(rare[random_sample(np.random.default_rng(seed), rare, 2)]) == [0, 1]
    with pytest.raises(InputError, match="samples_per_task=2 with sampling=random missed a class in 1000 draws"):
        random_sample(np.random.default_rng(0), np.array([0] * 100000 + [1]), 2)
    with pytest.raises(InputError, match="samples_per_task=1 must be between the 2 classes and the 40 samples"):
        random_sample(np.random.default_rng(0), LABELS, 1)
    with pytest.raises(InputError, match="samples_per_task=41 must be between"):
        random_sample(np.random.default_rng(0), LABELS, 41)


def test_sample_rows_dispatches_on_sampling():
    for name, sampler in (("balanced", balanced_sample), ("random", random_sample)):
        np.testing.assert_array_equal(sample_rows(np.random.default_rng(3), LABELS, 8, name),
                                      sampler(np.random.default_rng(3), LABELS, 8))


@pytest.mark.slow  # checksums ../shared/data
def test_a_bad_sampling_value_is_refused_in_one_line(tmp_path):
    bad = spec("smtnmf_reuters_orgs_vs_people", tmp_path, "++data.params.sampling=stratified")
    with pytest.raises(InputError, match="^data.params.sampling must be one of balanced, random, got 'stratified'$"):
        bad.load(0)
    with pytest.raises(InputError, match="data.params.sampling must be a string, got 3"):
        spec("webkb_pp", tmp_path, "++data.params.sampling=3")
    assert not list(tmp_path.glob("*.npz"))


# draws of seed 3 built by the builders before the option existed (commit c9203eb): content hash, cache key
BEFORE = {"smtnmf_reuters_orgs_vs_people": (20, "f37909b6412001614e5212c3c91b75851489de17c39824f0802ae5afe3ece4b0",
                                            "21744c74d47dc225aba2"),
          "webkb_pp": (20, "799a9fdc228dadb0c0104328bb02425a9aaf1487d71f8daa986bdf02e793af0c", "e3487c0f902e9c577569"),
          "smtnmf_20ng_rec_talk": (10, "66bd1dff5e4b2d2b1fa2ebd13b0c033f00e631e4b825737856061b72988a2f99",
                                   "3aebc876db9bc84b9f35")}


@pytest.mark.slow  # reads ../shared/data
@pytest.mark.parametrize("name", sorted(BEFORE))
def test_the_default_draw_and_its_cache_key_are_unchanged_and_random_differs(name, tmp_path):
    size, content, key = BEFORE[name]
    size_set = f"data.params.samples_per_task={size}"
    default = spec(name, tmp_path / "default", size_set).load(3)  # built, not read from a cache
    assert (default.content_hash(), default.meta["cache_key"]) == (content, key)
    balanced = spec(name, tmp_path / "balanced", size_set, "++data.params.sampling=balanced").load(3)
    assert balanced.content_hash() == content and balanced.meta["cache_key"] != key  # same draw, its own key
    drawn = spec(name, tmp_path / "random", size_set, "++data.params.sampling=random")
    random = drawn.load(3)
    assert random.content_hash() not in (content, drawn.load(4).content_hash())
    assert random.content_hash() == spec(name, tmp_path / "again", size_set, "++data.params.sampling=random").load(3) \
        .content_hash()
    counts = [np.bincount(task.y, minlength=task.n_clusters) for task in random.tasks]
    assert all(c.min() >= 1 for c in counts) and any(c[0] != c[1] for c in counts)
    if name != "webkb_pp":  # WebKB drops pages left without a term after the draw
        assert [task.n_samples for task in random.tasks] == [size] * len(random.tasks)
