#!/bin/sh
# tests/cli_variant.sh: the one-file promise of docs/attention.md, kept.
#
# The repository carries an example variant, sigmoid attention. Adding it took
# exactly the steps docs/attention.md gives:
#   its file             layers/attention/sigmoid.c
#   its registry line    layers/attention/kernels.c (its line in ATTN_KERNEL_LIST)
#   its test cases       tests/layer_cases.c (its group, and its lines in the tables)
# and, for the PyTorch checks, its reference tests/reference/kernel_sigmoid.py,
# the fixture that writes and its line in the Makefile's fixtures target, and
# its function in python/attnlab_model.py.
#
# 1. Nothing else names it: every tracked file that does is on that list (or
#    is documentation, or this script).
# 2. Without it the tree still builds and passes the tests that walk the
#    registry: a copy of the tree with the file, the line and the cases taken
#    out (nothing else) builds, ./train --help does not list it, and the model,
#    reference, options, registry and zoo suites pass.
# 3. With it, every tool has it: ./train --help lists it, and a tiny ./train,
#    ./ablate and ./bench run it; and the suites that walk the kernels run its
#    gradient check (causal and bidirectional), its primitive-op reference,
#    its PyTorch fixture and the broken-backward checks, and pass.
# shellcheck disable=SC2086
set -u

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_variant ./train ./ablate ./bench build/test_all

NAME=sigmoid
FILE=layers/attention/$NAME.c
OWN="$FILE layers/attention/kernels.c tests/layer_cases.c tests/reference/kernel_$NAME.py
tests/fixtures/kernel_$NAME.safetensors Makefile python/attnlab_torch.py python/attnlab_model.py tests/cli_variant.sh"
small_corpus "$T/small.txt"

# ---------------------------------------------------------- 1. the footprint
# The kernel's name as a kernel: its AttnKernel, its file, its fixture, an
# attn value, a case or table entry of tests/layer_cases.c. (Core's op
# "sigmoid", op_sigmoid, is another thing.)
WORDS="attn_kernel_$NAME|attention/$NAME\\.c|kernel_$NAME|attn[= ]$NAME|\"attn\", \"$NAME\"|run_kernel\\(\"$NAME\"|\"$NAME\", (true|false)|attn_${NAME}_"
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    fail "the example's footprint" "not a git work tree"
else
    stray=""
    for f in $(git ls-files | grep -v '^results/' | xargs grep -lE "$WORDS" 2>/dev/null); do
        case " $(echo $OWN) " in *" $f "*) continue ;; esac
        case $f in docs/*.md | README.md | EXPERIMENTS.md) continue ;; esac
        stray="$stray $f"
    done
    if [ -z "$stray" ]; then pass "attn=$NAME is named only in its file, its registry line, its cases and its references"; else fail "attn=$NAME is named only where it belongs" "also in:$stray"; fi
fi

# ------------------------------------------------------------ 2. without it
# A copy of the tracked sources and of build/ (times kept, so that make
# rebuilds only what changed), minus the file, the line, the cases and the
# PyTorch reference.
W=$T/without
mkdir -p "$W"
git ls-files | grep -v '^results/' | tar -cf - -T - | tar -xpf - -C "$W"
cp -pR build "$W/build"
rm -f "$W/$FILE" "$W/build/$(dirname "$FILE")/$NAME.o" "$W/tests/reference/kernel_$NAME.py" \
    "$W/tests/fixtures/kernel_$NAME.safetensors"
grep -v "attn_kernel_$NAME" layers/attention/kernels.c >"$W/layers/attention/kernels.c"
# its group (from its heading to the next) and its table lines
awk -v n="$NAME" '
    index($0, "/* ---- " n " (layers/attention/" n ".c)") { skip = 1; next }
    skip && /^\/\* ---- / { skip = 0 }
    skip { next }
    index($0, "\"attn_" n "_") || index($0, "\"" n "\", true") || index($0, "\"" n "\", false") { next }
    { print }' tests/layer_cases.c >"$W/tests/layer_cases.c"
if (cd "$W" && make BUILD=build build/test_all train >"$T/out" 2>"$T/err"); then
    pass "the tree without attn=$NAME builds"
    if (cd "$W" && ./train --help 2>&1 | grep -q "^  --attn .*$NAME"); then
        fail "without it, --help does not list attn=$NAME" "listed"
    else
        pass "without it, --help does not list attn=$NAME"
    fi
    for suite in model reference options registry zoo; do
        if (cd "$W" && CK_RUN_SUITE=$suite ./build/test_all >"$T/out" 2>"$T/err"); then
            pass "without it, the $suite suite passes"
        else
            tail -n 3 "$T/out" >"$T/err"
            fail "without it, the $suite suite passes" "$(tail -n 1 "$T/out")"
        fi
    done
else
    fail "the tree without attn=$NAME builds" "make failed"
fi

# --------------------------------------------------------------- 3. with it
BTINY="--layers 1 --d_model 32 --heads 2 --context 32 --batch 4 --threads 1"
TINY="$BTINY --sample_length 0"
if ./train --help 2>&1 | grep -q "^  --attn .*, $NAME"; then pass "--help lists attn=$NAME"; else fail "--help lists attn=$NAME" "not on the --attn line"; fi
if ./train $TINY --steps 20 --attn $NAME --out "$T/run" "$T/small.txt" >"$T/out" 2>"$T/err" &&
    grep -q "\"attn\":[[:space:]]*\"$NAME\"" "$T/run/config.json" && [ -s "$T/run/model.safetensors" ]; then
    pass "a tiny ./train --attn $NAME"
else
    fail "a tiny ./train --attn $NAME" "exit or run folder wrong"
fi
if ./ablate attn=softmax/$NAME $TINY --steps 20 --no-baseline --out "$T/abl" "$T/small.txt" >"$T/out" 2>"$T/err" &&
    grep -q "attn=$NAME" "$T/abl/results.md"; then
    pass "a tiny ./ablate attn=softmax/$NAME"
else
    fail "a tiny ./ablate attn=softmax/$NAME" "exit or results.md wrong"
fi
if ./bench $BTINY --steps 1 --batch 2 --attn $NAME >"$T/out" 2>"$T/err" && grep -q "attn=$NAME" "$T/out"; then
    pass "a tiny ./bench --attn $NAME"
else
    fail "a tiny ./bench --attn $NAME" "exit or output wrong"
fi
# the suites that walk attn_kernels: gradient checks, the primitive-op
# reference and P, the PyTorch fixture, the broken backwards
for suite in model reference; do
    if CK_RUN_SUITE=$suite ./build/test_all >"$T/out" 2>"$T/err"; then
        pass "with it, the $suite suite passes"
    else
        fail "with it, the $suite suite passes" "$(tail -n 1 "$T/out")"
    fi
done
n_with=$(CK_RUN_SUITE=model ./build/test_all 2>/dev/null | sed -n 's/.*Checks: \([0-9]*\).*/\1/p')
n_without=$( (cd "$W" && CK_RUN_SUITE=model ./build/test_all 2>/dev/null) | sed -n 's/.*Checks: \([0-9]*\).*/\1/p')
# its gradient-check cases (2 or more), and its references each compared
# twice (output and P)
if [ "${n_with:-0}" -ge $((${n_without:-0} + 6)) ]; then
    pass "its cases are checked: $n_with checks with it, $n_without without"
else
    fail "its cases are checked" "$n_with checks with it, $n_without without, want 6 more at least"
fi

cli_end
