"""The user's own data (``data=files``, mtc.data.files): every format with and without labels,
a task column, text folders with one vocabulary, n_clusters, the cache keyed by the files'
contents, every bad file rejected in one line, and methods fitted on the result."""

import gzip
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import scipy.io
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file, load_wine

from mtc.data import files, load_dataset
from mtc.data.spec import data_spec
from mtc.errors import InputError
from mtc.metrics import accuracy

RNG = np.random.default_rng(0)
# two tasks of exactly representable values (CSV keeps them bit for bit); labels 1 and 2
X1, X2 = RNG.integers(1, 40, (6, 4)) / 4, RNG.integers(1, 40, (5, 4)) / 4
Y1, Y2 = np.array([1, 2, 1, 2, 2, 1]), np.array([2, 2, 1, 1, 2])
COLUMNS = ["f0", "f1", "f2", "f3"]


def table(X, y):
    frame = pd.DataFrame(X, columns=COLUMNS)
    if y is not None:
        frame["label"] = np.where(y == 1, "ham", "spam")
    return frame


def write_csv(path, X, y):
    table(X, y).to_csv(path, index=False)


def write_tsv(path, X, y):
    table(X, y).to_csv(path, sep="\t", index=False)


def write_csv_gz(path, X, y):
    with gzip.open(path, "wt") as handle:
        table(X, y).to_csv(handle, index=False)


def write_parquet(path, X, y):
    table(X, y).to_parquet(path)


def write_npz(path, X, y):
    np.savez(path, X=X, **({} if y is None else {"y": y}))


def write_sparse_npz(path, X, y):
    sp.save_npz(path, sp.csr_matrix(X))


def write_npy(path, X, y):
    np.save(path, X)


def write_svmlight(path, X, y):
    dump_svmlight_file(X, y, str(path), zero_based=False)


def write_mat(path, X, y):
    scipy.io.savemat(path, {"X": X, **({} if y is None else {"y": y[:, None]})})


def write_sparse_mat(path, X, y):
    scipy.io.savemat(path, {"X": sp.csc_matrix(X), **({} if y is None else {"y": y[:, None]})})


# format -> (suffix, writer, label column (None: the format carries its labels or has none), labels it holds)
FORMATS = {
    "csv": (".csv", write_csv, "label", "both"),
    "tsv": (".tsv", write_tsv, "label", "both"),
    "csv.gz": (".csv.gz", write_csv_gz, "label", "both"),
    "parquet": (".parquet", write_parquet, "label", "both"),
    "npz": (".npz", write_npz, "y", "both"),
    "sparse npz": (".npz", write_sparse_npz, None, "unlabelled"),
    "npy": (".npy", write_npy, None, "unlabelled"),
    "svmlight": (".svm", write_svmlight, None, "labelled"),
    "mat": (".mat", write_mat, "y", "both"),
    "sparse mat": (".mat", write_sparse_mat, "y", "both"),
}
CLASS_NAMES = {"label": ("ham", "spam"), "y": ("1", "2"), None: ("1", "2")}


def write_tasks(folder, fmt, labelled):
    suffix, writer, _, _ = FORMATS[fmt]
    paths = [folder / f"task{t}{suffix}" for t in (1, 2)]
    for path, X, y in zip(paths, (X1, X2), (Y1, Y2)):
        writer(path, X, y if labelled else None)
    return [str(p) for p in paths]


def dense(X):
    return X.toarray() if sp.issparse(X) else X


@pytest.mark.parametrize("fmt, labelled", [(fmt, labelled) for fmt, (*_, holds) in FORMATS.items()
                                           for labelled in (True, False)
                                           if holds in ("both", "labelled" if labelled else "unlabelled")])
def test_every_format_gives_the_tasks_it_holds(tmp_path, fmt, labelled):
    label_column = FORMATS[fmt][2]
    params = {"label_column": label_column} if labelled else {"n_clusters": [2, 3]}
    dataset = files.build_files(write_tasks(tmp_path, fmt, labelled), scale="none", **params)
    assert dataset.task_names == ["task1", "task2"]
    assert [t.X.shape for t in dataset.tasks] == [(6, 4), (5, 4)]
    np.testing.assert_array_equal(dense(dataset.tasks[0].X), X1)
    np.testing.assert_array_equal(dense(dataset.tasks[1].X), X2)
    assert dataset.labelled is labelled
    if labelled:
        assert dataset.n_clusters == [2, 2]
        assert all(t.class_names == CLASS_NAMES[label_column] for t in dataset.tasks)
        np.testing.assert_array_equal(dataset.tasks[0].y, Y1 - 1)
        np.testing.assert_array_equal(dataset.tasks[1].y, Y2 - 1)
    else:
        assert dataset.n_clusters == [2, 3]
        assert dataset.labels is None and all(t.y is None for t in dataset.tasks)
        assert [t.class_names for t in dataset.tasks] == [("cluster0", "cluster1"), ("cluster0", "cluster1", "cluster2")]


