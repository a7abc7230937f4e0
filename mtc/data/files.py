"""The user's own multi-task data (``data=files``): tasks read from files.

One task per path, named by the file (its name less the format suffix), or one file split by
a task column. The format is told by the suffix:

- ``.csv`` and ``.tsv`` (``.gz``/``.bz2`` compressed too) and ``.parquet``: a header row of
  column names; every column but the label and task columns is a feature;
- ``.npy``: one samples x features array (no labels);
- ``.npz``: a scipy sparse matrix written by ``scipy.sparse.save_npz`` (no labels), or named
  arrays written by ``numpy.savez``: the features (``data_variable``, or the one array that is
  neither the label nor the task variable), the labels and the tasks;
- ``.mat``: named MATLAB variables (dense or sparse), read like the arrays of an ``.npz``;
- ``.svm``, ``.svmlight``, ``.libsvm`` (``.gz``/``.bz2`` too): scikit-learn's svmlight reader;
  the first field of every line is its label, and indices count from 0, or from 1 when no file
  uses index 0 (scikit-learn's ``zero_based="auto"``, over all the files);
- a folder: a task of text documents, one sub-folder per class or every file unlabelled, all
  tasks vectorised with one shared vocabulary (mtc.data.text).

Every file is read and checked before any task is built; each problem is one line naming the
file and what is wrong, all of them in one InputError. Tasks share one feature space: tables
need the same feature columns in the same order, arrays the same number of columns. A path
must be a regular file or a folder, told by its status before it is opened (a FIFO would block
the read, ``/dev/zero`` never end it), and be listed once (the same file twice is one task
twice, which no multi-task method means); a table's column names must differ.

Labels are optional: without them ``n_clusters`` is required. A task without labels has
``y = None`` and clusters named ``cluster0``, ``cluster1``, ... (``mtc.tasks.cluster_names``);
every task has labels or none (``MultiTaskDataset.labelled``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import scipy.io
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

from mtc.data.scaling import AUTO, check_scale, resolved_scale, scaled
from mtc.data.sources import resolved
from mtc.data.text import binary_reason, not_a_regular_file, special_file, vectorize_tasks
from mtc.errors import InputError
from mtc.tasks import MultiTaskDataset, Task, cluster_names

TEXT_FORMATS = {".csv": "CSV", ".tsv": "TSV", ".svm": "svmlight", ".svmlight": "svmlight", ".libsvm": "svmlight"}
FORMATS = {**TEXT_FORMATS, **{suffix + packed: kind for suffix, kind in TEXT_FORMATS.items() for packed in (".gz", ".bz2")},
           ".parquet": "Parquet", ".npy": "NumPy", ".npz": "NumPy archive", ".mat": "MATLAB"}
SCIPY_SPARSE_NPZ = {"format", "shape", "data"}  # in every file scipy.sparse.save_npz writes
LABEL_LIKE = ("label", "labels", "class", "classes", "target", "y", "category")  # column names that hint at labels


class FileProblem(ValueError):
    """What is wrong with one file, in words that follow its path."""


@dataclass(frozen=True)
class Contents:
    """One file, read and checked.

    Attributes
    ----------
    X : ndarray or csr_matrix of shape (n_rows, n_features)
        The features as float64.
    labels : ndarray of shape (n_rows,) or None
        Every row's label as read (None without labels).
    groups : ndarray of shape (n_rows,) or None
        Every row's task (None without a task column).
    columns : tuple of str or None
        The feature columns' names (tables only).
    """

    X: np.ndarray | sp.csr_matrix
    labels: np.ndarray | None
    groups: np.ndarray | None
    columns: tuple[str, ...] | None


@dataclass(frozen=True)
class Part:
    """The rows of one task: where they come from, their features and labels (or None)."""

    name: str
    source: Path
    X: np.ndarray | sp.csr_matrix
    labels: np.ndarray | None


def file_format(path: Path) -> tuple[str, str]:
    """The format of a file and the suffix that told it.

    Parameters
    ----------
    path : Path
        A file's path.

    Returns
    -------
    kind : str
        The format's name, a value of ``FORMATS``.
    suffix : str
        The suffix that names it (``.csv.gz``: both suffixes).

    Raises
    ------
    FileProblem
        When no known format has the file's suffix.
    """
    for suffix in ("".join(path.suffixes[-2:]).lower(), path.suffix.lower()):
        if suffix in FORMATS:
            return FORMATS[suffix], suffix
    known = sorted(suffix for suffix in FORMATS if suffix.count(".") == 1)
    raise FileProblem(f"unknown format {path.suffix or '(no suffix)'!r}; known: {', '.join(known)} (CSV, TSV and "
                      f"svmlight also .gz or .bz2), or a folder of text documents")


def task_name(path: Path) -> str:
    """A task's name: the file's name less its format suffix, or the folder's name."""
    return path.name if path.is_dir() else path.name[:-len(file_format(path)[1])]


