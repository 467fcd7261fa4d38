#!/bin/sh
# tests/cli_extrapolate.sh: ./extrapolate end to end, and on bad input.
#
# Run from the repository root after `make` (make check does both). Tiny
# models (pos = sinusoidal and learned, context 32) are trained here in a
# second; ./extrapolate must score them at 0.5x to 4x the context, write a
# table, extrapolate.csv and extrapolate.png, show n/a where learned positions
# run out, and agree with training's val_bpb at the training length. Each bad
# input must give the expected exit code (2 usage, 1 runtime; never a crash),
# "error: " and an expected phrase on stderr's first line, at most two lines
# on stderr, no *.tmp left and no output written.
# shellcheck disable=SC2086
set -u

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_extrapolate ./train ./extrapolate
X=$(pwd)/extrapolate

small_corpus "$T/small.txt"
printf 'not a checkpoint at all' >"$T/bogus.safetensors"
: >"$T/empty.safetensors"


# The field of CSV line `row` (1 = header) in column `col`, fields quoted as
# RFC 4180 (labels like "rope@logn=on,window=128" hold commas).
csv_field() {
    awk -v row="$2" -v col="$3" 'NR == row {
        n = 0; f = ""; q = 0
        for (i = 1; i <= length($0); i++) {
            c = substr($0, i, 1)
            if (q) { if (c == "\"") { if (substr($0, i + 1, 1) == "\"") { f = f c; i++ } else q = 0 } else f = f c }
            else if (c == "\"") q = 1
            else if (c == ",") { n++; if (n == col) { print f; exit } f = "" }
            else f = f c
        }
        n++; if (n == col) print f
    }' "$1"
}

TINY="--steps 30 --layers 1 --d_model 32 --heads 2 --context 32 --threads 1 --eval_every 30"
for pos in sinusoidal learned; do
    if ./train $TINY --pos $pos --out "$T/$pos" "$T/small.txt" >"$T/out" 2>"$T/err"; then
        pass "a tiny pos=$pos model trains"
    else
        fail "a tiny pos=$pos model trains" "exit $?"
    fi
done
./train $TINY --objective mlm --pos rope --out "$T/mlm" "$T/small.txt" >/dev/null 2>&1
cp "$T/small.txt" "$T/gone.txt"
./train $TINY --steps 2 --out "$T/orphan" "$T/gone.txt" >/dev/null 2>&1
rm -f "$T/gone.txt"

# ---------------------------------------------------------------- the table, CSV and plot
O=$T/cmp
S=$T/sinusoidal L=$T/learned
if ./extrapolate "$S" "$L" "$S@window=8" "$S@logn=on,window=16" "$T/small.txt" --lengths 64,16,128,32 \
    --max_windows 4 --threads 1 --out "$O" >"$T/out" 2>"$T/err"; then
    pass "four variants at four lengths finish"
else
    fail "four variants at four lengths finish" "exit $?"
fi
if grep -q '64 (2x)' "$T/out" && grep -q '16 (0.5x)' "$T/out" && grep -q '^learned .* n/a .* n/a' "$T/out" &&
    grep -q '^sinusoidal@logn=on,window=16 ' "$T/out"; then
    pass "the table: lengths as multiples of the context, labels with overrides, n/a"
else
    fail "the table" "$(cat "$T/out")"
fi
if grep -q 'note: learned: pos=learned has positions up to its context 32 only; n/a at length 64, 128' "$T/err" &&
    grep -q 'eta' "$T/err"; then
    pass "stderr: a note on the n/a lengths and progress with an ETA"
else
    fail "stderr: a note on the n/a lengths and progress" "missing"
fi
C=$O/extrapolate.csv
if [ "$(head -n 1 "$C" 2>/dev/null)" = "label,pos,train_context,length,ratio,bpb,windows,bytes" ] &&
    [ "$(wc -l <"$C")" = 17 ]; then
    pass "extrapolate.csv: the header and 4 x 4 rows"
else
    fail "extrapolate.csv: the header and 4 x 4 rows" "wrong header or length"
