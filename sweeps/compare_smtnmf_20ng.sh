#!/usr/bin/env bash
# SMT-NMF's six 20 Newsgroups problems (docs/results/smtnmf.md; the paper's tables for them are
# not in our copy, so there is no published column) regenerated from MLflow: sweeps/smtnmf_paper.sh
# (its seven methods) on them at each per-task sample size 10-40 (Table 2's totals 40-160 over
# four tasks), and SMT-NMF with the symmetric normalisation (sweep label smtnmf_sym, as in
# smtnmf_variants.sh), 30 draws each (+experiment=smtnmf_paper): 192 sweeps named
# <label>-<data>-n<size>. Then python -m mtc.compare with each problem pooled over its four sizes
# (<data>@10+20+30+40) into docs/results/compare_smtnmf_20ng/. Run from the repository root with
# MTC_DATA_DIR set; extra arguments go to every sweep.
set -euo pipefail
problems=(smtnmf_20ng_rec_talk smtnmf_20ng_rec_sci smtnmf_20ng_rec_comp smtnmf_20ng_talk_sci
          smtnmf_20ng_talk_comp smtnmf_20ng_sci_comp)
sizes=(10 20 30 40)
SMTNMF_PROBLEMS="${problems[*]}" SMTNMF_SIZES="${sizes[*]}" bash "$(dirname "$0")/smtnmf_paper.sh" "$@"
for data in "${problems[@]}"; do
  for n in "${sizes[@]}"; do
    python -m mtc.sweep +experiment=smtnmf_paper method=smtnmf data="$data" data.params.samples_per_task="$n" \
      ++method.params.normalize=sym sweep.label=smtnmf_sym sweep.name="smtnmf_sym-$data-n$n" sweep.verbose=0 "$@"
  done
done
python -m mtc.compare --benchmarks "${problems[@]/%/@10+20+30+40}" --out docs/results/compare_smtnmf_20ng