def first_line(error: Exception) -> str:
    """An exception's message in one line: its first, else its type's name."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def names(values) -> str:
    """Names quoted and comma-separated."""
    return ", ".join(map(repr, values))


def checked_matrix(X, what: str = "the features") -> np.ndarray | sp.csr_matrix:
    """A 2-D numeric matrix with finite entries as float64 (dense) or float64 CSR (sparse).

    Raises
    ------
    FileProblem
        Naming the columns with NaN or infinite values, a non-numeric type, or a shape that is
        not 2-D.
    """
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        values, columns = X.data, X.indices
    else:
        X = np.asarray(X)
        if X.ndim != 2:
            raise FileProblem(f"{what} must be a 2-D samples x features array, got shape {X.shape}")
        values, columns = X, np.broadcast_to(np.arange(X.shape[1]), X.shape)
    if X.dtype.kind not in "biuf":
        raise FileProblem(f"{what} are not numbers ({X.dtype})")
    bad = ~np.isfinite(values)
    if bad.any():
        raise FileProblem(f"NaN or infinite values in {what}, columns {', '.join(map(str, np.unique(columns[bad])))}")
    return X.astype(np.float64) if sp.issparse(X) else np.asarray(X, dtype=np.float64)


def checked_column(values, rows: int, kind: str, name: str) -> np.ndarray:
    """A label or task column: one value per row, none missing; integral floats as integers,
    strings stripped of MATLAB's padding."""
    values = np.asarray(values).ravel()
    if values.size != rows:
        raise FileProblem(f"{kind} {name!r} has {values.size} entries for {rows} rows")
    missing = pd.isna(values)
    if missing.any():
        raise FileProblem(f"{kind} {name!r} has {int(missing.sum())} missing values")
    if values.dtype.kind == "f" and np.array_equal(values, np.round(values)):
        return values.astype(np.int64)
    if values.dtype.kind in "OUS":
        return np.char.strip(values.astype(str))
    return values


def table_contents(frame: pd.DataFrame, label_column: str | None, task_column: str | None) -> Contents:
    """A table's features (every column but the label and task columns), labels and tasks."""
    if frame.empty:
        raise FileProblem("no rows (empty task)")
    frame = frame.rename(columns=str)
    repeated = frame.columns[frame.columns.duplicated()].unique()
    if len(repeated):
        raise FileProblem(f"repeated column names {names(repeated)}: every column needs its own name")
    named = {"label column": label_column, "task column": task_column}
    for kind, column in named.items():
        if column is not None and column not in frame.columns:
            raise FileProblem(f"{kind} {column!r} not found; columns: {names(frame.columns)}")
    features = frame.drop(columns=[c for c in named.values() if c is not None])
    if features.shape[1] == 0:
        raise FileProblem("no feature columns")
    text = [column for column, dtype in features.dtypes.items() if not pd.api.types.is_numeric_dtype(dtype)]
    if text:
        raise FileProblem(f"non-numeric columns {names(text)}")
    values = features.to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values).all(axis=0)
    if bad.any():
        raise FileProblem(f"NaN or infinite values in columns {names(features.columns[bad])}")
    columns = {kind: checked_column(frame[column], len(frame), kind, column) if column is not None else None
               for kind, column in named.items()}
    return Contents(values, columns["label column"], columns["task column"], tuple(features.columns))


