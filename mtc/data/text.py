"""Documents -> tf-idf matrices that share one vocabulary across tasks.

Defaults follow common text-clustering practice (conf/text/default.yaml): lower-case tokens
(scikit-learn's pattern: runs of 2+ word characters), English stop words removed, the top
``n_features`` terms by document frequency over all tasks, tf-idf (idf over all tasks),
each document L2-normalised. Documents left without any kept term can be dropped.
``stemmer`` (off by default) reduces every kept token to its stem after stop-word removal:
``porter`` (Porter 1980, the rule of the classic stemmed WebKB matrices) or ``english``
(Snowball's Porter2), both from PyStemmer (Snowball's own C code, rather than a hand port).
scikit-learn is imported by the functions that vectorise: mtc.data's import, and a finished
sweep's rerun from the command line with it, skip it (1.2 s).

What may be read as a document, checked before it is vectorised: ``special_file`` tells, from
a path's status and without opening it, a FIFO, a device or a socket (reading one blocks for a
writer, or never ends: ``/dev/zero``), and ``binary_reason`` a file of bytes that is not text.
"""

from __future__ import annotations

import os
import re
import stat

import numpy as np
import scipy.sparse as sp
import Stemmer

from mtc.errors import InputError

STEMMERS = ("porter", "english")
# What a path that is neither a regular file nor a folder is (os.stat's file types)
SPECIAL_FILES = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                 (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
NUL_PROBE = 8192  # the bytes searched for a NUL, as git and GNU grep decide that a file is binary
MAX_NOT_UTF8 = 0.1  # the share of a document's bytes that may be invalid UTF-8 (stray Latin-1 letters)
NOT_UTF8 = re.compile("[\udc80-\udcff]")  # an invalid byte, decoded with errors="surrogateescape"


def special_file(path) -> str | None:
    """What ``path`` is when it is neither a regular file nor a folder ("a FIFO (named pipe)",
    "a character device", ...), from its status (symbolic links followed), without opening it;
    None for a regular file, a folder, or a path that cannot be stat'ed (missing: the reader
    says so)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((what for test, what in SPECIAL_FILES if test(mode)), "not a regular file")


def not_a_regular_file(path) -> str | None:
    """What is wrong with a data path (``data.params.paths``) that is neither a regular file nor
    a folder, in words that follow the path; None for one that is (or is missing)."""
    kind = special_file(path)
    return kind and f"{kind}, not a regular file: give a data file or a folder of text documents"


def binary_reason(data: bytes) -> str | None:
    """Why a file's bytes are not a text document, or None when they are one.

    A NUL byte in the first NUL_PROBE bytes (images, archives, PDFs, UTF-16 text all have
    one), or more than MAX_NOT_UTF8 of the bytes invalid as UTF-8 (text in another encoding,
    which decoding would turn into replacement characters). A few invalid bytes, a stray
    Latin-1 letter, pass: they are decoded as U+FFFD, as before.
    """
    nul = data.find(b"\0", 0, NUL_PROBE)
    if nul >= 0:
        return f"binary (a NUL byte at offset {nul})"
    invalid = len(NOT_UTF8.findall(data.decode("utf-8", errors="surrogateescape")))
    if invalid > MAX_NOT_UTF8 * len(data):
        return f"not UTF-8 text ({invalid} of its {len(data)} bytes are invalid UTF-8)"
    return None


def stemming_analyzer(stemmer: str, lowercase: bool, stop_words: str | None):
    """scikit-learn's word analyzer (lower-casing, 2+ character tokens, stop words removed)
    followed by the named PyStemmer stemmer."""
    if stemmer not in STEMMERS:
        raise InputError(f"unknown text stemmer {stemmer!r}; choose one of {', '.join(STEMMERS)} or null")
    from sklearn.feature_extraction.text import CountVectorizer

    analyze = CountVectorizer(lowercase=lowercase, stop_words=stop_words).build_analyzer()
    stem = Stemmer.Stemmer(stemmer).stemWords
    return lambda doc: stem(analyze(doc))


def top_terms_by_document_frequency(counts: sp.csr_matrix, n_features: int | None) -> np.ndarray:
    """Column indices of the n_features terms with the highest document frequency (ties: vocabulary order)."""
    df = np.bincount(counts.indices, minlength=counts.shape[1])
    if n_features is None or n_features >= counts.shape[1]:
        return np.arange(counts.shape[1])
    return np.sort(np.argsort(-df, kind="stable")[:n_features])


def tfidf_weights(counts: sp.csr_matrix, tfidf: bool = True, sublinear_tf: bool = False,
                  l2_normalize: bool = True) -> sp.csr_matrix:
    """tf-idf (smooth idf, as scikit-learn) or raw weights, then L2-normalised rows (unless
    ``l2_normalize`` is False: raw counts with tfidf=False)."""
    from sklearn.feature_extraction.text import TfidfTransformer

    transformer = TfidfTransformer(norm="l2" if l2_normalize else None, use_idf=tfidf, sublinear_tf=sublinear_tf)
    return sp.csr_matrix(transformer.fit_transform(counts))


def vectorize_tasks(docs_per_task: list[list[str]], n_features: int | None = None, lowercase: bool = True,
                    stop_words: str | None = "english", min_df: int = 1, tfidf: bool = True,
                    sublinear_tf: bool = False, l2_normalize: bool = True,
                    stemmer: str | None = None) -> tuple[list[sp.csr_matrix], list[str]]:
    """One shared vocabulary over every task's documents; returns per-task matrices and the terms."""
    from sklearn.feature_extraction.text import CountVectorizer

    if stemmer is None:
        vectorizer = CountVectorizer(lowercase=lowercase, stop_words=stop_words, min_df=min_df, dtype=np.float64)
    else:
        vectorizer = CountVectorizer(analyzer=stemming_analyzer(stemmer, lowercase, stop_words), min_df=min_df,
                                     dtype=np.float64)
    counts = vectorizer.fit_transform([doc for docs in docs_per_task for doc in docs]).tocsr()
    keep = top_terms_by_document_frequency(counts, n_features)
    weights = tfidf_weights(counts[:, keep], tfidf, sublinear_tf, l2_normalize)
    bounds = np.cumsum([len(docs) for docs in docs_per_task])[:-1]
    rows = np.split(np.arange(weights.shape[0]), bounds)
    return [weights[r] for r in rows], vectorizer.get_feature_names_out()[keep].tolist()
