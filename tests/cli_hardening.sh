#!/bin/sh
# tests/cli_hardening.sh: hostile input to ./train, ./spectrum, ./extrapolate, ./sample and ./ablate.
#
# Forged checkpoints (an all-zero RNG state, a config asking for a huge model,
# tensors that overlap or leave bytes unreferenced), a FIFO where a checkpoint
# should be, a model larger than the memory (also under ulimit -v), two runs in
# one folder, Ctrl-C and SIGTERM in every long phase, resume surprises, and
# files that are not what they claim. Each must give one clear error line (or
# the signal's exit status 130 / 143 and a message), never hang, crash or
# leave a half-written file. A command that hangs is stopped by `timeout` and
# fails its case. Checkpoints are forged with perl (perl-base is essential on
# Debian): tests/forge.pl rewrites a safetensors header.
# shellcheck disable=SC2086
set -u

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_hardening ./train ./spectrum ./extrapolate ./sample ./ablate
BG=""
cleanup() { if [ -n "$BG" ]; then kill "$BG" 2>/dev/null; fi; }
FORGE="perl $(dirname "$0")/forge.pl"

small_corpus "$T/small.txt"
# A longer one (300 KB) for phases that must last long enough to be stopped.
for i in 1 2 3 4 5; do cat "$T/small.txt"; done >"$T/long.txt"
printf 'x' >"$T/one.txt"

TINY="--layers 1 --d_model 32 --heads 2 --context 32 --batch 4 --threads 1 --sample_length 20"
./train $TINY --steps 20 --save_every 10 --out "$T/good" "$T/small.txt" >/dev/null 2>&1
# a copy of the good run with its checkpoint forged by `forge NAME PERL_CODE`
forge() {
    rm -rf "${T:?}/$1"
    mkdir "$T/$1"
    cp "$T/good/config.json" "$T/good/metrics.jsonl" "$T/$1/"
    $FORGE "$T/good/model.safetensors" "$T/$1/model.safetensors" "$2"
}

# poll PATTERN FILE...: waits up to 20 s for PATTERN in one of the files; 0
# when it came.
poll() {
    pattern=$1
    shift
    n=0
    while [ $n -lt 400 ]; do
        if grep -q -- "$pattern" "$@" 2>/dev/null; then return 0; fi
        sleep 0.05
        n=$((n + 1))
    done
    return 1
}

# ------------------------------------------------ 3: an all-zero RNG state
forge zero_rng 's/"data_rng":"[0-9a-f ]*"/"data_rng":"0000000000000000 0000000000000000 0000000000000000 0000000000000000"/'
expect "forged all-zero data_rng" 1 "'data_rng' in metadata is all zero" \
    timeout -k 5 30 ./train --resume "$T/zero_rng" --steps 40
forge short_rng 's/"data_rng":"[0-9a-f ]*"/"data_rng":"1 2 3 4"/'
expect "forged short data_rng" 1 "bad or missing 'data_rng'" timeout -k 5 30 ./train --resume "$T/short_rng" --steps 40

# ------------------------------------------------ 4: a FIFO as checkpoint
mkfifo "$T/fifo.safetensors"
mkdir "$T/fiforun"
mkfifo "$T/fiforun/model.safetensors"
expect "FIFO checkpoint: spectrum" 1 "not a regular file" timeout -k 5 30 ./spectrum "$T/fifo.safetensors" "$T/small.txt"
expect "FIFO checkpoint: extrapolate" 1 "not a regular file" \
    timeout -k 5 30 ./extrapolate "$T/fifo.safetensors" "$T/small.txt" --lengths 32
