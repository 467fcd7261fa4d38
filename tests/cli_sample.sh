#!/bin/sh
# tests/cli_sample.sh: ./sample end to end, and ./train's samples.txt, on
# Chinese text; ./sample on bad input.
#
# Run from the repository root after `make` (make check does both). Tiny
# models trained here in a fraction of a second on a generated Chinese corpus
# (1- to 4-byte characters) are still close to uniform over the 256 bytes, so
# that raw sampling gives invalid UTF-8 almost at once. The output of ./sample
# and samples.txt must be valid UTF-8 (glibc's iconv, and a strict check of
# Unicode's table 3-7 here, which also refuses what iconv lets through:
# F5..FF, and F4 90.. above U+10FFFF) at every length from 1 to 40 and some
# longer, at temperatures up to 5, and never more than the length asked for
# (at most 3 bytes short). Each bad input must give the expected exit code (2
# usage, 1 runtime; never a crash or a hang), "error: " and an expected phrase
# on stderr's first line and at most two lines on stderr.
# shellcheck disable=SC2086
set -u

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_sample ./train ./sample
BG=""
cleanup() { if [ -n "$BG" ]; then kill "$BG" 2>/dev/null; fi; }

# A corpus of about 60 KB of Chinese words from a fixed seed (Park-Miller,
# exact in awk's doubles), with a few 2-byte (é, ï, Greek) and 4-byte (U+20000,
# U+20089) characters, full-width and ASCII punctuation, digits and newlines.
zh_corpus() {
    LC_ALL=C awk 'BEGIN {
        n = split("我们 你们 他们 中国 学生 老师 朋友 今天 明天 时间 工作 学习 生活 问题 世界 电脑 语言 文字 音乐 天气 东西 地方 城市 北京 上海 喜欢 知道 觉得 需要 开始 已经 还是 因为 所以 但是 如果 一个 这个 那个 什么 怎么 为什么 没有 可以 应该 非常 特别 大家 自己 现在 以后 以前 山水 花草 春天 秋天 𠀀字 𠂉人 café naïve αβγ 123 2024 AI", w, " ");
        x = 4242; len = 0;
        while (len < 60000) {
            x = (x * 16807) % 2147483647; k = 3 + x % 10; s = "";
            for (i = 0; i < k; i++) { x = (x * 16807) % 2147483647; s = s w[1 + x % n]; if (x % 7 == 0) s = s "，"; }
            x = (x * 16807) % 2147483647; e = substr("。！？", 1 + 3 * (x % 3), 3); if (x % 4 == 3) e = ".";
            printf "%s%s\n", s, e; len += length(s) + 4;
        }
    }' >"$1"
}

# utf8_ok FILE: FILE is valid UTF-8, by iconv and by utf8_scan strict.
# utf8_scan strict|tail FILE: strict: valid UTF-8 by table 3-7; tail: read
# as a reader of raw bytes does (a byte that cannot follow starts afresh), it
# does not end inside a character.
utf8_scan() {
    od -An -v -tu1 "$2" | awk -v mode="$1" '
    function first(b) { # the state a first byte starts; 0 when it starts nothing
        lo = 128; hi = 191; need = 0
        if (b < 128) return 1
        if (b >= 194 && b <= 223) { need = 1; return 1 }
        if (b >= 224 && b <= 239) { need = 2; if (b == 224) lo = 160; if (b == 237) hi = 159; return 1 }
        if (b >= 240 && b <= 244) { need = 3; if (b == 240) lo = 144; if (b == 244) hi = 143; return 1 }
        return 0
    }
    BEGIN { need = 0; bad = 0 }
    {
        for (i = 1; i <= NF; i++) {
            b = $i + 0
            if (need > 0 && b >= lo && b <= hi) { need--; lo = 128; hi = 191; continue }
            if (need > 0) bad = 1
            if (!first(b)) bad = 1
        }
    }
    END { exit mode == "strict" ? (bad || need > 0) : need > 0 }'
}
utf8_ok() { iconv -f UTF-8 -t UTF-8 "$1" >/dev/null 2>&1 && utf8_scan strict "$1"; }

