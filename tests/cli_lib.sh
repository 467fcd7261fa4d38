# tests/cli_lib.sh: what the command-line test scripts share (sourced, with
# $T a scratch folder and PASS, FAIL counters set by the script).

# A pseudo-English corpus of about 60 KB from a fixed seed, into $1.
small_corpus() {
    awk 'BEGIN {
        n = split("the of and to a in is it that was he for on are with as his they be at one have this from by word but what some we can out other were all there when up use your how said an each she which do their time", w, " ");
        x = 4242; len = 0;
        while (len < 60000) {
            x = (x * 16807) % 2147483647; k = 3 + x % 10; s = "";
            for (i = 0; i < k; i++) { x = (x * 16807) % 2147483647; s = s (i ? " " : "") w[1 + x % n]; }
            printf "%s.\n", s; len += length(s) + 2;
        }
    }' >"$1"
}

pass() {
    PASS=$((PASS + 1))
    echo "ok   $1"
}
fail() {
    FAIL=$((FAIL + 1))
    echo "FAIL $1: $2"
    if [ -s "$T/err" ]; then sed 's/^/     stderr: /' "$T/err" | head -n 5; fi
}

# expect NAME CODE PHRASE COMMAND ARGS...: the exit code, "error: " and the
# phrase on stderr's first line, at most two lines on stderr, no *.tmp left,
# and nothing written to $T/bad (where a script points outputs that must not
# appear).
expect() {
    name=$1 code=$2 phrase=$3
    shift 3
    "$@" >"$T/out" 2>"$T/err" </dev/null
    rc=$?
    why=""
    first=$(head -n 1 "$T/err")
    if [ "$rc" -ge 128 ]; then why="crashed (exit $rc)"; elif [ "$rc" -ne "$code" ]; then why="exit $rc, want $code"; fi
    case $first in "error: "*"$phrase"*) ;; *) why="${why:+$why; }stderr's first line is not 'error: ...$phrase...'" ;; esac
    if [ "$(wc -l <"$T/err")" -gt 2 ]; then why="${why:+$why; }more than 2 lines on stderr"; fi
    if [ -n "$(find "$T" -name '*.tmp' | head -n 1)" ]; then why="${why:+$why; }left a .tmp file"; fi
    if [ -e "$T/bad" ]; then why="${why:+$why; }wrote outputs"; fi
    if [ -z "$why" ]; then pass "$name"; else fail "$name" "$why"; fi
}
