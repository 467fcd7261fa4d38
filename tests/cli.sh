#!/bin/sh
# tests/cli.sh: ./train's command line on bad input (combinations of options
# that cannot work among it), --help, and Ctrl-C; ./bench --attn and --scaling.
#
# Run from the repository root after `make` (make check does both). Each bad
# input must give: the expected exit code (2 usage error, 1 runtime failure,
# never a crash), "error: " and an expected phrase on stderr's first line, at
# most two lines on stderr (the error and a hint), no *.tmp file anywhere, and
# no run folder when the error is found before training starts. One line per
# case, a summary, and a non-zero exit when a case fails. CLI_VERBOSE=1 also
# shows each error message.
# $TINY is split into words on purpose:
# shellcheck disable=SC2086,SC2013
set -u

TRAIN=${TRAIN:-./train} # TRAIN=... runs another build, e.g. one with sanitizers
. "$(dirname "$0")/cli_lib.sh"
cli_begin cli "$TRAIN"
BG=""
# cli_lib.sh runs it on exit, before $T goes
cleanup() {
    if [ -n "$BG" ]; then kill "$BG" 2>/dev/null; fi
}
R=$T/runs

# A tiny model, one thread.
TINY="--layers 1 --d_model 32 --heads 2 --context 32 --batch 4 --threads 1 --sample_length 20"

# A pseudo-English corpus of about 100 KB from a fixed seed (Park-Miller
# generator, exact in awk's doubles).
awk 'BEGIN {
    n = split("the of and to a in is it that was he for on are with as his they be at one have this from by word but what some we can out other were all there when up use your how said an each she which do their time", w, " ");
    x = 12345; len = 0;
    while (len < 100000) {
        x = (x * 16807) % 2147483647; k = 3 + x % 10; s = "";
        for (i = 0; i < k; i++) {
            x = (x * 16807) % 2147483647; word = w[1 + x % n];
            if (i == 0) word = toupper(substr(word, 1, 1)) substr(word, 2);
            s = s (i ? " " : "") word;
        }
        x = (x * 16807) % 2147483647; s = s substr(".,;!?", 1 + x % 5, 1);
        x = (x * 16807) % 2147483647;
        if (x % 4 == 0) { printf "%s\n", s } else { printf "%s ", s }
        len += length(s) + 1;
    }
}' >"$T/corpus.txt"
CORPUS=$T/corpus.txt
mkdir "$T/adir"
: >"$T/empty.txt"
head -c 100 "$CORPUS" >"$T/short.txt"

# expect NAME CODE PHRASE NODIR ARGS... (cli_lib.sh's, with a run folder to check)
#   runs ./train ARGS; NODIR (or "-") is a run folder that must not exist afterwards.
expect() {
    name=$1 code=$2 phrase=$3 nodir=$4
    shift 4
    "$TRAIN" "$@" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    why=""
    first=$(head -n 1 "$T/err")
    lines=$(wc -l <"$T/err")
    if [ "$rc" -ge 128 ]; then
        why="crashed (exit $rc)"
    elif [ "$rc" -ne "$code" ]; then
        why="exit $rc, want $code"
    fi
    case $first in
    "error: "*) ;;
    *) why="${why:+$why; }stderr's first line does not start with 'error: '" ;;
    esac
    case $first in
    *"$phrase"*) ;;
    *) why="${why:+$why; }stderr's first line lacks '$phrase'" ;;
    esac
    if [ "$lines" -gt 2 ]; then why="${why:+$why; }$lines lines on stderr"; fi
    tmp=$(find "$T" -name '*.tmp' | head -n 1)
    if [ -n "$tmp" ]; then why="${why:+$why; }left ${tmp#"$T"/}"; fi
    if [ "$nodir" != "-" ] && [ -e "$nodir" ]; then why="${why:+$why; }created ${nodir#"$T"/}"; fi
    if [ -z "$why" ]; then pass "$name"; else fail "$name" "$why"; fi
    if [ -n "${CLI_VERBOSE:-}" ]; then sed 's/^/     | /' "$T/err"; fi
}

