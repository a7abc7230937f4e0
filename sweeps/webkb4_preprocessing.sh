#!/usr/bin/env bash
# What we tried on MTCMRL's WebKB4 gap (docs/results/mtcmrl.md): SNMF with the papers' square-root
# rule (update = sqrt), 10 seeds, on WebKB4 built with one text-preprocessing override at a time
# (data.params.text.*), each sweep named snmf-webkb4_<variant> so that mtc.compare reads every
# variant as a benchmark; then python -m mtc.compare for accuracy and NMI into
# docs/results/compare_webkb4_preprocessing/ (and .../nmi/). Run from the repository root with
# MTC_DATA_DIR set; extra arguments go to every sweep.
set -euo pipefail
extra=("$@")
sweep() {  # variant [override]
  local variant=$1; shift
  python -m mtc.sweep method=snmf data=webkb4 "method.grid.update=[sqrt]" "$@" sweep.name="snmf-webkb4_$variant" \
    sweep.verbose=0 "${extra[@]}"
}
sweep default
sweep sublinear_tf data.params.text.sublinear_tf=true
sweep tf data.params.text.tfidf=false
sweep min_df2 data.params.text.min_df=2
sweep with_stop_words data.params.text.stop_words=null
sweep all_terms data.params.text.n_features=null
benchmarks=(webkb4_default webkb4_sublinear_tf webkb4_tf webkb4_min_df2 webkb4_with_stop_words webkb4_all_terms)
python -m mtc.compare --benchmarks "${benchmarks[@]}" --out docs/results/compare_webkb4_preprocessing
python -m mtc.compare --benchmarks "${benchmarks[@]}" --metric nmi --out docs/results/compare_webkb4_preprocessing/nmi
