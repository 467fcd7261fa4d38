#!/bin/sh
# tests/cli_pyloader.sh: the forged-file suite, through both loaders.
#
# Run from the repository root after `make`. Skipped (exit 0) when
# /usr/bin/python3 has no PyTorch. Trains a tiny checkpoint, forges it with
# tests/forge.pl (and makes a FIFO, /dev/zero, a text file, ... stand in for
# one), and loads every case with the C loader (./sample FILE --length 1) and
# with python/attnlab_torch.py (at.load). Each case says what both must do:
# load, or refuse (C: exit 1 and "error: " on stderr's first line; Python: an
# attnlab_torch.CheckpointError naming the file, never another exception), or
# "same": refuse with the same reason, word for word after the file's name, so
# the checks run in the C loader's order and say what it says ("two_" cases
# hold two defects: the first the C loader meets must be the one named). One
# order differs on purpose: Python checks every tensor's name and shape before
# it reads a value, the C loader reads each tensor after its own check
# (two_nan_shape).
# A "gap" case is one the issue says must be refused and the C side still
# loads: Python must refuse it, C may load it (the line says so).
#
# Zero hangs: every C run is under `timeout`, every Python load under a
# 20-second alarm (and the whole Python under `timeout`). Memory: before each
# Python load the peak resident size is reset (writing 5 to
# /proc/self/clear_refs) and the peak's growth over the load (VmHWM after
# minus VmRSS before) must stay under twice the file's size plus MEM_SLACK_KIB
# (the noise of a load of nothing, measured here: allocator pages, lazily
# loaded code), after one unmeasured load has warmed torch up.
#
# Also: attnlab_torch's copy of the option table is ./train --help's, and the
# fuzz seed checkpoints (every kernel and several position schemes) load.
# shellcheck disable=SC2086,SC2016
set -u

PY=${PYTHON:-/usr/bin/python3}
if ! "$PY" -c 'import torch, numpy' >/dev/null 2>&1; then
    echo "cli_pyloader.sh: skip: no PyTorch"
    exit 0
fi

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_pyloader ./train ./sample
FORGE="perl $(dirname "$0")/forge.pl"
PYTHONPATH=$(pwd)/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH
MEM_SLACK_KIB=${MEM_SLACK_KIB:-256}

small_corpus "$T/small.txt"
if ! ./train --steps 2 --layers 1 --d_model 16 --heads 2 --context 16 --batch 2 --eval_every 1 --sample_length 0 \
    --threads 1 --out "$T/good" "$T/small.txt" >"$T/out" 2>"$T/err"; then
    fail "train the checkpoint to forge" "exit $?"
    cli_end
    exit 1
fi
GOOD=$T/good/model.safetensors
mkdir "$T/c"

