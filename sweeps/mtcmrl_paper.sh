#!/usr/bin/env bash
# MTCMRL paper reproduction (docs/results/mtcmrl.md): MTCMRL, SNMF+LR and SNMF on Reuters and
# WebKB4 with the paper's grids x 10 seeds, then MTCMRL with the printed update rules
# (conf/experiment/mtcmrl_printed.yaml; sweep name mtcmrl_printed-<data>).
set -euo pipefail
for data in reuters webkb4; do
  for method in mtcmrl snmf_lr snmf; do
    python -m mtc.sweep method="$method" data="$data" sweep.verbose=0 "$@"
  done
  python -m mtc.sweep +experiment=mtcmrl_printed data="$data" sweep.verbose=0 "$@"
done
