#!/bin/sh
# tests/cli_experiments.sh: ./ablate and ./spectrum end to end, and on bad input.
#
# Run from the repository root after `make` (make check does both). A tiny
# ablation must finish in seconds and write all its outputs; ./spectrum on its
# softmax run must write all of its own. Each bad input must give the expected
# exit code (2 usage, 1 runtime; never a crash), "error: " and an expected
# phrase on stderr's first line, at most two lines on stderr, and no *.tmp left.
# shellcheck disable=SC2086
set -u

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_experiments ./ablate ./spectrum

small_corpus "$T/small.txt"
printf 'not a checkpoint at all' >"$T/bogus.safetensors"

# ---------------------------------------------------------------- ./ablate
A=$T/abl
SMALL="--steps 50 --layers 1 --d_model 32 --heads 2 --context 32 --threads 1"
if ./ablate phi=relu/identity/elu $SMALL --out "$A" "$T/small.txt" >"$T/out" 2>"$T/err"; then
    pass "a tiny phi ablation finishes"
else
    fail "a tiny phi ablation finishes" "exit $?"
fi
rows=$(grep -c '^| [a-z]' "$A/results.md" 2>/dev/null || echo 0)
if [ "$rows" = 5 ]; then pass "results.md has 4 rows (3 + baseline)"; else fail "results.md has 4 rows" "found $((rows - 1))"; fi
if [ "$(wc -l <"$A/results.csv" 2>/dev/null)" = 5 ] && [ -s "$A/curves.png" ]; then pass "results.csv and curves.png"; else fail "results.csv and curves.png" "missing or short"; fi
missing=""
for run in phi-relu phi-identity phi-elu baseline_attn-softmax; do
    for f in model.safetensors metrics.jsonl config.json loss.png result.json; do
        [ -s "$A/$run/$f" ] || missing="$missing $run/$f"
    done
done
if [ -z "$missing" ]; then pass "every run folder is complete"; else fail "every run folder is complete" "missing$missing"; fi
if ./ablate phi=relu/identity/elu $SMALL --out "$A" "$T/small.txt" >"$T/out" 2>&1 && [ "$(grep -c 'finished before' "$T/out")" = 4 ]; then
    pass "running it again skips the finished runs"
else
    fail "running it again skips the finished runs" "did not skip"
fi
# The same folder with other options holds other runs: refused, naming them,
# and nothing in it changes.
before=$(cat "$A/results.md")
expect "ablate: a folder of runs with other options" 1 "holds a run with other options (layers 1 -> 2)" \
    ./ablate phi=relu/identity/elu $SMALL --layers 2 --out "$A" "$T/small.txt"
if [ "$(cat "$A/results.md")" = "$before" ]; then pass "the refused ablation leaves results.md"; else fail "the refused ablation leaves results.md" "changed"; fi
# --seeds: every point twice, a summary row per point with intervals.
S=$T/seeds
if ./ablate phi=relu/elu --seeds 2 $SMALL --steps 20 --out "$S" "$T/small.txt" >"$T/out" 2>"$T/err" &&
    [ "$(grep -c ',seed=' "$S/results.csv")" = 6 ] && [ "$(wc -l <"$S/summary.csv")" = 4 ] &&
    grep -q '^| phi=relu | relu | 2/2 | ' "$S/results.md" && [ -s "$S/curves.png" ]; then
    pass "ablate --seeds 2: six runs, a summary row per point"
else
    fail "ablate --seeds 2: six runs, a summary row per point" "$(head -c 300 "$T/err")"
fi
expect "ablate: --seeds 0" 2 "--seeds" ./ablate phi=relu/elu --seeds 0 $SMALL "$T/small.txt"
# --expect: the same grid again (every run finished: nothing trains), with two
# claims; each verdict line is in results.md and on stdout, one per claim here.
if ./ablate phi=relu/elu --seeds 2 $SMALL --steps 20 --out "$S" --expect "phi=relu < phi=elu" \
    --expect "baseline > phi=elu" "$T/small.txt" >"$T/out" 2>"$T/err" &&
    [ "$(grep -c 'finished before' "$T/out")" = 6 ] &&
    [ "$(grep -c '^verdict: phi=relu < phi=elu: ' "$S/results.md")" = 1 ] &&
    [ "$(grep -c '^verdict: baseline > phi=elu: ' "$S/results.md")" = 1 ] &&
    [ "$(grep -c '^verdict: ' "$T/out")" = 2 ] && grep -q '^pairs,\|,pairs,apart,' "$S/summary.csv"; then
    pass "ablate --expect: a verdict line per claim, in results.md and on stdout"
