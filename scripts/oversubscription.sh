#!/bin/sh
# scripts/oversubscription.sh [corpus.txt]: how the threads behave when
# another process keeps a core busy. For each load (quiet, and one busy loop
# per `BUSY` count, default 1) and each setting, it times ./extrapolate
# (evaluation: many short parallel regions) and reads ./bench's training
# throughput:
#   1 thread, 2 threads as the commands run them (a bounded spin:
#   GOMP_SPINCOUNT=1000), 2 threads with libgomp's default spin
#   (GOMP_SPINCOUNT=300000, what the commands did before), and 2 threads with
#   OMP_WAIT_POLICY=passive.
# Each figure is the median of ROUNDS runs (default 3). Run from the
# repository root after `make`; the corpus defaults to data/brown.txt.
set -eu
CORPUS=${1:-data/brown.txt}
ROUNDS=${ROUNDS:-3}
BUSY=${BUSY:-1}
T=$(mktemp -d "${TMPDIR:-/tmp}/attnlab_oversub.XXXXXX")
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

echo "oversubscription: $(grep -m 1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores," \
    "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}"
./train --steps 30 --sample_length 0 --out "$T/run" "$CORPUS" >/dev/null

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

# measure ENV... : prints "extrapolate_seconds bench_tok_s" (medians)
measure() {
    : >"$T/ex"
    : >"$T/tr"
    r=0
    while [ "$r" -lt "$ROUNDS" ]; do
        s=$(date +%s.%N)
        env "$@" ./extrapolate "$T/run" "$CORPUS" --lengths 128,256 --max_windows 200 --out "$T" >/dev/null 2>&1
        e=$(date +%s.%N)
        echo "$e - $s" | bc >>"$T/ex"
        env "$@" ./bench --steps 6 | sed -n 's/^ *throughput *\([0-9]*\) tok\/s.*/\1/p' >>"$T/tr"
        r=$((r + 1))
    done
    printf '%8.2f s %10s tok/s' "$(median <"$T/ex")" "$(median <"$T/tr")"
}

row() { # row LOAD LABEL ENV...
    load=$1 label=$2
    shift 2
    printf '%-6s %-34s %s\n' "$load" "$label" "$(measure "$@")"
}

printf '%-6s %-34s %10s %16s\n' load setting extrapolate "train (bench)"
for load in quiet busy; do
    if [ "$load" = busy ]; then
        i=0
        while [ "$i" -lt "$BUSY" ]; do
            sh -c 'while :; do :; done' &
            PIDS="$PIDS $!"
            i=$((i + 1))
        done
    fi
    row "$load" "1 thread" OMP_NUM_THREADS=1
    row "$load" "2 threads, bounded spin (default)" OMP_NUM_THREADS=2
    row "$load" "2 threads, GOMP_SPINCOUNT=300000" OMP_NUM_THREADS=2 GOMP_SPINCOUNT=300000
    row "$load" "2 threads, OMP_WAIT_POLICY=passive" OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive
done
