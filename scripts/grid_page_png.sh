#!/bin/sh
# A screenshot of a grid's page for the README: the grid GRID kept in results/ (its archived
# runs, tables and summary), its index.html written in a scratch folder by ./report, opened in
# headless chromium (tests/pages_browser.py --screenshot) and saved as OUT.
# usage: sh scripts/grid_page_png.sh results/GRID OUT.png   (make grid-page-png)
set -eu
cd "$(dirname "$0")/.."
grid=${1%/}
out=$2
[ -f "$grid/runs.tar.xz" ] || { echo "error: $grid: no runs.tar.xz" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
name=$(basename "$grid")
mkdir "$tmp/$name"
cp "$grid"/*.csv "$grid"/results.md "$tmp/$name/"
xz -dc "$grid/runs.tar.xz" | tar -x -C "$tmp/$name" -f -
./report "$tmp/$name" --out "$tmp/report.html" >/dev/null
"${PYTHON:-/usr/bin/python3}" tests/pages_browser.py --screenshot "$tmp/$name/index.html" "$tmp/shot.png"
mv "$tmp/shot.png" "$out"
echo "wrote $out"
