#!/bin/sh
# tests/cli_records.sh: a run's own record and the outputs around it.
#
#   - A page's state comes from the run's own record (state.json), never from
#     a lock another command holds: ./spectrum and ./extrapolate on a finished
#     run leave its page "done"; every way out of ./train rewrites "running"
#     (a checkpoint that cannot be saved: "failed" with why).
#   - No output path replaces a run's own files or a file that is not a page
#     (./report --out R/model.safetensors, a text file: refused; --force for
#     the latter), and names are checked before the work (not UTF-8, a folder
#     that cannot be written).
#   - metrics.jsonl and results.csv are read a bounded line at a time: a 2 GB
#     line is an error naming the line (the history is never cut at it), and
#     ./report is linear in results.csv's rows.
#   - A number out of a long's range in metrics.jsonl or result.json is never
#     cast (a page shows no negative step).
#   - ./bench caps its threads; every process keeps its command's name; a
#     signal during start-up or in a last phase ends a command with 128 + the
#     signal; ./extrapolate on a checkpoint file writes beside it.
# Each case failed before the change it tests (see the commit that added it).
# shellcheck disable=SC2086
set -u

. "$(dirname "$0")/cli_lib.sh"
cli_begin cli_records ./train ./spectrum ./extrapolate ./report ./ablate ./bench
PY=${PYTHON:-/usr/bin/python3}
RO=""
cleanup() { if [ -n "$RO" ]; then umount "$RO" 2>/dev/null; fi; }

small_corpus "$T/small.txt"
M="--layers 1 --d_model 32 --heads 2 --context 32 --batch 4 --threads 1 --sample_length 20"
./train $M --steps 20 --eval_every 10 --out "$T/R" "$T/small.txt" >/dev/null 2>&1 || fail "train R" "exit $?"

# state NAME PAGE WANT: the page's status object starts with WANT.
state() {
    got=$(grep -o '"status":{[^}]*}' "$2")
    case $got in *"$3"*) pass "$1" ;; *) fail "$1" "status $got, want $3" ;; esac
}

# ------------------------------------------------ the page's state is the run's own
state "the finished run's page says done" "$T/R/index.html" '"state":"done","step":20,"steps":20'
./spectrum "$T/R" "$T/small.txt" --samples 1 >/dev/null 2>&1
state "./spectrum on a finished run: its page still says done" "$T/R/index.html" '"state":"done","step":20'
./extrapolate "$T/R" "$T/small.txt" --lengths 32 >/dev/null 2>&1
state "./extrapolate on a finished run: its page still says done" "$T/R/index.html" '"state":"done","step":20'

# A checkpoint that cannot be saved (a folder where its temporary file goes):
# exit 1, and the page says failed with why, not "running" for ever.
cp -r "$T/R" "$T/F"
rm -f "$T/F/.lock"
mkdir "$T/F/model.safetensors.tmp"
./train --resume "$T/F" --steps 40 --save_every 10 >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" = 1 ]; then pass "a save that fails: exit 1"; else fail "a save that fails: exit 1" "exit $rc"; fi
state "a save that fails: the page says failed" "$T/F/index.html" '"state":"failed"'
rmdir "$T/F/model.safetensors.tmp"
if grep -q '"state":"failed".*"why":"[^"]*cannot create' "$T/F/state.json"; then
    pass "a save that fails: the run's record says why"
else
    fail "a save that fails: the run's record says why" "$(cat "$T/F/state.json")"
fi
# kill -9: the record says running, its process is gone: a page written later says stopped
cp -r "$T/R" "$T/K"
rm -f "$T/K/.lock" "$T/K/index.html"
echo '{"state":"running","step":10,"steps":20,"pid":999999999}' >"$T/K/state.json"
./report "$T/K" --out "$T/k.html" >/dev/null 2>&1
state "a record saying running from a process that is gone: stopped" "$T/K/index.html" '"state":"stopped"'

