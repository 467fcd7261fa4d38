#!/bin/sh
# Fetches the second corpus, source code instead of English prose: the TypeScript
# compiler's own JavaScript (lib/typescript.js, 9.1 MB, Apache-2.0) from the npm registry
# package typescript, pinned to one version and checked by its tarball's SHA-256 (npm pack,
# or curl from the registry: scripts/npm_fetch.sh), and writes it unchanged to
# data/typescript.txt (`make data` runs this after the Brown corpus).
# EXPERIMENTS.md's second-corpus table reruns the strongest findings on it.
# Nothing is written when the file exists; the text goes to a temporary file renamed at
# the end, so an interrupted run never leaves a half-written corpus.
set -eu

VERSION=5.4.5
SHA256=154fae77169f04155ac52d521ac59abb07c9be29ea3744732adbf9f14abb2440

cd "$(dirname "$0")/.."
. scripts/npm_fetch.sh
out=data/typescript.txt
if [ -e "$out" ]; then
    echo "data: $out already exists ($(wc -c <"$out" | tr -d ' ') bytes)"
    exit 0
fi
mkdir -p data
tmp=$(mktemp -d)
part="data/.typescript.txt.$$.tmp"
cleanup() { rm -rf "$tmp" "$part"; }
trap cleanup EXIT
trap 'cleanup; exit 1' HUP INT TERM

echo "data: fetching typescript@$VERSION from the npm registry"
npm_fetch "make data" typescript "$VERSION" "$SHA256" "$tmp"
tgz="$tmp/typescript-$VERSION.tgz"
tar xzf "$tgz" -C "$tmp" package/lib/typescript.js
cp "$tmp/package/lib/typescript.js" "$part"
mv "$part" "$out"
echo "data: wrote $out ($(wc -c <"$out" | tr -d ' ') bytes of JavaScript)"
