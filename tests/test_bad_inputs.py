"""Every bad input the tests try, each with its one-line message.

Command-line cases run the real command: exit 2, exactly one line on stderr, and nothing
created (no MLflow store, no output folder, no run). Library cases call a solver and expect
the error type and message. docs/bad_inputs.md is this table: ``python
tests/test_bad_inputs.py`` rewrites it from what the commands print now, and a test checks
that the page lists every case with its message.
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

from mtc.errors import InputError
from mtc.methods import KernelKMeans, SymmetricNMF
from mtc.methods.smtnmf import SMTNMF

DOC = Path(__file__).parents[1] / "docs" / "bad_inputs.md"
TMP = "{tmp}"  # replaced by the test's folder; shown as <tmp> in the page

# (arguments of `python -m mtc.sweep` (or of mtc.run when the first is "mtc.run"), start of the one line)
CLI_CASES = [
    # config groups and method parameters
    (["method=nope"], "error: unknown method 'nope'; available: a_asi, a_kmeans, a_ncut"),
    (["data=nope"], "error: unknown data 'nope'; available: "),
    (["method=kmeans", "+method.grid.alpha=[1,2]"], "error: method 'kmeans': unknown grid key 'alpha'"),
    (["method=kmeans", "++method.params.n_clusters=3"], "error: method 'kmeans': unknown parameter 'n_clusters'"),
    (["method=mtcmrl", "method.grid.lambda_=[-1.0]"],
     "error: method 'mtcmrl', grid point alpha=0.25,lambda_=-1.0: The 'lambda_' parameter of MTCMRL must be a float "
     "in the range (0.0, inf). Got -1.0 instead."),
    (["method=mtcfir", "method.grid.corruption=[1.0]"],
     "error: method 'mtcfir', grid point corruption=1.0,neighbour_ratio=0.1: The 'corruption' parameter of MTCFIR"),
    (["method=mtcfir", "method.grid.neighbour_ratio=[1.5]"], "error: method 'mtcfir', grid point corruption=0.5,neighbour_ratio=1.5: "
                                                             "The 'neighbour_ratio' parameter of MTCFIR"),
    (["method=kkm", "++method.grid.max_iter=[abc]"], "error: method 'kkm', grid point"),
    (["method=kmeans", "++method.grid.n_init=[]"], "error: method 'kmeans': grid values for 'n_init' must be a "
                                                   "non-empty list, got []"),
    (["method=kmeans", "++method.grid.n_init=3"], "error: method 'kmeans': grid values for 'n_init' must be a "
                                                  "non-empty list, got 3"),
    (["method=kmeans", "++method.params.n_init=2.5"], "error: method 'kmeans', parameters: The 'n_init' parameter "
                                                      "of KMeansClusterer must be an int"),
    (["method=mtcmrl", "++method.params.tol=-1"], "error: method 'mtcmrl', parameters: The 'tol' parameter of MTCMRL"),
    (["method=snmf", "++method.params.update=fast"], "error: method 'snmf', parameters: The 'update' parameter of "
                                                     "SymmetricNMF must be a str among"),
    # sweep settings
    (["sweep.repeats=0"], "error: sweep.repeats must be a positive integer, got 0"),
    (["sweep.repeats=1.5"], "error: sweep.repeats must be a positive integer, got 1.5"),
    (["sweep.repeats=abc"], "error: sweep.repeats must be a positive integer, got 'abc'"),
    (["sweep.cpus_per_trial=0"], "error: sweep.cpus_per_trial must be a positive integer, got 0"),
    (["sweep.max_concurrent_trials=-1"], "error: sweep.max_concurrent_trials must be a positive integer or null, "
                                         "got -1"),
    (["sweep.seeds_per_trial=0"], "error: sweep.seeds_per_trial (or 'auto') must be a positive integer, got 0"),
    (["sweep.max_failures=-1"], "error: sweep.max_failures must be a non-negative integer, got -1"),
    (["sweep.verbose=loud"], "error: sweep.verbose must be a non-negative integer, got 'loud'"),
    (["mtc.run", "seed=abc"], "error: seed must be a non-negative integer, got 'abc'"),
    (["mtc.run", "seed=-1"], "error: seed must be a non-negative integer, got -1"),
    # data
    (["mtc.run", "data.params.n_shared=9"], "error: n_shared must be in [0, n_clusters=4], got 9"),
    (["+data.params.bogus=1"], "error: dataset 'synthetic' (builder 'synthetic'): unknown data.params 'bogus'; "
                               "it takes: n_clusters, n_features,"),
    (["data.params.samples_per_cluster=abc"], "error: dataset 'synthetic': data.params.samples_per_cluster must be "
                                              "an integer, got 'abc'"),
    (["data.params.separation=far"], "error: dataset 'synthetic': data.params.separation must be a number, got 'far'"),
    (["data=comp_vs_sci", "data.params.samples_per_task=1.5"], "error: dataset 'comp_vs_sci': "
                                                                "data.params.samples_per_task must be an integer or "
                                                                "null, got 1.5"),
    (["data=webkb4", "data.params.universities=cornell"], "error: dataset 'webkb4': data.params.universities must "
                                                           "be a list, got 'cornell'"),
    (["data=reuters", "~data.params.tasks"], "error: dataset 'reuters' (builder 'reuters'): missing data.params "
                                             "'tasks'"),
    (["+data.draw=sometimes"], "error: dataset 'synthetic': draw must be one of once, per_seed, got 'sometimes'"),
    (["data=reuters", "+data.draw=per_seed"], "error: dataset 'reuters': draw=per_seed needs a builder that samples "
                                              "with a seed; 'reuters' takes none"),
    (["data=reuters", f"data.root={TMP}/no-corpora"], "error: missing raw file "),
    # the user's own files (data=files): every file checked before anything starts
    (["data=files", f"data.params.paths=[{TMP}/t1.csv]", "data.params.label_column=label"],
     "error: data=files: name your data with data.name=<name>; it names the sweep, its output folder and its "
     "benchmark in mtc.results.compare"),
    (["data=files", "data.name=mine", f"data.params.paths=[{TMP}/gone.csv]", "data.params.label_column=label"],
     f"error: {TMP}/gone.csv: missing file"),
    (["data=files", "data.name=mine", f"data.params.paths=[{TMP}/t1.csv,{TMP}/t2.csv]",
      "data.params.label_column=label"],
     f"error: {TMP}/t2.csv: feature columns differ from t1.csv's: missing 'b'"),
    (["data=files", "data.name=mine", f"data.params.paths=[{TMP}/t1.csv]", "data.params.label_column=class"],
     f"error: {TMP}/t1.csv: label column 'class' not found; columns: 'a', 'b', 'label'"),
    (["data=files", "data.name=mine", f"data.params.paths=[{TMP}/t1.csv,{TMP}/t.xyz]", "data.params.label_column=label"],
     f"error: {TMP}/t.xyz: unknown format '.xyz'; known: .csv, .libsvm, .mat, .npy, .npz, .parquet, .svm, "
     ".svmlight, .tsv (CSV, TSV and svmlight also .gz or .bz2), or a folder of text documents"),
    (["data=files", "data.name=mine", f"data.params.paths=[{TMP}/t1.csv,{TMP}/nan.csv]",
      "data.params.label_column=label"], f"error: {TMP}/nan.csv: NaN or infinite values in columns 'b'"),
    (["data=files", "data.name=mine", f"data.params.paths=[{TMP}/t1.csv,{TMP}/text.csv]",
      "data.params.label_column=label"], f"error: {TMP}/text.csv: non-numeric columns 'b'"),
    (["data=files", "data.name=mine", f"data.params.paths=[{TMP}/t1.csv,{TMP}/empty.csv]",
      "data.params.label_column=label"], f"error: {TMP}/empty.csv: no rows (empty task)"),
    (["data=files", "data.name=mine", f"data.params.paths=[{TMP}/one.csv]", "data.params.n_clusters=2"],
     f"error: {TMP}/one.csv: task 'one' has 1 samples, fewer than its 2 clusters"),
    # the tracking store, the output folder and the cluster: checked before anything is created
    (["mlflow.tracking_uri=bogus://x"], "error: mlflow.tracking_uri 'bogus://x': unsupported scheme 'bogus'"),
    (["mlflow.tracking_uri=http://127.0.0.1:1"], "error: the tracking server http://127.0.0.1:1 does not answer"),
    (["mtc.run", "mlflow.tracking_uri=http://127.0.0.1:1"], "error: the tracking server http://127.0.0.1:1 does not "
                                                            "answer"),
    (["mlflow.tracking_uri=postgresql://mtc@127.0.0.1:1/mlflow"], "error: cannot reach the tracking database "
                                                                  "postgresql://mtc@127.0.0.1:1/mlflow (connection to "
                                                                  "server at"),
    ([f"mlflow.tracking_uri=sqlite:///{TMP}/a-file/mlflow.db"], f"error: cannot open the SQLite tracking store "
                                                                f"{TMP}/a-file/mlflow.db"),
    ([f"mlflow.tracking_uri=sqlite:///{TMP}/not-a-database"], f"error: cannot open the SQLite tracking store "
                                                              f"{TMP}/not-a-database (file is not a database)"),
    ([f"output_dir={TMP}/a-file"], f"error: cannot write to the output folder {TMP}/a-file ("),
    ([f"mlflow.artifact_root={TMP}/a-file/artifacts"], f"error: cannot write to the artifact folder "
                                                        f"{TMP}/a-file/artifacts ("),
    (["ray.address=127.0.0.1:1"], "error: no Ray head listens at 127.0.0.1:1"),
    (["ray.address=somewhere"], "error: ray.address 'somewhere': expected local, auto or <host>:<port>"),
    (["ray.num_cpus=0"], "error: ray.num_cpus must be a positive integer or null, got 0"),
]


RNG = np.random.default_rng(0)
X = RNG.random((20, 5))

# (what is called, the call, the error type, start of its message)
LIBRARY_CASES = [
    ("SymmetricNMF(n_clusters=2.5).fit([X, X])", lambda: SymmetricNMF(n_clusters=2.5).fit([X, X]),
     InvalidParameterError, "The 'n_clusters' parameter of SymmetricNMF must be an int in the range [2, inf)"),
    ("SymmetricNMF(n_clusters=[2.5, 3]).fit([X, X])", lambda: SymmetricNMF(n_clusters=[2.5, 3]).fit([X, X]),
     InputError, "n_clusters must be an integer or a list of integers, one per task; got [2.5, 3]"),
    ("SymmetricNMF(n_clusters=[2, 2, 2]).fit([X, X])", lambda: SymmetricNMF(n_clusters=[2, 2, 2]).fit([X, X]),
     InputError, "n_clusters has 3 entries but there are 2 tasks"),
    ("SymmetricNMF(n_clusters=30).fit([X, X])", lambda: SymmetricNMF(n_clusters=30).fit([X, X]),
     InputError, "task 0: 20 samples is fewer than n_clusters=30"),
    ("SymmetricNMF(n_clusters=2).fit([X * 1e200, X])", lambda: SymmetricNMF(n_clusters=2).fit([X * 1e200, X]),
     InputError, "task 0: values up to"),
    ("SymmetricNMF(n_clusters=2).fit([X with a NaN, X])",
     lambda: SymmetricNMF(n_clusters=2).fit([np.where(np.eye(20, 5) > 0, np.nan, X), X]),
     InputError, "task 0: data contains NaN or infinite values"),
    ("SymmetricNMF(n_clusters=2).fit(X)", lambda: SymmetricNMF(n_clusters=2).fit(X),
     InputError, "tasks must be a list of 2-D matrices, one per task"),
    ("SymmetricNMF(n_clusters=2).fit([])", lambda: SymmetricNMF(n_clusters=2).fit([]),
     InputError, "tasks is empty: need at least one task matrix"),
    ("SymmetricNMF(n_clusters=2).fit([X, X[:, :3]])", lambda: SymmetricNMF(n_clusters=2).fit([X, X[:, :3]]),
     InputError, "ragged feature dimensions across tasks: [5, 3]"),
    ("SymmetricNMF(n_clusters=2).fit([X[0], X])", lambda: SymmetricNMF(n_clusters=2).fit([X[0], X]),
     InputError, "task 0: expected a 2-D matrix, got 1-D"),
    ("SMTNMF(n_clusters=2).fit([-X, X])", lambda: SMTNMF(n_clusters=2).fit([-X, X]),
     InputError, "task 0: this method needs non-negative data, found negative entries"),
    ("KernelKMeans(n_init=0)", lambda: KernelKMeans(n_clusters=2, n_init=0).fit([X, X]),
     InvalidParameterError, "The 'n_init' parameter of KernelKMeans must be an int in the range [1, inf)"),
]


def cli_command(args: list[str]) -> tuple[str, list[str]]:
    return ("mtc.run", args[1:]) if args[0] == "mtc.run" else ("mtc.sweep", args)


def run_case(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    (tmp / "a-file").write_text("a file where a folder is expected")
    (tmp / "not-a-database").write_text("this is not an SQLite database, it is long enough to have a header" * 4)
    (tmp / "t1.csv").write_text("a,b,label\n1,2,x\n3,4,y\n5,6,x\n")  # tasks of the user's own data
    (tmp / "t2.csv").write_text("a,label\n1,x\n2,y\n")  # column b missing
    (tmp / "t.xyz").write_text("x\n")  # a format the builder does not read
    (tmp / "nan.csv").write_text("a,b,label\n1,,x\n3,4,y\n")  # a missing value
    (tmp / "text.csv").write_text("a,b,label\n1,hi,x\n3,4,y\n")  # a word among the features
    (tmp / "empty.csv").write_text("a,b,label\n")  # a header, no rows
    (tmp / "one.csv").write_text("a,b\n1,2\n")  # one sample for two clusters
    module, args = cli_command([arg.replace(TMP, str(tmp)) for arg in args])
    defaults = [f"output_dir={tmp / 'out'}", f"mlflow.tracking_uri=sqlite:///{tmp / 'db'}", "sweep.repeats=1"]
    if module == "mtc.run":
        defaults.pop()
    env = {**os.environ, "MTC_DATA_DIR": os.environ.get("MTC_DATA_DIR", str(tmp))}
    return subprocess.run([sys.executable, "-m", module, *defaults, *args], cwd=tmp, capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.mark.parametrize("args, message", CLI_CASES, ids=[" ".join(args) for args, _ in CLI_CASES])
def test_bad_command_line_input_is_one_line_exit_2_and_creates_nothing(tmp_path, args, message):
    done = run_case(args, tmp_path)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith(message.replace(TMP, str(tmp_path))), done.stderr[-2000:]
    assert not (tmp_path / "db").exists()  # no MLflow store, so no run
    assert [p.name for p in (tmp_path / "out").glob("*")] in ([], ["hydra"])  # only Hydra's record of the command


def test_a_port_that_listens_but_is_not_a_ray_head_is_refused_in_one_line(tmp_path):
    """Something listens at ray.address but does not answer as Ray's GCS: refused by the check
    (it asked Ray to retry for 300 s before); a real head passes it (tests/test_multinode.py)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        done = run_case(["method=kmeans", f"ray.address=127.0.0.1:{port}"], tmp_path)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith(f"error: 127.0.0.1:{port} is not a Ray head: something listens there but does not "
                               "answer as Ray's GCS (gRPC) does within 10 s")
    assert not (tmp_path / "db").exists()


