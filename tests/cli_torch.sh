#!/bin/sh
# tests/cli_torch.sh: python/attnlab_torch.py against ./extrapolate.
#
# Run from the repository root after `make`. Skipped (exit 0) when
# /usr/bin/python3 has no PyTorch. Trains a few tiny models of different
# attention, position, norm and head options, scores each with ./extrapolate
# at the training context and past it (with inference-time window, logn and
# bca overrides too; evenly spaced windows, and all of them for a clm and an mlm
# model), and checks that attnlab_torch.score gives the same bits per byte
# within 1e-5. Every attn and pos value ./train --help lists is among them.
# The masked LMs (objective=mlm: softmax with a bidirectional @window, and
# attn=linformer with every linformer_proj and linformer_share, per-layer
# linformer_k on two layers) go through the same comparison, each in its own
# ./extrapolate call (it does not mix clm and mlm), so the loader's copy of the
# validation masks (core/rng.c's generator, data/mlm.c's rule) is held to
# ./extrapolate's too. An objective=mlm model must load as a bidirectional
# model over 257 ids, a layerwise Linformer must hold linformer.E once, and
# unknown kernels and options must be refused, naming them.
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
# name, then the options of its training, then the variants ./extrapolate
# scores, then the lengths (default 16,40). Linformer's linear projection stops
# at the context (E has n columns); pooling and conv take multiples of n / k.
MLM="--objective mlm"
LF="--objective mlm --attn linformer"
EVERY="learned mlmalibi"
MODELS="
rope|--pos rope --rope_dims 4 --norm rmsnorm --tie_embeddings false --key_size 4 --head_size 12|@logn=on,window=6
alibi|--pos alibi --heads 3 --d_model 18 --layers 2|@window=5
talking|--talking_heads both --pos sinusoidal|
kerple|--pos kerple_power|
kerplelog|--pos kerple_log --layers 2|@logn=on
sandwich|--pos sandwich --sandwich_lambda 0.7|
xpos|--pos xpos|@bca=on
learned|--pos learned --key_size 12 --head_size 4||8,16
cosformer|--attn cosformer --pos none|
linrope|--attn linear --phi elu --pos rope|
mlmrope|$MLM --pos rope --rope_dims 4|@window=8 @logn=on,window=8
mlmalibi|$MLM --pos alibi --window 5|@window=3
lf-linear-none|$LF --linformer_k 8,4 --layers 2 --linformer_proj linear --linformer_share none||8,16
lf-linear-headwise|$LF --linformer_k 4 --linformer_proj linear --linformer_share headwise --pos sinusoidal||12,16
lf-linear-kv|$LF --linformer_k 8,4 --layers 2 --linformer_proj linear --linformer_share kv --pos rope||8,16
lf-linear-layerwise|$LF --linformer_k 8 --layers 2 --linformer_proj linear --linformer_share layerwise --pos none||8,16
lf-mean|$LF --linformer_k 16,4 --layers 2 --linformer_proj mean --pos rope||8,16,40
lf-max|$LF --linformer_k 4 --linformer_proj max --pos none||8,16,40
lf-conv-none|$LF --linformer_k 8,4 --layers 2 --linformer_proj conv --linformer_share none --pos rope||8,16,40
lf-conv-headwise|$LF --linformer_k 4,8 --layers 2 --linformer_proj conv --linformer_share headwise --pos sinusoidal||16,32
lf-conv-kv|$LF --linformer_k 8 --linformer_proj conv --linformer_share kv --pos none||16,40
lf-conv-layerwise|$LF --linformer_k 4 --layers 2 --linformer_proj conv --linformer_share layerwise --pos rope||16,40
"
# and every other attn value --help lists (a kernel added to the registry,
# which attnlab_torch must know too), with its defaults and under alibi and a
# window when it takes them
HELP_ATTN=$(./train --help 2>&1 | sed -n 's/^  --attn .*(default: \([^;]*\); \(.*\))$/\1 \2/p' | tr -d ',')
set -- $HELP_ATTN
default=${1:-softmax}
if [ $# -lt 2 ]; then fail "--help lists the attn values" "no --attn line with its values"; else shift; fi
for attn in "$@"; do
    case "$MODELS" in *"--attn $attn "* | *"--attn $attn|"*) continue ;; esac
    [ "$attn" = "$default" ] && continue
    MODELS="$MODELS