def test_a_task_column_splits_one_file_in_order_of_appearance(tmp_path):
    frame = pd.DataFrame(np.arange(14.0).reshape(7, 2), columns=["a", "b"])
    frame["site"] = ["north", "south", "north", "south", "south", "north", "north"]
    frame["label"] = [3, 1, 1, 3, 2, 3, 1]
    frame.to_parquet(tmp_path / "all.parquet")
    dataset = files.build_files([str(tmp_path / "all.parquet")], task_column="site", label_column="label",
                                 scale="none")
    assert dataset.task_names == ["north", "south"]
    np.testing.assert_array_equal(dataset.tasks[0].X, [[0, 1], [4, 5], [10, 11], [12, 13]])
    assert dataset.tasks[0].class_names == ("1", "3") and dataset.tasks[1].class_names == ("1", "2", "3")
    assert dataset.n_clusters == [2, 3]
    np.testing.assert_array_equal(dataset.tasks[1].y, [0, 2, 1])
    unlabelled = files.build_files([str(tmp_path / "all.parquet")], task_column="site", n_clusters=2, scale="none")
    assert unlabelled.n_features == 3 and unlabelled.n_clusters == [2, 2]  # the label column is a feature


def write_documents(folder, docs_by_class):
    for label, docs in docs_by_class.items():
        target = folder / label if label else folder
        target.mkdir(parents=True, exist_ok=True)
        for i, doc in enumerate(docs):
            (target / f"doc{i}.txt").write_text(doc)


def test_text_folders_share_one_vocabulary_labelled_by_sub_folders(tmp_path):
    write_documents(tmp_path / "forum", {"sport": ["football match goal", "goal keeper football"],
                                         "music": ["guitar concert", "concert piano guitar"]})
    write_documents(tmp_path / "news", {"sport": ["tennis match", "tennis final match"],
                                        "music": ["piano recital", "violin recital"], "food": ["bread oven"]})
    dataset = files.build_files([str(tmp_path / "forum"), str(tmp_path / "news")],
                                text={"stop_words": None, "tfidf": False, "l2_normalize": False})
    assert dataset.task_names == ["forum", "news"]
    assert dataset.tasks[0].class_names == ("music", "sport") and dataset.tasks[1].class_names == ("food", "music", "sport")
    assert dataset.n_clusters == [2, 3] and dataset.labelled is True
    terms = sorted({w for d in ["football match goal", "goal keeper football", "guitar concert", "concert piano guitar",
                                "tennis match", "tennis final match", "piano recital", "violin recital", "bread oven"]
                    for w in d.split()})
    assert dataset.n_features == len(terms) == dataset.meta["n_terms"]
    forum, news = (dense(t.X) for t in dataset.tasks)
    tennis, piano = terms.index("tennis"), terms.index("piano")
    assert forum[:, tennis].sum() == 0 and news[:, tennis].sum() == 2  # a news-only term is a column of both
    assert forum[:, piano].sum() == 1 and news[:, piano].sum() == 1  # a shared term is one column


def test_an_unlabelled_text_folder_needs_n_clusters(tmp_path):
    write_documents(tmp_path / "a", {"": ["red apple", "green apple", "blue sky", "grey sky"]})
    write_documents(tmp_path / "b", {"": ["apple pie", "sky high", "stormy sky"]})
    paths = [str(tmp_path / "a"), str(tmp_path / "b")]
    with pytest.raises(InputError, match=r"^the tasks have no labels \(data.params.label_column\): set "
                                         r"data.params.n_clusters, one integer or one per task$"):
        files.build_files(paths)
    dataset = files.build_files(paths, n_clusters=2)
    assert dataset.n_clusters == [2, 2] and dataset.labelled is False
    assert [t.n_samples for t in dataset.tasks] == [4, 3] and dataset.tasks[0].class_names == ("cluster0", "cluster1")


