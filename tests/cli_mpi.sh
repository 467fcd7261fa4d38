#!/bin/sh
# tests/cli_mpi.sh: ./train and ./ablate under mpirun -np 2 (Open MPI), tiny
# models, a few seconds each.
#
#  (a) mpirun -np 2 ./train --batch 4 follows ./train --batch 8 at every
#      logged step (loss and validation loss within TOL, below);
#  (b) a SIGTERM to one rank stops both with one checkpoint, and the run
#      resumed under mpirun -np 2 ends with the same bits as one never stopped;
#  (c) a resume on another rank count is refused, both ways;
#  (d) mpirun -np 2 ./ablate writes the same results.md rows as ./ablate
#      (but for the tok/s column, a speed), and with --seeds 2 the same
#      summary.csv (means, intervals, differences from the baseline), bit
#      for bit, and the same results.csv; a rank done first waits for the
#      other asleep; a rank that frees up takes the next run, and ranks that
#      do not share the folder are dealt runs by turn;
#  (e) ./train run plainly: no MPI in its output, checkpoint or config.json,
#      and the same bits as under mpirun -np 1;
#  (f) ranks that disagree (an MPMD launch with another --lr on rank 1)
#      stop at the parameter checksum with a clear error;
#  (g) the commands that run as one process (and ./ablate's modes that
#      train nothing) refuse mpirun -np 2 with one error line.
#
# TOL. The two runs of (a) compute the same function of the same windows and
# differ only in float32 summation order: the loss is the mean of 2 x 128
# terms (two ranks' means, averaged) instead of one mean of 256, and each
# weight gradient sums its rows in two halves plus the allreduce's sum. With
# the unit roundoff u = 6e-8 and a loss of about 5.5 nats, reordering a sum of
# n = 256 terms moves it by at most about log2(n) u L = 3e-6 (blocked sums;
# 1e-6 observed), and the weights that the reordered gradients make differ
# by AdamW's lr times a relative 1e-6, which moves the loss less. metrics.jsonl
# prints 6 decimals, so equal values may print 1e-6 apart. TOL = 2e-5 is 20
# times the largest difference seen over 60 steps, clm and mlm; a real fault
# (a rank training on rank 0's rows, gradients not averaged) moves the loss
# by 1e-3 or more within the first logged steps.
#
# Open MPI refuses to run as root unless told: the two variables are set here,
# for this script's mpirun only. Skipped (not failed) without mpirun.
# $TINY is split into words on purpose:
# shellcheck disable=SC2086
set -u

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_mpi ./train ./ablate

if ! command -v mpirun >/dev/null 2>&1; then
    echo "cli_mpi.sh: skipped: no mpirun (scripts/deps.sh installs openmpi-bin)"
    exit 0
fi
if [ "$(id -u)" = 0 ]; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
# two ranks of one thread each, whatever the machine's core count
MPI="mpirun --oversubscribe --bind-to none -np 2"
TOL=2e-5

small_corpus "$T/c.txt"
TINY="--layers 1 --d_model 32 --heads 2 --context 32 --threads 1 --sample_length 0 --log_every 1"

# The tensors of a safetensors file (the bytes after its header): a resumed
# run's config differs in nothing that matters, but its metadata names its
# own folder.
tensors() {
    n=$(od -An -tu8 -N8 "$1" | tr -d ' ')
    tail -c +$((9 + n)) "$1"
}
# "step loss val_loss" per line of a metrics.jsonl
losses() {
    sed 's/.*"step": \([0-9]*\), "loss": \([-0-9.e]*\), "val_loss": \([-0-9.enul]*\),.*/\1 \2 \3/' "$1"
}
# The largest difference between two runs' logged losses, or "steps differ".
max_diff() {
    losses "$1" >"$T/l1"
    losses "$2" >"$T/l2"
    paste -d' ' "$T/l1" "$T/l2" | awk '
        $1 != $4 || ($3 == "null") != ($6 == "null") { bad = 1 }
        { d = $2 - $5; if (d < 0) d = -d; if (d > m) m = d
          if ($3 != "null") { d = $3 - $6; if (d < 0) d = -d; if (d > m) m = d } }
        END { if (bad || NR < 2) print "steps differ"; else printf "%.3g\n", m }'
}

