import pytest

from mtc.config import method_spec, seed_batches, seeds_per_trial, settings, staggered, trial_list
from mtc.data.spec import data_spec
from mtc.methods import KernelKMeans, SymmetricNMF


def test_grid_times_seeds_with_stable_keys(compose_config):
    cfg = compose_config("method=kkm", "method.grid.kernel_width=[0.5,2.0]", "sweep.repeats=3")
    spec = method_spec(cfg)
    trials = trial_list(spec, cfg.sweep.repeats)
    assert len(trials) == 6
    assert [t.key for t in trials[:3]] == [f"kernel_width=0.5|seed={s}" for s in range(3)]
    assert trials[4].point == {"kernel_width": 2.0} and trials[4].seed == 1
    assert spec.name == "kkm" and spec.solver is KernelKMeans and spec.params == {}
    assert spec.prototype(n_clusters=[2, 3]).get_params()["n_clusters"] == [2, 3]


def test_non_default_parameters_from_the_command_line(compose_config):
    spec = method_spec(compose_config("method=snmf", "++method.params.tol=1e-3", "++method.params.max_iter=7"))
    assert spec.params == {"tol": 1e-3, "max_iter": 7}
    assert spec.prototype().get_params()["tol"] == 1e-3 and spec.solver is SymmetricNMF


def test_new_grid_key_from_the_command_line(compose_config):
    cfg = compose_config("method=snmf", "++method.grid.tol=[1e-3,1e-5]")
    assert len(method_spec(cfg).grid_points()) == 4


@pytest.mark.parametrize("overrides, message", [
    (("method=kmeans", "method._target_=mtc.methods.nope.Nope"), "method 'kmeans': cannot import _target_ 'mtc.methods.nope.Nope'"),
    (("method=kmeans", "method._target_=mtc.tasks.Task"), "method 'kmeans': _target_ 'mtc.tasks.Task' is not a MultiTaskClusterer"),
    (("method=kmeans", "+method.grid.lambda_=[1]"), "method 'kmeans': unknown grid key 'lambda_'"),
    (("method=kmeans", "+method.params.alpha=1"), "method 'kmeans': unknown parameter 'alpha'"),
    # n_clusters, random_state and cache come from the dataset, the seed and the worker, never from a config
    (("method=kmeans", "+method.params.n_clusters=3"), "method 'kmeans': unknown parameter 'n_clusters'"),
    (("method=mtcmrl", "+method.params.cache=1"), "method 'mtcmrl': unknown parameter 'cache'"),
    (("method=kmeans", "+method.grid.n_init=4"), "grid values for 'n_init' must be a non-empty list"),
    # values are checked against the solver's declared constraints before anything runs
    (("method=mtcmrl", "method.grid.lambda_=[1.0,-1.0]"),
     r"method 'mtcmrl', grid point alpha=0.25,lambda_=-1.0: The 'lambda_' parameter of MTCMRL must be a float in the range \(0.0, inf\). Got -1.0 instead."),
    (("method=mtcfir", "method.grid.neighbour_ratio=[1.5]"), "The 'neighbour_ratio' parameter of MTCFIR must be a float in the range \\(0.0, 1.0\\]"),
    (("method=mtcfir", "method.grid.corruption=[1.0]"), "The 'corruption' parameter of MTCFIR must be a float in the range \\[0.0, 1.0\\)"),
    (("method=kkm", "++method.grid.max_iter=[abc]"), "The 'max_iter' parameter of KernelKMeans must be an int in the range"),
    (("method=mtcmrl", "++method.params.tol=-1"), "method 'mtcmrl', parameters: The 'tol' parameter of MTCMRL must be a float in the range"),
])
def test_bad_method_config_is_rejected(compose_config, overrides, message):
    with pytest.raises(ValueError, match=message):
        method_spec(compose_config(*overrides))


def test_unknown_dataset_name(compose_config):
    with pytest.raises(ValueError, match="unknown dataset 'mnist2'"):
        data_spec(compose_config("data.name=mnist2").data)


@pytest.mark.parametrize("override, message", [
    ("sweep.repeats=0", "sweep.repeats must be a positive integer, got 0"),
    ("sweep.cpus_per_trial=0", "sweep.cpus_per_trial must be a positive integer"),
    ("ray.num_cpus=0", "ray.num_cpus must be a positive integer or null, got 0"),
    ("sweep.seeds_per_trial=two", "sweep.seeds_per_trial \\(or 'auto'\\) must be a positive integer"),
    ("seed=-1", "seed must be a non-negative integer"),
    ("sweep.label='my variant'", "sweep.label must be letters, digits, '_' or '.', got 'my variant'"),
])
def test_bad_sweep_settings_rejected(compose_config, override, message):
    with pytest.raises(ValueError, match=message):
        settings(compose_config(override))