# ------------------------------------------------------ the checks check
# The validator accepts UTF-8 and refuses each kind of invalid byte sequence.
bad=""
printf 'a中文é𠀀\n' >"$T/v"
utf8_ok "$T/v" || bad="$bad good"
for seq in '\344\270' '\300\200' '\355\240\200' '\365\200\200\200' '\364\220\200\200' '\200' '\340\200\200' \
    '\360\200\200\200' '\344a' '\377'; do
    # shellcheck disable=SC2059 # the octal escapes are the format
    printf "x$seq" >"$T/v"
    if utf8_ok "$T/v"; then bad="$bad $seq"; fi
done
printf 'a\344\270' >"$T/v"
if utf8_scan tail "$T/v"; then bad="$bad tail:cut"; fi
printf 'a\344\270\255\200' >"$T/v"
utf8_scan tail "$T/v" || bad="$bad tail:lone"
if [ -z "$bad" ]; then pass "the UTF-8 check accepts UTF-8 and refuses every kind of invalid sequence"; else
    fail "the UTF-8 check" "wrong on:$bad"; fi

zh_corpus "$T/zh.txt"
if utf8_ok "$T/zh.txt" && [ "$(wc -c <"$T/zh.txt")" -gt 50000 ]; then pass "the Chinese corpus is UTF-8"; else
    fail "the Chinese corpus is UTF-8" "not valid or too short"; fi

# ------------------------------------------------ samples.txt from ./train
TINY="--steps 30 --layers 1 --d_model 32 --heads 2 --context 32 --batch 4 --threads 1 --eval_every 30 --eval_batches 1"
# At every length 1..40 and some longer, a fresh run: samples.txt is the
# prompt, then at most that many bytes (at most 3 fewer), all valid UTF-8.
bad=""
short=0
for L in $(seq 1 40) 97 400; do
    t=2.0
    if [ $((L % 3)) = 1 ]; then t=0.8; fi
    if ! ./train $TINY --sample_length $L --temperature $t --prompt "中" --seed $((L + 7)) --out "$T/run$L" \
        "$T/zh.txt" >"$T/out" 2>"$T/err"; then
        bad="$bad L$L(train failed)"
        continue
    fi
    S=$T/run$L/samples.txt
    n=$(($(wc -c <"$S") - 3))
    if ! utf8_ok "$S"; then bad="$bad L$L(invalid)"; fi
    if [ "$n" -gt "$L" ] || [ "$n" -lt $((L - 3)) ]; then bad="$bad L$L($n bytes)"; fi
    if [ "$n" -lt "$L" ]; then short=$((short + 1)); fi
done
if [ -z "$bad" ] && [ "$short" -gt 0 ]; then
    pass "samples.txt: valid UTF-8 and at most the length (1..40, 97, 400; $short cut before a character)"
else
    fail "samples.txt: valid UTF-8 and at most the length" "${bad:-no sample ended short of its length}"
fi
RUN=$T/run400

# ./sample RUN with the run's own options prints samples.txt (and a newline).
if ./sample "$RUN" >"$T/out" 2>"$T/err" && { cat "$RUN/samples.txt"; echo; } | cmp -s - "$T/out"; then
    pass "./sample RUN prints the run's samples.txt"
else
    fail "./sample RUN prints the run's samples.txt" "differs or failed"
fi
if ./sample "$RUN/model.safetensors" --prompt "中" --length 400 --temperature 0.8 --top_k 40 --seed 407 \
    >"$T/out2" 2>"$T/err" && cmp -s "$T/out" "$T/out2"; then
    pass "the same from the checkpoint file with the options spelled out"
else
    fail "the same from the checkpoint file with the options spelled out" "differs or failed"
