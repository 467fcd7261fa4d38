#!/bin/sh
# tests/cli_spectrum_paired.sh: ./spectrum --paired (and scripts/results.sh spectrum-paired,
# on an archived grid) on hand-made run folders whose spectrum.csv numbers are worked out by
# hand below; then bad input, each one error line.
#
# The runs: 3 layers, 2 heads, K = 8 values, so c(T/4) is the mean over the heads of c at
# k = 2. Arm `init` (learning rate 0, val bpb 8: an initialisation, never set apart), seeds
# 1, 2, 3 and 5, all alike:
#   layer 0, head 0: .30 .50 .70 .80 .87 .94 .98 1   (alone: c(2) .5, k 90% 6)
#            head 1: .50 .70 .80 .92 .95 .96 .99 1   (alone: c(2) .7, k 90% 4)
#            mean:   .40 .60 .75 .86 .91 .95 .985 1  -> c(T/4) .60, k 90% 5
#   layers 1 and 2, both heads the mean above:          c(T/4) .60, k 90% 5
# Arm `trained` (lr 0.002, off the plateau), seeds 1, 2, 3, 4 (4 has no pair) and 5 (on the
# plateau: set apart with its pair), both heads alike in every layer:
#   layer 0: c(2) .70 .80 .90, k 90% 4 4 2   -> B - A c +.1 +.2 +.3, k -1 -1 -3
#   layer 1: c(2) .62 .59 .62, k 90% 5 5 5   -> B - A c +.02 -.01 +.02, k 0 0 0
#   layer 2: c(2) .70 .71 .72, k 90% 5 5 5   -> B - A c +.10 +.11 +.12
# By hand, t(0.975, 2) = 4.302653, half = t sd / sqrt(3):
#   layer 0 c: mean .2, sd .1, half .248414: [-0.0484, +0.4484]; pairs for .2 at sd .1: 5
#     (n 4: (3.182446 + 0.978472) .1 / 2 = .208 > .2; n 5: (2.776445 + 0.940965) .1 / 2.236 = .166)
#   layer 0 k: mean -5/3, sd 1.154701, half 2.868435: [-4.54, +1.20]; pairs: 6
#     (n 5: 3.717410 x 1.154701 / 2.236068 = 1.920 > 1.667; n 6: 3.490126 x 0.471405 = 1.645)
#   layer 1 c: mean .01, sd .017321, half .043027: [-0.0330, +0.0530]: inconclusive at X .02
#     (26 pairs: (t(.975, 25) + t(.8, 25)) .017321 / sqrt(26) = .00990, at 25 .01012), and
#     no effect larger than 0.0530 at X .06
#   layer 1 k: every difference 0: [+0.00, +0.00], no effect larger than 0.00
#   layer 2 c: mean .11, sd .01, half .024841: [+0.0852, +0.1348]: excludes 0, B > A
# shellcheck disable=SC2086
set -u

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_spectrum_paired ./spectrum

