"""How often does S-MBC keep its multi-task candidate, and what does the smart rule change?

    python investigations/smbc_branch.py [data ...]

For each data config, S-MBC (parallel and sequential candidates) and MBC at lambda in
{0.1, 0.5, 1.0} x 10 seeds: the share of (iteration, task) steps where the multi-task
candidate was kept, whether the labels equal those of lambda = 0 (plain k-means from the same
random labels), and the mean accuracy over tasks and seeds.
"""

import sys

import numpy as np
from threadpoolctl import threadpool_limits

from mtc.cli import configured_dataset
from mtc.methods.mbc import MBC
from mtc.metrics import accuracy


def main(names):
    print(f"{'data':8s} {'variant':22s} {'lambda':>6s} {'kept':>6s} {'= k-means':>9s} {'mean acc':>8s}")
    for name in names:
        dataset = configured_dataset(name)
        with threadpool_limits(1):
            reference = [MBC(n_clusters=dataset.n_clusters, lambda_=0.0, random_state=seed).fit(dataset.matrices)
                         for seed in range(10)]
            for variant, params in (("S-MBC parallel", {"smart": True}),
                                    ("S-MBC sequential", {"smart": True, "candidates": "sequential"}),
                                    ("MBC", {"smart": False})):
                for lam in (0.1, 0.5, 1.0):
                    fits = [MBC(n_clusters=dataset.n_clusters, lambda_=lam, random_state=seed, **params
                                ).fit(dataset.matrices) for seed in range(10)]
                    kept = np.mean(np.concatenate([fit.branch_trace_.ravel() for fit in fits]))
                    same = np.mean([all(np.array_equal(a, b) for a, b in zip(fit.labels_, ref.labels_))
                                    for fit, ref in zip(fits, reference)])
                    acc = np.mean([[accuracy(task.y, labels) for task, labels in zip(dataset.tasks, fit.labels_)]
                                   for fit in fits])
                    print(f"{name:8s} {variant:22s} {lam:6.1f} {kept:6.3f} {same:9.1f} {100 * acc:8.2f}")
        acc0 = np.mean([[accuracy(task.y, labels) for task, labels in zip(dataset.tasks, fit.labels_)]
                        for fit in reference])
        print(f"{name:8s} {'k-means (lambda = 0)':22s} {0.0:6.1f} {'-':>6s} {'-':>9s} {100 * acc0:8.2f}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["reuters", "webkb4"])
