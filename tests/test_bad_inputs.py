"""Every bad input the tests try, each with its one-line message.

Command-line cases run the real command, each in a process of its own forked from a warm
interpreter (tests/warm_python.py: the libraries imported once, not once a case): exit 2,
exactly one line on stderr, and nothing
created: the case's folder holds the same files after the command as before (no MLflow store,
no output folder, not even Hydra's record of the command, and no Ray session, whose folders
would be in the case's TMPDIR). Request cases send a body to the batch route of a tracking
server (``mlflow server --app-name mtc``, mtc.store.server_app) started on a fresh SQLite store
and expect its status and message. Library cases call a solver and expect the error type and
message. docs/bad_inputs.md is this table: ``python tests/test_bad_inputs.py`` rewrites it from
what the commands print now, and a test checks that the page is what it would write now.
"""

import atexit
import contextlib
import functools
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils._param_validation import InvalidParameterError
from test_run_writer import post, record
from warm_python import warm_run

from mtc.errors import InputError
from mtc.methods import KernelKMeans, SymmetricNMF
from mtc.methods.smtnmf import SMTNMF
from mtc.store import preflight, run_writer, tracking

DOC = Path(__file__).parents[1] / "docs" / "bad_inputs.md"
TMP = "{tmp}"  # replaced by the test's folder; shown as <tmp> in the page
READ_ONLY = f"{TMP}/read-only"  # a read-only tmpfs is mounted here for the cases that name it (root only)
# a case's first argument when it is not `python -m mtc.sweep`; the last takes no Hydra overrides
COMMANDS = ("mtc.run", "mtc.reproduce", "mtc.results.compare", "mtc.results.fidelity", "mtc.data")
# Ten values of each of six MTCMRL parameters: a grid of 10^6 points, written in a few short arguments.
MILLION_POINTS = [f"++method.grid.{key}=[{','.join(str(v) for v in range(1, 11))}]"
                  for key in ("alpha", "beta", "lambda_", "mu", "max_iter", "tol")]