def arrays_contents(arrays: dict[str, np.ndarray], label_column: str | None, task_column: str | None,
                    data_variable: str | None) -> Contents:
    """Named arrays (``numpy.savez``, MATLAB): the features, labels and tasks by variable name."""
    named = {"label variable": label_column, "task variable": task_column}
    for kind, name in named.items():
        if name is not None and name not in arrays:
            raise FileProblem(f"{kind} {name!r} not found; variables: {names(arrays)}")
    if data_variable is None:
        candidates = [name for name in arrays if name not in named.values()]
        if len(candidates) != 1:
            raise FileProblem(f"variables {names(candidates)}: name the features with data.params.data_variable")
        data_variable = candidates[0]
    elif data_variable not in arrays:
        raise FileProblem(f"feature variable {data_variable!r} not found; variables: {names(arrays)}")
    X = checked_matrix(arrays[data_variable], f"variable {data_variable!r}")
    columns = {kind: checked_column(arrays[name], X.shape[0], kind, name) if name is not None else None
               for kind, name in named.items()}
    return Contents(X, columns["label variable"], columns["task variable"], None)


def matrix_contents(X, labels, kind: str, label_column: str | None, task_column: str | None) -> Contents:
    """A format without named columns: a matrix and, for svmlight, the labels of its lines."""
    for what, column in (("label column", label_column), ("task column", task_column)):
        if column is not None:
            held = "its labels are each line's first field" if labels is not None else "it holds the features only"
            raise FileProblem(f"{what} {column!r} not found: a {kind} file has no named columns ({held})")
    X = checked_matrix(X)
    return Contents(X, None if labels is None else checked_column(labels, X.shape[0], "label column", "first field"),
                    None, None)


def read_npz(path: Path) -> sp.csr_matrix | dict[str, np.ndarray]:
    """A scipy sparse matrix (``save_npz``) or every named array (``savez``), read eagerly."""
    with np.load(path, allow_pickle=False) as archive:
        if SCIPY_SPARSE_NPZ <= set(archive.files):
            return sp.load_npz(path)
        return {name: archive[name] for name in archive.files}


def read_table(path: Path, sep: str = ",") -> pd.DataFrame:
    """A CSV or TSV table, refused when its header repeats a column name.

    pandas renames a repeated name on reading (``x``, ``x.1``: ``mangle_dupe_cols``, which
    turned that off, is gone since pandas 2.0; 3.1 renames too), so two columns named alike
    would be taken as two features silently; the header row is read again as data to see the
    names as written. Unnamed columns (pandas' ``Unnamed: i``) are not repeats.

    Raises
    ------
    FileProblem
        Naming the repeated column names.
    """
    frame = pd.read_csv(path, sep=sep)
    header = pd.read_csv(path, sep=sep, header=None, nrows=1, dtype=str, keep_default_na=False).iloc[0]
    written = [name for name in header.tolist() if name != ""]
    repeated = sorted({name for name in written if written.count(name) > 1})
    if repeated:
        raise FileProblem(f"repeated column names {names(repeated)}: every column needs its own name (pandas "
                          f"would read a repeat as another feature, renamed {repeated[0] + '.1'!r})")
    return frame


LOADERS = {
    "CSV": read_table,
    "TSV": lambda path: read_table(path, sep="\t"),
    "Parquet": pd.read_parquet,
    "NumPy": lambda path: np.load(path, allow_pickle=False),
    "NumPy archive": read_npz,
    "MATLAB": lambda path: {k: v for k, v in scipy.io.loadmat(path).items() if not k.startswith("__")},
    "svmlight": lambda path: load_svmlight_file(str(path), zero_based=True),
}