kernel-$attn|--attn $attn||8,16"
    # (a refused configuration exits 2 before it opens the corpus)
    ./train --attn "$attn" --pos alibi --window 5 --out "$T/probe" "$T/none" >/dev/null 2>&1
    [ $? -eq 2 ] || MODELS="$MODELS
kernel-$attn-alibi|--attn $attn --pos alibi --window 5 --layers 2|@logn=on"
done
# and every pos value --help lists (a scheme added to the registry, which
# attnlab_torch must know too), each under attn=softmax with its defaults
HELP_POS=$(./train --help 2>&1 | sed -n 's/^  --pos .*(default: [^;]*; \(.*\))$/\1/p' | tr -d ',')
[ -n "$HELP_POS" ] || fail "--help lists the pos values" "no --pos line with its values"
for pos in $HELP_POS; do
    case "$MODELS" in *"--pos $pos "* | *"--pos $pos|"*) continue ;; esac
    MODELS="$MODELS
pos-$pos|--pos $pos --layers 2|"
done
: >"$T/csvs"
while IFS='|' read -r name opts variants lengths; do
    [ -n "$name" ] || continue
    if ! ./train $TINY $opts --out "$T/$name" "$T/small.txt" >"$T/out" 2>"$T/err"; then
        fail "train $name ($opts)" "exit $?"
        continue
    fi
    lengths=${lengths:-16,40} cap="--max_windows 6"
    # these are scored on every window (the masks of many batches' worth of
    # window indices, for mlmalibi); pos=learned stops at its context
    case " $EVERY " in *" $name "*) cap="" ;; esac
    set -- "$T/$name"
    for v in $variants; do set -- "$@" "$T/$name$v"; done
    if ./extrapolate "$@" "$T/small.txt" --lengths $lengths $cap --threads 1 --out "$T/$name" >"$T/out" 2>"$T/err"; then
        echo "$T/$name/extrapolate.csv" >>"$T/csvs"
    else
        fail "extrapolate $name" "exit $?"
    fi
done <<MODELS_END
$MODELS
MODELS_END

# Every row of every extrapolate.csv, scored again in PyTorch.
"$PY" - "$T" "$EVERY" >"$T/agree" 2>"$T/err" <<'EOF'
import csv, os, sys
import attnlab_torch as at

top, every = sys.argv[1], sys.argv[2].split()
data = open(os.path.join(top, "small.txt"), "rb").read()
for path in open(os.path.join(top, "csvs")).read().split():
    for row in csv.DictReader(open(path)):
        base, _, over = row["label"].partition("@")
        kv = dict(x.split("=") for x in over.split(",")) if over else {}
        if "window" in kv:
            kv["window"] = int(kv["window"])
        model = at.load(os.path.join(top, base), **kv)
        T = int(row["length"])
        cap = None if base in every else int(row["windows"])
        py = at.score(model, data, T, max_windows=cap)
        c = float(row["bpb"])
        verdict = "ok" if abs(py - c) <= 1e-5 else "FAIL"
        # the bytes scored: every one, or under mlm the masked ones (mlm_count per window)
        per = at.mlm_count(T) if model.cfg["objective"] == "mlm" else T
        if int(row["bytes"]) != int(row["windows"]) * per:
            verdict = "FAIL"
        print(f"{verdict} {model.cfg['objective']} {row['label']} T={T}: extrapolate {c:.9f}, "
              f"attnlab_torch {py:.9f}, diff {py - c:+.2e}, bytes {row['bytes']}")
EOF
if [ ! -s "$T/agree" ]; then fail "attnlab_torch scores the checkpoints" "no output"; fi
while read -r verdict what; do
    if [ "$verdict" = ok ]; then pass "$what"; else fail "$what" "differs by more than 1e-5 bpb"; fi