fi

# --------------------------------------------------------- ./sample's text
# Every length 1..40 and some longer, at two of four temperatures up to 5
# each, with and without top-k, from an empty prompt, a Chinese one and an
# English one.
bad=""
short=0
runs=0
for L in $(seq 1 40) 100 333 1000; do
    temps="0.5 2.0"
    if [ $((L % 2)) = 0 ]; then temps="1.0 5.0"; fi
    for t in $temps; do
        case $t in 0.5) p="" ;; 1.0) p="中文" ;; *) p="The " ;; esac
        k=$((L % 2 * 40))
        if ! ./sample "$RUN" --prompt "$p" --length $L --temperature $t --top_k $k --seed $L >"$T/out" 2>"$T/err"; then
            bad="$bad L$L/t$t(exit $?)"
            continue
        fi
        runs=$((runs + 1))
        n=$(($(wc -c <"$T/out") - $(printf '%s' "$p" | wc -c) - 1)) # the bytes after the prompt
        if ! utf8_ok "$T/out"; then bad="$bad L$L/t$t(invalid)"; fi
        if [ "$n" -gt "$L" ] || [ "$n" -lt $((L - 3)) ]; then bad="$bad L$L/t$t($n bytes)"; fi
        if [ "$n" -lt "$L" ]; then short=$((short + 1)); fi
    done
done
if [ -z "$bad" ] && [ "$short" -gt 0 ]; then
    pass "./sample: valid UTF-8 and at most the length in $runs runs ($short cut before a character)"
else
    fail "./sample: valid UTF-8 and at most the length" "${bad:-no sample ended short of its length}"
fi

# Raw bytes (--utf8 off): the same model gives invalid UTF-8 (so the
# restriction is what makes the text valid), at most the length, and never
# ends in a character the length cut off.
invalid=0
bad=""
for L in $(seq 1 40); do
    ./sample "$RUN" --utf8 off --prompt "" --length $L --temperature 2.0 --seed $L >"$T/out" 2>"$T/err" ||
        bad="$bad L$L(exit $?)"
    head -c -1 "$T/out" >"$T/text" # without the final newline
    if ! utf8_ok "$T/text"; then invalid=$((invalid + 1)); fi
    if ! utf8_scan tail "$T/text"; then bad="$bad L$L(cut)"; fi
    if [ "$(wc -c <"$T/text")" -gt "$L" ]; then bad="$bad L$L(long)"; fi
done
if [ -z "$bad" ] && [ "$invalid" -ge 10 ]; then
    pass "--utf8 off: raw bytes ($invalid of 40 not UTF-8), never cut inside a character"
else
    fail "--utf8 off" "${bad:-only $invalid of 40 not UTF-8}"
fi

# The same seed gives the same bytes; --count C samples C texts, sample i with
# seed S + i - 1, each after a header line.
./sample "$RUN" --length 200 --seed 11 --temperature 1.5 >"$T/a" 2>/dev/null
./sample "$RUN" --length 200 --seed 11 --temperature 1.5 >"$T/b" 2>/dev/null
./sample "$RUN" --length 200 --seed 12 --temperature 1.5 >"$T/c" 2>/dev/null
if cmp -s "$T/a" "$T/b" && ! cmp -s "$T/a" "$T/c" && [ -s "$T/a" ]; then
    pass "--seed: the same seed gives the same bytes, another seed others"
else
    fail "--seed" "not reproducible, or seed ignored"
fi
./sample "$RUN" --length 200 --seed 10 --temperature 1.5 --count 3 >"$T/n" 2>/dev/null
{
    echo "--- sample 1 of 3 (seed 10) ---"
    ./sample "$RUN" --length 200 --seed 10 --temperature 1.5 2>/dev/null
    echo "--- sample 2 of 3 (seed 11) ---"
    cat "$T/a"
    echo "--- sample 3 of 3 (seed 12) ---"
    cat "$T/c"
} >"$T/want"
if cmp -s "$T/n" "$T/want" && utf8_ok "$T/n"; then
    pass "--count 3: three samples under header lines, sample i with seed S + i - 1"