# run ARM SEED LR FINAL: a run folder with its config.json and two evaluations
run() {
    d="$T/g/$1_seed-$2"
    mkdir -p "$d"
    printf '{\n\t"objective":\t"clm",\n\t"steps":\t100,\n\t"lr":\t%s\n}\n' "$3" >"$d/config.json"
    printf '{"step": 10, "val_bpb": %s}\n{"step": 100, "val_bpb": %s}\n' "$4" "$4" >"$d/metrics.jsonl"
    printf '{"status": "done", "step": 100, "val_bpb": %s}\n' "$4" >"$d/result.json"
}
# csv FOLDER LAYER-CURVE...: spectrum.csv, one curve "h0;h1" (or one for both heads) a layer
csv() {
    d=$1
    shift
    {
        echo "layer,head,k,c,s"
        l=0
        for curve in "$@"; do
            h0=${curve%;*} h1=${curve#*;}
            h=0
            for c in "$h0" "$h1"; do
                k=1
                for v in $c; do
                    echo "$l,$h,$k,$v,1"
                    k=$((k + 1))
                done
                h=$((h + 1))
            done
            l=$((l + 1))
        done
    } >"$d/spectrum.csv"
}
MEAN=".40 .60 .75 .86 .91 .95 .985 1"
for s in 1 2 3 5; do
    run init $s 0 8.0
    csv "$T/g/init_seed-$s" ".30 .50 .70 .80 .87 .94 .98 1;.50 .70 .80 .92 .95 .96 .99 1" "$MEAN" "$MEAN"
done
run trained 1 0.002 2.4
csv "$T/g/trained_seed-1" ".2 .70 .85 .93 .95 .97 .99 1" ".40 .62 .75 .86 .91 .95 .985 1" ".40 .70 .75 .86 .91 .95 .985 1"
run trained 2 0.002 2.5
csv "$T/g/trained_seed-2" ".2 .80 .85 .93 .95 .97 .99 1" ".40 .59 .75 .86 .91 .95 .985 1" ".40 .71 .75 .86 .91 .95 .985 1"
run trained 3 0.002 2.6
csv "$T/g/trained_seed-3" ".2 .90 .92 .93 .95 .97 .99 1" ".40 .62 .75 .86 .91 .95 .985 1" ".40 .72 .75 .86 .91 .95 .985 1"
run trained 4 0.002 2.4
csv "$T/g/trained_seed-4" "$MEAN" "$MEAN" "$MEAN"
run trained 5 0.002 3.5
csv "$T/g/trained_seed-5" ".9 .99 1 1 1 1 1 1" "$MEAN" "$MEAN"

# has NAME FILE LINE...: every LINE is a line of FILE
has() {
    name=$1 file=$2
    shift 2
    for line in "$@"; do
        if ! grep -qxF -- "$line" "$file"; then
            fail "$name" "no line '$line'"
            sed 's/^/     out: /' "$file" | head -n 30
            return
        fi
    done
    pass "$name"
}
C0="0       0.6000   0.8000   +0.1000  +0.2000  +0.3000    +0.2000  [-0.0484, +0.4484]    inconclusive; 5 pairs would resolve it"
C1="1       0.6000   0.6100   +0.0200  -0.0100  +0.0200    +0.0100  [-0.0330, +0.0530]    inconclusive; 26 pairs would resolve it"
C2="2       0.6000   0.7100   +0.1000  +0.1100  +0.1200    +0.1100  [+0.0852, +0.1348]    excludes 0, B > A"
K0="0         5.00     3.33        -1       -1       -3      -1.67  [-4.54, +1.20]        inconclusive; 6 pairs would resolve it"
K1="1         5.00     5.00        +0       +0       +0      +0.00  [+0.00, +0.00]        no effect larger than 0.00"
if ./spectrum --paired "$T/g/init" "$T/g/trained" >"$T/out" 2>"$T/err"; then
    has "paired: the hand-worked intervals and verdicts" "$T/out" "$C0" "$C1" "$C2" "$K0" "$K1"
    has "paired: seed 5 apart with its pair, seed 4 unpaired, the initialisation counted" "$T/out" \
        "  seed 5: A val bpb 8.0000 (initialisation)  B val bpb 3.5000  apart: B never below the plateau level" \
        "  seed 1: A val bpb 8.0000 (initialisation)  B val bpb 2.4000" "3 seed pair(s) counted"
else
    fail "paired: the hand-worked intervals and verdicts" "exit $?"
fi
if ./spectrum --paired "$T/g/init" "$T/g/trained" --within 0.06 >"$T/out" 2>"$T/err"; then
    has "paired: --within 0.06 makes layer 1 no effect larger than 0.0530" "$T/out" \
        "1       0.6000   0.6100   +0.0200  -0.0100  +0.0200    +0.0100  [-0.0330, +0.0530]    no effect larger than 0.0530"
else
    fail "paired: --within 0.06" "exit $?"
fi
# a grid part-way through a later look: a trained seed with no spectrum.csv yet and no
# initialisation is left out, the same pairs counted (a seed both arms have still needs its
# spectrum: "no spectrum.csv" below)
run trained 6 0.002 2.4
if ./spectrum --paired "$T/g/init" "$T/g/trained" >"$T/out" 2>"$T/err"; then
    has "paired: an unmeasured seed without a pair is left out" "$T/out" "$C0" "$C2" "3 seed pair(s) counted"
else
    fail "paired: an unmeasured seed without a pair is left out" "exit $?: $(cat "$T/err")"
fi
rm -r "$T/g/trained_seed-6"
# the arms swapped: every difference changes sign, and so does the direction
if ./spectrum --paired "$T/g/trained" "$T/g/init" >"$T/out" 2>"$T/err"; then
    has "paired: A and B swapped" "$T/out" \
        "2       0.7100   0.6000   -0.1000  -0.1100  -0.1200    -0.1100  [-0.1348, -0.0852]    excludes 0, B < A"
else
    fail "paired: A and B swapped" "exit $?"
fi

# under a seed plan of looks at 3 and 6 pairs: each interval at 97.5% over the first 3 pairs;
# layer 2's c: t(0.9875, 2) = 6.205347, half 6.205347 x .01 / sqrt(3) = .035827
if ./spectrum --paired "$T/g/init" "$T/g/trained" --plan 3,6 >"$T/out" 2>"$T/err"; then
    has "paired: --plan 3,6 takes the intervals at 97.5%" "$T/out" \
        "the seed plan's look 1: the first 3 pairs, intervals at 97.5%" \
        "2       0.6000   0.7100   +0.1000  +0.1100  +0.1200    +0.1100  [+0.0742, +0.1458]    excludes 0, B > A"
else
    fail "paired: --plan 3,6" "exit $?"
fi

# --ladder: the same two arms as both rungs of a ladder (one budget, so no slope), the claim
# oriented so that below 0 it holds: layer 2 (the last) c, init - trained, -0.1100
if ./spectrum --ladder "$T/g/init" "$T/g/trained" "$T/g/init" "$T/g/trained" --out "$T/lad" >"$T/out" 2>"$T/err" &&
    [ -f "$T/lad/ladder.md" ] && [ -f "$T/lad/ladder.csv" ] && [ -f "$T/lad/index.html" ]; then
    has "ladder: the last layer's c(T/4), init - trained" "$T/lad/ladder.md" \
        "## last layer, c(T/4): initialisation < trained" \
        "| g | 842496 | 2.05e+05 | 1.17e+12 | 3 (1 apart) | -0.1100 | [-0.1348, -0.0852] | agrees | 0.0 h |"
else
    fail "ladder: the last layer's c(T/4), init - trained" "exit $?: $(cat "$T/err")"
fi

# the same from an archived grid (scripts/results.sh spectrum-paired), the arms named as given
mkdir -p "$T/arch"
cp -r "$T/g/"* "$T/arch/"
if sh scripts/results.sh pack "$T/arch" >/dev/null 2>"$T/err" && [ ! -d "$T/arch/init_seed-1" ] &&
    sh scripts/results.sh spectrum-paired "$T/arch/init" "$T/arch/trained" >"$T/out" 2>"$T/err"; then
    has "results.sh spectrum-paired on an archive" "$T/out" "  A = $T/arch/init" "$C0" "$C2" "$K0"
else
    fail "results.sh spectrum-paired on an archive" "exit $?"
fi
if sh scripts/results.sh spectrum-paired "$T/arch/init" "$T/arch/trained" 0.06 3 >"$T/out" 2>"$T/err"; then
    has "results.sh spectrum-paired passes X and K" "$T/out" \
        "1       0.6000   0.6100   +0.0200  -0.0100  +0.0200    +0.0100  [-0.0330, +0.0530]    no effect larger than 0.0530"
else
    fail "results.sh spectrum-paired passes X and K" "exit $?"
fi

# ---------------------------------------------------------------- bad input
expect "paired: one arm" 2 "takes two arms" ./spectrum --paired "$T/g/init"
expect "paired: bad --within" 2 "--within: 'x' is not a positive number" ./spectrum --paired "$T/g/init" "$T/g/trained" --within x
expect "paired: --within_k 0" 2 "--within_k: '0' is not a positive number" ./spectrum --paired "$T/g/init" "$T/g/trained" --within_k 0
expect "paired: --out" 2 "--out, --eigen and --length are for measuring" ./spectrum --paired "$T/g/init" "$T/g/trained" --out "$T/bad"
expect "--within without --paired" 2 "go with --paired" ./spectrum "$T/g/init_seed-1" --within 0.1
expect "paired: a bad plan" 2 "--plan:" ./spectrum --paired "$T/g/init" "$T/g/trained" --plan 6,3
expect "ladder: no --out" 2 "no --out folder" ./spectrum --ladder "$T/g/init" "$T/g/trained" "$T/g/init" "$T/g/trained"
expect "ladder: an odd number of arms" 2 "each two arms" ./spectrum --ladder "$T/g/init" "$T/g/trained" "$T/g/init" --out "$T/lad2"
expect "ladder: and --paired" 2 "one at a time" ./spectrum --ladder --paired "$T/g/init" "$T/g/trained" --out "$T/lad2"
expect "paired: no grid folder" 1 "no such grid folder" ./spectrum --paired "$T/nowhere/init" "$T/g/trained"
expect "paired: no runs" 1 "no runs (nothing_seed-<n>" ./spectrum --paired "$T/g/nothing" "$T/g/trained"
mkdir -p "$T/lone"
run lone 9 0 8.0
csv "$T/g/lone_seed-9" "$MEAN" "$MEAN" "$MEAN"
expect "paired: no shared seed" 1 "no seed in both arms" ./spectrum --paired "$T/g/lone" "$T/g/trained"
rm -r "$T/g/lone_seed-9"

# broken copies of seed 1's spectrum.csv, one defect each
bad_csv() { # NAME PHRASE: the copy in $T/g/x_seed-1 is already broken
    expect "paired: $1" 1 "$2" ./spectrum --paired "$T/g/x" "$T/g/trained"
    rm -r "$T/g/x_seed-1"
}
copy() { mkdir -p "$T/g/x_seed-1" && cp "$T/g/init_seed-1/"* "$T/g/x_seed-1/"; }
copy && rm "$T/g/x_seed-1/spectrum.csv"
bad_csv "no spectrum.csv" "no spectrum.csv"
copy && sed -i '1s/.*/layer,head,k,c/' "$T/g/x_seed-1/spectrum.csv"
bad_csv "a wrong header" "line 1: not the header layer,head,k,c,s"
copy && sed -i '5d' "$T/g/x_seed-1/spectrum.csv"
bad_csv "a row missing" "47 rows, but 3 layers x 2 heads x 8 values need 48"
copy && sed -i '5s/.*/0,0,3,0.7,1/' "$T/g/x_seed-1/spectrum.csv"
bad_csv "a row twice" "layer 0, head 0, k 3 given twice"
copy && sed -i '7s/.*/0,0,6,1.5,1/' "$T/g/x_seed-1/spectrum.csv"
bad_csv "c above 1" "line 7: c 1.5 is not in [0, 1]"
copy && sed -i '7s/.*/0,0,6,nan,1/' "$T/g/x_seed-1/spectrum.csv"
bad_csv "c not a number" "line 7: c nan is not in [0, 1]"
copy && sed -i '7s/.*/0,0,six,0.9,1/' "$T/g/x_seed-1/spectrum.csv"
bad_csv "a word for k" "line 7: not layer,head,k,c,s with numbers"
copy && sed -i '7s/.*/0,-1,6,0.9,1/' "$T/g/x_seed-1/spectrum.csv"
bad_csv "a negative head" "layer 0, head -1, k 6 out of range"
copy && : >"$T/g/x_seed-1/spectrum.csv"
bad_csv "an empty file" "line 1: not the header"
copy && head -n 1 "$T/g/init_seed-1/spectrum.csv" >"$T/g/x_seed-1/spectrum.csv"
bad_csv "a header alone" "no rows after the header"
copy && awk -F, 'NR == 1 || $3 <= 4' "$T/g/init_seed-1/spectrum.csv" >"$T/g/x_seed-1/spectrum.csv"
bad_csv "fewer values than the other arm" "has 3 of 4: the spectra cannot be compared"
copy && printf 'not json' >"$T/g/x_seed-1/config.json"
bad_csv "a broken config.json" "not the file a run writes"
expect "results.sh spectrum-paired: bad X" 1 "X and K must be positive numbers" \
    sh scripts/results.sh spectrum-paired "$T/g/init" "$T/g/trained" 0.02 two

cli_end
