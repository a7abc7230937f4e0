"""Builders that turn raw corpora into the papers' multi-task compositions.

A builder takes the verified raw-file paths and the params of a ``conf/data/*.yaml`` and
returns a MultiTaskDataset. Several data configs share a builder (e.g. every 20 Newsgroups
split uses ``newsgroups``); each config records the paper and table it follows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.io
import scipy.sparse as sp

from mtc.errors import InputError
from mtc.data.corpora import read_idx, read_newsgroups, read_reuters, read_usps, read_webkb
from mtc.data.text import tfidf_weights, vectorize_tasks
from mtc.tasks import MultiTaskDataset, Task


def text_tasks(name: str, task_docs: list[tuple[str, list[str], list[int], tuple[str, ...]]], text: dict,
               drop_empty: bool, meta: dict) -> MultiTaskDataset:
    """Vectorise (task name, documents, labels, class names) with one shared vocabulary."""
    matrices, terms = vectorize_tasks([docs for _, docs, _, _ in task_docs], **text)
    tasks, dropped = [], {}
    for (task_name, _, labels, classes), X in zip(task_docs, matrices):
        labels = np.asarray(labels)
        keep = np.diff(X.indptr) > 0 if drop_empty else np.ones(X.shape[0], bool)
        dropped[task_name] = int((~keep).sum())
        tasks.append(Task(task_name, X[keep], labels[keep], classes))
    return MultiTaskDataset(name, tuple(tasks), {**meta, "n_terms": len(terms), "dropped_empty": dropped})


def balanced_sample(rng: np.random.Generator, labels: np.ndarray, total: int | None) -> np.ndarray:
    """Sorted row indices: total // n_classes per class at random (all rows when total is None)."""
    if total is None:
        return np.arange(len(labels))
    classes = np.unique(labels)
    if total < len(classes):
        raise InputError(f"samples_per_task={total} is fewer than the {len(classes)} classes of a task: each class "
                         f"needs a sample; use samples_per_task={len(classes)} or more (or null: every sample)")
    per_class = total // len(classes)
    picks = []
    for c in classes:
        rows = np.flatnonzero(labels == c)
        if per_class > rows.size:
            raise InputError(f"samples_per_task={total} needs {per_class} per class, class {c} has {rows.size}")
        picks.append(rng.choice(rows, per_class, replace=False))
    return np.sort(np.concatenate(picks))


RANDOM_TRIES = 1000  # redraws allowed for a random sample that misses a class


def random_sample(rng: np.random.Generator, labels: np.ndarray, total: int | None) -> np.ndarray:
    """Sorted row indices: ``total`` rows uniformly at random without replacement, given that
    every class has a row (a draw that misses one is redrawn from ``rng``); all rows when
    total is None. The class proportions follow the task's, as in a plain random pick."""
    if total is None:
        return np.arange(len(labels))
    classes = np.unique(labels)
    if not len(classes) <= total <= len(labels):
        raise InputError(f"samples_per_task={total} must be between the {len(classes)} classes and the "
                         f"{len(labels)} samples of a task (sampling=random); use a size in that range or null")
    for _ in range(RANDOM_TRIES):
        rows = rng.choice(len(labels), total, replace=False)
        if np.unique(labels[rows]).size == len(classes):
            return np.sort(rows)
    raise InputError(f"samples_per_task={total} with sampling=random missed a class in {RANDOM_TRIES} draws; "
                     "use a larger samples_per_task or sampling=balanced")


SAMPLERS = {"balanced": balanced_sample, "random": random_sample}


def check_sampling(sampling: str) -> None:
    """``sampling`` names a sampler, checked before a builder reads its corpus."""
    if sampling not in SAMPLERS:
        raise InputError(f"data.params.sampling must be one of {', '.join(SAMPLERS)}, got {sampling!r}")


def sample_rows(rng: np.random.Generator, labels: np.ndarray, total: int | None, sampling: str) -> np.ndarray:
    """The rows of one task's draw: ``balanced`` (total // n_classes per class, the default) or
    ``random`` (uniform over the task, every class present)."""
    return SAMPLERS[sampling](rng, labels, total)


def build_webkb(paths, *, universities: list[str], classes: dict[str, list[str]], text: dict,
                drop_empty: bool = True, samples_per_task: int | None = None, seed: int = 0,
                keep_http_header: bool = False, sampling: str = "balanced") -> dict:
    """Tasks = universities; a class may merge raw WebKB classes (project vs personal).
    ``keep_http_header`` keeps each page's HTTP header lines as text (server, dates, content
    type): not the documented rule, a variant of the WebKB4 fidelity study (docs/results/mtcmrl.md).
    ``samples_per_task`` draws that many pages per university as ``sampling`` says (sample_rows)."""
    check_sampling(sampling)
    raw_classes = sorted({c for members in classes.values() for c in members})
    pages = read_webkb(paths["webkb"], tuple(raw_classes), tuple(universities), keep_http_header)
    rng = np.random.default_rng(seed)
    task_docs = []
    for university in universities:
        docs, labels = [], []
        for label, members in enumerate(classes.values()):
            for raw in members:
                found = pages.get((university, raw), [])
                docs += [text_ for _, text_ in found]
                labels += [label] * len(found)
        rows = sample_rows(rng, np.array(labels), samples_per_task, sampling)
        task_docs.append((university, [docs[i] for i in rows], [labels[i] for i in rows], tuple(classes)))
    return {"task_docs": task_docs, "text": text, "drop_empty": drop_empty}


