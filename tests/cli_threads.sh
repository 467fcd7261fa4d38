#!/bin/sh
# tests/cli_threads.sh: thread counts and signals under a memory limit.
#
# A thread count above the CPUs this process may use is lowered with one
# note (and never taken from a checkpoint, where it is bookkeeping); one that
# OpenBLAS's per-thread buffers cannot fit in `ulimit -v` is refused with one
# error line, where OpenBLAS would retry its allocation forever. SIGTERM ends
# every command within a second, also in a library call that never polls.
# Every command runs under `timeout`, so that a hang fails its case.
# shellcheck disable=SC2086
set -u

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_threads ./train ./spectrum ./extrapolate ./sample
FORGE="perl $(dirname "$0")/forge.pl"
small_corpus "$T/small.txt"
for i in $(seq 20); do cat "$T/small.txt"; done >"$T/long.txt"
TINY="--layers 1 --d_model 32 --heads 2 --context 32 --batch 4 --sample_length 20"
CPUS=$(nproc)
./train $TINY --threads 1 --steps 10 --out "$T/good" "$T/small.txt" >/dev/null 2>&1
# the same run, its checkpoint's config asking for 1024 threads
mkdir "$T/forged"
cp "$T/good/config.json" "$T/good/metrics.jsonl" "$T/forged/"
$FORGE "$T/good/model.safetensors" "$T/forged/model.safetensors" 's/\\"threads\\":1,/\\"threads\\":1024,/'

# lowered NAME COMMAND...: under ulimit -v 4000000 (about 3.8 GiB, where 32
# threads' buffers alone need 4 GiB), COMMAND ends within 60 s with exit 0 and
# one note lowering the threads to the CPUs allowed (none when it asked for
# no more than those).
lowered() {
    name=$1
    shift
    sh -c 'ulimit -v 4000000 && exec "$@"' sh timeout -k 5 60 "$@" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    notes=$(cat "$T/out" "$T/err" | grep -c "^note: --threads [0-9]*: this process may use $CPUS CPUs\{0,1\}, so $CPUS thread")
    if [ $rc -eq 0 ] && [ "$notes" -eq 1 ]; then pass "$name"; else fail "$name" "exit $rc, $notes notes"; fi
}
lowered "train --threads 32 under ulimit -v" ./train $TINY --threads 32 --steps 3 --out "$T/t32" "$T/small.txt"
lowered "train --threads 64 under ulimit -v" ./train $TINY --threads 64 --steps 3 --out "$T/t64" "$T/small.txt"
lowered "sample --threads 64 under ulimit -v" ./sample "$T/good" --threads 64 --length 10
lowered "extrapolate --threads 64 under ulimit -v" \
    ./extrapolate "$T/good" "$T/small.txt" --lengths 32 --max_windows 1 --threads 64 --out "$T/ex"
lowered "spectrum --threads 32 under ulimit -v" ./spectrum "$T/good" "$T/small.txt" --samples 1 --threads 32
# a forged thread count is not a request: no note, the default
for c in spectrum sample extrapolate; do
    case $c in
        spectrum) set -- ./spectrum "$T/forged" "$T/small.txt" --samples 1 ;;
        sample) set -- ./sample "$T/forged" --length 10 ;;
        extrapolate) set -- ./extrapolate "$T/forged" "$T/small.txt" --lengths 32 --max_windows 1 --out "$T/ex" ;;
    esac
    sh -c 'ulimit -v 4000000 && exec "$@"' sh timeout -k 5 60 "$@" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    if [ $rc -eq 0 ] && ! grep -q "^note: --threads\|1024" "$T/out" "$T/err" &&
        grep -q "$CPUS threads\{0,1\} (OpenMP" "$T/out" "$T/err"; then
        pass "$c: a checkpoint's threads=1024 is not taken"
    else
        fail "$c: a checkpoint's threads=1024 is not taken" "exit $rc"
    fi
done

# The buffers counted: started with one thread (one OpenBLAS buffer), asked
# for two, with room for the model but not for a second buffer: one error
# line, where OpenBLAS would spin.
if [ "$CPUS" -ge 2 ]; then
    for c in train sample; do
        case $c in
            train) set -- ./train $TINY --threads 2 --steps 3 --out "$T/bad" "$T/small.txt" ;;
            sample) set -- ./sample "$T/good" --threads 2 --length 10 ;;
        esac
        expect "$c --threads 2 without room for its buffers" 1 "2 threads need" \
            env OMP_NUM_THREADS=1 sh -c 'ulimit -v 450000 && exec "$@"' sh timeout -k 5 60 "$@"
    done
    grep -q "^hint: .*ulimit -v" "$T/err" || fail "the hint names ulimit -v" "$(tail -n 1 "$T/err")"
else
    echo "skip the buffers' check: one CPU"
fi

# ------------------------------------------------ SIGTERM within a second
# term NAME PATTERN COMMAND...: COMMAND in the background, SIGTERM once
# PATTERN shows in its output; wants 143 within 1 s of the signal.
term() {
    name=$1 pattern=$2
    shift 2
    timeout -k 5 60 stdbuf -oL "$@" >"$T/out" 2>"$T/err" </dev/null &
    pid=$!
    n=0
    while [ $n -lt 400 ] && ! grep -q -- "$pattern" "$T/out" "$T/err" 2>/dev/null; do
        sleep 0.05
        n=$((n + 1))
    done
    sleep 0.3 # into the work
    t0=$(date +%s.%N)
    kill -TERM "$pid" 2>/dev/null # timeout passes it on
    wait "$pid"
    rc=$?
    s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
    if [ $rc -eq 143 ] && awk -v s="$s" 'BEGIN { exit !(s < 1) }'; then
        pass "$name (exit 143 after $s s)"
    else
        fail "$name" "exit $rc after $s s"
    fi
}
./train $TINY --pos rope --steps 5 --out "$T/rope" "$T/small.txt" >/dev/null 2>&1
term "SIGTERM: train" "attnlab train:" ./train $TINY --steps 100000000 --out "$T/long" "$T/small.txt"
term "SIGTERM: sample" "sample:" ./sample "$T/good" --length 100000 --count 1000
term "SIGTERM: extrapolate" "extrapolate:" ./extrapolate "$T/rope" "$T/long.txt" --lengths 4096,8192 --out "$T/ex2"
# LAPACK's SVD of a 2000 x 2000 P takes seconds and polls nothing: the
# watchdog ends it
term "SIGTERM: spectrum inside LAPACK" "spectrum:" ./spectrum "$T/rope" "$T/long.txt" --length 2000 --samples 2 --out "$T/sp"
grep -q "interrupted" "$T/out" || fail "spectrum inside LAPACK says it was interrupted" "$(cat "$T/out")"

cli_end