fi
# Every row: learned beyond 32 is empty with 0 windows; the rest a bpb in
# (0, 9) over min(4, all) windows of length bytes each.
bad=""
for row in $(seq 2 17); do
    label=$(csv_field "$C" $row 1) pos=$(csv_field "$C" $row 2) ctx=$(csv_field "$C" $row 3)
    len=$(csv_field "$C" $row 4) ratio=$(csv_field "$C" $row 5) bpb=$(csv_field "$C" $row 6)
    win=$(csv_field "$C" $row 7) bytes=$(csv_field "$C" $row 8)
    if [ "$label" = learned ] && [ "$len" -gt 32 ]; then
        [ -z "$bpb" ] && [ "$win" = 0 ] || bad="$bad row$row(learned $len: '$bpb')"
        continue
    fi
    ok=$(awk -v b="$bpb" -v w="$win" -v n="$bytes" -v l="$len" -v c="$ctx" -v r="$ratio" \
        'BEGIN { print (b + 0 > 0 && b + 0 < 9 && w == 4 && n == w * l && c == 32 && r + 0 == l / c) ? "yes" : "no" }')
    [ "$ok" = yes ] || bad="$bad row$row($label,$pos,$len,$bpb,$win,$bytes)"
done
if [ "$(csv_field "$C" 14 1)" != "sinusoidal@logn=on,window=16" ]; then bad="$bad quoted-label"; fi
if [ -z "$bad" ]; then pass "extrapolate.csv: every row parses and adds up"; else fail "extrapolate.csv rows" "$bad"; fi
if [ "$(head -c 4 "$O/extrapolate.png" 2>/dev/null | od -An -c | tr -d ' ')" = '211PNG' ]; then
    pass "extrapolate.png is a PNG"
else
    fail "extrapolate.png is a PNG" "missing or not a PNG"
fi

# At the training length, over training's validation windows (eval_batches 8
# x batch 16), the score is training's own val_bpb.
if ./extrapolate "$S" --lengths 32 --max_windows 128 --threads 1 >"$T/out" 2>"$T/err" && [ -s "$S/extrapolate.csv" ]; then
    want=$(tail -n 1 "$S/metrics.jsonl" | sed 's/.*"val_bpb": \([0-9.]*\).*/\1/')
    got=$(csv_field "$S/extrapolate.csv" 2 6)
    if awk -v a="$want" -v b="$got" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4 && a > 0) }'; then
        pass "at the context, the corpus from the metadata, into the run folder: training's val_bpb ($got)"
    else
        fail "at the context: training's val_bpb" "got '$got', training logged '$want'"
    fi
else
    fail "at the context, into the run folder" "exit or no CSV"
fi
# A masked LM: at the training length, over training's validation windows
# and masks, the score is training's val_bpb on the masked bytes; the bytes
# column counts the masked positions (round(0.15 * 32) = 5 per window); the
# bidirectional window and log-n apply at inference, at longer lengths too.
M=$T/mlm
if ./extrapolate "$M" "$M@window=8,logn=on" --lengths 32,64 --max_windows 128 --threads 1 >"$T/out" 2>"$T/err" &&
    [ -s "$M/extrapolate.csv" ]; then
    want=$(tail -n 1 "$M/metrics.jsonl" | sed 's/.*"val_bpb": \([0-9.]*\).*/\1/')
    got=$(csv_field "$M/extrapolate.csv" 2 6)
    bytes=$(csv_field "$M/extrapolate.csv" 2 8)
    wl=$(csv_field "$M/extrapolate.csv" 5 6)
    if awk -v a="$want" -v b="$got" -v w="$wl" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4 && a > 0 && w > 0) }' &&
        [ "$bytes" = $((128 * 5)) ]; then
        pass "mlm: at the context, training's val_bpb on the masked bytes ($got); window and log-n at 2x"
    else
        fail "mlm: at the context, training's val_bpb" "got '$got' over '$bytes' bytes, training logged '$want'; window/logn at 64: '$wl'"
    fi
else
    fail "mlm: scored" "exit or no CSV: $(head -n 2 "$T/err")"
fi
# Seeds: runs whose names differ only in _seed-N form a group; the summary
# has each group's mean, sd and 95% t interval (t(0.975, 1) = 12.7062 for
# two runs), and a table without groups writes no summary (and removes one).
for s in 1 2; do
    ./train $TINY --pos rope --seed $s --sample_length 0 --out "$T/sd/r_seed-$s" "$T/small.txt" >/dev/null 2>&1
