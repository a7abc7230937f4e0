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
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import Stemmer

from mtc.errors import InputError

STEMMERS = ("porter", "english")


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
