#!/bin/sh
# tests/cli_optimizer.sh: the one-file promise of docs/training.md for optimizers, kept.
#
# Lion was added to the optimizer registry by the steps docs/training.md gives:
#   its file             optim/lion.c (its step, its state slab and checkpoint name, its
#                        option rows and their validation)
#   its registry line    optim/optimizers.c (its line in OPTIM_LIST)
#   its test cases       tests/reference/optimizers.py (its PyTorch case, written from the
#                        paper) and the fixture tests/fixtures/optimizers.safetensors made
#                        from it; its options' cases in tests/test_options.c
#
# 1. Nothing else names it: every tracked file that does is on that list (or is
#    documentation, or this script).
# 2. Without it the tree still builds and passes: a copy of the tree with the file, the
#    line and its cases taken out builds, ./train --help does not list it, and the optimizer and
#    resume cases (which walk the registry) pass.
# 3. With it, every tool has it: --help lists it, a tiny ./train and ./ablate run it.
# 4. A forgotten hook fails: a copy whose lion.c leaves out its state slab (n_state
#    and the slab's checkpoint name) builds and trains, and the resume case that walks
#    the registry fails naming it.
# shellcheck disable=SC2086
set -u

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_optimizer ./train ./ablate build/test_all

NAME=lion
FILE=optim/$NAME.c
OWN="$FILE optim/optimizers.c tests/reference/optimizers.py tests/fixtures/optimizers.safetensors
tests/test_options.c tests/cli_optimizer.sh"
small_corpus "$T/small.txt"

# ---------------------------------------------------------- 1. the footprint
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    fail "the example's footprint" "not a git work tree"
else
    stray=""
    for f in $(git ls-files | grep -v '^results/' | xargs grep -lw "$NAME" 2>/dev/null); do
        case " $(echo $OWN) " in *" $f "*) continue ;; esac
        case $f in docs/*.md | README.md | EXPERIMENTS.md) continue ;; esac
        stray="$stray $f"
    done
    if [ -z "$stray" ]; then pass "optimizer=$NAME is named only in its file, its registry line and its cases"; else fail "optimizer=$NAME is named only where it belongs" "also in:$stray"; fi
fi

# registry_cases DIR: the cases that walk the optimizer registry, in DIR's build
registry_cases() {
    (cd "$1" && CK_RUN_SUITE=optim CK_RUN_CASE=adamw ./build/test_all >"$T/out" 2>"$T/err") &&
        (cd "$1" && CK_RUN_SUITE=train ./build/test_all >>"$T/out" 2>>"$T/err")
}

# ------------------------------------------------------------ 2. without it
W=$T/without
copy_tree "$W"
rm -f "$W/$FILE" "$W/build/optim/$NAME.o" "$W/tests/test_options.c"
grep -v "optimizer_$NAME" optim/optimizers.c >"$W/optim/optimizers.c"
# its options' cases go with it (the options suite is left out of this copy's tests),
# and its PyTorch case (its tensors, metadata and entry in `cases`)
sed -e '/options_suite/d' tests/check_main.c >"$W/tests/check_main.c"
"${PYTHON:-/usr/bin/python3}" - tests/fixtures/optimizers.safetensors "$W/tests/fixtures/optimizers.safetensors" "$NAME" <<'PY'
import json, struct, sys
src, dst, name = sys.argv[1:]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
meta = {k: v for k, v in head.pop("__metadata__").items() if not k.startswith(name + "/")}
meta["cases"] = ",".join(c for c in meta["cases"].split(",") if c != name)
out, blobs, at = {"__metadata__": meta}, [], 0
for key, e in sorted(head.items(), key=lambda x: x[1]["data_offsets"][0]):
    if key.startswith(name + "/"):
        continue
    blob = raw[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]]
    out[key] = {"dtype": e["dtype"], "shape": e["shape"], "data_offsets": [at, at + len(blob)]}
    blobs.append(blob)
    at += len(blob)
text = json.dumps(out).encode()
text += b" " * (-len(text) % 8)
open(dst, "wb").write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
PY
if (cd "$W" && make BUILD=build build/test_all train >"$T/out" 2>"$T/err"); then
    pass "the tree without optimizer=$NAME builds"
    if (cd "$W" && ./train --help 2>&1 | grep -q "^  --optimizer .*$NAME"); then
        fail "without it, --help does not list optimizer=$NAME" "listed"
    else
        pass "without it, --help does not list optimizer=$NAME"
    fi
    if registry_cases "$W"; then pass "without it, the registry's cases pass"; else fail "without it, the registry's cases pass" "$(grep -m1 ':F:\|:E:' "$T/out")"; fi
else
    fail "the tree without optimizer=$NAME builds" "make failed: $(grep -m1 'error' "$T/err")"
fi

# --------------------------------------------------------------- 3. with it
TINY="--layers 1 --d_model 32 --heads 2 --context 32 --batch 4 --threads 1 --sample_length 0"
if ./train --help 2>&1 | grep -q "^  --optimizer .*$NAME"; then pass "--help lists optimizer=$NAME"; else fail "--help lists optimizer=$NAME" "not on the --optimizer line"; fi
if ./train $TINY --steps 20 --optimizer $NAME --lr 3e-4 --out "$T/run" "$T/small.txt" >"$T/out" 2>"$T/err" &&
    grep -q "\"optimizer\":[[:space:]]*\"$NAME\"" "$T/run/config.json" && [ -s "$T/run/model.safetensors" ]; then
    pass "a tiny ./train --optimizer $NAME"
else
    fail "a tiny ./train --optimizer $NAME" "exit or run folder wrong"
fi
if ./ablate optimizer=adamw/$NAME $TINY --steps 20 --no-baseline --out "$T/abl" "$T/small.txt" >"$T/out" 2>"$T/err" &&
    grep -q "optimizer=$NAME" "$T/abl/results.md"; then
    pass "a tiny ./ablate optimizer=adamw/$NAME"
else
    fail "a tiny ./ablate optimizer=adamw/$NAME" "exit or results.md wrong"
fi
if registry_cases .; then pass "with it, the registry's cases pass"; else fail "with it, the registry's cases pass" "$(grep -m1 ':F:\|:E:' "$T/out")"; fi

# ------------------------------------------------------ 4. a forgotten hook
F=$T/forgot
copy_tree "$F"
# its state slab forgotten: the step still reads state[0], a slab that exists, but a
# checkpoint no longer saves it
sed -e '/^    \.n_state = /d' -e '/^    \.state_names = /d' "$FILE" >"$F/$FILE"
if (cd "$F" && make BUILD=build build/test_all train >"$T/out" 2>"$T/err"); then
    if (cd "$F" && ./train $TINY --steps 5 --optimizer $NAME --out "$T/forgot-run" "$T/small.txt" >"$T/out" 2>"$T/err"); then
        pass "without its state hook, optimizer=$NAME still trains (so only a test can tell)"
    else
        fail "without its state hook, optimizer=$NAME still trains" "exit $?"
    fi
    if registry_cases "$F"; then
        fail "without its state hook, the registry's cases fail" "they pass"
    elif grep -q "resume_exact_every_optimizer" "$T/out"; then
        pass "without its state hook, the registry's resume case fails, naming optimizer=$NAME"
    else
        fail "without its state hook, the registry's cases fail naming it" "$(grep -m1 ':F:\|:E:' "$T/out")"
    fi
else
    fail "the tree with a forgotten hook builds" "make failed"
fi

cli_end
