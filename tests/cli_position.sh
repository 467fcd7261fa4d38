#!/bin/sh
# tests/cli_position.sh: the one-file promise of docs/positions.md, kept.
#
# The repository carries an example position scheme, alibi_log (ALiBi's
# slopes on log(1 + |i - j|)). Adding it took exactly the steps
# docs/positions.md gives:
#   its file             layers/attention/alibi_log.c
#   its registry line    layers/attention/positions.c (its line in POS_SCHEME_LIST)
#   its test case        tests/reference/positions_model.py (its line in SCHEMES),
#                        its formula in tests/reference/gpt.py, and the fixture
#                        tests/fixtures/positions_model.safetensors made from them
#   its PyTorch form     python/attnlab_model.py (one @pos_bias function)
#
# 1. Nothing else names it: every tracked file that does is on that list (or
#    is documentation, or this script).
# 2. Without it the tree still builds and passes: a copy of the tree with the
#    file and the line taken out builds, ./train --help does not list it, and
#    the positions case (which walks the registry) passes.
# 3. With it, every tool has it: --help lists it, a tiny ./train and ./ablate
#    run it, and the positions case checks one more scheme.
# 4. A forgotten hook fails: a copy whose alibi_log.c leaves out its `.bias`
#    line builds and trains (the model of pos=none), and the positions case
#    fails naming it; a copy whose fixture lacks its PyTorch case fails too.
# (That attnlab_torch loads it is tests/cli_torch.sh's: it scores every pos
# value --help lists.)
# shellcheck disable=SC2086
set -u

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_position ./train ./ablate build/test_all

NAME=alibi_log
FILE=layers/attention/$NAME.c
OWN="$FILE layers/attention/positions.c tests/reference/positions_model.py tests/reference/gpt.py
tests/fixtures/positions_model.safetensors python/attnlab_model.py tests/cli_position.sh"
small_corpus "$T/small.txt"
PY=${PYTHON:-/usr/bin/python3}