# NAME|EXPECT|PERL CODE for forge.pl. The config is a JSON string inside the
# header's metadata, so its quotes are \" there.
CASES='
good|load|
layers_float|load|s/\\"layers\\":1,/\\"layers\\":1.0,/
no_optim|load|m/"optim.m.tok_emb.weight":\{[^}]*"data_offsets":\[(\d+)/ and $::data = substr($::data, 0, $1); s/,"optim\.[^}]*\}//g
nan_weight|same|substr($::data, 0, 4) = pack("V", 0x7fc00000)
inf_weight|same|m/"ln_f\.bias":\{[^}]*"data_offsets":\[(\d+)/ and substr($::data, $1 + 4, 4) = pack("V", 0xff800000)
overlap|same|s/"data_offsets":\[([1-9][0-9]*),([0-9]+)\]/"data_offsets":[@{[$1-4]},@{[$2-4]}]/g
bytes_after|same|$::data .= "xyzw"
format_pytorch|same|s/"format":"attnlab"/"format":"pytorch"/
format_missing|same|s/"format":"attnlab",//
format_version_2|same|s/"format_version":"1"/"format_version":"2"/
rng_zero|same|s/"data_rng":"[0-9a-f ]*"/"data_rng":"0000000000000000 0000000000000000 0000000000000000 0000000000000000"/
rng_short|same|s/"data_rng":"[0-9a-f ]*"/"data_rng":"1 2 3 4"/
rng_upper|same|s/"data_rng":"([0-9a-f ]*)"/"data_rng":"\U$1"/
step_negative|same|s/"step":"2"/"step":"-1"/
step_saturated|same|s/"step":"2"/"step":"99999999999999999999"/
step_space|same|s/"step":"2"/"step":" 2"/
moment_missing|same|m/"optim.v.ln_f.bias":\{[^}]*"data_offsets":\[(\d+)/ and $::data = substr($::data, 0, $1); s/,"optim\.v\.ln_f\.bias":\{[^}]*\}//
moment_shape|same|s/("optim.m.ln_f.bias":\{"dtype":"F32","shape":)\[16\]/$1\[4,4\]/
best_nan|same|s/"best_val_bpb":"[^"]*"/"best_val_bpb":"nan"/
ranks_zero|same|s/"step":"2"/"step":"2","ranks":"0"/
header_one_short|same|$::len_delta = -1
header_one_long|same|$::len_delta = 1
header_past_end|same|$::len_delta = 1000000
header_not_object|same|$_ = "[]"
duplicate_meta_key|same|s/"step":"2",/"step":"2","step":"3",/
duplicate_tensor|same|s/,"ln_f.bias":\{/,"ln_f.weight":{/
dtype_f16|same|s/("ln_f.bias":\{"dtype":)"F32"/$1"F16"/
shape_changed|same|s/("ln_f.bias":\{"dtype":"F32","shape":)\[16\]/$1\[4,4\]/
offsets_strings|same|s/"data_offsets":\[0,(\d+)\]/"data_offsets":["0","$1"]/
tensor_renamed|same|s/"ln_f.bias"/"ln_f.bias2"/
name_not_utf8|refuse|s/"ln_f.bias"/"ln_f.bi\xff"/
deep_header|refuse|s/\}$/,"deep":@{["[" x 100000]}@{["]" x 100000]}}/
deep_header_5000|refuse|s/\}$/,"deep":@{["[" x 5000]}@{["]" x 5000]}}/
wide_header|refuse|s/\}$/,"wide":[@{["[]," x 70000 . "[]"]}]}/
wide_config|refuse|s/\\"window\\":0/\\"window\\":[@{["[]," x 70000 . "[]"]}]/
deep_config|refuse|s/\\"window\\":0/\\"window\\":@{["[" x 100000]}@{["]" x 100000]}/
config_code|refuse|s/"config":"(\\"|[^"])*"/"config":"__import__(\\"os\\").system(\\"touch PWNED\\")"/
config_value_code|refuse|s/\\"prompt\\":\\"The \\"/\\"prompt\\":__import__(\\"os\\").system(\\"touch PWNED\\")/
config_nan_literal|refuse|s/\\"lr\\":0.002/\\"lr\\":NaN/
config_unknown_option|same|s/\\"window\\":0/\\"window\\":0,\\"windows\\":0/
window_negative|same|s/\\"window\\":0/\\"window\\":-5/
tie_maybe|same|s/\\"tie_embeddings\\":true/\\"tie_embeddings\\":\\"maybe\\"/
layers_string_2|refuse|s/\\"layers\\":1,/\\"layers\\":\\"2\\",/
layers_1e9|same|s/\\"layers\\":1,/\\"layers\\":1e9,/
heads_zero|same|s/\\"heads\\":2,/\\"heads\\":0,/
heads_not_dividing|same|s/\\"heads\\":2,/\\"heads\\":3,/
huge_model|refuse|s/\\"layers\\":1,/\\"layers\\":64,/; s/\\"d_model\\":16,/\\"d_model\\":8192,/
huge_heads|refuse|s/\\"heads\\":2,/\\"heads\\":256,/; s/\\"key_size\\":0,/\\"key_size\\":4096,/; s/\\"head_size\\":0,/\\"head_size\\":4096,/; s/\\"d_model\\":16,/\\"d_model\\":8192,/
leaky_slope_softmax|same|s/\\"leaky_slope\\":0.01/\\"leaky_slope\\":0.5/
phi_softmax|same|s/\\"phi\\":\\"relu\\"/\\"phi\\":\\"elu\\"/
two_format_rng|same|s/"format":"attnlab"/"format":"pytorch"/; s/"data_rng":"[0-9a-f ]*"/"data_rng":"0000000000000000 0000000000000000 0000000000000000 0000000000000000"/
two_overlap_format|same|s/"format":"attnlab"/"format":"pytorch"/; s/"data_offsets":\[([1-9][0-9]*),([0-9]+)\]/"data_offsets":[@{[$1-4]},@{[$2-4]}]/g
two_rng_window|same|s/"data_rng":"[0-9a-f ]*"/"data_rng":"0000000000000000 0000000000000000 0000000000000000 0000000000000000"/; s/\\"window\\":0/\\"window\\":-5/
two_duplicate_overlap|same|s/,"ln_f.bias":\{/,"ln_f.weight":{/; s/"data_offsets":\[([1-9][0-9]*),([0-9]+)\]/"data_offsets":[@{[$1-4]},@{[$2-4]}]/g
two_dtype_version|same|s/"format_version":"1"/"format_version":"2"/; s/("ln_f.bias":\{"dtype":)"F32"/$1"F16"/
two_nan_shape|refuse|substr($::data, 0, 4) = pack("V", 0x7fc00000); s/("ln_f.bias":\{"dtype":"F32","shape":)\[16\]/$1\[4,4\]/
extra_tensor|refuse|s/\}$/,"bogus.weight":{"dtype":"F32","shape":[1],"data_offsets":[@{[length $::data]},@{[4 + length $::data]}]}}/; $::data .= "\0\0\0\0"
layers_string_1|refuse|s/\\"layers\\":1,/\\"layers\\":\\"1\\",/
tie_string_true|refuse|s/\\"tie_embeddings\\":true/\\"tie_embeddings\\":\\"true\\"/
'
: >"$T/list"
while IFS='|' read -r name want code; do
    [ -n "$name" ] || continue
    if $FORGE "$GOOD" "$T/c/$name.safetensors" "$code" 2>"$T/err"; then
        echo "$name|$want|$T/c/$name.safetensors" >>"$T/list"
    else
        fail "forge $name" "$(head -n 1 "$T/err")"
    fi
done <<CASES_END
$CASES
CASES_END
# files that stand in for a checkpoint
mkfifo "$T/c/fifo.safetensors"
printf '' >"$T/c/empty.safetensors"
printf '1234567' >"$T/c/seven_bytes.safetensors"
mkdir "$T/c/no_checkpoint"
ln -s "$GOOD" "$T/c/symlink.safetensors"
cat >>"$T/list" <<EOF
fifo|same|$T/c/fifo.safetensors
dev_zero|same|/dev/zero
text_file|same|$T/small.txt
empty_file|same|$T/c/empty.safetensors
seven_bytes|same|$T/c/seven_bytes.safetensors
folder_without_checkpoint|same|$T/c/no_checkpoint
missing_file|same|$T/c/absent.safetensors
run_folder|load|$T/good
symlink|load|$T/c/symlink.safetensors
EOF

# The C loader: load or refuse, each case under timeout.
: >"$T/c_verdicts"
while IFS='|' read -r name want file; do
    timeout -k 5 30 ./sample "$file" --length 1 --threads 1 >/dev/null 2>"$T/c_err" </dev/null
    rc=$?
    if [ $rc -eq 0 ]; then
        v=load
    elif [ $rc -eq 1 ] && head -n 1 "$T/c_err" | grep -q '^error: '; then
        v=refuse
    elif [ $rc -ge 124 ]; then
        v="hang-or-crash(exit $rc)"
    else
        v="exit $rc: $(head -n 1 "$T/c_err")"
    fi
    echo "$name|$v|$(head -n 1 "$T/c_err" | sed 's/^error: //')" >>"$T/c_verdicts"
done <"$T/list"

# The Python loader: one process (torch imports once), a line per case:
# NAME|VERDICT|PEAK_KIB|LIMIT_KIB|MESSAGE.
(cd "$T/c" && timeout -k 5 600 "$PY" - "$T/list" "$GOOD" "$MEM_SLACK_KIB") >"$T/py_verdicts" 2>"$T/err" <<'EOF'
import gc, os, re, signal, stat, sys
import attnlab_torch as at

listing, good, slack = sys.argv[1], sys.argv[2], int(sys.argv[3])


def status(key):
    with open("/proc/self/status") as f:
        return int(re.search(rf"^{key}:\s+(\d+) kB", f.read(), re.M).group(1))


class Hang(Exception):
    pass


def alarm(*_):
    raise Hang()


signal.signal(signal.SIGALRM, alarm)
at.load(good)  # warms torch up: its lazily loaded parts are not the case's
for line in open(listing).read().split("\n"):
    if not line:
        continue
    name, want, path = line.split("|")
    try:
        st = os.stat(path if not os.path.isdir(path) else os.path.join(path, "model.safetensors"))
        size = st.st_size if stat.S_ISREG(st.st_mode) else 0
    except OSError:
        size = 0
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    rss = status("VmRSS")
    signal.alarm(20)
    model, message = None, ""
    try:
        model = at.load(path)
        verdict = "load"
    except at.CheckpointError as err:
        verdict, message = "refuse", str(err)
        if path not in message:
            verdict, message = "refusal without the file's name", message
    except Hang:
        verdict = "hang"
    except BaseException as err:  # anything else is a failure of the loader
        verdict, message = f"raised {type(err).__name__}", str(err)[:200]
    signal.alarm(0)
    peak = status("VmHWM") - rss
    del model
    print(f"{name}|{verdict}|{peak}|{2 * size // 1024 + slack}|{message}", flush=True)
EOF
rc=$?
if [ $rc -ne 0 ]; then fail "the Python loader ran every case" "exit $rc"; fi
if [ -e "$T/c/PWNED" ] || [ -e PWNED ]; then fail "nothing in a file is run" "a config's code ran"; fi

cases=0
while IFS='|' read -r name want file; do
    cases=$((cases + 1))
    c=$(grep "^$name|" "$T/c_verdicts" | cut -d'|' -f2)
    c_msg=$(grep "^$name|" "$T/c_verdicts" | cut -d'|' -f3-)
    line=$(grep "^$name|" "$T/py_verdicts")
    py=$(echo "$line" | cut -d'|' -f2)
    peak=$(echo "$line" | cut -d'|' -f3)
    limit=$(echo "$line" | cut -d'|' -f4)
    msg=$(echo "$line" | cut -d'|' -f5-)
    why=""
    if [ -z "$line" ]; then why="no Python verdict"; fi
    kind=$want
    if [ "$want" = same ]; then
        want=refuse
        if [ "${msg#attnlab_torch: }" != "$c_msg" ]; then why="the reasons differ: C '$c_msg', Python '$msg'"; fi
    fi
    case $want in
    gap) [ "$py" = refuse ] || why="Python: $py, want refuse"
        [ "$c" = refuse ] || [ "$c" = load ] || why="${why:+$why; }C: $c" ;;
    *) [ "$py" = "$want" ] || why="Python: $py${msg:+ ($msg)}, want $want"
        [ "$c" = "$want" ] || why="${why:+$why; }C: $c, want $want" ;;
    esac
    if [ -n "$peak" ] && [ "$peak" -gt "$limit" ]; then why="${why:+$why; }Python's peak grew $peak KiB, limit $limit KiB"; fi
    what="both ${want}"
    if [ "$kind" = same ]; then what="both refuse, in the same words"; fi
    if [ "$want" = gap ]; then what="Python refuses, C: $c"; fi
    if [ "$want" = gap ] && [ "$c" = load ]; then what="$what (the C side's part of issue 28)"; fi
    if [ -z "$why" ]; then pass "$name: $what; Python's peak +$peak KiB (limit $limit)"
    else fail "$name" "$why"; fi
done <"$T/list"
if [ "$cases" -lt 50 ]; then fail "the suite has its cases" "$cases"; fi

# Refusals outside a file: a config given to GPT and a value given to load are
# checked as a checkpoint's are, a CheckpointError and never another exception.
"$PY" - "$GOOD" "$T/c/fifo.safetensors" >"$T/out" 2>"$T/err" <<'EOF'
import sys
import attnlab_torch as at

good, fifo = sys.argv[1], sys.argv[2]
cases = [
    (lambda: at.GPT({"heads": 0}), "--heads: expected an integer in [1, 256], got '0'"),
    (lambda: at.GPT({"layers": "2"}), "--layers: expected an integer in [1, 64], got '2' (a string)"),
    (lambda: at.GPT({"d_model": 16, "heads": 3}), "--heads 3 does not divide --d_model 16"),
    (lambda: at.GPT({"tie_embeddings": "maybe"}), "--tie_embeddings: 'maybe' is not one of: false, true"),
    (lambda: at.load(good, window=-5), "override --window: expected an integer in [0, 1048576], got '-5'"),
    (lambda: at.load(good, logn="maybe"), "override --logn: 'maybe' is not one of: off, on"),
    (lambda: at.load(good, chunk=8), "only window, logn and bca can change at evaluation, not chunk"),
    (lambda: at.read_safetensors(fifo), fifo + ": not a regular file (a safetensors file is one)"),
]
for i, (call, words) in enumerate(cases):
    try:
        call()
        print(f"case {i}: no refusal")
    except at.CheckpointError as err:
        if str(err) != "attnlab_torch: " + words:
            print(f"case {i}: {err}")
print("done")
EOF
if [ "$(cat "$T/out")" = "done" ]; then pass "a config or an override that is not the table's: a CheckpointError in the table's words"
else fail "a config or an override that is not the table's" "$(head -n 1 "$T/out") $(tail -n 1 "$T/err")"; fi

# attnlab_torch's option table is ./train --help's: names, kinds, defaults, ranges and choices.
./train --help >"$T/help" 2>&1
"$PY" - "$T/help" >"$T/out" 2>"$T/err" <<'EOF'
import re, sys
import attnlab_torch as at

rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"  --(\w+)\s+.*\(default: (.*?); (.*)\)$", line)
    if m:
        rows[m.group(1)] = (m.group(2), m.group(3))
