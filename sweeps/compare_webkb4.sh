#!/usr/bin/env bash
# WebKB4 regenerated from MLflow (MTCMRL's Table 3 and MTCFIR's Table 3): the sweeps of every
# method with a config, each with its paper grid x 10 seeds, then python -m mtc.compare
# (tables beside the published numbers, Wilcoxon, Friedman + Nemenyi, grid heatmaps) into
# docs/results/compare_webkb4/. Run from the repository root with MTC_DATA_DIR set; extra
# arguments go to every sweep.
set -euo pipefail
for method in kmeans snmf snmf_lr mtcmrl lssmtc smbc smkc mtcfir mtcfir_nf mtcfir_ni mtcfir_nr; do
  python -m mtc.sweep method="$method" data=webkb4 "$@"
done
python -m mtc.sweep +experiment=mtcmrl_printed data=webkb4 "$@"  # MTCMRL with the printed Eq. 7 / Eq. 19
python -m mtc.compare --benchmarks webkb4 --out docs/results/compare_webkb4
