import pytest

from mtc.config import data_spec, method_spec, trial_list


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