@pytest.mark.parametrize("what, call, error, message", LIBRARY_CASES, ids=[case[0] for case in LIBRARY_CASES])
def test_bad_library_input_is_a_clear_error(what, call, error, message):
    with pytest.raises(error) as raised:
        call()
    assert str(raised.value).startswith(message)


def test_the_bad_input_page_lists_every_case():
    page = DOC.read_text()
    for args, message in CLI_CASES:
        module, args = cli_command(args)
        assert f"`python -m {module} {' '.join(args)}`".replace(TMP, "<tmp>") in page, args
        assert message.replace(TMP, "<tmp>").replace("|", "\\|") in page, message
    for what, _, error, message in LIBRARY_CASES:
        assert f"`{what}`" in page and message.replace("|", "\\|") in page, what
    assert len(CLI_CASES) + len(LIBRARY_CASES) >= 40


def write_page() -> None:
    """docs/bad_inputs.md from what every case prints now."""
    import tempfile

    rows = []
    for args, _ in CLI_CASES:
        with tempfile.TemporaryDirectory() as folder:
            done = run_case(args, Path(folder))
            line = done.stderr.strip().splitlines()[-1].replace(folder, "<tmp>")
        module, shown = cli_command(args)
        rows.append(f"| `python -m {module} {' '.join(shown)}`".replace(TMP, "<tmp>") +
                    f" | {done.returncode} | {line.replace('|', chr(92) + '|')} |")
    for what, call, error, _ in LIBRARY_CASES:
        try:
            call()
        except error as raised:
            rows.append(f"| `{what}` | {type(raised).__name__} | {str(raised).replace('|', chr(92) + '|')} |")
    DOC.write_text("\n".join([
        "# Bad inputs and their one-line messages",
        "",
        "Every bad input the tests try (tests/test_bad_inputs.py), with what the platform prints. Command-line",
        "cases exit 2 with this one line on stderr and create nothing: no MLflow store, no output folder, no",
        "run. Checks of the tracking store, the output folder and the Ray address wait at most 10 s each.",
        "Library cases raise the error shown. Regenerate with `python tests/test_bad_inputs.py`",
        "(from the repository root, `MTC_DATA_DIR` set); `<tmp>` is an empty folder the case runs in.",
        "",
        f"{len(CLI_CASES)} command-line cases, {len(LIBRARY_CASES)} library cases.",
        "",
        "| input | exit code / error | message |",
        "|---|---|---|",
        *rows, ""]))


if __name__ == "__main__":
    write_page()
