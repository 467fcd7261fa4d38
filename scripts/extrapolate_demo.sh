#!/bin/sh
# The length-extrapolation study (`make extrapolate-demo` runs this).
#
# Trains one model per position scheme at context 128 with the same budget and
# otherwise the default options, into $OUT/<pos>, then scores them all with one
# ./extrapolate at 1x to 16x the training context, plus the inference-time
# variants (a sliding window, log-n scaling, XPOS's blockwise causal
# attention). The table goes to stdout, extrapolate.csv and extrapolate.png
# to $OUT.
#
# Resumable: a run folder whose model finished (samples.txt written and the
# last metrics line at the last step) is skipped; one with a checkpoint but
# not finished (Ctrl-C, a crash) is continued with ./train --resume; one
# without a checkpoint is trained from the start.
#
# usage: sh scripts/extrapolate_demo.sh [STEPS [MAX_BYTES [CORPUS [OUT]]]]
#   STEPS        training steps per model (default 1500, the ./train default)
#   MAX_BYTES    ./extrapolate --max_bytes: bytes scored per length, in evenly spaced windows
#                (default 131072; 0 = the whole held-out split)
#   CORPUS       default data/brown.txt
#   OUT          default runs/extrap
set -eu

cd "$(dirname "$0")/.."
steps=${1:-1500}
max_bytes=${2:-131072}
corpus=${3:-data/brown.txt}
out=${4:-runs/extrap}
schemes="learned sinusoidal rope alibi kerple_power kerple_log sandwich xpos"

for pos in $schemes; do
    dir=$out/$pos
    if [ -f "$dir/model.safetensors" ]; then
        last=$(tail -n 1 "$dir/metrics.jsonl" 2>/dev/null | sed -n 's/^{"step": \([0-9]*\),.*/\1/p')
        if [ -f "$dir/samples.txt" ] && [ "$last" = "$steps" ]; then
            echo "extrapolate-demo: $dir finished at step $steps; skipping"
            continue
        fi
        echo "extrapolate-demo: $dir has an unfinished checkpoint; resuming"
        rc=0
        ./train --resume "$dir" --steps "$steps" || rc=$?
    else
        echo "extrapolate-demo: training pos=$pos into $dir"
        rc=0
        ./train --pos "$pos" --context 128 --steps "$steps" --out "$dir" "$corpus" || rc=$?
    fi
    # Ctrl-C: the checkpoint is saved; stop here, and the next run resumes.
    if [ "$rc" -ge 128 ]; then exit "$rc"; fi
    if [ ! -f "$dir/model.safetensors" ]; then
        echo "extrapolate-demo: pos=$pos: ./train exited $rc without a checkpoint" >&2
        exit 1
    fi
    # A diverged run keeps its last good checkpoint, which is scored as it is.
    if [ "$rc" -ne 0 ]; then echo "extrapolate-demo: pos=$pos: ./train exited $rc; scoring its last checkpoint"; fi
done

./extrapolate \
    "$out/learned" "$out/sinusoidal" "$out/rope" "$out/alibi" \
    "$out/kerple_power" "$out/kerple_log" "$out/sandwich" "$out/xpos" \
    "$out/rope@window=128" "$out/sinusoidal@window=128" \
    "$out/alibi@logn=on" "$out/rope@logn=on" "$out/xpos@bca=on" \
    "$corpus" --lengths 128,256,512,1024,2048 --max_bytes "$max_bytes" --out "$out"
