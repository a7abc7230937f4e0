#!/usr/bin/env bash
# Our variant rows of SMT-NMF's Table 5 (docs/results/smtnmf.md) as tracked sweeps, on the
# protocol of sweeps/smtnmf_paper.sh (every problem x per-task sample size 20-80, 30 draws,
# +experiment=smtnmf_paper): SMT-NMF and S-NMF with the symmetric normalisation of W
# (normalize=sym) and SMT-NMF with the convergent quarter_split rule at alpha = 0.5. Each variant
# is a sweep label, its sweeps named <label>-<data>-n<size> so that mtc.compare pools them as it
# pools the method rows. Run from the repository root with MTC_DATA_DIR set; extra arguments go
# to every sweep.
set -euo pipefail
extra=("$@")
sweep() {  # label method override...
  local label=$1 method=$2; shift 2
  for data in webkb_pp smtnmf_reuters_orgs_vs_people smtnmf_reuters_orgs_vs_places smtnmf_reuters_people_vs_places; do
    for n in 20 40 60 80; do
      python -m mtc.sweep +experiment=smtnmf_paper method="$method" data="$data" data.params.samples_per_task="$n" \
        "$@" sweep.label="$label" sweep.name="$label-$data-n$n" sweep.verbose=0 "${extra[@]}"
    done
  done
}
sweep smtnmf_sym smtnmf ++method.params.normalize=sym
sweep smtnmf_snmf_sym smtnmf_snmf ++method.params.normalize=sym
sweep smtnmf_quarter smtnmf ++method.params.update=quarter_split ++method.params.alpha=0.5