def test_settings_are_absolute(compose_config, tmp_path):
    run = settings(compose_config("method=kkm", "data.root=relative/raw"))
    assert run.tracking.uri == f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert run.sweep.name == "kkm-synthetic" and run.sweep.output_dir == tmp_path / "outputs"
    assert run.sweep.label == "kkm"
    assert run.data.root.startswith("/") and run.data.root.endswith("relative/raw")


def test_a_variant_is_labelled_and_its_sweep_named_after_the_label(compose_config):
    run = settings(compose_config("+experiment=smbc_sequential", "data=synthetic"))
    assert (run.method.name, run.sweep.label, run.sweep.name) == ("smbc", "smbc_sequential", "smbc_sequential-synthetic")
    named = settings(compose_config("method=kkm", "sweep.label=kkm_wide", "sweep.name=mine"))
    assert (named.sweep.label, named.sweep.name) == ("kkm_wide", "mine")


@pytest.mark.parametrize("setting, n_trials, slots, expected", [
    ("auto", 250, 2, 10),  # 25 grid points x 10 seeds on 2 CPUs: one Tune trial per grid point
    ("auto", 40, 2, 5),
    ("auto", 12, 2, 1),  # few trials: one seed each, so every CPU stays busy
    ("auto", 250, 64, 1),  # a big cluster: one seed each
    (3, 250, 64, 3),
])
def test_seeds_per_trial(setting, n_trials, slots, expected):
    assert seeds_per_trial(setting, n_trials, 10, slots) == expected


@pytest.mark.parametrize("n_trials, slots, grid_points, expected", [
    (80, 2, 1, 5),  # a study's single-point sweep of 10 seeds on 2 CPUs: two Tune trials, one per CPU
    (80, 3, 1, 4),  # 3 CPUs: ceil(10 / 3) seeds a trial
    (200, 4, 2, 5),  # 2 points on 4 CPUs: each point's seeds in two
    (80, 2, 2, 10),  # as many points as CPUs: batched by the count alone
    (250, 2, 25, 10),
    (12, 2, 1, 1),
    (80, 2, None, 10),  # points not given: the count alone
])
def test_a_sweep_of_fewer_grid_points_than_slots_splits_its_seeds_over_them(n_trials, slots, grid_points, expected):
    assert seeds_per_trial("auto", n_trials, 10, slots, grid_points) == expected
    assert seeds_per_trial(3, n_trials, 10, slots, grid_points) == 3  # an int is taken as it is


@pytest.mark.parametrize("setting", [0, -2, "two", 1.5, True])
def test_bad_seeds_per_trial_rejected(compose_config, setting):
    with pytest.raises(ValueError, match="sweep.seeds_per_trial \\(or 'auto'\\) must be a positive integer"):
        settings(compose_config(f"sweep.seeds_per_trial={setting}"))


def test_a_study_splits_only_its_single_point_sweep_over_both_cpus(compose_config):
    """tune_batches as a study's Tuner calls it: a 4-point sweep of 10 seeds and a 1-point one
    (50 pending trials on 2 CPUs: the count allows batches of 6); the single-point sweep's
    seeds go in two Tune trials of 5, one per CPU, the other sweep's points keep one batch each
    of up to 6 seeds; every pending trial is in one batch."""
    from types import SimpleNamespace

    from mtc.sweep.driver import tune_batches

    def opened(name, *overrides):
        cfg = compose_config(*overrides, "sweep.repeats=10")
        run = settings(cfg)
        return SimpleNamespace(plan=SimpleNamespace(name=name, run=run),
                               pending=trial_list(method_spec(cfg), cfg.sweep.repeats))

    grid, single = opened("kkm-grid", "method=kkm", "method.grid.kernel_width=[0.5,1.0,2.0,4.0]"), \
        opened("kmeans-one", "method=kmeans")
    batches = tune_batches([grid, single], 2)
    sizes = {}
    for owner, trials in batches.values():
        sizes.setdefault(owner, []).append(len(trials))
    assert sizes == {"kkm-grid": [6, 4] * 4, "kmeans-one": [5, 5]}
    assert sorted((owner, t.label, t.seed) for owner, trials in batches.values() for t in trials) == sorted(
        [("kkm-grid", t.label, t.seed) for t in grid.pending] + [("kmeans-one", t.label, t.seed) for t in single.pending])


