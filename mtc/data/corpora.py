"""Readers of the raw corpora (archives read in place, never unpacked to disk).

Each reader returns plain documents with their labels; compositions decide which to keep.
The text readers keep their last results in memory (arguments must be hashable), so that
drawing many samples from one corpus (a data config with ``draw: per_seed``) reads the
archive once per process. What they return is immutable (read-only mappings of tuples), since
every later caller in the process gets the same object.
"""

from __future__ import annotations

import gzip
import html
import re
import tarfile
from collections import defaultdict
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

import numpy as np

HTTP_HEADER_END = re.compile(rb"\r?\n\r?\n")
SCRIPT_OR_STYLE = re.compile(r"<(script|style)\b.*?</\1\s*>", re.I | re.S)
TAG = re.compile(r"<[^>]*>", re.S)


def html_to_text(page: bytes, keep_http_header: bool = False) -> str:
    """Strip scripts, styles and tags, and the HTTP header (up to the first blank line)
    unless ``keep_http_header`` (its lines, e.g. the server and dates, are then text too)."""
    parts = HTTP_HEADER_END.split(page, maxsplit=1)
    body = page if keep_http_header or len(parts) == 1 else parts[1]
    return html.unescape(TAG.sub(" ", SCRIPT_OR_STYLE.sub(" ", body.decode("latin-1"))))


@lru_cache(maxsize=2)
def read_webkb(path: Path, classes: tuple[str, ...], universities: tuple[str, ...],
               keep_http_header: bool = False) -> MappingProxyType:
    """{(university, class): ((page name, text), ...)} for the requested pages, sorted by name."""
    wanted = {(u, c) for u in universities for c in classes}
    pages = defaultdict(list)
    with tarfile.open(path, "r:xz") as archive:
        for member in archive:
            parts = member.name.split("/")
            if member.isfile() and len(parts) == 4 and (parts[2], parts[1]) in wanted:
                text = html_to_text(archive.extractfile(member).read(), keep_http_header)
                pages[(parts[2], parts[1])].append((parts[3], text))
    return MappingProxyType({key: tuple(sorted(docs)) for key, docs in pages.items()})


REUTERS_DOC = re.compile(r"<REUTERS([^>]*)>(.*?)</REUTERS>", re.S)
ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')
D_ITEM = re.compile(r"<D>(.*?)</D>", re.S)


def _field(pattern: str, text: str) -> str | None:
    match = re.search(pattern, text, re.S)
    return match.group(1) if match else None


@lru_cache(maxsize=1)
def read_reuters(path: Path) -> tuple[MappingProxyType, ...]:
    """Every Reuters-21578 document (read-only): attributes, topics, places, people, orgs (tuples),
    title, body."""
    docs = []
    with tarfile.open(path, "r:xz") as archive:
        for member in sorted(archive.getmembers(), key=lambda m: m.name):
            if not member.name.endswith(".sgm"):
                continue
            text = archive.extractfile(member).read().decode("latin-1")  # reut2-017 has one 0xFC byte
            for attributes, body in REUTERS_DOC.findall(text):
                doc = dict(ATTRIBUTE.findall(attributes))
                for field in ("TOPICS", "PLACES", "PEOPLE", "ORGS"):
                    doc[field.lower()] = tuple(D_ITEM.findall(_field(rf"<{field}>(.*?)</{field}>", body) or ""))
                doc["title"] = html.unescape(_field(r"<TITLE>(.*?)</TITLE>", body) or "")
                raw_body = _field(r"<BODY>(.*?)</BODY>", body)
                doc["body"] = None if raw_body is None else html.unescape(raw_body)
                docs.append(MappingProxyType(doc))
    return tuple(docs)


@lru_cache(maxsize=2)
def read_newsgroups(path: Path, groups: tuple[str, ...], splits=("train", "test"), strip_headers: bool = True
                    ) -> MappingProxyType:
    """{group: ((split/article, text), ...)} sorted by article; headers stripped by default."""
    wanted = set(groups)
    posts = defaultdict(list)
    with tarfile.open(path, "r:xz") as archive:
        for member in archive:
            parts = member.name.split("/")
            if not (member.isfile() and len(parts) == 3 and parts[1] in wanted):
                continue
            split = parts[0].removeprefix("20news-bydate-")
            if split not in splits:
                continue
            text = archive.extractfile(member).read().decode("latin-1")
            if strip_headers:
                text = text.partition("\n\n")[2]
            posts[parts[1]].append((f"{split}/{int(parts[2]):06d}", text))
    return MappingProxyType({group: tuple(sorted(docs)) for group, docs in posts.items()})


def read_usps(paths: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    """USPS (ESL version): pixels in [-1, 1] rescaled to [0, 1]; labels 0..9."""
    arrays = [np.loadtxt(gzip.open(p)) for p in paths]
    data = np.vstack(arrays)
    return (data[:, 1:] + 1.0) / 2.0, data[:, 0].astype(int)


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (MNIST): big-endian header, then uint8 data."""
    with gzip.open(path) as handle:
        raw = handle.read()
    n_dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(n_dims))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * n_dims).reshape(shape)