expect "FIFO checkpoint: train --resume" 1 "not a regular file" timeout -k 5 30 ./train --resume "$T/fiforun" --steps 40
expect "FIFO checkpoint: sample" 1 "not a regular file" timeout -k 5 30 ./sample "$T/fifo.safetensors"
# a checkpoint path longer than any the commands keep: refused as such by
# the one opener (experiments/run/open.c), never cut short and opened
LONG="$T/$(printf '%01200d' 0).safetensors"
expect "a path too long: spectrum" 2 "path too long" ./spectrum "$LONG" "$T/small.txt"
expect "a path too long: extrapolate" 2 "path too long" ./extrapolate "$LONG" "$T/small.txt" --lengths 32
expect "a path too long: sample" 2 "path too long" ./sample "$LONG"
# and a FIFO as the run's metrics, which a resume reads
forge fifometrics ''
rm "$T/fifometrics/metrics.jsonl"
mkfifo "$T/fifometrics/metrics.jsonl"
expect "FIFO metrics.jsonl: train --resume" 1 "metrics.jsonl: not a regular file" \
    timeout -k 5 30 ./train --resume "$T/fifometrics" --steps 40

# ------------------------------------------------ 5: out of memory
expect "a model too large for the memory" 1 "needs" ./train --layers 64 --d_model 8192 --heads 8 --out "$T/bad" "$T/small.txt"
grep -q "available" "$T/err" || fail "a model too large: names what is available" "$(head -n 1 "$T/err")"
expect "too large under ulimit -v" 1 "GiB available" \
    sh -c 'ulimit -v 1500000 && exec ./train --layers 8 --d_model 1024 --heads 8 --threads 1 --out "$1/bad" "$1/small.txt"' \
    sh "$T"
forge huge 's/\\"layers\\":1,/\\"layers\\":64,/; s/\\"d_model\\":32,/\\"d_model\\":8192,/'
expect "forged huge config: spectrum" 1 "51.5 billion parameters" ./spectrum "$T/huge" "$T/small.txt" --out "$T/bad"
expect "forged huge config: extrapolate" 1 "51.5 billion parameters" \
    ./extrapolate "$T/huge" "$T/small.txt" --lengths 32 --out "$T/bad"
expect "forged huge config: train --resume" 1 "51.5 billion parameters" ./train --resume "$T/huge" --steps 40

# ------------------------------------------------ 6: one run folder, one training
# The first run logs every 10 steps; a new metrics line says it is training.
./train $TINY --steps 100000000 --save_every 100000000 --log_every 10 --out "$T/busy" "$T/small.txt" \
    >"$T/busy.out" 2>&1 &
BG=$!
LIVE="$T/busy" # its page and checkpoint pass through temporary files while it trains
if poll '"step": 10,' "$T/busy/metrics.jsonl"; then
    expect "a second ./train into a folder in use" 1 "in use by another command (./train, pid $BG)" \
        ./train $TINY --steps 10 --out "$T/busy" "$T/small.txt"
    # every command that writes into a folder honours its lock; ./ablate refuses a run's folder
    expect "./spectrum --out a folder in training" 1 "in use by another command (./train, pid $BG)" \
        timeout -k 5 30 ./spectrum "$T/good" "$T/small.txt" --samples 1 --out "$T/busy"
    expect "./extrapolate --out a folder in training" 1 "in use by another command (./train, pid $BG)" \
        timeout -k 5 30 ./extrapolate "$T/good" "$T/small.txt" --lengths 32 --out "$T/busy"
    expect "./ablate --out a run's folder" 1 "--out $T/busy: a run's folder (it holds config.json), not a grid's" \
        timeout -k 5 30 ./ablate phi=relu/elu $TINY --steps 2 --out "$T/busy" "$T/small.txt"
    if [ -z "$(find "$T/busy" -name 'results.*' -o -name 'spectrum.csv' -o -name 'extrapolate.csv' -o -name 'curves.png')" ] &&
        [ "$(find "$T/busy" -mindepth 1 -type d | wc -l)" -eq 0 ]; then
        pass "the run in training got nothing from them"
    else
        fail "the run in training got nothing from them" "$(ls "$T/busy")"
    fi
else
    fail "a second ./train into a folder in use" "the first run did not start"
fi
kill -INT "$BG"
wait "$BG"
step=$(sed -n 's/^interrupted at step \([0-9]*\);.*/\1/p' "$T/busy.out")
./train --resume "$T/busy" --steps 100000000 >"$T/busy.out" 2>&1 &
BG=$!
if [ -n "$step" ] && poll "\"step\": $(((step / 10 + 2) * 10))," "$T/busy/metrics.jsonl"; then
    expect "--resume of a folder in use" 1 "in use by another command (./train, pid" \
        timeout -k 5 30 ./train --resume "$T/busy" --steps 100000000