# ------------------------------------------------- (a) np 2 x B == np 1 x 2B
for objective in clm mlm; do
    extra=""
    if [ $objective = mlm ]; then extra="--objective mlm"; fi
    ./train $TINY $extra --steps 30 --eval_every 10 --batch 8 --out "$T/one_$objective" "$T/c.txt" >"$T/out" 2>"$T/err"
    $MPI ./train $TINY $extra --steps 30 --eval_every 10 --batch 4 --out "$T/two_$objective" "$T/c.txt" >"$T/out" 2>"$T/err"
    d=$(max_diff "$T/one_$objective/metrics.jsonl" "$T/two_$objective/metrics.jsonl")
    if [ "$d" != "steps differ" ] && awk -v d="$d" -v t=$TOL 'BEGIN { exit !(d <= t) }'; then
        pass "np 2 x batch 4 follows np 1 x batch 8 ($objective, 30 steps): largest loss difference $d <= $TOL"
    else
        fail "np 2 x batch 4 follows np 1 x batch 8 ($objective)" "largest loss difference $d"
    fi
done
if grep -q '"effective_batch":	8' "$T/two_clm/config.json" && grep -q 'effective batch 8 = 2 ranks x batch 4' "$T/out"; then
    pass "the effective batch is in config.json and the start-up lines"
else
    fail "the effective batch is in config.json and the start-up lines" "missing"
fi

# --------------------------------- (b) SIGTERM to one rank; resume bit for bit
# A constant learning rate, so that the schedule does not depend on --steps.
LONG="$TINY --batch 4 --warmup 0 --schedule constant --eval_every 7 --save_every 1000000"
$MPI ./train $LONG --steps 100000000 --out "$T/stop" "$T/c.txt" >"$T/out" 2>"$T/err" &
BG=$!
cleanup() { if [ -n "${BG:-}" ]; then kill "$BG" 2>/dev/null; fi; }
lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
i=0
while [ "$(lines "$T/stop/metrics.jsonl")" -lt 5 ] && [ $i -lt 300 ]; do
    sleep 0.1
    i=$((i + 1))
done
rank=$(pgrep -P "$BG" | tail -n 1)
if [ -n "$rank" ]; then kill -TERM "$rank"; fi
wait "$BG"
rc=$?
BG=""
step=$(sed -n 's/^interrupted at step \([0-9]*\);.*/\1/p' "$T/out")
why=""
if [ -z "$rank" ]; then why="no rank process found"; fi
if [ "$rc" -ne 143 ]; then why="${why:+$why; }exit $rc, want 143"; fi
if [ -z "$step" ]; then why="${why:+$why; }no 'interrupted at step' line"; fi
if ! grep -q "continue with: mpirun -np 2 ./train --resume" "$T/out"; then why="${why:+$why; }no resume hint"; fi
if [ -n "$(find "$T" -name '*.tmp')" ]; then why="${why:+$why; }a *.tmp file left"; fi
if [ -z "$why" ]; then pass "SIGTERM to one rank: both stop, exit 143, checkpoint at step $step"; else fail "SIGTERM to one rank" "$why"; fi
if [ -n "$step" ]; then
    end=$((step + 9))
    $MPI ./train --resume "$T/stop" --steps $end >"$T/out" 2>"$T/err"
    $MPI ./train $LONG --steps $end --out "$T/whole" "$T/c.txt" >"$T/out2" 2>"$T/err"
    if grep -q "after $end steps" "$T/out" && tensors "$T/stop/model.safetensors" >"$T/a.bin" &&
        tensors "$T/whole/model.safetensors" >"$T/b.bin" && [ -s "$T/a.bin" ] && cmp -s "$T/a.bin" "$T/b.bin" &&
        [ "$(cut -d, -f1-2 "$T/stop/metrics.jsonl")" = "$(cut -d, -f1-2 "$T/whole/metrics.jsonl")" ]; then
        pass "the resumed np 2 run ends with the bits of one never stopped (step $end)"
    else
        fail "the resumed np 2 run ends with the bits of one never stopped" "tensors or losses differ"
    fi
