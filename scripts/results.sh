#!/bin/sh
# A grid's runs in one archive: results/GRID/runs.tar.xz holds every run's record
# (config.json, metrics.jsonl, result.json, and ./spectrum's per-run outputs), so
# the repository keeps a handful of files per grid instead of three per run.
#
# usage: sh scripts/results.sh pack GRID...    fold GRID's finished runs into GRID/runs.tar.xz
#        sh scripts/results.sh unpack GRID...  restore them as GRID/<run>/ folders
#        sh scripts/results.sh seed-from SRC DST PREFIX[=NEW]...
#                                             copy SRC's archived runs whose names start
#                                             with a PREFIX into the grid DST (a later round
#                                             of the same points adds seeds, not retrains),
#                                             the prefix replaced by NEW when given (a point
#                                             named by fewer axes in DST)
#        sh scripts/results.sh paired GRID/POINT_A GRID/POINT_B [X]
#                                             B - A over the seeds they share, by the verdict
#                                             rule of EXPERIMENTS.md (PLAN=3,6,12 in the
#                                             environment: under that seed plan, --plan)
#        sh scripts/results.sh spectrum-paired GRID/POINT_A GRID/POINT_B [X [K]]
#                                             per layer B - A of c(T/4) and k 90% of their
#                                             spectrum.csv, over the seeds they share
#
# pack: the archive's runs plus every finished run folder of GRID (one with a
#   result.json; a folder's copy replaces the archive's), written as a
#   deterministic tar (names sorted, mtime 0, owner 0, mode 0644) compressed
#   with single-threaded xz, so packing the same runs again gives the same
#   bytes. Then each packed run folder that holds nothing but its record is
#   removed; one that also holds a checkpoint (model.safetensors, loss.png) stays
#   whole, usable, and ignored by git. Unfinished runs (no result.json) are left
#   as they are: ./ablate resumes them from their checkpoints.
# unpack: every archived run back as GRID/<run>/, so `./ablate ... --out GRID`
#   skips the finished runs and rewrites the tables, and ./spectrum or a re-plot
#   can read them. A file already in place is kept if it is the archive's copy;
#   if it differs (a newer run) nothing is written: pack first, or remove it.
#
# paired: each arm is a point's runs, GRID/POINT_seed-<n> (from GRID's archive, or
#   the run folders when it has none); the two may be in different grids. It runs
#   `./ablate --paired A B --within X` on them, which prints per seed the final val
#   bpb (the last val_bpb of metrics.jsonl, unrounded from result.json when there
#   is one, as in the grid's tables) of both and B - A; a run still on the
#   byte plateau is listed apart and its seed not counted: its last val bpb above
#   3.3 (causal) or 3.9 (masked LM), or first below that only in the last quarter
#   of its steps. Then the mean difference, its sd, the paired 95% t interval, and
#   the verdict: B - A excludes 0 (and which way), no effect larger than the
#   interval's largest bound when that is at most X (default 0.02 bpb), or
#   inconclusive with the seed pairs that would resolve the mean seen at 95% with
#   80% power. ./ablate's tables (and its --expect verdicts) use the same code.
#
# spectrum-paired: the arms as for paired, each run folder holding ./spectrum's
#   spectrum.csv; it runs `./spectrum --paired A B --within X --within_k K` (X for
#   c(T/4), default 0.02; K for the k reaching 90%, default 2), which prints per
#   layer B - A seed by seed, the paired interval and the verdict; a run on the
#   plateau is set apart with its pair unless it trained at learning rate 0 (an
#   initialisation, the arm a trained model is compared with).
#
# Every write goes to a temporary file renamed into place, so an interrupted
# command leaves either the old archive or the new one. Errors are one line,
# `error: <what>: <why>`, and a non-zero exit.
set -eu

ARCHIVE=runs.tar.xz
# A run's record: what pack archives. Anything else in a run folder stays there.
RECORD="config.json metrics.jsonl result.json provenance.json spectrum.csv spectrum.png singular-values.png heatmap.png"
# Made from the record, so neither archived nor a reason to keep a folder: the run's page
# (./report writes it again from the unpacked record).
DERIVED="index.html"

die() {
    echo "error: $1" >&2
    [ -z "${2:-}" ] || echo "hint: $2" >&2
    exit 1
}

usage() {
    echo "usage: sh scripts/results.sh pack|unpack results/GRID..." >&2
    echo "  pack    fold the grid's finished run folders into results/GRID/$ARCHIVE" >&2
    echo "  unpack  restore them as results/GRID/<run>/ (to resume, re-plot or re-analyse)" >&2
    echo "  seed-from SRC DST PREFIX[=NEW]...: copy SRC's archived runs named PREFIX... into DST" >&2
    echo "  paired  results/GRID/POINT_A results/GRID/POINT_B [X]: B - A over shared seeds" >&2
    echo "  spectrum-paired results/GRID/POINT_A results/GRID/POINT_B [X [K]]: the same for spectrum.csv" >&2
    exit 2
}

