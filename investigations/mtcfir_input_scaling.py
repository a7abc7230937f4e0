"""Does an input scaling the paper leaves unstated explain MTCFIR's shortfall? (issue 15)

    MTC_DATA_DIR=../shared/data python investigations/mtcfir_input_scaling.py [--data webkb4 reuters5000]
        [--inputs ...] [--corruption 0.5 0.7 0.9] [--neighbour-ratio 0.1 0.3] [--seeds 3]

MTCFIR (Algorithm 1) on each data set with its input transformed in one of these ways, each
a reading of "preprocess the tasks into one feature space" (Sec. 3.1) the paper could have
meant; the transformation is fitted on the rows of all tasks together:

- ``as built``: the data config's matrices (documents: tf-idf, L2 rows; digits: [0, 1]);
- ``max-abs``: every feature divided by its largest absolute value (scikit-learn's
  MaxAbsScaler: keeps sparsity and signs);
- ``standardised``: every feature to zero mean and unit variance (StandardScaler);
- ``binary``: 1 where a feature is non-zero (word presence, the input of Chen et al.'s
  mSDA text experiments);
- ``mSDA input standardised`` / ``mSDA input max-abs``: h^0 = X stays as built, only the
  input of the first denoising layer is scaled (Algorithm 2 then stacks [X, h^1, ..., h^g]);
- ``layers L2-normalised``: the input as built, and each block h^0, ..., h^g of Algorithm 2's
  output L2-normalised per row before they are stacked, so that no layer outweighs the
  others in the cosine (tanh layers have entries of order 1, tf-idf rows of order 1/sqrt(d)).

For each (data, input) it prints the grid point with the best mean accuracy over tasks
(the papers' protocol, here over the given sub-grid and seeds), its per-task accuracy, and
the MMD before and after mSDA at that point, one BLAS thread.
"""

import argparse
import itertools

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import MaxAbsScaler, StandardScaler, normalize
from threadpoolctl import threadpool_limits

import mtc.methods.mtcfir as mtcfir_module
from mtc.cli import configured_dataset
from mtc.methods import MTCFIR
from mtc.metrics import score_task
from mtc.numerics.cache import Cache
from mtc.numerics.linalg import as_dense
from mtc.numerics.msda import msda_features

DATA = {"webkb4": ("webkb4",), "reuters5000": ("reuters", "data.params.text.n_features=5000"),
        "handdigits": ("handdigits",)}


def max_abs(X):
    return MaxAbsScaler().fit_transform(X)


def standardised(X):
    return StandardScaler().fit_transform(as_dense(X))


def binary(X):
    return (sp.csr_matrix(X) != 0).astype(np.float64) if sp.issparse(X) else (X != 0).astype(np.float64)


INPUTS = {"as built": None, "max-abs": max_abs, "standardised": standardised, "binary": binary,
          "mSDA input standardised": standardised, "mSDA input max-abs": max_abs, "layers L2-normalised": None}
MSDA_ONLY = {"mSDA input standardised", "mSDA input max-abs"}


def transformed_tasks(matrices, transform):
    """The tasks' matrices with ``transform`` fitted on all their rows together."""
    rows = np.cumsum([0] + [X.shape[0] for X in matrices])
    stacked = transform(sp.vstack(matrices).tocsr() if sp.issparse(matrices[0]) else np.vstack(matrices))
    return [stacked[a:b] for a, b in zip(rows[:-1], rows[1:])]


def scaled_msda(transform):
    """Algorithm 2 with only the first layer's input scaled: [X, h^1(scaled X), ...]."""
    def features(X, p, n_layers, route="auto"):
        Z = msda_features(transform(X), p, n_layers, route)
        return np.hstack([as_dense(X), Z[:, X.shape[1]:]])
    return features


def normalised_layers(X, p, n_layers, route="auto"):
    """Algorithm 2's [h^0, ..., h^g] with every block's rows scaled to unit L2 norm."""
    Z = msda_features(X, p, n_layers, route)
    blocks = np.split(Z, n_layers + 1, axis=1)
    return np.hstack([normalize(block) for block in blocks])


def best_point(dataset, matrices, grid, seeds):
    cache = Cache()  # steps 1-2 shared by the seeds and neighbour ratios of one input, as in a sweep
    results = {}
    for corruption, ratio in grid:
        accs, mmd = [], None
        for seed in range(seeds):
            model = MTCFIR(n_clusters=dataset.n_clusters, corruption=corruption, neighbour_ratio=ratio,
                           cache=cache, random_state=seed).fit(matrices)
            accs.append([score_task(t, p)["acc"] for t, p in zip(dataset.labels, model.labels_)])
            mmd = (model.mmd_before_, model.mmd_after_)
        results[(corruption, ratio)] = (np.mean(accs, axis=0), mmd)
    point = max(results, key=lambda key: results[key][0].mean())
    return point, *results[point]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", default=["webkb4", "reuters5000"], choices=sorted(DATA))
    parser.add_argument("--inputs", nargs="+", default=list(INPUTS), choices=list(INPUTS))
    parser.add_argument("--corruption", nargs="+", type=float, default=[0.5, 0.7, 0.9])
    parser.add_argument("--neighbour-ratio", nargs="+", type=float, default=[0.1, 0.3])
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    grid = list(itertools.product(args.corruption, args.neighbour_ratio))
    original = mtcfir_module.msda_features
    for name in args.data:
        dataset = configured_dataset(*DATA[name])
        for label in args.inputs:
            transform = INPUTS[label]
            mtcfir_module.msda_features = (scaled_msda(transform) if label in MSDA_ONLY else
                                           normalised_layers if label == "layers L2-normalised" else original)
            matrices = dataset.matrices if transform is None or label in MSDA_ONLY else transformed_tasks(
                dataset.matrices, transform)
            with threadpool_limits(1):
                (corruption, ratio), acc, (before, after) = best_point(dataset, matrices, grid, args.seeds)
            print(f"{name:11s} {label:24s} p={corruption} lambda={ratio} acc "
                  f"{' / '.join(f'{a:.4f}' for a in acc)} mean {acc.mean():.4f}  mmd {before:.4f} -> {after:.4f}",
                  flush=True)
    mtcfir_module.msda_features = original


if __name__ == "__main__":
    main()