# (arguments of `python -m mtc.sweep` (or of the command COMMANDS names first), start of the one line)
CLI_CASES = [
    # config groups and method parameters
    (["method=nope"], "error: unknown method 'nope'; available: a_asi, a_kmeans, a_ncut"),
    (["data=nope"], "error: unknown data 'nope'; available: "),
    (["method=kmeans", "+method.grid.alpha=[1,2]"], "error: method 'kmeans': unknown grid key 'alpha'"),
    ([f"hydra.searchpath=[file://{TMP}/conf]", "method=broken"],
     f"error: cannot read the config {TMP}/conf/method/broken.yaml: expected ',' or ']', but got '<stream end>' at "
     "line 3, column 1 (while parsing a flow sequence at line 2, column 16)"),
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
    # keys the config does not have: what to write instead (not Hydra's seven lines, exit 1)
    (["method=mtcmrl", "method.params.alpha=4"], "error: method 'mtcmrl' sweeps alpha in its grid ([0.25, 0.5, 1.0, "
                                                 "2.0, 4.0]): to fix it at 4 write method.grid.alpha=[4]"),
    (["method=snmf", "method.params.tol=1e-3"], "error: method 'snmf': tol is not among the params "
                                                "conf/method/snmf.yaml sets; write ++method.params.tol=1e-3"),
    (["mtc.run", "method.params.g_solver=bogus"], "error: method 'snmf' has no parameter 'g_solver': its "
                                                  "parameters: affinity,"),
    (["method=mtcmrl", "method.params.g_solvr=qp"], "error: method 'mtcmrl' has no parameter 'g_solvr': did you "
                                                    "mean ++method.params.g_solver=qp?"),
    (["data.params.n_task=2"], "error: dataset 'synthetic' has no parameter 'n_task': did you mean "
                               "data.params.n_tasks=2?"),
    (["method=kmeans", "methd.params.n_init=2"], "error: unknown setting 'methd.params.n_init': did you mean "
                                                 "method.params.n_init=2? the top level takes: "),
    (["method.grid.update=[sqrt"], "error: cannot read the override 'method.grid.update=[sqrt' (no viable "
                                   "alternative at input '[sqrt'); write key=value"),
    (["+sweep.repeatz=2"], "error: unknown setting 'sweep.repeatz': did you mean sweep.repeats=2? sweep takes: "),
    (["+seeds=3"], "error: unknown setting 'seeds': did you mean seed=3? the top level takes: "),
    (["+sweep.repeatz='  '"], "error: unknown setting 'sweep.repeatz': did you mean sweep.repeats='  '? sweep takes: "),
    (["mtc.reproduce", "baselines", "method.params.alpha=2"], "error: method 'kmeans' has no parameter 'alpha': its "
                                                              "parameters: init, max_iter, n_init, tol"),
    (["+experiment=nope"], "error: unknown experiment 'nope'; available: "),
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
    (["sweep.name=.."], "error: sweep.name must be one folder name"),
    (["sweep.name=../../x"], "error: sweep.name must be one folder name"),
    # sizes no machine runs, refused before anything starts
    (["sweep.repeats=100000000"], "error: sweep.repeats=100000000 is over the 100000 trials a sweep may have"),
    (["method=mtcmrl", "sweep.repeats=5000"], "error: 25 grid points x 5000 repeats = 125000 trials, over the 100000"),
    (["method=mtcmrl", *MILLION_POINTS], "error: method 'mtcmrl': the grid has 1000000 points, over the 100000 "
                                         "trials a sweep may have"),
    (["ray.num_cpus=1", "sweep.cpus_per_trial=2"], "error: sweep.cpus_per_trial=2 but ray.num_cpus=1: no trial "
                                                   "could start; set sweep.cpus_per_trial=1 or less"),
    (["ray.object_store_memory=1"], "error: ray.object_store_memory=1 is below Ray's minimum of 78643200 bytes"),
    (["ray.head_lost_seconds=0"], "error: ray.head_lost_seconds must be a positive integer, got 0"),
    (["mlflow.experiment=''"], "error: mlflow.experiment must be a non-empty name, got ''"),
    (["mtc.run", "seed=abc"], "error: seed must be a non-negative integer, got 'abc'"),
    (["mtc.run", "seed=-1"], "error: seed must be a non-negative integer, got -1"),
    (["mtc.run", "seed=99999999999"], "error: seed must be an integer from 0 to 4294967295 (2**32 - 1, the seeds "
                                      "NumPy's generators take), got 99999999999"),
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
    (["data.params.samples_per_cluster=0"], "error: samples_per_cluster must be at least 1, got 0"),
    (["data.params.n_clusters=1"], "error: n_clusters must be at least 2, got 1"),
    (["data.params.n_tasks=0"], "error: n_tasks must be at least 1, got 0"),
    (["method=smtnmf", "data=smtnmf_20ng_rec_comp", "data.params.samples_per_task=1"],
     "error: samples_per_task=1 is fewer than the 2 classes of a task: each class needs a sample; use "
     "samples_per_task=2 or more"),
    (["data=reuters", f"data.root={TMP}/folder-root"], f"error: raw file {TMP}/folder-root/reuters21578/"
                                                        "reuters21578.tar.xz is a folder, not a file"),
    (["data=comp_vs_sci", f"data.cache_dir={TMP}/a-file/cache"], f"error: cannot read processed datasets in "
                                                                  f"{TMP}/a-file/cache ({TMP}/a-file is not a folder)"),
    (["data=comp_vs_sci", f"data.cache_dir={READ_ONLY}"], f"error: cannot write processed datasets in {READ_ONLY} "
                                                          "(Read-only file system)"),
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
    (["data=files", "data.name=mine", f"data.params.paths=[{TMP}/t1.csv,{TMP}/t1.csv]",
      "data.params.label_column=label"], f"error: {TMP}/t1.csv: listed twice in data.params.paths: each file or folder is one task, list it once"),
    (["method=mtcmrl", "data=files", "data.name=mine", f"data.params.paths=[{TMP}/t1.csv,{TMP}/huge.csv]",
      "data.params.label_column=label", "data.params.scale=none"],
     "error: sweep mtcmrl-mine: task 1's largest |x| is 5e+30 and task 0's 6, 8.3e+29 times apart (more than 1e+08)"),
    (["data=files", "data.name=mine", f"data.params.paths=[{TMP}/docs]", "data.params.n_clusters=2"],
     f"error: {TMP}/docs: document 'b.png' is binary (a NUL byte at offset 8), not a text document"),
    (["method=kmeans", "data=files", "data.name=mine", f"data.params.paths=[{TMP}/t1.csv,{TMP}/zero.csv]",
      "data.params.label_column=label"],
     f"error: sweep kmeans-mine: task 'zero' ({TMP}/zero.csv): every entry is 0: nothing to cluster"),
    (["data=files", "data.name=mine", f"data.params.paths=[{TMP}/news]", "data.params.n_clusters=2",
      "data.params.scale=minmax"],
     "error: data.params.scale=minmax: text folders are scaled by their vectoriser's settings (data.params.text), "
     "which give tfidf; leave scale at auto, or set data.params.text (tfidf=false: counts; l2_normalize=false: rows "
     "as counted)"),
    (["method=lssmtc", "data=files", "data.name=mine", f"data.params.paths=[{TMP}/t1.csv]",
      "data.params.label_column=label", "method.grid.n_components=[4,8]"],
     "error: sweep lssmtc-mine: no grid point can fit the data (n_components=4 exceeds the 2 features)"),
    (["data=files", "data.name=mine", f"data.params.paths=[{TMP}/pipe.csv]", "data.params.label_column=label"],
     f"error: {TMP}/pipe.csv: a FIFO (named pipe), not a regular file: give a data file or a folder of text documents"),
    (["data=files", "data.name=mine", "data.params.paths=[/dev/zero]", "data.params.n_clusters=2"],
     "error: /dev/zero: a character device, not a regular file"),
    (["data=files", "data.name=mine", f"data.params.paths=[{TMP}/piped]", "data.params.n_clusters=2"],
     f"error: {TMP}/piped: 'b.txt' is a FIFO (named pipe), not a document (a regular file)"),
    (["data=files", "data.name=mine", f"data.params.paths=[{TMP}/dup.csv]", "data.params.label_column=label"],
     f"error: {TMP}/dup.csv: repeated column names 'a': every column needs its own name"),
    (["data=files", "data.name=mine", f"data.params.paths=[{TMP}/t1.csv]", "data.params.label_column=label",
      "data.params.task_column=label"], "error: data.params.task_column and data.params.label_column are both "
                                        "'label': they must differ"),
    (["data=files", "data.name=a/b", f"data.params.paths=[{TMP}/t1.csv]", "data.params.label_column=label"],
     "error: data.name must be one name (letters, digits and '_', then also '.', '-', '+' or '='; not empty, no "
     "'/'): it names the sweep, its output folder and its cache file; got 'a/b'"),
    (["data=files", "data.name=''", f"data.params.paths=[{TMP}/t1.csv]", "data.params.label_column=label"],
     "error: data.name must be one name"),
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
    # Ray's temp folder (TMPDIR/ray here) keeps the address of a cluster that is gone
    (["ray.address=auto"], f"error: ray.address=auto: {TMP}/tmp/ray/ray_current_cluster names 127.0.0.1:1, but no "
                           "Ray node of yours runs here (a stale file: ray stop leaves it)"),
    (["ray.num_cpus=0"], "error: ray.num_cpus must be a positive integer or null, got 0"),
    # study files and published numbers (run in the case's folder: the paths as typed)
    (["mtc.reproduce", "bad-study.yaml"], "error: study file bad-study.yaml: not valid YAML (expected the node "
                                          "content, but found '-' at line 2, column 3)"),
    (["mtc.reproduce", "gone.yaml"], "error: missing study file gone.yaml"),
    (["mtc.reproduce", "mtcmrl", "spmtc"], "error: one study and Hydra overrides (key=value), got 2 names: mtcmrl "
                                           "spmtc"),
    (["mtc.reproduce", "every_method", "data=files", "data.name=mine", f"data.params.paths=[{TMP}/gone.csv,{TMP}/gone2.csv]",
      "data.params.label_column=label"],
     f"error: study 'every_method': no method can run on this data: every method: {TMP}/gone.csv: missing file; "
     f"{TMP}/gone2.csv: missing file"),
    (["mtc.reproduce", "every_method", "data=files", "data.name=mine", f"data.params.paths=[{TMP}/t1.csv]",
      "data.params.label_column=label", "--only", "kmeanz"],
     "error: study 'every_method': --only kmeanz names no method of the study, nor its data (files, mine) or a sweep"),
    # a store of a newer MLflow, fidelity's results folder, the data root
    ([f"mlflow.tracking_uri=sqlite:///{TMP}/newer.db"], f"error: the tracking store {TMP}/newer.db was written by a "
                                                       "newer MLflow (schema revision 9f8e7d6c5b4a"),
    (["mtc.results.compare", "--tracking-uri", f"sqlite:///{TMP}/newer.db"],
     f"error: the tracking store {TMP}/newer.db was written by a newer MLflow (schema revision 9f8e7d6c5b4a"),
    (["mtc.results.fidelity", "--results", f"{TMP}/gone"], f"error: --results {TMP}/gone: no such folder; expected "
                                                          "the compare_* folders"),
    (["mtc.results.fidelity", "--results", READ_ONLY], f"error: --results {READ_ONLY}: an empty folder; expected the "
                                                      "compare_* folders"),
    (["mtc.data", "root", f"{TMP}/a-file"], f"error: {TMP}/a-file is a file, not a folder: give the folder that holds "
                                            "the corpora"),
    (["mtc.results.compare", "--published", "bad-published.csv"], "error: --published bad-published.csv: no column "
                                                                  "paper, table, task, metric, mean, std"),
]


