"""Time per MTCMRL outer iteration (and per fit) on real corpora, one thread.

    MTC_DATA_DIR=../shared/data python benchmarks/mtcmrl_iteration.py [data ...]

Fits MTCMRL at the default parameters (lambda = alpha = 1, mu = beta = 0.5) with 3 seeds
and prints the set-up time, the mean time per outer iteration and the whole fit. The
seed-free part of the set-up (affinities, row-space basis, SVD factors) is memoised per
process, as in a sweep, and printed once as "preparation"; the per-seed set-up left is the
k-means initialisation.
"""

import sys
import time

from hydra import compose, initialize_config_dir
from threadpoolctl import threadpool_limits

from mtc.cli import CONF_DIR
from mtc.config import data_spec
from mtc.methods import MTCMRL


def main(names):
    print(f"{'data':10s} {'seed':>4s} {'iters':>5s} {'fit s':>7s} {'setup s':>8s} {'per iter ms':>11s}")
    for name in names:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            dataset = data_spec(compose(config_name="config", overrides=[f"data={name}"])).load()
        with threadpool_limits(1):
            MTCMRL(n_clusters=dataset.n_clusters, max_iter=0, row_space=False).fit(dataset.matrices)  # imports
            start = time.perf_counter()
            MTCMRL(n_clusters=dataset.n_clusters, max_iter=0).fit(dataset.matrices)
            print(f"{name:10s} preparation (once per process) + one set-up: {time.perf_counter() - start:.2f} s")
            for seed in range(3):
                setup = MTCMRL(n_clusters=dataset.n_clusters, max_iter=0, random_state=seed)
                start = time.perf_counter()
                setup.fit(dataset.matrices)
                setup_seconds = time.perf_counter() - start
                start = time.perf_counter()
                model = MTCMRL(n_clusters=dataset.n_clusters, random_state=seed).fit(dataset.matrices)
                fit_seconds = time.perf_counter() - start
                per_iter = (fit_seconds - setup_seconds) / max(model.n_iter_, 1)
                print(f"{name:10s} {seed:4d} {model.n_iter_:5d} {fit_seconds:7.2f} {setup_seconds:8.2f} {1e3 * per_iter:11.1f}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["reuters", "webkb4"])