# ---------------------------------------------------------------- bad input
expect "no corpus" 2 "no corpus given" "$R/a" $TINY --out "$R/a"
expect "missing corpus file" 1 "nothere.txt: cannot open" "$R/a" $TINY --out "$R/a" "$T/nothere.txt"
expect "directory as corpus" 1 "is a directory" "$R/a" $TINY --out "$R/a" "$T/adir"
expect "empty corpus" 1 "empty" "$R/a" $TINY --out "$R/a" "$T/empty.txt"
# /proc's files report 0 bytes and have content: not called empty
if [ -r /proc/self/status ]; then
    expect "a /proc file as corpus" 1 "reports a size of 0 bytes but has content" "$R/a" $TINY --out "$R/a" /proc/self/status
fi
expect "corpus shorter than the context" 1 "context 32 needs at least 33" "$R/a" $TINY --out "$R/a" "$T/short.txt"
expect "unknown option" 2 "unknown option '--bogus'" "$R/a" $TINY --bogus 1 --out "$R/a" "$CORPUS"
expect "option without a value" 2 "--layers: needs a value" "$R/a" --out "$R/a" "$CORPUS" --layers
expect "--resume without a value" 2 "--resume: needs a run folder" "$R/a" --resume
expect "bad integer" 2 "--heads: expected an integer" "$R/a" $TINY --heads x --out "$R/a" "$CORPUS"
# a CPU without AVX512-BF16 or AMX, as oneDNN sees one when its ISA is capped
ONEDNN_MAX_CPU_ISA=AVX512_CORE expect "--precision bf16 where the CPU cannot" 2 \
    "precision=bf16: this CPU has neither AVX512-BF16 nor AMX-BF16" "$R/a" $TINY --precision bf16 --out "$R/a" "$CORPUS"
if ONEDNN_MAX_CPU_ISA=AVX512_CORE CK_RUN_SUITE=gemm ./build/test_all 2>&1 | grep -q "bf16 tests skipped: precision=bf16: this CPU has neither"; then
    pass "on such a CPU the bf16 tests say why they skip"
else
    fail "on such a CPU the bf16 tests say why they skip" "no skip line from the gemm suite"
fi
expect "integer out of range" 2 "got '0'" "$R/a" $TINY --heads 0 --out "$R/a" "$CORPUS"
expect "fractional integer" 2 "--layers: expected an integer" "$R/a" $TINY --layers 1.5 --out "$R/a" "$CORPUS"
expect "bad number" 2 "--lr: expected a number" "$R/a" $TINY --lr fast --out "$R/a" "$CORPUS"
expect "non-finite number" 2 "--lr: expected a number" "$R/a" $TINY --lr nan --out "$R/a" "$CORPUS"
expect "bad choice lists the choices" 2 "--attn: 'foo' is not one of: softmax" "$R/a" $TINY --attn foo --out "$R/a" "$CORPUS"
expect "bad choice, several allowed" 2 "is not one of: layernorm, rmsnorm" "$R/a" $TINY --norm foo --out "$R/a" "$CORPUS"
expect "bad boolean" 2 "is not one of: false, true" "$R/a" $TINY --tie_embeddings yes --out "$R/a" "$CORPUS"
expect "heads not dividing d_model" 2 "--heads 3 does not divide --d_model 32" "$R/a" $TINY --heads 3 --out "$R/a" "$CORPUS"
expect "min_lr above lr" 2 "--min_lr" "$R/a" $TINY --lr 1e-4 --min_lr 1e-3 --out "$R/a" "$CORPUS"
expect "two corpora" 2 "more than one corpus" "$R/a" $TINY --out "$R/a" "$CORPUS" "$CORPUS"

