#!/bin/sh
# tests/layering.sh: the layering the build enforces (the Makefile's INC_<folder>). For every
# folder of sources and a header of every folder, an include of that header compiles when the
# folder may use it and fails when it may not: core/ sees core/ alone; data/ and optim/ core/
# and themselves; layers/ core/ and layers/; the rooms of experiments/ the engine and the
# rooms before them (run, outputs, training, analysis, bench); commands/ and the tests all.
# No source file includes by a relative path ("../"), which would walk around the rule.
# And the layout's limits: files of at most 700 lines, rooms of at most a third.
# Run from the repository root; exits 1 and lists what is wrong.
set -eu
cd "$(dirname "$0")/.."
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# A header of each folder, by the name its users include it by.
header() {
    case $1 in
        core) echo tensor.h ;;
        data) echo corpus.h ;;
        optim) echo optim.h ;;
        layers) echo model.h ;;
        layers/attention) echo attention/kernel.h ;;
        run) echo run.h ;;
        outputs) echo plot.h ;;
        training) echo trainer.h ;;
        analysis) echo grid.h ;;
        bench) echo bench.h ;;
    esac
}
ALL="core data optim layers layers/attention run outputs training analysis bench"
ENGINE="core data optim layers layers/attention"
# What each folder may include.
allowed() {
    case $1 in
        core) echo core ;;
        data) echo core data ;;
        optim) echo core optim ;;
        layers | layers/attention) echo core layers layers/attention ;;
        experiments/run) echo $ENGINE run ;;
        experiments/outputs) echo $ENGINE run outputs ;;
        experiments/training) echo $ENGINE run outputs training ;;
        experiments/analysis) echo $ENGINE run outputs training analysis ;;
        experiments/bench) echo $ENGINE run outputs training analysis bench ;;
        experiments/commands | tests) echo $ALL ;;
    esac
}

bad=0
checked=0
for dir in core data optim layers layers/attention experiments/run experiments/outputs \
    experiments/training experiments/analysis experiments/bench experiments/commands tests; do
    cc=$(make -s --no-print-directory layering-flags DIR="$dir")
    ok=$(allowed "$dir")
    for to in $ALL; do
        h=$(header "$to")
        printf '#include "%s"\n' "$h" >"$T/probe.c"
        checked=$((checked + 1))
        case " $ok " in *" $to "*) want=compiles ;; *) want=fails ;; esac
        # shellcheck disable=SC2086 # the flags are words
        if $cc -fsyntax-only "$T/probe.c" 2>"$T/err"; then got=compiles; else got=fails; fi
        if [ "$got" != "$want" ]; then
            echo "layering: $dir including $h $got, but should $(echo "$want" | sed 's/s$//')"
            [ "$got" = fails ] && sed -n 1,3p "$T/err"
            bad=$((bad + 1))
        fi
    done
done
# shellcheck disable=SC2046
if up=$(grep -n '#include "\.\./' $(find core data optim layers experiments -name '*.[ch]')); then
    echo "layering: an include by a relative path:"
    echo "$up"
    bad=$((bad + 1))
fi
# The layout's limits: no source file over 700 lines (outside tests/ and python/, whose
# loader is split on its own), and no room of experiments/ over a third of its lines.
# shellcheck disable=SC2046
long=$(wc -l $(git ls-files '*.c' '*.h' '*.js' '*.sh' '*.mk' '*.py' | grep -v '^tests/\|^python/') |
    awk '$2 != "total" && $1 > 700 { print "  " $2 " " $1 }')
if [ -n "$long" ]; then
    echo "layering: files over 700 lines (split them by concern):"
    echo "$long"
    bad=$((bad + 1))
fi
all=$(git ls-files 'experiments/*/*' | xargs cat | wc -l)
for room in experiments/*/; do
    n=$(git ls-files "$room" | xargs cat | wc -l)
    if [ $((3 * n)) -gt "$all" ]; then
        echo "layering: $room holds $n of experiments/' $all lines, more than a third"
        bad=$((bad + 1))
    fi
done
if [ "$bad" -ne 0 ]; then
    echo "layering: $bad wrong ($checked folder-header pairs checked)"
    exit 1
fi
echo "layering: $checked folder-header pairs, each compiles exactly where the layering allows it;"
echo "layering: no file over 700 lines, no room of experiments/ over a third of its $all lines"