def test_n_clusters_is_one_count_or_one_per_task_and_the_classes_by_default(tmp_path):
    paths = write_tasks(tmp_path, "csv", labelled=False)
    assert files.build_files(paths, n_clusters=3).n_clusters == [3, 3]
    assert files.build_files(paths, n_clusters=[2, 4]).n_clusters == [2, 4]
    (tmp_path / "labelled").mkdir()
    labelled = write_tasks(tmp_path / "labelled", "csv", labelled=True)
    assert files.build_files(labelled, label_column="label").n_clusters == [2, 2]
    assert files.build_files(labelled, label_column="label", n_clusters=2).n_clusters == [2, 2]


def test_the_cache_is_hit_on_a_second_load_and_missed_after_a_file_changes(tmp_path, monkeypatch):
    paths = write_tasks(tmp_path, "csv", labelled=True)
    params = {"paths": paths, "label_column": "label", "scale": "none"}
    first = load_dataset("mine", "files", params, cache_dir=str(tmp_path / "cache"))
    assert [p.name for p in (tmp_path / "cache").glob("*.npz")] == [f"mine-{first.meta['cache_key']}.npz"]
    build = files.build_files
    monkeypatch.setattr(files, "build_files", lambda **kwargs: pytest.fail("rebuilt although cached"))
    again = load_dataset("mine", "files", params, cache_dir=str(tmp_path / "cache"))
    assert again.content_hash() == first.content_hash() and again.meta == first.meta
    assert again.labelled is True and again.tasks[0].class_names == ("ham", "spam")
    write_csv(paths[1], X2 + 1, Y2)  # same names, same size, new content
    monkeypatch.setattr(files, "build_files", build)
    changed = load_dataset("mine", "files", params, cache_dir=str(tmp_path / "cache"))
    assert changed.meta["cache_key"] != first.meta["cache_key"]
    np.testing.assert_array_equal(changed.tasks[1].X, X2 + 1)
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 2