# ---------------------------------------------- combinations that cannot work
# config_validate's refusals (tests/test_options.c checks each one directly).
expect "linformer with clm" 2 "attn=linformer projects keys and values along the sequence, so it cannot be causal" "$R/a" $TINY --attn linformer --linformer_k 8 --out "$R/a" "$CORPUS"
expect "phi without attn=linear" 2 "--phi applies to linear attention, not attn=softmax" "$R/a" $TINY --phi elu --out "$R/a" "$CORPUS"
expect "reweight without attn=linear" 2 "--reweight applies to linear attention, not attn=linformer" "$R/a" $TINY --attn linformer --objective mlm --linformer_k 8 --reweight cos --out "$R/a" "$CORPUS"
expect "cosformer with another phi" 2 "attn=cosformer fixes phi=relu" "$R/a" $TINY --attn cosformer --phi identity --out "$R/a" "$CORPUS"
expect "talking heads with a linear kernel" 2 "--talking_heads applies to attn=softmax, not attn=cosformer" "$R/a" $TINY --attn cosformer --talking_heads pre --out "$R/a" "$CORPUS"
expect "talking heads with linformer" 2 "--talking_heads applies to attn=softmax, not attn=linformer" "$R/a" $TINY --attn linformer --objective mlm --linformer_k 8 --talking_heads both --out "$R/a" "$CORPUS"
expect "chunk without attn=linear" 2 "--chunk applies to linear attention" "$R/a" $TINY --chunk 16 --out "$R/a" "$CORPUS"
expect "chunk under mlm" 2 "--chunk: chunks are how causal linear attention runs" "$R/a" $TINY --attn linear --objective mlm --chunk 16 --out "$R/a" "$CORPUS"
expect "leaky_slope without phi=leakyrelu" 2 "--leaky_slope applies to phi=leakyrelu, not phi=elu" "$R/a" $TINY --attn linear --phi elu --leaky_slope 0.2 --out "$R/a" "$CORPUS"
expect "linformer option without linformer" 2 "--linformer_k applies to attn=linformer, not attn=linear" "$R/a" $TINY --attn linear --linformer_k 8 --out "$R/a" "$CORPUS"
expect "linformer_k beyond the context" 2 "--linformer_k 64 is longer than --context 32" "$R/a" $TINY --attn linformer --objective mlm --out "$R/a" "$CORPUS"
expect "linformer pooling k not dividing" 2 "--linformer_k 12 must divide --context 32" "$R/a" $TINY --attn linformer --objective mlm --linformer_k 12 --linformer_proj conv --out "$R/a" "$CORPUS"
expect "linformer sharing a parameter-free pooling" 2 "pools without parameters, so there is nothing to share" "$R/a" $TINY --attn linformer --objective mlm --linformer_k 8 --linformer_proj mean --linformer_share kv --out "$R/a" "$CORPUS"
expect "alibi with a linear kernel" 2 "--pos alibi adds a bias to every score, so it needs an explicit score matrix: attn=softmax" "$R/a" $TINY --attn linear --pos alibi --out "$R/a" "$CORPUS"
expect "kerple with talking heads" 2 "--pos kerple_log: score biases are added in the plain softmax kernel" "$R/a" $TINY --pos kerple_log --talking_heads pre --out "$R/a" "$CORPUS"
expect "xpos under mlm" 2 "--pos xpos: its decay is defined for causal attention only" "$R/a" $TINY --pos xpos --objective mlm --out "$R/a" "$CORPUS"
expect "odd rope_dims" 2 "--rope_dims 3: rotations act on pairs" "$R/a" $TINY --pos rope --rope_dims 3 --out "$R/a" "$CORPUS"
expect "window with a linear kernel" 2 "--window acts on an explicit score matrix" "$R/a" $TINY --attn cosformer --window 8 --out "$R/a" "$CORPUS"
expect "bca in training" 2 "--bca on: blockwise causal attention is an inference-time option" "$R/a" $TINY --pos xpos --bca on --out "$R/a" "$CORPUS"
expect "key_size without head_size, heads not dividing" 2 "--heads 3 does not divide --d_model 32" "$R/a" $TINY --heads 3 --key_size 8 --out "$R/a" "$CORPUS"
expect "a prompt under mlm" 2 "--prompt: objective=mlm is not sampled left to right" "$R/a" $TINY --objective mlm --prompt Once --out "$R/a" "$CORPUS"
expect "a temperature under mlm" 2 "--temperature: objective=mlm" "$R/a" $TINY --objective mlm --temperature 1 --out "$R/a" "$CORPUS"

