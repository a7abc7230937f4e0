"""A damaged processed-cache file is reported in one line, removed and rebuilt; writes are atomic.

Uses the real comp_vs_sci data config (two LSSMTC .mat files, built in well under a second).
"""

import hashlib
import io
import re
import threading
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp

from mtc.cli import configured_dataset
from mtc.data import cache
from mtc.tasks import MultiTaskDataset, Task


def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:]


def restamp(data: bytes) -> bytes:
    """``data`` with a valid checksum stamp again, so only the zip/npy layer can notice damage."""
    body = data[:-cache.STAMP]
    return body + hashlib.sha256(body).hexdigest().encode()


def directory_start(data: bytes) -> int:
    """Offset of the zip's central directory (the list of members after the payloads)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return archive.start_dir


CORRUPTIONS = {
    "truncated to half": lambda data: data[:len(data) // 2],
    "emptied": lambda data: b"",
    "byte flipped in the middle": lambda data: flip(data, len(data) // 2),
    "byte flipped near the end": lambda data: flip(data, len(data) - 100),
    "time flipped in the zip directory": lambda data: flip(data, directory_start(data) + 12),
    "byte flipped in the stamp": lambda data: flip(data, len(data) - 1),
}


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MTC_CACHE_DIR", str(tmp_path))
    return tmp_path


def assert_same(a: MultiTaskDataset, b: MultiTaskDataset) -> None:
    assert a.content_hash() == b.content_hash() and a.name == b.name and a.meta == b.meta
    for s, t in zip(a.tasks, b.tasks, strict=True):
        assert (s.name, s.class_names, s.X.shape) == (t.name, t.class_names, t.X.shape)
        np.testing.assert_array_equal(s.y, t.y)
        assert sp.issparse(s.X) and sp.issparse(t.X) and (s.X != t.X).nnz == 0


@pytest.mark.parametrize("corrupt", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_corrupt_cache_is_reported_once_and_rebuilt(cache_dir, capsys, corrupt):
    original = configured_dataset("comp_vs_sci", seed=0)
    path, = cache_dir.glob("comp_vs_sci-*.npz")
    good = path.read_bytes()
    bad = corrupt(good)
    assert bad != good
    path.write_bytes(bad)
    capsys.readouterr()

    again = configured_dataset("comp_vs_sci", seed=0)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert re.fullmatch(rf"mtc: processed cache {re.escape(str(path))} is corrupt "
                        r"\(CorruptCacheError: the sha256 of its \d+ bytes does not match the stamp at its end\); "
                        r"rebuilding it", lines[0]), lines[0]
    assert_same(again, original)

    # rewritten in place, no temp files; the content hash remembered beside it
    assert sorted(p.name for p in cache_dir.iterdir()) == [path.name, cache.hash_memo_path(path).name]
    rewritten = path.read_bytes()
    assert len(rewritten) == len(good) and rewritten != bad
    assert_same(cache.load(path), original)
    assert_same(configured_dataset("comp_vs_sci", seed=0), original)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("corrupt, error", [
    (lambda data: flip(data, len(data) // 2), "BadZipFile: Bad CRC-32 for file 'indices0.npy'"),
    (lambda data: data[:len(data) // 2], "BadZipFile: File is not a zip file"),
], ids=["payload byte flipped", "truncated"])
def test_damage_behind_a_valid_stamp_is_caught_by_reading_every_array(cache_dir, capsys, corrupt, error):
    configured_dataset("comp_vs_sci", seed=0)
    path, = cache_dir.glob("comp_vs_sci-*.npz")
    path.write_bytes(restamp(corrupt(path.read_bytes())))
    capsys.readouterr()
    assert cache.load_or_none(path) is None
    assert capsys.readouterr().err == f"mtc: processed cache {path} is corrupt ({error}); rebuilding it\n"
    assert not path.exists()


def test_the_zip_format_alone_misses_a_flipped_directory_time(cache_dir):
    """Why the stamp: this damage parses cleanly, so without it the file would be trusted."""
    original = configured_dataset("comp_vs_sci", seed=0)
    path, = cache_dir.glob("comp_vs_sci-*.npz")
    data = restamp(CORRUPTIONS["time flipped in the zip directory"](path.read_bytes()))
    with zipfile.ZipFile(path) as before, zipfile.ZipFile(io.BytesIO(data)) as after:
        assert after.infolist()[0].date_time != before.infolist()[0].date_time
    path.write_bytes(data)
    assert_same(cache.load(path), original)


def small(label: int) -> MultiTaskDataset:
    X = sp.csr_matrix(np.arange(12.0).reshape(4, 3) + label)
    return MultiTaskDataset("x", (Task("a", X, np.array([0, 1, 1, label]), ("p", "q")),), {"label": label})


def test_writes_are_atomic_and_leave_no_temporary_files(tmp_path, monkeypatch):
    path = tmp_path / "x.npz"
    cache.save(small(0), path)
    assert [p.name for p in tmp_path.iterdir()] == ["x.npz"]
    before = path.read_bytes()

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(cache.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cache.save(small(1), path)
    assert [p.name for p in tmp_path.iterdir()] == ["x.npz"] and path.read_bytes() == before
    monkeypatch.undo()

    writers = [threading.Thread(target=lambda i=i: [cache.save(small(i), path) for _ in range(20)]) for i in range(2)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert [p.name for p in tmp_path.iterdir()] == ["x.npz"]
    assert cache.load(path).meta["label"] in (0, 1)


def test_the_content_hash_is_remembered_beside_the_cache_file_while_its_bytes_stay(cache_dir):
    """``<file>.hash`` holds the dataset's content hash with the stamp of the bytes it was
    computed from: read without the dataset, forgotten when the file is rewritten."""
    from mtc.cli import compose_config
    from mtc.data.spec import data_spec

    spec = data_spec(compose_config(["data=comp_vs_sci"]).data)
    assert spec.remembered_hashes([0]) is None  # never loaded
    dataset = spec.load()
    [(content_hash, key)] = spec.remembered_hashes([0, 1, 2])  # one dataset for every seed
    assert content_hash == dataset.content_hash() and key == dataset.meta["cache_key"]
    [cached] = cache_dir.glob("*.npz")
    other = MultiTaskDataset(dataset.name, dataset.tasks[:1], dataset.meta)
    cache.save(other, cached)  # the same file, other bytes: the memo's stamp no longer matches
    assert spec.remembered_hashes([0]) is None
    assert_same(spec.load(), other)  # read from the file, its hash remembered again
    assert spec.remembered_hashes([0]) == [(other.content_hash(), key)]
    cache.hash_memo_path(cached).write_text("garbage")
    assert spec.remembered_hashes([0]) is None
