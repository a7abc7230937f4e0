#!/usr/bin/env bash
# S-MKC reproduction (docs/results/mbc.md): lambda in {0.1, ..., 1.0} x 10 seeds, Gaussian
# kernel with sigma = the median distance (MTCMRL Sec. 4.4, MTCFIR Sec. 4.3-4.4), on WebKB4,
# Reuters (d = 6439 and d = 5000), Handdigits and the 20 Newsgroups splits.
set -euo pipefail
for data in webkb4 reuters handdigits ng1 ng2 20ng ng3; do
  python -m mtc.sweep method=smkc data="$data" sweep.verbose=0 "$@"
done
python -m mtc.sweep method=smkc +experiment=reuters5000 sweep.verbose=0 "$@"