else
    fail "ablate --expect: a verdict line per claim, in results.md and on stdout" "$(head -c 300 "$T/err")"
fi
expect "ablate: --expect without '<'" 2 "--expect \"phi=relu\": not one '<' or '>' between two points" \
    ./ablate phi=relu/elu --expect "phi=relu" $SMALL --out "$T/never" "$T/small.txt"
expect "ablate: --expect on no axis" 2 "'heads' is not an axis of the grid" \
    ./ablate phi=relu/elu --expect "heads=2 < heads=4" $SMALL --out "$T/never" "$T/small.txt"
expect "ablate: --expect on the baseline, none run" 2 "no two points of the grid to compare" \
    ./ablate phi=relu/elu --no-baseline --expect "baseline < phi=elu" $SMALL --out "$T/never" "$T/small.txt"
expect "ablate: --within not a number" 2 "--within: 'lots' is not a positive number" \
    ./ablate phi=relu/elu --within lots $SMALL --out "$T/never" "$T/small.txt"
if [ ! -e "$T/never" ]; then pass "a refused --expect trains nothing"; else fail "a refused --expect trains nothing" "$T/never made"; fi
expect "ablate --paired: one arm" 2 "--paired: takes two arms" ./ablate --paired "$S/phi-relu"
expect "ablate --paired: no such grid" 1 "no such grid folder" ./ablate --paired "$T/nothere/a" "$T/nothere/b"
expect "ablate --paired: no runs" 1 "no runs (phi-tanh_seed-<n>" ./ablate --paired "$S/phi-relu" "$S/phi-tanh"
# A run that diverges is recorded at its step and the others go on (the
# setting is the one tests/test_train.c pins: the decay flips the weights'
# sign and multiplies them by 99 every step).
D=$T/div
if ./ablate lr=1e-3/10 --weight_decay 10 --clip 0 --warmup 0 --schedule constant --no-baseline $SMALL --steps 20 \
    --out "$D" "$T/small.txt" >"$T/out" 2>"$T/err" && grep -q 'diverged at step' "$T/out" &&
    grep -q ',diverged,[0-9]*,' "$D/results.csv" && grep -q ',done,[0-9]*,' "$D/results.csv"; then
    pass "a diverging run is recorded and the others go on"
else
    fail "a diverging run is recorded and the others go on" "not in the output or results.csv"
fi

# --tables-only: the tables of the finished runs, the others listed and not trained
# (the diverged grid above with one run's result taken away: it trains nothing).
rm "$D/lr-10/result.json"
if ./ablate lr=1e-3/10 --weight_decay 10 --clip 0 --warmup 0 --schedule constant --no-baseline $SMALL --steps 20 \
    --tables-only --out "$D" "$T/small.txt" >"$T/out" 2>"$T/err" && ! grep -q 'step 20/20' "$T/out" &&
    [ ! -f "$D/lr-10/result.json" ] && grep -q '^- lr=10$' "$D/results.md" && grep -q 'Not trained yet' "$D/results.md" &&
    [ "$(grep -c ',done,' "$D/results.csv")" = 1 ]; then
    pass "ablate --tables-only: the finished runs' tables, the rest listed, nothing trained"
else
    fail "ablate --tables-only: the finished runs' tables, the rest listed, nothing trained" "$(cat "$T/out" "$T/err" | head -5)"
