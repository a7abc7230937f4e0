#!/usr/bin/env bash
# SMT-NMF Table 5 protocol as tracked sweeps (docs/results/smtnmf.md): every method x problem x
# per-task sample size, 30 draws each (+experiment=smtnmf_paper), one MLflow parent run per cell.
# About 16,800 tracked trials (one cell of 330 took 77 s on 2 cores, so roughly an hour);
# benchmarks/paper_protocol.py smtnmf runs the same trials untracked in under 4 minutes.
# SMTNMF_PROBLEMS and SMTNMF_SIZES (space-separated) replace the problems and sizes, e.g. for the
# 20 Newsgroups problems (compare_smtnmf_20ng.sh).
set -euo pipefail
for data in ${SMTNMF_PROBLEMS:-webkb_pp smtnmf_reuters_orgs_vs_people smtnmf_reuters_orgs_vs_places smtnmf_reuters_people_vs_places}; do
  for n in ${SMTNMF_SIZES:-20 40 60 80}; do
    for method in smtnmf smtnmf_snmf smtnmf_a_snmf smtnmf_ncut smtnmf_a_ncut kmeans a_kmeans; do
      python -m mtc.sweep +experiment=smtnmf_paper method="$method" data="$data" \
        data.params.samples_per_task="$n" sweep.verbose=0 "$@"
    done
  done
done
