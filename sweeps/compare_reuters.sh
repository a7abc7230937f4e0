#!/usr/bin/env bash
# MTCMRL's Table 4 (Reuters-21578) regenerated from MLflow: the sweeps of every method the
# table has a config for, each with its paper grid x 10 seeds, then python -m mtc.compare
# (tables beside the published numbers, Wilcoxon, Friedman + Nemenyi, grid heatmaps) into
# docs/results/compare_reuters/. Run from the repository root with MTC_DATA_DIR set; extra
# arguments go to every sweep.
set -euo pipefail
for method in kmeans snmf snmf_lr mtcmrl lssmtc smbc smkc; do
  python -m mtc.sweep method="$method" data=reuters "$@"
done
python -m mtc.sweep +experiment=mtcmrl_printed data=reuters "$@"  # MTCMRL with the printed Eq. 7 / Eq. 19
python -m mtc.compare --benchmarks reuters --out docs/results/compare_reuters
