#!/usr/bin/env bash
# Reuters with d = 5000 (MTCFIR's Table 2) regenerated from MLflow: every method of the table
# with a config, each with its paper grid x 10 seeds, then python -m mtc.compare into
# docs/results/compare_reuters5000/. Run from the repository root with MTC_DATA_DIR set;
# extra arguments go to every sweep.
set -euo pipefail
for method in kmeans snmf lssmtc smbc smkc mtcfir mtcfir_nf mtcfir_ni mtcfir_nr; do
  python -m mtc.sweep +experiment=reuters5000 method="$method" "$@"  # sweep <method>-reuters5000
done
python -m mtc.compare --benchmarks reuters5000 --out docs/results/compare_reuters5000
