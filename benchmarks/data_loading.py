"""Time to load every data composition from a cold cache and from a warm one.

    MTC_DATA_DIR=../shared/data python benchmarks/data_loading.py

Uses a fresh temporary cache directory, so the first pass builds every composition from
the raw archives and the second reads the cached .npz files. A composition drawn per seed
(``draw: per_seed``) is timed on seed 0's draw; ``files`` (your own tables, conf/data/files.yaml)
names no file until you do, so it is left out.
"""

import os
import tempfile
import time

from mtc.cli import available, compose_config
from mtc.data.spec import data_spec


def load_all(names):
    times = {}
    for name in names:
        spec = data_spec(compose_config([f"data={name}"]).data)
        start = time.perf_counter()
        spec.load(0)  # the seed picks the draw of a per-seed composition; the others ignore it
        times[name] = time.perf_counter() - start
    return times


def main():
    os.environ["MTC_CACHE_DIR"] = tempfile.mkdtemp(prefix="mtc-cache-")
    names = [name for name in available("data") if name != "files"]
    cold, warm = load_all(names), load_all(names)
    print(f"{'composition':34s} {'cold s':>8s} {'warm s':>8s}")
    for name in names:
        print(f"{name:34s} {cold[name]:8.2f} {warm[name]:8.3f}")
    print(f"{'total':34s} {sum(cold.values()):8.2f} {sum(warm.values()):8.3f}")


if __name__ == "__main__":
    main()