# ------------------------------------------------ outputs never replace a run's files
cp -r "$T/R" "$T/O"
rm -f "$T/O/.lock"
cp "$T/O/model.safetensors" "$T/ckpt.bak"
expect "report --out the checkpoint" 1 "one of the run's own files" ./report "$T/O" --out "$T/O/model.safetensors"
expect "report --out config.json" 1 "one of the run's own files" ./report "$T/O" --out "$T/O/config.json"
expect "report --out the run's own page" 1 "one of the run's own files" ./report "$T/O" --out "$T/O/index.html"
expect "report --out config.json, even with --force" 1 "one of the run's own files" \
    ./report "$T/O" --out "$T/O/config.json" --force
if cmp -s "$T/O/model.safetensors" "$T/ckpt.bak" && grep -q '"layers"' "$T/O/config.json"; then
    pass "the checkpoint and config.json are untouched"
else
    fail "the checkpoint and config.json are untouched" "changed"
fi
echo "notes" >"$T/notes.txt"
expect "report --out a file that is not a page" 1 "exists and is not a page" ./report "$T/O" --out "$T/notes.txt"
if ./report "$T/O" --out "$T/notes.txt" --force >/dev/null 2>&1 && grep -q '<!DOCTYPE html>' "$T/notes.txt" &&
    ./report "$T/O" --out "$T/notes.txt" >/dev/null 2>&1; then
    pass "report --force replaces it, and a page is replaced without"
else
    fail "report --force replaces it, and a page is replaced without" "exit or no page"
fi
expect "report --out DIR/" 1 "a folder, not a file name" ./report "$T/O" --out "$T/"

# ------------------------------------------------ names checked before the work
bad=$(printf 'p\377')
expect "train --out not UTF-8: refused before training" 2 "not valid UTF-8" ./train $M --steps 20 --out "$T/$bad" "$T/small.txt"
if [ ! -e "$T/$bad" ]; then pass "train --out not UTF-8: no folder made"; else fail "train --out not UTF-8: no folder made" "made"; fi
expect "ablate --out not UTF-8: refused before training" 2 "not valid UTF-8" \
    ./ablate phi=relu/elu --attn linear --steps 3 $M --out "$T/g$bad" "$T/small.txt"
expect "extrapolate --label not UTF-8: refused before scoring" 2 "not valid UTF-8" \
    ./extrapolate "$T/R" "$T/small.txt" --lengths 32 --out "$T/bad" --label "x$bad"
# a run folder already named so (renamed): its plot is drawn, the name's bad bytes as '?'
cp -r "$T/R" "$T/q$bad"
rm -f "$T/q$bad/.lock" "$T/q$bad/loss.png"
if ./train --resume "$T/q$bad" --steps 30 >/dev/null 2>"$T/err" && [ -s "$T/q$bad/loss.png" ] &&
    grep -q '"state":"done","step":30' "$T/q$bad/index.html"; then
    pass "a run named in bytes that are not UTF-8 resumes, plotted, its page done"
else
    fail "a run named in bytes that are not UTF-8 resumes, plotted, its page done" "$(head -n 1 "$T/err")"
fi
# a read-only run folder: the outputs' folder is refused before the work, with --out as the way out
if command -v mount >/dev/null 2>&1 && mkdir "$T/ro" && mount -t tmpfs -o size=8m tmpfs "$T/ro" 2>/dev/null; then
    RO=$T/ro
    cp -r "$T/R" "$T/ro/R" && rm -f "$T/ro/R/.lock"
    if mount -o remount,ro "$T/ro" 2>/dev/null; then
        expect "spectrum on a read-only run folder" 1 "Read-only file system" ./spectrum "$T/ro/R" "$T/small.txt" --samples 1
        if grep -q '^hint: .*--out DIR' "$T/err"; then pass "spectrum on a read-only folder: the hint names --out"; else fail "spectrum on a read-only folder: the hint names --out" "$(cat "$T/err")"; fi
        expect "extrapolate on a read-only run folder" 1 "Read-only file system" ./extrapolate "$T/ro/R" "$T/small.txt" --lengths 32
        if grep -q '^hint: .*--out DIR' "$T/err"; then pass "extrapolate on a read-only folder: the hint names --out"; else fail "extrapolate on a read-only folder: the hint names --out" "$(cat "$T/err")"; fi
    else
        echo "skip: a read-only folder: cannot remount a tmpfs read-only here"
    fi
    umount "$T/ro" && RO=""
