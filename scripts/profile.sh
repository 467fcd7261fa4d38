#!/bin/sh
# Where a training step's time goes, by function: `perf record` over
# `./bench` (the reference configuration; any ./bench options may follow),
# then the functions that took the most samples and the share of each
# library (OpenBLAS's sgemm kernels, our own code, OpenMP's runtime and its
# waiting, libm). Needs Linux's perf (Debian: apt-get install linux-perf)
# and kernel.perf_event_paranoid <= 2.
#
# usage: sh scripts/profile.sh [BENCH_OPTIONS...]
#   e.g. env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE sh scripts/profile.sh --steps 20
set -eu
cd "$(dirname "$0")/.."
command -v perf >/dev/null 2>&1 || { echo "error: perf: not found" >&2; echo "hint: apt-get install linux-perf" >&2; exit 1; }
[ -x ./bench ] || { echo "error: ./bench: not built" >&2; echo "hint: make" >&2; exit 1; }
data=$(mktemp "${TMPDIR:-/tmp}/attnlab-perf.XXXXXX")
trap 'rm -f "$data" "$data.txt"' EXIT INT TERM
perf record -q -F 997 -o "$data" -- ./bench "$@"
perf report -i "$data" --stdio --no-children --sort dso,symbol 2>/dev/null | grep -v '^#' | grep -v '^$' >"$data.txt"
echo
echo "profile: share of the samples by library"
awk '{ share = $1; sub("%", "", share); dso = $2; by[dso] += share } END { for (d in by) printf "  %6.2f%%  %s\n", by[d], d }' \
    "$data.txt" | sort -rn
echo
echo "profile: the 25 functions with the most samples"
head -n 25 "$data.txt" | awk '{ printf "  %7s  %-28s %s\n", $1, $2, $4 }'