expect "--resume of a missing folder" 1 "nothere/model.safetensors" "$T/nothere" --resume "$T/nothere"
expect "--resume of a file" 1 "model.safetensors" - --resume "$CORPUS"

# A finished run of 4 steps to resume from (and to be in the way).
if "$TRAIN" $TINY --steps 4 --save_every 2 --out "$R/good" "$CORPUS" >"$T/out" 2>"$T/err" &&
    [ -s "$R/good/model.safetensors" ] && [ -s "$R/good/metrics.jsonl" ] && [ -s "$R/good/config.json" ] &&
    [ -s "$R/good/loss.png" ] && [ -s "$R/good/samples.txt" ] && [ ! -s "$T/err" ]; then
    pass "a small run writes the run folder"
else
    fail "a small run writes the run folder" "exit or files wrong"
fi
cp "$R/good/model.safetensors" "$T/good.safetensors"
cp "$R/good/metrics.jsonl" "$T/good.metrics"

# untouched NAME FILE ORIGINAL: the failed command left FILE as it was.
untouched() {
    if cmp -s "$2" "$3"; then pass "$1: left as it was"; else fail "$1: left as it was" "$2 changed"; fi
}

expect "run folder already holds a run" 1 "a run is already there" - $TINY --steps 4 --out "$R/good" "$CORPUS"
untouched "run folder already holds a run" "$R/good/model.safetensors" "$T/good.safetensors"
expect "--resume changing a model option" 2 "--layers: a model option cannot change when resuming" - --resume "$R/good" --layers 2 --steps 8
expect "--resume already at --steps" 2 "already trained for 4 steps" - --resume "$R/good"
untouched "--resume refused" "$R/good/metrics.jsonl" "$T/good.metrics"

# The corpus a run was trained on has gone: resuming it says so.
cp "$CORPUS" "$T/gone.txt"
if "$TRAIN" $TINY --steps 2 --out "$R/gone" "$T/gone.txt" >"$T/out" 2>"$T/err"; then
    rm "$T/gone.txt"
    cp "$R/gone/model.safetensors" "$T/before"
    expect "--resume when the run's corpus is gone" 1 "gone.txt: cannot open" - --resume "$R/gone" --steps 4
    untouched "--resume when the run's corpus is gone" "$R/gone/model.safetensors" "$T/before"
else
    fail "--resume when the run's corpus is gone" "the first run failed"
fi

# Corrupt checkpoints: copies of the good run with model.safetensors broken.
corrupt() { # NAME PHRASE: resume $R/NAME and expect a runtime error
    cp "$R/$1/model.safetensors" "$T/before"
    expect "--resume, $1 checkpoint" 1 "$2" - --resume "$R/$1" --steps 8
    untouched "--resume, $1 checkpoint" "$R/$1/model.safetensors" "$T/before"
}
for kind in truncated garbage empty foreign header; do
    mkdir -p "$R/$kind"
    cp "$R/good/config.json" "$R/good/metrics.jsonl" "$R/$kind/"
done
head -c 1000 "$T/good.safetensors" >"$R/truncated/model.safetensors"
head -c 5000 "$CORPUS" >"$R/garbage/model.safetensors"
: >"$R/empty/model.safetensors"
# A valid safetensors file of one tensor, not made by attnlab (no metadata).
json='{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
len=$(printf '%s' "$json" | wc -c)
printf "\\$(printf %o "$len")\\000\\000\\000\\000\\000\\000\\000%s\\000\\000\\200\\077" "$json" >"$R/foreign/model.safetensors"
# The good checkpoint cut short inside its data: the header still claims it all.
size=$(wc -c <"$T/good.safetensors")
head -c $((size - 100)) "$T/good.safetensors" >"$R/header/model.safetensors"
corrupt truncated "model.safetensors"
corrupt garbage "model.safetensors"
corrupt empty "model.safetensors"
corrupt foreign "not an attnlab checkpoint"
corrupt header "model.safetensors"

