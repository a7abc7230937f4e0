#!/usr/bin/env bash
# SMT-NMF's Table 5 (docs/results/smtnmf.md) regenerated from MLflow: sweeps/smtnmf_paper.sh
# (every method x problem x per-task sample size 20-80, 30 draws each) and
# sweeps/smtnmf_variants.sh (our variant rows, the same protocol), then python -m
# mtc.compare with each problem pooled over its four sizes (<data>@20+40+60+80, as the
# paper's table averages them) into docs/results/compare_smtnmf/. Run from the repository
# root with MTC_DATA_DIR set; extra arguments go to every sweep.
set -euo pipefail
bash "$(dirname "$0")/smtnmf_paper.sh" "$@"
bash "$(dirname "$0")/smtnmf_variants.sh" "$@"
python -m mtc.compare --benchmarks webkb_pp@20+40+60+80 smtnmf_reuters_orgs_vs_people@20+40+60+80 \
  smtnmf_reuters_orgs_vs_places@20+40+60+80 smtnmf_reuters_people_vs_places@20+40+60+80 \
  --out docs/results/compare_smtnmf
