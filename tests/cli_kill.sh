#!/bin/sh
# tests/cli_kill.sh: ./train killed with SIGKILL at random moments.
#
# A tiny run of 600 steps saves a checkpoint every 3 steps. It is started,
# killed with kill -9 (no handler runs) at a random moment (below), then
# resumed (or started again when no checkpoint was saved yet), and so on for
# KILLS kills; then it runs to the end. After every kill the checkpoint on disk must load
# (./spectrum reads every parameter), and the run must end with the same
# checkpoint, byte for byte, and the same metrics (timings aside) as an
# uninterrupted run. KILL_SEED=N repeats a sequence of delays; KILLS=N sets
# how many kills (default 12).
# shellcheck disable=SC2086
set -u

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_kill ./train ./spectrum
BG=""
cleanup() { if [ -n "$BG" ]; then kill -9 "$BG" 2>/dev/null; fi; }

small_corpus "$T/small.txt"
RUN="--layers 1 --d_model 32 --heads 2 --context 32 --batch 4 --threads 1 --steps 600 --warmup 20 --save_every 3
     --log_every 1 --eval_every 50 --eval_batches 2 --sample_length 20"
SEED=${KILL_SEED:-$(date +%s)}
KILLS=${KILLS:-12}
echo "cli_kill.sh: kill seed $SEED (KILL_SEED=$SEED repeats it)"

# metrics.jsonl without the timing of each line
metrics() { sed 's/, "tok_s": [0-9]*, "time_s": [0-9.]*}$/}/' "$1"; }

# The uninterrupted run, in the folder the killed one will use (the path is
# in the checkpoint's config), then moved aside.
if ./train $RUN --out "$T/run" "$T/small.txt" >"$T/out" 2>"$T/err"; then
    pass "the uninterrupted run"
else
    fail "the uninterrupted run" "exit $?"
fi
mv "$T/run" "$T/ref"

# start: the run from its checkpoint, or from the start when there is none.
start() {
    if [ -e "$T/run/model.safetensors" ]; then
        ./train --resume "$T/run" >"$T/out" 2>"$T/err" &
    else
        ./train $RUN --out "$T/run" "$T/small.txt" >"$T/out" 2>"$T/err" &
    fi
    BG=$!
}

# rand N: an integer in [0, N) from the seed and the attempt.
rand() { awk -v s="$SEED" -v i="$i" -v n="$1" 'BEGIN { srand(s + i); print int(n * rand()) }'; }
# The step of the last metrics line (0 when there is none).
last_step() {
    s=$(tail -n 1 "$T/run/metrics.jsonl" 2>/dev/null | sed -n 's/^{"step": \([0-9]*\),.*/\1/p')
    echo "${s:-0}"
}

# Three kinds of moment, in turn: a random time from the start (0 to 150 ms:
# start-up, loading, the first steps; cut short once the run is 30 steps
# further, since a fast CPU trains this model at a step a millisecond), a
# random number of steps further (1 to 30: any phase of a step), and the
# moment a checkpoint write begins. Each kill moves the run at most ~30 steps
# (plus a poll's few), so it is still running at the last one.
kills=0 in_write=0 i=0 bad=""
while [ $kills -lt "$KILLS" ] && [ $i -lt $((KILLS * 3)) ]; do
    i=$((i + 1))
    last=$(last_step)
    target=$((last + 1 + $(rand 30)))
    start
    n=0
    case $((i % 3)) in
    1) ticks=$(($(rand 150) / 5)) cap=$((last + 30))
       while [ $n -lt $ticks ] && ! grep -q "^{\"step\": $cap," "$T/run/metrics.jsonl" 2>/dev/null; do
           n=$((n + 1))
           sleep 0.005
       done ;;
    2) while ! grep -q "^{\"step\": $target," "$T/run/metrics.jsonl" 2>/dev/null && [ $n -lt 2000 ]; do
           n=$((n + 1))
           sleep 0.005
       done ;;
    0) while [ ! -e "$T/run/model.safetensors.tmp" ] && [ $n -lt 200000 ]; do n=$((n + 1)); done ;;
    esac
    kill -9 "$BG" 2>/dev/null
    wait "$BG" 2>/dev/null # the shell's "Killed"
    rc=$?
    BG=""
    if [ $rc -ne 137 ]; then break; fi # it ended before the kill: no more to do
    kills=$((kills + 1))
    if [ -e "$T/run/model.safetensors.tmp" ]; then in_write=$((in_write + 1)); fi
    if [ -e "$T/run/model.safetensors" ] &&
        ! ./spectrum "$T/run" "$T/small.txt" --samples 1 --out "$T/spec" >/dev/null 2>"$T/err"; then
        bad="$bad $kills"
    fi
done
if [ -z "$bad" ] && [ $kills -eq "$KILLS" ]; then
    pass "$kills kills ($in_write during a checkpoint write): every checkpoint loads"
else
    fail "$kills kills ($in_write during a checkpoint write): every checkpoint loads" "kills$bad left one that does not"
fi
if [ $in_write -gt 0 ]; then
    pass "some kills landed during a checkpoint write"
else
    fail "some kills landed during a checkpoint write" "none did: the test did not test that"
fi

# Then to the end: resumed (a kill in the sampling leaves a finished
# checkpoint, which --resume calls already trained).
start
wait "$BG"
rc=$?
BG=""
if [ $rc -ne 0 ] && ! grep -q "already trained for 600 steps" "$T/err"; then
    fail "the killed run finishes" "exit $rc: $(head -n 1 "$T/err")"
elif cmp -s "$T/ref/model.safetensors" "$T/run/model.safetensors"; then
    pass "the killed run ends with the uninterrupted run's checkpoint, byte for byte"
else
    fail "the killed run ends with the uninterrupted run's checkpoint, byte for byte" "model.safetensors differs"
fi
if [ "$(metrics "$T/ref/metrics.jsonl")" = "$(metrics "$T/run/metrics.jsonl")" ]; then
    pass "and with the same metrics"
else
    fail "and with the same metrics" "metrics.jsonl differs"
fi

cli_end