else
    fail "--resume of a folder in use" "the resumed run did not start"
fi
kill -TERM "$BG"
wait "$BG"
rc=$?
BG=""
LIVE=""
if [ $rc -eq 143 ] && ! grep -v '^{"step": [0-9]*, .*}$' "$T/busy/metrics.jsonl" | grep -q .; then
    pass "the run in use ends on SIGTERM (143), its metrics whole"
else
    fail "the run in use ends on SIGTERM (143), its metrics whole" "exit $rc or a garbled metrics line"
fi

# A lock held the way every command takes it (flock on FOLDER/.lock, "pid
# command" inside), here by perl: ./ablate's grid folder, and the
# folders ./spectrum and ./extrapolate write into.
mkdir "$T/held"
perl -e 'use Fcntl ":flock"; open(my $f, ">", $ARGV[0]) or die; flock($f, LOCK_EX) or die;
    syswrite($f, "$$ holder\n"); sleep 60' "$T/held/.lock" >/dev/null 2>&1 &
HOLDER=$!
n=0
while [ $n -lt 100 ] && ! grep -q "^$HOLDER holder" "$T/held/.lock" 2>/dev/null; do sleep 0.05; n=$((n + 1)); done
sleep 0.1
expect "./ablate into a grid folder in use" 1 "$T/held: in use by another command (./holder, pid $HOLDER)" \
    timeout -k 5 30 ./ablate phi=relu/elu $TINY --steps 2 --out "$T/held" "$T/small.txt"
expect "./spectrum into a folder in use" 1 "in use by another command (./holder, pid $HOLDER)" \
    timeout -k 5 30 ./spectrum "$T/good" "$T/small.txt" --samples 1 --out "$T/held"
expect "./extrapolate into a folder in use" 1 "in use by another command (./holder, pid $HOLDER)" \
    timeout -k 5 30 ./extrapolate "$T/good" "$T/small.txt" --lengths 32 --out "$T/held"
expect "./train into a folder in use" 1 "in use by another command (./holder, pid $HOLDER)" \
    timeout -k 5 30 ./train $TINY --steps 2 --out "$T/held" "$T/small.txt"
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null
if [ "$(find "$T/held" -mindepth 1 ! -name .lock | wc -l)" -eq 0 ]; then
    pass "the folder in use got nothing"
else
    fail "the folder in use got nothing" "$(ls -A "$T/held")"
fi

# ------------------------------------------------ 7: tensors that overlap or leave bytes over
# every offset pair [b, e] with b > 0 moved 4 bytes back: each tensor then
# overlaps the one before it
forge overlap 's/"data_offsets":\[([1-9][0-9]*),([0-9]+)\]/"data_offsets":[@{[$1-4]},@{[$2-4]}]/g'
expect "forged overlapping data_offsets" 1 "overlap" ./spectrum "$T/overlap" "$T/small.txt" --out "$T/bad"
forge tail ''
printf 'xyzw' >>"$T/tail/model.safetensors"
expect "unreferenced bytes after the tensors" 1 "belong to no tensor" timeout -k 5 30 ./train --resume "$T/tail" --steps 40

# ------------------------------------------------ 8: Ctrl-C and SIGTERM in every long phase
# stop SIGNAL WANT NAME PATTERN COMMAND...: runs COMMAND in the background, sends
# SIGNAL once PATTERN shows in its output, and wants exit WANT and "interrupted"
# on stdout.
stop() {
    sig=$1 want=$2 name=$3 pattern=$4
    shift 4
    "$@" >"$T/out" 2>"$T/err" &
    BG=$!
    if ! poll "$pattern" "$T/out" "$T/err"; then
        kill "$BG" 2>/dev/null
        wait "$BG"
        BG=""
        fail "$name" "never reached '$pattern'"
        return 1
    fi
    t0=$(date +%s.%N)
    kill "-$sig" "$BG"
    wait "$BG"
    rc=$?
    # seconds from the signal to the exit, for a caller that bounds it
    stop_seconds=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
    BG=""
    why=""
    if [ $rc -ne "$want" ]; then why="exit $rc, want $want"; fi
    grep -q "interrupted" "$T/out" || why="${why:+$why; }no 'interrupted' on stdout"
    if [ -n "$(find "$T" -name '*.tmp' | head -n 1)" ]; then why="${why:+$why; }left a .tmp file"; fi
    if [ -z "$why" ]; then pass "$name"; else fail "$name" "$why"; fi
}
stop INT 130 "SIGINT while sampling: exit 130" "100%) done" \
    ./train $TINY --steps 20 --sample_length 100000 --out "$T/sampling" "$T/small.txt"
