#!/bin/sh
# Length extrapolation with seeds (`make extrapolate-seeds-demo` and
# `make extrapolate-mlm-demo` run this).
#
# Trains one model per position scheme and seed with ./ablate (resumable:
# finished runs are skipped, unfinished ones continued), into
# $OUT/pos-<scheme>_seed-<n>, then scores every run with one ./extrapolate at
# 1x to 16x the training context, plus the inference-time variants, on
# MAX_BYTES bytes per length. ./extrapolate groups the seeds of each variant:
# its table, extrapolate-summary.csv and extrapolate.png give the mean and the
# 95% interval per length.
#
# usage: sh scripts/extrapolate_seeds.sh OBJECTIVE OUT MAX_BYTES CORPUS SCHEMES VARIANTS -- ABLATE_OPTIONS...
#   OBJECTIVE  clm or mlm
#   SCHEMES    position schemes, slash-separated (ablate's pos=... axis)
#   VARIANTS   space-separated scheme@overrides to score besides the plain runs,
#              e.g. "rope@window=128 alibi@logn=on"
set -eu
cd "$(dirname "$0")/.."
objective=$1 out=$2 max_bytes=$3 corpus=$4 schemes=$5 variants=$6
shift 6
[ "${1:-}" = "--" ] && shift

./ablate pos="$schemes" --objective "$objective" --no-baseline "$@" --out "$out" "$corpus"

set --
for pos in $(echo "$schemes" | tr / ' '); do
    for run in "$out"/pos-"$pos"_seed-*; do
        [ -f "$run/model.safetensors" ] && set -- "$@" "$run"
    done
done
for v in $variants; do
    pos=${v%%@*} over=${v#*@}
    for run in "$out"/pos-"$pos"_seed-*; do
        [ -f "$run/model.safetensors" ] && set -- "$@" "$run@$over"
    done
done
./extrapolate "$@" "$corpus" --lengths 128,256,512,1024,2048 --max_bytes "$max_bytes" --out "$out"
