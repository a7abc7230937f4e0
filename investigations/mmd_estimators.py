"""Does the MMD rise after mSDA under every estimator and feature set? (docs/results/mtcfir.md, Table 12)

    MTC_DATA_DIR=../shared/data python investigations/mmd_estimators.py

mSDA at p = 0.5, g = 3 on WebKB4, Reuters (d = 5000) and Handdigits; the mean over task
pairs of three MMD estimates (linear kernel on raw rows, linear kernel on L2-normalised rows
(what runs log as mmd_before / mmd_after), Gaussian kernel with the median-distance width on 500 samples per
task) for four feature sets: X, [X, h1, h2, h3], h3, [h1, h2, h3].
"""

import itertools

import numpy as np
import scipy.sparse as sp
from sklearn.metrics.pairwise import euclidean_distances, rbf_kernel
from sklearn.preprocessing import normalize

from mtc.cli import configured_dataset
from mtc.numerics.msda import msda_features

DATA = {"webkb4": [], "reuters": ["data.params.text.n_features=5000"], "handdigits": []}


def linear_mmd(parts, unit_rows: bool) -> float:
    means = [(normalize(P) if unit_rows else P).mean(axis=0) for P in parts]
    return float(np.mean([np.sum((means[a] - means[b]) ** 2) for a, b in itertools.combinations(range(len(means)), 2)]))


def gaussian_mmd(parts, per_task: int = 500) -> float:
    rng = np.random.default_rng(0)
    sample = [P[rng.choice(len(P), min(per_task, len(P)), replace=False)] for P in parts]
    pooled = np.vstack(sample)[:1000]
    gamma = 1.0 / (2.0 * np.median(euclidean_distances(pooled, pooled)) ** 2)
    values = []
    for a, b in itertools.combinations(range(len(sample)), 2):
        A, B = sample[a], sample[b]
        values.append(rbf_kernel(A, A, gamma=gamma).mean() + rbf_kernel(B, B, gamma=gamma).mean()
                      - 2.0 * rbf_kernel(A, B, gamma=gamma).mean())
    return float(np.mean(values))


def main():
    for name, overrides in DATA.items():
        dataset = configured_dataset(name, *overrides)
        X = [M.toarray() if sp.issparse(M) else np.asarray(M) for M in dataset.matrices]
        bounds = np.cumsum([len(x) for x in X])[:-1]
        Z = msda_features(np.vstack(X), 0.5, 3)
        d = X[0].shape[1]
        feature_sets = {"X": X, "[X,h1,h2,h3]": np.split(Z, bounds), "h3": np.split(Z[:, 3 * d:], bounds),
                        "[h1,h2,h3]": np.split(Z[:, d:], bounds)}
        for label, parts in feature_sets.items():
            print(f"{name:10s} {label:13s} linear-raw {linear_mmd(parts, False):.4f}  "
                  f"linear-L2 {linear_mmd(parts, True):.4f}  gaussian {gaussian_mmd(parts):.4f}", flush=True)


if __name__ == "__main__":
    main()