def read_file(path: Path, label_column: str | None, task_column: str | None, data_variable: str | None) -> Contents:
    """One file read by its format's library loader, then checked.

    Parameters
    ----------
    path : Path
        An existing file.
    label_column, task_column : str or None
        The labels' and the tasks' column (table) or variable (``.npz``, ``.mat``).
    data_variable : str or None
        The features' variable (``.npz``, ``.mat``).

    Returns
    -------
    Contents

    Raises
    ------
    FileProblem
        What is wrong with the file, in one line.
    """
    kind = file_format(path)[0]
    try:
        loaded = LOADERS[kind](path)
    except FileProblem:
        raise
    except Exception as error:  # whatever the library raises on a file it cannot parse
        raise FileProblem(f"unreadable as {kind} ({type(error).__name__}: {first_line(error)})") from None
    if isinstance(loaded, pd.DataFrame):
        contents = table_contents(loaded, label_column, task_column)
    elif isinstance(loaded, dict):
        contents = arrays_contents(loaded, label_column, task_column, data_variable)
    elif isinstance(loaded, tuple):  # svmlight: (X, y)
        contents = matrix_contents(*loaded, kind, label_column, task_column)
    else:
        contents = matrix_contents(loaded, None, kind, label_column, task_column)
    if contents.X.shape[0] == 0:
        raise FileProblem("no rows (empty task)")
    return contents


def read_documents(folder: Path, label_column: str | None, task_column: str | None) -> tuple[list[str], np.ndarray | None]:
    """A folder of text documents: (documents, class of each or None).

    One sub-folder per class (as scikit-learn's ``load_files``: classes and documents in name
    order), or files only (unlabelled). Every entry is checked before any is opened: a
    document must be a regular file (a FIFO would block the read, a device never end it, a
    folder inside a class folder is not one). A document whose bytes are not text
    (``mtc.data.text.binary_reason``: a NUL byte, or mostly invalid UTF-8) is refused rather
    than skipped: skipping would change the task's documents without the user's say, and a
    folder of PDFs or images would turn into a smaller, or an empty, task with only a note to
    tell; refused, the line names the file to remove or convert, as every other bad file is
    named. A few invalid UTF-8 bytes in a text are decoded as U+FFFD.

    Raises
    ------
    FileProblem
        For a label or task column (a folder has none), files beside class sub-folders, an
        entry that is not a regular file, a binary document, or no document.
    """
    for what, column in (("label column", label_column), ("task column", task_column)):
        if column is not None:
            raise FileProblem(f"{what} {column!r} not found: a folder of documents is one task, labelled by its "
                              f"class sub-folders")
    try:
        members = sorted(folder.iterdir())
        classes = [p for p in members if p.is_dir()]
        files = [p for p in members if not p.is_dir()]
        if files and classes:
            raise FileProblem(f"files {names(p.name for p in files[:3])} beside class sub-folders: put every "
                              f"document in a class sub-folder, or none")
        entries = [(p, None) for p in files] or [(p, c.name) for c in classes for p in sorted(c.iterdir())]
        odd = [(p, special_file(p) or "a folder") for p, _ in entries if p.is_dir() or special_file(p)]
        if odd:
            (first, what), more = odd[0], f" (and {len(odd) - 1} more entries)" if len(odd) > 1 else ""
            raise FileProblem(f"{str(first.relative_to(folder))!r} is {what}, not a document (a regular file){more}; "
                              f"remove it from the folder")
        texts = []
        for path, _ in entries:
            data = path.read_bytes()
            reason = binary_reason(data)
            if reason:
                raise FileProblem(f"document {str(path.relative_to(folder))!r} is {reason}, not a text document; "
                                  f"remove it from the folder or convert it to UTF-8 text")
            texts.append(data.decode("utf-8", errors="replace"))
    except OSError as error:  # e.g. a file without read permission, a dangling link
        raise FileProblem(f"unreadable documents ({type(error).__name__}: {first_line(error)})") from None
    if not texts:
        raise FileProblem("no documents (empty task)")
    return texts, None if files else np.asarray([label for _, label in entries])