fi
# A run trained to its last step by ./train with the grid's options into the run's folder
# counts under --tables-only: recorded from its log, with the val bpb the grid's own run
# has (to the log's 6 decimals); a run whose log ends short of the last step stays not
# trained.
R=$T/bytrain
bpb_of() { sed -n 's/.*"val_bpb":[[:space:]]*\([0-9.]*\).*/\1/p' "$1" | head -n 1; }
./ablate heads=2/4 --no-baseline $SMALL --steps 20 --eval_every 5 --out "$R" "$T/small.txt" >"$T/out" 2>"$T/err"
grid_bpb=$(printf '%.6f' "$(bpb_of "$R/heads-4/result.json")")
rm -r "$R/heads-4"
./train $SMALL --heads 4 --steps 20 --eval_every 5 --out "$R/heads-4" "$T/small.txt" >"$T/out" 2>"$T/err"
if ./ablate heads=2/4 --no-baseline $SMALL --steps 20 --eval_every 5 --tables-only --out "$R" "$T/small.txt" \
    >"$T/out" 2>"$T/err" && [ "$(bpb_of "$R/heads-4/result.json")" = "$grid_bpb" ] &&
    grep -q "recorded from its metrics (val bpb" "$T/out" && [ "$(grep -c ',done,' "$R/results.csv")" = 2 ]; then
    pass "ablate --tables-only: a run ./train finished in the grid's folder is recorded, the grid's val bpb"
else
    fail "ablate --tables-only: a run ./train finished in the grid's folder is recorded" "$(cat "$T/out" "$T/err" | head -5)"
fi
rm -r "$R/heads-4"
./train $SMALL --heads 4 --steps 10 --eval_every 5 --out "$R/heads-4" "$T/small.txt" >"$T/out" 2>"$T/err"
sed 's/"steps":\t10,/"steps":\t20,/' "$R/heads-4/config.json" >"$T/cfg" && cp "$T/cfg" "$R/heads-4/config.json"
if ./ablate heads=2/4 --no-baseline $SMALL --steps 20 --eval_every 5 --tables-only --out "$R" "$T/small.txt" \
    >"$T/out" 2>"$T/err" && [ ! -f "$R/heads-4/result.json" ] && [ "$(grep -c ',done,' "$R/results.csv")" = 1 ]; then
    pass "ablate --tables-only: a checkpoint short of the last step is not trained, not recorded"
else
    fail "ablate --tables-only: a checkpoint short of the last step is not trained" "$(cat "$T/out" "$T/err" | head -5)"
fi
expect "ablate: unknown key" 2 "unknown key 'bogus'" ./ablate bogus=1/2 $SMALL "$T/small.txt"
expect "ablate: bad value" 2 "--phi: 'tanh' is not one of" ./ablate phi=relu/tanh $SMALL "$T/small.txt"
expect "ablate: empty axis value" 2 "phi=relu//elu: an empty value in the axis" ./ablate phi=relu//elu $SMALL "$T/small.txt"
expect "ablate: a value given twice" 2 "steps=8 and steps=8: one run folder," ./ablate steps=8/9/8 $SMALL "$T/small.txt"
expect "ablate: empty axis" 2 "no value" ./ablate phi= $SMALL "$T/small.txt"
expect "ablate: no axis" 2 "no axis given" ./ablate $SMALL "$T/small.txt"
expect "ablate: no corpus" 2 "no corpus given" ./ablate phi=relu/elu $SMALL
expect "ablate: missing corpus" 1 "cannot open" ./ablate phi=relu/elu $SMALL --out "$T/abl2" "$T/nothere.txt"

# ---------------------------------------------------------------- ./spectrum
S=$A/baseline_attn-softmax
if ./spectrum "$S" "$T/small.txt" --samples 2 >"$T/out" 2>"$T/err" && [ -s "$S/spectrum.csv" ] && [ -s "$S/spectrum.png" ] &&
    [ -s "$S/heatmap.png" ] && [ -s "$S/singular-values.png" ] && grep -q 'k 90%' "$T/out"; then
    pass "spectrum of the softmax run writes its outputs"
else
    fail "spectrum of the softmax run writes its outputs" "exit or files wrong"
fi
if [ "$(head -n 1 "$S/spectrum.csv" 2>/dev/null)" = "layer,head,k,c,s" ] && [ "$(wc -l <"$S/spectrum.csv")" = $((1 + 2 * 32)) ]; then
    pass "spectrum.csv: layer, head, k, c, s for 2 heads x 32 values"
else
    fail "spectrum.csv" "wrong header or length"