def test_a_cached_files_dataset_is_recognised_without_pandas_or_scikit_learn(tmp_path):
    """What a finished sweep's rerun needs of the user's files (their remembered content hash and
    cache key, mtc.data.remembered_hash) hashes the files without importing mtc.data.files'
    readers: no pandas, no scikit-learn."""
    paths = write_tasks(tmp_path, "csv", labelled=True)
    params = {"paths": paths, "label_column": "label"}
    first = load_dataset("mine", "files", params, cache_dir=str(tmp_path / "cache"))
    script = ("import sys\nfrom mtc.data import remembered_hash\n"
              f"print(remembered_hash('mine', 'files', {params!r}, cache_dir={str(tmp_path / 'cache')!r}))\n"
              "print(sorted({name.split('.')[0] for name in sys.modules} & {'pandas', 'sklearn'}))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str((first.content_hash(), first.meta["cache_key"])), "[]"]


def test_tasks_without_labels_are_cached_without_labels(tmp_path, monkeypatch):
    params = {"paths": write_tasks(tmp_path, "csv", labelled=False), "n_clusters": [2, 3], "scale": "none"}
    first = load_dataset("mine", "files", params, cache_dir=str(tmp_path / "cache"))
    monkeypatch.setattr(files, "build_files", lambda **kwargs: pytest.fail("rebuilt although cached"))
    again = load_dataset("mine", "files", params, cache_dir=str(tmp_path / "cache"))
    assert again.labelled is False and again.labels is None and again.content_hash() == first.content_hash()
    assert [t.class_names for t in again.tasks] == [("cluster0", "cluster1"), ("cluster0", "cluster1", "cluster2")]
    np.testing.assert_array_equal(again.tasks[1].X, X2)


def test_the_data_config_takes_paths_and_checks_its_params(tmp_path, compose_config):
    paths = write_tasks(tmp_path, "tsv", labelled=True)
    cfg = compose_config("data=files", f"data.params.paths=[{paths[0]},{paths[1]}]", "data.params.label_column=label",
                         "data.name=mine", f"data.cache_dir={tmp_path / 'cache'}")
    dataset = data_spec(cfg.data).load()
    assert dataset.name == "mine" and dataset.task_names == ["task1", "task2"] and dataset.n_clusters == [2, 2]
    with pytest.raises(InputError, match="data.params.n_clusters must be an integer or a list or null, got 'two'"):
        data_spec(compose_config("data=files", "data.params.n_clusters=two").data)
    with pytest.raises(InputError, match="^data.params.paths is empty"):
        data_spec(compose_config("data=files", "data.name=mine").data).load()
    with pytest.raises(InputError, match=r"^data=files: name your data with data.name=<name>; it names the sweep"):
        data_spec(compose_config("data=files", f"data.params.paths=[{paths[0]}]").data)


def bad(tmp_path, name, writer=None, X=X1, y=Y1, text=None):
    """A file in tmp_path: written by ``writer``, or with ``text`` as its bytes."""
    path = tmp_path / name
    if text is not None:
        path.write_text(text)
    elif writer is not None:
        writer(path, X, y)
    return str(path)


def case_missing(tmp_path):
    return [str(tmp_path / "t1.csv")], {}


def case_unknown_format(tmp_path):
    return [bad(tmp_path, "t1.xlsx", text="a,b")], {}


def case_unreadable_npz(tmp_path):
    (tmp_path / "t1.npz").write_bytes(b"PK\x03\x04 cut short")
    return [str(tmp_path / "t1.npz")], {}


def case_unreadable_parquet(tmp_path):
    return [bad(tmp_path, "t1.parquet", text="a,b\n1,2\n")], {}


def case_unreadable_mat(tmp_path):
    return [bad(tmp_path, "t1.mat", text="MATLAB? no")], {}


def case_unreadable_svmlight(tmp_path):
    return [bad(tmp_path, "t1.svm", text="1 3:abc\n")], {}


def case_non_numeric_column(tmp_path):
    return [bad(tmp_path, "t1.csv", text="a,colour,label\n1,red,x\n2,blue,y\n")], {"label_column": "label"}


def case_nan_column(tmp_path):
    return [bad(tmp_path, "t1.csv", text="a,b,label\n1,,x\n2,3,y\n")], {"label_column": "label"}


def case_nan_in_array(tmp_path):
    X = X1.copy()
    X[2, 3] = np.nan
    return [bad(tmp_path, "t1.npy", write_npy, X)], {"n_clusters": 2}


def case_not_a_matrix(tmp_path):
    return [bad(tmp_path, "t1.npy", write_npy, X1[0])], {"n_clusters": 2}


def case_empty_table(tmp_path):
    return [bad(tmp_path, "t1.csv", text="a,b,label\n")], {"label_column": "label"}


def case_empty_folder(tmp_path):
    (tmp_path / "t1").mkdir()
    return [str(tmp_path / "t1")], {"n_clusters": 2}


def case_label_column_not_found(tmp_path):
    return [bad(tmp_path, "t1.csv", write_csv)], {"label_column": "class"}


def case_label_variable_not_found(tmp_path):
    return [bad(tmp_path, "t1.mat", write_mat)], {"label_column": "gnd"}


def case_label_column_of_a_npy(tmp_path):
    return [bad(tmp_path, "t1.npy", write_npy)], {"label_column": "y"}


def case_missing_labels(tmp_path):
    return [bad(tmp_path, "t1.csv", text="a,label\n1,x\n2,\n3,y\n")], {"label_column": "label"}


def case_task_column_not_found(tmp_path):
    return [bad(tmp_path, "t1.csv", write_csv)], {"task_column": "site", "label_column": "label"}


def case_fewer_samples_than_clusters(tmp_path):
    return [bad(tmp_path, "t1.csv", write_csv, X1[:3], None)], {"n_clusters": 4}


def case_one_class(tmp_path):
    return [bad(tmp_path, "t1.csv", write_csv, X1, np.ones(6, int))], {"label_column": "label"}


def case_ragged_feature_counts(tmp_path):
    return [bad(tmp_path, "t1.npy", write_npy), bad(tmp_path, "t2.npy", write_npy, X2[:, :3])], {"n_clusters": 2}


def case_other_columns(tmp_path):
    other = bad(tmp_path, "t2.csv", text="f0,f1,f2,g3,label\n1,2,3,4,x\n")
    return [bad(tmp_path, "t1.csv", write_csv), other], {"label_column": "label"}


def case_columns_in_another_order(tmp_path):
    other = bad(tmp_path, "t2.csv", text="f1,f0,f2,f3,label\n1,2,3,4,x\n")
    return [bad(tmp_path, "t1.csv", write_csv), other], {"label_column": "label"}


def case_labels_in_some_tasks(tmp_path):
    return [bad(tmp_path, "t1.svm", write_svmlight), bad(tmp_path, "t2.npy", write_npy)], {}


def case_same_task_twice(tmp_path):
    (tmp_path / "b").mkdir()
    return [bad(tmp_path, "t1.csv", write_csv), bad(tmp_path / "b", "t1.csv", write_csv)], {"label_column": "label"}


def case_files_beside_folders(tmp_path):
    write_documents(tmp_path / "docs", {"": ["a text"]})
    return [str(tmp_path / "docs"), bad(tmp_path, "t1.npy", write_npy)], {"n_clusters": 2}


def case_documents_beside_class_folders(tmp_path):
    write_documents(tmp_path / "docs", {"": ["loose"], "sport": ["match"]})
    return [str(tmp_path / "docs")], {}


def case_ambiguous_arrays(tmp_path):
    np.savez(tmp_path / "t1.npz", A=X1, B=X1)
    return [str(tmp_path / "t1.npz")], {"n_clusters": 2}


def case_no_paths(tmp_path):
    return [], {}


def case_n_clusters_too_many(tmp_path):
    return write_tasks(tmp_path, "npy", False), {"n_clusters": [2, 2, 2]}


def case_n_clusters_not_the_classes(tmp_path):
    return write_tasks(tmp_path, "csv", True)[:1], {"label_column": "label", "n_clusters": 3}


BAD = [  # (case, the message's one line; <tmp> is the case's folder)
    (case_missing, "<tmp>/t1.csv: missing file"),
    (case_unknown_format, "<tmp>/t1.xlsx: unknown format '.xlsx'; known: .csv, .libsvm, .mat, .npy, .npz, .parquet, "
                          ".svm, .svmlight, .tsv (CSV, TSV and svmlight also .gz or .bz2), or a folder of text documents"),
    (case_unreadable_npz, "<tmp>/t1.npz: unreadable as NumPy archive (BadZipFile: File is not a zip file)"),
    (case_unreadable_parquet, "<tmp>/t1.parquet: unreadable as Parquet (ArrowInvalid: "),
    (case_unreadable_mat, "<tmp>/t1.mat: unreadable as MATLAB ("),
    (case_unreadable_svmlight, "<tmp>/t1.svm: unreadable as svmlight (ValueError: "),
    (case_non_numeric_column, "<tmp>/t1.csv: non-numeric columns 'colour'"),
    (case_nan_column, "<tmp>/t1.csv: NaN or infinite values in columns 'b'"),
    (case_nan_in_array, "<tmp>/t1.npy: NaN or infinite values in the features, columns 3"),
    (case_not_a_matrix, "<tmp>/t1.npy: the features must be a 2-D samples x features array, got shape (4,)"),
    (case_empty_table, "<tmp>/t1.csv: no rows (empty task)"),
    (case_empty_folder, "<tmp>/t1: no documents (empty task)"),
    (case_label_column_not_found, "<tmp>/t1.csv: label column 'class' not found; columns: 'f0', 'f1', 'f2', 'f3', 'label'"),
    (case_label_variable_not_found, "<tmp>/t1.mat: label variable 'gnd' not found; variables: 'X', 'y'"),
    (case_label_column_of_a_npy, "<tmp>/t1.npy: label column 'y' not found: a NumPy file has no named columns"),
    (case_missing_labels, "<tmp>/t1.csv: label column 'label' has 1 missing values"),
    (case_task_column_not_found, "<tmp>/t1.csv: task column 'site' not found; columns: "),
    (case_fewer_samples_than_clusters, "<tmp>/t1.csv: task 't1' has 3 samples, fewer than its 4 clusters"),
    (case_one_class, "<tmp>/t1.csv: task 't1': its labels have one class ('ham'); clustering needs 2"),
    (case_ragged_feature_counts, "<tmp>/t2.npy: 3 features, but t1.npy has 4: every task needs the same features"),
    (case_other_columns, "<tmp>/t2.csv: feature columns differ from t1.csv's: missing 'f3'; extra 'g3'"),
    (case_columns_in_another_order, "<tmp>/t2.csv: feature columns differ from t1.csv's: the same columns in another "
                                    "order 'f1', 'f0', 'f2', 'f3'"),
    (case_labels_in_some_tasks, "<tmp>/t2.npy: task 't2' has no labels but 't1' has; give every task labels or none"),
    (case_same_task_twice, "<tmp>/b/t1.csv: task 't1' is also a task of <tmp>/t1.csv; task names must differ"),
    (case_files_beside_folders, "<tmp>/t1.npy: files beside text folders (<tmp>/docs); give folders of documents or "
                                "feature files, not both"),
    (case_documents_beside_class_folders, "<tmp>/docs: files 'doc0.txt' beside class sub-folders"),
    (case_ambiguous_arrays, "<tmp>/t1.npz: variables 'A', 'B': name the features with data.params.data_variable"),
    (case_no_paths, "data.params.paths is empty: give one file or text folder per task"),
    (case_n_clusters_too_many, "data.params.n_clusters has 3 entries but there are 2 tasks: task1, task2"),
    (case_n_clusters_not_the_classes, "<tmp>/task1.csv: task 'task1': n_clusters=3 but its labels have 2 classes "
                                      "('ham', 'spam'); with labels the two must agree"),
]


@pytest.mark.parametrize("case, message", BAD, ids=[case.__name__.removeprefix("case_") for case, _ in BAD])
def test_a_bad_input_is_one_line_naming_the_file(tmp_path, case, message):
    paths, params = case(tmp_path)
    with pytest.raises(InputError) as raised:
        files.build_files(paths, **params)
    text = str(raised.value)
    assert "\n" not in text
    assert text.startswith(message.replace("<tmp>", str(tmp_path))), text


def test_every_file_is_checked_and_each_problem_gets_its_line(tmp_path):
    paths = [str(tmp_path / "gone.csv"), bad(tmp_path, "t1.csv", text="a,colour\n1,red\n"),
             bad(tmp_path, "t2.csv", write_csv), bad(tmp_path, "t3.csv", text="a,b\n1,\n")]
    with pytest.raises(InputError) as raised:
        files.build_files(paths, label_column="label")
    assert str(raised.value).splitlines() == [
        f"{tmp_path}/gone.csv: missing file",
        f"{tmp_path}/t1.csv: label column 'label' not found; columns: 'a', 'colour'",
        f"{tmp_path}/t3.csv: label column 'label' not found; columns: 'a', 'b'",
    ]


def test_methods_fit_the_tasks_built_from_files(tmp_path):
    """scikit-learn's wine data, standardised, split into two tasks written as CSV: k-means
    finds the cultivars; SNMF fits the same tasks loaded without their labels."""
    from mtc.methods import KMeansClusterer, SymmetricNMF

    wine = load_wine(as_frame=True)
    features = (wine.data - wine.data.mean()) / wine.data.std()
    frame = features.assign(cultivar=wine.target.map(dict(enumerate(wine.target_names))))
    order = np.random.default_rng(0).permutation(len(frame))
    paths = [str(tmp_path / "vineyard_a.csv"), str(tmp_path / "vineyard_b.csv")]
    for path, rows in zip(paths, np.array_split(order, 2)):
        frame.iloc[rows].to_csv(path, index=False)
    dataset = load_dataset("wine", "files", {"paths": paths, "label_column": "cultivar"},
                           cache_dir=str(tmp_path / "cache"))
    assert dataset.task_names == ["vineyard_a", "vineyard_b"] and dataset.n_clusters == [3, 3]
    assert dataset.n_features == 13 and dataset.tasks[0].class_names == tuple(wine.target_names)
    kmeans = KMeansClusterer(n_clusters=dataset.n_clusters, random_state=0).fit(dataset.matrices)
    scores = [accuracy(task.y, labels) for task, labels in zip(dataset.tasks, kmeans.labels_)]
    assert min(scores) > 0.9, scores

    frame.drop(columns="cultivar").abs().to_csv(tmp_path / "all.csv", index=False)
    unlabelled = load_dataset("wine-unlabelled", "files", {"paths": [str(tmp_path / "all.csv")], "n_clusters": 3},
                              cache_dir=str(tmp_path / "cache"))
    snmf = SymmetricNMF(n_clusters=unlabelled.n_clusters, random_state=0).fit(unlabelled.matrices)
    assert unlabelled.labelled is False and snmf.labels_[0].shape == (178,)
    assert len(np.unique(snmf.labels_[0])) == 3


def test_describe_shows_unlabelled_tasks_and_all_skips_files(tmp_path, monkeypatch, capsys):
    from mtc.cli import available
    from mtc.data import __main__ as data_cli

    paths = write_tasks(tmp_path, "npy", labelled=False)
    text = data_cli.describe("files", [f"data.params.paths=[{paths[0]},{paths[1]}]", "data.params.n_clusters=[2,3]",
                                       "data.name=mine", f"data.cache_dir={tmp_path / 'cache'}"])
    assert text.splitlines()[:3] == ["mine: 2 tasks, 4 features", "  task1 (n=6, k=2): unlabelled",
                                     "  task2 (n=5, k=3): unlabelled"]
    described = []
    monkeypatch.setattr(data_cli, "describe", lambda name, overrides, seed: described.append(name) or name)
    assert data_cli.main(["describe", "all"]) == 0
    assert described == [name for name in available("data") if name != "files"] and "reuters" in described
    assert capsys.readouterr().out.splitlines() == described


# --- issue 50: a hostile user's files -------------------------------------------------------


def refused(paths, **params) -> str:
    """The one line build_files refuses ``paths`` with; a read that blocks (a FIFO opened)
    fails the test after 20 s instead of hanging it."""
    import signal

    def blocked(*_):
        raise AssertionError("build_files blocked: it opened what is not a regular file")

    previous = signal.signal(signal.SIGALRM, blocked)
    signal.alarm(20)
    try:
        with pytest.raises(InputError) as raised:
            files.build_files([str(p) for p in paths], **params)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    text = str(raised.value)
    assert "\n" not in text, text
    return text


def test_the_same_file_listed_twice_is_refused_naming_it(tmp_path):
    """It was one task, silently: the paths were a dict's keys."""
    path = tmp_path / "t1.csv"
    write_csv(path, X1, Y1)
    assert refused([path, path], label_column="label") == (f"{path}: listed twice in data.params.paths: each file or "
                                                           "folder is one task, list it once")
    assert refused([path, tmp_path / "." / "t1.csv"], label_column="label").startswith(f"{path}: listed twice")
    (tmp_path / "again.csv").hardlink_to(path)  # the same file by another name
    assert refused([path, tmp_path / "again.csv"], label_column="label").startswith(
        f"{tmp_path}/again.csv: listed twice in data.params.paths (also as {path})")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("apples and pears")
    assert refused([tmp_path / "docs", tmp_path / "docs"], n_clusters=2).startswith(f"{tmp_path}/docs: listed twice")


def documents(folder, **texts):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (folder / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    return folder


def test_a_binary_file_in_a_text_folder_is_refused_naming_it(tmp_path):
    """It became a document of replacement characters, silently; refused rather than skipped
    (read_documents' docstring says why). A stray Latin-1 letter in a text still passes."""
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4
    folder = documents(tmp_path / "docs", **{"a.txt": "apples and pears", "b.png": png})
    assert refused([folder], n_clusters=2) == (f"{folder}: document 'b.png' is binary (a NUL byte at offset 8), not "
                                               "a text document; remove it from the folder or convert it to UTF-8 "
                                               "text")
    greek = "καλημέρα κόσμε, ένα κείμενο σε άλλη κωδικοποίηση".encode("iso-8859-7")
    folder = documents(tmp_path / "greek", **{"a.txt": "apples and pears", "b.txt": greek})
    assert refused([folder], n_clusters=2).startswith(f"{folder}: document 'b.txt' is not UTF-8 text (")
    labelled = tmp_path / "labelled"
    documents(labelled / "fruit", **{"a.txt": "apples and pears", "b.txt": "plums and cherries"})
    documents(labelled / "veg", **{"c.txt": "leeks and onions", "d.pdf": b"%PDF-1.4\n\x00binary"})
    assert refused([labelled]).startswith(f"{labelled}: document 'veg/d.pdf' is binary")
    (labelled / "veg" / "d.pdf").write_bytes("caf\xe9 au lait with leeks and onions".encode("latin-1"))
    dataset = files.build_files([str(labelled)])
    assert dataset.tasks[0].n_samples == 4 and dataset.tasks[0].class_names == ("fruit", "veg")


def test_what_is_not_a_regular_file_is_refused_before_it_is_opened(tmp_path):
    """A FIFO hung the read (and /dev/zero would never end it): refused from its status."""
    import os

    os.mkfifo(tmp_path / "pipe.csv")
    assert refused([tmp_path / "pipe.csv"], label_column="label") == (
        f"{tmp_path}/pipe.csv: a FIFO (named pipe), not a regular file: give a data file or a folder of text documents")
    (tmp_path / "zero.npy").symlink_to("/dev/zero")
    assert refused([tmp_path / "zero.npy"], n_clusters=2).startswith(
        "/dev/zero: a character device, not a regular file")
    folder = documents(tmp_path / "docs" / "fruit", **{"a.txt": "apples and pears"}).parent
    documents(folder / "veg", **{"b.txt": "leeks and onions"})
    os.mkfifo(folder / "veg" / "c.txt")
    assert refused([folder]) == (f"{folder}: 'veg/c.txt' is a FIFO (named pipe), not a document (a regular file); "
                                 "remove it from the folder")
    (folder / "veg" / "c.txt").unlink()
    (folder / "veg" / "more").mkdir()
    assert refused([folder]).startswith(f"{folder}: 'veg/more' is a folder, not a document")


def test_the_config_refuses_what_is_not_a_regular_file_before_hashing_it(tmp_path, compose_config):
    """The cache key hashes every path before the builder runs: settings() refuses a FIFO
    first, or the sweep would hang there."""
    import os

    from mtc.config import settings

    os.mkfifo(tmp_path / "pipe.csv")
    cfg = compose_config("data=files", "data.name=mine", f"data.params.paths=[{tmp_path / 'pipe.csv'}]")
    with pytest.raises(InputError, match=f"^{tmp_path}/pipe.csv: a FIFO \\(named pipe\\), not a regular file"):
        settings(cfg)


def test_load_dataset_refuses_what_is_not_a_regular_file_before_hashing_it(tmp_path):
    """From Python, mtc.data.load_dataset hashed the paths for its cache key first and hung on
    a FIFO there (or read /dev/zero for ever): the key skips them, and the builder refuses them."""
    import os
    import signal

    os.mkfifo(tmp_path / "pipe.csv")
    (tmp_path / "zero.csv").symlink_to("/dev/zero")
    write_csv(tmp_path / "t1.csv", X1, Y1)

    def blocked(*_):
        raise AssertionError("load_dataset blocked: it read what is not a regular file")

    previous = signal.signal(signal.SIGALRM, blocked)
    signal.alarm(20)
    try:
        for bad, what in (("pipe.csv", f"{tmp_path}/pipe.csv: a FIFO (named pipe)"), ("zero.csv", "/dev/zero: a character device")):
            with pytest.raises(InputError, match=f"^{re.escape(what)}, not a regular file"):
                load_dataset("mine", "files", {"paths": [str(tmp_path / "t1.csv"), str(tmp_path / bad)],
                                               "label_column": "label"}, cache_dir=str(tmp_path / "cache"))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert not list((tmp_path / "cache").glob("*.npz"))  # nothing cached


@pytest.mark.parametrize("suffix, writer", [(".csv", "csv"), (".tsv", "tsv"), (".csv.gz", "csv.gz")])
def test_repeated_column_names_are_refused_naming_them(tmp_path, suffix, writer):
    """pandas renamed the second 'f1' to 'f1.1' and read it as another feature, silently."""
    frame = table(X1, Y1).set_axis(["f0", "f1", "f1", "f0", "label"], axis=1)
    path = tmp_path / f"t1{suffix}"
    sep = "\t" if writer == "tsv" else ","
    frame.to_csv(path, sep=sep, index=False, compression="gzip" if writer == "csv.gz" else None)
    assert refused([path], label_column="label") == (f"{path}: repeated column names 'f0', 'f1': every column needs "
                                                     "its own name (pandas would read a repeat as another feature, "
                                                     "renamed 'f0.1')")


def test_a_task_column_that_is_the_label_column_is_refused(tmp_path):
    """It was answered with a message about non-numeric columns or one class."""
    path = tmp_path / "t1.csv"
    write_csv(path, X1, Y1)
    assert refused([path], label_column="label", task_column="label") == (
        "data.params.task_column and data.params.label_column are both 'label': they must differ (one column names "
        "each row's task, the other its class)")