else
    fail "the resumed np 2 run ends with the bits of one never stopped" "no checkpoint"
fi

# ------------------------------------------- (c) another rank count: refused
expect "a 2-rank run resumed plainly" 2 "trained on 2 ranks (effective batch 2 x 4), resumed on 1" \
    ./train --resume "$T/two_clm" --steps 40
$MPI ./train --resume "$T/one_clm" --steps 40 >"$T/out" 2>"$T/err"
rc=$?
if [ $rc = 2 ] && head -n 1 "$T/err" | grep -q "^error: .*trained on 1 rank (effective batch 1 x 8), resumed on 2"; then
    pass "a 1-process run resumed under mpirun -np 2: refused, exit 2"
else
    fail "a 1-process run resumed under mpirun -np 2" "exit $rc"
fi
if [ "$(wc -l <"$T/one_clm/metrics.jsonl")" = 30 ] && [ "$(wc -l <"$T/two_clm/metrics.jsonl")" = 30 ]; then
    pass "the refused resumes leave the runs"
else
    fail "the refused resumes leave the runs" "metrics changed"
fi

# --------------------------------------------- (d) ablate: np 2 == serial
SMALL="--steps 30 --layers 1 --d_model 32 --heads 2 --context 32 --threads 1 --sample_length 0"
./ablate phi=relu/identity/elu $SMALL --out "$T/abl1" "$T/c.txt" >"$T/out" 2>"$T/err"
$MPI ./ablate phi=relu/identity/elu $SMALL --out "$T/abl2" "$T/c.txt" >"$T/out" 2>"$T/err"
rc=$?
# every column but tok/s, a speed (found by its heading: where the runs ran follows it)
rows() { grep '^| ' "$1" | awk -F'|' 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /^ *tok\/s *$/) c = i } { $c = ""; print }'; }
# (which rank trains which run is the claims' race: the dealing test below holds both to work)
if [ $rc = 0 ] && [ "$(grep -c '^| [a-z]' "$T/abl2/results.md")" = 5 ] &&
    [ "$(rows "$T/abl1/results.md")" = "$(rows "$T/abl2/results.md")" ] && [ -s "$T/abl2/curves.png" ]; then
    pass "mpirun -np 2 ./ablate: the serial run's results.md rows"
else
    fail "mpirun -np 2 ./ablate: the serial run's results.md rows" "exit $rc or rows differ"
fi
# mpirun gives the ranks a terminal, which they share: plain lines, no redraws
if ! grep -q "$(printf '\r')" "$T/out" && grep -q "step 30/30 (100%) done" "$T/out"; then
    pass "mpirun -np 2 ./ablate: progress as plain lines"
else
    fail "mpirun -np 2 ./ablate: progress as plain lines" "carriage returns or no 100% line in its output"
fi
if $MPI ./ablate phi=relu/identity/elu $SMALL --out "$T/abl2" "$T/c.txt" >"$T/out" 2>"$T/err" &&
    [ "$(grep -c 'finished before' "$T/out")" = 4 ] && [ "$(rows "$T/abl1/results.md")" = "$(rows "$T/abl2/results.md")" ]; then
    pass "mpirun -np 2 ./ablate again: every run finished before, the same rows"
else
    fail "mpirun -np 2 ./ablate again" "did not skip, or rows differ"
fi

