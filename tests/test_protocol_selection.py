"""The grid-point choices benchmarks/paper_protocol.py prints beside its tables, on hand-made
trials.csv rows: one point for all draws, and the best point per draw (an oracle)."""

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "paper_protocol.py"


@pytest.fixture(scope="module")
def protocol():
    spec = importlib.util.spec_from_file_location("paper_protocol", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def rows():
    """Two sizes x two seeds x two grid points; the better point changes with the draw."""
    accuracy = {("40", "0"): (0.6, 0.8), ("40", "1"): (1.0, 0.7), ("80", "0"): (0.5, 0.5), ("80", "1"): (0.7, 1.0)}
    return [{"problem": "p", "method": "M", "total": total, "seed": seed, "point": point, "error": "",
             "acc/t1": str(acc), "acc/t2": str(acc), "acc/mean": str(acc)}
            for (total, seed), pair in accuracy.items()
            for point, acc in zip(("lambda_inter=0.0", "lambda_inter=1.0"), pair)]


def test_the_best_point_per_draw_takes_each_draws_maximum(protocol):
    assert protocol.per_draw_best(rows()) == pytest.approx(100 * (0.8 + 1.0 + 0.5 + 1.0) / 4)


def test_the_selection_table_prints_the_oracle_beside_the_other_choices(protocol):
    line = protocol.selection_table(rows(), ["p"], ["M"]).splitlines()[-1]
    # one point: lambda 1.0 (0.75 against 0.7); per size: 0.8 at 40 (lambda 0.0), 0.75 at 80
    # (lambda 1.0); per column: each task the same as the mean; per draw: 0.8, 1.0, 0.5, 1.0
    assert line == "| p | M | 75.0 | 77.5 | 75.0 | 82.5 |"
