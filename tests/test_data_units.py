"""Small, fast checks of the data layer's pieces (no corpus needed)."""

import hashlib
import shutil

import numpy as np
import pytest
import scipy.sparse as sp

from mtc.data import cache, load_dataset, sources
from mtc.data.compositions import balanced_sample, downsample_images
from mtc.data.corpora import html_to_text
from mtc.data.text import vectorize_tasks


def test_shared_vocabulary_keeps_top_terms_by_document_frequency():
    docs = [["apple banana cherry", "apple banana"], ["apple durian", "apple banana elder elder elder"]]
    (X1, X2), terms = vectorize_tasks(docs, n_features=2, stop_words=None)
    # document frequencies: apple 4, banana 3, elder 1 (despite 3 occurrences), others 1
    assert terms == ["apple", "banana"]
    assert X1.shape == (2, 2) and X2.shape == (2, 2)
    norms = np.sqrt(np.asarray(sp.vstack([X1, X2]).multiply(sp.vstack([X1, X2])).sum(axis=1))).ravel()
    np.testing.assert_allclose(norms, 1.0)


def test_stop_words_and_case_are_handled():
    (X,), terms = vectorize_tasks([["The Cat and THE dog", "a cat"]], n_features=None)
    assert terms == ["cat", "dog"]


@pytest.mark.parametrize("stemmer, expected", [
    ("porter", ["cours", "faculti", "student", "teach", "univers"]),
    ("english", ["cours", "faculti", "student", "teach", "universiti"]),  # Porter2 keeps the 'i' of -ity
])
def test_stemming_merges_inflections_after_stop_words_are_removed(stemmer, expected):
    docs = [["The Courses and the course", "STUDENTS teaching"], ["a student teaches", "university faculty"]]
    (X1, X2), terms = vectorize_tasks(docs, stemmer=stemmer, tfidf=False, l2_normalize=False)
    assert terms == expected  # "the", "and", "a" gone before stemming; each inflection one term
    np.testing.assert_array_equal(X1.toarray()[0], [2, 0, 0, 0, 0])  # courses + course
    np.testing.assert_array_equal(X2.toarray()[0], [0, 0, 1, 1, 0])


def test_an_unknown_stemmer_is_named_with_the_choices():
    with pytest.raises(ValueError, match="unknown text stemmer 'snowball'; choose one of porter, english or null"):
        vectorize_tasks([["a b"]], stemmer="snowball")


def test_html_to_text_strips_header_scripts_and_tags():
    page = b"MIME-Version: 1.0\r\nContent-Type: text/html\r\n\r\n<html><script>var x;</script><b>Course</b> &amp; lab</html>"
    text = html_to_text(page)
    assert "Content-Type" not in text and "var x" not in text and "<b>" not in text
    assert text.split() == ["Course", "&", "lab"]
    kept = html_to_text(page, keep_http_header=True)
    assert kept.split() == ["MIME-Version:", "1.0", "Content-Type:", "text/html", "Course", "&", "lab"]
    assert html_to_text(b"<p>no header</p>", keep_http_header=True) == html_to_text(b"<p>no header</p>") == " no header "


def test_area_downsampling_is_exact_block_averaging():
    images = np.random.default_rng(0).random((3, 28, 28))
    halved = downsample_images(images, 14)
    np.testing.assert_allclose(halved, images.reshape(3, 14, 2, 14, 2).mean(axis=(2, 4)))
    np.testing.assert_allclose(downsample_images(np.ones((1, 28, 28)), 16), 1.0)


def test_balanced_sample_is_even_and_refuses_too_many():
    labels = np.array([0] * 10 + [1] * 4)
    rows = balanced_sample(np.random.default_rng(0), labels, 8)
    assert np.bincount(labels[rows]).tolist() == [4, 4]
    with pytest.raises(ValueError, match="class 1 has 4"):
        balanced_sample(np.random.default_rng(0), labels, 10)


@pytest.fixture
def fake_root(tmp_path, monkeypatch):
    """A data root holding a copy of one real raw file (the LSSMTC .mat files are small)."""
    for key in ("comp_vs_sci_1", "comp_vs_sci_2"):
        rel = sources.RAW_FILES[key].path
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(sources.data_root() / rel, tmp_path / rel)
    return tmp_path


MAT_PARAMS = {"class_names": ["a", "b"], "tfidf": True, "samples_per_task": None, "seed": 0,
              "tasks": {"t1": {"file": "comp_vs_sci_1", "data": "fea", "labels": "gnd"},
                        "t2": {"file": "comp_vs_sci_2", "data": "fea", "labels": "gnd"}}}


def test_second_load_comes_from_the_cache_and_config_changes_the_key(fake_root, tmp_path):
    first = load_dataset("cvs", "matfiles", MAT_PARAMS, str(fake_root), str(tmp_path / "cache"))
    files = list((tmp_path / "cache").glob("cvs-*.npz"))
    assert len(files) == 1 and first.meta["cache_key"] in files[0].name
    again = load_dataset("cvs", "matfiles", MAT_PARAMS, str(fake_root), str(tmp_path / "cache"))
    assert again.content_hash() == first.content_hash()
    changed = load_dataset("cvs", "matfiles", {**MAT_PARAMS, "tfidf": False}, str(fake_root), str(tmp_path / "cache"))
    assert changed.meta["cache_key"] != first.meta["cache_key"]
    assert len(list((tmp_path / "cache").glob("cvs-*.npz"))) == 2