RNG = np.random.default_rng(0)
X = RNG.random((20, 5))
# Two sparse tasks of 200,000 rows: the dense route's two n x n matrices would need 596 GiB
HUGE = sp.random(200_000, 5, density=0.4, format="csr", random_state=0)
FREE = re.compile(r"\d+(\.\d+)? [KMG]iB is free")  # the machine's free memory, shown as <free> in the page


def sweep_run(*arguments):
    import mtc.sweep

    return mtc.sweep.run(*arguments)


def trials(uri):
    import mtc.results

    return mtc.results.trials(uri)


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
     InputError, "task 0: SMTNMF needs non-negative data (its derivation assumes it), which this task is not; for your own tables set data.params.scale=minmax"),
    ("KernelKMeans(n_init=0)", lambda: KernelKMeans(n_clusters=2, n_init=0).fit([X, X]),
     InvalidParameterError, "The 'n_init' parameter of KernelKMeans must be an int in the range [1, inf)"),
    ("SymmetricNMF(n_clusters=2, route='dense').fit([2 sparse tasks of 200,000 rows])",
     lambda: SymmetricNMF(n_clusters=2, route="dense").fit([HUGE, HUGE]), InputError,
     "SymmetricNMF: a fit on 2 tasks of 200000 samples needs about 596.0 GiB (estimate, mtc.methods.memory) but "),
    ('mtc.sweep.run("kmeans", "synthetic", "method=snmf")', lambda: sweep_run("kmeans", "synthetic", "method=snmf"),
     InputError, "mtc.sweep.run('kmeans', 'synthetic', ...): the override 'method=snmf' contradicts the method "
                 "argument 'kmeans'"),
    ('mtc.sweep.run("kmeans", "synthetic", ["sweep.repeats=2"])',
     lambda: sweep_run("kmeans", "synthetic", ["sweep.repeats=2"]), InputError,
     "mtc.sweep.run: overrides are strings, one argument each"),
    ("mtc.results.trials(None)", lambda: trials(None), InputError,
     "the tracking URI must be a non-empty string, got None"),
    ("mtc.results.trials('')", lambda: trials(""), InputError, "the tracking URI must be a non-empty string, got ''"),
]