work=
part=
cleanup() {
    [ -z "$work" ] || rm -rf "$work"
    [ -z "$part" ] || rm -f "$part"
}
trap cleanup EXIT
trap 'cleanup; exit 1' HUP INT TERM

# The run folders directly under $1 (those with a config.json), one name a line, sorted.
run_folders() {
    for d in "$1"/*/; do
        [ -f "$d/config.json" ] && basename "$d"
    done | LC_ALL=C sort
}

finished() { [ -f "$1/result.json" ] && grep -q '"status"' "$1/result.json"; }

# Whether the run folder $1 holds nothing but record files.
only_record() {
    for f in "$1"/* "$1"/.[!.]*; do
        [ -e "$f" ] || continue
        case " $RECORD $DERIVED " in *" $(basename "$f") "*) ;; *) return 1 ;; esac
    done
}

# Extracts $1's archive into the folder $2 (made empty).
extract() {
    mkdir -p "$2"
    xz -dc "$1/$ARCHIVE" 2>/dev/null | tar -x -C "$2" -f - 2>/dev/null ||
        die "$1/$ARCHIVE: cannot be read (not an xz-compressed tar, or cut short)" \
            "restore it with git checkout -- $1/$ARCHIVE"
}

pack() {
    grid=${1%/}
    [ -d "$grid" ] || die "$grid: no such grid folder"
    work=$(mktemp -d)
    mkdir "$work/runs"
    had=0
    if [ -e "$grid/$ARCHIVE" ]; then
        extract "$grid" "$work/runs"
        had=$(ls "$work/runs" | wc -l)
    fi
    packed=0 left=
    for run in $(run_folders "$grid"); do
        if ! finished "$grid/$run"; then
            left="$left $run"
            continue
        fi
        rm -rf "${work:?}/runs/$run"
        mkdir "$work/runs/$run"
        for f in $RECORD; do
            [ ! -f "$grid/$run/$f" ] || cp "$grid/$run/$f" "$work/runs/$run/$f"
        done
        packed=$((packed + 1))
    done
    total=$(ls "$work/runs" | wc -l)
    [ "$total" -gt 0 ] || die "$grid: no finished runs to pack (no run folder has a result.json, and no $ARCHIVE)"

    part="$grid/.$ARCHIVE.$$.tmp"
    (cd "$work/runs" && find . -type f | sed 's|^\./||' | LC_ALL=C sort >../list)
    (cd "$work/runs" && tar -c -f ../runs.tar --format=gnu --no-recursion --mtime='1970-01-01 00:00:00 UTC' \
        --owner=0 --group=0 --numeric-owner --mode=0644 -T ../list) &&
        xz -6 -T1 -c "$work/runs.tar" >"$part" || die "$grid/$ARCHIVE: cannot be written" "is the disk full?"
    if [ -e "$grid/$ARCHIVE" ] && cmp -s "$part" "$grid/$ARCHIVE"; then
        rm -f "$part"
        state="unchanged"
    else
        mv "$part" "$grid/$ARCHIVE"
        state="written"
    fi
    part=

    # The archive holds them now: remove each packed folder that held nothing else. One
    # that also holds a checkpoint (or loss.png, samples) stays whole, so that its model
    # can still be used and ./ablate still sees a finished run; git ignores it.
    kept=0
    for run in $(run_folders "$grid"); do
        finished "$grid/$run" || continue
        if only_record "$grid/$run"; then
            for f in $RECORD $DERIVED; do rm -f "$grid/$run/$f"; done
            rmdir "$grid/$run"
        else
            kept=$((kept + 1))
        fi
    done
    echo "$grid/$ARCHIVE: $state, $total runs ($packed from run folders, $had were archived)"
    [ "$kept" -eq 0 ] || echo "  kept $kept run folders that also hold checkpoints or other files (ignored by git;" \
        "rm -r them when their models are no longer needed)"
    [ -z "$left" ] || echo "  left unfinished runs in place:$left"
    rm -rf "$work"
    work=
}

unpack() {
    grid=${1%/}
    [ -d "$grid" ] || die "$grid: no such grid folder"
    [ -f "$grid/$ARCHIVE" ] || die "$grid/$ARCHIVE: no such archive" "sh scripts/results.sh pack $grid makes one"
    work=$(mktemp -d)
    extract "$grid" "$work/runs"
    (cd "$work/runs" && find . -type f | sed 's|^\./||' | LC_ALL=C sort >../list)
    # First every conflict, so that nothing is written when there is one.
    clash=
    while IFS= read -r f; do
        if [ -e "$grid/$f" ] && ! cmp -s "$grid/$f" "$work/runs/$f"; then clash="$clash $grid/$f"; fi
    done <"$work/list"
    [ -z "$clash" ] || die "$grid: these files differ from the archive's copies:$clash" \
        "pack them first (sh scripts/results.sh pack $grid), or remove them to take the archive's"
    n=0
    while IFS= read -r f; do
        [ -e "$grid/$f" ] && continue
        mkdir -p "$grid/$(dirname "$f")"
        part="$grid/$f.$$.tmp"
        cp "$work/runs/$f" "$part" && mv "$part" "$grid/$f"
        part=
        n=$((n + 1))
    done <"$work/list"
    echo "$grid: unpacked $(ls "$work/runs" | wc -l) runs ($n files written, the others were in place)"
    rm -rf "$work"
    work=
}

# seed-from: runs of an earlier grid that a later round shares (same options, same
# seeds) become run folders of the new grid, so that ./ablate skips them. A run
# already in DST (a folder, or in DST's archive) is left alone.
seed_from() {
    [ $# -ge 3 ] || usage
    src=${1%/} dst=${2%/}
    shift 2
    [ -f "$src/$ARCHIVE" ] || die "$src/$ARCHIVE: no such archive"
    work=$(mktemp -d)
    extract "$src" "$work/runs"
    [ ! -f "$dst/$ARCHIVE" ] || extract "$dst" "$work/have"
    mkdir -p "$dst"
    n=0
    for run in $(run_folders "$work/runs"); do
        name=
        for prefix in "$@"; do
            from=${prefix%%=*} to=${prefix#*=}
            [ "$to" != "$prefix" ] || to=$from
            case "$run" in "$from"*) name="$to${run#"$from"}" ;; esac
        done
        [ -n "$name" ] && [ ! -e "$dst/$name" ] && [ ! -e "$work/have/$name" ] || continue
        cp -r "$work/runs/$run" "$dst/.$name.$$.tmp" && mv "$dst/.$name.$$.tmp" "$dst/$name"
        n=$((n + 1))
    done
    echo "$dst: $n runs copied from $src"
    rm -rf "$work"
    work=
}

# An arm's folder to read: GRID/POINT itself when GRID has no archive, else the
# same point in GRID's archive, extracted once under $work.
arm_folder() {
    grid=$(dirname "$1") point=$(basename "$1")
    [ -d "$grid" ] || die "$grid: no such grid folder"
    if [ -f "$grid/$ARCHIVE" ]; then
        from="$work/$(echo "$grid" | tr / _)"
        [ -d "$from" ] || extract "$grid" "$from"
        echo "$from/$point"
    else
        echo "$1"
    fi
}

# The statistics and the verdict rule are ./ablate's (--paired), the same code
# that writes the grids' tables; this verb only finds the runs.
paired() {
    [ $# -ge 2 ] && [ $# -le 3 ] || usage
    x=${3:-0.02}
    case "$x" in '' | *[!0-9.]*) die "$x: X must be a number of bpb, such as 0.02" ;; esac
    ablate=$(dirname "$0")/../ablate
    [ -x "$ablate" ] || die "$ablate: not built" "make builds it"
    work=$(mktemp -d)
    a=$(arm_folder "$1")
    b=$(arm_folder "$2")
    # the output names the arms as given, not the extracted copies; PLAN=3,6,12 the seed plan
    "$ablate" --paired "$a" "$b" --within "$x" ${PLAN:+--plan "$PLAN"} >"$work/out" || exit 1
    sed "s|^  A = .*|  A = $1|; s|^  B = .*|  B = $2|" "$work/out"
    rm -rf "$work"
    work=
}

# spectrum-paired: the same for the runs' spectra; the statistics are ./spectrum's
# (--paired), the code that computes its per-layer table.
spectrum_paired() {
    [ $# -ge 2 ] && [ $# -le 4 ] || usage
    x=${3:-0.02} k=${4:-2}
    for v in "$x" "$k"; do
        case "$v" in '' | *[!0-9.]*) die "$v: X and K must be positive numbers, such as 0.02 and 2" ;; esac
    done
    spectrum=$(dirname "$0")/../spectrum
    [ -x "$spectrum" ] || die "$spectrum: not built" "make builds it"
    work=$(mktemp -d)
    a=$(arm_folder "$1")
    b=$(arm_folder "$2")
    "$spectrum" --paired "$a" "$b" --within "$x" --within_k "$k" >"$work/out" || exit 1
    sed "s|^  A = .*|  A = $1|; s|^  B = .*|  B = $2|" "$work/out"
    rm -rf "$work"
    work=
}

[ $# -ge 2 ] || usage
verb=$1
shift
case "$verb" in
    pack | unpack) ;;
    seed-from)
        command -v xz >/dev/null 2>&1 || die "xz: not found" "apt-get install xz-utils"
        seed_from "$@"
        exit 0
        ;;
    paired)
        command -v xz >/dev/null 2>&1 || die "xz: not found" "apt-get install xz-utils"
        paired "$@"
        exit 0
        ;;
    spectrum-paired)
        command -v xz >/dev/null 2>&1 || die "xz: not found" "apt-get install xz-utils"
        spectrum_paired "$@"
        exit 0
        ;;
    *)
        echo "error: $verb: not a verb of scripts/results.sh (pack, unpack, seed-from, paired or spectrum-paired)" >&2
        usage
        ;;
esac
command -v xz >/dev/null 2>&1 || die "xz: not found" "apt-get install xz-utils"
for grid in "$@"; do "$verb" "$grid"; done