done
if ./extrapolate "$T/sd/r_seed-1" "$T/sd/r_seed-2" "$T/sd/r_seed-2@window=8" "$T/sd/r_seed-1@window=8" \
    --lengths 32,64 --max_windows 20 --threads 1 --out "$T/sd" >"$T/out" 2>"$T/err" &&
    awk -F, 'FNR == 1 { next }
        FILENAME ~ /summary/ { if ($1 == "r" && $2 == 32) { n = $3; m = $4; sd = $5; lo = $6; hi = $7 }; next }
        $1 ~ /^r_seed-[12]$/ && $4 == 32 { x[++k] = $6 }
        END {
            want_m = (x[1] + x[2]) / 2; d = x[1] - x[2]; want_sd = (d < 0 ? -d : d) / sqrt(2)
            h = 12.7062 * want_sd / sqrt(2)
            ok = n == 2 && k == 2 && (m - want_m)^2 < 1e-16 && (sd - want_sd)^2 < 1e-16 && (lo - (want_m - h))^2 < 1e-12 &&
                (hi - (want_m + h))^2 < 1e-12
            exit !ok
        }' "$T/sd/extrapolate.csv" "$T/sd/extrapolate-summary.csv" &&
    [ "$(grep -c '^r@window=8,' "$T/sd/extrapolate-summary.csv")" = 2 ] && grep -q '^r (2 runs) ' "$T/out"; then
    pass "seeds: the group of r_seed-1 and r_seed-2, its mean, sd and interval"
else
    fail "seeds: a group's mean and interval" "$(cat "$T/err" "$T/sd/extrapolate-summary.csv" 2>/dev/null | head -5)"
fi
if ./extrapolate "$T/sd/r_seed-1" "$T/sd/r_seed-1@window=8" --lengths 32 --max_windows 4 --threads 1 --out "$T/sd" \
    >"$T/out" 2>"$T/err" && [ ! -e "$T/sd/extrapolate-summary.csv" ]; then
    pass "no group of two: no summary, and the earlier one removed"
else
    fail "no group of two: no summary" "exit or summary left"
fi
# A bare checkpoint writes beside itself (never into the current folder);
# --label names the rows; --window and --logn apply to every variant.
mkdir -p "$T/here" "$T/bare"
cp "$S/model.safetensors" "$T/bare/m.safetensors"
if (cd "$T/here" && "$X" "$T/bare/m.safetensors" "$L@window=4" --window 8 --logn on --label a,b \
    --lengths 16,32 --max_windows 2 --threads 1 >"$T/out" 2>"$T/err") &&
    [ "$(csv_field "$T/bare/extrapolate.csv" 2 1)" = a ] && [ "$(csv_field "$T/bare/extrapolate.csv" 5 1)" = b ] &&
    [ -s "$T/bare/extrapolate.png" ] && [ ! -e "$T/here/extrapolate.csv" ]; then
    pass "a bare checkpoint writes beside itself, --label, --window and --logn"
else
    fail "a bare checkpoint, --label, --window and --logn" "exit or outputs wrong"
fi
if ./extrapolate "$S" "$S@bca=on" "$T/small.txt" --lengths 32,64 --max_windows 2 --threads 1 --out "$T/bca" >"$T/out" 2>"$T/err" &&
    grep -q '^sinusoidal@bca=on ' "$T/out" && [ "$(wc -l <"$T/bca/extrapolate.csv")" = 5 ]; then
    pass "@bca=on runs"
else
    fail "@bca=on runs" "exit or outputs wrong"
fi
# Every position scheme, and the inference-time options on them: a window of
# 8 changes nothing at T = 8 and changes the score at T = 64; log-n changes
# nothing up to the context (32) and changes it past it.
ALL=""
for pos in rope alibi kerple_power kerple_log sandwich xpos; do
    ./train $TINY --pos $pos --out "$T/$pos" "$T/small.txt" >/dev/null 2>&1 || fail "a tiny pos=$pos model trains" "exit $?"
    ALL="$ALL $T/$pos $T/$pos@window=8 $T/$pos@logn=on"
