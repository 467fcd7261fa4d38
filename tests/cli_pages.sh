#!/bin/sh
# tests/cli_pages.sh: the index.html pages of run folders, grids and ./report (docs/pages.md).
#
# Makes tiny runs and a grid, a run folder whose metrics.jsonl is cut short, a grid with a
# failed, a missing and an unfinished run, and a page written without uPlot; checks the
# files here (written whole, uPlot inlined, the note about a missing uPlot said once, bad
# folders refused in one line), then opens every page in headless chromium
# (tests/pages_browser.py: console errors, screenshot pixels, the tables' numbers, a live
# run's reloads). The browser part is skipped, with the reason, only where chromium cannot
# be installed (scripts/deps.sh --browser).
# shellcheck disable=SC2086
set -u

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_pages ./train ./ablate ./spectrum ./report

small_corpus "$T/small.txt"
TINY="--layers 1 --d_model 32 --heads 2 --context 32 --threads 1"
LIB=vendor/uplot/uPlot.iife.min.js

# ---------------------------------------------------------------- run folders
if ./train --steps 60 --eval_every 20 $TINY --out "$T/run" "$T/small.txt" >"$T/out" 2>"$T/err" &&
    [ -s "$T/run/index.html" ] && grep -q '<script id="data" type="application/json">' "$T/run/index.html"; then
    pass "./train writes index.html"
else
    fail "./train writes index.html" "exit or no page"
fi
if [ -f "$LIB" ]; then
    if grep -qF "$(head -c 60 "$LIB")" "$T/run/index.html"; then pass "the page inlines uPlot"; else fail "the page inlines uPlot" "not found in the page"; fi
else
    echo "skip: uPlot is not installed (make uplot): the pages have no charts"
fi
if grep -q '"state":"done","step":60,"steps":60' "$T/run/index.html"; then
    pass "the finished run's page says done"
else
    fail "the finished run's page says done" "$(grep -o '"status":{[^}]*}' "$T/run/index.html")"
fi
# ./spectrum rewrites the page with its chart
if ./spectrum "$T/run" --samples 1 >"$T/out" 2>"$T/err" && grep -q 'page: .*/run/index.html' "$T/out" &&
    grep -q '"spectrum":"layer,head,k' "$T/run/index.html"; then
    pass "./spectrum adds its chart to the run's page"
else
    fail "./spectrum adds its chart to the run's page" "no spectrum data in the page"
fi
./train --steps 60 --eval_every 20 $TINY --d_model 48 --out "$T/run2" "$T/small.txt" >/dev/null 2>&1

# ---------------------------------------------------------------- grids and ./report
if ./ablate phi=relu/elu --seeds 2 --steps 20 --eval_every 10 $TINY --out "$T/grid" "$T/small.txt" >"$T/out" 2>"$T/err" &&
    [ -s "$T/grid/index.html" ] && [ -s "$T/grid/phi-relu_seed-1338/index.html" ] && grep -q "/index.html" "$T/out"; then
    pass "./ablate writes the grid's page and every run's"
else
    fail "./ablate writes the grid's page and every run's" "missing"
fi
if ./report "$T/run" "$T/run2" --out "$T/report.html" >"$T/out" 2>"$T/err" && [ -s "$T/report.html" ] &&
    ./report "$T/run" "$T/grid" --out "$T/report2.html" >/dev/null 2>&1 && grep -q '"grids":\[{"name":"grid"' "$T/report2.html"; then
    pass "./report compares runs, and runs with a grid"
else
    fail "./report compares runs, and runs with a grid" "exit or no page"
fi

# A metrics.jsonl cut short: the page shows the lines before it and says so.
cp -r "$T/run" "$T/cut"
rm -f "$T/cut/index.html" "$T/cut/.lock"
head -c -25 "$T/run/metrics.jsonl" >"$T/cut/metrics.jsonl"
if ./report "$T/cut" --out "$T/cut-report.html" >/dev/null 2>"$T/err" && grep -q 'line not read' "$T/cut/index.html"; then
    pass "a metrics.jsonl cut short: the page says so"
else
    fail "a metrics.jsonl cut short: the page says so" "no note in the page"
fi
# A grid with a failed run, one whose folder is gone and one not finished.
cp -r "$T/grid" "$T/broken"
rm -f "$T/broken/index.html"
rm -r "$T/broken/phi-elu_seed-1338"
sed -i '/^"phi=relu,seed=1338"/s/,done,/,failed,/' "$T/broken/results.csv"
rm "$T/broken/baseline_attn-softmax_seed-1338/result.json"
# its record says running, from a process that is gone (kill -9)
echo '{"state":"running","step":10,"steps":20,"pid":999999999}' >"$T/broken/baseline_attn-softmax_seed-1338/state.json"
head -n 1 "$T/grid/baseline_attn-softmax_seed-1338/metrics.jsonl" >"$T/broken/baseline_attn-softmax_seed-1338/metrics.jsonl"
if ./report "$T/broken" --out "$T/broken-report.html" >/dev/null 2>"$T/err" && grep -q 'no run folder' "$T/broken/index.html" &&
    grep -q 'stopped, step 10 of 20' "$T/broken/index.html"; then
    pass "a grid with failed, missing and unfinished runs: the page says which"
else
    fail "a grid with failed, missing and unfinished runs: the page says which" "no notes in the page"
fi