# A rank done with its share waits for the others asleep, not polling as
# MPI_Barrier does (a core held for as long as the other rank's last run): one
# rank's 10 steps end seconds before the other's 400, and the wait's CPU time is the
# naps' wake-ups, under 5% of it; a polling wait takes a core, about all of it
# (half on a loaded machine), so a quarter tells the two apart.
$MPI ./ablate steps=10/400 --no-baseline $SMALL --out "$T/idle" "$T/c.txt" >"$T/out" 2>"$T/err"
rc=$?
wait_line=$(grep '^rank [01]: waited' "$T/out") # the rank that took the 10 steps
if [ $rc = 0 ] && [ -n "$wait_line" ] &&
    echo "$wait_line" | awk '{ w = $4; c = substr($(NF - 3), 2) } END { exit !(w >= 1 && c < w / 4) }'; then
    pass "mpirun -np 2 ./ablate: a rank done first waits asleep ($wait_line)"
else
    fail "mpirun -np 2 ./ablate: a rank done first waits asleep" "exit $rc; ${wait_line:-no wait line}"
fi

# Runs are claimed as the ranks free up (experiments/run/deal.h): one rank
# takes the 400-step run, the other all three short ones (dealt by turn, the
# first rank would take the third). A claim folder an earlier command left
# (killed) is removed, and this one's is gone at the end.
mkdir -p "$T/deal/.deal-1-1" && : >"$T/deal/.deal-1-1/0"
$MPI ./ablate steps=400/10/11/12 --no-baseline $SMALL --out "$T/deal" "$T/c.txt" >"$T/out" 2>"$T/err"
rc=$?
rank_of() { sed -n "s/^run [0-9]\/4 steps=$1 \[rank \([01]\)\].*(100%) done.*/\1/p" "$T/out"; }
long=$(rank_of 400)
short="$(rank_of 10)$(rank_of 11)$(rank_of 12)"
if [ $rc = 0 ] && [ -n "$long" ] && [ "$short" = "$((1 - long))$((1 - long))$((1 - long))" ] &&
    [ -z "$(ls -a "$T/deal" | grep '^\.deal-')" ]; then
    pass "mpirun -np 2 ./ablate: a rank that frees up takes the next run (400 steps on rank $long, the rest on the other)"
else
    fail "mpirun -np 2 ./ablate: a rank that frees up takes the next run" \
        "exit $rc; the long run on rank '$long', the short ones on '$short'; $(ls -a "$T/deal" | grep '^\.deal-')"
fi

# Ranks that do not see one folder (an MPMD launch with another --out on rank
# 1 stands in for two nodes, each with its own disk): the runs are dealt by
# turn, so that a stopped run resumes where its checkpoint is: rank 1's are
# the second and fourth, in its own folder, and rank 0's tables have all four.
# Run again, each rank finds its own runs finished.
by_turn() {
    mpirun --oversubscribe --bind-to none -np 1 ./ablate steps=12/10/11/13 --no-baseline $SMALL --out "$T/node0" "$T/c.txt" : \
        -np 1 ./ablate steps=12/10/11/13 --no-baseline $SMALL --out "$T/node1" "$T/c.txt" >"$T/out" 2>"$T/err"
}
by_turn
rc=$?
folders() { ls "$1" | grep '^steps-' | tr '\n' ' '; }
if [ $rc = 0 ] && [ "$(folders "$T/node0")" = "steps-11 steps-12 " ] && [ "$(folders "$T/node1")" = "steps-10 steps-13 " ] &&
    [ "$(grep -c '^| steps=[0-9]* | [0-9]* | [0-9]\.[0-9]* |' "$T/node0/results.md")" = 4 ] &&
    [ -z "$(ls -a "$T/node0" "$T/node1" | grep '^\.deal-')" ] && by_turn && [ "$(grep -c 'finished before' "$T/out")" = 4 ]; then
    pass "mpirun -np 2 ./ablate, a folder per rank: dealt by turn, all four rows on rank 0, resumed each on its own rank"
else
    fail "mpirun -np 2 ./ablate, a folder per rank: dealt by turn" \
        "exit $rc; rank 0 has $(folders "$T/node0"), rank 1 $(folders "$T/node1"); $(grep -c 'finished before' "$T/out") finished before"
fi

