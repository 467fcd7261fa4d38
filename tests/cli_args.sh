#!/bin/sh
# tests/cli_args.sh: the command line every command shares (experiments/run/args.c).
#
# Run from the repository root after `make` (make check does both).
#   - `--key=value` is `--key value`, for the option table's options and for
#     each command's own flags, in all five commands; a value keeps any later
#     '=', and an option of the table given again takes its last value.
#   - Its errors, and those of the flags around it, give exit 2, "error: " and
#     the phrase on stderr's first line, at most two lines on stderr, no *.tmp
#     and nothing written: an unknown --key=value names the key, a switch given
#     a value, a missing value, and a command's own flag given twice.
# shellcheck disable=SC2086
set -u

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_args ./train ./ablate ./spectrum ./extrapolate ./bench ./sample

small_corpus "$T/small.txt"
C=$T/small.txt
B=$T/bad # every failing command points its outputs here

# ------------------------------------------------- --key=value is --key value
TINY="--layers 1 --d_model 32 --heads 2 --context 32 --batch 2 --threads 1 --sample_length 0"
TINY_EQ="--layers=1 --d_model=32 --heads=2 --context=32 --batch=2 --threads=1 --sample_length=0"
if ./train $TINY --steps 2 --out "$T/spaced" "$C" >"$T/out" 2>"$T/err" &&
    ./train $TINY_EQ --steps=2 --out="$T/joined" "$C" >"$T/out" 2>"$T/err" &&
    [ -s "$T/joined/model.safetensors" ] && [ ! -s "$T/err" ] &&
    [ "$(grep -v '"out":' "$T/spaced/config.json")" = "$(grep -v '"out":' "$T/joined/config.json")" ]; then
    pass "train: --key=value sets what --key value sets"
else
    fail "train: --key=value sets what --key value sets" "exit, run folder or config.json differ"
fi
if ./train --resume="$T/joined" --steps=3 >"$T/out" 2>"$T/err" && grep -q "after 3 steps" "$T/out"; then
    pass "train: --resume=DIR"
else
    fail "train: --resume=DIR" "did not resume to step 3"
fi
if ./train $TINY --steps 1 --steps=2 --out="$T/a=b" "$C" >"$T/out" 2>"$T/err" && [ -d "$T/a=b" ] &&
    grep -q "after 2 steps" "$T/out"; then
    pass "train: a value keeps its own '=', and an option given again takes its last value"
else
    fail "train: a value keeps its own '=', and an option given again takes its last value" "folder or steps wrong"
fi
if ./train $TINY_EQ --help >"$T/out" 2>"$T/err" && grep -q "^usage: ./train" "$T/out"; then
    pass "train: --help after --key=value"
else
    fail "train: --help after --key=value" "exit or usage wrong"
fi
if ./ablate phi=relu/elu $TINY_EQ --steps=1 --no-baseline --out="$T/abl" "$C" >"$T/out" 2>"$T/err" &&
    [ -s "$T/abl/results.csv" ] && [ "$(wc -l <"$T/abl/results.csv")" -eq 3 ]; then
    pass "ablate: --key=value and --out=DIR"
else
    fail "ablate: --key=value and --out=DIR" "exit or results.csv wrong"
fi
if ./spectrum "$T/spaced" "$C" --samples=1 --length=16 --out="$T/spec" >"$T/out" 2>"$T/err" &&
    [ "$(wc -l <"$T/spec/spectrum.csv")" -eq $((1 + 2 * 16)) ]; then
    pass "spectrum: --samples=N --length=T --out=DIR"
else
    fail "spectrum: --samples=N --length=T --out=DIR" "exit or spectrum.csv wrong"
fi
if ./extrapolate "$T/spaced" "$C" --lengths=16,32 --max_windows=1 --threads=1 --window=8 --out="$T/ext" \
    >"$T/out" 2>"$T/err" && [ "$(sed -n 2p "$T/ext/extrapolate.csv" | cut -d, -f1,4)" = "spaced@window=8,16" ] &&
    [ "$(wc -l <"$T/ext/extrapolate.csv")" -eq 3 ]; then
    pass "extrapolate: --lengths=L --max_windows=N --window=W --out=DIR"
else
    fail "extrapolate: --lengths=L --max_windows=N --window=W --out=DIR" "exit or extrapolate.csv wrong"
fi
if ./bench --steps=1 --layers=1 --d_model=32 --heads=2 --context=32 --batch=2 --threads=1 --attn=cosformer \
    >"$T/out" 2>"$T/err" && grep -q "attn=cosformer" "$T/out" &&
    grep -q "^training, reference configuration: 1 layers, d_model 32, 2 heads, T 32, B 2" "$T/out"; then
    pass "bench: --steps=N and model options as --key=value"
else
    fail "bench: --steps=N and model options as --key=value" "exit or configuration wrong"
fi

# ---------------------------------------------------------------- bad input
R=$T/spaced
expect "train: unknown --key=value names the key" 2 "unknown option '--bogus'" ./train --bogus=1 --out="$B" "$C"
expect "ablate: unknown --key=value" 2 "unknown option '--bogus'" ./ablate phi=relu/elu --bogus=1 --out="$B" "$C"
expect "spectrum: unknown --key=value" 2 "unknown option '--bogus'" ./spectrum "$R" --bogus=1 --out="$B"
expect "extrapolate: unknown --key=value" 2 "unknown option '--bogus'" ./extrapolate "$R" --bogus=1 --out="$B"
expect "bench: unknown --key=value" 2 "unknown option '--bogus'" ./bench --bogus=1
expect "bench: a training option it does not take" 2 "unknown option '--lr'" ./bench --lr=1e-3