# ---------------------------------------------------------- 1. the footprint
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    fail "the example's footprint" "not a git work tree"
else
    stray=""
    for f in $(git ls-files | grep -v '^results/' | xargs grep -l "$NAME" 2>/dev/null); do
        case " $(echo $OWN) " in *" $f "*) continue ;; esac
        case $f in docs/*.md | README.md | EXPERIMENTS.md) continue ;; esac
        stray="$stray $f"
    done
    if [ -z "$stray" ]; then pass "pos=$NAME is named only in its file, its registry line, its case and its PyTorch forms"; else fail "pos=$NAME is named only where it belongs" "also in:$stray"; fi
fi

# positions_case DIR: the model suite's positions case in DIR's build
positions_case() {
    (cd "$1" && CK_RUN_SUITE=model CK_RUN_CASE=positions ./build/test_all >"$T/out" 2>"$T/err")
}

# ------------------------------------------------------------ 2. without it
W=$T/without
copy_tree "$W"
rm -f "$W/$FILE" "$W/build/$(dirname "$FILE")/$NAME.o"
grep -v "pos_scheme_$NAME" layers/attention/positions.c >"$W/layers/attention/positions.c"
if (cd "$W" && make BUILD=build build/test_all train >"$T/out" 2>"$T/err"); then
    pass "the tree without pos=$NAME builds"
    if (cd "$W" && ./train --help 2>&1 | grep -q "^  --pos .*$NAME"); then
        fail "without it, --help does not list pos=$NAME" "listed"
    else
        pass "without it, --help does not list pos=$NAME"
    fi
    if positions_case "$W"; then pass "without it, the positions case passes"; else fail "without it, the positions case passes" "$(grep -m1 ':F:\|:E:' "$T/out")"; fi
else
    fail "the tree without pos=$NAME builds" "make failed"
fi

# --------------------------------------------------------------- 3. with it
TINY="--layers 1 --d_model 32 --heads 2 --context 32 --batch 4 --threads 1 --sample_length 0"
if ./train --help 2>&1 | grep -q "^  --pos .*, $NAME"; then pass "--help lists pos=$NAME"; else fail "--help lists pos=$NAME" "not on the --pos line"; fi
if ./train $TINY --steps 20 --pos $NAME --out "$T/run" "$T/small.txt" >"$T/out" 2>"$T/err" &&
    grep -q "\"pos\":[[:space:]]*\"$NAME\"" "$T/run/config.json" && [ -s "$T/run/model.safetensors" ]; then
    pass "a tiny ./train --pos $NAME"
else
    fail "a tiny ./train --pos $NAME" "exit or run folder wrong"
fi
if ./ablate pos=alibi/$NAME $TINY --steps 20 --no-baseline --out "$T/abl" "$T/small.txt" >"$T/out" 2>"$T/err" &&
    grep -q "pos=$NAME" "$T/abl/results.md"; then
    pass "a tiny ./ablate pos=alibi/$NAME"
else
    fail "a tiny ./ablate pos=alibi/$NAME" "exit or results.md wrong"
fi
# a kernel without a score matrix refuses it, with the reason
./train $TINY --steps 1 --attn linear --pos $NAME --out "$T/bad" "$T/small.txt" >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "^error: --pos $NAME adds a bias to every score" "$T/err"; then
    pass "attn=linear refuses pos=$NAME"
else
    fail "attn=linear refuses pos=$NAME" "exit $rc"
fi
if positions_case .; then pass "with it, the positions case passes"; else fail "with it, the positions case passes" "$(grep -m1 ':F:\|:E:' "$T/out")"; fi

# ------------------------------------------------------ 4. a forgotten hook
F=$T/forgot
copy_tree "$F"
# the hook's line gone (its function kept, as a forgetful author leaves it)
sed -e '/^    \.bias = /d' -e 's/^static void /__attribute__((unused)) static void /' "$FILE" >"$F/$FILE"
if (cd "$F" && make BUILD=build build/test_all train >"$T/out" 2>"$T/err"); then
    if (cd "$F" && ./train $TINY --steps 5 --pos $NAME --out "$T/forgot-run" "$T/small.txt" >"$T/out" 2>"$T/err"); then
        pass "without its bias hook, pos=$NAME still trains (so only a test can tell)"
    else
        fail "without its bias hook, pos=$NAME still trains" "exit $?"
    fi
    if positions_case "$F"; then
        fail "without its bias hook, the positions case fails" "it passes"
    elif grep -q "pos=$NAME gives the logits of pos=none" "$T/out"; then
        pass "without its bias hook, the positions case fails, naming pos=$NAME"
    else
        fail "without its bias hook, the positions case fails naming it" "$(grep -m1 ':F:\|:E:' "$T/out")"
    fi
else
    fail "the tree with a forgotten hook builds" "make failed"
fi
# its PyTorch case gone from the fixture (its tensors and config left out)
"$PY" - tests/fixtures/positions_model.safetensors "$F/tests/fixtures/positions_model.safetensors" "$NAME/" <<'EOF'
import json, struct, sys
src, dst, pre = sys.argv[1:]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
meta = {k: v for k, v in head.pop("__metadata__").items() if not k.startswith(pre)}
out, blobs, at = {"__metadata__": meta}, [], 0
for name, e in sorted(head.items(), key=lambda x: x[1]["data_offsets"][0]):
    if name.startswith(pre):
        continue
    blob = raw[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]]
    out[name] = {"dtype": e["dtype"], "shape": e["shape"], "data_offsets": [at, at + len(blob)]}
    blobs.append(blob)
    at += len(blob)
text = json.dumps(out).encode()
text += b" " * (-len(text) % 8)
open(dst, "wb").write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
EOF
cp "$FILE" "$F/$FILE"
if (cd "$F" && make BUILD=build build/test_all >"$T/out" 2>"$T/err") && ! positions_case "$F" &&
    grep -q "pos=$NAME has no PyTorch case" "$T/out"; then
    pass "without its PyTorch case, the positions case fails, naming pos=$NAME"
else
    fail "without its PyTorch case, the positions case fails naming it" "$(grep -m1 ':F:\|:E:' "$T/out")"
fi

cli_end
