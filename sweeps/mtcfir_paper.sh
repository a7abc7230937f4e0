#!/usr/bin/env bash
# MTCFIR paper reproduction (docs/results/mtcfir.md): MTCFIR and its ablations on WebKB4 and
# Reuters (d = 5000, as MTCFIR Table 1: conf/experiment/reuters5000.yaml) with the paper's
# grids x 10 seeds; then Handdigits on the reduced grid x 3 seeds (conf/experiment/*_handdigits.yaml).
set -euo pipefail
for method in mtcfir mtcfir_nf mtcfir_ni mtcfir_nr; do
  python -m mtc.sweep method="$method" data=webkb4 sweep.verbose=0 "$@"
  python -m mtc.sweep +experiment=reuters5000 method="$method" sweep.verbose=0 "$@"  # <method>-reuters5000
done
for experiment in mtcfir_handdigits mtcfir_nr_handdigits mtcfir_ni_handdigits mtcfir_nf_handdigits; do
  python -m mtc.sweep +experiment="$experiment" sweep.verbose=0 "$@"
done