fi
# s: a row-stochastic P has largest singular value >= 1 (P 1 = 1), and the
# values of a head come in descending order
if awk -F, 'NR > 1 { if ($3 == 1 && $5 < 0.999) bad = 1; if ($3 > 1 && $5 > prev * 1.000001 + 1e-12) bad = 1; prev = $5 }
        END { exit bad || NR < 2 }' "$S/spectrum.csv"; then
    pass "spectrum.csv: s_1 >= 1 and s descending per head"
else
    fail "spectrum.csv: s_1 >= 1 and s descending per head" "$(sed -n 2,3p "$S/spectrum.csv")"
fi
if ./spectrum "$S/model.safetensors" --samples 1 --eigen --out "$T/eig" >"$T/out" 2>"$T/err" && [ -s "$T/eig/spectrum.csv" ]; then
    pass "spectrum of a bare checkpoint, its corpus from the metadata, --eigen"
else
    fail "spectrum of a bare checkpoint" "exit or files wrong"
fi
# Several runs (the --seeds grid's softmax baseline, two seeds): each gets its
# outputs, and spectrum-summary.csv has per layer the mean over the runs of
# c(T/4), the mean over heads of each run's spectrum.csv at k = T/4.
SB=$(ls -d "$T/seeds/baseline_attn-softmax_seed-"* 2>/dev/null | head -n 2)
if [ "$(echo "$SB" | wc -l)" = 2 ] && ./spectrum $SB "$T/small.txt" --samples 2 --out "$T" >"$T/out" 2>"$T/err" &&
    awk -F, 'FNR == 1 { f++; next }
        FILENAME ~ /summary/ { got[$1] = $3; next }
        $3 == 8 { sum[$1] += $4; cnt[$1]++ }
        END { if (f != 3) exit 1; for (l in got) if ((got[l] - sum[l] / cnt[l])^2 > 1e-10) exit 1; exit !(length(got) == 1) }' \
        $(for r in $SB; do echo "$r/spectrum.csv"; done) "$T/spectrum-summary.csv" &&
    [ -s "$T/spectrum-summary.png" ] && grep -q '^0 .* +- ' "$T/out"; then
    pass "spectrum of two runs: each run's outputs and the per-layer mean with intervals"
else
    fail "spectrum of two runs" "$(head -n 3 "$T/err") $(cat "$T/spectrum-summary.csv" 2>/dev/null)"
fi
expect "spectrum: one of several runs missing" 1 "nothere: no such run folder" ./spectrum "$(echo "$SB" | head -n 1)" "$T/nothere" "$T/small.txt"
expect "spectrum: not a checkpoint" 1 "bogus.safetensors" ./spectrum "$T/bogus.safetensors" "$T/small.txt"
expect "spectrum: missing run" 1 "nothere" ./spectrum "$T/nothere" "$T/small.txt"
expect "spectrum: T longer than the model allows" 2 "learned positions up to 32" ./spectrum "$S" "$T/small.txt" --length 64
expect "spectrum: bad --samples" 2 "--samples: expected an integer" ./spectrum "$S" --samples x
expect "spectrum: unknown option" 2 "unknown option '--bogus'" ./spectrum "$S" --bogus

# a grid whose every run fails (each refused by the memory check under a
# limit) writes its tables and says there is no curves.png, as there is none
if (ulimit -v 3000000 && ./ablate phi=relu/elu --no-baseline --layers 8 --d_model 2048 --context 512 --steps 2 \
    --out "$T/allfail" "$T/small.txt" >"$T/out" 2>"$T/err"); [ -s "$T/allfail/results.md" ] &&
    [ ! -e "$T/allfail/curves.png" ] && grep -q "no curves.png: no run has a validation curve" "$T/out" &&
    ! grep -q "curves.png (" "$T/out"; then
    pass "ablate: every run failed: the tables, and no claim of a curves.png"
else
    fail "ablate: every run failed" "$(tail -n 3 "$T/out")"
fi

