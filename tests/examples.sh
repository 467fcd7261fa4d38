#!/bin/sh
# tests/examples.sh: the engine as a library. `make install` into a temporary
# prefix; each program of examples/ built against the installed library alone,
# through `pkg-config --cflags --libs attnlab` (no include path into the
# tree), and run: custom_layer (an op of its own, gradient-checked, in a
# small trained model) and custom_kernel (an attention kernel registered from
# outside, gradient-checked, a model trained with it). Each must fail with
# --wrong-backward (its backward 10% off), so that its check can fail. One is
# linked against the static library too (pkg-config --static).
# Run from the repository root.
cd "$(dirname "$0")/.." || exit 1
. tests/cli_lib.sh
cli_begin examples

if ! make -s --no-print-directory install PREFIX="$T/prefix" >"$T/install.log" 2>&1; then
    cat "$T/install.log"
    fail "make install PREFIX=..." "exit non-zero"
    cli_end
    exit
fi
pass "make install PREFIX=... (library, headers, attnlab.pc)"
for f in lib/libattnlab.a lib/libattnlab.so lib/libattnlab.so.0 lib/pkgconfig/attnlab.pc include/attnlab/model.h \
    include/attnlab/kernel.h; do
    [ -e "$T/prefix/$f" ] || fail "make install writes $f" "missing"
done
export PKG_CONFIG_PATH="$T/prefix/lib/pkgconfig"
CFLAGS_EX="-std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror"
for ex in custom_layer custom_kernel; do
    # a copy outside the tree: nothing but the installed headers to find
    cp "examples/$ex.c" "$T/$ex.c"
    # shellcheck disable=SC2046,SC2086 # pkg-config's words
    if ! ${CC:-cc} $CFLAGS_EX "$T/$ex.c" $(pkg-config --cflags --libs attnlab) -Wl,-rpath,"$T/prefix/lib" \
        -o "$T/$ex" 2>"$T/err"; then
        cat "$T/err"
        fail "$ex builds against the installed library" "compile or link failed"
        continue
    fi
    if "$T/$ex" >"$T/out" 2>&1 && grep -q '^gradcheck .*: ok' "$T/out" && grep -q ': ok$' "$T/out"; then
        pass "$ex: gradient checked, trained ($(tail -n 1 "$T/out" | sed 's/:[^:]*$//'))"
    else
        cat "$T/out"
        fail "$ex runs" "exit non-zero or a check failed"
    fi
    if "$T/$ex" --wrong-backward >"$T/out" 2>&1; then
        fail "$ex --wrong-backward fails its gradient check" "it passed"
    elif grep -q '^gradcheck .*: FAILED' "$T/out"; then
        pass "$ex --wrong-backward fails its gradient check"
    else
        cat "$T/out"
        fail "$ex --wrong-backward fails its gradient check" "it failed otherwise"
    fi
done
# shellcheck disable=SC2046,SC2086
if ${CC:-cc} $CFLAGS_EX "$T/custom_layer.c" -static-libgcc $(pkg-config --cflags attnlab) "$T/prefix/lib/libattnlab.a" \
    $(pkg-config --static --libs attnlab | sed 's/-lattnlab//') -o "$T/custom_layer_static" 2>"$T/err" &&
    "$T/custom_layer_static" >"$T/out" 2>&1 && ! ldd "$T/custom_layer_static" | grep -q libattnlab; then
    pass "custom_layer linked against libattnlab.a runs"
else
    cat "$T/err" "$T/out"
    fail "custom_layer linked against libattnlab.a runs" "failed"
fi
cli_end