done <"$T/agree"
rows=$(grep -c . "$T/agree")
want=$(while read -r f; do sed 1d "$f"; done <"$T/csvs" | wc -l)
mlm_rows=$(grep -c '^ok mlm ' "$T/agree")
if [ "$mlm_rows" -ge 30 ]; then pass "mlm rows agree ($mlm_rows)"; else fail "mlm rows agree" "$mlm_rows, want at least 30"; fi
if [ "$rows" -ge 50 ] && [ "$rows" = "$want" ]; then pass "every length of every variant compared ($rows)"; else fail "every length of every variant compared" "$rows of $want rows"; fi

# objective=mlm: 257 ids (256 = the mask), bidirectional within its window; the
# validation mask has mlm_count(T) targets, is the same for the same window index
# and differs between indices; a layerwise Linformer holds linformer.E once;
# linformer_project agrees with the kernel's reference fixture.
if "$PY" - "$T" >"$T/out" 2>"$T/err" <<'EOF'
import sys, torch
import attnlab_torch as at
m = at.load(sys.argv[1] + "/mlmalibi/model.safetensors")
ids = torch.tensor([[72, 101, 256, 108, 111, 32, 256, 119]])
a = m(ids)
b = m(torch.cat([ids[:, :-1], torch.tensor([[33]])], 1))
assert a.shape == (1, 8, 257), a.shape
assert (a[0, 4] - b[0, 4]).abs().max() > 0, "position 4 does not see position 7 (window 5)"
assert (a[0, 2] - b[0, 2]).abs().max() == 0, "position 2 sees position 7 beyond the window"
window = bytes(range(65, 65 + 40))
x0, y0 = at.mlm_mask(window, 0)
x1, y1 = at.mlm_mask(window, 1)
chosen = y0 >= 0
assert chosen.sum() == at.mlm_count(40) == 6, (y0, at.mlm_count(40))
assert (y0[chosen] == [window[i] for i in range(40) if chosen[i]]).all(), "targets are not the bytes"
assert (x0[~chosen] == [window[i] for i in range(40) if not chosen[i]]).all(), "an unchosen byte changed"
assert (at.mlm_mask(window, 0)[0] == x0).all(), "the mask of window 0 is not reproducible"
assert (y0 != y1).any(), "windows 0 and 1 have the same mask"
lw = at.load(sys.argv[1] + "/lf-linear-layerwise")
names = [n for n in lw.state_dict() if n.endswith(".E") or n.endswith(".F")]
assert names == ["linformer.E"], names
assert tuple(lw.state_dict()["linformer.E"].shape) == (8, 16)
# every proj x share of the kernel's fixture (tests/reference/attention_linformer.py),
# at T = n and at T < n with a partial last pooling window, which ./extrapolate never runs
import json, math
t, meta = at.read_safetensors("tests/fixtures/attn_linformer.safetensors")
for case in meta["cases"].split(","):
    c = json.loads(meta[case])
    q, k, v = (t[f"{case}/{x}"].double() for x in "qkv")
    e = t[f"{case}/E"].double() if f"{case}/E" in t else None
    f = t[f"{case}/F"].double() if f"{case}/F" in t else e
    stride = c["context"] // c["k"]
    kp, vp = at.linformer_project(k, e, c["proj"], stride), at.linformer_project(v, f, c["proj"], stride)
    out = torch.softmax(q @ kp.transpose(-1, -2) / math.sqrt(q.shape[-1]), -1) @ vp
    err = (out - t[f"{case}/out"].double()).abs().max().item()
    assert err < 1e-6, f"linformer fixture {case}: out differs by {err:.2e}"
EOF
then pass "mlm: 257 ids, bidirectional within its window, the validation mask; layerwise linformer.E held once; linformer_project on the kernel's fixture"
else fail "mlm: 257 ids, bidirectional within its window, the validation mask; layerwise linformer.E held once; linformer_project on the kernel's fixture" "$(tail -n 1 "$T/err")"; fi

