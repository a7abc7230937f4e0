"""Every data composition: tasks x classes counts and feature dimension (the slow tests read
../shared/data); the config layout (paths set once, shared text settings in one file, experiments).

Counts are checked exactly against what the loaders build, and against the papers' tables:
exact where the paper's rule is known (Reuters, WebKB course/faculty/project, Handdigits,
the SPMTC .mat problems), within 2 documents per class where the papers dropped a few
documents by an unstated rule (20NG, WebKB student).
"""

import numpy as np
import pytest
import scipy.sparse as sp
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from mtc.cli import CONF_DIR, available, compose_config
from mtc.config import data_spec, method_spec, settings
from mtc.data.compositions import BUILDERS

BUILT = {
    '20ng': (3000, [[389, 395, 396], [391, 398, 393, 376], [392, 397, 392], [383, 399, 392, 251]]),
    'comp_vs_sci': (2000, [[967, 908], [871, 956]]),
    'comp_vs_sci_counts': (2000, [[967, 908], [871, 956]]),
    'handdigits': (256, [[509, 554, 488, 514, 476, 475, 473, 489, 520, 502], [813, 685, 497, 449, 449, 378, 465, 436, 373, 455]]),
    'ng1': (40674, [[523, 484, 464], [463, 482, 524]]),
    'ng2': (40406, [[398, 398, 400, 399], [796, 799]]),
    'ng3': (85832, [[399, 398, 398, 400, 397, 399, 399, 400, 400, 400], [400, 397, 399, 399, 400, 400, 400, 400, 400, 400, 399, 400], [397, 399, 399, 400, 400, 400, 400, 400, 400, 399, 400, 400, 400, 400, 399, 400]]),
    'orgs_vs_people': (4771, [[649, 588], [621, 587]]),
    'orgs_vs_people_counts': (4771, [[649, 588], [621, 587]]),
    'orgs_vs_places': (4415, [[588, 428], [587, 456]]),
    'orgs_vs_places_counts': (4415, [[588, 428], [587, 456]]),
    'people_vs_places': (4562, [[649, 428], [621, 456]]),
    'people_vs_places_counts': (4562, [[649, 428], [621, 456]]),
    'rec_vs_talk': (2000, [[975, 869], [860, 685]]),
    'rec_vs_talk_counts': (2000, [[975, 869], [860, 685]]),
    'reuters': (6439, [[63, 90, 53], [60, 33, 37], [36, 44, 110]]),
    'smtnmf_20ng_rec_comp': (2010, [[20, 19], [20, 20], [20, 20], [20, 20]]),
    'smtnmf_20ng_rec_sci': (2430, [[20, 20], [20, 20], [20, 20], [20, 20]]),
    'smtnmf_20ng_rec_talk': (2746, [[20, 20], [20, 20], [20, 20], [20, 20]]),
    'smtnmf_20ng_sci_comp': (2090, [[20, 19], [20, 20], [20, 20], [20, 20]]),
    'smtnmf_20ng_talk_comp': (2785, [[20, 19], [20, 20], [20, 20], [20, 20]]),
    'smtnmf_20ng_talk_sci': (3130, [[20, 20], [20, 20], [20, 20], [20, 20]]),
    'smtnmf_reuters_orgs_vs_people': (2734, [[40, 40], [40, 40]]),
    'smtnmf_reuters_orgs_vs_places': (2624, [[40, 40], [40, 40]]),
    'smtnmf_reuters_people_vs_places': (2634, [[40, 40], [40, 40]]),
    'synthetic': (40, [[50, 50, 50, 50], [50, 50, 50, 50], [50, 50, 50, 50]]),
    'webkb4': (2500, [[44, 34, 20, 128], [38, 46, 20, 148], [77, 31, 21, 126], [85, 42, 25, 156]]),
    'webkb4_counts': (2500, [[44, 34, 20, 128], [38, 46, 20, 148], [77, 31, 21, 126], [85, 42, 25, 156]]),
    'webkb6': (2500, [[44, 1, 34, 20, 21, 128], [38, 1, 46, 20, 3, 148], [77, 1, 31, 21, 10, 126], [85, 1, 42, 25, 12, 156]]),
    'webkb_pp': (937, [[40, 40], [40, 40], [40, 40], [40, 40]]),
}

