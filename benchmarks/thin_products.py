"""The solvers' tall-by-thin products on one thread: A @ B against thin_product (mtc.numerics.thin),
the route its probe chose, and whether the two agree to the bit.

    python benchmarks/thin_products.py [ROWSxINNERxCOLUMNS[:view] ...] [--repeats 20]

Each shape is a dense C-ordered A (ROWS x INNER) and B (INNER x COLUMNS) of random numbers;
``:slice`` takes A as the first INNER columns of a ROWS x ROWS array (a kernel's column slice, a
view). The defaults are the shapes the solvers meet in the studies: a 20NG task's ridge factor
in MTCMRL (U' (X B) and U P), NG3's kernel slices in S-MKC, a dense SNMF affinity and SMT-NMF's
dense W on Reuters, and a small product that keeps the literal route.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from mtc.numerics.thin import memory_order, thin_product, transposed_agrees

DEFAULT_SHAPES = ["1330x1336x4", "1336x1330x4", "7971x3976x3:slice", "7971x7194x3:slice", "2000x2000x10",
                  "3000x3000x2", "500x500x2"]


def parse_shape(text: str) -> tuple[int, int, int, bool]:
    sizes, _, view = text.partition(":")
    rows, inner, columns = (int(part) for part in sizes.split("x"))
    return rows, inner, columns, view == "slice"


def best_ms(product, repeats: int) -> float:
    product()
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        product()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shapes", nargs="*", default=DEFAULT_SHAPES)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"{'shape':>22s} {'A @ B ms':>9s} {'thin ms':>8s} {'ratio':>6s}  route       same bits")
    with threadpool_limits(1, user_api="blas"):
        for text in args.shapes:
            rows, inner, columns, view = parse_shape(text)
            A = rng.random((rows, rows))[:, :inner] if view else rng.random((rows, inner))
            B = rng.random((inner, columns))
            literal, thin = best_ms(lambda: A @ B, args.repeats), best_ms(lambda: thin_product(A, B), args.repeats)
            route = "transposed" if transposed_agrees(A, columns, memory_order(B)) else "literal"
            print(f"{text:>22s} {literal:9.2f} {thin:8.2f} {thin / literal:6.2f}  {route:11s} "
                  f"{np.array_equal(A @ B, thin_product(A, B))}")


if __name__ == "__main__":
    main()
