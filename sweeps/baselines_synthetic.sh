#!/usr/bin/env bash
# k-means, kernel k-means and SNMF on the synthetic benchmark, grid x 5 seeds each.
set -euo pipefail
for method in kmeans kkm snmf; do
  python -m mtc.sweep method="$method" data=synthetic sweep.repeats=5 "$@"
done