# What the loader does not know is refused, naming it: a kernel, a Linformer
# option value, a causal Linformer, a linformer_k attnlab refuses, and a model
# option changed at load. One Python (importing torch is slow): a line per
# case, "RUN|KEY=VALUE,...|PHRASE": RUN's config with the changes must not
# build, its ValueError starting "attnlab_torch: PHRASE".
"$PY" - "$T" >"$T/refused" 2>"$T/err" <<'EOF'
import json, os, sys
import attnlab_torch as at

CASES = """
rope|attn=performer|attn=performer is not supported yet
lf-max|linformer_proj=fft|linformer_proj=fft is not supported yet
lf-conv-kv|linformer_share=blockwise|linformer_share=blockwise is not supported yet
lf-max|objective=clm|attn=linformer: it has no causal form
lf-max|pos=alibi|attn=linformer with pos=alibi is not supported yet
lf-mean|linformer_k=5|linformer_k=5: linformer_proj=mean pools
lf-conv-layerwise|linformer_k=4,2|linformer_k=4,2: linformer_share=layerwise has one E
lf-linear-none|linformer_k=8,4,2|linformer_k=8,4,2: 3 values for 2 layers
lf-max|linformer_share=kv|linformer_share=kv: linformer_proj=max pools without parameters
"""
for line in CASES.split("\n"):
    if not line:
        continue
    run, change, phrase = line.split("|")
    key, value = change.split("=")
    _, meta = at.read_safetensors(os.path.join(sys.argv[1], run, "model.safetensors"))
    cfg = dict(json.loads(meta["config"]), **{key: value})
    try:
        at.GPT(cfg)
        print(f"FAIL {run} with {change} is refused: it loaded")
    except ValueError as err:
        ok = str(err).startswith("attnlab_torch: " + phrase)
        print(f"{'ok' if ok else 'FAIL'} {run} with {change} is refused{'' if ok else ': ' + str(err)}")
try:
    at.load(os.path.join(sys.argv[1], "rope"), chunk=8)
    print("FAIL a model option other than window, logn, bca is refused at load: it loaded")
except ValueError as err:
    ok = "only window, logn and bca can change" in str(err)
    print(f"{'ok' if ok else 'FAIL'} a model option other than window, logn, bca is refused at load"
          f"{'' if ok else ': ' + str(err)}")
EOF
if [ "$(grep -c . "$T/refused")" -ne 10 ]; then fail "the refusals ran" "$(grep -c . "$T/refused") of 10 lines"; fi
while read -r verdict what; do
    if [ "$verdict" = ok ]; then pass "$what"; else fail "${what%%: *}" "${what#*: }"; fi
done <"$T/refused"

# A run trained with --precision bf16 holds fp32 master weights: the loader
# takes it and scores it in fp32, which ./extrapolate (in bf16 on a CPU that
# runs it, the run's precision) matches to bf16's rounding, not bit for bit.
if ./train $TINY --precision bf16 --out "$T/bf16" "$T/small.txt" >/dev/null 2>"$T/err"; then
    c=$(./extrapolate "$T/bf16" "$T/small.txt" --lengths 16 2>/dev/null | awk '$3 == 16 { print $4 }')
    p=$("$PY" -c 'import sys, attnlab_torch as at
m = at.load(sys.argv[1])
print("%.6f" % at.score(m, open(sys.argv[2], "rb").read(), T=16))' "$T/bf16" "$T/small.txt" 2>&1)
    if awk -v c="$c" -v p="$p" 'BEGIN { d = c - p; exit !(c != "" && d < 0.01 && d > -0.01) }'; then
        pass "a bf16-trained run loads and scores in fp32 within 0.01 bpb of ./extrapolate ($p, $c)"
    else
        fail "a bf16-trained run loads and scores in fp32" "python $p, ./extrapolate $c"
    fi
elif grep -q "AVX512-BF16" "$T/err"; then
    echo "skip a bf16-trained run: $(head -1 "$T/err")"
else
    fail "a bf16-trained run" "$(head -1 "$T/err")"
fi

cli_end
