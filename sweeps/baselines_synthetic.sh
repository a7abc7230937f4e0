#!/usr/bin/env bash
# k-means, kernel k-means and SNMF on the synthetic benchmark, grid x 5 seeds each
# (conf/experiment/baselines_synthetic.yaml).
set -euo pipefail
for method in kmeans kkm snmf; do
  python -m mtc.sweep +experiment=baselines_synthetic method="$method" "$@"
done