# Paper tables (MTCMRL Table 1; MTCFIR Table 1; SPMTC Table 1 task sizes)
PAPER = {
    "reuters": [[63, 90, 53], [60, 33, 37], [36, 44, 110]],
    "webkb4": [[44, 34, 20, 127], [38, 46, 20, 146], [77, 31, 21, 126], [85, 42, 25, 154]],
    "20ng": [[387, 395, 395], [391, 397, 393, 376], [392, 396, 392], [383, 399, 392, 250]],
    "handdigits": [[509, 554, 488, 514, 476, 475, 473, 489, 520, 502], [813, 685, 497, 449, 449, 378, 465, 436, 373, 455]],
}
PAPER_TASK_SIZES = {"comp_vs_sci": [1875, 1827], "rec_vs_talk": [1844, 1545], "orgs_vs_people": [1237, 1208],
                    "orgs_vs_places": [1016, 1043], "people_vs_places": [1077, 1077]}
PAPER_DIMENSIONS = {"reuters": 6439, "webkb4": 2500, "20ng": 3000, "handdigits": 256, "comp_vs_sci": 2000,
                    "rec_vs_talk": 2000, "orgs_vs_people": 4771, "orgs_vs_places": 4415, "people_vs_places": 4562}


def load(name):
    return data_spec(compose_config([f"data={name}"]).data).load(seed=0)  # seed 0: the draw of configs that draw per seed


def test_every_data_config_is_checked():
    assert sorted([*BUILT, "files"]) == available("data")  # files: the user's own, tests/test_data_files.py


@pytest.mark.slow  # reads the corpus
@pytest.mark.parametrize("name", sorted(BUILT))
def test_counts_and_dimension(name):
    dataset = load(name)
    n_features, counts = BUILT[name]
    assert dataset.n_features == n_features
    assert [list(t.class_counts().values()) for t in dataset.tasks] == counts
    for task in dataset.tasks:
        assert task.X.shape == (sum(task.class_counts().values()), n_features)
        values = task.X.data if sp.issparse(task.X) else task.X
        assert np.isfinite(values).all()
    if name in PAPER_DIMENSIONS:
        assert n_features == PAPER_DIMENSIONS[name]
    if name in PAPER_TASK_SIZES:
        assert [t.n_samples for t in dataset.tasks] == PAPER_TASK_SIZES[name]
    if name in PAPER:
        diff = np.abs(np.concatenate([np.subtract(a, b) for a, b in zip(counts, PAPER[name])]))
        assert diff.max() <= (0 if name in ("reuters", "handdigits") else 2)


@pytest.mark.slow  # reads the corpus
def test_text_rows_are_unit_length():
    dataset = load("reuters")
    for task in dataset.tasks:
        norms = np.sqrt(np.asarray(task.X.multiply(task.X).sum(axis=1))).ravel()
        np.testing.assert_allclose(norms, 1.0)


IDEAL_RELATEDNESS = {  # MTCFIR Tables 6 and 7, printed to two decimals
    "20ng": [[1, 0.76, 1, 0.82], [0.76, 1, 0.76, 1], [1, 0.76, 1, 0.82], [0.82, 1, 0.82, 1]],
    "reuters": [[1, 0.55, 1], [0.55, 1, 0.31], [1, 0.31, 1]],
    "webkb4": np.ones((4, 4)),  # the same classes in every task
}


@pytest.mark.slow  # reads the corpus
@pytest.mark.parametrize("name", sorted(IDEAL_RELATEDNESS))
def test_ideal_task_relatedness_equals_the_papers_tables(name):
    np.testing.assert_allclose(load(name).ideal_task_relatedness(), IDEAL_RELATEDNESS[name], atol=0.005)


@pytest.mark.slow  # reads the corpus
def test_categories_naming_an_unknown_class_are_rejected():
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["data=reuters", "+data.categories.goldd=metal"])
    with pytest.raises(ValueError, match=r"categories name unknown classes \['goldd'\]"):
        data_spec(cfg.data).load()


@pytest.mark.slow  # reads the corpus
def test_mnist_crop_makes_digits_fill_the_frame_like_usps():
    def border_ink(crop):
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="config", overrides=["data=handdigits", f"data.params.mnist_crop={crop}"])
        images = [task.X.reshape(-1, 16, 16) for task in data_spec(cfg.data).load().tasks]
        ring = np.ones((16, 16), bool)
        ring[2:-2, 2:-2] = False  # the outer two pixels of the 16 x 16 frame
        return [float(x[:, ring].mean()) for x in images]

    mnist_uncropped, usps = border_ink(28)
    mnist_cropped, _ = border_ink(20)
    assert mnist_uncropped < 0.01 < mnist_cropped  # without the crop MNIST's frame is nearly empty
    assert mnist_cropped > usps / 4