else
    echo "skip: a read-only folder: cannot mount a tmpfs here"
fi
# a checkpoint file: the outputs go beside it, not into the current folder
mkdir "$T/ck" "$T/cwd"
cp "$T/R/model.safetensors" "$T/ck/x.safetensors"
HERE=$(pwd)
(cd "$T/cwd" && "$HERE/extrapolate" "$T/ck/x.safetensors" "$T/small.txt" --lengths 32 >/dev/null 2>&1)
if [ -s "$T/ck/extrapolate.csv" ] && [ ! -e "$T/cwd/extrapolate.csv" ]; then
    pass "extrapolate CHECKPOINT_FILE writes beside the checkpoint"
else
    fail "extrapolate CHECKPOINT_FILE writes beside the checkpoint" "$(ls "$T/ck" "$T/cwd" | tr '\n' ' ')"
fi

# ------------------------------------------------ bounded readers
cp -r "$T/R" "$T/S"
rm -f "$T/S/.lock" "$T/S/index.html"
truncate -s 2G "$T/S/metrics.jsonl"
(ulimit -v 3000000; ./train --resume "$T/S" --steps 40 >"$T/out" 2>"$T/err")
rc=$?
if [ "$rc" = 1 ] && grep -q 'metrics.jsonl: line [0-9]*: longer than' "$T/err" &&
    [ "$(wc -c <"$T/S/metrics.jsonl")" = 2147483648 ]; then
    pass "a 2 GB line in metrics.jsonl under ulimit -v: refused naming the line, the file untouched"
else
    fail "a 2 GB line in metrics.jsonl under ulimit -v: refused naming the line, the file untouched" \
        "exit $rc, $(wc -c <"$T/S/metrics.jsonl") bytes"
fi
start=$(date +%s)
(ulimit -v 1500000; ./report "$T/S" --out "$T/s.html" >/dev/null 2>"$T/err")
rc=$?
took=$(($(date +%s) - start))
if [ "$rc" = 0 ] && [ "$took" -le 10 ] && grep -q 'longer than' "$T/S/index.html"; then
    pass "report on a 2 GB metrics.jsonl: ${took} s, under 1.5 GB, the page says which line"
else
    fail "report on a 2 GB metrics.jsonl" "exit $rc after $took s"
fi
if ./train --resume "$T/S" --steps 40 --repair >/dev/null 2>&1 && [ "$(wc -c <"$T/S/metrics.jsonl")" -lt 100000 ] &&
    ls "$T/S"/metrics.jsonl.broken-* >/dev/null 2>&1; then
    pass "--repair keeps the lines before it and the original beside"
else
    fail "--repair keeps the lines before it and the original beside" "no broken copy"
fi