done
if ./extrapolate "$S" $ALL "$T/xpos@bca=on" "$T/small.txt" --lengths 8,64 --max_windows 3 --threads 1 \
    --out "$T/every" >"$T/out" 2>"$T/err"; then
    pass "every scheme with window and logn overrides, and xpos with bca"
else
    fail "every scheme with overrides" "$(cat "$T/err")"
fi
csv=$T/every/extrapolate.csv
if [ "$(wc -l <"$csv")" = $((1 + 2 * (1 + 6 * 3 + 1))) ] && ! awk -F, 'NR > 1 && ($6 == "" || $6 + 0 <= 0)' "$csv" | grep -q .; then
    pass "every scheme: a positive bpb in every row"
else
    fail "every scheme: rows" "$(cat "$csv")"
fi
bpb() { awk -F, -v l="$1" -v t="$2" '$1 == l && $4 == t { print $6 }' "$csv"; }
effects=ok
for pos in rope alibi kerple_power kerple_log sandwich xpos; do
    [ "$(bpb "$pos@window=8" 8)" = "$(bpb "$pos" 8)" ] || effects="$pos@window=8 at 8"
    [ "$(bpb "$pos@window=8" 64)" != "$(bpb "$pos" 64)" ] || effects="$pos@window=8 at 64"
    [ "$(bpb "$pos@logn=on" 8)" = "$(bpb "$pos" 8)" ] || effects="$pos@logn=on at 8"
    [ "$(bpb "$pos@logn=on" 64)" != "$(bpb "$pos" 64)" ] || effects="$pos@logn=on at 64"
done
[ "$(bpb "xpos@bca=on" 64)" != "$(bpb xpos 64)" ] || effects="xpos@bca=on at 64"
if [ "$effects" = ok ]; then
    pass "window, logn and bca change the score exactly where they should"
else
    fail "overrides' effect" "$effects"
fi
# The default cap: --max_bytes 2^18, so 2^18 / T windows at length T when the
# held-out split has more (128 copies of the small corpus: 0.1 of it is ~2.5 times that at
# T=8); --max_bytes 0 scores all of them.
for i in $(seq 128); do cat "$T/small.txt"; done >"$T/big.txt"
if ./extrapolate "$S" "$T/big.txt" --lengths 8,32 --threads 1 --out "$T/cap" >"$T/out" 2>"$T/err" &&
    [ "$(csv_field "$T/cap/extrapolate.csv" 2 7)" = 32768 ] && [ "$(csv_field "$T/cap/extrapolate.csv" 3 7)" = 8192 ] &&
    ./extrapolate "$S" "$T/big.txt" --lengths 8 --max_bytes 0 --threads 1 --out "$T/all" >"$T/out" 2>"$T/err" &&
    [ "$(csv_field "$T/all/extrapolate.csv" 2 7)" -gt 32768 ]; then
    pass "the default cap: 2^18 bytes per length; --max_bytes 0 scores all"
else
    fail "the default cap: 2^18 bytes per length" "$(cat "$T/err" "$T/cap/extrapolate.csv" "$T/all/extrapolate.csv" 2>/dev/null | head -8)"
fi

# --max_bytes B: max(1, B / T) windows at length T, so 4 at T=16 and 1 at T=64
if ./extrapolate "$S" "$T/small.txt" --lengths 16,64 --max_bytes 64 --threads 1 --out "$T/mb" >"$T/out" 2>"$T/err" &&
    [ "$(csv_field "$T/mb/extrapolate.csv" 2 7)" = 4 ] && [ "$(csv_field "$T/mb/extrapolate.csv" 3 7)" = 1 ]; then
    pass "--max_bytes: the same text at every length"
else
    fail "--max_bytes" "$(cat "$T/err" "$T/mb/extrapolate.csv" 2>/dev/null)"
fi
if ./extrapolate --help >"$T/out" 2>&1 && grep -q 'window w covers' "$T/out" && grep -q -- '--max_windows N' "$T/out"; then
    pass "--help states the window rule and the options"
else
    fail "--help" "missing the window rule"
fi