@pytest.mark.slow  # reads the corpus
def test_bad_mnist_crop_is_rejected():
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["data=handdigits", "data.params.mnist_crop=30"])
    with pytest.raises(ValueError, match=r"mnist_crop must be in \[16, 28\], got 30"):
        data_spec(cfg.data).load()


def composed(*overrides):
    return compose_config(list(overrides))  # HydraConfig set, as under hydra.main


@pytest.mark.parametrize("name", sorted(BUILT))
def test_paths_are_set_once_in_config_yaml_not_per_data_config(name):
    raw = (CONF_DIR / "data" / f"{name}.yaml").read_text()
    assert not [line for line in raw.splitlines() if line.lstrip().startswith(("root:", "cache_dir:"))]
    cfg = composed(f"data={name}")
    assert cfg.data.root is None and cfg.data.cache_dir is None  # conf/config.yaml
    cfg = composed(f"data={name}", "data.root=/x", "data.cache_dir=/y")
    assert (cfg.data.root, cfg.data.cache_dir) == ("/x", "/y")


TEXT_DEFAULT = CONF_DIR / "text" / "default.yaml"


def test_shared_text_settings_live_in_one_file():
    shared = OmegaConf.to_container(OmegaConf.load(TEXT_DEFAULT))
    assert set(shared) == {"n_features", "lowercase", "stop_words", "min_df", "tfidf", "sublinear_tf", "l2_normalize",
                           "stemmer"}
    holders = sorted(p.relative_to(CONF_DIR).as_posix() for p in CONF_DIR.rglob("*.yaml")
                     if any(f"{key}:" in p.read_text() for key in ("lowercase", "stop_words", "sublinear_tf")))
    assert holders == ["text/default.yaml"]
    assert available("text") == ["default"]


@pytest.mark.parametrize("name", sorted(BUILT))
def test_text_data_configs_inherit_the_shared_text_settings(name):
    shared = OmegaConf.to_container(OmegaConf.load(TEXT_DEFAULT))
    raw = OmegaConf.load(CONF_DIR / "data" / f"{name}.yaml")
    cfg = composed(f"data={name}")
    builder = BUILDERS.get(cfg.data.get("builder") or name)  # synthetic has no builder
    if not (builder and builder.text):
        assert "text" not in cfg.data.get("params", {}) and "defaults" not in raw
        return
    assert OmegaConf.to_container(raw)["defaults"] == [{"/text@params.text": "default"}, "_self_"]
    own = OmegaConf.to_container(raw.params.get("text") or OmegaConf.create({}))
    assert all(value != shared[key] for key, value in own.items())  # only what differs is written
    assert OmegaConf.to_container(cfg.data.params.text) == {**shared, **own}
    cfg = composed(f"data={name}", "data.params.text.n_features=123")
    assert cfg.data.params.text.n_features == 123 and cfg.data.params.text.stop_words == "english"


