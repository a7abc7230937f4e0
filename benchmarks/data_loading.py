"""Time to load every data composition from a cold cache and from a warm one.

    MTC_DATA_DIR=../shared/data python benchmarks/data_loading.py

Uses a fresh temporary cache directory, so the first pass builds every composition from
the raw archives and the second reads the cached .npz files.
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
        spec.load()
        times[name] = time.perf_counter() - start
    return times


def main():
    os.environ["MTC_CACHE_DIR"] = tempfile.mkdtemp(prefix="mtc-cache-")
    names = available("data")
    cold, warm = load_all(names), load_all(names)
    print(f"{'composition':34s} {'cold s':>8s} {'warm s':>8s}")
    for name in names:
        print(f"{name:34s} {cold[name]:8.2f} {warm[name]:8.3f}")
    print(f"{'total':34s} {sum(cold.values()):8.2f} {sum(warm.values()):8.3f}")


if __name__ == "__main__":
    main()
