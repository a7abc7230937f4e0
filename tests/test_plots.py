import numpy as np
from PIL import Image

from mtc.plots import block_heatmap


def test_reused_heatmap_frame_shows_exactly_the_current_matrices(tmp_path):
    rng = np.random.default_rng(0)
    names, tasks = [["a", "b"], ["a", "b", "c"]], ["task1", "task2"]

    def blocks():
        return {(0, 1): rng.dirichlet(np.ones(3), 2), (1, 0): rng.dirichlet(np.ones(2), 3)}

    first, second = blocks(), blocks()
    pictures = []
    for i, matrices in enumerate((first, second, first)):
        block_heatmap(matrices, names, tasks, str(tmp_path / f"{i}.png"), "G")
        pictures.append(np.asarray(Image.open(tmp_path / f"{i}.png")))
    assert pictures[0].shape == pictures[1].shape and pictures[0].shape[2] == 4
    assert not np.array_equal(pictures[0], pictures[1])  # the new matrices are drawn
    np.testing.assert_array_equal(pictures[0], pictures[2])  # and nothing of the previous draw is left
    blank = pictures[0][..., :3].min(axis=2) == 255
    assert blank.mean() > 0.3  # the diagonal blocks (not given) and the margins stay white