# scripts/ladder.sh: a th part's later look trains only the points it names, each with
# ./train and the options ./ablate gives it (the same bits as the grid's own run), and
# the grid's tables then record them (s0 made tiny; the rung's sweep as if it had run)
L=$T/ladder
mkdir -p "$L/ladder-lr-s0"
printf 'point,lr:min_lr,status,final_val_bpb\nx,0.004:0.0002,done,2.5\n' >"$L/ladder-lr-s0/results.csv"
# the same losses, step by step (the line without its timings), to the last step
# (run $1 of grid $2, default ladder-th-s0, against the reference grid $3, default ladder-ref)
same_curve() {
    sed 's/, "tok_s".*//' "$L/${2:-ladder-th-s0}/$1/metrics.jsonl" >"$T/a" &&
        sed 's/, "tok_s".*//' "$T/${3:-ladder-ref}/$1/metrics.jsonl" >"$T/b" &&
        grep -q '^{"step": 20, .*"val_bpb": [0-9]' "$T/a" && cmp -s "$T/a" "$T/b"
}
LRUNG="--layers 1 --d_model 32 --steps 20 --warmup 2 --eval_every 10"
LCOMMON="--heads 4 --batch 2 --threads 1 --sample_length 0"
if LADDER_RUNG_s0=$LRUNG LADDER_COMMON=$LCOMMON ABLATE=./ablate sh scripts/ladder.sh "$L" "$T/small.txt" \
    th-s0:3@heads-16 >"$T/out" 2>"$T/err" &&
    [ "$(ls -d "$L"/ladder-th-s0/*_seed-* | wc -l)" = 6 ] && ! ls -d "$L"/ladder-th-s0/heads-4* >/dev/null 2>&1 &&
    [ ! -e "$L/ladder-init-s0" ] && ! ls "$L"/ladder-th-s0/*.log >/dev/null 2>&1 &&
    # shellcheck disable=SC2086
    ./ablate heads=4/16 talking_heads=none/both --no-baseline $LRUNG $LCOMMON --lr 0.004 --min_lr 0.0002 \
        --context 128 --seeds 3 --out "$T/ladder-ref" "$T/small.txt" >/dev/null 2>&1 &&
    same_curve heads-16_talking_heads-both_seed-1339 && same_curve heads-16_talking_heads-none_seed-1338; then
    pass "ladder: th-s0:3@heads-16 trains the two 16-head points alone, with the grid's bits"
else
    fail "ladder: a th part's points" "$(tail -n 3 "$T/err") $(ls "$L/ladder-th-s0" 2>&1 | head -n 8)"
fi
# saved with its points, a part without the plain 4-head point leaves the initialisations'
# grid as it is (th-s2:7@heads-16 had rewritten ladder-init-s2's tables for 7 seeds)
mkdir -p "$L/ladder-init-s0/heads-4_seed-1337"
echo '{"status": "done", "step": 1, "val_bpb": 8.0}' >"$L/ladder-init-s0/heads-4_seed-1337/result.json"
if TABLES_ONLY=1 LADDER_RUNG_s0=$LRUNG LADDER_COMMON=$LCOMMON sh scripts/ladder.sh "$L" \
    "$T/small.txt" th-s0:3@heads-16 >"$T/out" 2>"$T/err" && [ -f "$L/ladder-th-s0/runs.tar.xz" ] &&
    [ "$(ls "$L/ladder-init-s0")" = heads-4_seed-1337 ]; then
    pass "ladder: saving th-s0:3@heads-16 leaves the initialisations' grid alone"
else
    fail "ladder: saving a part without the plain 4-head point" "$(tail -n 3 "$T/err") $(ls "$L/ladder-init-s0" | head -n 4)"
fi
rm -rf "$L/ladder-init-s0"
if TABLES_ONLY=1 LADDER_RUNG_s0=$LRUNG LADDER_COMMON=$LCOMMON sh scripts/ladder.sh "$L" \
    "$T/small.txt" th-s0:3 >"$T/out" 2>"$T/err" && [ "$(tar -tJf "$L/ladder-th-s0/runs.tar.xz" | grep -c result.json)" = 6 ] &&
    grep -q 'heads=4,talking_heads=both,seed=1339' "$L/ladder-th-s0/results.md"; then
    pass "ladder: the points' runs saved with TABLES_ONLY, the others listed as not trained"
else
    fail "ladder: saving a th part's points" "$(tail -n 3 "$T/err")"
fi
# a linformer part's later look likewise: the points it names, and one seed of the baseline
if LADDER_RUNG_s0=$LRUNG LADDER_COMMON=$LCOMMON ABLATE=./ablate sh scripts/ladder.sh "$L" "$T/small.txt" \
    linformer-s0:3@linformer_k-64,baseline_attn-softmax_seed-1338 >"$T/out" 2>"$T/err" &&
    [ "$(ls -d "$L"/ladder-linformer-s0/*_seed-* | wc -l)" = 4 ] && ! ls -d "$L"/ladder-linformer-s0/linformer_k-128* >/dev/null 2>&1 &&
    [ -d "$L"/ladder-linformer-s0/baseline_attn-softmax_seed-1338 ] &&
    # shellcheck disable=SC2086
    ./ablate linformer_k=64/128 --attn linformer --objective mlm --pos rope --context 512 $LRUNG $LCOMMON \
        --lr 0.004 --min_lr 0.0002 --seeds 2 --out "$T/ladder-ref-lf" "$T/small.txt" >/dev/null 2>&1 &&
    same_curve linformer_k-64_seed-1338 ladder-linformer-s0 ladder-ref-lf &&
    same_curve baseline_attn-softmax_seed-1338 ladder-linformer-s0 ladder-ref-lf &&
    TABLES_ONLY=1 LADDER_RUNG_s0=$LRUNG LADDER_COMMON=$LCOMMON sh scripts/ladder.sh "$L" "$T/small.txt" \
        linformer-s0:3@linformer_k-64,baseline_attn-softmax_seed-1338 >"$T/out" 2>"$T/err" &&
    [ "$(tar -tJf "$L/ladder-linformer-s0/runs.tar.xz" | grep -c result.json)" = 4 ] &&
    grep -q '^- linformer_k=128,seed=1339' "$L/ladder-linformer-s0/results.md" &&
    grep -q '^- baseline attn=softmax,seed=1337' "$L/ladder-linformer-s0/results.md"; then
    pass "ladder: linformer-s0:3@linformer_k-64,baseline_attn-softmax_seed-1338 trains and saves those runs alone, with the grid's bits"
else
    fail "ladder: a linformer part's points" "$(tail -n 3 "$T/err") $(ls "$L/ladder-linformer-s0" 2>&1 | head -n 8)"
fi
expect "ladder: points on a part other than th or linformer" 2 "only a th or linformer part's look takes @POINTS" \
    sh scripts/ladder.sh "$L" "$T/small.txt" cos-s0:3@heads-16
expect "ladder: fewer seeds than the plan's first look" 2 "the plan's looks are 3,6,12" \
    sh scripts/ladder.sh "$L" "$T/small.txt" cos-s0:2
# more seeds than a look, for a grid whose pairs were set apart (th-s2:7)
if TABLES_ONLY=1 LADDER_RUNG_s0=$LRUNG LADDER_COMMON=$LCOMMON sh scripts/ladder.sh "$L" \
    "$T/small.txt" th-s0:4 >"$T/out" 2>"$T/err" && grep -q "th-s0: 4 seeds, not a look of the plan" "$T/out"; then
    pass "ladder: a part may take more seeds than a look (th-s0:4), saying so"
else
    fail "ladder: more seeds than a look" "$(tail -n 3 "$T/err")"
fi
# the plain 4-head point brings the initialisations and the spectrum of both arms
L2=$T/ladder2
mkdir -p "$L2/ladder-lr-s0"
cp "$L/ladder-lr-s0/results.csv" "$L2/ladder-lr-s0/"
if LADDER_RUNG_s0=$LRUNG LADDER_COMMON=$LCOMMON ABLATE=./ablate sh scripts/ladder.sh "$L2" "$T/small.txt" \
    th-s0:3@heads-4_talking_heads-none >"$T/out" 2>"$T/err" &&
    [ -f "$L2/ladder-th-s0/heads-4_talking_heads-none-spectrum/spectrum-summary.csv" ] &&
    [ -f "$L2/ladder-init-s0/heads-4-spectrum/spectrum-summary.csv" ]; then
    pass "ladder: th-s0:3@heads-4_talking_heads-none measures the spectrum of both arms"
else
    fail "ladder: the spectrum's two arms" "$(tail -n 3 "$T/err") $(ls "$L2"/ladder-* 2>&1 | head -n 8)"
fi

cli_end