EXPERIMENTS = {  # name: (method, data, grid, repeats, other settings)
    "baselines_synthetic": (None, "synthetic", None, 5, {}),
    "reuters5000": (None, "reuters", None, 10, {"data.params.text.n_features": 5000}),
    "mtcmrl_printed": ("mtcmrl", None, None, 10, {"method.params.w_update": "paper",
                                                  "method.params.y_update": "paper"}),
    "mtcfir_handdigits": ("mtcfir", "handdigits",
                          {"neighbour_ratio": [0.1, 0.3, 0.5], "corruption": [0.5, 0.6, 0.7]}, 3, {}),
    "mtcfir_nr_handdigits": ("mtcfir_nr", "handdigits",
                             {"neighbour_ratio": [0.1, 0.3, 0.5], "corruption": [0.5, 0.6, 0.7]}, 3, {}),
    "mtcfir_nf_handdigits": ("mtcfir_nf", "handdigits", {"neighbour_ratio": [0.1, 0.3, 0.5]}, 3, {}),
    "mtcfir_ni_handdigits": ("mtcfir_ni", "handdigits", {"corruption": [0.5, 0.6, 0.7]}, 3, {}),
    "mtcfir_keep_probability": ("mtcfir", None, {"neighbour_ratio": [0.1, 0.3, 0.5, 0.7, 0.9],
                                                 "corruption": [0.5, 0.4, 0.3, 0.2, 0.1]}, 10, {}),
    "smbc_sequential": ("smbc", None, None, 10, {"method.params.smart": True,
                                                 "method.params.candidates": "sequential"}),
    "aaai13_smbc": ("smbc", None, {"lambda_": [0.5]}, 10, {}),
    "aaai13_smkc": ("smkc", None, {"lambda_": [0.5], "kernel_width": [0.1, 1.0, 10.0, 100.0]}, 10,
                    {"method.params.width_mode": "absolute"}),
    "aaai13_kkm": ("kkm", None, {"kernel_width": [0.1, 1.0, 10.0, 100.0]}, 10, {"method.params.width_mode": "absolute"}),
    "kmeans_counts": ("kmeans", "reuters", None, 10, {"data.params.text.tfidf": False,
                                                  "data.params.text.l2_normalize": False}),
    "kmeans_tfidf_unnormalised": ("kmeans", "reuters", None, 10, {"data.params.text.tfidf": True,
                                                              "data.params.text.l2_normalize": False}),
    "kmeans_one_start": ("kmeans", None, None, 10, {"method.params.n_init": 1}),
    "kmeans_random_start": ("kmeans", None, None, 10, {"method.params.n_init": 1, "method.params.init": "random"}),
    "spmtc_paper": (None, None, None, 20, {}),
    "spmtc_switches": ("spmtc_h", None, {"n_components": [2, 8], "lambda_": [0.15]}, 20, {}),
    "smtnmf_paper": ("smtnmf", "smtnmf_reuters_orgs_vs_people", None, 30,
                     {"sweep.name": "smtnmf-smtnmf_reuters_orgs_vs_people-n80", "data.draw": "per_seed"}),
}


def test_every_experiment_is_checked():
    assert sorted(EXPERIMENTS) == available("experiment")


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_experiment_composes_to_its_protocol(name):
    method, data, grid, repeats, settings = EXPERIMENTS[name]
    cfg = composed(f"+experiment={name}")
    OmegaConf.to_container(cfg, resolve=True)  # every interpolation resolves
    spec = method_spec(cfg)  # known method, known params and grid keys
    data_spec(cfg.data)
    if method:
        assert spec.name == method
    if data:
        assert cfg.data.name == data
    if grid:
        assert spec.grid == grid
    assert cfg.sweep.repeats == repeats
    for key, value in settings.items():
        assert OmegaConf.select(cfg, key) == value


def test_experiments_leave_open_what_they_do_not_fix():
    cfg = composed("+experiment=mtcmrl_printed", "data=webkb4")
    run = settings(cfg)  # the experiment names its variant; the sweep is named after it
    assert (run.method.name, run.data.name, run.sweep.label, run.sweep.name) == (
        "mtcmrl", "webkb4", "mtcmrl_printed", "mtcmrl_printed-webkb4")
    run = settings(composed("+experiment=mtcfir_keep_probability", "method=mtcfir_nr", "data=handdigits"))
    assert (run.method.name, run.sweep.label, run.sweep.name) == ("mtcfir_nr", "mtcfir_nr_keep", "mtcfir_nr_keep-handdigits")
    assert run.method.grid["corruption"] == [0.5, 0.4, 0.3, 0.2, 0.1]  # 1 - p for Sec. 4.3's p
    cfg = composed("+experiment=reuters5000", "method=mtcfir_ni")
    assert (method_spec(cfg).name, cfg.data.name, cfg.data.params.text.n_features) == ("mtcfir_ni", "reuters", 5000)
    cfg = composed("+experiment=smtnmf_paper", "method=kmeans", "data=webkb_pp", "data.params.samples_per_task=20")
    assert (method_spec(cfg).name, cfg.sweep.name, cfg.sweep.repeats) == ("kmeans", "kmeans-webkb_pp-n20", 30)
    cfg = composed("+experiment=spmtc_switches", "method=lssmtc", "data=orgs_vs_places_counts",
                   "method.grid.n_components=[8]", "sweep.label=lssmtc", "sweep.name=lssmtc-orgs_vs_places_counts_l8")
    assert (method_spec(cfg).name, method_spec(cfg).grid) == ("lssmtc", {"n_components": [8], "lambda_": [0.15]})
    assert settings(cfg).sweep.name == "lssmtc-orgs_vs_places_counts_l8"
    cfg = composed("+experiment=mtcfir_handdigits", "sweep.repeats=10")  # the command line comes last
    assert cfg.sweep.repeats == 10