def test_corrupted_raw_file_is_a_clear_error(fake_root, tmp_path):
    target = fake_root / sources.RAW_FILES["comp_vs_sci_2"].path
    target.chmod(0o644)
    with open(target, "r+b") as handle:
        handle.seek(100)
        handle.write(b"\x00\x01\x02")
    with pytest.raises(sources.RawDataError, match=r"comp.vs.sci_task2.mat is corrupted: sha256 [0-9a-f]+, expected efafdffe"):
        load_dataset("cvs", "matfiles", MAT_PARAMS, str(fake_root), str(tmp_path / "cache"))


def test_missing_raw_file_names_the_file_and_where_to_put_it(tmp_path):
    with pytest.raises(sources.RawDataError, match=r"missing raw file .*webkb/webkb-data.tar.xz: get it from the CMU"):
        load_dataset("webkb4", "webkb", {}, str(tmp_path), str(tmp_path / "cache"))


def test_download_is_verified_and_atomic(tmp_path, monkeypatch):
    payload = b"digits" * 100
    served = tmp_path / "served.gz"
    served.write_bytes(payload)
    good = sources.RawFile("usps/zip.test.gz", hashlib.sha256(payload).hexdigest(), url=served.as_uri())
    monkeypatch.setitem(sources.RAW_FILES, "usps_test", good)
    path, checksum = sources.raw_file("usps_test", tmp_path / "root")
    assert path.read_bytes() == payload and checksum == good.checksum
    bad = sources.RawFile("usps/zip.train.gz", "0" * 64, url=served.as_uri())
    monkeypatch.setitem(sources.RAW_FILES, "usps_train", bad)
    with pytest.raises(sources.RawDataError, match="download of .* has sha256"):
        sources.raw_file("usps_train", tmp_path / "root")
    assert sorted(p.name for p in (tmp_path / "root" / "usps").iterdir()) == ["zip.test.gz"]  # no partial file


def test_unknown_builder_is_rejected():
    with pytest.raises(ValueError, match="unknown dataset builder 'nope'"):
        load_dataset("x", "nope")


def test_cache_round_trip_keeps_dense_and_sparse(tmp_path):
    from mtc.tasks import MultiTaskDataset, Task

    ds = MultiTaskDataset("x", (Task("a", np.eye(3), np.array([0, 1, 1]), ("p", "q")),
                                Task("b", sp.csr_matrix(np.eye(3)), np.array([1, 0, 0]), ("p", "q"))), {"k": 1})
    cache.save(ds, tmp_path / "x.npz")
    back = cache.load(tmp_path / "x.npz")
    assert back.content_hash() == ds.content_hash() and back.meta == {"k": 1}
    assert sp.issparse(back.tasks[1].X) and not sp.issparse(back.tasks[0].X)


def test_a_sparse_task_is_kept_canonical_and_hashing_changes_no_matrix():
    """A sparse X with unsorted indices (and a duplicate entry) becomes a canonical copy, the
    given matrix untouched; content_hash leaves every array as it was and equals the hash of
    the sorted input, so a fit sees one representation whether or not the data was hashed
    first (the tracked sweep hashed, and so sorted, its draws before fitting; mtc.run did not)."""
    from mtc.methods.smtnmf import SMTNMF
    from mtc.tasks import MultiTaskDataset, Task

    rng = np.random.default_rng(0)
    dense = rng.random((12, 30)) * (rng.random((12, 30)) < 0.5)
    dense[:, 0] += 0.1
    sorted_X = sp.csr_matrix(dense)
    rows = [slice(a, b) for a, b in zip(sorted_X.indptr[:-1], sorted_X.indptr[1:])]
    order = np.concatenate([a + rng.permutation(r.stop - r.start) for a, r in zip(sorted_X.indptr, rows)])
    unsorted = sp.csr_matrix((sorted_X.data[order], sorted_X.indices[order], sorted_X.indptr), shape=dense.shape)
    assert not unsorted.has_sorted_indices
    given_indices = unsorted.indices.copy()
    y = np.arange(12) % 2

    task = Task("a", unsorted, y, ("p", "q"))
    assert task.X.has_canonical_format and np.array_equal(task.X.toarray(), dense)
    assert np.array_equal(unsorted.indices, given_indices), "the caller's matrix was changed"
    with_duplicate = sp.csr_matrix((np.array([1.0, 2.0]), np.array([3, 3]), np.array([0, 2])), shape=(1, 5))
    assert Task("d", with_duplicate, np.array([0]), ("p",)).X.toarray()[0, 3] == 3.0

    ds = MultiTaskDataset("x", (task, Task("b", unsorted[::-1], y, ("p", "q"))))
    before = [part.copy() for X in ds.matrices for part in (X.indptr, X.indices, X.data)]
    digest = ds.content_hash()
    after = [part for X in ds.matrices for part in (X.indptr, X.indices, X.data)]
    assert all(np.array_equal(a, b) for a, b in zip(before, after))
    from_sorted = MultiTaskDataset("x", (Task("a", sorted_X, y, ("p", "q")), Task("b", sorted_X[::-1], y, ("p", "q"))))
    assert digest == from_sorted.content_hash()

    def trace(dataset):
        return SMTNMF(n_clusters=[2, 2], max_iter=30, tol=0.0, random_state=0).fit(dataset.matrices).objective_trace_

    assert np.array_equal(trace(ds), trace(from_sorted))