def changed_metric(uri: str, experiment: str, parent: str) -> dict:
    """Runs a and b stored by a batch; then a batch of a, its acc/mean 0.25 instead, and c."""
    stored = run_writer.batch_payload(experiment, parent, [record("a"), record("b")])
    assert post(uri, stored)[0] == 200
    again = run_writer.batch_payload(experiment, parent, [record("a"), record("c")])
    again["runs"][0] = {**stored["runs"][0], "metrics": [[key, "0.25" if key == "acc/mean" else value, step]
                                                         for key, value, step in stored["runs"][0]["metrics"]]}
    return again


def closed_parent(uri: str, experiment: str, parent: str) -> dict:
    tracking.client_for(uri).set_terminated(parent, "KILLED")
    return run_writer.batch_payload(experiment, parent, [record("a")])


def escaping_file(uri: str, experiment: str, parent: str) -> dict:
    body = run_writer.batch_payload(experiment, parent, [record("a")])
    body["runs"][0]["files"] = {"../../outside.txt": "aGk="}
    return body


def parents_id(uri: str, experiment: str, parent: str) -> dict:
    body = run_writer.batch_payload(experiment, parent, [record("a")])
    body["runs"][0]["id"] = parent
    return body


# (the body POSTed to the batch route, made against a new parent run; the answer's status, error
# code and the start of its message, run ids shown as <run id>)
REQUEST_CASES = [
    ("a batch reusing stored run a's id, its acc/mean 0.25 (stored: 0.75)", changed_metric, 409, "RUN_CHANGED",
     "run 'a' (<run id>) is stored with other metrics than this batch's: a batch may not reuse stored run ids; "
     "nothing written"),
    ("a batch under a parent run closed KILLED", closed_parent, 409, "PARENT_CLOSED",
     "parent run <run id> is KILLED"),
    ("a run file named ../../outside.txt", escaping_file, 400, "INVALID_PARAMETER_VALUE",
     "not a batch of runs (ValueError: file name '../../outside.txt' leaves the run's folder)"),
    ("a run given its parent's id", parents_id, 400, "RESOURCE_ALREADY_EXISTS",
     "run id <run id> is already the parent run's id; nothing written"),
]
RUN_ID = re.compile(r"\b[0-9a-f]{32}\b")


