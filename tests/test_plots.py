import numpy as np
from PIL import Image

from mtc.numerics.cache import Cache
from mtc.results.plots import block_heatmap, heatmap_layout
from mtc.trial import NamedMatrix


def named(blocks):
    names = {0: ["a", "b"], 1: ["a", "b", "c"]}
    groups = {0: "task1", 1: "task2"}
    return NamedMatrix(blocks, names, names, groups, groups, "G")


def test_reused_heatmap_frame_shows_exactly_the_current_matrices(tmp_path):
    rng = np.random.default_rng(0)

    def blocks():
        return {(0, 1): rng.dirichlet(np.ones(3), 2), (1, 0): rng.dirichlet(np.ones(2), 3)}

    first, second = blocks(), blocks()
    pictures, frames = [], Cache(size=4)
    for i, matrices in enumerate((first, second, first)):
        block_heatmap(named(matrices), str(tmp_path / f"{i}.png"), frames)
        pictures.append(np.asarray(Image.open(tmp_path / f"{i}.png")))
    assert len(frames.results["heatmap"]) == 1  # one layout, one frame drawn
    block_heatmap(named(second), str(tmp_path / "fresh.png"))  # no cache: a frame of its own
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "fresh.png")), pictures[1])
    assert pictures[0].shape == pictures[1].shape and pictures[0].shape[2] == 4
    assert not np.array_equal(pictures[0], pictures[1])  # the new matrices are drawn
    np.testing.assert_array_equal(pictures[0], pictures[2])  # and nothing of the previous draw is left
    blank = pictures[0][..., :3].min(axis=2) == 255
    assert blank.mean() > 0.3  # the diagonal blocks (not given) and the margins stay white
    assert pictures[0].shape[1] >= 1000
    assert "blank blocks" in heatmap_layout(named(first))[1][4]  # the title says why blocks are blank


def test_layout_places_every_block_and_names_its_entries():
    matrix = named({(0, 1): np.arange(6.0).reshape(2, 3), (1, 0): np.ones((3, 2))})
    full, (row_ticks, col_ticks, row_offsets, col_offsets, title, vmin, vmax) = heatmap_layout(matrix)
    assert full.shape == (5, 5) and row_offsets == (0, 2, 5) and col_offsets == (0, 2, 5)
    np.testing.assert_array_equal(full[:2, 2:], np.arange(6.0).reshape(2, 3))
    assert np.isnan(full[:2, :2]).all() and np.isnan(full[2:, 2:]).all()
    assert row_ticks == ("task1:a", "task1:b", "task2:a", "task2:b", "task2:c") == col_ticks
    assert (vmin, vmax) == (0.0, 5.0)


def test_figures_are_at_least_1000_px_wide_and_identical_seeds_are_said_to_overlap(tmp_path):
    import matplotlib.image

    from mtc.results.plots import convergence_plot, same_traces

    traces = {"seed 0": np.array([4.0, 2.0, 1.0]), "seed 1": np.array([4.0, 2.0, 1.0]), "seed 2": np.array([5.0, 1.0])}
    assert same_traces(traces) == [["seed 0", "seed 1"], ["seed 2"]]
    convergence_plot(traces, str(tmp_path / "c.png"), "demo")
    assert matplotlib.image.imread(tmp_path / "c.png").shape[1] >= 1000


def test_traces_that_coincide_on_the_plot_are_one_curve_and_the_title_says_so():
    """Ten seeds whose traces differ far below what the axis can show: one visible curve, and the
    title says so rather than "10 distinct traces"."""
    from mtc.results.plots import convergence_figure, overlapping_traces, same_traces

    base = np.geomspace(1e3, 1.0, 40)  # drawn in log scale: a span of 3 decades
    traces = {f"seed {i}": base * (1 + 1e-7 * i) for i in range(10)}
    assert len(same_traces(traces)) == 10 and overlapping_traces(traces) == [list(traces)]
    figure = convergence_figure(traces, "m on d")
    (ax,) = figure.axes
    assert ax.get_title() == ("m on d\n10 runs, 1 visibly distinct curve; seeds 0-9 overlap "
                              "(10 exactly distinct traces)")
    assert len(ax.lines) == 1 and ax.get_legend().get_texts()[0].get_text() == "seeds 0-9 (10 runs, overlapping)"

    traces.update({"seed 4": base * 1.02, "seed 7": base[:30]})  # 0.0086 decades apart; a shorter run
    groups = overlapping_traces(traces)
    assert groups == [["seed 0", "seed 1", "seed 2", "seed 3", "seed 5", "seed 6", "seed 8", "seed 9"],
                      ["seed 4"], ["seed 7"]]
    title = convergence_figure(traces, "m on d").axes[0].get_title()
    assert title.endswith("10 runs, 3 visibly distinct curves; seeds 0-3, 5-6, 8-9 overlap "
                          "(10 exactly distinct traces)")


def test_coinciding_on_the_plot_is_judged_in_the_plotted_scale():
    """The tolerance is VISIBLE_FRACTION of the plotted span: linear when a value is not positive,
    log10 otherwise; exactly identical traces need no note on exactness."""
    from mtc.results.plots import VISIBLE_FRACTION, convergence_figure, overlapping_traces

    linear = {"a": np.array([0.0, 10.0, 5.0]), "b": np.array([0.0, 10.0, 5.0 + 0.9 * VISIBLE_FRACTION * 10]),
              "c": np.array([0.0, 10.0, 5.0 + 1.1 * VISIBLE_FRACTION * 10])}
    assert overlapping_traces(linear) == [["a", "b"], ["c"]]
    assert overlapping_traces({"a": np.array([1.0, np.nan]), "b": np.array([1.0, 2.0])}) == [["a"], ["b"]]
    same = {"seed 0": np.array([3.0, 2.0, 1.0]), "seed 1": np.array([3.0, 2.0, 1.0])}
    assert convergence_figure(same, "t").axes[0].get_title() == "t\n2 runs, 1 visibly distinct curve; seeds 0-1 overlap"
    assert convergence_figure({"seed 3": np.array([2.0, 1.0])}, "t").axes[0].get_title() == "t"  # one run: no count
