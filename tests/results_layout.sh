#!/bin/sh
# tests/results_layout.sh: every grid folder results/<grid>/ keeps at most 10 files (what
# EXPERIMENTS.md cites and what checks it), among them runs.tar.xz, the grid's run records
# (scripts/results.sh); and the archive reproduces the grid's tables:
#  - results.csv: each run's final_val_bpb is the last val_bpb of its archived metrics.jsonl;
#  - summary.csv: each point's runs, mean and sd are those of its archived finished runs
#    (the folders <point>_seed-<n>, result.json status "done"), to the printed precision.
# A ladder folder's ladder.csv and a grid's saved outputs (paired-*.txt) are what their
# commands make again from the archives. Then it shows that it can fail: on a copy of one
# grid it removes the archive, changes a mean, a run's number, drops a run from the archive
# and adds files, and expects each to be caught; and that unpack then pack gives back the
# same archive, byte for byte.
# Run from the repository root; exits 1 and lists what is wrong.
set -eu
cd "$(dirname "$0")/.."

MAX_FILES=10
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'rm -rf "$tmp"; exit 1' HUP INT TERM

# The files of $1 that a commit would hold (tracked, or new and not ignored); outside a
# git work tree, every file under it.
grid_files() {
    if git -C "$1" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git ls-files -co --exclude-standard -- "$1"
    else
        find "$1" -type f
    fi
}

# One line per archived run in the folder $1: "folder status last_val_bpb".
run_table() {
    for d in "$1"/*/; do
        run=$(basename "$d")
        st=$(sed -n 's/.*"status":[[:space:]]*"\([a-z]*\)".*/\1/p' "$d/result.json" 2>/dev/null | head -1)
        bpb=$(grep '"val_bpb": [0-9]' "$d/metrics.jsonl" 2>/dev/null | tail -1 |
            sed 's/.*"val_bpb": \([0-9.eE+-]*\).*/\1/')
        echo "$run ${st:-none} ${bpb:-none}"
    done
}