# Grids a report must draw whatever they hold: every run failed (no run
# folder), a results.csv of garbage, one naming ".." and "."; and a run
# whose checkpoint could not be saved (its page says failed, with why).
head -c 50 "$T/small.txt" >"$T/fifty.txt"
./ablate phi=relu/elu --attn linear --steps 3 $TINY --out "$T/allfailed" "$T/fifty.txt" >/dev/null 2>&1
mkdir -p "$T/garbage-grid" "$T/dots-grid"
head -c 3000 /dev/urandom | tr '\000' x >"$T/garbage-grid/results.csv"
printf 'run,phi,final_val_bpb,status\n..,relu,,done\n.,relu,,done\n' >"$T/dots-grid/results.csv"
if ./report "$T/allfailed" "$T/garbage-grid" "$T/dots-grid" "$T/run" --out "$T/odd-report.html" >/dev/null 2>"$T/err"; then
    pass "report on grids of failed runs and garbage: a page"
else
    fail "report on grids of failed runs and garbage: a page" "exit $?"
fi
cp -r "$T/run" "$T/failed"
rm -f "$T/failed/.lock"
mkdir "$T/failed/model.safetensors.tmp"
./train --resume "$T/failed" --steps 80 --save_every 10 >/dev/null 2>&1
rmdir "$T/failed/model.safetensors.tmp"

# Without uPlot: every page is written, with its tables, and the note is said once.
if ATTNLAB_UPLOT="$T/none" ./ablate phi=relu/elu --no-baseline --steps 20 --eval_every 10 $TINY --out "$T/nolib-grid" \
    "$T/small.txt" >"$T/out" 2>"$T/err" && [ "$(grep -c 'uPlot is not installed' "$T/err")" = 1 ] &&
    [ -s "$T/nolib-grid/index.html" ] && [ -s "$T/nolib-grid/phi-elu/index.html" ]; then
    pass "without uPlot: the pages are written and the note is said once"
else
    fail "without uPlot: the pages are written and the note is said once" "$(grep -c 'uPlot is not installed' "$T/err") notes"
fi
cp -r "$T/nolib-grid/phi-elu" "$T/nolib"

# Bad folders: one line, exit 1, no page.
mkdir -p "$T/empty" "$T/garbage"
echo 'not json' >"$T/garbage/config.json"
expect "report: an empty folder" 1 "$T/empty: not a run folder or grid: no config.json" ./report "$T/empty" --out "$T/bad"
expect "report: no such folder" 1 "not a run folder or grid: no such folder" ./report "$T/nowhere" --out "$T/bad"
expect "report: a file" 1 "not a run folder or grid: a file, not a folder" ./report "$T/small.txt" --out "$T/bad"
expect "report: a config.json that is not one" 1 "not a run folder or grid: its config.json is not a run's config" \
    ./report "$T/run" "$T/garbage" --out "$T/bad"
expect "report: --out in a missing folder" 1 "no such folder" ./report "$T/run" --out "$T/bad/x/report.html"
expect "report: nothing given" 2 "no run folder or grid given" ./report
if [ -z "$(find "$T" -name '*.tmp')" ]; then pass "no .tmp file left"; else fail "no .tmp file left" "$(find "$T" -name '*.tmp' | head -n 2)"; fi

# ---------------------------------------------------------------- in the browser
# a ladder (./ablate --ladder) over two hand-made rungs, 100 and 200 steps, 3 seeds each:
# phi=relu 0.1 and 0.2 below phi=elu, so a claim that holds at both, with a slope, and its
# opposite (a second claim: a chart each)
fake_run() { # GRID POINT SEED STEPS FINAL
    d="$T/$1/$2_seed-$3"
    mkdir -p "$d"
    printf '{\n\t"objective":\t"clm",\n\t"steps":\t%s,\n\t"phi":\t"%s"\n}\n' "$4" "${2#phi-}" >"$d/config.json"
    printf '{"step": 10, "val_bpb": 3.0}\n{"step": %s, "val_bpb": %s}\n' "$4" "$5" >"$d/metrics.jsonl"
    printf '{"status": "done", "step": %s, "val_bpb": %s}\n' "$4" "$5" >"$d/result.json"
}
for s in 1 2 3; do
    fake_run rung0 phi-elu $s 100 2.5$s
    fake_run rung0 phi-relu $s 100 2.4$((s * s))
    fake_run rung1 phi-elu $s 200 2.3$s
    fake_run rung1 phi-relu $s 200 2.1$((s * s))
done
if ./ablate --ladder "$T/rung0" "$T/rung1" --expect "phi=relu < phi=elu" --expect "phi=elu < phi=relu" \
    --out "$T/ladder" >"$T/out" 2>"$T/err" &&
    [ -s "$T/ladder/index.html" ] && [ -s "$T/ladder/ladder.csv" ]; then
    pass "./ablate --ladder writes the ladder's page"
else
    fail "./ablate --ladder writes the ladder's page" "exit or no page: $(head -n 2 "$T/err")"
fi

"${PYTHON:-/usr/bin/python3}" tests/pages_browser.py "$T" ./train "$T/small.txt" >"$T/browser" 2>"$T/browser.err"
rc=$?
cat "$T/browser"
if [ "$rc" = 3 ]; then
    :
elif [ "$rc" -gt 1 ] || ! grep -q '^ok   ' "$T/browser"; then
    fail "the browser tests ran" "exit $rc: $(tail -n 3 "$T/browser.err")"
else
    PASS=$((PASS + $(grep -c '^ok   ' "$T/browser")))
    FAIL=$((FAIL + $(grep -c '^FAIL ' "$T/browser")))
fi
cli_end