# ./report linear in results.csv's rows: 4 times the rows, at most 8 times the time
rows() {
    mkdir -p "$T/rows$1"
    awk -v n="$1" 'BEGIN { print "run,phi,final_val_bpb,best_val_bpb,diverged_step,den_clamped,tok_s,status,params";
        for (i = 0; i < n; i++) printf "phi=relu%d,relu,,,,,0,failed,21984\n", i }' >"$T/rows$1/results.csv"
}
rows 80000
rows 20000
"$PY" - "$T" <<'EOF' >"$T/timing"
import os, subprocess, sys, time
T = sys.argv[1]
def best(n):
    ts = []
    for _ in range(3):
        try: os.remove(os.path.join(T, "rows%d" % n, "index.html"))
        except FileNotFoundError: pass
        t = time.monotonic()
        subprocess.run(["./report", os.path.join(T, "rows%d" % n), "--out", os.path.join(T, "rows.html")],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        ts.append(time.monotonic() - t)
    return min(ts)
a, b = best(20000), best(80000)
print("%.3f %.3f %.1f" % (a, b, b / a))
EOF
read -r t1 t4 ratio <"$T/timing"
if awk -v r="$ratio" 'BEGIN { exit !(r < 8) }'; then
    pass "report: 4x the rows of results.csv take ${ratio}x the time (${t1} s, ${t4} s)"
else
    fail "report: linear in results.csv's rows" "4x the rows took ${ratio}x the time (${t1} s, ${t4} s)"
fi

# ------------------------------------------------ numbers out of range
cp -r "$T/R" "$T/N"
rm -f "$T/N/.lock" "$T/N/index.html" "$T/N/state.json"
echo '{"step": 1e300, "loss": 1.0}' >>"$T/N/metrics.jsonl"
echo '{"status": "diverged", "step": 1e300, "diverged_step": 1e300}' >"$T/N/result.json"
./report "$T/N" --out "$T/n.html" >/dev/null 2>"$T/err"
if grep -q '"state":"diverged","step":20,' "$T/N/index.html" && grep -q '1 line not read' "$T/N/index.html"; then
    pass "a step of 1e300 in metrics.jsonl and result.json: not cast, the line noted"
else
    fail "a step of 1e300 in metrics.jsonl and result.json" "$(grep -o '"status":{[^}]*}' "$T/N/index.html")"
fi

# ------------------------------------------------ grids with failed runs and garbage results.csv
head -c 50 "$T/small.txt" >"$T/s.txt"
./ablate phi=relu/elu --attn linear --steps 3 $M --out "$T/g" "$T/s.txt" >/dev/null 2>&1
if ./report "$T/g" --out "$T/g.html" >/dev/null 2>&1 && grep -q '"state":"failed","href":null,"val_step":\[\],"val":\[\],"config":{}' "$T/g.html"; then
    pass "report on a grid of failed runs: each run has its (empty) options"
else
    fail "report on a grid of failed runs: each run has its (empty) options" "no config for a failed run"
fi
mkdir -p "$T/dots"
printf 'run,phi,final_val_bpb,status\n..,relu,,done\n.,relu,,done\n' >"$T/dots/results.csv"
if ./report "$T/dots" --out "$T/dots.html" >/dev/null 2>&1 && grep -q 'not a run' "$T/dots/index.html" &&
    ! grep -q '"name":"dots/\.\."' "$T/dots.html"; then
    pass "a results.csv naming .. and .: left out and noted"
else
    fail "a results.csv naming .. and .: left out and noted" "listed"
fi

# ------------------------------------------------ threads, names and signals
if command -v taskset >/dev/null 2>&1; then
    taskset -c 0 ./bench --threads 8 --steps 1 --reps 1 --layers 1 --d_model 32 --heads 2 --context 32 --batch 2 \
        >"$T/out" 2>"$T/err"
    if grep -q '^attnlab bench: 1 thread ' "$T/out" && grep -q 'note: --threads 8: this process may use 1 CPU' "$T/out"; then
        pass "bench --threads 8 on one CPU: 1 thread, said"
    else
        fail "bench --threads 8 on one CPU: 1 thread, said" "$(grep 'attnlab bench' "$T/out")"
    fi
fi
"$PY" - "$T" ./train ./report ./bench <<'EOF' >"$T/signals"
# The name, and signals at start-up and in a last phase. Started with the
# OpenMP variables unset, so that each command restarts itself once
# (experiments/startup.h): the window a signal used to kill it in.
import os, signal, subprocess, sys, time
T, train, report, bench = sys.argv[1:5]
env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "ATTNLAB_SET_ENV")}
M = ["--layers", "1", "--d_model", "32", "--heads", "2", "--context", "32", "--batch", "4", "--threads", "1"]
n = [0]
def start(cmd):
    n[0] += 1
    if cmd == "report":  # its grid's page too, each time
        try: os.remove(os.path.join(T, "rows20000", "index.html"))
        except FileNotFoundError: pass
    out = os.path.join(T, "sig%d" % n[0])
    argv = {"train": [train] + M + ["--steps", "100000", "--out", out, os.path.join(T, "small.txt")],
            "report": [report, os.path.join(T, "rows20000"), "--out", out + ".html"],
            "bench": [bench] + M + ["--steps", "3", "--reps", "1"]}[cmd]
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def caught(pid):
    """Whether pid's SIGINT handler is installed (SigCgt bit 2)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return int(line.split()[1], 16) & 2
    except OSError:
        pass
    return False
def status(rc):
    return "killed by signal %d" % -rc if rc < 0 else "exit %d" % rc
p = start("train")
time.sleep(1.5)
name = open("/proc/%d/comm" % p.pid).read().strip()
p.send_signal(signal.SIGINT)
rc = p.wait()
print(("ok   " if name == "train" else "FAIL ") + "the process is named train (%s)" % name)
# right after the handler is first installed: the restart used to fall in the default action's window
bad = []
for i in range(5):
    p = start("train")
    while not caught(p.pid) and p.poll() is None:
        time.sleep(0.0005)
    p.send_signal(signal.SIGINT if i % 2 == 0 else signal.SIGTERM)
    rc = p.wait()
    want = 130 if i % 2 == 0 else 143
    if rc != want:
        bad.append("%s, want exit %d" % (status(rc), want))
print(("ok   " if not bad else "FAIL ") + "a signal at start-up ends train with 130 / 143 (5 of 5)" + (": " + "; ".join(bad) if bad else ""))
# in the last phase, within the watchdog's grace (0.8 s) of its end: its time
# measured (the least of two), then signalled at 60% of it. On a loaded
# machine a run can be faster than the two measured and end as the signal
# comes, after its last look at it (exit 0 within moments of the signal,
# where one that ignored the signal would run on for the rest of its
# work): such a run is not counted, and the next is signalled earlier (down
# to half the first time), until 3 runs are signalled in their work.
for cmd in ("report", "bench"):
    took = 1e9
    for i in range(2):
        t = time.monotonic()
        start(cmd).wait()
        took = min(took, time.monotonic() - t)
    at = first = max(0.6 * took, took - 0.6)
    bad, counted, early = [], 0, 0
    while counted < 3 and early < 12:
        p = start(cmd)
        time.sleep(at)
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        rc = p.wait()
        after = time.monotonic() - sent
        if rc == 0 and after < max(0.015, 0.15 * took):
            early += 1
            at = max(0.8 * at, 0.5 * first)
            continue
        counted += 1
        if rc != 130:
            bad.append("%s %.3f s after the signal" % (status(rc), after))
    if counted < 3:
        bad.append("only %d runs signalled in their work, %d ended as it came" % (counted, early))
    left = [f for f in os.listdir(T) if f.endswith(".tmp")]
    print(("ok   " if not bad and not left else "FAIL ") + "%s: SIGINT %.2f-%.2f s into its %.2f s: exit 130 (3 of 3; %d ended as it came), no .tmp left"
          % (cmd, at, first, took, early) + (": " + "; ".join(bad) + " " + " ".join(left) if bad or left else ""))
EOF
cat "$T/signals"
PASS=$((PASS + $(grep -c '^ok   ' "$T/signals")))
FAIL=$((FAIL + $(grep -c '^FAIL ' "$T/signals")))
if [ -z "$(find "$T" -name '*.tmp')" ]; then pass "no .tmp file left"; else fail "no .tmp file left" "$(find "$T" -name '*.tmp' | head -n 2)"; fi
cli_end
