# tests/cli_lib.sh: what the command-line test scripts share (sourced).
#
# A script starts with cli_begin, which makes $T (a scratch folder removed on
# exit, with the script's own `cleanup` run first if it defines one) and the
# PASS and FAIL counters, and ends with cli_end, its summary and exit status.

# cli_begin NAME COMMAND...: NAME is the script's (for messages and $T's
# name); every COMMAND must be built.
cli_begin() {
    CLI_NAME=$1
    shift
    for c in "$@"; do
        if [ ! -x "$c" ]; then
            echo "$CLI_NAME.sh: $c is not built; run make first" >&2
            exit 1
        fi
    done
    T=$(mktemp -d "${TMPDIR:-/tmp}/attnlab_$CLI_NAME.XXXXXX") || exit 1
    trap 'if command -v cleanup >/dev/null 2>&1; then cleanup; fi; rm -rf "$T"' EXIT
    trap 'exit 1' INT TERM
    START=$(date +%s)
    PASS=0
    FAIL=0
}

# cli_end: the summary line; the exit status says whether every case passed.
cli_end() {
    echo "$CLI_NAME.sh: $PASS passed, $FAIL failed ($(($(date +%s) - START)) s)"
    [ "$FAIL" -eq 0 ]
}

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
# phrase on stderr's first line, at most two lines on stderr, no *.tmp left
# (but in $LIVE, a folder where a command of the script's own is running,
# whose files come and go through temporary files), and nothing written to
# $T/bad (where a script points outputs that must not appear).
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
    if [ -n "$(find "$T" -path "${LIVE:-$T/.none}" -prune -o -name '*.tmp' -print | head -n 1)" ]; then
        why="${why:+$why; }left a .tmp file"
    fi
    if [ -e "$T/bad" ]; then why="${why:+$why; }wrote outputs"; fi
    if [ -z "$why" ]; then pass "$name"; else fail "$name" "$why"; fi
}

# copy_tree DIR: the tracked sources and build/ (times kept, so that make rebuilds only
# what changed) into DIR, for a test that builds a changed copy of the tree
copy_tree() {
    mkdir -p "$1"
    git ls-files | grep -v '^results/' | tar -cf - -T - | tar -xpf - -C "$1"
    cp -pR build "$1/build"
}