def test_seed_batches_stay_within_one_grid_point(compose_config):
    cfg = compose_config("method=kkm", "method.grid.kernel_width=[0.5,2.0]", "sweep.repeats=3")
    batches = seed_batches(trial_list(method_spec(cfg), cfg.sweep.repeats), 2)
    assert list(batches) == ["kernel_width=0.5 seeds=0-1", "kernel_width=0.5 seeds=2",
                             "kernel_width=2.0 seeds=0-1", "kernel_width=2.0 seeds=2"]
    assert [t.seed for t in batches["kernel_width=2.0 seeds=0-1"]] == [0, 1]
    assert {t.label for t in batches["kernel_width=2.0 seeds=0-1"]} == {"kernel_width=2.0"}


def test_batches_started_together_fit_different_seeds_first(compose_config):
    """Consecutive batches (one per parallel slot start together) are rotated by a share of the
    batch each, so no two of them compute the same seed's start at the same time; every seed
    stays in its batch once."""
    cfg = compose_config("method=kkm", "method.grid.kernel_width=[0.5,1.0,2.0]", "sweep.repeats=10")
    batches = list(seed_batches(trial_list(method_spec(cfg), cfg.sweep.repeats), 10).values())
    seeds = [[t.seed for t in staggered(batch, index, 2)] for index, batch in enumerate(batches)]
    assert seeds == [list(range(10)), [5, 6, 7, 8, 9, 0, 1, 2, 3, 4], list(range(10))]
    assert [t.seed for t in staggered(batches[1], 1, 3)] == [4, 5, 6, 7, 8, 9, 0, 1, 2, 3]
    assert [t.seed for t in staggered(batches[1], 2, 3)] == [8, 9, 0, 1, 2, 3, 4, 5, 6, 7]
    assert staggered(batches[0], 5, 1) == batches[0] and staggered(batches[0][:1], 1, 4) == batches[0][:1]
    assert {t.label for t in staggered(batches[2], 1, 2)} == {"kernel_width=2.0"}


def test_repeated_grid_values_run_once_and_are_named(compose_config, capsys):
    cfg = compose_config("method=mtcmrl", "method.grid.alpha=[1.0,1.0,1,2.0]", "method.grid.lambda_=[0.5]",
                         "sweep.repeats=2")
    spec = method_spec(cfg)
    assert spec.grid == {"alpha": [1.0, 2.0], "lambda_": [0.5]} and spec.n_points == 2
    assert len(trial_list(spec, 2)) == 4  # 2 points x 2 seeds, as the driver then counts them
    assert capsys.readouterr().err == ("note: method 'mtcmrl': repeated grid values dropped (alpha: 1.0 3 times); "
                                       "2 grid point(s) remain\n")


def test_a_bad_grid_value_is_named_in_the_first_grid_point_that_has_it(compose_config):
    """Each value is checked once (not every combination), and reported in the first point
    the sweep would run with it, as checking every point in order did."""
    cfg = compose_config("method=mtcmrl", "method.grid.alpha=[1.0,2.0,-3.0]", "method.grid.lambda_=[0.5,1.0]")
    with pytest.raises(ValueError, match=r"grid point alpha=-3.0,lambda_=0.5: The 'alpha' parameter of MTCMRL"):
        method_spec(cfg)


@pytest.mark.parametrize("name", ["mine", "kkm-synthetic_2", "v1.2+wide"])
def test_a_sweep_name_is_one_folder_inside_output_dir(compose_config, tmp_path, name):
    run = settings(compose_config("method=kkm", f"sweep.name={name}"))
    assert (run.sweep.output_dir / run.sweep.name).parent == tmp_path / "outputs"


@pytest.mark.parametrize("name", ["..", ".", "../../x", "a/b", "/tmp/x", ".hidden", "''"])
def test_a_sweep_name_that_is_not_one_folder_is_refused(compose_config, name):
    with pytest.raises(ValueError, match="sweep.name must be one folder name"):
        settings(compose_config("method=kkm", f"sweep.name={name}"))


def test_unknown_settings_are_refused_with_the_nearest_key(compose_config):
    with pytest.raises(ValueError, match=r"unknown setting 'ray.adress': did you mean ray.address=auto\? ray takes: "
                                         r"address, head_lost_seconds, num_cpus, object_store_memory"):
        settings(compose_config("+ray.adress=auto"))
    with pytest.raises(ValueError, match=r"unknown setting 'mlflow.experiments': did you mean mlflow.experiment=x\?"):
        settings(compose_config("+mlflow.experiments=x"))