# --seeds 2: the runs spread over the ranks differently (seeds of one point on
# both), yet every run trains on one thread as it would serially, so the
# summary's means and intervals are the same numbers.
./ablate phi=relu/elu --seeds 2 $SMALL --steps 20 --out "$T/sd1" "$T/c.txt" >"$T/out" 2>"$T/err"
rc1=$?
$MPI ./ablate phi=relu/elu --seeds 2 $SMALL --steps 20 --out "$T/sd2" "$T/c.txt" >"$T/out" 2>"$T/err"
rc=$?
# results.csv without its tok_s column, found by its heading (quoted fields, a run's name
# or where it ran, hold commas: those become ';' first)
runs_csv() {
    awk '{ s = ""; q = 0; for (i = 1; i <= length($0); i++) { ch = substr($0, i, 1); if (ch == "\"") q = !q
           s = s ((ch == "," && q) ? ";" : ch) } print s }' "$1" |
        awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "tok_s") c = i } { $c = ""; print }'
}
if [ $rc1 = 0 ] && [ $rc = 0 ] && [ "$(wc -l <"$T/sd2/summary.csv")" = 4 ] &&
    grep -q '^phi=relu,relu,2,[0-9.]*,[0-9.]*,[0-9.]*,[0-9.]*,[-0-9.]*,' "$T/sd2/summary.csv" &&
    cmp -s "$T/sd1/summary.csv" "$T/sd2/summary.csv" &&
    [ "$(runs_csv "$T/sd1/results.csv")" = "$(runs_csv "$T/sd2/results.csv")" ]; then
    pass "mpirun -np 2 ./ablate --seeds 2: the serial run's summary.csv, bit for bit"
else
    fail "mpirun -np 2 ./ablate --seeds 2: the serial run's summary.csv" \
        "exit $rc1/$rc; $(diff "$T/sd1/summary.csv" "$T/sd2/summary.csv" 2>&1 | head -n 4)"
fi

# ------------------------------------------------ (e) plain ./train unchanged
./train $TINY --batch 4 --steps 12 --eval_every 6 --out "$T/plain" "$T/c.txt" >"$T/out" 2>"$T/err"
rc=$?
mpirun -np 1 ./train $TINY --batch 4 --steps 12 --eval_every 6 --out "$T/np1" "$T/c.txt" >"$T/out1" 2>"$T/err"
why=""
if [ $rc != 0 ]; then why="exit $rc"; fi
if grep -q "rank" "$T/out" "$T/plain/config.json"; then why="${why:+$why; }ranks in the output or config.json"; fi
if grep -aq '"ranks"' "$T/plain/model.safetensors"; then why="${why:+$why; }ranks in the checkpoint"; fi
if ! head -n 1 "$T/out" | grep -q "^attnlab train: $T/plain, 1 thread (OpenMP; OpenBLAS kernel "; then why="${why:+$why; }start-up line"; fi
tensors "$T/plain/model.safetensors" >"$T/a.bin"
tensors "$T/np1/model.safetensors" >"$T/b.bin"
if ! cmp -s "$T/a.bin" "$T/b.bin"; then why="${why:+$why; }differs from mpirun -np 1"; fi
if [ -z "$why" ]; then pass "plain ./train: no MPI in its output or files, the bits of mpirun -np 1"; else fail "plain ./train" "$why"; fi

# ------------------------------------------- (f) ranks that disagree: stopped
mpirun --oversubscribe --bind-to none -np 1 ./train $TINY --batch 4 --steps 20 --eval_every 5 --out "$T/split" "$T/c.txt" : \
    -np 1 ./train $TINY --batch 4 --steps 20 --eval_every 5 --lr 1e-3 --out "$T/split" "$T/c.txt" >"$T/out" 2>"$T/err"
rc=$?
if [ $rc = 1 ] && head -n 1 "$T/err" | grep -q "^error: step 5: rank 1's parameters or data stream differ from rank 0's"; then
    pass "ranks that disagree stop at the checksum (step 5), exit 1"