# A run that diverges (weights x(1 - lr*weight_decay) = x(-99) each step: the
# gradient overflows at step 8) fails, and keeps the step-5 checkpoint.
expect "diverging run" 1 "step 8: the gradient norm is not finite" - $TINY --lr 10 --weight_decay 10 --clip 0 --warmup 0 \
    --schedule constant --min_lr 0 --save_every 5 --steps 50 --out "$R/diverged" "$CORPUS"
# (--resume ... --steps 5 is refused as "already trained for 5 steps".)
"$TRAIN" --resume "$R/diverged" --steps 5 >"$T/out" 2>"$T/err"
if [ $? -eq 2 ] && grep -q "already trained for 5 steps" "$T/err"; then
    pass "diverging run: the step-5 checkpoint is kept"
else
    fail "diverging run: the step-5 checkpoint is kept" "it does not open as a step-5 checkpoint"
fi

# ------------------------------------------------------------------- --help
if "$TRAIN" --help >"$T/out" 2>"$T/err"; then
    missing=""
    count=0
    for opt in $(sed -n 's/^ *{\.name = "\([a-z_]*\)", \.type = OPT_.*/\1/p' experiments/run/options.c); do
        count=$((count + 1))
        grep -q -- "--$opt " "$T/out" || missing="$missing --$opt"
    done
    if [ "$count" -lt 20 ]; then
        fail "--help lists every option" "found only $count options in experiments/run/options.c"
    elif [ -n "$missing" ] || [ -s "$T/err" ]; then
        fail "--help lists every option" "missing:$missing"
    else
        pass "--help lists every option ($count)"
    fi
else
    fail "--help lists every option" "exit $?"
fi

expect "--prompt not valid UTF-8" 2 "--prompt: not valid UTF-8 (from byte 3 of 4)" "$R/p" $TINY --out "$R/p" --prompt "$(printf 'ab\377c')" "$CORPUS"

# ------------------------------------------------------------------- progress
# The plain progress lines (stdout is not a terminal): the loss in bits per
# byte, and the last validation bpb with the step it was measured at, also on
# the lines between evaluations.
if "$TRAIN" $TINY --steps 30 --warmup 5 --eval_every 10 --log_every 5 --out "$R/progress" "$CORPUS" \
    >"$T/out" 2>"$T/err"; then
    at15=$(grep -c '^train: step 15/30 .* loss [0-9.]* bpb  val [0-9.]* bpb @10  lr ' "$T/out")
    at20=$(grep -c '^train: step 20/30 .* loss [0-9.]* bpb  val [0-9.]* bpb @20  lr ' "$T/out")
    if [ "$at15" -eq 1 ] && [ "$at20" -eq 1 ] && ! grep -q 'val_bpb' "$T/out"; then
        pass "progress: loss and val in bpb, val with its step"
    else
        fail "progress: loss and val in bpb, val with its step" "$(grep '^train: step' "$T/out" | head -4)"
    fi
else
    fail "progress: loss and val in bpb, val with its step" "exit $?: $(head -1 "$T/err")"
fi

# ------------------------------------------------------------------- Ctrl-C
# SIGINT saves a checkpoint and exits 130; the run then resumes to the end.
"$TRAIN" $TINY --steps 10000000 --warmup 10 --save_every 10000000 --eval_every 10000000 --log_every 1000 \
    --out "$R/sigint" "$CORPUS" >"$T/out" 2>"$T/err" &
