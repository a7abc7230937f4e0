#!/usr/bin/env bash
# SPMTC's protocol on the two 20 Newsgroups pairs (docs/results/spmtc.md; the paper's tables for
# them are not in our copy, so there is no published column): the nine methods of
# compare_spmtc.sh on comp_vs_sci_counts and rec_vs_talk_counts (+experiment=spmtc_paper: grid x
# 20 runs, sweeps named <method>-<data>), then python -m mtc.compare into
# docs/results/compare_spmtc_20ng/. All ASI (a_asi) runs the malsar W step only: on these pooled
# pairs the eigen step's W spans null(X) (d > N), the objective drops to rounding noise (1e-27) at
# once, MALSAR's relative rule |f - f_prev| <= tol f_prev never holds at that level, and a fit runs
# all 1000 iterations (673 and 675 s for the two that finished on comp_vs_sci, 80 fits: about
# 7.5 hours on 2 cores) at chance accuracy (mean acc 0.520 and 0.507);
# `method=a_asi` without the override runs it anyway. Run from the repository root with
# MTC_DATA_DIR set; extra arguments go to every sweep.
set -euo pipefail
for data in comp_vs_sci_counts rec_vs_talk_counts; do
  for method in kmeans a_kmeans ncut a_ncut asi lssmtc spmtc_h spmtc_s; do
    python -m mtc.sweep +experiment=spmtc_paper method="$method" data="$data" sweep.name="$method-$data" "$@"
  done
  python -m mtc.sweep +experiment=spmtc_paper method=a_asi data="$data" 'method.grid.w_update=[malsar]' \
    sweep.name="a_asi-$data" "$@"
done
python -m mtc.compare --benchmarks comp_vs_sci_counts rec_vs_talk_counts --out docs/results/compare_spmtc_20ng