@contextlib.contextmanager
def batch_route_server():
    """A tracking server as mtc.stack starts one (``mlflow server --app-name mtc``: the batch
    route, artifacts served) on a fresh SQLite store; stopped, with its helpers, afterwards."""
    from mtc.stack.loopback import free_port, wait_for_port

    with tempfile.TemporaryDirectory(prefix="mtc-bad-requests-") as folder:
        port = free_port()
        with open(Path(folder) / "server.log", "wb") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "mlflow", "server", "--app-name", "mtc", "--backend-store-uri",
                 f"sqlite:///{folder}/mlflow.db", "--serve-artifacts", "--artifacts-destination", f"{folder}/artifacts",
                 "--host", "127.0.0.1", "--port", str(port), "--workers", "1"], stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
        try:
            wait_for_port(port, 120)
            yield f"http://127.0.0.1:{port}"
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)


def send_requests() -> tuple[list[tuple[int, dict]], list[str]]:
    """Each request case's (status, answer), sent to one fresh batch_route_server, and the names
    of the child runs the server holds afterwards."""
    with batch_route_server() as uri:
        client = tracking.client_for(uri)
        experiment = tracking.ensure_experiment(client, "bad-requests", None)
        parents = [client.create_run(experiment).info.run_id for _ in REQUEST_CASES]
        answers = [post(uri, make(uri, experiment, parent)) for (_, make, _, _, _), parent in zip(REQUEST_CASES, parents)]
        return answers, sorted(run.info.run_name for run in tracking.find_runs(client, experiment)
                               if run.info.run_id not in parents)


def request_row(what: str, status: int, answer: dict) -> str:
    """The page's row of a request case: what was sent, the status and error code, the message."""
    message = RUN_ID.sub("<run id>", answer["message"]).replace("|", chr(92) + "|")
    return f"| `POST {run_writer.BATCH_ENDPOINT}`: {what} | {status} {answer['error_code']} | {message} |"


def cli_command(args: list[str]) -> tuple[str, list[str]]:
    return (args[0], args[1:]) if args[0] in COMMANDS else ("mtc.sweep", args)


PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))  # an image's first bytes: a NUL at offset 8


@functools.cache
def empty_store() -> Path:
    """An MLflow store with an empty experiment mtc, made once per process (1 MB; MLflow's
    schema takes seconds to create) and copied where a case needs one."""
    from mtc.store import tracking

    folder = Path(tempfile.mkdtemp(prefix="mtc-bad-inputs-"))
    atexit.register(shutil.rmtree, folder, True)
    tracking.open_store(f"sqlite:///{folder / 'mlflow.db'}", "mtc", str(folder / "artifacts"))
    return folder / "mlflow.db"