BG=$!
sleep 2
kill -INT "$BG"
wait "$BG"
rc=$?
BG=""
step=$(sed -n 's/^interrupted at step \([0-9]*\);.*/\1/p' "$T/out")
why=""
if [ "$rc" -ne 130 ]; then why="exit $rc, want 130"; fi
if ! grep -q "interrupted" "$T/out" "$T/err"; then why="${why:+$why; }no 'interrupted' message"; fi
if [ -s "$T/err" ]; then why="${why:+$why; }stderr not empty"; fi
if [ -z "$step" ]; then why="${why:+$why; }no step in the message"; fi
if [ -n "$(find "$T" -name '*.tmp')" ]; then why="${why:+$why; }a *.tmp file left"; fi
if [ -z "$why" ]; then pass "SIGINT: exit 130, checkpoint at step $step"; else fail "SIGINT" "$why"; fi
if [ -n "$step" ] && "$TRAIN" --resume "$R/sigint" --steps $((step + 5)) >"$T/out" 2>"$T/err" &&
    grep -q "after $((step + 5)) steps" "$T/out" && [ -s "$R/sigint/samples.txt" ]; then
    pass "SIGINT: the checkpoint resumes and finishes"
else
    fail "SIGINT: the checkpoint resumes and finishes" "resume failed"
fi

# -------------------------------------------------------------------- bench
# ./bench --attn X measures every attn value --help lists, so every kernel of
# the registry (tiny settings: this checks that it runs, not the speed);
# linformer picks objective mlm by itself.
BENCH=${BENCH:-./bench}
ATTN_VALUES=$("$TRAIN" --help 2>&1 | sed -n 's/^  --attn .*(default: [^;]*; \(.*\))$/\1/p' | tr -d ',')
if [ -z "$ATTN_VALUES" ]; then fail "--help lists the attn values" "no --attn line with its values"; fi
if [ -x "$BENCH" ]; then
    BENCH_ABS=$(cd "$(dirname "$BENCH")" && pwd)/$(basename "$BENCH")
    BTINY="--steps 1 --layers 1 --d_model 32 --heads 2 --context 32 --batch 2 --threads 1"
    for attn in $ATTN_VALUES; do
        extra=""
        if [ "$attn" = linformer ]; then extra="--linformer_k 8"; fi
        if "$BENCH" $BTINY --attn "$attn" $extra >"$T/out" 2>"$T/err" && grep -q "attn=$attn" "$T/out" &&
            grep -q "throughput" "$T/out" && grep -q '^  of the peak  *[0-9.]*% ' "$T/out" && [ ! -s "$T/err" ]; then
            pass "bench --attn $attn"
        else
            fail "bench --attn $attn" "exit or output wrong"
        fi
    done
    SAVED_TRAIN=$TRAIN
    TRAIN=$BENCH # expect runs $TRAIN
    expect "bench: linformer with --objective clm" 2 "cannot be causal" - $BTINY --attn linformer --objective clm --linformer_k 8
    expect "bench: bad --lengths" 2 "--lengths: expected up to 32 comma-separated lengths" - --scaling --lengths 64,x
    expect "bench: --scaling --vs-torch on softmax" 2 "compares the causal cosformer layer only" - \
        --scaling --vs-torch --attn softmax --lengths 32
    expect "bench: --scaling --vs-torch with a key_size" 2 "key_size = head_size = d_model / heads" - \
        --scaling --vs-torch --attn cosformer --key_size 32 --lengths 32
    expect "bench: --scaling with --ops" 2 "runs on its own" - --scaling --ops --lengths 32
    expect "bench: --rounds without --scaling" 2 "--rounds: only with --scaling" - $BTINY --rounds 2
    expect "bench: --rounds 0" 2 "--rounds" - --scaling --rounds 0
    TRAIN=$SAVED_TRAIN
    mkdir "$T/scaling"
    if (cd "$T/scaling" && "$BENCH_ABS" --scaling --lengths 32,64 --reps 1 --threads 1 >"$T/out" 2>"$T/err") &&
        [ "$(wc -l <"$T/scaling/bench-scaling.csv")" -eq 5 ] && [ -s "$T/scaling/bench-scaling.png" ] &&
        [ -s "$T/scaling/bench-scaling-memory.png" ] && grep -q "^cosformer causal,64," "$T/scaling/bench-scaling.csv" &&
        grep -q "^softmax causal,32," "$T/scaling/bench-scaling.csv" && [ ! -s "$T/err" ] &&
        grep -q "layer/cost" "$T/out"; then
        pass "bench --scaling writes its table and plots"
    else
        fail "bench --scaling writes its table and plots" "exit, csv or png wrong"
    fi
    # the kernel's counted work: softmax at T 32, 4 heads of 64, causal (528
    # keys seen) is 2 x 4 x 528 x (4 x 64 + 3 x 64) = 1892352 flops; cosformer
    # at T 32 is one chunk of 32 rows, 2 x 4 x 32^2 (4 x 64 + 3 x 65 + 64) =
    # 4218880
    csv="$T/scaling/bench-scaling.csv"
    col=$(head -n 1 "$csv" | tr , '\n' | grep -n '^kernel_gflop$' | cut -d: -f1)
    if [ -n "$col" ] && [ "$(grep '^softmax causal,32,' "$csv" | cut -d, -f"$col")" = 0.001892 ] &&
        [ "$(grep '^cosformer causal,32,' "$csv" | cut -d, -f"$col")" = 0.004219 ]; then
        pass "bench --scaling counts the softmax kernel's products"
    else
        fail "bench --scaling counts the softmax kernel's products" "kernel_gflop column wrong"
    fi
    # --vs-torch with a stand-in for Python that prints torch_scaling.py's and
    # torch_reference.py's lines, so that this runs without PyTorch: the bench
    # parses them into the ratio table and the csv, or picks the fastest
    # setting (here 2 threads with OMP_WAIT_POLICY=PASSIVE and GOMP_SPINCOUNT
    # unset) and pairs it with its own runs. The stand-in fails unless
    # OMP_NUM_THREADS and OPENBLAS_NUM_THREADS match --threads.
    cat >"$T/fakepy" <<'PY'
