#!/bin/sh
# A grid's runs in one archive: results/GRID/runs.tar.xz holds every run's record
# (config.json, metrics.jsonl, result.json, and ./spectrum's per-run outputs), so
# the repository keeps a handful of files per grid instead of three per run.
#
# usage: sh scripts/results.sh pack GRID...    fold GRID's finished runs into GRID/runs.tar.xz
#        sh scripts/results.sh unpack GRID...  restore them as GRID/<run>/ folders
#        sh scripts/results.sh paired GRID/POINT_A GRID/POINT_B [X]
#                                             B - A over the seeds they share, by the verdict
#                                             rule of EXPERIMENTS.md
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
#   the run folders when it has none); the two may be in different grids. Per seed,
#   the final val bpb (the last val_bpb of metrics.jsonl) of both and B - A; a run
#   still on the byte plateau is listed apart and its seed not counted: its last
#   val bpb above 3.3 (causal) or 3.9 (masked LM), or first below that only in the
#   last quarter of its steps. Then the mean difference, its sd, the paired 95% t
#   interval, and the verdict: B - A excludes 0 (and which way), no effect larger
#   than the interval's largest bound when that is at most X (default 0.02 bpb),
#   or inconclusive with the seed pairs that would resolve the mean seen at 95%
#   with 80% power.
#
# Every write goes to a temporary file renamed into place, so an interrupted
# command leaves either the old archive or the new one. Errors are one line,
# `error: <what>: <why>`, and a non-zero exit.
set -eu

ARCHIVE=runs.tar.xz
# A run's record: what pack archives. Anything else in a run folder stays there.
RECORD="config.json metrics.jsonl result.json spectrum.csv spectrum.png singular-values.png heatmap.png"

die() {
    echo "error: $1" >&2
    [ -z "${2:-}" ] || echo "hint: $2" >&2
    exit 1
}

usage() {
    echo "usage: sh scripts/results.sh pack|unpack results/GRID..." >&2
    echo "  pack    fold the grid's finished run folders into results/GRID/$ARCHIVE" >&2
    echo "  unpack  restore them as results/GRID/<run>/ (to resume, re-plot or re-analyse)" >&2
    echo "  paired  results/GRID/POINT_A results/GRID/POINT_B [X]: B - A over shared seeds" >&2
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
        case " $RECORD " in *" $(basename "$f") "*) ;; *) return 1 ;; esac
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
            for f in $RECORD; do rm -f "$grid/$run/$f"; done
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

# The runs of the arm $1 (GRID/POINT), one line each: "seed final objective steps left",
# left being the first evaluated step below the plateau level (0 if none).
arm_runs() {
    grid=$(dirname "$1") point=$(basename "$1")
    [ -d "$grid" ] || die "$grid: no such grid folder"
    from=$grid
    if [ -f "$grid/$ARCHIVE" ]; then
        from="$work/$(echo "$grid" | tr / _)"
        [ -d "$from" ] || extract "$grid" "$from"
    fi
    found=0
    for d in "$from/$point"_seed-*/; do
        [ -f "$d/metrics.jsonl" ] || continue
        seed=${d%/}
        seed=${seed##*_seed-}
        case "$seed" in *[!0-9]* | '') continue ;; esac
        objective=$(sed -n 's/.*"objective":[[:space:]]*"\([a-z]*\)".*/\1/p' "$d/config.json")
        steps=$(sed -n 's/.*"steps":[[:space:]]*\([0-9]*\).*/\1/p' "$d/config.json")
        sed -n 's/.*"step": \([0-9]*\),.*"val_bpb": \([0-9][0-9.eE+-]*\),.*/\1 \2/p' "$d/metrics.jsonl" |
            awk -v seed="$seed" -v obj="$objective" -v steps="$steps" '
                BEGIN { level = obj == "mlm" ? 3.9 : 3.3 }
                { if (!left && $2 < level) left = $1; final = $2 }
                END { if (NR) printf "%s %s %s %s %d\n", seed, final, obj, steps, left }'
        found=1
    done
    [ "$found" -eq 1 ] || die "$1: no runs ($point""_seed-<n> in $grid or its $ARCHIVE)"
}

