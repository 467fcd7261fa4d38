#!/bin/sh
# tests/cli_torch.sh: python/attnlab_torch.py against ./extrapolate.
#
# Run from the repository root after `make`. Skipped (exit 0) when
# /usr/bin/python3 has no PyTorch. Trains a few tiny models of different
# attention, position, norm and head options, scores each with ./extrapolate
# at the training context and past it (with inference-time window, logn and
# bca overrides too; evenly spaced windows, and all of them for one model), and checks that attnlab_torch.score gives the same bits
# per byte within 1e-5. An objective=mlm model must load as a bidirectional
# model over 257 ids, and an attn=linformer one must be refused, naming it.
# shellcheck disable=SC2086
set -u

PY=${PYTHON:-/usr/bin/python3}
if ! "$PY" -c 'import torch, numpy' >/dev/null 2>&1; then
    echo "cli_torch.sh: skip: no PyTorch"
    exit 0
fi

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_torch ./train ./extrapolate

PYTHONPATH=$(pwd)/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH
small_corpus "$T/small.txt"

TINY="--layers 1 --d_model 16 --heads 2 --context 16 --steps 200 --lr 0.01 --warmup 0 --sample_length 0 --threads 1"
# name, then the options of its training, then the variants ./extrapolate scores.
MODELS="
rope|--pos rope --rope_dims 4 --norm rmsnorm --tie_embeddings false --key_size 4 --head_size 12|@logn=on,window=6
alibi|--pos alibi --heads 3 --d_model 18 --layers 2|@window=5
talking|--talking_heads both --pos sinusoidal|
kerple|--pos kerple_power|
kerplelog|--pos kerple_log --layers 2|@logn=on
sandwich|--pos sandwich --sandwich_lambda 0.7|
xpos|--pos xpos|@bca=on
learned|--pos learned --key_size 12 --head_size 4|
cosformer|--attn cosformer --pos none|
linrope|--attn linear --phi elu --pos rope|
"
: >"$T/csvs"
while IFS='|' read -r name opts variants; do
    [ -n "$name" ] || continue
    if ! ./train $TINY $opts --out "$T/$name" "$T/small.txt" >"$T/out" 2>"$T/err"; then
        fail "train $name ($opts)" "exit $?"
        continue
    fi
    lengths=16,40 cap="--max_windows 6"
    # pos=learned stops at its context; it is scored on every window
    [ "$name" = learned ] && lengths=8,16 cap=""
    set -- "$T/$name"
    for v in $variants; do set -- "$@" "$T/$name$v"; done
    if ./extrapolate "$@" "$T/small.txt" --lengths $lengths $cap --out "$T/$name" >"$T/out" 2>"$T/err"; then
        echo "$T/$name/extrapolate.csv" >>"$T/csvs"
    else
        fail "extrapolate $name" "exit $?"
    fi
done <<MODELS_END
$MODELS
MODELS_END

# Every row of every extrapolate.csv, scored again in PyTorch.
"$PY" - "$T" >"$T/agree" 2>"$T/err" <<'EOF'
import csv, os, sys
import attnlab_torch as at

top = sys.argv[1]
data = open(os.path.join(top, "small.txt"), "rb").read()
for path in open(os.path.join(top, "csvs")).read().split():
    for row in csv.DictReader(open(path)):
        base, _, over = row["label"].partition("@")
        kv = dict(x.split("=") for x in over.split(",")) if over else {}
        if "window" in kv:
            kv["window"] = int(kv["window"])
        model = at.load(os.path.join(top, base), **kv)
        T = int(row["length"])
        cap = None if base == "learned" else int(row["windows"])
        py = at.score(model, data, T, max_windows=cap)
        c = float(row["bpb"])
        verdict = "ok" if abs(py - c) <= 1e-5 else "FAIL"
        print(f"{verdict} {row['label']} T={T}: extrapolate {c:.9f}, attnlab_torch {py:.9f}, diff {py - c:+.2e}")
EOF
if [ ! -s "$T/agree" ]; then fail "attnlab_torch scores the checkpoints" "no output"; fi
while read -r verdict what; do
    if [ "$verdict" = ok ]; then pass "$what"; else fail "$what" "differs by more than 1e-5 bpb"; fi
done <"$T/agree"
rows=$(grep -c . "$T/agree")
want=$(while read -r f; do sed 1d "$f"; done <"$T/csvs" | wc -l)
if [ "$rows" -ge 20 ] && [ "$rows" = "$want" ]; then pass "every length of every variant compared ($rows)"; else fail "every length of every variant compared" "$rows of $want rows"; fi

# objective=mlm: 257 ids (256 = the mask), bidirectional, and not scored left to right.
./train $TINY --objective mlm --pos alibi --window 5 --out "$T/mlm" "$T/small.txt" >"$T/out" 2>"$T/err" ||
    fail "train mlm" "exit $?"
if "$PY" - "$T/mlm" >"$T/out" 2>"$T/err" <<'EOF'
import sys, torch
import attnlab_torch as at
m = at.load(sys.argv[1] + "/model.safetensors")
ids = torch.tensor([[72, 101, 256, 108, 111, 32, 256, 119]])
a = m(ids)
b = m(torch.cat([ids[:, :-1], torch.tensor([[33]])], 1))
assert a.shape == (1, 8, 257), a.shape
assert (a[0, 4] - b[0, 4]).abs().max() > 0, "position 4 does not see position 7 (window 5)"
assert (a[0, 2] - b[0, 2]).abs().max() == 0, "position 2 sees position 7 beyond the window"
try:
    at.score(m, b"x" * 1000, 8)
    sys.exit("score took an mlm model")
except ValueError as e:
    assert "mlm" in str(e), e
EOF
then pass "mlm: 257 ids, bidirectional within its window, score refuses it"; else fail "mlm: 257 ids, bidirectional within its window, score refuses it" "$(tail -n 1 "$T/err")"; fi

# Unsupported options are refused, naming them.
./train $TINY --objective mlm --attn linformer --linformer_k 8 --steps 2 --out "$T/linformer" "$T/small.txt" >"$T/out" 2>"$T/err" ||
    fail "train linformer" "exit $?"
if "$PY" -c 'import sys, attnlab_torch as at; at.load(sys.argv[1])' "$T/linformer" >"$T/out" 2>"$T/err"; then
    fail "attn=linformer is refused" "it loaded"
elif grep -q '^ValueError: attnlab_torch: attn=linformer is not supported yet' "$T/err"; then
    pass "attn=linformer is refused"
else
    fail "attn=linformer is refused" "$(tail -n 1 "$T/err")"
fi
if "$PY" -c 'import sys, attnlab_torch as at; at.load(sys.argv[1], chunk=8)' "$T/rope" >"$T/out" 2>"$T/err"; then
    fail "a model option other than window, logn, bca is refused at load" "it loaded"
elif grep -q 'only window, logn and bca can change' "$T/err"; then
    pass "a model option other than window, logn, bca is refused at load"
else
    fail "a model option other than window, logn, bca is refused at load" "$(tail -n 1 "$T/err")"
fi

cli_end