#!/bin/sh
[ "$1" = -c ] && exit 0
case $1 in
*/torch_scaling.py)
    echo "torch T 32: 5.0 ms (fastest 4.0), peak RSS 300.0 MiB, 12.5 above the start"
    echo "torch T 64: 8.0 ms (fastest 7.0), peak RSS 301.0 MiB, 20.5 above the start" ;;
*/torch_reference.py)
    threads=$(echo "$*" | sed -n 's/.*--threads \([0-9]*\).*/\1/p')
    [ "$threads" = "${OMP_NUM_THREADS:-}" ] && [ "$threads" = "${OPENBLAS_NUM_THREADS:-}" ] || exit 1
    tok=$((1000 * threads))
    if [ "${OMP_WAIT_POLICY:-}" = PASSIVE ] && [ -z "${GOMP_SPINCOUNT:-}" ]; then tok=$((tok + 500)); fi
    echo "  torch 0.0: $threads threads (interop 1), ATen CPU capability AVX2"
    echo "  BLAS: /stand-in/libopenblas.so.0; OpenBLAS kernel StandIn"
    echo "  throughput $tok tok/s" ;;
*) exit 1 ;;
esac
PY
    chmod +x "$T/fakepy"
    if (cd "$T/scaling" && PYTHON="$T/fakepy" "$BENCH_ABS" --scaling \
        --vs-torch --attn cosformer --lengths 32,64 --reps 1 --threads 1 >"$T/out" 2>"$T/err") &&
        grep -q "^cosformer causal,64,.*,8.0000,7.0000,20.50$" "$T/scaling/bench-scaling.csv" &&
        grep -Eq "^ +64 \| .* 8\.0 +[0-9.]+x \| .* 20\.5$" "$T/out" && [ ! -s "$T/err" ]; then
        pass "bench --scaling --vs-torch reads PyTorch's rows"
    else
        fail "bench --scaling --vs-torch reads PyTorch's rows" "exit, table or csv wrong"
    fi
    # without --attn: the default kernel (softmax) first, then cosformer, which
    # PyTorch runs
    if (cd "$T/scaling" && PYTHON="$T/fakepy" "$BENCH_ABS" --scaling \
        --vs-torch --lengths 32,64 --reps 1 --threads 1 >"$T/out" 2>"$T/err") &&
        grep -q "^cosformer causal,64,.*,8.0000,7.0000,20.50$" "$T/scaling/bench-scaling.csv" &&
        grep -q "^softmax causal,64,.*,,,$" "$T/scaling/bench-scaling.csv" && [ ! -s "$T/err" ]; then
        pass "bench --scaling --vs-torch with the default kernels"
    else
        fail "bench --scaling --vs-torch with the default kernels" "exit, table or csv wrong: $(tail -n 1 "$T/err")"
    fi
    if PYTHON="$T/fakepy" "$BENCH" --vs-torch $BTINY --threads 2 --rounds 3 >"$T/out" 2>"$T/err" &&
        grep -Eq "^  fastest: 2 threads, OMP_WAIT_POLICY=PASSIVE( \(as attnlab\))?$" "$T/out" &&
        [ "$(grep -c "^round [123]: attnlab [0-9]* tok/s, PyTorch 2500 tok/s, ratio [0-9.]*x$" "$T/out")" -eq 3 ] &&
        grep -Eq "^ +median +[0-9]+ +2500 +[0-9.]+x$" "$T/out" && grep -q "^note: PyTorch did not run attnlab's" "$T/out" &&
        grep -Eq "^attnlab / PyTorch throughput: [0-9.]+x, the median of 3 paired rounds \(medians [0-9]+ vs 2500 tok/s; \
PyTorch's fastest setting: 2 threads, OMP_WAIT_POLICY=PASSIVE( \(as attnlab\))?; OpenBLAS kernel [A-Za-z0-9]+, PyTorch's StandIn\)$" \
            "$T/out" && [ ! -s "$T/err" ]; then
        pass "bench --vs-torch probes PyTorch's settings and pairs the rounds"
    else
        fail "bench --vs-torch probes PyTorch's settings and pairs the rounds" "exit, winner, rounds or medians wrong"
    fi
    # each round's peak RSS is its own and the same step's: with glibc's
    # moving mmap threshold (command_startup fixes it) rounds 2 and 3 of this
    # model peaked at 33.3 MiB against round 1's 24.5
    if PYTHON="$T/fakepy" "$BENCH" --vs-torch --rounds 3 --steps 1 --threads 1 --layers 2 --d_model 64 --context 128 \
        --batch 8 >"$T/out" 2>"$T/err" && [ "$(grep -c "^  peak RSS " "$T/out")" -eq 3 ] &&
        grep "^  peak RSS " "$T/out" | awk '{ v[NR] = $3 } END { lo = hi = v[1]; for (i = 2; i <= NR; i++) {
            if (v[i] < lo) lo = v[i]; if (v[i] > hi) hi = v[i] } exit !(hi <= 1.1 * lo) }'; then
        pass "bench --rounds: each round's peak RSS, all three within 10%"
    else
        fail "bench --rounds: each round's peak RSS, all three within 10%" \
            "$(grep "^  peak RSS " "$T/out" | tr -s ' ' | tr '\n' ';')"
    fi
    if (cd "$T/scaling" && "$BENCH_ABS" --scaling --attn linformer --linformer_k 16 --lengths 16,64 --reps 1 --threads 1 \
        >"$T/out" 2>"$T/err") && grep -q "^linformer k=16 bidirectional,64," "$T/scaling/bench-scaling.csv" &&
        [ "$(wc -l <"$T/scaling/bench-scaling.csv")" -eq 3 ]; then
        pass "bench --scaling --attn linformer"
    else
        fail "bench --scaling --attn linformer" "exit or csv wrong"
    fi
else
    fail "bench" "$BENCH is not built"
fi

cli_end