paired() {
    [ $# -ge 2 ] && [ $# -le 3 ] || usage
    x=${3:-0.02}
    case "$x" in '' | *[!0-9.]*) die "$x: X must be a number of bpb, such as 0.02" ;; esac
    work=$(mktemp -d)
    arm_runs "$1" >"$work/a"
    arm_runs "$2" >"$work/b"
    awk -v A="$1" -v B="$2" -v X="$x" '
        function plateau(f, steps, left) { return left == 0 || f > (o == "mlm" ? 3.9 : 3.3) || left > 0.75 * steps }
        function why(f, steps, left) {
            return left == 0 ? "never below the plateau level" : f > (o == "mlm" ? 3.9 : 3.3) ? "ends above the plateau level" : \
                   sprintf("below the plateau level only from step %d of %d", left, steps)
        }
        # t quantiles, 95% two-sided and 80% one-sided: exact to df 30, then Cornish-Fisher
        function tq(z, table, df,    t) {
            if (df <= 30) { split(table, t, " "); return t[df] }
            return z + (z^3 + z) / (4 * df) + (5 * z^5 + 16 * z^3 + 3 * z) / (96 * df^2)
        }
        function t975(df) { return tq(1.959964, T975, df) }
        function t80(df) { return tq(0.841621, T80, df) }
        BEGIN {
            T975 = "12.7062 4.3027 3.1824 2.7764 2.5706 2.4469 2.3646 2.3060 2.2622 2.2281 2.2010 2.1788 " \
                   "2.1604 2.1448 2.1314 2.1199 2.1098 2.1009 2.0930 2.0860 2.0796 2.0739 2.0687 2.0639 " \
                   "2.0595 2.0555 2.0518 2.0484 2.0452 2.0423"
            T80 = "1.3764 1.0607 0.9785 0.9410 0.9195 0.9057 0.8960 0.8889 0.8834 0.8791 0.8755 0.8726 " \
                  "0.8702 0.8681 0.8662 0.8647 0.8633 0.8620 0.8610 0.8600 0.8591 0.8583 0.8575 0.8569 " \
                  "0.8562 0.8557 0.8551 0.8546 0.8542 0.8538"
        }
        FILENAME ~ /\/a$/ { fa[$1] = $2; o = $3; pa[$1] = plateau($2, $4, $5); wa[$1] = why($2, $4, $5); next }
        { fb[$1] = $2; o = $3; pb[$1] = plateau($2, $4, $5); wb[$1] = why($2, $4, $5); seeds[++ns] = $1 }
        END {
            printf "B - A, final val bpb, by seed\n  A = %s\n  B = %s\n", A, B
            for (i = 1; i <= ns; i++) {
                s = seeds[i]
                if (!(s in fa)) continue
                d = fb[s] - fa[s]
                if (pa[s] || pb[s]) {
                    printf "  seed %s: A %.4f  B %.4f  B - A %+.4f  apart: %s\n", s, fa[s], fb[s], d,
                           (pa[s] ? "A " wa[s] : "") (pa[s] && pb[s] ? "; " : "") (pb[s] ? "B " wb[s] : "")
                    continue
                }
                printf "  seed %s: A %.4f  B %.4f  B - A %+.4f\n", s, fa[s], fb[s], d
                n++; sum += d; v[n] = d
            }
            if (n < 2) { printf "paired: %d seed pair(s) off the plateau, too few for an interval: inconclusive\n", n; exit 0 }
            m = sum / n
            for (i = 1; i <= n; i++) ss += (v[i] - m)^2
            sd = sqrt(ss / (n - 1)); h = t975(n - 1) * sd / sqrt(n); lo = m - h; hi = m + h
            printf "paired: n %d, mean %+.4f, sd %.4f, 95%% interval [%+.4f, %+.4f]\n", n, m, sd, lo, hi
            big = -lo > hi ? -lo : hi
            if (lo > 0) print "verdict: excludes 0, B > A"
            else if (hi < 0) print "verdict: excludes 0, B < A"
            else if (big <= X + 0) printf "verdict: no effect larger than %.4f bpb (X = %s)\n", big, X
            else {
                for (k = 2; k <= 1000; k++) if (sd == 0 || t975(k - 1) + t80(k - 1) <= sqrt(k) * (m < 0 ? -m : m) / sd) break
                printf "verdict: inconclusive; %s seed pairs would resolve %+.4f (95%%, 80%% power)\n", (k > 1000 ? "over 1000" : k), m
            }
        }' "$work/a" "$work/b"
    rm -rf "$work"
    work=
}

[ $# -ge 2 ] || usage
verb=$1
shift
case "$verb" in
    pack | unpack) ;;
    paired)
        command -v xz >/dev/null 2>&1 || die "xz: not found" "apt-get install xz-utils"
        paired "$@"
        exit 0
        ;;
    *) echo "error: $verb: not a verb of scripts/results.sh (pack, unpack or paired)" >&2; usage ;;
esac
command -v xz >/dev/null 2>&1 || die "xz: not found" "apt-get install xz-utils"
for grid in "$@"; do "$verb" "$grid"; done
