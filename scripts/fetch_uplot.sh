#!/bin/sh
# Fetches the pages' charting library, uPlot (MIT licence), from the npm registry at a pinned
# version, checks the tarball's SHA-256, and installs its minified script, its style sheet and
# its licence into vendor/uplot/ (`make uplot` runs this; `make` and `make check` too). The
# commands inline those files into every index.html they write (experiments/outputs/page.h).
#
# npm pack fetches the tarball as `make data` fetches the corpus; without npm, curl fetches
# the same file from the registry. Nothing is written when vendor/uplot/ is complete; the
# files go to a temporary folder renamed at the end, so an interrupted fetch leaves nothing.
set -eu

VERSION=1.6.32
SHA256=4b8a8191e425658e3ea8c8c1314b0fc679c861ee3a1af2b20c7b16ba50b5133d

cd "$(dirname "$0")/.."
. scripts/npm_fetch.sh
out=vendor/uplot
if [ -f "$out/uPlot.iife.min.js" ] && [ -f "$out/uPlot.min.css" ]; then
    exit 0
fi

tmp=$(mktemp -d)
part="vendor/.uplot.$$.tmp"
cleanup() { rm -rf "$tmp" "$part"; }
trap cleanup EXIT
trap 'cleanup; exit 1' HUP INT TERM

echo "uplot: fetching uplot@$VERSION from the npm registry"
npm_fetch "make uplot" uplot "$VERSION" "$SHA256" "$tmp"
tar xzf "$tmp/uplot-$VERSION.tgz" -C "$tmp"
mkdir -p "$part"
cp "$tmp/package/dist/uPlot.iife.min.js" "$tmp/package/dist/uPlot.min.css" "$tmp/package/LICENSE" "$part/"
echo "$VERSION" >"$part/VERSION"
rm -rf "$out"
mv "$part" "$out"
echo "uplot: installed uPlot $VERSION into $out"