if [ ! -e "$T/sampling/samples.txt" ] && ./train --resume "$T/sampling" --steps 30 --sample_length 20 >/dev/null 2>&1; then
    pass "SIGINT while sampling: no samples.txt, and the checkpoint resumes"
else
    fail "SIGINT while sampling: no samples.txt, and the checkpoint resumes" "samples.txt or resume"
fi
# SIGTERM in the final evaluation. The signal goes once step 1's line shows, so
# it lands in step 2 or the final evaluation after it, not in the startup; that
# evaluation reads 400,000 windows of a 15 MB held-out split (seconds on any of
# our machines), and a run that heeds the signal exits within a fraction of a
# second: more than 3 s means the evaluation ran on.
for i in $(seq 100); do cat "$T/long.txt"; done >"$T/big.txt"
if stop TERM 143 "SIGTERM in the final evaluation: exit 143" "step 1/2" \
    ./train $TINY --steps 2 --log_every 1 --eval_every 2 --eval_batches 100000 --val_fraction 0.5 \
    --out "$T/evaluating" "$T/big.txt"; then
    if awk -v s="$stop_seconds" 'BEGIN { exit !(s < 3) }'; then
        pass "SIGTERM in the final evaluation: it stops at once"
    else
        fail "SIGTERM in the final evaluation: it stops at once" "$stop_seconds s after the signal"
    fi
fi
if grep -q '^{"step": 2, "loss": [0-9.]*, "val_loss": null' "$T/evaluating/metrics.jsonl"; then
    pass "SIGTERM in the final evaluation: no val_loss from a part of it"
else
    fail "SIGTERM in the final evaluation: no val_loss from a part of it" "$(cat "$T/evaluating/metrics.jsonl" 2>&1)"
fi
./train $TINY --pos rope --steps 5 --out "$T/rope" "$T/long.txt" >/dev/null 2>&1
stop INT 130 "SIGINT in ./spectrum: exit 130" "spectrum:" \
    ./spectrum "$T/rope" "$T/long.txt" --length 1024 --samples 100000 --out "$T/spec"
if [ ! -e "$T/spec/spectrum.csv" ]; then pass "SIGINT in ./spectrum: nothing written"; else fail "SIGINT in ./spectrum: nothing written" "spectrum.csv"; fi
stop TERM 143 "SIGTERM in ./extrapolate: exit 143" "extrapolate" \
    ./extrapolate "$T/rope" "$T/long.txt" --lengths 256,512,1024,2048,4096,8192 --out "$T/extra"
if [ ! -e "$T/extra/extrapolate.csv" ]; then pass "SIGTERM in ./extrapolate: nothing written"; else fail "SIGTERM in ./extrapolate: nothing written" "extrapolate.csv"; fi

# ------------------------------------------------ 10: resume surprises
./train $TINY --steps 20 --warmup 5 --out "$T/resumed" "$T/small.txt" >/dev/null 2>&1
if ./train --resume "$T/resumed" --steps 40 >"$T/out" 2>"$T/err" &&
    grep -q "^note: resuming with steps 20 -> 40$" "$T/out" &&
    grep -q "^note: the learning rate at step 21 changes from .* to .*, on a schedule that now ends at step 40$" "$T/out"; then
    pass "--resume --steps says how the schedule changes"
else
    fail "--resume --steps says how the schedule changes" "no note"
fi
expect "--resume with another --out" 2 "--out $T/elsewhere: a resumed run stays in its folder" \
    ./train --resume "$T/resumed" --steps 60 --out "$T/elsewhere"
