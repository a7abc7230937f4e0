"""The worked example of docs/tutorials/own_data.md, run as the page shows it: scikit-learn's
wine data written as two CSV tasks by examples/own_data/make_tasks.py, then examples/own_data/run.sh
(one fit, a sweep, one fit from a single file split by its task column) in an empty folder."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow  # drivers, Ray or servers: run first (tests/conftest.py)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "own_data"


def test_the_own_data_example_runs_end_to_end(tmp_path):
    shutil.copy(EXAMPLE / "make_tasks.py", tmp_path)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # `python`
    done = subprocess.run(["bash", str(EXAMPLE / "run.sh")], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    sizes = [len(pd.read_csv(tmp_path / f"wine_{task}.csv")) for task in "ab"]
    assert sum(sizes) == 178 and min(sizes) > 60
    fits = re.findall(r"^\s+(wine_a|wine_b|a|b|mean): acc=([\d.]+)", done.stdout, re.M)
    tasks = [task for task, _ in fits]
    assert tasks[:3] == ["wine_a", "wine_b", "mean"] and sorted(tasks[3:5]) == ["a", "b"] and tasks[5] == "mean"
    assert all(0.5 < float(acc) <= 1.0 for _, acc in fits)  # k-means on the raw features: well above chance (1/3)
    report = (tmp_path / "outputs" / "kkm-wine" / "report.md").read_text()
    assert "# kkm on wine" in report and "| wine_a |" in report and "| wine_b |" in report
    grid = pd.read_csv(tmp_path / "outputs" / "kkm-wine" / "grid.csv")
    assert (grid.n_runs == 3).all() and grid["acc/mean mean"].between(0.3, 1.0).all()