def align_svmlight(contents: dict[Path, Contents]) -> dict[Path, Contents]:
    """svmlight matrices over one feature range: indices from 1 when no file uses index 0
    (scikit-learn's ``zero_based="auto"`` over all the files), every matrix as wide as the widest."""
    svm = {path: c for path, c in contents.items() if file_format(path)[0] == "svmlight"}
    if not svm:
        return contents
    first = int(not any(c.X[:, 0].nnz for c in svm.values()))
    width = max(c.X.shape[1] for c in svm.values()) - first
    aligned = {path: Contents(sp.csr_matrix((c.X.data, c.X.indices - first, c.X.indptr), shape=(c.X.shape[0], width)),
                              c.labels, c.groups, c.columns) for path, c in svm.items()}
    return {**contents, **aligned}


def alignment_problems(contents: dict[Path, Contents]) -> list[str]:
    """One line per file whose features do not match the first file's (names and order for
    tables, counts for the rest)."""
    (first_path, first), *others = contents.items()
    problems = []
    for path, c in others:
        if c.columns is not None and first.columns is not None and c.columns != first.columns:
            missing = [name for name in first.columns if name not in c.columns]
            extra = [name for name in c.columns if name not in first.columns]
            what = "; ".join(part for part in (f"missing {names(missing)}" if missing else "",
                                               f"extra {names(extra)}" if extra else "") if part)
            problems.append(f"{path}: feature columns differ from {first_path.name}'s: "
                            f"{what or 'the same columns in another order ' + names(c.columns)}")
        elif c.X.shape[1] != first.X.shape[1]:
            problems.append(f"{path}: {c.X.shape[1]} features, but {first_path.name} has {first.X.shape[1]}: "
                            f"every task needs the same features")
    return problems


def file_parts(contents: dict[Path, Contents]) -> list[Part]:
    """Each file as one task named by the file, or split by its task column (tasks in order of
    first appearance, named by the column's values)."""
    parts = []
    for path, c in contents.items():
        if c.groups is None:
            parts.append(Part(task_name(path), path, c.X, c.labels))
            continue
        codes, tasks = pd.factorize(c.groups)
        for code, name in enumerate(tasks):
            rows = np.flatnonzero(codes == code)
            parts.append(Part(str(name), path, c.X[rows], None if c.labels is None else c.labels[rows]))
    return parts


def text_parts(documents: dict[Path, tuple[list[str], np.ndarray | None]], text: dict,
               drop_empty: bool) -> tuple[list[Part], dict]:
    """Every folder's documents vectorised with one shared vocabulary, documents left without
    a kept term dropped (``drop_empty``); also the meta the text compositions record."""
    try:
        matrices, terms = vectorize_tasks([docs for docs, _ in documents.values()], **text)
    except ValueError as error:  # scikit-learn: no term is left (empty vocabulary)
        raise InputError(f"text folders {', '.join(map(str, documents))}: {first_line(error)}") from None
    parts, dropped = [], {}
    for (path, (_, labels)), X in zip(documents.items(), matrices):
        keep = np.diff(X.indptr) > 0 if drop_empty else np.ones(X.shape[0], bool)
        dropped[task_name(path)] = int((~keep).sum())
        parts.append(Part(task_name(path), path, X[keep], None if labels is None else labels[keep]))
    return parts, {"n_terms": len(terms), "dropped_empty": dropped}


def cluster_counts(n_clusters: int | list[int] | None, parts: list[Part]) -> list[int | None]:
    """``data.params.n_clusters`` as one count (or None) per task.

    Raises
    ------
    InputError
        For a value that is not an integer of at least 2 (or a list of them), a list of the
        wrong length, or no value when the tasks have no labels.
    """
    if n_clusters is None:
        if parts[0].labels is None:
            raise InputError("the tasks have no labels (data.params.label_column): set data.params.n_clusters, "
                             "one integer or one per task")
        return [None] * len(parts)
    counts = [n_clusters] * len(parts) if isinstance(n_clusters, int) else list(n_clusters)
    if not all(isinstance(k, int) and not isinstance(k, bool) and k >= 2 for k in counts):
        raise InputError(f"data.params.n_clusters must be an integer of at least 2 or a list of them, one per task; "
                         f"got {n_clusters!r}")
    if len(counts) != len(parts):
        raise InputError(f"data.params.n_clusters has {len(counts)} entries but there are {len(parts)} tasks: "
                         f"{', '.join(p.name for p in parts)}")
    return counts


