"""The comparison's signed-rank test: scipy's statistic and p-value, the same floats, on every
route scipy takes (exact, permutation with zeros or ties, normal approximation)."""

import warnings

import numpy as np
import pytest
from scipy import stats

from mtc.results.significance import PERMUTATION_MAX, positive_rank_sum, signed_rank_test


def paired_draws(n_pairs: int, kind: str, rng):
    if kind == "distinct":
        return rng.random(n_pairs), rng.random(n_pairs)
    if kind == "ties":
        return rng.integers(0, 3, n_pairs) / 7, rng.integers(0, 3, n_pairs) / 7
    first = rng.random(n_pairs)  # "zeros": half the pairs equal, the rest tied steps
    second = first.copy()
    second[: n_pairs // 2] += rng.integers(-2, 3, n_pairs // 2) * 0.01
    return first, second


@pytest.mark.parametrize("n_pairs", [2, 3, 5, 8, PERMUTATION_MAX, PERMUTATION_MAX + 1, 20])
@pytest.mark.parametrize("kind", ["distinct", "ties", "zeros"])
def test_signed_rank_test_equals_scipys_wilcoxon_to_the_last_bit(n_pairs, kind):
    rng = np.random.default_rng(n_pairs)
    for _ in range(1 if n_pairs == PERMUTATION_MAX else 12):  # scipy: 2 s a test at 13
        first, second = paired_draws(n_pairs, kind, rng)
        if not np.any(first - second):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy's small-sample warnings: the same call on both routes
            expected = stats.wilcoxon(first, second)
            found = signed_rank_test(first, second)
        assert found == (float(expected.statistic), float(expected.pvalue))


def test_positive_rank_sum_by_hand():
    # |d| = 1, 3, 2, 2 (zero dropped): ranks 1, 4, 2.5, 2.5; positive: 3 and one 2 -> 4 + 2.5
    assert positive_rank_sum(np.array([-1.0, 3.0, 2.0, -2.0, 0.0])) == 6.5
    both = positive_rank_sum(np.array([[-1.0, 3.0, 2.0, -2.0, 0.0], [1.0, 3.0, 2.0, 2.0, 0.0]]))
    assert both.tolist() == [6.5, 10.0]