# ---------------------------------------------------------------- bad input
B=$T/bad
expect "missing run folder" 1 "nothere" ./extrapolate "$T/nothere/model.safetensors" "$T/small.txt" --out "$B"
expect "missing run folder with overrides" 1 "nothere" ./extrapolate "$T/nothere@window=4" "$T/small.txt" --out "$B"
expect "missing run folder, no corpus" 2 "not a run folder or checkpoint" ./extrapolate "$T/nothere" --out "$B"
expect "folder without a checkpoint" 1 "model.safetensors" ./extrapolate "$T/here" "$T/small.txt" --out "$B"
expect "empty checkpoint" 1 "empty.safetensors" ./extrapolate "$T/empty.safetensors" "$T/small.txt" --out "$B"
expect "corrupt checkpoint" 1 "bogus.safetensors" ./extrapolate "$S" "$T/bogus.safetensors" "$T/small.txt" --out "$B"
expect "missing corpus" 1 "cannot open" ./extrapolate "$S" "$T/nothere.txt" --out "$B"
expect "recorded corpus gone" 2 "no corpus given" ./extrapolate "$T/orphan" --out "$B"
expect "corpus too short for a length" 1 "--lengths 8192: the held-out split" ./extrapolate "$S" "$T/small.txt" --lengths 32,8192 --out "$B"
expect "empty --lengths" 2 "--lengths: no lengths" ./extrapolate "$S" --lengths "" --out "$B"
expect "non-integer --lengths" 2 "not a comma-separated list" ./extrapolate "$S" --lengths 32,x --out "$B"
expect "trailing comma in --lengths" 2 "not a comma-separated list" ./extrapolate "$S" --lengths 32, --out "$B"
expect "length < 2" 2 "1 is outside [2" ./extrapolate "$S" --lengths 1,32 --out "$B"
expect "repeated length" 2 "32 is given twice" ./extrapolate "$S" --lengths 32,64,32 --out "$B"
expect "--lengths without a value" 2 "--lengths: needs a value" ./extrapolate "$S" --lengths
expect "unknown option" 2 "unknown option '--bogus'" ./extrapolate "$S" --bogus 1 --out "$B"
expect "a model option" 2 "--heads is fixed by the checkpoint" ./extrapolate "$S" --heads 4 --out "$B"
expect "a training option" 2 "--steps is a training option" ./extrapolate "$S" --steps 4 --out "$B"
expect "a bad --logn" 2 "'maybe' is not one of" ./extrapolate "$S" --logn maybe --out "$B"
expect "a flag twice" 2 "--window is given twice" ./extrapolate "$S" --window 4 --window 8 --out "$B"
expect "a bad --max_windows" 2 "--max_windows: expected an integer" ./extrapolate "$S" --max_windows x --out "$B"
expect "--max_windows with --max_bytes" 2 "--max_windows and --max_bytes both cap the windows" ./extrapolate "$S" --max_windows 2 --max_bytes 64 --out "$B"
expect "@ an unknown key" 2 "unknown key 'bogus'" ./extrapolate "$S@bogus=1" --out "$B"
expect "@ a model key" 2 "heads is fixed by the checkpoint" ./extrapolate "$S@heads=4" --out "$B"
expect "@ a bad value" 2 "--window: expected an integer" ./extrapolate "$S@window=x" --out "$B"
expect "@ no value" 2 "not key=value" ./extrapolate "$S@window" --out "$B"
expect "@ a key twice" 2 "window is given twice" ./extrapolate "$S@window=4,window=8" --out "$B"
expect "@ nothing" 2 "nothing after '@'" ./extrapolate "$S@" --out "$B"
expect "@ an impossible combination" 2 "two different masks" ./extrapolate "$S@window=4,bca=on" --out "$B"
expect "learned beyond its context only" 2 "nothing to score" ./extrapolate "$L" --lengths 64,128 --out "$B"
expect "clm and mlm in one table" 2 "their bpb are on different bytes" ./extrapolate "$S" "$T/mlm" --out "$B"
expect "--label count" 2 "--label: 1 label for 2 checkpoints" ./extrapolate "$S" "$L" --label a --out "$B"
expect "no checkpoint" 2 "no checkpoint given" ./extrapolate --lengths 32

cli_end