def task_of(part: Part, n_clusters: int | None) -> Task:
    """The Task of a part's rows with its classes (labels) or ``n_clusters`` unnamed clusters.

    Raises
    ------
    FileProblem
        For an empty task, fewer than 2 clusters, fewer samples than clusters, or an
        ``n_clusters`` that differs from the labels' number of classes.
    """
    n = part.X.shape[0]
    if n == 0:
        raise FileProblem(f"task {part.name!r} has no samples left (empty task)")
    if part.labels is None:
        y, classes = None, cluster_names(n_clusters)
    else:
        found, y = np.unique(part.labels, return_inverse=True)
        classes = tuple(map(str, found))
        if n_clusters is not None and n_clusters != len(classes):
            raise FileProblem(f"task {part.name!r}: n_clusters={n_clusters} but its labels have {len(classes)} "
                              f"classes ({names(classes)}); with labels the two must agree")
        if len(classes) < 2:
            raise FileProblem(f"task {part.name!r}: its labels have one class ({classes[0]!r}); clustering needs 2")
    if n < len(classes):
        raise FileProblem(f"task {part.name!r} has {n} samples, fewer than its {len(classes)} clusters")
    return Task(part.name, part.X, y, classes)


def raise_problems(problems: list[str]) -> None:
    """Raise one InputError with a line per problem, if there is any."""
    if problems:
        raise InputError("\n".join(problems))


def label_like_note(contents: dict[Path, Contents], label_column: str | None) -> list[str]:
    """One note when a feature column is named like a label (LABEL_LIKE) and is not the label column."""
    found = sorted({column for c in contents.values() for column in c.columns or ()
                    if column.strip().lower() in LABEL_LIKE and column != label_column})
    if not found:
        return []
    return [f"feature column(s) {names(found)} look like labels but are clustered as features; if they are the "
            f"classes, set data.params.label_column={found[0]}"]


def scaled_parts(parts: list[Part], scale: str, scale_fit: str) -> list[Part]:
    """The parts' features after ``data.params.scale`` (mtc.data.scaling)."""
    matrices = scaled([part.X for part in parts], scale, scale_fit)
    return [Part(part.name, part.source, X, part.labels) for part, X in zip(parts, matrices)]


