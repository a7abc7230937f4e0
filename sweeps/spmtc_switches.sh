#!/usr/bin/env bash
# SPMTC's switch study (docs/results/spmtc.md) regenerated from MLflow: LSSMTC, SPMTC-h and
# SPMTC-s at their defaults and with one documented switch of [SP] Sec. 4.2 each, at lambda = 0.15
# and l in {2, 8}, 20 runs (+experiment=spmtc_switches), on ORGSvsPLACES and ORGSvsPEOPLE (term
# counts). Each sweep is named <label>-<data>_l<l>, so mtc.compare reads every (problem, l) as a
# benchmark and every switch as a method; then python -m mtc.compare into
# docs/results/compare_spmtc_switches/. Run from the repository root with MTC_DATA_DIR set; extra
# arguments go to every sweep.
set -euo pipefail
extra=("$@")
sweep() {  # label method [switch override]
  local label=$1 method=$2; shift 2
  for data in orgs_vs_places_counts orgs_vs_people_counts; do
    for l in 2 8; do
      python -m mtc.sweep +experiment=spmtc_switches method="$method" data="$data" "method.grid.n_components=[$l]" \
        "$@" sweep.label="$label" sweep.name="$label-${data}_l$l" sweep.verbose=0 "${extra[@]}"
    done
  done
}
sweep lssmtc lssmtc
sweep spmtc_h spmtc_h
sweep spmtc_h_power1 spmtc_h ++method.params.weight_power=1
sweep spmtc_h_round spmtc_h ++method.params.quantile_rounding=round
sweep spmtc_h_freeze spmtc_h ++method.params.unselected_rows=freeze
sweep spmtc_s spmtc_s
sweep spmtc_s_power1 spmtc_s ++method.params.weight_power=1
sweep spmtc_s_positive spmtc_s ++method.params.chosen=positive
sweep spmtc_s_freeze spmtc_s ++method.params.unselected_rows=freeze
sweep spmtc_s_gamma1 spmtc_s ++method.params.gamma_ratio=1.0
python -m mtc.compare --benchmarks orgs_vs_places_counts_l2 orgs_vs_places_counts_l8 orgs_vs_people_counts_l2 \
  orgs_vs_people_counts_l8 --out docs/results/compare_spmtc_switches