# Checks the grid folder $1; prints what is wrong, returns 1 if anything is.
check_grid() {
    g=${1%/}
    bad=0
    n=$(grid_files "$g" | wc -l)
    if [ "$n" -gt "$MAX_FILES" ]; then
        echo "results_layout: $g: $n files, more than $MAX_FILES (pack its runs: sh scripts/results.sh pack $g)"
        bad=1
    fi
    if grid_files "$g" | grep -q '/\.lock$'; then
        echo "results_layout: $g: .lock, a grid command's lock file, would be committed (.gitignore)"
        bad=1
    fi
    if [ ! -f "$g/runs.tar.xz" ]; then
        echo "results_layout: $g: no runs.tar.xz (sh scripts/results.sh pack $g makes it)"
        return 1
    fi
    x="$tmp/x"
    rm -rf "$x"
    mkdir "$x"
    if ! xz -dc "$g/runs.tar.xz" | tar -x -C "$x" -f -; then
        echo "results_layout: $g/runs.tar.xz: cannot be read"
        return 1
    fi
    run_table "$x" >"$tmp/runs"
    [ -f "$g/results.csv" ] || { echo "results_layout: $g: no results.csv"; return 1; }
    summary="$g/summary.csv"
    [ -f "$summary" ] || summary=/dev/null
    awk -v grid="$g" -v summary="$summary" '
        # A CSV line into f[1..n] (a field holding commas is quoted); head = f[1]; returns n.
        function parse(line, f,    n, q) {
            n = 0
            while (line != "") {
                if (substr(line, 1, 1) == "\"") {
                    q = index(substr(line, 2), "\"")
                    f[++n] = substr(line, 2, q - 1)
                    line = substr(line, q + 3)
                } else if ((q = index(line, ",")) > 0) {
                    f[++n] = substr(line, 1, q - 1)
                    line = substr(line, q + 1)
                } else {
                    f[++n] = line
                    line = ""
                }
            }
            head = f[1]
            return n
        }
        # grid.c folder_name: the run or point name as a folder
        function folder(name) {
            gsub(/=/, "-", name); gsub(/[, ]/, "_", name); gsub(/\//, "-", name); gsub(/:/, "+", name)
            return name
        }
        function abs(v) { return v < 0 ? -v : v }
        function fail(msg) { print "results_layout: " grid ": " msg; bad = 1 }
        FILENAME == "-" { status[$1] = $2; bpb[$1] = $3; next }
        FNR == 1 { n = parse($0, col); delete at; for (i = 1; i <= n; i++) at[col[i]] = i; next }
        FILENAME ~ /results\.csv$/ {
            parse($0, f)
            run = folder(head)
            if (!(run in status)) { fail("results.csv: " head ": not in runs.tar.xz"); next }
            if (f[at["status"]] != "done") next
            if (bpb[run] == "none" || abs(bpb[run] - f[at["final_val_bpb"]]) > 5e-7)
                fail("results.csv: " head ": final_val_bpb " f[at["final_val_bpb"]] \
                     ", the archived metrics.jsonl ends at " bpb[run])
            next
        }
        {   # summary.csv: a point, its runs <point>_seed-<n>
            parse($0, f)
            prefix = folder(head) "_seed-"
            k = 0; s = 0; ss = 0
            for (run in status)
                if (index(run, prefix) == 1 && substr(run, length(prefix) + 1) ~ /^[0-9]+$/ &&
                    status[run] == "done" && bpb[run] != "none") {
                    k++; s += bpb[run]; v[k] = bpb[run]
                }
            if (k != f[at["runs"]] + 0) { fail("summary.csv: " head ": " f[at["runs"]] " runs, the archive has " k); next }
            mean = s / k
            for (i = 1; i <= k; i++) ss += (v[i] - mean) ^ 2
            sd = k > 1 ? sqrt(ss / (k - 1)) : 0
            # metrics.jsonl and summary.csv print 6 decimals, each rounding at most 5e-7: the
            # mean is off by at most 1e-6, the sd by at most 5e-7 * sqrt(k / (k - 1)) + 5e-7
            if (abs(mean - f[at["mean"]]) > 1.01e-6)
                fail(sprintf("summary.csv: %s: mean %s, the archived runs give %.6f", head, f[at["mean"]], mean))
            if (k > 1 && f[at["sd"]] != "" && abs(sd - f[at["sd"]]) > 1.25e-6)
                fail(sprintf("summary.csv: %s: sd %s, the archived runs give %.6f", head, f[at["sd"]], sd))
            points++
        }
        END { exit bad }
    ' - "$g/results.csv" "$summary" <"$tmp/runs" || bad=1
    return $bad
}

# Runs the command $1 (./ablate or ./spectrum, as a ladder.md or a saved output names it)
# in $tmp/rerun, where each results/<grid> it names that has an archive is unpacked, its
# stdout into $tmp/rerun.out; fails as the command does (a grid with no archive is not
# there, so a command that needs one fails).
rerun_from_archives() {
    cmd=$1
    rm -rf "$tmp/rerun"
    mkdir -p "$tmp/rerun"
    for w in $cmd; do
        case "$w" in results/*) ;; *) continue ;; esac
        g=$(printf '%s\n' "$w" | cut -d/ -f1-2)
        [ -f "$g/runs.tar.xz" ] && [ ! -d "$tmp/rerun/$g" ] || continue
        mkdir -p "$tmp/rerun/$g"
        xz -dc "$g/runs.tar.xz" | tar -x -C "$tmp/rerun/$g" -f - || return 1
    done
    prog=${cmd%% *}
    root=$(pwd)
    (cd "$tmp/rerun" && eval "\"$root/${prog#./}\" ${cmd#"$prog"}" >"$tmp/rerun.out" 2>/dev/null)
}

# A ladder folder (./ablate --ladder, ./spectrum --ladder): its ladder.csv is what the
# command at the end of its ladder.md makes again from the rungs' archives.
check_ladder() {
    l=${1%/}
    cmd=$(sed -n 's/^command: //p' "$l/ladder.md" 2>/dev/null)
    [ -n "$cmd" ] || { echo "results_layout: $l: ladder.md names no command"; return 1; }
    rerun_from_archives "$cmd" || { echo "results_layout: $l: the command of its ladder.md failed"; return 1; }
    out=$(printf '%s\n' "$cmd" | sed 's/.*--out //')
    cmp -s "$tmp/rerun/$out/ladder.csv" "$l/ladder.csv" ||
        { echo "results_layout: $l: ladder.csv is not what its command makes from the archives"; return 1; }
}

# A saved output (paired-*.txt in a grid folder, e.g. ./spectrum --paired's per-layer table
# that EXPERIMENTS.md quotes): its last line is "command: CMD", and CMD, run again from the
# archives, prints the lines above it.
check_record() {
    f=$1
    cmd=$(sed -n 's/^command: //p' "$f")
    [ -n "$cmd" ] || { echo "results_layout: $f: names no command"; return 1; }
    rerun_from_archives "$cmd" || { echo "results_layout: $f: its command failed"; return 1; }
    grep -v '^command: ' "$f" | cmp -s - "$tmp/rerun.out" ||
        { echo "results_layout: $f: not what its command prints from the archives"; return 1; }
}

status=0
grids=0
ladders=0
records=0
for f in results/*/paired-*.txt; do
    [ -f "$f" ] || continue
    records=$((records + 1))
    check_record "$f" || status=1
done
for g in results/*/; do
    if [ -f "$g/ladder.md" ]; then
        ladders=$((ladders + 1))
        check_ladder "$g" || status=1
        continue
    fi
    grids=$((grids + 1))
    check_grid "$g" || status=1
done
[ "$grids" -gt 0 ] || { echo "results_layout: no grid folders under results/"; exit 1; }
[ "$status" -eq 0 ] || { echo "results_layout: FAILED"; exit 1; }
echo "results_layout: $grids grids, each at most $MAX_FILES files, its archive reproducing its tables; $ladders ladders, each remade from its rungs' archives; $records saved outputs, each printed again by its command"

# The checks above must be able to fail: each broken copy of one grid has to be caught.
grid=results/lowrank-equal
expect_caught() { # $1: what was broken, in the copy $tmp/g
    if check_grid "$tmp/g" >"$tmp/out"; then
        echo "results_layout: not caught: $1"
        exit 1
    fi
}
fresh() { rm -rf "$tmp/g"; cp -r "$grid" "$tmp/g"; }

fresh
check_grid "$tmp/g" >/dev/null || { echo "results_layout: a plain copy of $grid fails"; exit 1; }
rm "$tmp/g/runs.tar.xz"
expect_caught "the archive removed"
fresh
awk -F, 'NR == 2 { $4 = sprintf("%.6f", $4 + 0.0001) } 1' OFS=, "$grid/summary.csv" >"$tmp/s" && mv "$tmp/s" "$tmp/g/summary.csv"
expect_caught "a mean in summary.csv changed by 0.0001"
fresh
awk -F, 'NR == 3 { $5 = sprintf("%.6f", $5 + 0.000002) } 1' OFS=, "$grid/summary.csv" >"$tmp/s" && mv "$tmp/s" "$tmp/g/summary.csv"
expect_caught "an sd in summary.csv changed by 2e-6"
fresh
sed '2s/,2\.\([0-9]\)/,3.\1/' "$grid/results.csv" >"$tmp/g/results.csv"
expect_caught "a run's final_val_bpb in results.csv changed"
fresh
for i in 1 2 3 4 5 6; do echo x >"$tmp/g/extra$i.txt"; done
expect_caught "$((6 + $(ls "$grid" | wc -l))) files in a grid folder"

# unpack, then pack: the same bytes; drop a run and pack anew: caught
fresh
sh scripts/results.sh unpack "$tmp/g" >/dev/null
sh scripts/results.sh pack "$tmp/g" >/dev/null
cmp -s "$grid/runs.tar.xz" "$tmp/g/runs.tar.xz" || { echo "results_layout: unpack then pack changed $grid's archive"; exit 1; }
sh scripts/results.sh unpack "$tmp/g" >/dev/null
rm "$tmp/g/runs.tar.xz"
rm -r "$(ls -d "$tmp"/g/*_seed-* | head -1)"
sh scripts/results.sh pack "$tmp/g" >/dev/null
expect_caught "a run left out of the archive"
# a ladder whose ladder.csv was edited, or whose command names a rung with no archive
lad=$(ls -d results/*/ladder.md 2>/dev/null | head -1)
if [ -n "$lad" ]; then
    ldir=$(dirname "$lad")
    rm -rf "$tmp/l" && cp -r "$ldir" "$tmp/l"
    check_ladder "$tmp/l" >/dev/null || { echo "results_layout: a plain copy of $ldir fails"; exit 1; }
    awk -F, 'NR == 2 { $9 = sprintf("%.6f", $9 + 0.001) } 1' OFS=, "$ldir/ladder.csv" >"$tmp/l/ladder.csv"
    check_ladder "$tmp/l" >/dev/null && { echo "results_layout: not caught: an effect in ladder.csv changed"; exit 1; }
    cp "$ldir/ladder.csv" "$tmp/l/ladder.csv"
    sed 's|^command: ./ablate --ladder |command: ./ablate --ladder results/no-such-grid |' "$ldir/ladder.md" >"$tmp/l/ladder.md"
    check_ladder "$tmp/l" >/dev/null && { echo "results_layout: not caught: a ladder rung without its archive"; exit 1; }
fi
# a saved output with one number changed
rec=$(ls results/*/paired-*.txt 2>/dev/null | head -1)
if [ -n "$rec" ]; then
    mkdir -p "$tmp/r"
    check_record "$rec" >/dev/null || { echo "results_layout: $rec fails as it is"; exit 1; }
    sed '0,/[0-9]\.[0-9][0-9]*[1-8]/s//&9/' "$rec" >"$tmp/r/paired-x.txt"
    cmp -s "$rec" "$tmp/r/paired-x.txt" && { echo "results_layout: no number to change in $rec"; exit 1; }
    check_record "$tmp/r/paired-x.txt" >/dev/null && { echo "results_layout: not caught: a number in $rec changed"; exit 1; }
fi
echo "results_layout: a removed archive, changed numbers, a missing run and extra files are each caught"

# paired (./ablate --paired, the code of the grids' paired columns and verdicts), on
# hand-worked runs: seeds 1-3 of points a and b (final val bpb below), and a point c
# whose seed 3 never leaves the causal plateau (3.3 bpb). Each check fails under a
# plausible mistake: t replaced by z, the sd over n, the plateau rule (or its last
# quarter, or the masked level) left out.
mk() { # point seed final [earlier [objective]]: a run folder with two evaluations
    d="$tmp/h/$1_seed-$2"
    mkdir -p "$d"
    printf '{\n\t"objective":\t"%s",\n\t"steps":\t100\n}' "${5:-clm}" >"$d/config.json"
    printf '{"step": 50, "loss": 1, "val_loss": 1, "val_bpb": %s, "lr": 0}\n' "${4:-3.0}" >"$d/metrics.jsonl"
    printf '{"step": 100, "loss": 1, "val_loss": 1, "val_bpb": %s, "lr": 0}\n' "$3" >>"$d/metrics.jsonl"
}
expect_paired() { # a b X expected-line...
    a=$1 b=$2 x=$3
    shift 3
    out=$(sh scripts/results.sh paired "$tmp/h/$a" "$tmp/h/$b" "$x")
    for line in "$@"; do
        printf '%s\n' "$out" | grep -qxF -- "$line" ||
            { printf 'results_layout: paired %s %s: no line "%s" in:\n%s\n' "$a" "$b" "$line" "$out"; exit 1; }
    done
}
rm -rf "$tmp/h"
mk a 1 2.0; mk a 2 2.1; mk a 3 2.2
mk b 1 2.03; mk b 2 2.12; mk b 3 2.24       # b - a: 0.03 0.02 0.04
mk c 1 2.001; mk c 2 2.102; mk c 3 3.5 3.6  # c - a: 0.001 0.002, and seed 3 apart
mk e 1 2.01; mk e 2 2.09; mk e 3 2.23       # e - a: 0.01 -0.01 0.03
mk f 1 2.001; mk f 2 2.102; mk f 3 2.203    # f - a: 0.001 0.002 0.003
mk g 1 2.001; mk g 2 2.102; mk g 3 3.2 3.6  # seed 3 below 3.3 only at its last step: apart
mk m 1 3.50 3.0 mlm; mk m 2 3.60 3.0 mlm; mk m 3 3.70 3.0 mlm  # masked LMs: the level is 3.9
mk n 1 3.52 3.0 mlm; mk n 2 3.61 3.0 mlm; mk n 3 3.74 3.0 mlm  # n - m: 0.02 0.01 0.04
# mean 0.03, sd 0.01, t(0.975, 2) = 4.3027: 0.03 -+ 4.3027 * 0.01 / sqrt(3) = [0.0052, 0.0548]
expect_paired a b 0.02 "paired: n 3, mean +0.0300, sd 0.0100, 95% interval [+0.0052, +0.0548]" \
    "verdict: excludes 0, B > A"
# mean 0.002, sd 0.001: [-0.0005, +0.0045], inside X = 0.02; at X = 0.004 it is not
expect_paired a f 0.02 "paired: n 3, mean +0.0020, sd 0.0010, 95% interval [-0.0005, +0.0045]" \
    "verdict: no effect larger than 0.0045 bpb (X = 0.02)"
# mean 0.01, sd 0.02: 34 pairs, the smallest n with t(0.975, n-1) + t(0.8, n-1) <= sqrt(n) * 0.01 / 0.02
expect_paired a e 0.02 "paired: n 3, mean +0.0100, sd 0.0200, 95% interval [-0.0397, +0.0597]" \
    "verdict: inconclusive; 34 seed pairs would resolve +0.0100 (95%, 80% power)"
expect_paired a c 0.02 "  seed 3: A 2.2000  B 3.5000  B - A +1.3000  apart: B never below the plateau level" \
    "paired: n 2, mean +0.0015, sd 0.0007, 95% interval [-0.0049, +0.0079]"
expect_paired a g 0.02 "  seed 3: A 2.2000  B 3.2000  B - A +1.0000  apart: B below the plateau level only from step 100 of 100" \
    "paired: n 2, mean +0.0015, sd 0.0007, 95% interval [-0.0049, +0.0079]"
# masked: nothing apart; mean 0.0233, sd 0.0153, half 4.3027 * 0.0153 / sqrt(3) = 0.0379
expect_paired m n 0.02 "paired: n 3, mean +0.0233, sd 0.0153, 95% interval [-0.0146, +0.0613]"
echo "results_layout: paired gives the hand-worked intervals, verdicts and seeds needed"
