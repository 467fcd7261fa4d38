#!/bin/sh
# tests/fuzz/make_seeds.sh: remakes the fuzzers' seed inputs (committed).
#
# tests/fuzz/checkpoint/: tiny checkpoints (d_model 8, 1 layer, context 4,
# one step) of several kernels and position schemes, and their config.json;
# tests/fuzz/safetensors/: one of those checkpoints and small hand-made
# files (a foreign layout without padding or metadata, a zero-size tensor,
# 4 dims, metadata alone). Run from the repository root after `make`.
set -eu
. tests/cli_lib.sh
T=$(mktemp -d "${TMPDIR:-/tmp}/attnlab_seeds.XXXXXX")
trap 'rm -rf "$T"' EXIT
small_corpus "$T/corpus.txt"
C=tests/fuzz/checkpoint S=tests/fuzz/safetensors
rm -rf "$C" "$S"
mkdir -p "$C" "$S"

TINY="--layers 1 --d_model 8 --heads 1 --context 4 --batch 1 --steps 1 --threads 1 --sample_length 0 --eval_batches 1"
n=0
for opts in "" "--attn cosformer" "--attn linear --phi elu --pos rope" "--attn linformer --objective mlm --linformer_k 2" \
    "--talking_heads both --pos rope" "--pos alibi --window 2" "--tie_embeddings false --norm rmsnorm --pos sinusoidal"; do
    n=$((n + 1))
    ./train $TINY $opts --out "$T/run$n" "$T/corpus.txt" >/dev/null
    cp "$T/run$n/model.safetensors" "$C/model$n.safetensors"
    cp "$T/run$n/config.json" "$C/config$n.json"
done
cp "$C/model1.safetensors" "$S/model.safetensors"

# file NAME JSON DATA_BYTES: a header of JSON (unpadded) and that many data bytes
file() {
    len=$(printf '%s' "$2" | wc -c)
    { perl -e 'print pack("Q<", $ARGV[0])' "$len"; printf '%s' "$2"; head -c "$3" /dev/zero; } >"$S/$1"
}
file foreign.safetensors '{"b":{"shape":[2],"dtype":"F32","data_offsets":[0,8]},"a":{"dtype":"F32","shape":[1,1],"data_offsets":[8,12]}}' 12
file empty_tensor.safetensors '{"z":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},"__metadata__":{}}' 0
file dims4.safetensors '{"w":{"dtype":"F32","shape":[1,2,1,2],"data_offsets":[0,16]},"__metadata__":{"format":"attnlab"}}' 16
file meta.safetensors '{"__metadata__":{"format":"attnlab","format_version":"1","step":"3"}}' 0
echo "seeds: $(ls "$C" | wc -l) in $C, $(ls "$S" | wc -l) in $S"
