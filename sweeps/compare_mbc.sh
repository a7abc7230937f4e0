#!/usr/bin/env bash
# The MBC family (docs/results/mbc.md) regenerated from MLflow: S-MBC, MBC and S-MBC with the
# sequential candidates (sweep label smbc_sequential) by sweeps/mbc_paper.sh, with k-means beside
# them, on WebKB4, Reuters (d = 6439 and 5000), Handdigits and the 20 Newsgroups splits, each with
# lambda in {0.1, ..., 1.0} x 10 seeds, and S-MKC by sweeps/mkc_paper.sh (the longest part, on 2
# cores: 28 minutes without ng3, about 1.75 hours for ng3, where one of its 100 fits ends every
# 56-65 s); then python -m mtc.compare into docs/results/compare_mbc/. Run from the repository
# root with MTC_DATA_DIR set; extra arguments go to every sweep.
set -euo pipefail
bash "$(dirname "$0")/mbc_paper.sh" "$@"
bash "$(dirname "$0")/mkc_paper.sh" "$@"
for data in webkb4 reuters handdigits ng1 ng2 ng3 20ng; do
  python -m mtc.sweep method=kmeans data="$data" sweep.verbose=0 "$@"
done
python -m mtc.sweep method=kmeans +experiment=reuters5000 sweep.verbose=0 "$@"
python -m mtc.compare --benchmarks webkb4 reuters reuters5000 handdigits ng1 ng2 ng3 20ng \
  --out docs/results/compare_mbc
