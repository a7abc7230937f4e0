#!/usr/bin/env bash
# MTCFIR paper reproduction (docs/results/mtcfir.md): MTCFIR and its ablations on WebKB4 and
# Reuters (d = 5000, as MTCFIR Table 1) with the paper's grids x 10 seeds.
set -euo pipefail
for method in mtcfir mtcfir_nf mtcfir_ni mtcfir_nr; do
  python -m mtc.sweep method="$method" data=webkb4 sweep.verbose=0 "$@"
  python -m mtc.sweep method="$method" data=reuters data.params.text.n_features=5000 \
    sweep.name="$method-reuters5000" sweep.verbose=0 "$@"
done