def test_a_task_without_labels_has_cluster_names_and_no_class_counts():
    from mtc.tasks import MultiTaskDataset, Task, cluster_names

    X = np.arange(12.0).reshape(4, 3)
    task = Task("a", X, None, cluster_names(3))
    assert task.class_names == ("cluster0", "cluster1", "cluster2") and task.n_clusters == 3 and not task.labelled
    with pytest.raises(ValueError, match="^task 'a' has no labels: no class counts$"):
        task.class_counts()
    with pytest.raises(ValueError, match="task 'a' has no labels: its clusters are named cluster0, cluster1, ..."):
        Task("a", X, None, ("p", "q"))
    with pytest.raises(ValueError, match=r"task 'a': labels must be class indices in \[0, 2\), got -1 to 1"):
        Task("a", X, np.array([-1, 0, 1, 1]), ("p", "q"))

    dataset = MultiTaskDataset("mine", (task, Task("b", X[:2], None, cluster_names(2))))
    assert not dataset.labelled and dataset.labels is None and dataset.n_clusters == [3, 2]
    assert dataset.describe() == "mine: 2 tasks, 3 features\n  a (n=4, k=3): unlabelled\n  b (n=2, k=2): unlabelled"
    with pytest.raises(ValueError, match="^dataset 'mine' has no labels: no ideal task relatedness$"):
        dataset.ideal_task_relatedness()
    with pytest.raises(ValueError, match=r"dataset 'mix': tasks \['a'\] have no labels but the others have"):
        MultiTaskDataset("mix", (task, Task("c", X, np.array([0, 1, 1, 0]), ("p", "q"))))

    # the hash tells a task without labels from one labelled 0, 1, 2 with classes named like its clusters
    labelled = MultiTaskDataset("mine", (Task("a", X, np.array([0, 1, 2, 0]), cluster_names(3)),
                                         Task("b", X[:2], np.array([0, 1]), cluster_names(2))))
    assert dataset.content_hash() != labelled.content_hash()
    assert dataset.content_hash() == MultiTaskDataset("other", dataset.tasks, {"k": 1}).content_hash()


def test_the_content_hash_of_labelled_data_is_unchanged():
    """Sweeps resume on the dataset's content hash: it must stay what it was for labelled data."""
    from mtc.tasks import MultiTaskDataset, Task

    ds = MultiTaskDataset("x", (Task("a", np.eye(3), np.array([0, 1, 1]), ("p", "q")),
                                Task("b", sp.csr_matrix(np.eye(3)), np.array([1, 0, 0]), ("p", "q"))))
    sparse = ds.tasks[1].X
    digest = hashlib.sha256()
    for part in (b"a", b"p\x00q", np.array([0, 1, 1], np.int64), np.eye(3), b"(3, 3)",
                 b"b", b"p\x00q", np.array([1, 0, 0], np.int64), sparse.indptr, sparse.indices, sparse.data, b"(3, 3)"):
        digest.update(part if isinstance(part, bytes) else part.tobytes())
    assert ds.content_hash() == digest.hexdigest()


def test_the_cache_stores_labels_only_when_there_are_any(tmp_path):
    from mtc.tasks import MultiTaskDataset, Task, cluster_names

    unlabelled = MultiTaskDataset("u", (Task("a", np.eye(3), None, cluster_names(2)),
                                        Task("b", sp.csr_matrix(np.eye(3)), None, cluster_names(3))))
    cache.save(unlabelled, tmp_path / "u.npz")
    with np.load(tmp_path / "u.npz") as archive:
        assert not [name for name in archive.files if name.startswith("y")]
    back = cache.load(tmp_path / "u.npz")
    assert not back.labelled and back.n_clusters == [2, 3] and back.content_hash() == unlabelled.content_hash()
    # labelled tasks keep the layout of the files written before (labels as y<i>), which still load
    labelled = MultiTaskDataset("x", (Task("a", np.eye(3), np.array([0, 1, 1]), ("p", "q")),))
    cache.save(labelled, tmp_path / "x.npz")
    with np.load(tmp_path / "x.npz") as archive:
        assert archive.files == ["meta", "y0", "dense0"]
    back = cache.load(tmp_path / "x.npz")
    assert back.labelled and np.array_equal(back.tasks[0].y, [0, 1, 1])