def build_files(paths: list[str], *, task_column: str | None = None, label_column: str | None = None,
                n_clusters: int | list[int] | None = None, data_variable: str | None = None,
                text: dict | None = None, drop_empty: bool = True, scale: str = AUTO,
                scale_fit: str = "pooled") -> MultiTaskDataset:
    """Tasks from the user's files, every file checked first.

    Parameters
    ----------
    paths : list of str
        One file or text folder per task (relative paths: against the working directory), or
        one file with ``task_column``. The format is told by the suffix (module docstring).
    task_column : str, optional
        The column (``.npz``/``.mat``: variable) naming each row's task; tasks come in order
        of first appearance.
    label_column : str, optional
        The column (``.npz``/``.mat``: variable) of the class labels. svmlight files carry
        their labels, text folders theirs as class sub-folders; ``.npy`` and scipy sparse
        ``.npz`` files have none. Every task has labels or none.
    n_clusters : int or list of int, optional
        Clusters per task, one count or one per task: required without labels; with labels
        the number of classes, which a given value must equal.
    data_variable : str, optional
        The features' variable in ``.npz``/``.mat`` files (default: the one array that is
        neither the label nor the task variable).
    text : dict, optional
        ``mtc.data.text.vectorize_tasks`` settings for text folders (conf/text/default.yaml).
    drop_empty : bool, default=True
        Drop documents left without a kept term.
    scale : str, default="auto"
        What is done to the features of tables and arrays (mtc.data.scaling.SCALES); ``auto``:
        the measured default for a method that takes any input (a sweep replaces ``auto`` by
        the default for its method's input needs before it loads). Text folders are scaled by
        ``text``'s settings: ``auto`` or the scale those give (mtc.data.scaling.text_scale,
        ``tfidf`` by default), nothing else.
    scale_fit : {"pooled", "per_task"}, default="pooled"
        What a column scaler is fitted on: every task's rows together, or each task's own.

    Returns
    -------
    MultiTaskDataset
        Named ``files``; its tasks have labels or none (``labelled``); its ``meta`` holds the
        ``scale`` and ``scale_fit`` applied, and ``notes`` (a feature column named like a
        label); text folders add ``n_terms`` and ``dropped_empty``.

    Raises
    ------
    InputError
        One line per problem, each naming the file: missing, unknown or unreadable format,
        non-numeric column, NaN, no rows, label or task column not found, features that differ
        from the first file's, tasks with and without labels, a task of fewer samples than
        clusters.
    """
    if not paths:
        raise InputError("data.params.paths is empty: give one file or text folder per task "
                         "(or one file and data.params.task_column)")
    if task_column is not None and task_column == label_column:
        raise InputError(f"data.params.task_column and data.params.label_column are both {task_column!r}: they must "
                         f"differ (one column names each row's task, the other its class)")
    read, problems, listed = {}, [], {}
    for path in map(resolved, paths):
        try:
            if not path.exists():
                raise FileProblem("missing file")
            if not_a_regular_file(path):
                raise FileProblem(not_a_regular_file(path))
            identity = (path.stat().st_dev, path.stat().st_ino)  # the same file by another name too (a hard link)
            if identity in listed:
                also = f" (also as {listed[identity]})" if listed[identity] != path else ""
                raise FileProblem(f"listed twice in data.params.paths{also}: each file or folder is one task, list it "
                                  f"once")
            listed[identity] = path
            read[path] = (read_documents(path, label_column, task_column) if path.is_dir()
                          else read_file(path, label_column, task_column, data_variable))
        except FileProblem as problem:
            problems.append(f"{path}: {problem}")
    raise_problems(problems)
    folders = [path for path in read if path.is_dir()]
    if folders and len(folders) < len(read):
        raise InputError(f"{', '.join(str(p) for p in read if not p.is_dir())}: files beside text folders "
                         f"({', '.join(map(str, folders))}); give folders of documents or feature files, not both")
    meta = {"builder": "files"}
    if folders:
        scale = resolved_scale(scale, text=text, text_folders=True)
        parts, text_meta = text_parts(read, text or {}, drop_empty)
        meta.update(text_meta, scale=scale, scale_fit="pooled")
    else:
        read = align_svmlight(read)
        raise_problems(alignment_problems(read))
        scale = resolved_scale(scale)
        check_scale(scale, scale_fit, [c.X for c in read.values()])
        parts = file_parts(read)
        meta.update(scale=scale, scale_fit=scale_fit, notes=label_like_note(read, label_column))
    seen = {}
    for part in parts:
        if part.name in seen:
            problems.append(f"{part.source}: task {part.name!r} is also a task of {seen[part.name]}; "
                            f"task names must differ")
        seen.setdefault(part.name, part.source)
    labelled = [part.labels is not None for part in parts]
    if any(labelled) and not all(labelled):
        problems += [f"{part.source}: task {part.name!r} has no labels but {parts[labelled.index(True)].name!r} has; "
                     f"give every task labels or none" for part, has in zip(parts, labelled) if not has]
    raise_problems(problems)
    if not folders:  # every file checked first: the problems above name the files as read
        parts = scaled_parts(parts, scale, scale_fit)
    tasks = []
    for part, k in zip(parts, cluster_counts(n_clusters, parts)):
        try:
            tasks.append(task_of(part, k))
        except FileProblem as problem:
            problems.append(f"{part.source}: {problem}")
    raise_problems(problems)
    return MultiTaskDataset("files", tuple(tasks), meta)