@pytest.mark.parametrize("overrides, message", [
    (["method=mtcmrl", "method.params.alpha=4"], "method 'mtcmrl' sweeps alpha in its grid ([0.25, 0.5, 1.0, 2.0, "
                                                 "4.0]): to fix it at 4 write method.grid.alpha=[4]"),
    (["method=kkm", "method.grid.n_init=[2,4]"], "method 'kkm': n_init is not in its grid; write "
                                                 "++method.grid.n_init=[2,4] (++ adds a key; a grid takes a list)"),
    (["method=kkm", "method.params.n_clusters=3"], "method 'kkm': n_clusters is set by the platform, never by a config"),
    (["method=smkc", "method.params.shared_lambdas=[0.1]"], "method 'smkc': shared_lambdas is set by the platform, "
     "never by a config (n_clusters from the data, random_state from the seed, cache by the worker, shared_lambdas "
     "from the sweep's lambda_ values)"),
    (["sweep.repeatz=2"], "unknown setting 'sweep.repeatz': did you mean sweep.repeats=2? sweep takes: "),
    (["data=comp_vs_sci", "data.params.samples_per_tsk=10"], "dataset 'comp_vs_sci' has no parameter "
                                                             "'samples_per_tsk': did you mean "
                                                             "data.params.samples_per_task=10?"),
])
def test_a_key_the_config_does_not_have_says_what_to_write(overrides, message):
    """Hydra's own error is seven lines ("Key 'params' is not in struct"); composing for any
    command (sweep, run, reproduce) gives one line naming the override to write instead."""
    from mtc.cli import compose_config as compose
    from mtc.errors import InputError

    with pytest.raises(InputError) as raised:
        compose(overrides)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def test_the_study_composer_gives_hydras_config_for_every_kind_of_study_sweep():
    """mtc.cli.Composer (one Hydra compose per set of group choices, the values applied to a
    copy) against a full Hydra compose, on a sample of every paper study's sweeps (sizes,
    sweep names from ${hydra:runtime.choices.method}, ++ additions, experiments) and a value
    override the config does not have (the full compose's one-line error)."""
    from omegaconf import OmegaConf

    from mtc.cli import Composer, compose_config
    from mtc.errors import InputError
    from mtc.reproduce import DRIVER_SETTINGS, load_study

    composer = Composer()
    sweeps = load_study("all").sweeps
    sample = sweeps[::23]
    assert len(sample) >= 20 and len({s for sweep in sample for s in sweep if s.startswith("+experiment=")}) >= 5
    for sweep in sample:
        overrides = [*sweep, "sweep.seeds_per_trial=3", *DRIVER_SETTINGS]
        fast = OmegaConf.to_container(composer(overrides), resolve=True)
        full = OmegaConf.to_container(compose_config(overrides), resolve=True)
        assert fast == full, sweep
    with pytest.raises(InputError, match="unknown setting 'sweep.repets'"):
        composer([*sample[0], "sweep.repets=3"])


@pytest.mark.slow
def test_in_the_all_study_every_compare_folder_reads_the_sweeps_of_its_own_study():
    """A compare folder's rows are the (benchmark, sweep label) pairs of the sweeps in the store.
    The `all` study runs every paper into one store, where papers share benchmarks (reuters,
    webkb4, handdigits, 20ng, ...): each compare must select there exactly the pairs its own
    study gives, else `all` would regenerate compare_reuters with the aaai13 study's MBC rows.
    The studies' `methods` lists keep them apart, and each names only rows its study has; this
    composes every sweep of every study `all` includes."""
    from omegaconf import OmegaConf

    from mtc.cli import CONF_DIR, Composer
    from mtc.reproduce import DRIVER_SETTINGS, load_study
    from mtc.results.reading import pool_members

    composer, pair_of = Composer(), {}

    def pairs(study) -> set[tuple[str, str]]:
        for sweep in study.sweeps:  # a paper's sweeps are among all's: each composed once
            if sweep not in pair_of:
                run = settings(composer([*sweep, *DRIVER_SETTINGS]))
                prefix = f"{run.sweep.label}-"  # mtc.results.reading.benchmark_name's rule
                benchmark = run.sweep.name[len(prefix):] if run.sweep.name.startswith(prefix) and \
                    len(run.sweep.name) > len(prefix) else run.data.name
                pair_of[sweep] = (benchmark, run.sweep.label)
        return {pair_of[sweep] for sweep in study.sweeps}

    everything = pairs(load_study("all"))
    papers = OmegaConf.load(CONF_DIR / "study" / "all.yaml").include
    assert len(papers) == 5
    for paper in papers:
        study = load_study(paper)
        own = pairs(study)
        for spec in study.compares:
            members = {member for benchmark in spec.benchmarks for member in pool_members(benchmark)}

            def chosen(found, members=members, spec=spec):
                return {(b, m) for b, m in found if b in members and (not spec.methods or m in spec.methods)}

            assert chosen(own), (paper, spec.out)
            assert chosen(everything) == chosen(own), (paper, spec.out, sorted(chosen(everything) - chosen(own)))
            if spec.methods:  # no stale name: every row it lists is a sweep of its study
                assert {label for _, label in chosen(own)} == set(spec.methods), (paper, spec.out)
