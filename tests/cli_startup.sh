#!/bin/sh
# tests/cli_startup.sh: what every command says and sets when it starts.
#
# Run from the repository root after `make` (make check does both).
#   - Each command's start-up line names its threads and the OpenBLAS kernel
#     in use: the one OPENBLAS_CORETYPE names when it is set.
#   - The note about an AVX2 kernel on an AVX-512 CPU appears exactly when it
#     applies: the variable set to an AVX2 kernel on a CPU with AVX-512.
#   - The commands restart themselves with a bounded OpenMP spin
#     (GOMP_SPINCOUNT=1000) unless the user chose a wait policy.
# shellcheck disable=SC2086
set -u

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_startup ./train ./ablate ./spectrum ./extrapolate ./bench ./sample
BG=""
cleanup() {
    if [ -n "$BG" ]; then kill "$BG" 2>/dev/null; fi
}
small_corpus "$T/small.txt"

AVX512=no
if grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512dq /proc/cpuinfo &&
    grep -qw avx512vl /proc/cpuinfo; then
    AVX512=yes
fi
echo "cli_startup.sh: this CPU has AVX-512: $AVX512"

TINY="--layers 1 --d_model 32 --heads 2 --context 32 --batch 2 --threads 1"
# A run for spectrum and extrapolate to read.
if ! ./train $TINY --steps 2 --sample_length 0 --out "$T/run" "$T/small.txt" >"$T/out" 2>"$T/err"; then
    fail "a tiny run for the other commands" "exit $?"
fi

# run_command NAME: runs command NAME on tiny input, its stdout into $T/out
# (./sample's notes are on stderr, its stdout being the text: the two swapped).
run_command() {
    case $1 in
    train) ./train $TINY --steps 1 --sample_length 0 --out "$T/t$$" "$T/small.txt" ;;
    ablate) ./ablate phi=relu/elu $TINY --steps 1 --sample_length 0 --no-baseline --out "$T/a$$" "$T/small.txt" ;;
    spectrum) ./spectrum "$T/run" "$T/small.txt" --samples 1 --out "$T/s$$" ;;
    extrapolate) ./extrapolate "$T/run" "$T/small.txt" --lengths 32 --max_windows 1 --threads 1 --out "$T/e$$" ;;
    bench) ./bench --steps 1 $TINY ;;
    sample) ./sample "$T/run" --length 5 --prompt "" 3>&1 1>&2 2>&3 ;;
    esac >"$T/out" 2>"$T/err"
    rc=$?
    rm -rf "$T/t$$" "$T/a$$" "$T/s$$" "$T/e$$"
    return $rc
}

# check NAME CORETYPE: CORETYPE empty runs with the variable unset.
check() {
    name=$1 coretype=$2
    if [ -n "$coretype" ]; then
        OPENBLAS_CORETYPE=$coretype run_command "$name"
    else
        (unset OPENBLAS_CORETYPE && run_command "$name")
    fi
    rc=$?
    label="$name with OPENBLAS_CORETYPE ${coretype:-unset}"
    why=""
    [ "$rc" -eq 0 ] || why="exit $rc"
    line=$(grep -m 1 "thread.*(OpenMP; OpenBLAS kernel [A-Za-z0-9]*)" "$T/out")
    kernel=$(printf '%s\n' "$line" | sed -n 's/.*OpenBLAS kernel \([A-Za-z0-9]*\)).*/\1/p')
    if [ -z "$kernel" ]; then
        why="${why:+$why; }no start-up line naming the kernel"
    elif [ -n "$coretype" ] && [ "$kernel" != "$coretype" ]; then
        why="${why:+$why; }names kernel $kernel, want $coretype"
    fi
    want_note=no
    if [ "$AVX512" = yes ] && [ -n "$coretype" ]; then
        case $coretype in SkylakeX | Cooperlake | SapphireRapids) ;; *) want_note=yes ;; esac
    fi
    notes=$(grep -c "^note: OPENBLAS_CORETYPE=$coretype runs OpenBLAS's .* kernel (no AVX-512) on this AVX-512 CPU" "$T/out")
    if [ "$want_note" = yes ] && [ "$notes" -ne 1 ]; then why="${why:+$why; }no note about the AVX2 kernel"; fi
    if [ "$want_note" = no ] && grep -q "^note: OPENBLAS_CORETYPE" "$T/out"; then why="${why:+$why; }a note that does not apply"; fi
    if grep -q "^error\|^note\|^warning" "$T/err"; then why="${why:+$why; }a message on stderr"; fi
    if [ -z "$why" ]; then pass "$label: kernel $kernel, note $want_note"; else fail "$label" "$why"; fi
}

for name in train ablate spectrum extrapolate bench sample; do
    check "$name" ""
    check "$name" Haswell
done
if [ "$AVX512" = yes ]; then
    check train SkylakeX
fi

# The bounded spin: the environment a command runs with after its restart.
# env_of [VAR=value ...]: starts a long run with those settings and prints its
# environment, one variable a line.
env_of() {
    env "$@" ./train $TINY --steps 100000000 --eval_every 100000000 --save_every 100000000 --sample_length 0 \
        --out "$T/spin" "$T/small.txt" >/dev/null 2>&1 &
    BG=$!
    i=0
    while [ $i -lt 50 ] && ! grep -qa "ATTNLAB\|GOMP\|OMP_WAIT" "/proc/$BG/environ" 2>/dev/null; do
        sleep 0.1
        i=$((i + 1))
    done
    sleep 0.2
    tr '\0' '\n' <"/proc/$BG/environ"
    kill "$BG" 2>/dev/null
    wait "$BG" 2>/dev/null
    BG=""
    rm -rf "$T/spin"
}
env_of -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY >"$T/env"
if grep -qx "GOMP_SPINCOUNT=1000" "$T/env" && grep -q "^ATTNLAB_SET_ENV=.*GOMP_SPINCOUNT" "$T/env"; then
    pass "restarts with GOMP_SPINCOUNT=1000"
else
    fail "restarts with GOMP_SPINCOUNT=1000" "not in its environment"
fi
env_of -u GOMP_SPINCOUNT OMP_WAIT_POLICY=active >"$T/env"
if grep -qx "OMP_WAIT_POLICY=active" "$T/env" && ! grep -q "^GOMP_SPINCOUNT=" "$T/env"; then
    pass "a user's OMP_WAIT_POLICY is kept, no spin count added"
else
    fail "a user's OMP_WAIT_POLICY is kept" "environment changed"
fi
env_of GOMP_SPINCOUNT=5 >"$T/env"
if grep -qx "GOMP_SPINCOUNT=5" "$T/env"; then
    pass "a user's GOMP_SPINCOUNT is kept"
else
    fail "a user's GOMP_SPINCOUNT is kept" "environment changed"
fi

cli_end