def prepare(tmp: Path, ray_address: str) -> None:
    """The files the cases name, made before the command runs; Ray's temp folder names
    ``ray_address`` as its current cluster."""
    (tmp / "a-file").write_text("a file where a folder is expected")
    (tmp / "not-a-database").write_text("this is not an SQLite database, it is long enough to have a header" * 4)
    (tmp / "t1.csv").write_text("a,b,label\n1,2,x\n3,4,y\n5,6,x\n")  # tasks of the user's own data
    (tmp / "t2.csv").write_text("a,label\n1,x\n2,y\n")  # column b missing
    (tmp / "t.xyz").write_text("x\n")  # a format the builder does not read
    (tmp / "nan.csv").write_text("a,b,label\n1,,x\n3,4,y\n")  # a missing value
    (tmp / "text.csv").write_text("a,b,label\n1,hi,x\n3,4,y\n")  # a word among the features
    (tmp / "empty.csv").write_text("a,b,label\n")  # a header, no rows
    (tmp / "one.csv").write_text("a,b\n1,2\n")  # one sample for two clusters
    (tmp / "zero.csv").write_text("a,b,label\n0,0,x\n0,0,y\n0,0,x\n")  # a task of zeros only
    (tmp / "dup.csv").write_text("a,a,label\n1,2,x\n3,4,y\n")  # a column name twice
    (tmp / "huge.csv").write_text("a,b,label\n1e30,2e30,x\n3e30,4e30,y\n5e30,1e30,x\n")  # t1.csv's task times 1e30
    (tmp / "conf" / "method").mkdir(parents=True)  # a method config on a search path, its YAML broken
    (tmp / "conf" / "method" / "broken.yaml").write_text("_target_: mtc.methods.kmeans.KMeansClusterer\n"
                                                         "grid: {n_init: [1, 2\n")
    (tmp / "news").mkdir()  # a folder of text documents
    (tmp / "news" / "a.txt").write_text("apples and pears")
    (tmp / "news" / "b.txt").write_text("plums and cherries")
    (tmp / "docs").mkdir()  # a folder of text documents with an image among them
    (tmp / "docs" / "a.txt").write_text("apples and pears")
    (tmp / "docs" / "b.png").write_bytes(PNG)
    os.mkfifo(tmp / "pipe.csv")  # a named pipe: reading it waits for a writer
    (tmp / "piped").mkdir()  # a folder of documents with a named pipe among them
    (tmp / "piped" / "a.txt").write_text("apples and pears")
    os.mkfifo(tmp / "piped" / "b.txt")
    (tmp / "bad-study.yaml").write_text("sweeps: [\n  - methods: [kmeans\n")  # a list never closed
    (tmp / "bad-published.csv").write_text("benchmark,method\nreuters,kmeans\n")  # published numbers lacking columns
    shutil.copy(empty_store(), tmp / "mlflow.db")  # compare's default store, sqlite:///mlflow.db
    shutil.copy(empty_store(), tmp / "newer.db")  # a store of an MLflow newer than ours: a revision it does not know
    with contextlib.closing(sqlite3.connect(tmp / "newer.db")) as newer, newer:
        newer.execute("UPDATE alembic_version SET version_num = '9f8e7d6c5b4a'")
    (tmp / "folder-root" / "reuters21578" / "reuters21578.tar.xz").mkdir(parents=True)  # a folder named as the file
    (tmp / "tmp" / "ray").mkdir(parents=True)  # the command's TMPDIR, so Ray's temp folder is TMPDIR/ray
    (tmp / "tmp" / "ray" / "ray_current_cluster").write_text(ray_address)


def tree(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


def run_case(args: list[str], tmp: Path, ray_address: str = "127.0.0.1:1") -> tuple[subprocess.CompletedProcess,
                                                                                    set[str]]:
    """Run a case in ``tmp``; returns what it did and the files and folders it created there.
    Ray's temp folder names ``ray_address`` (by default a cluster that is gone)."""
    prepare(tmp, ray_address)
    module, args = cli_command([arg.replace(TMP, str(tmp)) for arg in args])
    defaults = [f"output_dir={tmp / 'out'}", f"mlflow.tracking_uri=sqlite:///{tmp / 'db'}", "sweep.repeats=1"]
    if module == "mtc.run":
        defaults.pop()
    if module in ("mtc.results.compare", "mtc.results.fidelity", "mtc.data"):  # not Hydra commands: their options
        defaults = []
    command = [*args, *defaults] if module == "mtc.reproduce" else [*defaults, *args]  # the study comes first
    env = {key: value for key, value in os.environ.items() if key not in ("RAY_ADDRESS", "RAY_TMPDIR")}
    env.update(MTC_DATA_DIR=str(Path(os.environ.get("MTC_DATA_DIR", tmp)).resolve()), TMPDIR=str(tmp / "tmp"),
               PYTHONHASHSEED="0")  # scikit-learn names a parameter's options as a set: one order on the page
    mounted = any(READ_ONLY.replace(TMP, str(tmp)) in arg for arg in args) and mount_read_only(tmp / "read-only")
    before = tree(tmp)
    try:
        done = warm_run(module, command, tmp, env, timeout=120)  # a fresh process, imports done once
    finally:
        if mounted:
            subprocess.run(["umount", str(tmp / "read-only")], check=True)
    return done, tree(tmp) - before


def mount_read_only(folder: Path) -> bool:
    """A read-only tmpfs at ``folder`` (as root the only folder that refuses files: root writes
    into any mode); skips the test where mounting is not allowed."""
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)], capture_output=True,
                          text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a read-only tmpfs here: {done.stderr.strip()}")
    return True