expect "train: --help=x" 2 "--help: takes no value, got '--help=x'" ./train --help=x
expect "bench: --ops=1" 2 "--ops: takes no value, got '--ops=1'" ./bench --ops=1
expect "bench: --vs-torch= (an empty value is a value)" 2 "--vs-torch: takes no value" ./bench --vs-torch=
expect "bench: --scaling=yes" 2 "--scaling: takes no value" ./bench --scaling=yes
expect "ablate: --no-baseline=true" 2 "--no-baseline: takes no value" ./ablate phi=relu/elu --no-baseline=true --out="$B" "$C"
expect "spectrum: --eigen=1" 2 "--eigen: takes no value" ./spectrum "$R" --eigen=1 --out="$B"

expect "spectrum: --samples without a value" 2 "--samples: needs a value" ./spectrum "$R" --out="$B" --samples
expect "spectrum: --out without a value" 2 "--out: needs a folder" ./spectrum "$R" --out
expect "ablate: --out without a value" 2 "--out: needs a folder" ./ablate phi=relu/elu "$C" --out
expect "extrapolate: --max_bytes without a value" 2 "--max_bytes: needs a value" ./extrapolate "$R" --out="$B" --max_bytes
expect "bench: --reps without a value" 2 "--reps: needs a value" ./bench --reps

expect "train: --resume twice" 2 "--resume: given twice ('$R', then '$T/joined')" ./train --resume "$R" --resume="$T/joined"
expect "ablate: --out twice" 2 "--out: given twice" ./ablate phi=relu/elu --out="$B" --out "$B" "$C"
expect "spectrum: --eigen twice" 2 "--eigen: given twice" ./spectrum "$R" --eigen --eigen --out="$B"
expect "spectrum: --samples twice" 2 "--samples: given twice ('1', then '2')" ./spectrum "$R" --samples=1 --samples 2 --out="$B"
expect "extrapolate: --lengths twice" 2 "--lengths: given twice" ./extrapolate "$R" --lengths 16 --lengths=32 --out="$B"
expect "extrapolate: --window=W twice" 2 "--window is given twice" ./extrapolate "$R" --window=4 --window 8 --out="$B"
expect "bench: --rounds twice" 2 "--rounds: given twice" ./bench --scaling --rounds=2 --rounds 3

expect "train: a bad --key=value" 2 "--heads: expected an integer" ./train --heads=x --out="$B" "$C"
expect "train: --key= is the empty value" 2 "--layers: expected an integer in [1, 64], got ''" ./train --layers= --out="$B" "$C"
expect "ablate: a bad --key=value" 2 "--steps: expected an integer" ./ablate phi=relu/elu --steps=x --out="$B" "$C"
expect "spectrum: --samples=0" 2 "--samples: expected an integer" ./spectrum "$R" --samples=0 --out="$B"
expect "extrapolate: --logn=maybe" 2 "'maybe' is not one of" ./extrapolate "$R" --logn=maybe --out="$B"
expect "extrapolate: --heads=4" 2 "--heads is fixed by the checkpoint" ./extrapolate "$R" --heads=4 --out="$B"
expect "bench: --lengths=64,x" 2 "--lengths: expected up to 32 comma-separated lengths" ./bench --scaling --lengths=64,x

# did you mean: a mistyped option, a mistyped choice, a mistyped ablate key
# (the hint is stderr's second line)
hint_is() { # name phrase: $T/err's second line holds phrase
    if sed -n 2p "$T/err" | grep -qF -- "$2"; then pass "$1"; else fail "$1" "hint: $(sed -n 2p "$T/err")"; fi
}
expect "train: --atn" 2 "unknown option '--atn'" ./train --atn cosformer --out="$B" "$C"
hint_is "train: --atn gets did you mean --attn" "did you mean --attn?"
expect "spectrum: --sample" 2 "unknown option '--sample'" ./spectrum "$R" --sample=1 --out="$B"
hint_is "spectrum: --sample gets did you mean --samples" "did you mean --samples?"
expect "train: --attn cosfromer" 2 "'cosfromer' is not one of" ./train --attn cosfromer --out="$B" "$C"
hint_is "train: cosfromer gets did you mean cosformer" "did you mean cosformer?"
expect "ablate: atn=" 2 "unknown key 'atn'" ./ablate atn=softmax/linear --out="$B" "$C"
hint_is "ablate: atn gets did you mean attn" "did you mean attn=...?"
expect "train: --zzzz" 2 "unknown option '--zzzz'" ./train --zzzz 1 --out="$B" "$C"
hint_is "train: nothing near --zzzz: the plain hint" "./train --help lists the options"
# ablate's key=value given to train
expect "train: attn=cosformer" 2 "./train takes options as --attn cosformer" ./train attn=cosformer --out="$B" "$C"
# --version on every command
for cmd in train ablate spectrum extrapolate bench sample; do
    if ./$cmd --version >"$T/out" 2>"$T/err" && grep -q "^attnlab [0-9]" "$T/out"; then
        pass "$cmd --version"
    else
        fail "$cmd --version" "$(head -c 200 "$T/out" "$T/err")"
    fi
done

cli_end