def build_reuters(paths, *, tasks: dict[str, list[str]], text: dict, modapte: bool = True,
                  single_topic: bool = True, require_body: bool = True, drop_empty: bool = True) -> dict:
    """Each task = a few topics; the document rule (ModApte, one topic, a BODY) is configurable."""
    docs = read_reuters(paths["reuters21578"])
    if modapte:
        docs = [d for d in docs if d.get("LEWISSPLIT") in ("TRAIN", "TEST") and d.get("TOPICS") == "YES"]
    if single_topic:
        docs = [d for d in docs if len(d["topics"]) == 1]
    if require_body:
        docs = [d for d in docs if d["body"] is not None]
    task_docs = []
    for task_name, topics in tasks.items():
        chosen = [(d, topics.index(t)) for d in docs for t in d["topics"][:1] if t in topics]
        task_docs.append((task_name, [f"{d['title']}\n{d['body'] or ''}" for d, _ in chosen],
                          [label for _, label in chosen], tuple(topics)))
    return {"task_docs": task_docs, "text": text, "drop_empty": drop_empty}


def build_newsgroups(paths, *, tasks: list[dict], text: dict, splits: list[str] = ("train", "test"),
                     per_class: int | None = None, samples_per_task: int | None = None, seed: int = 0,
                     strip_headers: bool = True, drop_empty: bool = True, sampling: str = "balanced") -> dict:
    """Tasks over newsgroups. Per task: ``groups``; ``labels`` "group" (default) or "top"
    (the top category, e.g. comp); ``part: [i, n]`` keeps the i-th of n random parts of the
    pooled documents (NG1). ``per_class`` samples that many posts per group once, shared by
    every task that uses the group (NG2, NG3); ``samples_per_task`` then subsamples each task,
    evenly over its classes or as ``sampling`` says (sample_rows; SMT-NMF)."""
    check_sampling(sampling)
    groups = sorted({g for task in tasks for g in task["groups"]})
    posts = dict(read_newsgroups(paths["20news"], tuple(groups), tuple(splits), strip_headers))  # a copy: read-only
    rng = np.random.default_rng(seed)
    if per_class is not None:
        for group in groups:
            picks = np.sort(rng.choice(len(posts[group]), per_class, replace=False))
            posts[group] = [posts[group][i] for i in picks]
    task_docs = []
    for task in tasks:
        by = task.get("labels", "group")
        names = task["groups"] if by == "group" else list(dict.fromkeys(g.split(".")[0] for g in task["groups"]))
        docs, labels = [], []
        for group in task["groups"]:
            label = names.index(group if by == "group" else group.split(".")[0])
            docs += [text_ for _, text_ in posts[group]]
            labels += [label] * len(posts[group])
        labels = np.array(labels)
        if "part" in task:
            index, parts = task["part"]
            order = np.random.default_rng([seed, parts]).permutation(len(docs))
            rows = np.sort(np.array_split(order, parts)[index])
        else:
            rows = sample_rows(rng, labels, samples_per_task, sampling)
        task_docs.append((task["name"], [docs[i] for i in rows], labels[rows].tolist(), tuple(names)))
    return {"task_docs": task_docs, "text": text, "drop_empty": drop_empty}


def downsample_images(images: np.ndarray, size: int) -> np.ndarray:
    """Area-average resize of n x h x w images to n x size x size (28 -> 16 for MNIST).

    Each output pixel averages the input area it covers (exact box filter, fractional
    overlaps weighted), written as two small matrix products: R @ image @ R^T.
    """
    h = images.shape[1]
    edges = np.linspace(0, h, size + 1)
    lo, hi = edges[:-1, None], edges[1:, None]
    cells = np.arange(h)[None, :]
    R = np.clip(np.minimum(hi, cells + 1) - np.maximum(lo, cells), 0, None) / (h / size)
    return np.einsum("ij,njk,lk->nil", R, images, R)