def case_id(args: list[str]) -> str:
    return " ".join(args)


def cli_row(args: list[str], done: subprocess.CompletedProcess, tmp: Path) -> str:
    """The page's row of a case: the command and its last stderr line, <tmp> for its folder."""
    line = done.stderr.strip().splitlines()[-1].replace(str(tmp), "<tmp>")
    module, shown = cli_command(args)
    return (f"| `python -m {module} {' '.join(shown)}`".replace(TMP, "<tmp>") +
            f" | {done.returncode} | {line.replace('|', chr(92) + '|')} |")


ROWS: dict[str, str] = {}  # case id -> its page row, as the command printed it in this session
REQUEST_ROWS: list[str] = []  # the request cases' page rows, as the server answered them in this session


@pytest.mark.parametrize("args, message", CLI_CASES, ids=[case_id(args) for args, _ in CLI_CASES])
def test_bad_command_line_input_is_one_line_exit_2_and_creates_nothing(tmp_path, args, message):
    done, created = run_case(args, tmp_path)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith(message.replace(TMP, str(tmp_path))), done.stderr[-2000:]
    assert created == set()  # no MLflow store, no output folder, no Hydra record, no Ray session
    ROWS[case_id(args)] = cli_row(args, done, tmp_path)


def test_offline_handdigits_is_one_line_and_leaves_no_empty_folder(tmp_path):
    """Without the network (CI, this machine) the MNIST download fails: one line naming the
    file to put there by hand, and no empty mnist/ folder made for it."""
    done, created = run_case(["data=handdigits", f"data.root={TMP}/no-corpora"], tmp_path)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith(f"error: missing raw file {tmp_path}/no-corpora/") and "put the file there" in lines[0]
    assert created == set()


def raylet_like(user: str | None, address: str) -> subprocess.Popen:
    """A process Ray's address search takes for a raylet (named raylet, ``--gcs-address``):
    an injected stand-in, since starting another user's Ray cluster here takes a second account's
    Ray set-up; the check reads only the process table, as Ray's own ``auto`` does. The shell
    waits in its builtin ``read`` on a pipe, so it never forks: a forked child keeps the name
    until it execs, and a loaded machine showed the search that child (CI, pid + 1)."""
    process = subprocess.Popen(["raylet", "-c", "read line", f"--gcs-address={address}"], executable="/bin/sh",
                               stdin=subprocess.PIPE, user=user, start_new_session=True)
    cmdline = Path(f"/proc/{process.pid}/cmdline")
    for _ in range(500):  # until it has exec'd (a bounded wait: 5 s at most)
        if cmdline.read_bytes().startswith(b"raylet"):
            return process
        time.sleep(0.01)
    raise RuntimeError(f"the stand-in raylet {process.pid} did not start")


