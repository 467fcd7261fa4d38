#!/bin/sh
# Fetches the second corpus, source code instead of English prose: the TypeScript
# compiler's own JavaScript (lib/typescript.js, 9.1 MB, Apache-2.0) from the npm registry
# package typescript, pinned to one version and checked by its tarball's SHA-256, and
# writes it unchanged to data/typescript.txt (`make data` runs this after the Brown corpus).
# EXPERIMENTS.md's second-corpus table reruns the strongest findings on it.
# Nothing is written when the file exists; the text goes to a temporary file renamed at
# the end, so an interrupted run never leaves a half-written corpus.
set -eu

VERSION=5.4.5
SHA256=154fae77169f04155ac52d521ac59abb07c9be29ea3744732adbf9f14abb2440

cd "$(dirname "$0")/.."
out=data/typescript.txt
if [ -e "$out" ]; then
    echo "data: $out already exists ($(wc -c <"$out" | tr -d ' ') bytes)"
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "error: make data: npm not found" >&2
    echo "hint: apt-get install npm" >&2
    exit 1
fi

mkdir -p data
tmp=$(mktemp -d)
part="data/.typescript.txt.$$.tmp"
cleanup() { rm -rf "$tmp" "$part"; }
trap cleanup EXIT
trap 'cleanup; exit 1' HUP INT TERM

echo "data: fetching typescript@$VERSION from the npm registry"
if ! (cd "$tmp" && npm pack --silent "typescript@$VERSION" >/dev/null); then
    echo "error: make data: npm pack typescript@$VERSION failed" >&2
    echo "hint: the npm registry must be reachable (npm config get registry)" >&2
    exit 1
fi
tgz="$tmp/typescript-$VERSION.tgz"
[ -f "$tgz" ] || { echo "error: make data: npm pack typescript@$VERSION produced no tarball" >&2; exit 1; }
got=$(sha256sum "$tgz" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
    echo "error: make data: typescript-$VERSION.tgz: SHA-256 $got, expected $SHA256" >&2
    exit 1
fi
tar xzf "$tgz" -C "$tmp" package/lib/typescript.js
cp "$tmp/package/lib/typescript.js" "$part"
mv "$part" "$out"
echo "data: wrote $out ($(wc -c <"$out" | tr -d ' ') bytes of JavaScript)"