def build_handdigits(paths, *, mnist_counts: list[int], usps_counts: list[int], seed: int = 0,
                     mnist_crop: int = 28) -> MultiTaskDataset:
    """MNIST and USPS, 16 x 16 pixels in [0, 1], sampled to the given per-digit counts.

    MNIST is cropped to its central ``mnist_crop`` x ``mnist_crop`` pixels (28: no crop; 20:
    the box MNIST's digits were size-normalised into, so they fill the frame as USPS digits
    do) and area-averaged to 16 x 16."""
    if not 16 <= mnist_crop <= 28:
        raise InputError(f"mnist_crop must be in [16, 28], got {mnist_crop}")
    rng = np.random.default_rng(seed)
    mnist_images = [read_idx(paths["mnist_test_images"])]
    mnist_labels = [read_idx(paths["mnist_test_labels"])]
    if "mnist_train_images" in paths:
        mnist_images.append(read_idx(paths["mnist_train_images"]))
        mnist_labels.append(read_idx(paths["mnist_train_labels"]))
    margin = (28 - mnist_crop) // 2
    mnist = np.concatenate(mnist_images)[:, margin:margin + mnist_crop, margin:margin + mnist_crop]
    mnist = downsample_images(mnist.astype(float) / 255.0, 16).reshape(-1, 256)
    usps_X, usps_y = read_usps([paths["usps_train"], paths["usps_test"]])
    tasks = []
    for name, X, y, counts in (("mnist", mnist, np.concatenate(mnist_labels), mnist_counts),
                               ("usps", usps_X, usps_y, usps_counts)):
        rows = np.sort(np.concatenate([rng.choice(np.flatnonzero(y == d), n, replace=False)
                                       for d, n in enumerate(counts)]))
        tasks.append(Task(name, X[rows], y[rows].astype(int), tuple(str(d) for d in range(10))))
    return MultiTaskDataset("handdigits", tuple(tasks), {"mnist_pool": "test+train" if len(mnist_images) == 2 else "test"})


def build_matfiles(paths, *, tasks: dict[str, dict], class_names: list[str], tfidf: bool,
                   l2_normalize: bool = True, samples_per_task: int | None = None, drop_unused_terms: bool = False,
                   seed: int = 0, sampling: str = "balanced") -> MultiTaskDataset:
    """Preprocessed two-class problems (.mat, term counts): per task the raw-file key and
    variable names. Weights: tf-idf over all tasks or the stored counts, rows L2-normalised
    unless ``l2_normalize`` is False (``tfidf: false, l2_normalize: false``: the raw counts).
    ``samples_per_task`` draws that many rows per task, evenly over the classes or as
    ``sampling`` says (sample_rows);
    ``drop_unused_terms`` then keeps only the terms the drawn rows contain (a vocabulary per
    draw, SMT-NMF Table 2), in the stored column order."""
    check_sampling(sampling)
    rng = np.random.default_rng(seed)
    matrices, labels = [], []
    for spec in tasks.values():
        mat = scipy.io.loadmat(paths[spec["file"]])
        y = np.asarray(mat[spec["labels"]]).ravel().astype(int) - 1  # stored as 1/2
        rows = sample_rows(rng, y, samples_per_task, sampling)
        matrices.append(sp.csr_matrix(mat[spec["data"]], dtype=np.float64)[rows])
        labels.append(y[rows])
    counts = sp.vstack(matrices, format="csr")
    if drop_unused_terms:
        counts = counts[:, np.flatnonzero(counts.getnnz(axis=0))]
    weights = tfidf_weights(counts, tfidf=tfidf, l2_normalize=l2_normalize)
    bounds = np.cumsum([m.shape[0] for m in matrices])[:-1]
    parts = np.split(np.arange(weights.shape[0]), bounds)
    return MultiTaskDataset("matfiles", tuple(Task(n, weights[r], y, tuple(class_names))
                                              for n, r, y in zip(tasks, parts, labels)))


@dataclass(frozen=True)
class Builder:
    """A composition's builder: the function that builds it, the raw-file keys it needs for
    given params (and may use), and whether it returns documents to vectorise."""

    build: Callable
    raw: Callable[[dict], tuple[str, ...]]  # params -> raw-file keys needed
    optional_raw: tuple[str, ...] = ()
    text: bool = False  # build returns task documents to vectorise


BUILDERS = {
    "webkb": Builder(build_webkb, lambda p: ("webkb",), text=True),
    "reuters": Builder(build_reuters, lambda p: ("reuters21578",), text=True),
    "newsgroups": Builder(build_newsgroups, lambda p: ("20news",), text=True),
    "handdigits": Builder(build_handdigits, lambda p: ("mnist_test_images", "mnist_test_labels", "usps_train",
                                                       "usps_test"), optional_raw=("mnist_train_images",
                                                                                   "mnist_train_labels")),
    "matfiles": Builder(build_matfiles, lambda p: tuple(t["file"] for t in p["tasks"].values())),
}


def build(builder_name: str, name: str, paths: dict[str, Path], params: dict) -> MultiTaskDataset:
    builder = BUILDERS[builder_name]
    result = builder.build(paths, **params)
    if builder.text:
        return text_tasks(name, result["task_docs"], result["text"], result["drop_empty"], {"builder": builder_name})
    return MultiTaskDataset(name, result.tasks, {**result.meta, "builder": builder_name})