else
    fail "ranks that disagree stop at the checksum" "exit $rc: $(head -n 1 "$T/err")"
fi

# ------------------------ (g) commands that run as one process refuse mpirun
# Every rank would run the whole command into one folder: rank 0 says so and
# they exit before anything is written; mpirun -np 1 runs them as usual. The
# same for ./ablate's modes that train nothing. Every command whose main is
# not command_main_distributed's is tried, so a new one that forgets to
# refuse fails here.
one_process=$(grep -L "command_main_distributed" $(grep -l "^int main(" experiments/commands/*.c) |
    sed 's|.*/||; s|\.c$||')
case " $(echo "$one_process" | tr '\n' ' ')" in
*" sample "*) ;; # (extrapolate report sample spectrum, so far: found at all)
*) fail "the commands that run as one process" "found: '$one_process'" ;;
esac
for cmd in $one_process; do
    $MPI ./$cmd "$T/plain" >"$T/out" 2>"$T/err"
    rc=$?
    # (mpirun adds its own lines about the job's status after rank 0's)
    if [ $rc != 0 ] && head -n 1 "$T/err" | grep -q "^error: ./$cmd under mpirun -np 2: it runs as one process" &&
        [ "$(grep -c '^error: ' "$T/err")" = 1 ] && [ ! -s "$T/out" ]; then
        pass "mpirun -np 2 ./$cmd: refused, one error line"
    else
        fail "mpirun -np 2 ./$cmd: refused" "exit $rc: $(head -n 1 "$T/err")"
    fi
done
mpirun --oversubscribe --bind-to none -np 1 ./sample "$T/plain" --length 4 >"$T/out" 2>"$T/err"
rc=$?
if [ $rc = 0 ] && [ -s "$T/out" ]; then pass "mpirun -np 1 ./sample: runs"; else fail "mpirun -np 1 ./sample" "exit $rc: $(head -n 1 "$T/err")"; fi
$MPI ./bench --steps 1 --layers 1 --d_model 32 >"$T/out" 2>"$T/err"
rc=$?
if [ $rc != 0 ] && head -n 1 "$T/err" | grep -q "^error: ./bench under mpirun -np 2: each rank would time the same step" &&
    [ ! -s "$T/out" ]; then
    pass "mpirun -np 2 ./bench (not --mpi): refused"
else
    fail "mpirun -np 2 ./bench (not --mpi): refused" "exit $rc: $(head -n 1 "$T/err")"
fi
for mode in --ladder --paired --tables-only; do
    $MPI ./ablate $mode "$T/abl1" "$T/abl1" >"$T/out" 2>"$T/err"
    rc=$?
    if [ $rc != 0 ] && head -n 1 "$T/err" | grep -q "^error: $mode: trains nothing, so it runs without mpirun"; then
        pass "mpirun -np 2 ./ablate $mode: refused"
    else
        fail "mpirun -np 2 ./ablate $mode: refused" "exit $rc: $(head -n 1 "$T/err")"
    fi
done

# ------------------------------------------- Ctrl-C to mpirun itself (docs/mpi.md)
# The ranks save one checkpoint and exit 130; Open MPI's mpirun reports that as 1.
$MPI ./train $LONG --steps 100000000 --out "$T/sigint" "$T/c.txt" >"$T/out" 2>"$T/err" &
BG=$!
i=0
while [ "$(lines "$T/sigint/metrics.jsonl")" -lt 5 ] && [ $i -lt 300 ]; do
    sleep 0.1
    i=$((i + 1))
done
kill -INT "$BG"
wait "$BG"
rc=$?
BG=""
if [ "$rc" -eq 1 ] && grep -q "^interrupted at step [0-9]*; checkpoint saved" "$T/out" && [ -s "$T/sigint/model.safetensors" ]; then
    pass "Ctrl-C to mpirun: the checkpoint saved, mpirun's exit status 1 as documented"
else
    fail "Ctrl-C to mpirun" "exit $rc: $(tail -n 2 "$T/out")"
fi

cli_end
