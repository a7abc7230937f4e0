#!/usr/bin/env bash
# SPMTC's Tables 4-7 (term counts of Reuters' three problems and WebKB4) regenerated from
# MLflow: every method of the tables with a config, with the paper's protocol (grid x 20
# runs, +experiment=spmtc_paper) under the sweep name <method>-<data> that mtc.compare
# matches with the published numbers, then python -m mtc.compare into
# docs/results/compare_spmtc/. Run from the repository root with MTC_DATA_DIR set; extra
# arguments go to every sweep.
set -euo pipefail
for data in orgs_vs_people_counts orgs_vs_places_counts people_vs_places_counts webkb4_counts; do
  for method in kmeans a_kmeans ncut a_ncut asi a_asi lssmtc spmtc_h spmtc_s; do
    python -m mtc.sweep +experiment=spmtc_paper method="$method" data="$data" sweep.name="$method-$data" "$@"
  done
done
python -m mtc.compare --benchmarks orgs_vs_people_counts orgs_vs_places_counts people_vs_places_counts \
  webkb4_counts --out docs/results/compare_spmtc