bad = sorted(set(rows) ^ set(at.OPTIONS))
for name, (default, allowed) in rows.items():
    if name not in at.OPTIONS:
        continue
    kind, mine, limits = at.OPTIONS[name]
    if kind in ("int", "ints", "float"):
        lo, hi = (float(x) for x in re.search(r"in \[(.*?), (.*?)\]", allowed).groups())
        ok = (lo, hi) == tuple(map(float, limits)) and float(default) == float(mine)
        ok &= allowed.startswith({"int": "integer in", "ints": "integers in", "float": "number in"}[kind])
    elif kind in ("choice", "bool"):
        ok = allowed.split(", ") == [str(c).lower() if kind == "bool" else c for c in limits]
        ok &= default == (str(mine).lower() if kind == "bool" else mine)
    else:
        ok = allowed == "text" and default in (mine, '""' if not mine else None)
    if not ok:
        bad.append(name)
print("ok" if not bad and len(rows) > 40 else "differ: " + " ".join(bad))
EOF
if [ "$(cat "$T/out")" = ok ]; then pass "attnlab_torch.OPTIONS is ./train --help's table"
else fail "attnlab_torch.OPTIONS is ./train --help's table" "$(cat "$T/out") $(tail -n 1 "$T/err")"; fi

# The fuzz seeds (several kernels and position schemes) load, their model_shapes the modules'.
if "$PY" -c 'import glob, attnlab_torch as at
files = sorted(glob.glob("tests/fuzz/checkpoint/*.safetensors"))
assert len(files) >= 7, files
for f in files:
    at.load(f)' >"$T/out" 2>"$T/err"; then
    pass "the fuzz seed checkpoints load"
else
    fail "the fuzz seed checkpoints load" "$(tail -n 1 "$T/err")"
fi

cli_end