@pytest.mark.skipif(os.geteuid() != 0, reason="running a process as another user needs root")
def test_auto_does_not_follow_a_stale_address_into_another_users_cluster(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        process = raylet_like("nobody", address)
        try:
            done, created = run_case(["ray.address=auto"], tmp_path, address)
        finally:
            process.kill()
            process.communicate()
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith(f"error: ray.address=auto: the Ray cluster at {address} (named in {tmp_path}/tmp/ray/"
                               "ray_current_cluster) is run by nobody, not by you")
    assert created == set()


def test_auto_joins_the_users_own_cluster_and_says_which(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text("127.0.0.1:6")
    process = raylet_like(None, "127.0.0.1:6")
    try:
        address, how = preflight.ray_auto_address()
    finally:
        process.kill()
        process.communicate()
    assert address == "127.0.0.1:6"
    assert how == f"named in {tmp_path}/ray/ray_current_cluster; its raylet, pid {process.pid}, is yours"
    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:6379")  # the user's explicit choice wins, as in Ray
    assert preflight.ray_auto_address() == ("10.1.2.3:6379", "RAY_ADDRESS")


def test_a_port_that_listens_but_is_not_a_ray_head_is_refused_in_one_line(tmp_path):
    """Something listens at ray.address but does not answer as Ray's GCS: refused by the check
    (it asked Ray to retry for 300 s before); a real head passes it (tests/test_multinode.py)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        done, _ = run_case(["method=kmeans", f"ray.address=127.0.0.1:{port}"], tmp_path)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith(f"error: 127.0.0.1:{port} is not a Ray head: something listens there but does not "
                               "answer as Ray's GCS (gRPC) does within 10 s")
    assert not (tmp_path / "db").exists()


def test_bad_requests_to_the_batch_route_are_refused_with_their_status_and_one_line():
    answers, children = send_requests()
    for (what, _, status, code, message), (got, answer) in zip(REQUEST_CASES, answers):
        assert (got, answer["error_code"]) == (status, code), (what, answer)
        assert RUN_ID.sub("<run id>", answer["message"]).startswith(message), (what, answer)
        assert "\n" not in answer["message"]
    assert children == ["a", "b"]  # changed_metric's first batch; no refused request wrote a run
    REQUEST_ROWS[:] = [request_row(case[0], *answer) for case, answer in zip(REQUEST_CASES, answers)]


@pytest.mark.parametrize("what, call, error, message", LIBRARY_CASES, ids=[case[0] for case in LIBRARY_CASES])
def test_bad_library_input_is_a_clear_error(what, call, error, message):
    with pytest.raises(error) as raised:
        call()
    assert str(raised.value).startswith(message)


def fresh_row(args: list[str]) -> str:
    with tempfile.TemporaryDirectory() as folder:
        done, _ = run_case(args, Path(folder))
        return cli_row(args, done, Path(folder))


def fresh_request_rows() -> list[str]:
    return [request_row(case[0], *answer) for case, answer in zip(REQUEST_CASES, send_requests()[0])]


def page(cli_rows: list[str], request_rows: list[str]) -> str:
    """docs/bad_inputs.md with these command-line and request rows and every library case as it
    raises now."""
    rows = [*cli_rows, *request_rows]
    for what, call, error, _ in LIBRARY_CASES:
        try:
            call()
        except error as raised:
            message = FREE.sub("<free> is free", str(raised)).replace("|", chr(92) + "|")
            rows.append(f"| `{what}` | {type(raised).__name__} | {message} |")
    return "\n".join([
        "# Bad inputs and their one-line messages",
        "",
        "Every bad input the tests try (tests/test_bad_inputs.py), with what the platform prints. Command-line",
        "cases exit 2 with this one line on stderr before any dataset is built, Ray started or MLflow store",
        "opened (compare reads its store, read-only), and create nothing: no MLflow store, no output folder",
        "(not even Hydra's record of the command, outputs/hydra/<time>), no run, no Ray session. Checks of",
        "the tracking store, the output folder and the Ray address wait at most 10 s each. Requests to the",
        "batch route of a tracking server started as mtc.stack starts one (`mlflow server --app-name mtc`,",
        "mtc/store/server_app.py; the generator starts it on a fresh SQLite store) are answered with the",
        "status, error code and message shown, nothing written. Library cases raise the error shown.",
        "Regenerate with `python tests/test_bad_inputs.py` (from the repository root, `MTC_DATA_DIR` set,",
        "as root for the read-only folder); `<tmp>` is the folder the case runs in, also its TMPDIR's",
        "parent, holding only the files the cases name (tests/test_bad_inputs.py, `prepare`), and `<free>`",
        "the memory free on the machine. A test fails when this page differs from what that command would",
        "write now.",
        "",
        f"{len(CLI_CASES)} command-line cases, {len(REQUEST_CASES)} requests, {len(LIBRARY_CASES)} library cases.",
        "",
        "| input | exit code / status / error | message |",
        "|---|---|---|",
        *rows, ""])


def test_the_bad_input_page_is_what_the_cases_print_now():
    """The page is generated: it must be what ``python tests/test_bad_inputs.py`` writes now
    (rows of the cases this session ran are reused; the others run here)."""
    rows = [ROWS.get(case_id(args)) or fresh_row(args) for args, _ in CLI_CASES]
    assert DOC.read_text() == page(rows, REQUEST_ROWS or fresh_request_rows()), \
        "docs/bad_inputs.md is stale: run python tests/test_bad_inputs.py"


def write_page() -> None:
    """docs/bad_inputs.md from what every case prints now."""
    DOC.write_text(page([fresh_row(args) for args, _ in CLI_CASES], fresh_request_rows()))


if __name__ == "__main__":
    write_page()