else
    fail "--count 3" "$(diff "$T/n" "$T/want" | head -n 3)"
fi

# A prompt longer than the context (32) is continued; the model sees its end.
long="这是一个很长的提示，比模型的上下文长得多。这是一个很长的提示，比模型的上下文长得多。"
nlong=$(printf '%s' "$long" | wc -c)
if ./sample "$RUN" --prompt "$long" --length 30 >"$T/out" 2>"$T/err" && [ "$(head -c "$nlong" "$T/out")" = "$long" ] &&
    utf8_ok "$T/out"; then
    pass "a prompt of $nlong bytes, longer than the context"
else
    fail "a prompt longer than the context" "exit or output"
fi

# Streaming: the text is on stdout while the process still runs; Ctrl-C then
# stops it with 130, the output still valid UTF-8.
./sample "$RUN" --length 10000000 --prompt "" >"$T/stream" 2>"$T/err" &
BG=$!
i=0
while [ ! -s "$T/stream" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
alive=no
if kill -0 "$BG" 2>/dev/null; then alive=yes; fi
kill -INT "$BG"
wait "$BG"
rc=$?
BG=""
if [ -s "$T/stream" ] && [ $alive = yes ] && [ $rc = 130 ] && utf8_ok "$T/stream" && grep -q interrupted "$T/err"; then
    pass "streaming: text appears while it runs; SIGINT stops it (130), the output valid"
else
    fail "streaming and SIGINT" "stream $(wc -c <"$T/stream") bytes, alive $alive, exit $rc"
fi

# --help documents the length rule; --version.
if ./sample --help >"$T/out" 2>&1 && grep -q "never ends inside a UTF-8" "$T/out" && grep -q -- "--utf8 on|off" "$T/out" &&
    ./sample --version | grep -q '(./sample)'; then
    pass "--help states the length rule and the options; --version"
else
    fail "--help and --version" "missing"
fi

# -------------------------------------------------------------- MLM fill-in
./train $TINY --objective mlm --sample_length 64 --out "$T/mlm" "$T/zh.txt" >/dev/null 2>&1
cp "$T/zh.txt" "$T/gone.txt"
./train $TINY --objective mlm --steps 2 --out "$T/mlm_gone" "$T/gone.txt" >/dev/null 2>&1
rm -f "$T/gone.txt"
if ./sample "$T/mlm" "$T/zh.txt" --length 64 >"$T/out" 2>"$T/err" && head -n 1 "$T/out" | grep -q '^fill-in demo' &&
    [ "$(grep -c '^filled   | ' "$T/out")" = 2 ]; then
    pass "objective=mlm: the fill-in demo, ceil(64 / 32) = 2 windows"
else
    fail "objective=mlm: the fill-in demo" "exit or output"
fi
if ./sample "$T/mlm" >"$T/out2" 2>"$T/err" && cmp -s "$T/out" "$T/out2" && cmp -s "$T/out" "$T/mlm/samples.txt"; then
    pass "objective=mlm: the corpus the checkpoint names by default; the run's samples.txt"
else
    fail "objective=mlm: the corpus by default" "exit or output differs"
fi

# ---------------------------------------------------------------- bad input
printf 'not a checkpoint at all' >"$T/bogus.safetensors"
: >"$T/empty.safetensors"
mkdir "$T/adir"
head -c 3000 "$RUN/model.safetensors" >"$T/cut.safetensors"
mkfifo "$T/fifo.safetensors"
expect "no checkpoint" 2 "no run folder or checkpoint given" ./sample
expect "missing checkpoint" 1 "nothere: cannot open" ./sample "$T/nothere"
expect "folder without a checkpoint" 1 "model.safetensors: cannot open" ./sample "$T/adir"
expect "not a checkpoint" 1 "bogus.safetensors" ./sample "$T/bogus.safetensors"
expect "empty file" 1 "empty.safetensors" ./sample "$T/empty.safetensors"
expect "a corpus instead of a checkpoint" 1 "zh.txt" ./sample "$T/zh.txt"
expect "truncated checkpoint" 1 "cut.safetensors" ./sample "$T/cut.safetensors"
expect "a FIFO is refused, not waited on" 1 "fifo.safetensors" timeout 10 ./sample "$T/fifo.safetensors"
expect "--length 0" 2 "--length: expected an integer in [1, 10000000], got '0'" ./sample "$RUN" --length 0
expect "--length negative" 2 "--length: expected an integer" ./sample "$RUN" --length -5
expect "--length not a number" 2 "--length: expected an integer" ./sample "$RUN" --length ten
expect "--temperature negative" 2 "--temperature: expected a number in [0, 100], got '-1'" ./sample "$RUN" --temperature -1
expect "--temperature nan" 2 "--temperature: expected a number" ./sample "$RUN" --temperature nan
expect "--temperature inf" 2 "--temperature: expected a number" ./sample "$RUN" --temperature inf
expect "--top_k above 256" 2 "--top_k: expected an integer in [0, 256], got '257'" ./sample "$RUN" --top_k 257
expect "--top_k negative" 2 "--top_k: expected an integer" ./sample "$RUN" --top_k -1
expect "--count 0" 2 "--count: expected an integer in [1, 100000]" ./sample "$RUN" --count 0
expect "--seed negative" 2 "--seed: expected an integer" ./sample "$RUN" --seed -1
expect "--utf8 bad" 2 "--utf8: 'yes' is not one of: on, off" ./sample "$RUN" --utf8 yes
expect "--prompt without a value" 2 "--prompt: needs a text" ./sample "$RUN" --prompt
expect "misspelt option" 2 "unknown option '--lenght'" ./sample "$RUN" --lenght 5
if grep -q "did you mean --length?" "$T/err"; then pass "misspelt option: did you mean --length?"; else
    fail "misspelt option: did you mean" "no hint"; fi
expect "a training option" 2 "unknown option '--steps'" ./sample "$RUN" --steps 5
expect "too many arguments" 2 "too many arguments" ./sample "$RUN" "$T/zh.txt" extra
expect "a corpus for a causal LM" 2 "a corpus is only for the fill-in demo" ./sample "$RUN" "$T/zh.txt"
expect "a prompt that is not UTF-8" 2 "--prompt: not valid UTF-8 (from byte 2 of 3)" ./sample "$RUN" --prompt "$(printf 'a\344\270')"
if ./sample "$RUN" --utf8 off --prompt "$(printf 'a\344\270')" --length 5 >/dev/null 2>&1; then
    pass "--utf8 off takes a prompt that is not UTF-8"
else
    fail "--utf8 off takes a prompt that is not UTF-8" "exit $?"
fi
expect "mlm: --prompt" 2 "--prompt: " ./sample "$T/mlm" --prompt "x"
expect "mlm: --temperature" 2 "is a masked LM (objective=mlm), which is not sampled left to right" ./sample "$T/mlm" --temperature 1
expect "mlm: no corpus" 2 "the fill-in demo needs a corpus" ./sample "$T/mlm_gone"
expect "mlm: missing corpus" 1 "nothere.txt" ./sample "$T/mlm" "$T/nothere.txt"
# A failed write (a full disk) is a runtime error, after the start-up notes.
./sample "$RUN" --length 50 >/dev/full 2>"$T/err"
rc=$?
if [ $rc = 1 ] && [ "$(tail -n 1 "$T/err")" = "error: stdout: cannot write: No space left on device" ]; then
    pass "stdout full: exit 1, one error line"
else
    fail "stdout full" "exit $rc"
fi

cli_end
