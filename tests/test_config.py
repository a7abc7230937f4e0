import pytest

from mtc.config import data_spec, method_spec, seed_batches, seeds_per_trial, trial_list


def test_grid_times_seeds_with_stable_keys(compose_config):
    cfg = compose_config("method=kkm", "method.grid.kernel_width=[0.5,2.0]", "sweep.repeats=3")
    spec = method_spec(cfg)
    trials = trial_list(spec, cfg.sweep.repeats)
    assert len(trials) == 6
    assert [t["key"] for t in trials[:3]] == [f"kernel_width=0.5|seed={s}" for s in range(3)]
    assert trials[4]["params"] == {"n_init": 10, "max_iter": 300, "kernel_width": 2.0}


def test_new_grid_key_from_the_command_line(compose_config):
    cfg = compose_config("method=snmf", "++method.grid.tol=[1e-3,1e-5]")
    assert len(method_spec(cfg).grid_points()) == 4


@pytest.mark.parametrize("overrides, message", [
    (("method=kmeans", "method.name=nope"), "unknown method 'nope'; known methods: a_kmeans"),
    (("method=kmeans", "+method.grid.lambda_=[1]"), "method 'kmeans': unknown grid key 'lambda_'"),
    (("method=kmeans", "+method.params.alpha=1"), "method 'kmeans': unknown parameter 'alpha'"),
    # n_clusters and random_state come from the dataset and the seed, never from a config
    (("method=kmeans", "+method.params.n_clusters=3"), "method 'kmeans': unknown parameter 'n_clusters'"),
    (("method=kmeans", "+method.grid.n_init=4"), "grid values for 'n_init' must be a non-empty list"),
])
def test_bad_method_config_is_rejected(compose_config, overrides, message):
    with pytest.raises(ValueError, match=message):
        method_spec(compose_config(*overrides))


def test_unknown_dataset_name(compose_config):
    with pytest.raises(ValueError, match="unknown dataset 'mnist2'"):
        data_spec(compose_config("data.name=mnist2"))


def test_zero_repeats_rejected(compose_config):
    cfg = compose_config("sweep.repeats=0")
    with pytest.raises(ValueError, match="sweep.repeats must be at least 1"):
        trial_list(method_spec(cfg), cfg.sweep.repeats)


@pytest.mark.parametrize("setting, n_trials, slots, expected", [
    ("auto", 250, 2, 10),  # 25 grid points x 10 seeds on 2 CPUs: one Tune trial per grid point
    ("auto", 40, 2, 5),
    ("auto", 12, 2, 1),  # few trials: one seed each, so every CPU stays busy
    ("auto", 250, 64, 1),  # a big cluster: one seed each
    (3, 250, 64, 3),
])
def test_seeds_per_trial(setting, n_trials, slots, expected):
    assert seeds_per_trial(setting, n_trials, 10, slots) == expected


@pytest.mark.parametrize("setting", [0, -2, "two", 1.5, True])
def test_bad_seeds_per_trial_rejected(setting):
    with pytest.raises(ValueError, match="sweep.seeds_per_trial must be 'auto' or a positive integer"):
        seeds_per_trial(setting, 10, 10, 2)


def test_seed_batches_stay_within_one_grid_point(compose_config):
    cfg = compose_config("method=kkm", "method.grid.kernel_width=[0.5,2.0]", "sweep.repeats=3")
    batches = seed_batches(trial_list(method_spec(cfg), cfg.sweep.repeats), 2)
    assert list(batches) == ["kernel_width=0.5 seeds=0-1", "kernel_width=0.5 seeds=2",
                             "kernel_width=2.0 seeds=0-1", "kernel_width=2.0 seeds=2"]
    assert [t["seed"] for t in batches["kernel_width=2.0 seeds=0-1"]] == [0, 1]
    assert {t["label"] for t in batches["kernel_width=2.0 seeds=0-1"]} == {"kernel_width=2.0"}