if [ ! -e "$T/elsewhere" ] && ./train --resume "$T/resumed/" --steps 50 --out "$T/resumed" >/dev/null 2>&1; then
    pass "--resume with its own folder as --out"
else
    fail "--resume with its own folder as --out" "refused, or wrote elsewhere"
fi

# ------------------------------------------------ 12: a broken metrics.jsonl
# A resume stops at a line that is cut short, binary or garbage, with its
# number and a hint naming --repair, and changes nothing; --repair keeps the
# lines before it, keeps the original beside, and resumes.
./train $TINY --steps 20 --log_every 5 --out "$T/hist" "$T/small.txt" >/dev/null 2>&1
# broken NAME PERL: a copy of the run, its metrics.jsonl rewritten by PERL
broken() {
    rm -rf "${T:?}/$1"
    cp -r "$T/hist" "$T/$1"
    perl -0777 -pi -e "$2" "$T/$1/metrics.jsonl"
    cp "$T/$1/metrics.jsonl" "$T/$1.before"
}
broken cut 's/^((?:[^\n]*\n){2}[^\n]{30}).*/$1/s'
broken binary 's/^(.*\n)(.*\n)/$1\x00\x01\xfe\xff\x7f\n/'
broken garbage 's/^((.*\n){3})/$1garbage here\n/'
for c in cut:3:"cut short" binary:2:"a NUL byte" garbage:4:"not JSON"; do
    kind=${c%%:*} rest=${c#*:}
    line=${rest%%:*} why=${rest#*:}
    expect "a metrics.jsonl $kind: --resume refused" 1 "$kind/metrics.jsonl: line $line: $why" \
        timeout -k 5 30 ./train --resume "$T/$kind" --steps 25
    if grep -q "^hint: resume with --repair to keep the $((line - 1)) line" "$T/err" && cmp -s "$T/$kind.before" "$T/$kind/metrics.jsonl" &&
        [ -z "$(find "$T/$kind" -name 'metrics.jsonl.broken-*')" ]; then
        pass "a metrics.jsonl $kind: the hint names --repair; nothing changed"
    else
        fail "a metrics.jsonl $kind: the hint names --repair; nothing changed" "$(tail -n 1 "$T/err")"
    fi
    timeout -k 5 30 ./train --resume "$T/$kind" --steps 25 --repair >"$T/out" 2>"$T/err"
    rc=$?
    aside=$(find "$T/$kind" -name 'metrics.jsonl.broken-*')
    kept=$(head -n $((line - 1)) "$T/$kind.before")
    if [ $rc -eq 0 ] && [ -n "$aside" ] && cmp -s "$T/$kind.before" "$aside" &&
        [ "$(head -n $((line - 1)) "$T/$kind/metrics.jsonl")" = "$kept" ] &&
        [ "$(sed -n "${line}p" "$T/$kind/metrics.jsonl" | cut -c1-12)" = '{"step": 25,' ] &&
        grep -q "^note: --repair: .*kept lines 1-$((line - 1)) (line $line: $why[^)]*); the original is $aside" "$T/out"; then
        pass "a metrics.jsonl $kind: --repair keeps lines 1-$((line - 1)), the original beside, and resumes"
    else
        fail "a metrics.jsonl $kind: --repair keeps lines 1-$((line - 1)), the original beside, and resumes" "exit $rc, aside $aside: $(tail -n 1 "$T/out")"
    fi
done
expect "--repair without --resume" 2 "--repair: only with --resume" ./train $TINY --repair --out "$T/bad" "$T/small.txt"

# ------------------------------------------------ 11: files that are not what they claim
expect "a 1-byte corpus" 1 "the corpus is too short: 1 byte" ./train $TINY --out "$T/bad" "$T/one.txt"
expect "a 1-byte corpus: extrapolate" 1 "the corpus is too short: 1 byte" \
    ./extrapolate "$T/good" "$T/one.txt" --lengths 32 --out "$T/bad"
expect "a text file as checkpoint: spectrum" 1 "small.txt: not a safetensors file" ./spectrum "$T/small.txt"

cli_end
