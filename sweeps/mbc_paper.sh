#!/usr/bin/env bash
# MBC-family reproduction (docs/results/mbc.md): S-MBC and MBC with lambda in {0.1, ..., 1.0} x
# 10 seeds (MTCMRL Sec. 4.4, MTCFIR Sec. 4.3) on WebKB4, Reuters (d = 6439 as MTCMRL Table 4,
# d = 5000 as MTCFIR Table 5), Handdigits (MTCFIR Table 3) and the 20 Newsgroups splits.
set -euo pipefail
for method in smbc mbc; do
  for data in webkb4 reuters handdigits ng1 ng2 ng3 20ng; do
    python -m mtc.sweep method="$method" data="$data" sweep.verbose=0 "$@"
  done
  python -m mtc.sweep method="$method" +experiment=reuters5000 sweep.verbose=0 "$@"
done
# S-MBC with the literal in-place reading of Algorithm 1 (steps 7-8 start from step 5's h)
for data in webkb4 reuters handdigits ng1 ng2 ng3 20ng; do
  python -m mtc.sweep +experiment=smbc_sequential data="$data" sweep.verbose=0 "$@"
done
python -m mtc.sweep +experiment=smbc_sequential data=reuters data.params.text.n_features=5000 \
  sweep.name=smbc_sequential-reuters5000 sweep.verbose=0 "$@"
